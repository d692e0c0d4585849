"""One training epoch of K stacked runs: the single-run trainer's epoch body, batched over runs.

For each minibatch ``b`` every run ``k`` takes its own examples ``x[k, perm[k, b]]`` and its own
noise (from ``generators[k]``), and the stack takes one step of :class:`~tvolib.stacked.optim.StackedAdam`
on ``sum_k loss_k`` (the runs share no parameters, so each gets its own gradient). The loop never
reads a value back from the device; the per-run training metrics are summed afterwards, minibatch
by minibatch in training order, with the single trainer's operations per run:

    loss * B,  sum_b mean_s log w,  sum_b (logsumexp_s log w - log S),  sum_b L(log w)

(``L`` the log-evidence estimate of each run's ``EvidenceSpec``, :func:`tvolib.tvo.log_evidence`).

Example:
    >>> loss_log, sums = train_epoch(stack, optimiser, "tvo", x, perm, generators, S=10, batch_size=100,
    ...                              points=left_points(betas), specs=[EvidenceSpec.paper()] * K)  # doctest: +SKIP
    >>> means = sums / x.shape[1]  # (K, 5): loss, 0, ELBO, IWAE-S, evidence  # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from tvolib.precision import autocast_scope, matmul_scope, precision_scope
from tvolib.stacked.models import StackedModel
from tvolib.stacked.objectives import LeftPoints, StackedLossOutput, stacked_loss
from tvolib.stacked.optim import StackedAdam
from tvolib.tvo import EvidenceSpec, log_evidence

__all__ = ["evidence_sums", "initial_evidence", "train_epoch"]


def evidence_sums(log_w: Tensor, specs: Sequence[EvidenceSpec], finite: Sequence[bool] | None = None) -> Tensor:
    """``log_evidence(log_w[k], specs[k]).sum()`` per run, float64 ``(K,)``, one call per distinct spec.

    ``log_w`` is ``(K, S, B)``; runs whose ``finite`` entry is False (a diverged run's NaN weights,
    which ``log_evidence`` refuses) get 0, so that they do not stop the others.
    """
    K, S, B = log_w.shape
    out = torch.zeros(K, dtype=torch.float64, device=log_w.device)
    for spec in dict.fromkeys(specs):
        idx = [k for k in range(K) if specs[k] == spec and (finite is None or finite[k])]
        if idx:
            part = log_w[idx].transpose(0, 1).reshape(S, len(idx) * B)
            out[idx] = log_evidence(part, spec).view(len(idx), B).double().sum(dim=1)
    return out


def _epoch_sums(outputs: list[StackedLossOutput], specs: Sequence[EvidenceSpec], finite: Sequence[bool]) -> Tensor:
    """Per run, float64 ``(K, 5)``: sums of loss, a second loss (0: the stacked objectives have one),
    ELBO, IWAE-S and evidence over the epoch's points, added minibatch by minibatch."""
    K, S = outputs[0].log_w.shape[:2]
    sums = torch.zeros(K, 5, dtype=torch.float64, device=outputs[0].log_w.device)
    with torch.no_grad():
        for out in outputs:
            log_w, bsz = out.log_w, out.log_w.shape[2]
            sums += torch.stack([
                out.loss.double() * bsz, sums.new_zeros(K), log_w.mean(1).double().sum(1),
                (torch.logsumexp(log_w, 1) - math.log(S)).double().sum(1), evidence_sums(log_w, specs, finite),
            ], dim=1)
    return sums


def train_epoch(model: StackedModel, optimiser: StackedAdam, objective: str, x: Tensor, perm: Tensor,
                generators: Sequence[torch.Generator], *, S: int, batch_size: int, points: LeftPoints | None,
                specs: Sequence[EvidenceSpec], precision: str = "fp32") -> tuple[Tensor, Tensor]:
    """Train every run of ``model`` for one epoch; return its minibatch losses and metric sums.

    Args:
        model, optimiser: the stack and its optimiser (updated in place).
        objective: one of :data:`~tvolib.stacked.objectives.STACKED_OBJECTIVES`.
        x: the runs' training sets for this epoch ``(K, N, D)`` (any dtype; cast to float32).
        perm: the runs' example orders ``(K, N)`` on the model's device.
        generators: run ``k``'s Monte-Carlo noise stream.
        S, batch_size: samples per point and examples per minibatch (the last one may be smaller).
        points: the runs' left points (:func:`~tvolib.stacked.objectives.left_points`) for the TVO objectives.
        specs: each run's evidence estimate.
        precision: the runs' training arithmetic (:mod:`tvolib.precision`): TF32 matmuls over the
            epoch for ``tf32`` (CUDA), bf16 autocast of each forward pass and loss for ``bf16``.

    Returns:
        ``loss_log`` ``(minibatches, K, 2)`` (the loss in column 0, for the divergence check) and
        the float64 sums ``(K, 5)`` of :func:`_epoch_sums` (divide by ``N`` for the means).
    """
    K, n = perm.shape
    dev = perm.device
    n_batches = math.ceil(n / batch_size)
    loss_log = torch.zeros(n_batches, K, 2, device=dev)
    rows = torch.arange(K, device=dev)[:, None]
    outputs = []
    with matmul_scope(precision, dev):
        for b in range(n_batches):  # no host synchronisation in here
            xb = x[rows, perm[:, b * batch_size:(b + 1) * batch_size]].to(torch.float32)
            noise = model.draw_noise(generators, S, xb.shape[1])
            with autocast_scope(precision, dev):
                out = stacked_loss(objective, model, xb, S, noise, points)
            loss_log[b, :, 0] = out.loss.detach()
            out.loss.sum().backward()
            optimiser.step()
            optimiser.zero_grad()
            outputs.append(out._replace(loss=out.loss.detach()))
    finite = torch.isfinite(loss_log).all(dim=2).all(dim=0).tolist()
    return loss_log, _epoch_sums(outputs, specs, finite)


@torch.no_grad()
def initial_evidence(model: StackedModel, x: Tensor, generators: Sequence[torch.Generator], *, S: int,
                     batch_size: int, specs: Sequence[EvidenceSpec], precision: str = "fp32") -> list[float]:
    """Each run's mean evidence estimate ``L`` over its points ``x[k]`` ``(K, N, D)``, without training.

    Minibatches of ``batch_size`` points, ``S`` samples from ``generators[k]``; the sum is added up
    in float64 minibatch by minibatch and divided by ``N`` (the single trainer's ``L_0``), in the
    runs' ``precision``.
    """
    total = torch.zeros(model.K, dtype=torch.float64, device=model.device)
    for xb in x.split(batch_size, dim=1):
        xb = xb.to(torch.float32)
        noise = model.draw_noise(generators, S, xb.shape[1])
        with precision_scope(precision, model.device):
            log_p, log_q = model.log_joint_and_q(xb, S, False, noise)
        total += evidence_sums(log_p - log_q, specs)
    return [value / x.shape[1] for value in total.tolist()]
