"""A test bed for the bandit: synthetic training runs whose best schedule is known.

A real run cannot tell whether the bandit's arms are good: nobody knows the best schedule. Here
the training log-evidence is synthetic, with a known best arm, and the schedule is driven through
its public :meth:`~tvolib.schedules.Schedule.step` API exactly as a training loop drives it. Epoch
``e`` (of ``T``) trained with interior points ``b`` raises the evidence by

    L_e - L_{e-1} = trend(e) + (f(b, e / T) - 1 / 2) + noise * n_e,

    f(b, p) = exp(-mean_k (sort(b)_k - c_k(p))^2 / (2 width^2))   in [0, 1],

``n_e`` an AR(1) sequence of unit variance and lag-one correlation ``a``: a trend shared by every
arm (training improves whatever the schedule), an arm effect that peaks at the optimum ``c(p)``
(fixed, or moving linearly from ``c(0)`` to ``c(1)`` over the run: the story of the paper's Fig 3)
and noise. The regret of an arm is ``1 - f``.

Units: the arm effect's range is 1. The trends, in the same units:

* ``"none"``: 0;
* ``"mild"``: ``exp(-3 e / T)``, about the arm effect's size at the start;
* ``"strong"``: ``10 exp(-3 e / T)``, ten times the arm effect at the start, half of it at the end;
* ``"quick"``: shaped like the evidence of a recorded ``quick``-profile run (VAE, MNIST, d = 5, log
  schedule, 60 epochs): after its 6-epoch burn-in the evidence rose by about 1.0 nat a epoch,
  while the log and linear schedules' test log p(x) drifted apart by about 0.2 nat a epoch; in
  units of that arm effect the gain is 5 a epoch. Its first epochs rose by 194, 30, 5.6, 2.0 and
  1.1 nats (970, 150, 28, 10 and 5.5 units): ``5 + 965 exp(-(e - 1) / 0.53)`` follows them. Its
  per-epoch gains varied with a standard deviation of 0.5 nat and a lag-one correlation of 0.46
  (a slow wander, not white noise), so this trend brings its own noise: ``noise = 2.5``,
  ``a = 0.46``.

The other trends' noise (``noise``, per epoch, arm-effect units) is white (``a = 0``), 0.5 by
default: a window of ``w`` epochs then gets reward noise of about ``0.5 sqrt(w)``, a fraction of
its arm signal ``w``. The ``"quick"`` noise is five times that, and correlated: at the ``quick``
budget a window's reward says little about its arm.

Schedules of any length (``metric="step"``). The distance above compares the sorted points of
arms of the case's ``d`` only. A ``"step"`` case compares schedules by their left-Riemann step
functions ``s_b(u) = b_j`` on ``[b_j, b_{j+1})`` (all of a schedule the TVO's left sum sees,
:mod:`tvolib.bandit.embedding`), so that an arm of any length has a value:

    f(b, p) = exp(-D(b, c(p))^2 / (2 width^2)),   D(b, c)^2 = mean_g (s_b(u_g) - s_c(u_g))^2,

on the grid ``u_g = (g - 1/2) / 1000`` (beta units). The adaptive bandit's embedding
(:mod:`tvolib.bandit.embedding`) is the same distance, smoothed and on 100 grid points: these
cases hand its GP a kernel of the right form (only the length scale is fitted; below shifts of
a few hundredths a point the embedding's distance is too small, by its docstring's measurements),
so they test the search and the choice of ``d``, not the surrogate's form. Its ``d`` is the
optimum's: fewer points cannot make the optimum's step function, more can only by tying points
(intervals of width zero), which a search must find. The cases ``d3-step-*`` (two interior
points best), ``d5-step-*`` (four, spread out) and ``d10-step-*`` (nine, spread out) are what
:class:`~tvolib.bandit.adaptive.AdaptiveDBanditSchedule` is tested on; the ``"points"`` cases keep
their values and accept arms of their ``d`` only.

Whether a budget can tell a case's ``d`` at all is a property of the case (:mod:`tvolib.bandit.oracle`):
at the default noise even an oracle that trained only the optimum and the best arm of one point
fewer, half of 160 epochs each, would separate the ten-point case's optimum from nine points by
0.61 standard errors. The ``d{3,5,10}-step-mild-quiet`` cases are the mild step cases at
:data:`QUIET_NOISE`, a fifth of the default, where that oracle separates every step case's ``d``
from one point fewer by three standard errors: cases whose right ``d`` the rewards can tell.

The bump's ``width`` is set per case so that uniformly random arms of the code's staggered domain
have a mean regret of :data:`RANDOM_REGRET` (0.6) at mid-run (:func:`calibrated_width`): the
random rounds then see as much of the arm effect in every case, wherever its optimum lies. With
one width for all, random arms would land within reach of a log-like optimum (mean regret 0.34 at
d = 10 for a width of 0.1) but never of a corner (0.94): the corner case would test luck.

Metrics, over the epochs of the run's second half (:func:`run_case`): the mean regret, the mean
RMS distance of the trained arm to the optimum (beta units) and the share of those epochs whose
arm is degenerate (:func:`~tvolib.bandit.protocol.arm_degeneracy`).

The test bed's other family, cases of the TVO's own form (an arm's effect is minus the TVO's bias
at the arm and a cost the integrand does not reveal, ``d*-tvo-*``), is
:mod:`tvolib.bandit.testbed_tvo`; :data:`CASES` holds both. What they share (trends, noise, random
arms, the step distance) is :mod:`tvolib.bandit.testbed_common`; driving a schedule through a case,
:func:`run_case` and :func:`run_cases`, is :mod:`tvolib.bandit.testbed_run`.

Example:
    >>> from tvolib.bandit import RandomSchedule
    >>> case = CASES["d2-log-none"]
    >>> result = run_case(case, lambda seed: RandomSchedule(case.d, window=2, seed=seed), seed=0)
    >>> 0.0 <= result.regret <= 1.0
    True
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..checks import check_int
from ..tvo import log_uniform
from .protocol import staggered_upper
from .testbed_common import (METRICS, QUICK_NOISE, QUIET_NOISE, RANDOM_REGRET, STEP_GRID, TRENDS, Case,
                             check_run_fields, random_arms, step_distance, trend_gain)
from .testbed_run import CaseResult, ScheduleFactory, TestbedJobError, run_case, run_cases
from .testbed_tvo import TVO_CASES, TvoCase

__all__ = [
    "CASES",
    "METRICS",
    "QUICK_NOISE",
    "QUIET_NOISE",
    "RANDOM_REGRET",
    "STEP_GRID",
    "TRENDS",
    "Case",
    "CaseResult",
    "ScheduleFactory",
    "TestbedCase",
    "TestbedJobError",
    "TvoCase",
    "arm_value",
    "calibrated_width",
    "optimum_at",
    "run_case",
    "run_cases",
    "step_distance",
    "trend_gain",
]


def _finite_points(name: str, points: Any, count: int) -> tuple[float, ...]:
    """``points`` as a tuple of ``count`` sorted finite floats in [0, 1], or a ``ValueError`` naming ``name``."""
    try:
        values = tuple(float(v) for v in points)
    except (TypeError, ValueError):
        values = None
    if values is None or len(values) != count or list(values) != sorted(values) \
            or not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"{name} must be {count} sorted finite points in [0, 1] (the d - 1 interior points); "
                         f"got {points!r}")
    return values


@dataclass(frozen=True)
class TestbedCase:
    """One synthetic training run with a known best schedule.

    Args:
        name: a label.
        d: left points including ``b_0 = 0``; the optimum has ``d - 1`` sorted interior points.
        optimum: the best interior points at the start (sorted, beta units).
        drift_to: the best interior points at the end (``None``: fixed optimum); in between the
            optimum moves linearly with the run's progress.
        trend: a key of :data:`TRENDS`.
        width: RMS distance (beta units) at which ``f`` falls to ``exp(-1/2)`` (the cases of
            :data:`CASES` use :func:`calibrated_width`).
        noise: per-epoch noise of the evidence gain (arm-effect units; ``"quick"`` uses its own).
        epochs: the run's length ``T``.
        window: the bandit's first window length (grows by 1 every 10 rounds, the code's rule).
        metric: ``"points"`` (RMS distance of the sorted points) or ``"step"`` (RMS distance of
            the step functions, arms of any length; module docstring).
    """

    __test__ = False  # not a pytest class

    name: str
    d: int
    optimum: tuple[float, ...]
    drift_to: tuple[float, ...] | None = None
    trend: str = "strong"
    width: float = 0.1
    noise: float = 0.5
    epochs: int = 160
    window: int = 2
    metric: str = "points"

    def __post_init__(self) -> None:
        check_run_fields(self)
        object.__setattr__(self, "optimum", _finite_points("optimum", self.optimum, self.d - 1))
        if self.drift_to is not None:
            object.__setattr__(self, "drift_to", _finite_points("drift_to", self.drift_to, self.d - 1))
        if isinstance(self.width, bool) or not isinstance(self.width, (int, float)) or not math.isfinite(self.width) \
                or self.width <= 0:
            raise ValueError(f"width must be a finite number > 0 (beta units); got {self.width!r}")

    @property
    def noise_model(self) -> tuple[float, float]:
        """``(standard deviation, lag-one correlation)`` of the per-epoch noise."""
        return QUICK_NOISE if self.trend == "quick" else (self.noise, 0.0)

    def effect(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """``f(arm, progress) - 1/2`` (:func:`arm_value`), the arm's part of an epoch's evidence gain."""
        return arm_value(self, arm, progress) - 0.5

    def regret(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """``1 - f(arm, progress)`` (:func:`arm_value`): 0 at the optimum, at most 1."""
        return 1.0 - arm_value(self, arm, progress)

    def distance(self, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
        """RMS distance of ``arm`` to the optimum at ``progress``, in the case's metric (beta units)."""
        if self.metric == "step":
            return float(step_distance(arm, optimum_at(self, progress)))
        return float(((torch.tensor(arm, dtype=torch.float64) - optimum_at(self, progress)) ** 2).mean().sqrt())


