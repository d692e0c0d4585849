"""The bias-optimal schedule: the d left points that maximise the estimated TVO itself.

With the integrand ``f(beta) = E_{pi_beta}[log w]`` (Eq. 3), ``log p(x) = int_0^1 f``, whatever the
schedule. The TVO (Eq. 5) is the left Riemann sum ``sum_j (b_{j+1} - b_j) f(b_j)`` (``b_d = 1``), so
its bias, the *left-sum gap* ``int_0^1 f - sum_j (b_{j+1} - b_j) f(b_j)``, is smallest exactly where
the TVO is largest. :func:`bias_optimal_points` finds, for ``f`` given on a grid, the ``d - 1`` grid
points that maximise the left sum, exactly, by a dynamic programme over the grid;
:class:`BiasOptimalSchedule` trains them, re-estimating ``f`` from the current log weights (the SNIS
integrand on :func:`default_grid`, as the moments schedule does) every ``update_every`` epochs. It
needs no bandit: it asks whether the TVO's bias alone explains why one schedule trains better.

Example:
    >>> grid = torch.linspace(0, 1, 9, dtype=torch.float64)
    >>> bias_optimal_points(4, grid, 2.0 * grid - 1.0).tolist()   # a linear f: equal steps are optimal
    [0.0, 0.25, 0.5, 0.75]
"""
from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor

from tvolib.checks import check_betas, check_finite_float, check_int, check_log_w
from tvolib.schedules import ReestimatedSchedule
from tvolib.tvo import snis_integrand

