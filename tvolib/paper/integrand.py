"""Fig 1: the TVO integrand ``E_{pi_beta}[log w]`` versus beta and its Riemann sums.

The thermodynamic identity (Eq. 3) writes ``log p(x) = int_0^1 E_{pi_beta}[log w] dbeta``; the TVO
is the left Riemann sum of the integrand over a schedule (Eq. 5), the right sum an upper bound for
the exact (non-decreasing) integrand, the ELBO the single rectangle at ``beta_0 = 0`` (Eq. 1). The
curves come from :mod:`tvolib.tvo` (SNIS estimates, Eq. 4, and the IWAE bound) or, for the
closed-form panel, from :class:`tvolib.models.LinearGaussian`; the sums use the quadrature weights
of :func:`tvolib.tvo.riemann_weights` at the curve's heights.

Example:
    >>> curve = linear_gaussian_curve(integrand_grid([0.0, 0.1, 0.4]))
    >>> sums = riemann_sums(curve.beta, curve.values, [0.0, 0.1, 0.4])
    >>> sums.elbo < sums.left < curve.log_px < sums.right
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from tvolib.models import LinearGaussian
from tvolib.tvo import iwae_bound, riemann_weights, snis_integrand

__all__ = [
    "FIG1_LINEAR_GAUSSIAN",
    "IntegrandCurve",
    "RiemannSums",
    "integrand_grid",
    "riemann_sums",
    "linear_gaussian_curve",
    "model_curve",
]

#: Fig 1's closed-form panel: z ~ N(0, 1), x | z ~ N(2 z, 0.6^2) with q(z|x) = N(0, 1) (the prior,
#: ignoring x), a deliberately poor q so the integrand rises steeply near beta = 0 as in the paper.
FIG1_LINEAR_GAUSSIAN: dict[str, float] = {"a": 2.0, "b": 0.0, "s": 0.6, "c": 0.0, "m": 0.0, "v": 1.0}


@dataclass(frozen=True)
class IntegrandCurve:
    """One panel of Fig 1: the integrand ``values`` (nats, averaged over data points) on ``beta``.

    ``log_px`` is the area under the curve when known (the closed form's exact log p(x), or the
    IWAE bound of the samples behind an SNIS curve), else None; ``estimate`` optionally overlays
    SNIS estimates ``(beta, values)`` on an analytic curve.
    """

    label: str
    beta: np.ndarray
    values: np.ndarray
    log_px: float | None = None
    estimate: tuple[np.ndarray, np.ndarray] | None = None
    area_label: str = r"$\log p(x)$"


@dataclass(frozen=True)
class RiemannSums:
    """The sums of Fig 1 for one curve and schedule: the quadrature ``nodes`` ``[b_0, ..., 1]``,
    the curve's ``heights`` there, the ``left`` (TVO, Eq. 5) and ``right`` sums, the ``elbo``
    (the integrand at 0) and the trapezoid ``area`` under the whole curve."""

    nodes: np.ndarray
    heights: np.ndarray
    left: float
    right: float
    elbo: float
    area: float


def integrand_grid(schedule: Sequence[float], n: int = 201) -> np.ndarray:
    """``n`` points on [0, 1] plus the schedule's points (so the rectangles have exact heights)."""
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, n), np.asarray(schedule, dtype=float)]))


