"""Test-set evaluation of every run of a stack: IWAE log p(x), ELBO and KL, as :func:`tvolib.evaluate.evaluate`.

Per run ``k`` and test point ``x`` with ``S`` samples ``z_s ~ q_k(z | x)`` and
``log w_s = log p_k(x, z_s) - log q_k(z_s | x)``::

    log p(x) ~ logsumexp_s(log w_s) - log S     (IWAE bound, Burda et al. 2016)
    ELBO(x)  ~ mean_s(log w_s)                   (Eq. 1, from the same samples)
    KL(q || p) ~ log p(x) - ELBO(x) >= 0

Run ``k`` draws its samples from its own generator seeded with ``seeds[k]``, chunk by chunk in the
order :func:`tvolib.evaluate.evaluate` draws them from the global RNG after
``torch.manual_seed(seed)``: the same samples, so its numbers equal, to float32 rounding (batched
kernels), those of the single model evaluated with
``evaluate(model_k, x, S=S, batch_size=..., sample_chunk=..., seed=seeds[k])``.
Memory is bounded by chunking over test points (``batch_size``), samples (``sample_chunk``) and,
since those two must stay the single evaluation's to draw the same samples, over runs.

Example:
    >>> from tvolib.models import build_model
    >>> from tvolib.stacked import StackedModel
    >>> runs = []
    >>> for seed in (1, 2):
    ...     _ = torch.manual_seed(seed); runs.append(build_model("vae"))
    >>> x = torch.rand(20, 784).round()
    >>> out = evaluate_stack(StackedModel(runs), x, seeds=[11, 12], S=16)
    >>> [sorted(o) for o in out][0]
    ['S', 'elbo', 'kl', 'log_px', 'n_points']
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from tvolib.chunks import sample_chunks
from tvolib.stacked.models import StackedModel

__all__ = ["EVAL_BYTES_PER_ELEMENT", "EVAL_MEMORY_SHARE", "evaluate_stack", "max_elements_for"]

#: :func:`evaluate_stack`'s default bound on the elements of one ``(runs, samples, points, D)`` tensor.
DEFAULT_MAX_ELEMENTS = 2**26
#: Device bytes a group's forward pass holds at its peak per element of its ``(runs, samples,
#: points, D)`` tensor: the float32 logits, their Bernoulli log-likelihood and two temporaries
#: (an estimate; the runner retries with smaller groups if it is short).
EVAL_BYTES_PER_ELEMENT = 16
#: Share of the free device memory a stacked evaluation may plan to use.
EVAL_MEMORY_SHARE = 0.5


def max_elements_for(device: torch.device | str) -> int:
    """``max_elements`` for a stack evaluated on ``device``: on CUDA, :data:`EVAL_MEMORY_SHARE` of the
    free memory over :data:`EVAL_BYTES_PER_ELEMENT` (so that a stack's runs go through one batched
    pass), at least :data:`DEFAULT_MAX_ELEMENTS`; elsewhere that default (the CPU gains nothing
    from larger groups, and the numbers do not depend on the grouping)."""
    device = torch.device(device)
    if device.type != "cuda":
        return DEFAULT_MAX_ELEMENTS
    free, _ = torch.cuda.mem_get_info(device)
    return max(DEFAULT_MAX_ELEMENTS, int(EVAL_MEMORY_SHARE * free / EVAL_BYTES_PER_ELEMENT))


def _check(stack: StackedModel, x_test: Tensor, seeds: Sequence[int], S: int, batch_size: int,
           sample_chunk: int | None, max_elements: int) -> Tensor:
    """Validate the arguments; return ``x_test`` as ``(K, N, D)`` (a shared test set is expanded)."""
    for name, value in (("S", S), ("batch_size", batch_size), ("max_elements", max_elements)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    if sample_chunk is not None and (isinstance(sample_chunk, bool) or not isinstance(sample_chunk, int)
                                     or sample_chunk < 1):
        raise ValueError(f"sample_chunk must be None or an int >= 1; got {sample_chunk!r}")
    if len(seeds) != stack.K or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must hold one int per run ({stack.K}); got {list(seeds)!r:.200}")
    D = stack.template.data_dim
    if not isinstance(x_test, Tensor) or x_test.ndim not in (2, 3) or x_test.shape[-1] != D \
            or x_test.shape[-2] < 1 or (x_test.ndim == 3 and x_test.shape[0] != stack.K):
        shape = tuple(x_test.shape) if isinstance(x_test, Tensor) else type(x_test).__name__
        raise ValueError(f"x_test must be (N, {D}) shared by the runs or (K={stack.K}, N, {D}) with N >= 1; "
                         f"got {shape}")
    return x_test if x_test.ndim == 3 else x_test.expand(stack.K, *x_test.shape)


@torch.no_grad()
def _evaluate_group(stack: StackedModel, x: Tensor, generators: list[torch.Generator], chunks: list[int],
                    batch_size: int) -> tuple[Tensor, Tensor]:
    """Per-point ``(log p(x), ELBO)`` of every run of ``stack``: two float64 CPU tensors ``(K, N)``."""
    device, S = stack.device, sum(chunks)
    log_px_parts, elbo_parts = [], []
    for xb in x.split(batch_size, dim=1):
        xb = xb.to(device)
        running_lse = torch.full(xb.shape[:2], -math.inf, dtype=torch.float64, device=device)
        running_sum = torch.zeros(xb.shape[:2], dtype=torch.float64, device=device)
        for n in chunks:
            noise = stack.draw_noise(generators, n, xb.shape[1])
            log_p, log_q = stack.log_joint_and_q(xb, n, False, noise)
            log_w = (log_p - log_q).to(torch.float64)  # (K, n, B)
            running_lse = torch.logaddexp(running_lse, torch.logsumexp(log_w, dim=1))
            running_sum += log_w.sum(dim=1)
        log_px_parts.append(running_lse - math.log(S))
        elbo_parts.append(running_sum / S)
    return torch.cat(log_px_parts, dim=1).cpu(), torch.cat(elbo_parts, dim=1).cpu()


def evaluate_stack(
    stack: StackedModel,
    x_test: Tensor,
    *,
    seeds: Sequence[int],
    S: int = 5000,
    batch_size: int = 100,
    sample_chunk: int | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    per_point: bool = False,
) -> list[dict[str, float | Tensor]]:
    """:func:`tvolib.evaluate.evaluate` for every run of ``stack``: one result dict per run.

    Args:
        stack: the runs' :class:`~tvolib.stacked.models.StackedModel`.
        x_test: test points ``(N, D)`` shared by the runs, or ``(K, N, D)`` one set per run.
        seeds: run ``k``'s draws come from a generator seeded with ``seeds[k]`` (the single
            evaluation's ``seed``; the global RNG is not touched).
        S: importance samples per point (the paper: 5000).
        batch_size, sample_chunk: the single evaluation's chunking (they fix how the samples are
            drawn; ``sample_chunk=None``: :func:`tvolib.chunks.sample_chunks`'s default).
        max_elements: bound on the elements of one ``(runs, samples, points, D)`` tensor; runs are
            evaluated in groups of ``max(1, max_elements // (sample_chunk * batch_size * D))``.
        per_point: add ``log_px_points`` and ``elbo_points`` (float64 CPU ``(N,)``) to each dict.

    Returns:
        ``[{"log_px", "elbo", "kl", "S", "n_points"}, ...]`` in run order, each the mean over
        the test points; ``kl = log_px - elbo``.
    """
    x = _check(stack, x_test, seeds, S, batch_size, sample_chunk, max_elements)
    D = stack.template.data_dim
    chunks = sample_chunks(S, batch_size, D, sample_chunk, stack.device)
    group = max(1, max_elements // (chunks[0] * min(batch_size, x.shape[1]) * D))
    results: list[dict[str, float | Tensor]] = []
    for first in range(0, stack.K, group):
        runs = list(range(first, min(first + group, stack.K)))
        sub = stack if len(runs) == stack.K else stack.select(runs)
        gens = [torch.Generator(device=stack.device).manual_seed(seeds[k]) for k in runs]
        log_px_points, elbo_points = _evaluate_group(sub, x[runs[0]:runs[-1] + 1], gens, chunks, batch_size)
        for i in range(len(runs)):
            log_px, elbo = log_px_points[i].mean().item(), elbo_points[i].mean().item()
            out: dict[str, float | Tensor] = {
                "log_px": log_px, "elbo": elbo, "kl": log_px - elbo, "S": S, "n_points": x.shape[1],
            }
            if per_point:
                out.update(log_px_points=log_px_points[i].clone(), elbo_points=elbo_points[i].clone())
            results.append(out)
    return results
