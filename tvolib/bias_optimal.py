"""The bias-optimal schedule: the d left points that maximise the estimated TVO itself.

With the integrand ``f(beta) = E_{pi_beta}[log w]`` (Eq. 3), ``log p(x) = int_0^1 f``, whatever the
schedule. The TVO (Eq. 5) is the left Riemann sum ``sum_j (b_{j+1} - b_j) f(b_j)`` (``b_d = 1``), so
its bias, the *left-sum gap* ``int_0^1 f - sum_j (b_{j+1} - b_j) f(b_j)``, is smallest exactly where
the TVO is largest. :func:`bias_optimal_points` finds, for ``f`` given on a grid, the ``d - 1`` grid
points that maximise the left sum, exactly, by a dynamic programme over the grid.

Example:
    >>> grid = torch.linspace(0, 1, 9, dtype=torch.float64)
    >>> bias_optimal_points(4, grid, 2.0 * grid - 1.0).tolist()   # a linear f: equal steps are optimal
    [0.0, 0.25, 0.5, 0.75]
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from tvolib.checks import check_betas, check_int

__all__ = [
    "bias_optimal_points",
    "left_sum_gap",
]

_D_NAME = "d (the number of left points, including b_0 = 0)"


def _check_grid(beta_grid: Any, f_values: Any, cost: Any = None) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(grid, f, cost)`` as float64 CPU tensors, checked: a grid ``0 = g_0 < ... < g_{G-1} = 1``
    (G >= 2) and finite values of one shape."""
    accepted = "a 1-D grid 0 = g_0 < g_1 < ... < g_{G-1} = 1 of G >= 2 points"
    try:
        grid = torch.as_tensor(beta_grid, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"beta_grid must be {accepted}; got {beta_grid!r:.200}") from exc
    if grid.ndim != 1 or grid.numel() < 2 or not bool(torch.isfinite(grid).all()) or grid[0].item() != 0.0 \
            or grid[-1].item() != 1.0 or not bool((grid[1:] > grid[:-1]).all()):
        raise ValueError(f"beta_grid must be {accepted}; got {grid.tolist()!r:.200}")
    out = [grid]
    for name, values in (("f_values", f_values), ("cost", cost)):
        if values is None:
            out.append(None)
            continue
        try:
            t = torch.as_tensor(values, dtype=torch.float64).detach().cpu()
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"{name} must be a 1-D sequence of {grid.numel()} finite numbers (one per grid "
                             f"point); got {values!r:.200}") from exc
        if t.shape != grid.shape or not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must hold {grid.numel()} finite numbers, one per point of beta_grid; got "
                             f"shape {tuple(t.shape)}" + ("" if t.shape != grid.shape else " with non-finite values"))
        out.append(t)
    return out[0], out[1], out[2]


def _interpolate(grid: Tensor, f: Tensor, points: Tensor) -> Tensor:
    """``f`` interpolated linearly between grid points at ``points`` (in [0, 1]); exact on the grid."""
    k = (torch.searchsorted(grid, points, right=True) - 1).clamp(0, grid.numel() - 2)
    slope = (f[k + 1] - f[k]) / (grid[k + 1] - grid[k])
    return f[k] + (points - grid[k]) * slope


def left_sum_gap(betas: Tensor | list[float], beta_grid: Tensor | list[float], f_values: Tensor | list[float]
                 ) -> Tensor:
    """The left-sum gap (the TVO's bias) of a schedule for an integrand given on a grid.

    ``gap = int_0^1 f - sum_j (b_{j+1} - b_j) f(b_j)`` with ``b_d = 1``, where ``f`` is the piecewise
    linear interpolant of ``f_values`` on ``beta_grid``: the integral is the trapezoid rule on the
    grid (exact for the interpolant) and ``f(b_j)`` the interpolant at ``b_j``, which is the given
    value when ``b_j`` is a grid point. For a non-decreasing ``f`` (every exact TVO integrand) the gap
    is >= 0, and it is 0 for a constant ``f``.

    Args:
        betas: a left-point schedule ``0 = b_0 < ... < b_{d-1} < 1``.
        beta_grid: the grid, ``0 = g_0 < ... < g_{G-1} = 1`` (G >= 2).
        f_values: ``f`` at the grid points, ``(G,)`` finite.

    Returns:
        A 0-dim float64 tensor.

    Example:
        >>> grid = torch.linspace(0, 1, 5, dtype=torch.float64)
        >>> float(left_sum_gap([0.0, 0.5], grid, grid))          # f = beta: 1/2 - (0.5 * 0 + 0.5 * 0.5)
        0.25
    """
    b = check_betas(betas, name="betas")
    grid, f, _ = _check_grid(beta_grid, f_values)
    nodes = torch.cat([b, torch.ones(1, dtype=torch.float64)])
    left_sum = ((nodes[1:] - nodes[:-1]) * _interpolate(grid, f, b)).sum()
    return torch.trapezoid(f, grid) - left_sum


