"""What every case of the bandit's test bed shares: trends, noise, random arms and the step distance.

The test bed (:mod:`tvolib.bandit.testbed`) has two families of synthetic training runs, the bump
cases (an arm effect that peaks at a known schedule, :mod:`tvolib.bandit.testbed`) and the cases of
the TVO's form (minus the left-sum gap of an integrand and a hidden cost,
:mod:`tvolib.bandit.testbed_tvo`). Both add the same trend and noise to their arm effect, calibrate
their units on the same random arms (:func:`random_arms`) to the same :data:`RANDOM_REGRET`, and
compare arms of any length by the same step-function distance (:func:`step_distance`). A case is
anything with the attributes and methods of :class:`Case`; :func:`tvolib.bandit.testbed_run.run_case`
drives a schedule through it.

Example:
    >>> round(float(step_distance([0.5], [0.5, 0.5001])), 3)      # a tied point changes little
    0.0
    >>> random_arms(5, 3).shape
    torch.Size([3, 4])
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from .protocol import staggered_upper

__all__ = [
    "Case",
    "METRICS",
    "QUICK_NOISE",
    "QUIET_NOISE",
    "RANDOM_REGRET",
    "STEP_GRID",
    "TRENDS",
    "check_run_fields",
    "random_arms",
    "step_distance",
    "trend_gain",
]

#: The trends, ``e`` the epoch and ``T`` the run's length, in arm-effect units
#: (:mod:`tvolib.bandit.testbed`'s docstring gives their origin).
TRENDS: dict[str, Callable[[int, int], float]] = {
    "none": lambda e, T: 0.0,
    "mild": lambda e, T: math.exp(-3.0 * e / T),
    "strong": lambda e, T: 10.0 * math.exp(-3.0 * e / T),
    "quick": lambda e, T: 5.0 + 965.0 * math.exp(-(e - 1) / 0.53),
}
#: The per-epoch noise of the ``"quick"`` trend and its lag-one correlation (measured); the other
#: trends use the case's ``noise``, white.
QUICK_NOISE = (2.5, 0.46)
#: The per-epoch noise of the ``-quiet`` cases, a fifth of the default 0.5 (:mod:`tvolib.bandit.testbed`).
QUIET_NOISE = 0.1
#: How an arm is compared with the optimum: its sorted points (arms of the case's ``d`` only) or
#: its step function (any length).
METRICS = ("points", "step")
#: Grid points of the ``"step"`` metric.
STEP_GRID = 1000
#: Mean regret of uniformly random arms in the staggered domain at mid-run: what sets each case's
#: units (the bump's width, the TVO cases' scale).
RANDOM_REGRET = 0.6


@runtime_checkable
class Case(Protocol):
    """What :func:`~tvolib.bandit.testbed_run.run_case` needs of a case: its run and its regret."""

    name: str
    d: int
    trend: str
    epochs: int
    window: int
    metric: str

    @property
    def noise_model(self) -> tuple[float, float]:
        """``(standard deviation, lag-one correlation)`` of the per-epoch noise."""

    def effect(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """The arm's part of an epoch's evidence gain at ``progress``: ``1/2 - regret`` (arm-effect units)."""

    def regret(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """The arm's regret at ``progress`` in [0, 1]: 0 at the optimum, arm-effect units."""

    def distance(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """RMS distance of the arm to the optimum at ``progress`` (beta units, the case's metric)."""


def check_run_fields(case: Any) -> None:
    """The fields every case shares: ``d`` (>= 2), ``epochs``, ``window``, ``noise``, ``trend``, ``metric``."""
    if isinstance(case.d, bool) or not isinstance(case.d, int) or case.d < 2:
        raise ValueError(f"d must be an int >= 2 (b_0 = 0 and at least one interior point to choose); got {case.d!r}")
    for name in ("epochs", "window"):
        value = getattr(case, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "epochs" else 1):
            why = " (the metrics average the run's second half)" if name == "epochs" else " (epochs per window)"
            raise ValueError(f"{name} must be an int >= {2 if name == 'epochs' else 1}{why}; got {value!r}")
    if isinstance(case.noise, bool) or not isinstance(case.noise, (int, float)) or not math.isfinite(case.noise) \
            or case.noise < 0:
        raise ValueError(f"noise must be a finite number >= 0 (per-epoch standard deviation); got {case.noise!r}")
    if case.trend not in TRENDS:
        raise ValueError(f"trend must be one of {list(TRENDS)}; got {case.trend!r}")
    if case.metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}; got {case.metric!r}")


def trend_gain(case: Case, epoch: int) -> float:
    """The trend's evidence gain at ``epoch`` of ``case`` (arm-effect units)."""
    return TRENDS[case.trend](epoch, case.epochs)


def _step_values(points: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """The left-Riemann step function of interior points ``(..., m)`` (``b_0 = 0``) at ``grid``: ``(..., G)``."""
    b = torch.sort(points, dim=-1).values
    left = torch.cat([torch.zeros_like(b[..., :1]), b], dim=-1)
    index = torch.searchsorted(b.contiguous(), grid.expand(*b.shape[:-1], grid.shape[-1]).contiguous(), right=True)
    return torch.gather(left, -1, index)


def step_distance(arms: Sequence[float] | torch.Tensor, optimum: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """``D(b, c)``: the RMS distance of the step functions of ``arms`` ``(..., m)`` and ``optimum``
    ``(k,)`` on the grid ``u_g = (g - 1/2) / 1000``, beta units; ``(...)``.

    ``D(b, c)^2 = mean_g (s_b(u_g) - s_c(u_g))^2`` with ``s_b(u) = b_j`` on ``[b_j, b_{j+1})``: all of
    a schedule the TVO's left sum sees, so arms of any length compare.

    Example:
        >>> round(float(step_distance([0.25], [0.5])), 4)      # s differs by 0.25 on [0.25, 0.5), by 0.25 beyond
        0.2165
    """
    grid = (torch.arange(STEP_GRID, dtype=torch.float64) + 0.5) / STEP_GRID
    a = _step_values(torch.as_tensor(arms, dtype=torch.float64), grid)
    c = _step_values(torch.as_tensor(optimum, dtype=torch.float64).reshape(-1), grid)
    return ((a - c) ** 2).mean(-1).sqrt()


def random_arms(d: int, n: int, seed: int = 0) -> torch.Tensor:
    """``n`` arms drawn as :class:`~tvolib.bandit.RandomSchedule` draws them: uniform in the
    staggered box ``[0.05, 0.95 k / (d - 1)]`` (point ``k`` of ``d - 1``), sorted; float64 ``(n, d - 1)``.

    The arms every case's units are calibrated on (:data:`RANDOM_REGRET`), from a fixed seed.
    """
    upper = torch.tensor(staggered_upper(d, 0.05, 0.95), dtype=torch.float64)
    u = torch.rand(n, d - 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.sort(0.05 + (upper - 0.05) * u, dim=-1).values