def optimum_at(case: TestbedCase, progress: float) -> torch.Tensor:
    """The best interior points at ``progress`` in [0, 1] of the run, float64 ``(d - 1,)``."""
    start = torch.tensor(case.optimum, dtype=torch.float64)
    if case.drift_to is None:
        return start
    return start + (torch.tensor(case.drift_to, dtype=torch.float64) - start) * progress


def arm_value(case: TestbedCase | TvoCase, arm: Sequence[float] | torch.Tensor, progress: float) -> float:
    """``f(b, p)`` in [0, 1] (module docstring): 1 at the optimum, ``1 - f`` is the arm's regret
    (a :class:`~tvolib.bandit.testbed_tvo.TvoCase`: ``1 - regret``, which may fall below 0).

    Raises:
        ValueError: an arm of another length than ``d - 1`` on a ``"points"`` case.
    """
    if isinstance(case, TvoCase):
        return 1.0 - case.regret(arm, progress)
    b = torch.sort(torch.as_tensor(arm, dtype=torch.float64).reshape(-1)).values
    if case.metric == "step":
        sq = float(step_distance(b, optimum_at(case, progress))) ** 2
    elif b.numel() != case.d - 1:
        raise ValueError(f"case {case.name!r} compares the sorted points of arms of {case.d - 1} points; got "
                         f"{b.numel()} (a case with metric='step' takes arms of any length)")
    else:
        sq = float(((b - optimum_at(case, progress)) ** 2).mean())
    return math.exp(-sq / (2 * case.width**2))