def _first_max(values: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """``(max, index)`` along ``dim``, ties to the smallest index (deterministic whatever the kernel)."""
    best = values.max(dim=dim, keepdim=True).values
    index = torch.arange(values.shape[dim]).reshape([-1 if i == dim % values.ndim else 1 for i in range(values.ndim)])
    first = torch.where(values == best, index, values.shape[dim]).min(dim=dim).values
    return best.squeeze(dim), first


def _left_sum_indices(d: int, grid: Tensor, f: Tensor, cost: Tensor) -> Tensor:
    """The grid indices ``0 = i_0 < ... < i_{d-1} < G - 1`` that maximise
    ``sum_j (g_{i_{j+1}} - g_{i_j}) f_{i_j} - cost_{i_j}`` (``g_{i_d} = 1``): the dynamic programme.

    ``best_m[i]``: the best value of the terms of the first ``m - 1`` intervals over arrangements of
    ``m`` points whose last point is grid point ``i``; ``best_{m+1}[i] = max_{k < i} best_m[k] +
    (g_i - g_k) f_k - cost_i``, one ``(G - 1, G - 1)`` max per point. Ties go to the smallest index.
    """
    n = grid.numel() - 1  # the points a schedule may hold (all but beta = 1)
    g, fv, c = grid[:n], f[:n], cost[:n]
    best = torch.full((n,), -math.inf, dtype=torch.float64)
    best[0] = -c[0]
    gain = (g[None, :] - g[:, None]) * fv[:, None]  # gain[k, i]: the interval [g_k, g_i) at f_k
    later = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)  # k < i
    back = []
    for _ in range(1, d):
        best, previous = _first_max((best[:, None] + gain).masked_fill(~later, -math.inf), dim=0)
        best = best - c
        back.append(previous)
    _, last = _first_max(best + (1.0 - g) * fv, dim=0)
    index = [int(last)]
    for previous in reversed(back):
        index.append(int(previous[index[-1]]))
    return torch.tensor(index[::-1], dtype=torch.long)


def _nearest_distinct(grid: Tensor, targets: Tensor) -> Tensor:
    """Indices of the grid points (below 1) nearest ``targets`` (sorted, first 0), made strictly increasing."""
    n = grid.numel() - 1
    index = (grid[:n, None] - targets[None, :]).abs().argmin(dim=0).tolist()
    d = len(index)
    for j in range(1, d):
        index[j] = min(max(index[j], index[j - 1] + 1), n - (d - j))
    return torch.tensor(index, dtype=torch.long)


def bias_optimal_points(d: int, beta_grid: Tensor | list[float], f_values: Tensor | list[float], *,
                        cost: Tensor | list[float] | None = None) -> Tensor:
    """The schedule of ``d`` left points on the grid with the largest left sum (smallest gap) for ``f``.

    ``b_0 = 0`` and ``0 < b_1 < ... < b_{d-1} < 1`` are grid points that maximise the TVO's left sum
    ``sum_j (b_{j+1} - b_j) f(b_j)`` (``b_d = 1``); since ``int_0^1 f`` does not depend on the
    schedule, they minimise :func:`left_sum_gap`. With ``cost`` (a cost ``c(g)`` of placing a point at
    each grid value, e.g. the gradient variance a small beta brings) they minimise
    ``gap + sum_{j=0}^{d-1} c(b_j)`` instead (``c(0)`` is paid by every schedule). The optimum over
    all ``C(G - 2, d - 1)`` arrangements is found exactly by a dynamic programme (``O(d G^2)``,
    vectorised), so it is the best schedule *on the grid*; the continuous optimum is within the
    grid's resolution of it.

    Ties (a flat stretch of ``f``) go to the arrangement of the smallest grid indices, from the last
    point back, so the result is deterministic. A flat ``f`` (``max f - min f <= 1e-9 max(1, max |f|)``)
    without ``cost`` leaves every schedule with gap 0: it gives the grid points nearest
    ``linear(d)``, as :func:`~tvolib.schedules.moments` does.

    Args:
        d: number of left points, including ``b_0 = 0``; at most ``G - 1``.
        beta_grid: the candidate points, ``0 = g_0 < ... < g_{G-1} = 1`` (1 is the right end only).
        f_values: ``f`` at the grid points, ``(G,)`` finite (need not be monotone).
        cost: optional ``(G,)`` finite per-point costs on the grid (the entry at 1 is not used).

    Returns:
        A float64 CPU tensor ``(d,)`` of grid values, strictly increasing, first entry 0.

    Example:
        >>> grid = torch.tensor([0.0, 0.01, 0.1, 0.5, 1.0], dtype=torch.float64)
        >>> bias_optimal_points(2, grid, -torch.exp(-20 * grid)).tolist()  # f rises steeply near 0
        [0.0, 0.1]
    """
    d = check_int(_D_NAME, d, 1)
    grid, f, c = _check_grid(beta_grid, f_values, cost)
    if d > grid.numel() - 1:
        raise ValueError(f"{_D_NAME} must be at most the {grid.numel() - 1} points of beta_grid below 1; got {d}")
    if c is None and (f.max() - f.min()).item() <= 1e-9 * max(1.0, f.abs().max().item()):
        index = _nearest_distinct(grid, torch.arange(d, dtype=torch.float64) / d)
    else:
        index = _left_sum_indices(d, grid, f, torch.zeros_like(f) if c is None else c)
    return grid[index].clone()