__all__ = [
    "BiasOptimalSchedule",
    "bias_optimal_points",
    "default_grid",
    "left_sum_gap",
    "mean_integrand",
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


def default_grid(beta_min: float = 1e-4, log_points: int = 161, linear_points: int = 101) -> Tensor:
    """The grid :class:`BiasOptimalSchedule` estimates ``f`` on: 0, ``log_points`` log-spaced points
    from ``beta_min`` to 1 and ``linear_points`` equally spaced ones in [0, 1], merged and sorted.

    Why this spacing: a real integrand rises steeply near 0 (the SNIS integrand is
    ``f(0) + beta Var_q[log w] + O(beta^2)``, and ``Var_q[log w]`` is tens to hundreds of nats^2 for the
    image models), so the optimal ``b_1`` lies at a few 1e-3 to 1e-1, where a linear grid has no
    points; the log part (40 points a decade, steps of 6%) resolves it. Near 1, where ``f`` is flat and
    the steps are wide, the linear part bounds every step by 0.01. Below ``beta_min`` f is linear in
    beta to within the curvature's ``beta_min^2`` term, and a point there could lower the gap by at
    most ``beta_min (f(1) - f(0))``, 1e-4 of the integrand's rise. The defaults give 259 points.

    Args:
        beta_min: the smallest non-zero grid point, in (0, 1).
        log_points, linear_points: sizes of the two parts, ints >= 2.

    Returns:
        A float64 CPU tensor ``(G,)``, ``0 = g_0 < ... < g_{G-1} = 1``.

    Example:
        >>> grid = default_grid()
        >>> grid.numel(), grid[1].item(), float(grid.diff().max()) <= 0.01 + 1e-12
        (259, 0.0001, True)
    """
    beta_min = check_finite_float("beta_min", beta_min, minimum=0.0, strict=True)
    if beta_min >= 1:
        raise ValueError(f"beta_min must lie in (0, 1); got {beta_min!r}")
    log_points, linear_points = check_int("log_points", log_points, 2), check_int("linear_points", linear_points, 2)
    parts = [torch.zeros(1, dtype=torch.float64),
             torch.logspace(math.log10(beta_min), 0.0, log_points, dtype=torch.float64),
             torch.linspace(0.0, 1.0, linear_points, dtype=torch.float64)]
    grid = torch.unique(torch.cat(parts).round(decimals=12))  # sorted; 0.01, 0.1, 1 appear in both parts
    return grid


def mean_integrand(log_w: Tensor, betas: Tensor | list[float]) -> Tensor:
    """The SNIS integrand (Eq. 4) at ``betas``, averaged over the data points, in float64.

    ``f(beta) = (1 / N) sum_n sum_s softmax_s(beta log w_{s,n}) log w_{s,n}``: what the moments
    schedule bisects and :class:`BiasOptimalSchedule` optimises, computed in chunks of data points so
    that the ``(G, S, chunk)`` tensor stays near 2**22 elements.

    Args:
        log_w: ``(S, N)`` finite log importance weights on N data points.
        betas: the points, any 1-D sequence in [0, 1].

    Returns:
        A float64 tensor ``(G,)`` on ``log_w``'s device.

    Example:
        >>> mean_integrand(torch.tensor([[0.0, -2.0], [-2.0, 0.0]]), [0.0, 1.0]).tolist()  # doctest: +ELLIPSIS
        [-1.0, -0.238...]
    """
    lw = check_log_w(log_w).detach().to(torch.float64)
    if not bool(torch.isfinite(lw).all()):
        raise ValueError("log_w must be finite (no -inf) to estimate the integrand")
    b = torch.as_tensor(betas, dtype=torch.float64, device=lw.device).reshape(-1)
    chunk = max(1, 2**22 // (b.numel() * lw.shape[0]))
    total = sum(snis_integrand(part, b, zero_weights=False).sum(dim=1) for part in lw.split(chunk, dim=1))
    return total / lw.shape[1]


class BiasOptimalSchedule(ReestimatedSchedule):
    """Trains the estimated bias-optimal schedule, re-estimated every ``update_every`` epochs.

    Starts from ``log_uniform(d)`` (``initial='log'``) or ``linear(d)`` until the first update;
    :meth:`step` at an epoch divisible by ``update_every`` calls ``log_weights()`` (``(S, N)`` on the
    training data, as for :class:`~tvolib.schedules.MomentsSchedule`), estimates ``f`` on
    :func:`default_grid` with :func:`mean_integrand` and moves to :func:`bias_optimal_points`, the
    grid schedule with the largest estimated TVO. Each update records ``gap_before`` (the estimated
    left-sum gap of the schedule trained until then) and ``gap`` (that of the new one), in nats.

    Cost, measured (AMD EPYC CPU shared with other jobs, one thread, medians of 4 to 5 epochs): one
    update is ``log_weights()`` (a forward pass over the trainer's 1000 training points, 0.13 s for
    the VAE at S = 10), the integrand on the 259 grid points (0.03 to 0.05 s) and the dynamic
    programme (2 to 8 ms at d = 5 and 10): 0.14 to 0.21 s. Against an epoch's training that is 60 to
    80% at ``quick`` (1000 training points, 0.23 to 0.29 s an epoch), 29% at Fig 11's budget (3000
    points, 0.45 s) and about 1% on full MNIST. Updating every 6 epochs instead (the moments
    schedule's pace) leaves the schedule behind: on a ``quick`` MNIST run (seed 10, not an evaluation
    seed) its estimated gap was on average 0.024 nats (d = 5) and 0.010 nats (d = 10) above the
    current optimum's, up to 0.53 early in training, where the optimum's lead over ``log_uniform(d)``
    averaged 0.19 and 0.12 nats. The runs are short at ``quick`` (seconds), so the default
    re-estimates after every epoch (``update_every=1``), as the method asks.

    Args:
        d: number of left points, including ``b_0 = 0``; at most 258 (the grid's points below 1).
        update_every: epochs between re-estimates, an int >= 1.
        initial: the schedule before the first update, ``'log'`` or ``'linear'``.

    Example:
        >>> schedule = BiasOptimalSchedule(4)
        >>> schedule.step(1, log_weights=lambda: 3.0 * torch.randn(30, 10))
        >>> record = schedule.history()[0]
        >>> record["epoch"], len(record["betas"]), sorted(record)
        (1, 4, ['betas', 'epoch', 'gap', 'gap_before'])
    """

    RECORD_FLOATS = ("gap", "gap_before")

    def __init__(self, d: int, update_every: int = 1, initial: Literal["log", "linear"] = "log") -> None:
        super().__init__(d, update_every, initial)
        self.grid = default_grid()
        if self._d > self.grid.numel() - 1:
            raise ValueError(f"{_D_NAME} must be at most {self.grid.numel() - 1} (the grid's points below 1); got {d}")

    def estimate(self, log_w: Tensor) -> tuple[Tensor, dict[str, float]]:
        f = mean_integrand(log_w, self.grid).cpu()
        before = float(left_sum_gap(self._betas, self.grid, f))
        betas = bias_optimal_points(self._d, self.grid, f)
        return betas, {"gap": float(left_sum_gap(betas, self.grid, f)), "gap_before": before}

    def __repr__(self) -> str:
        return f"BiasOptimalSchedule(d={self._d}, update_every={self.update_every}, initial={self.initial!r})"