def calibrated_width(d: int, optimum: Sequence[float], drift_to: Sequence[float] | None = None,
                     target: float = RANDOM_REGRET, n_arms: int = 4096, metric: str = "points") -> float:
    """The width at which random arms of the staggered domain have mean regret ``target`` at mid-run.

    Random arms are drawn as :class:`~tvolib.bandit.RandomSchedule` draws them (uniform in the
    staggered box ``[0.05, 0.95 k / (d - 1)]``, sorted), from a fixed seed, and compared with the
    optimum in ``metric`` (:data:`METRICS`); the width is found by bisection (the mean regret
    falls as the width grows).

    Raises:
        ValueError: ``d`` below 2, an optimum (or ``drift_to``) that is not ``d - 1`` sorted finite points
            in [0, 1], an unknown ``metric``, a ``target`` outside (0, 1), ``n_arms`` below 1, or no
            width in [1e-4, 10] that reaches the target.

    Example:
        >>> calibrated_width(2, (0.2,))
        0.1158
    """
    d = check_int("d", d, 2)
    centre = torch.tensor(_finite_points("optimum", optimum, d - 1), dtype=torch.float64)
    if drift_to is not None:
        centre = (centre + torch.tensor(_finite_points("drift_to", drift_to, d - 1), dtype=torch.float64)) / 2
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}; got {metric!r}")
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < target < 1.0:
        raise ValueError(f"target must be a mean regret strictly between 0 and 1; got {target!r}")
    arms = random_arms(d, check_int("n_arms", n_arms, 1))
    sq = step_distance(arms, centre) ** 2 if metric == "step" else ((arms - centre) ** 2).mean(-1)
    lo, hi = 1e-4, 10.0
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        regret = 1.0 - float(torch.exp(-sq / (2 * mid**2)).mean())
        lo, hi = (mid, hi) if regret > target else (lo, mid)
    width = math.sqrt(lo * hi)
    if not 1.001e-4 < width < 9.99:
        raise ValueError(f"no width in [1e-4, 10] gives random arms a mean regret of target={target!r} for this "
                         f"optimum (the bisection ended on its bound, {width:.4g})")
    return round(width, 4)


