"""How many importance samples a test-set evaluation draws at a time (single and stacked runs share it).

The samples of one ``(chunk, batch, data_dim)`` step are drawn, pushed through the model and reduced
before the next chunk, so the chunk bounds memory; it also decides which random numbers a sample
gets, so the single evaluation (:func:`tvolib.training.evaluate.evaluate`) and the stacked one
(:func:`tvolib.stacked.evaluate.evaluate_stack`) must chunk alike to draw the same samples.

The automatic chunk holds about :func:`auto_elements` elements: 2**24 on CUDA (few large kernels),
2**20 elsewhere. Measured on a 2-core CPU (one thread, VAE, 300 points, S = 300;
``benchmarks/bench_bernoulli.py``): 1.1 s with 2**24-element chunks (67 MB per tensor, past every
cache), 0.6 s with 2**20.
"""
from __future__ import annotations

import torch

__all__ = ["auto_elements", "sample_chunks"]

#: Elements of one automatic ``(chunk, batch, data_dim)`` tensor, by device type; other types: ``"cpu"``.
AUTO_ELEMENTS: dict[str, int] = {"cuda": 2**24, "cpu": 2**20}


def auto_elements(device: torch.device | str) -> int:
    """The automatic chunk's target size on ``device`` (:data:`AUTO_ELEMENTS`)."""
    return AUTO_ELEMENTS.get(torch.device(device).type, AUTO_ELEMENTS["cpu"])


def sample_chunks(S: int, batch_size: int, width: int, sample_chunk: int | None = None,
                  device: torch.device | str = "cpu") -> list[int]:
    """The chunk sizes ``[c, c, ..., S mod c]`` in which ``S`` samples per point are drawn.

    ``c = sample_chunk``, or by default ``min(S, auto_elements(device) // (batch_size * width))``,
    at least 1.

    Args:
        S: samples per point.
        batch_size: points per step.
        width: elements per point and sample (the data dimension).
        sample_chunk: a fixed chunk, or ``None`` for the automatic one.
        device: where the evaluation runs (picks the automatic chunk).

    Returns:
        Positive chunk sizes summing to ``S``.

    Example:
        >>> sample_chunks(300, 100, 784)
        [13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 1]
        >>> sample_chunks(300, 100, 784, device="cuda")
        [213, 87]
    """
    if sample_chunk is None:
        sample_chunk = max(1, min(S, auto_elements(device) // (batch_size * width)))
    return [sample_chunk] * (S // sample_chunk) + ([S % sample_chunk] if S % sample_chunk else [])