def riemann_sums(beta: np.ndarray, values: np.ndarray, schedule: Sequence[float]) -> RiemannSums:
    """Left and right Riemann sums of a tabulated integrand over ``schedule`` (Eq. 5).

    Args:
        beta: strictly increasing grid covering [0, 1].
        values: the integrand on ``beta`` (read at the nodes by linear interpolation, so include
            the schedule's points in ``beta`` for exact heights, :func:`integrand_grid`).
        schedule: left points ``0 = b_0 < ... < b_{d-1} < 1`` (validated by :mod:`tvolib.tvo`).

    Returns:
        A :class:`RiemannSums`; ``left = sum_j (b_{j+1} - b_j) f(b_j)``,
        ``right = sum_j (b_{j+1} - b_j) f(b_{j+1})`` with ``b_d = 1``.
    """
    beta = np.asarray(beta, dtype=float)
    values = np.asarray(values, dtype=float)
    if beta.ndim != 1 or beta.shape != values.shape or beta.size < 2:
        raise ValueError(f"beta and values must be 1-D of equal length >= 2; got {beta.shape}, {values.shape}")
    if not np.all(np.diff(beta) > 0) or beta[0] > 0 or beta[-1] < 1:
        raise ValueError("beta must increase strictly and cover [0, 1]")
    nodes, left = (t.numpy() for t in riemann_weights(list(map(float, schedule)), "left"))
    right = riemann_weights(list(map(float, schedule)), "right")[1].numpy()
    heights = np.interp(nodes, beta, values)
    return RiemannSums(nodes=nodes, heights=heights, left=float(np.sum(left[:-1] * heights[:-1])),
                       right=float(np.sum(right[1:] * heights[1:])), elbo=float(np.interp(0.0, beta, values)),
                       area=float(np.trapezoid(values, beta)))


def linear_gaussian_curve(
    beta: np.ndarray,
    *,
    n_points: int = 41,
    S: int = 100,
    n_estimate: int = 21,
    seed: int = 0,
    params: Mapping[str, float] | None = None,
    label: str = "linear Gaussian (closed form)",
) -> IntegrandCurve:
    """Fig 1's closed-form panel: the exact integrand ``d log Z_beta / d beta`` (Eq. 3) of a
    :class:`tvolib.models.LinearGaussian` averaged over ``n_points`` fixed data points (evenly spaced
    in +-1.5 marginal standard deviations), its exact log p(x), and SNIS estimates (Eq. 4) from
    ``S`` samples of q at ``n_estimate`` betas (seeded by ``seed``, global RNG untouched)."""
    model = LinearGaussian(**dict(params or FIG1_LINEAR_GAUSSIAN))
    with torch.no_grad():
        sd = float(torch.sqrt(model.a**2 + (2 * model.log_s).exp()))
        x = float(model.b) + sd * torch.linspace(-1.5, 1.5, n_points, dtype=torch.float64)
        values = model.dlogZ_dbeta(x, torch.as_tensor(beta, dtype=torch.float64)).mean(dim=1).numpy()
        log_px = float(model.log_px(x).mean())
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
        points = torch.linspace(0.0, 1.0, n_estimate, dtype=torch.float64)
        estimate = snis_integrand(log_p - log_q, points).mean(dim=1).numpy()
    return IntegrandCurve(label, np.asarray(beta, dtype=float), values, log_px, (points.numpy(), estimate))


def model_curve(
    model: Any,
    x: torch.Tensor,
    beta: np.ndarray,
    *,
    S: int = 1000,
    batch_size: int = 100,
    seed: int = 0,
    label: str = "VAE",
) -> IntegrandCurve:
    """Fig 1's learned-model panel: SNIS estimates (Eq. 4) of ``E_{pi_beta}[log w]`` for a trained
    model from ``S`` samples of q per data point, averaged over the rows of ``x``.

    The area under the SNIS curve is exactly the IWAE-S estimate ``log mean_s w_s`` of the same
    samples (:func:`tvolib.tvo.iwae_bound`; its derivative in beta is the SNIS integrand), returned
    as ``log_px``. Sampling is seeded by ``seed`` without touching the global RNG.
    """
    grid = torch.as_tensor(beta, dtype=torch.float64)
    total = torch.zeros(len(grid), dtype=torch.float64)
    iwae = 0.0
    n = int(x.shape[0])
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(seed)
        for start in range(0, n, batch_size):
            log_p, log_q = model.log_joint_and_q(x[start:start + batch_size], S, reparam=False)
            log_w = (log_p - log_q).double()
            total += snis_integrand(log_w, grid).sum(dim=1).cpu()
            iwae += float(iwae_bound(log_w).sum())
    return IntegrandCurve(label, np.asarray(beta, dtype=float), (total / n).numpy(), iwae / n,
                          area_label=f"IWAE-{S}")
