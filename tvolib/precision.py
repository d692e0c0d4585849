"""Training arithmetic as a run setting: ``"fp32"`` (the default), ``"tf32"`` or ``"bf16"``.

:func:`matmul_scope` (around a training epoch) and :func:`autocast_scope` (around each forward
pass and loss) are the one place that turns a run's ``precision`` into torch settings; both
restore what they change on exit (torch's TF32 switches are process-wide, so a scope keeps them
from leaking into other runs or into evaluation). :func:`precision_scope` is the two together.

- ``fp32``: plain float32. On CUDA the scope also turns TF32 off for its duration, so an fp32
  run is fp32 whatever the process set before.
- ``tf32``: TF32 tensor-core matmuls on CUDA (``torch.backends.cuda.matmul.allow_tf32`` and
  ``torch.backends.cudnn.allow_tf32``, 10-bit mantissa inputs, float32 accumulation). On the
  CPU it changes nothing: a ``tf32`` run there computes exactly what an ``fp32`` run computes.
- ``bf16``: the forward pass under ``torch.autocast(device.type, dtype=torch.bfloat16)`` (CPU and
  CUDA): the networks' matmuls and activations in bfloat16. The models cast their networks'
  outputs to float32 before any density is computed (Normal and Bernoulli log-probabilities,
  their sums over pixels and latents), and the losses' log-sum-exp and SNIS softmax read those
  float32 log weights; parameters, gradients and Adam's state stay float32. On CUDA TF32 is off
  in the scope (what autocast leaves in float32 stays IEEE float32).

Evaluation (test log p(x), ELBO, KL) always runs in an ``fp32`` scope, whatever the run's setting.

Example:
    >>> with precision_scope("bf16", "cpu"):
    ...     torch.ones(2, 3) @ torch.ones(3, 2)
    tensor([[3., 3.],
            [3., 3.]], dtype=torch.bfloat16)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["PRECISIONS", "autocast_scope", "check_precision", "matmul_scope", "precision_scope"]

#: Accepted values of ``RunConfig.precision`` (``fp32`` first: the default).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16")


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a ``ValueError`` naming them."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}; got {precision!r}")
    return precision


@contextmanager
def matmul_scope(precision: str, device: str | torch.device) -> Iterator[None]:
    """TF32 matmuls on CUDA for ``tf32``, IEEE float32 for the others (restored on exit); nothing on the CPU.

    Enter it around a whole training epoch (forward, backward, optimiser): the backward pass's
    matmuls then use the forward's setting.
    """
    check_precision(precision)
    if torch.device(device).type != "cuda":
        yield
        return
    allow = precision == "tf32"
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn


@contextmanager
def autocast_scope(precision: str, device: str | torch.device) -> Iterator[None]:
    """``torch.autocast(device.type, dtype=torch.bfloat16)`` for ``bf16``, nothing otherwise.

    Enter it around the forward pass and the loss only (backward passes run outside autocast and
    reuse the forward's dtypes).
    """
    check_precision(precision)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        yield


@contextmanager
def precision_scope(precision: str, device: str | torch.device) -> Iterator[None]:
    """Both scopes: ``precision``'s matmuls and autocast on ``device`` (for forward-only work;
    ``precision_scope("fp32", device)`` is how evaluation makes sure it runs in float32)."""
    with matmul_scope(precision, device), autocast_scope(precision, device):
        yield