def _log_like(d: int) -> tuple[float, ...]:
    """Log-spaced interior points from the box's lower bound, ``0.05 * 20^(k / (d - 1))`` (the log
    schedule with ``beta_1 = 0.05``; one point on the bound), or 0.2 at ``d = 2``."""
    if d == 2:
        return (0.2,)
    return tuple(round(float(v), 4) for v in log_uniform(d, beta1=0.05)[1:])


def _linear_like(d: int) -> tuple[float, ...]:
    """Evenly spread interior points inside the staggered domain: ``0.8 k / (d - 1)`` (0.5 at d = 2)."""
    if d == 2:
        return (0.5,)
    return tuple(round(0.8 * k / (d - 1), 4) for k in range(1, d))


def _corner(d: int) -> tuple[float, ...]:
    """A corner of the staggered domain: every point on 0.05 but the last, on 0.95 (what the code's
    default falls on; spaced 1e-4 as its projection keeps them)."""
    return tuple(round(0.05 + 1e-4 * k, 4) for k in range(d - 2)) + (0.95,)


def _late(d: int) -> tuple[float, ...]:
    """Late in training the points move towards 1 (the paper's Fig 3): 85% of the way from 0.05 to
    each point's upper bound in the staggered domain."""
    return tuple(round(0.05 + 0.85 * (u - 0.05), 4) for u in staggered_upper(d, 0.05, 0.95))


def _cases() -> dict[str, TestbedCase]:
    cases: dict[str, TestbedCase] = {}
    for d in (2, 5, 10):
        for kind, optimum in (("log", _log_like(d)), ("linear", _linear_like(d)), ("corner", _corner(d))):
            if d == 2 and kind == "corner":
                continue  # one point: no corner to speak of
            width = calibrated_width(d, optimum)
            for trend in TRENDS:
                name = f"d{d}-{kind}-{trend}"
                cases[name] = TestbedCase(name, d, optimum, trend=trend, width=width)
        width = calibrated_width(d, _log_like(d), _late(d))
        for trend in ("strong", "quick"):
            name = f"d{d}-drift-{trend}"
            cases[name] = TestbedCase(name, d, _log_like(d), _late(d), trend=trend, width=width)
    for d, optimum in ((3, STEP_OPTIMUM_D3), (5, _linear_like(5)), (10, _linear_like(10))):
        width = calibrated_width(d, optimum, metric="step")
        for trend in ("mild", "strong"):
            name = f"d{d}-step-{trend}"
            cases[name] = TestbedCase(name, d, optimum, trend=trend, width=width, metric="step")
        name = f"d{d}-step-mild-quiet"
        cases[name] = TestbedCase(name, d, optimum, trend="mild", width=width, noise=QUIET_NOISE, metric="step")
    return cases


#: The best schedule of the ``d3-step`` cases: two interior points, neither on an edge.
STEP_OPTIMUM_D3 = (0.3, 0.65)
# QUIET_NOISE (tvolib.bandit.testbed_common), the per-epoch noise of the ``-quiet`` step cases, a
# fifth of the default 0.5: the largest (to one figure) at which an oracle separates every step
# case's optimum from the best arm of one point fewer by three standard errors in the system tests'
# 160 epochs (module docstring). The ten-point case sets it: its ninth interior point is worth
# ``Delta_9 = 0.048`` (:func:`~tvolib.bandit.oracle.best_regrets`), and ``0.048 sqrt(160 / 4) / 3 = 0.10``.


#: Every case: ``d{2,5,10}-{log,linear,corner}-{none,mild,strong,quick}`` (no corner at d = 2),
#: ``d{2,5,10}-drift-{strong,quick}`` (log-like to late optimum) and, compared by step functions
#: (arms of any length), ``d{3,5,10}-step-{mild,strong,mild-quiet}`` (two interior points best;
#: four, spread; nine, spread; ``mild-quiet``: the mild trend at :data:`QUIET_NOISE`); then the
#: cases of the TVO's form, ``d*-tvo-*`` (:data:`~tvolib.bandit.testbed_tvo.TVO_CASES`).
CASES: dict[str, TestbedCase | TvoCase] = {**_cases(), **TVO_CASES}
