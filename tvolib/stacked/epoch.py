"""One training epoch of K stacked runs: the single-run trainer's epoch body, batched over runs.

For each minibatch ``b`` every run ``k`` takes its own examples ``x[k, perm[k, b]]`` and its own
noise (from ``generators[k]``), and the stack takes one step of :class:`~tvolib.stacked.optim.StackedAdam`
on ``sum_k loss_k`` (the runs share no parameters, so each gets its own gradient). The loop never
reads a value back from the device; the per-run training metrics are summed afterwards, minibatch
by minibatch in training order, with the single trainer's operations per run (the weights are
checked once for the whole epoch, so that the sums read nothing back minibatch by minibatch either):

    loss * B,  sum_b mean_s log w,  sum_b (logsumexp_s log w - log S),  sum_b L(log w)

(``L`` the log-evidence estimate of each run's ``EvidenceSpec``, :func:`tvolib.tvo.log_evidence`).

Example:
    >>> loss_log, sums = train_epoch(stack, optimiser, "tvo", x, perm, generators, S=10, batch_size=100,
    ...                              points=left_points(betas), specs=[EvidenceSpec.paper()] * K)  # doctest: +SKIP
    >>> means = sums / x.shape[1]  # (K, 5): loss, 0, ELBO, IWAE-S, evidence  # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from tvolib.precision import autocast_scope, matmul_scope, precision_scope
from tvolib.checks import check_log_w
from tvolib.stacked.models import StackedModel, host_to_device
from tvolib.stacked.objectives import LeftPoints, StackedLossOutput, stacked_loss
from tvolib.stacked.optim import StackedAdam
from tvolib.tvo import EvidenceSpec, log_evidence

__all__ = ["LossFn", "compiled_loss", "evidence_sums", "initial_evidence", "minibatch_steps", "train_epoch"]

#: ``stacked_loss``'s signature: ``(objective, model, x, S, noise, points) -> StackedLossOutput``.
LossFn = Callable[..., StackedLossOutput]


def compiled_loss() -> LossFn:
    """``torch.compile`` of :func:`~tvolib.stacked.objectives.stacked_loss` (the stacked forward pass
    and loss, fused by Inductor; its backward compiled with it), for :func:`minibatch_steps`.

    Static shapes (``dynamic=False``): a stack compiles once for its full minibatches and once more
    for a smaller last minibatch (a second graph; neither padded nor dropped), and again only when
    its runs change (a run finished or diverged: a new stacked model). The Monte-Carlo noise stays
    an input drawn outside the compiled function, so the runs keep their own streams and a
    compiled run's numbers equal the eager run's to float32 rounding (the fused kernels round
    differently), not bit for bit.
    """
    return torch.compile(stacked_loss, dynamic=False)


class _Evidence:
    """The evidence sums of K runs, prepared once: per distinct spec its runs, their index on the
    device and the spec's quadrature on the device, so that a minibatch's sums copy nothing from
    the host (:meth:`sums` reads nothing back either when told where the weights hold ``-inf``)."""

    def __init__(self, specs: Sequence[EvidenceSpec], keep: Sequence[bool] | None, dtype: torch.dtype,
                 device: torch.device) -> None:
        K = len(specs)
        self.K, self.groups = K, []
        for spec in dict.fromkeys(specs):
            idx = [k for k in range(K) if specs[k] == spec and (keep is None or keep[k])]
            if idx:
                index = None if idx == list(range(K)) else host_to_device(torch.tensor(idx), device)
                self.groups.append((spec, idx, index, spec.quadrature(dtype, device)))

    def sums(self, log_w: Tensor, zero_weights: Sequence[bool] | None = None) -> Tensor:
        """``log_evidence(log_w[k], specs[k]).sum()`` per run, float64 ``(K,)`` (0 for runs left out).

        ``zero_weights[k]``: whether run ``k``'s ``log_w`` (checked by the caller) holds a ``-inf``;
        ``None``: each spec's weights are checked by :func:`~tvolib.tvo.log_evidence` (reads back).
        """
        K, S, B = log_w.shape
        out = torch.zeros(K, dtype=torch.float64, device=log_w.device)
        for spec, idx, index, quadrature in self.groups:
            part = (log_w if index is None else log_w.index_select(0, index)).transpose(0, 1).reshape(S, len(idx) * B)
            zero = None if zero_weights is None else any(zero_weights[k] for k in idx)
            values = log_evidence(part, spec, zero_weights=zero, quadrature=quadrature).view(len(idx), B)
            values = values.double().sum(dim=1)
            out = values if index is None else out.index_copy_(0, index, values)
        return out


def evidence_sums(log_w: Tensor, specs: Sequence[EvidenceSpec], finite: Sequence[bool] | None = None) -> Tensor:
    """``log_evidence(log_w[k], specs[k]).sum()`` per run, float64 ``(K,)``, one call per distinct spec.

    ``log_w`` is ``(K, S, B)``; runs whose ``finite`` entry is False (a diverged run's NaN weights,
    which ``log_evidence`` refuses) get 0, so that they do not stop the others.
    """
    return _Evidence(specs, finite, log_w.dtype, log_w.device).sums(log_w)


def _weight_flags(outputs: list[StackedLossOutput], loss_log: Tensor) -> tuple[list[bool], list[list[list[bool]]]]:
    """The epoch's one read from the device: per run whether all its losses were finite, and per
    minibatch and run whether its ``log w`` holds NaN or +inf (``[b][0][k]``) or ``-inf`` (``[b][1][k]``)."""
    finite = torch.isfinite(loss_log).all(dim=2).all(dim=0)
    flags = torch.stack([torch.stack([(torch.isnan(o.log_w) | torch.isposinf(o.log_w)).flatten(1).any(dim=1),
                                      torch.isneginf(o.log_w).flatten(1).any(dim=1)]) for o in outputs])
    packed = torch.cat([finite[None], flags.flatten(0, 1)]).tolist()  # one transfer
    return packed[0], [packed[1 + 2 * b:3 + 2 * b] for b in range(len(outputs))]


def _epoch_sums(outputs: list[StackedLossOutput], specs: Sequence[EvidenceSpec], loss_log: Tensor) -> Tensor:
    """Per run, float64 ``(K, 5)``: sums of loss, a second loss (0: the stacked objectives have one),
    ELBO, IWAE-S and evidence over the epoch's points, added minibatch by minibatch.

    A run whose losses were not all finite (diverged) gets no evidence; the weights are checked
    once for the epoch (:func:`_weight_flags`), so the sums read nothing back minibatch by minibatch.
    """
    K, S = outputs[0].log_w.shape[:2]
    finite, flags = _weight_flags(outputs, loss_log)
    for b, (bad, _) in enumerate(flags):
        for k in range(K):
            if finite[k] and bad[k]:  # as log_evidence refuses them (the message of check_log_w)
                check_log_w(outputs[b].log_w[k])
    evidence = _Evidence(specs, finite, outputs[0].log_w.dtype, outputs[0].log_w.device)
    sums = torch.zeros(K, 5, dtype=torch.float64, device=outputs[0].log_w.device)
    with torch.no_grad():
        for out, (_, zero) in zip(outputs, flags):
            log_w, bsz = out.log_w, out.log_w.shape[2]
            sums += torch.stack([
                out.loss.double() * bsz, sums.new_zeros(K), log_w.mean(1).double().sum(1),
                (torch.logsumexp(log_w, 1) - math.log(S)).double().sum(1), evidence.sums(log_w, zero),
            ], dim=1)
    return sums


def train_epoch(model: StackedModel, optimiser: StackedAdam, objective: str, x: Tensor, perm: Tensor,
                generators: Sequence[torch.Generator], *, S: int, batch_size: int, points: LeftPoints | None,
                specs: Sequence[EvidenceSpec], precision: str = "fp32", loss_fn: LossFn = stacked_loss
                ) -> tuple[Tensor, Tensor]:
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
        loss_fn: :func:`~tvolib.stacked.objectives.stacked_loss` or its :func:`compiled_loss`.

    Returns:
        ``loss_log`` ``(minibatches, K, 2)`` (the loss in column 0, for the divergence check) and
        the float64 sums ``(K, 5)`` of :func:`_epoch_sums` (divide by ``N`` for the means).
    """
    loss_log, outputs = minibatch_steps(model, optimiser, objective, x, perm, generators, S=S, batch_size=batch_size,
                                        points=points, precision=precision, loss_fn=loss_fn)
    return loss_log, _epoch_sums(outputs, specs, loss_log)


