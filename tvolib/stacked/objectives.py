"""Training losses of :mod:`tvolib.objectives`, batched over a stack of K runs.

Notation as in :mod:`tvolib.tvo`, with a leading run dimension: ``log w`` is ``(K, S, B)``.
Every function here computes, for each run ``k``, the operations of its single-run counterpart
on ``log_w[k]`` (batched kernels, whose reduction order may differ: the tests compare them to
float32 rounding), so a stack is K independent runs: run ``k``'s loss depends only on run ``k``'s
inputs. The per-run losses are returned as a ``(K,)`` tensor; since the runs share no parameters,
``loss.sum().backward()`` gives every run its own gradient.

Schedules may differ between the runs of a stack, in their points and in their length: the TVO's
left points are a ``(K, d)`` tensor (:func:`left_points`), built once per epoch from the runs'
schedules, a shorter schedule padded with intervals of width zero.

Example:
    >>> pts = left_points([[0.0, 0.1, 0.5], [0.0, 0.3, 0.6]])      # two runs, d = 3
    >>> log_p, log_q = torch.randn(2, 10, 4), torch.randn(2, 10, 4)  # (K, S, B)
    >>> stacked_tvo_surrogate(log_p, log_q, pts).shape               # (K, B)
    torch.Size([2, 4])
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import torch
from torch import Tensor

from tvolib.stacked.models import StackedModel
from tvolib.tvo import riemann_weights

__all__ = [
    "STACKED_OBJECTIVES",
    "LeftPoints",
    "StackedLossOutput",
    "left_points",
    "stacked_covariance_surrogate",
    "stacked_iwae_bound",
    "stacked_loss",
    "stacked_tvo_surrogate",
]

#: Objectives :func:`stacked_loss` implements (the wake-sleep family needs two losses per run: not yet).
STACKED_OBJECTIVES = ("elbo", "iwae", "tvo", "tvo_reparam")


class LeftPoints(NamedTuple):
    """Per-run TVO left points ``b_{k,j}`` and widths ``delta_{k,j} = b_{k,j+1} - b_{k,j}`` (Eq. 5), ``(K, d)``."""

    points: Tensor
    deltas: Tensor


class StackedLossOutput(NamedTuple):
    """Per-run losses ``(K,)`` (mean over the batch, to be minimised) and the detached ``log w`` ``(K, S, B)``."""

    loss: Tensor
    log_w: Tensor


def left_points(betas: Sequence[Sequence[float]] | Tensor, *, d: int | None = None,
                dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> LeftPoints:
    """Validate K schedules and return their left points and widths, ``(K, d)``.

    Each row goes through :func:`tvolib.tvo.riemann_weights` (the single-run code path), so the
    float64 widths are the ones a single run uses before the cast to ``dtype``. A schedule shorter
    than ``d`` (a run whose schedule chooses its length, e.g. ``gp_bandit_adaptive``) is padded
    with intervals of width zero at its last point, ``b_j = b_{d_k - 1}``, ``delta_j = 0`` for
    ``j >= d_k``: the same left Riemann sum, ``sum_j delta_j f(b_j)``, term for term, and the same
    gradient, since the padded terms are multiplied by an exact zero.

    Args:
        betas: K schedules, ``b_0 = 0 < b_1 < ... < 1`` each.
        d: the stack's number of left points (default: the longest schedule's; every schedule must
            have at most ``d`` points).
        dtype, device: of the returned tensors.

    Raises:
        ValueError: no schedules, or one longer than ``d``, or one that is not a valid schedule.
    """
    rows = [torch.as_tensor(b, dtype=torch.float64).reshape(-1) for b in betas]
    if not rows:
        raise ValueError("betas must hold K >= 1 schedules; got none")
    lengths = [r.numel() for r in rows]
    d = max(lengths) if d is None else d
    if max(lengths) > d:
        raise ValueError(f"betas must be schedules of at most d = {d} points (shorter ones are padded with "
                         f"intervals of width zero); got lengths {lengths}")
    weights = [riemann_weights(r, "left") for r in rows]
    points = torch.stack([_pad(nodes[:-1], d, nodes[-2]) for nodes, _ in weights])
    deltas = torch.stack([_pad(w[:-1], d, 0.0) for _, w in weights])
    return LeftPoints(points.to(dtype=dtype, device=device), deltas.to(dtype=dtype, device=device))


def _pad(values: Tensor, d: int, fill: float | Tensor) -> Tensor:
    """``values`` ``(n,)`` extended to ``(d,)`` with ``fill``."""
    return torch.cat([values, values.new_full((d - values.numel(),), float(fill))])


def stacked_iwae_bound(log_w: Tensor) -> Tensor:
    """``logsumexp_s(log w_{k,s}) - log S`` per run and data point: ``(K, B)`` (Burda et al. 2016)."""
    return torch.logsumexp(log_w, dim=1) - math.log(log_w.shape[1])


def stacked_covariance_surrogate(log_w: Tensor, log_pi_tilde: Tensor, points: LeftPoints) -> Tensor:
    """:func:`tvolib.objectives.covariance_surrogate` for each run: ``(K, B)``.

    ``log_w`` ``(K, S, B)``, ``log_pi_tilde`` ``(K, d, S, B)``; run ``k`` uses its own points and
    widths. The gradient of the surrogate is the covariance estimator of the TVO gradient,
    ``sum_j delta_j (E_pi[d log w] + S/(S-1) Cov_pi(log w, d log pi~))`` with SNIS weights
    ``softmax_s(b_j log w_s)`` (Eqs. 4-5).
    """
    S = log_w.shape[1]
    correction = S / (S - 1) if S > 1 else 1.0
    f = log_w.detach()[:, None]  # (K, 1, S, B)
    weights = torch.softmax(points.points[:, :, None, None] * f, dim=2)
    mean_term = (weights * log_w[:, None]).sum(dim=2)
    centred_f = f - (weights * f).sum(dim=2, keepdim=True)
    centred_pi = log_pi_tilde - (weights * log_pi_tilde).sum(dim=2, keepdim=True)
    covariance = correction * (weights * centred_f * centred_pi).sum(dim=2)
    return (points.deltas[:, :, None] * (mean_term + covariance)).sum(dim=1)


def stacked_tvo_surrogate(log_p: Tensor, log_q: Tensor, points: LeftPoints, reparam: bool = False) -> Tensor:
    """The TVO surrogate per run and data point, ``(K, B)`` (``tvo``; ``tvo_reparam`` if ``reparam``).

    ``log pi~_b = b log p + (1 - b) log q`` (Eq. 2) for the score-function estimator; with
    reparameterised samples the density over the noise is ``b log w + const``.
    """
    log_w = log_p - log_q
    b = points.points[:, :, None, None]
    if reparam:
        log_pi_tilde = b * log_w[:, None]
    else:
        log_pi_tilde = b * log_p[:, None] + (1 - b) * log_q[:, None]
    return stacked_covariance_surrogate(log_w, log_pi_tilde, points)


def _loo_mean(values: Tensor) -> Tensor:
    """Mean over the other samples per sample, along the sample dimension 1: ``(K, S, B)``."""
    return (values.sum(dim=1, keepdim=True) - values) / (values.shape[1] - 1)


def stacked_loss(objective: str, stack: StackedModel, x: Tensor, S: int, noise: Sequence[Tensor],
                 points: LeftPoints | None = None) -> StackedLossOutput:
    """Per-run losses of ``objective`` for one minibatch ``x`` ``(K, B, D)``: run ``k`` equals
    :func:`tvolib.objectives.compute_loss` for the single model with run ``k``'s parameters and noise.

    Args:
        objective: one of :data:`STACKED_OBJECTIVES`.
        stack: the :class:`StackedModel`.
        x: the K minibatches, ``(K, B, D)``.
        S: samples per data point.
        noise: from ``stack.draw_noise(generators, S, B)``.
        points: per-run left points (:func:`left_points`); required by ``tvo`` and ``tvo_reparam``.

    Returns:
        :class:`StackedLossOutput` with ``loss`` ``(K,)``; minimise ``loss.sum()``.
    """
    if objective not in STACKED_OBJECTIVES:
        raise ValueError(f"objective {objective!r} cannot be stacked; accepted: {STACKED_OBJECTIVES}")
    reparam = objective in ("iwae", "tvo_reparam") or (objective == "elbo" and not stack.discrete)
    if reparam and stack.discrete:
        raise ValueError(f"objective {objective!r} needs reparameterised samples; the stacked model is discrete")
    if objective.startswith("tvo"):
        if points is None:
            raise ValueError("the tvo objectives need points=left_points(betas), one schedule per run")
        if points.points.shape[0] != stack.K:
            raise ValueError(f"points hold {points.points.shape[0]} schedules; the stack has {stack.K} runs")
    log_p, log_q = stack.log_joint_and_q(x, S, reparam, noise)
    log_w = log_p - log_q
    if objective == "elbo" and reparam:
        per_point = log_w
    elif objective == "elbo":  # score function with leave-one-out baselines (none when S = 1)
        signal = log_w.detach() - (_loo_mean(log_w.detach()) if S > 1 else 0.0)
        per_point = log_w + signal * log_q
    elif objective == "iwae":
        per_point = stacked_iwae_bound(log_w)
    else:
        per_point = stacked_tvo_surrogate(log_p, log_q, points, reparam=objective == "tvo_reparam")
    loss = -per_point.reshape(stack.K, -1).mean(dim=1)
    return StackedLossOutput(loss, log_w.detach())
