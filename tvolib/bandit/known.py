"""What the integrand says about an arm: the TVO's bias there, the known part of the bandit's reward.

With the integrand ``f(beta) = E_{pi_beta}[log w]`` (paper Eq. 3), the TVO of a schedule
``0 = b_0 < b_1 < ... < b_m < b_{m+1} = 1`` is the left Riemann sum (Eq. 5)

    S(b) = sum_{j=0}^{m} (b_{j+1} - b_j) f(b_j),

and its bias is ``int_0^1 f - S(b)``. Since ``int_0^1 f = log p(x)`` whatever the schedule, the
bias of one arm less that of another is ``S(b') - S(b)``: the integrand predicts it, the rewards
need not teach it. The bandit of :mod:`tvolib.bandit.integrand_bandit` takes

    g(b) = S(b) - S(b*),      b* = the bias-optimal points (:func:`~tvolib.bias_optimal.bias_optimal_points`),

the *predicted bias change* (``<= 0`` on the grid, 0 at the least biased arm), as a regressor of
the reward with a fitted coefficient, and its GP models only the rest.

``f`` is known on a grid (:func:`integrand_grid`) and interpolated linearly between its points, as
:func:`~tvolib.bias_optimal.left_sum_gap` does; the grid holds 0, the points of
:func:`~tvolib.bias_optimal.default_grid` inside the arms' box ``[lo, hi]``, both ends of the box and
1, so an arm's points and the bias-optimal points lie on it or between its points.

Example:
    >>> grid = integrand_grid(0.05, 0.95)
    >>> f = -torch.exp(-20 * grid)                       # rises steeply near beta = 0
    >>> gain = predicted_gain(torch.tensor([[0.1, 0.3], [0.6, 0.9]]), grid, f)
    >>> bool(gain[0] > gain[1]), bool((gain <= 1e-12).all())
    (True, True)
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..bias_optimal import bias_optimal_points, default_grid, mean_integrand
from ..checks import check_finite_float

__all__ = ["integrand_grid", "left_sums", "predicted_gain", "read_integrand"]


def integrand_grid(lo: float, hi: float) -> Tensor:
    """The betas at which the bandit reads the integrand: ``0``, ``lo``, the points of
    :func:`~tvolib.bias_optimal.default_grid` strictly inside ``(lo, hi)``, ``hi`` and ``1``.

    Example:
        >>> grid = integrand_grid(0.05, 0.95)
        >>> grid[:2].tolist(), grid[-2:].tolist(), grid.numel()
        ([0.0, 0.05], [0.95, 1.0], 144)
    """
    lo = check_finite_float("lo", lo, minimum=0.0, strict=True)
    hi = check_finite_float("hi", hi)
    if not lo < hi < 1:
        raise ValueError(f"the box must satisfy 0 < lo < hi < 1; got ({lo}, {hi})")
    inner = default_grid()
    inner = inner[(inner > lo) & (inner < hi)]
    ends = torch.tensor([lo, hi, 1.0], dtype=torch.float64)
    return torch.cat([torch.zeros(1, dtype=torch.float64), ends[:1], inner, ends[1:]])


def left_sums(arms: Tensor, grid: Tensor, f: Tensor) -> Tensor:
    """``S(b)`` (module docstring) of every arm, ``f`` interpolated linearly on ``grid``.

    Args:
        arms: ``(M, m)`` interior points in ``[0, 1)``, each row sorted (``b_0 = 0`` and ``1`` are added).
        grid: ``(G,)`` increasing betas from 0 to 1.
        f: ``(G,)`` the integrand on ``grid``.

    Returns:
        ``(M,)`` float64.

    Example:
        >>> grid = torch.linspace(0, 1, 5, dtype=torch.float64)
        >>> left_sums(torch.tensor([[0.5]]), grid, grid).tolist()   # 0.5 * f(0) + 0.5 * f(0.5)
        [0.25]
    """
    arms = torch.as_tensor(arms, dtype=torch.float64)
    k = (torch.searchsorted(grid, arms.contiguous(), right=True) - 1).clamp(0, grid.numel() - 2)
    at = f[k] + (arms - grid[k]) * (f[k + 1] - f[k]) / (grid[k + 1] - grid[k])
    nodes = torch.cat([torch.zeros_like(arms[:, :1]), arms, torch.ones_like(arms[:, :1])], dim=1)
    values = torch.cat([f[:1].expand(arms.shape[0], 1), at], dim=1)
    return ((nodes[:, 1:] - nodes[:, :-1]) * values).sum(1)


def predicted_gain(arms: Tensor, grid: Tensor, f: Tensor) -> Tensor:
    """``g(b) = S(b) - S(b*)``: how much less biased than the bias-optimal arm of its size each arm is
    (``<= 0`` for arms on the grid; module docstring).

    Args:
        arms: ``(M, m)`` sorted interior points (one size ``m``).
        grid, f: the integrand on its grid (:func:`integrand_grid`).

    Returns:
        ``(M,)`` float64, in the integrand's units (nats).
    """
    arms = torch.as_tensor(arms, dtype=torch.float64)
    best = bias_optimal_points(arms.shape[1] + 1, grid, f)[1:]
    return left_sums(arms, grid, f) - left_sums(best[None], grid, f)


def read_integrand(grid: Tensor, *, integrand: Callable[[Tensor], Tensor] | None = None,
                   log_weights: Callable[[], Tensor] | None = None) -> Tensor | None:
    """The integrand on ``grid``: ``integrand(grid)`` when given (a synthetic run's exact ``f``), else
    the SNIS estimate from ``log_weights()`` averaged over its data points
    (:func:`~tvolib.bias_optimal.mean_integrand`), else ``None``.

    Raises:
        ValueError: values that are not ``(G,)`` finite numbers.

    Example:
        >>> read_integrand(torch.tensor([0.0, 1.0], dtype=torch.float64), integrand=lambda b: 2 * b).tolist()
        [0.0, 2.0]
    """
    if integrand is not None:
        values = torch.as_tensor(integrand(grid), dtype=torch.float64).detach().cpu().reshape(-1)
    elif log_weights is not None:
        values = mean_integrand(log_weights(), grid).detach().cpu()
    else:
        return None
    if values.shape != grid.shape or not bool(torch.isfinite(values).all()):
        raise ValueError(f"the integrand on the bandit's grid must be {grid.numel()} finite numbers; got shape "
                         f"{tuple(values.shape)}" + ("" if values.shape != grid.shape else " with non-finite values"))
    return values