def minibatch_steps(model: StackedModel, optimiser: StackedAdam, objective: str, x: Tensor, perm: Tensor,
                    generators: Sequence[torch.Generator], *, S: int, batch_size: int, points: LeftPoints | None,
                    precision: str = "fp32", loss_fn: LossFn = stacked_loss
                    ) -> tuple[Tensor, list[StackedLossOutput]]:
    """The minibatch steps of :func:`train_epoch` (arguments as there): ``loss_log`` and each step's
    :class:`~tvolib.stacked.objectives.StackedLossOutput` (detached), all still on the device.

    Nothing is read back from the device and nothing is copied from pageable host memory in here
    (on CUDA the tests run it under ``torch.cuda.set_sync_debug_mode("error")``): the metrics and the
    divergence check read the results once, after the epoch.
    """
    K, n = perm.shape
    dev = perm.device
    n_batches = math.ceil(n / batch_size)
    loss_log = torch.zeros(n_batches, K, 2, device=dev)
    rows = torch.arange(K, device=dev)[:, None]
    outputs = []
    with matmul_scope(precision, dev):
        for b in range(n_batches):
            xb = x[rows, perm[:, b * batch_size:(b + 1) * batch_size]].to(torch.float32)
            noise = model.draw_noise(generators, S, xb.shape[1])
            with autocast_scope(precision, dev):
                out = loss_fn(objective, model, xb, S, noise, points)
            loss_log[b, :, 0] = out.loss.detach()
            out.loss.sum().backward()
            optimiser.step()
            optimiser.zero_grad()
            outputs.append(out._replace(loss=out.loss.detach()))
    return loss_log, outputs


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
