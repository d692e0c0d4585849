"""Test-set evaluation as in the paper: log p(x) by IWAE-S, ELBO and KL(q || p), per data point.

The paper (and the authors' code) report test ``log p(x)`` as the IWAE bound with S = 5000 samples
per point, and the KL divergence as ``log p(x) - ELBO`` with the ELBO the mean log weight of the
same samples. The authors evaluate one point at a time; here samples and points are
processed in chunks, streaming a running logsumexp and sum per point, so memory stays bounded.
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch
from torch import Tensor

from tvolib.chunks import sample_chunks
from tvolib.tvo import EvidenceSpec, iwae_bound, log_evidence

__all__ = ["evaluate", "log_weight_metrics"]


@torch.no_grad()
def evaluate(
    model,
    x_test: Tensor,
    *,
    S: int = 5000,
    batch_size: int = 100,
    sample_chunk: int | None = None,
    seed: int | None = None,
    per_point: bool = False,
) -> dict[str, float | Tensor]:
    """``{"log_px", "elbo", "kl", "S", "n_points"}`` averaged over the rows of ``x_test``.

    ``log_px = logsumexp(log w) - log S`` and ``elbo = mean(log w)`` use one set of S samples per
    point, so ``kl = log_px - elbo >= 0`` for every point (Jensen). Points go ``batch_size`` at a
    time to the model's device, samples ``sample_chunk`` at a time (default:
    :func:`tvolib.chunks.sample_chunks`, about 2**20 elements per ``(chunk, batch, data_dim)`` tensor on
    the CPU, 2**24 on CUDA). With ``seed`` the draws come from a forked RNG seeded
    by it (reproducible, and the caller's RNG stream is left untouched). ``per_point=True`` adds
    ``log_px_points`` and ``elbo_points``, float64 CPU tensors of shape ``(N,)``.
    """
    if isinstance(S, bool) or not isinstance(S, int) or S < 1:
        raise ValueError(f"S must be an int >= 1; got {S!r}")
    if not isinstance(x_test, Tensor) or x_test.ndim < 1 or x_test.shape[0] < 1:
        raise ValueError("x_test must be a non-empty tensor of data points (rows)")
    if batch_size < 1 or (sample_chunk is not None and sample_chunk < 1):
        raise ValueError(f"batch_size and sample_chunk must be >= 1; got {batch_size}, {sample_chunk}")
    device = next(model.parameters()).device
    width = math.prod(x_test.shape[1:]) if x_test.ndim > 1 else 1
    chunks = sample_chunks(S, batch_size, width, sample_chunk, device)

    fork = seed is not None
    devices = [device] if device.type == "cuda" else []
    rng = torch.random.fork_rng(devices=devices) if fork else nullcontext()
    log_px_parts: list[Tensor] = []
    elbo_parts: list[Tensor] = []
    with rng:
        if fork:
            torch.manual_seed(seed)
        for xb in x_test.split(batch_size):
            xb = xb.to(device)
            running_lse = torch.full((xb.shape[0],), -math.inf, dtype=torch.float64, device=device)
            running_sum = torch.zeros(xb.shape[0], dtype=torch.float64, device=device)
            for n in chunks:
                log_p, log_q = model.log_joint_and_q(xb, n, reparam=False)
                log_w = (log_p - log_q).to(torch.float64)
                running_lse = torch.logaddexp(running_lse, torch.logsumexp(log_w, dim=0))
                running_sum += log_w.sum(dim=0)
            log_px_parts.append(running_lse - math.log(S))
            elbo_parts.append(running_sum / S)
    log_px_points, elbo_points = torch.cat(log_px_parts).cpu(), torch.cat(elbo_parts).cpu()
    log_px, elbo = log_px_points.mean().item(), elbo_points.mean().item()
    out: dict[str, float | Tensor] = {
        "log_px": log_px, "elbo": elbo, "kl": log_px - elbo, "S": S, "n_points": x_test.shape[0]
    }
    if per_point:
        out.update(log_px_points=log_px_points, elbo_points=elbo_points)
    return out


def log_weight_metrics(log_w: Tensor, evidence_spec: EvidenceSpec | None = None) -> dict[str, Tensor]:
    """Cheap training-curve metrics from a minibatch's log weights ``(S, B)``, as batch *sums*.

    Keys: ``elbo`` (mean log w per point), ``iwae`` (IWAE-S bound) and, with ``evidence_spec``,
    ``evidence`` (:func:`tvolib.tvo.log_evidence`). Each is a 0-d tensor holding the sum over
    the B points, so the trainer can add them over an epoch and divide by N without a device sync.
    """
    log_w = log_w.detach()
    metrics = {"elbo": log_w.mean(dim=0).sum(), "iwae": iwae_bound(log_w).sum()}
    if evidence_spec is not None:
        metrics["evidence"] = log_evidence(log_w, evidence_spec).sum()
    return metrics
