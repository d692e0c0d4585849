"""What a user would pick instead of the bandit, on the test bed: fixed schedules and integrand rules.

Beside the bandits and random arms, every test-bed case (:mod:`tvolib.bandit.testbed`) is run
with the schedules a user would otherwise keep (:data:`BASELINES`):

* ``log_uniform(d)`` at its default ``beta_1 = 0.025``;
* the best ``log_uniform(d)`` over :data:`LOG_BETA1_GRID` (seven values of ``beta_1`` from 0.001 to
  0.2, the grid search a user would run: seven runs), best in hindsight on the case;
* ``linear(d)``;
* where the case defines an integrand (:class:`~tvolib.bandit.testbed_tvo.TvoCase`), the moments
  schedule of the case's own ``f`` (equal steps in ``f``, as :func:`tvolib.schedules.moments`) and
  the bias-optimal schedule (the points that minimise the left-sum gap of ``f`` alone, as
  :func:`tvolib.bias_optimal.bias_optimal_points`, blind to the hidden cost), both re-estimated
  every 6 epochs as :class:`~tvolib.schedules.MomentsSchedule` is, from ``log_uniform(d)``.

None of them reads the rewards, so each has one regret per case whatever the noise's seed
(:func:`baseline_results` runs each once).

The grid-searched log above keeps the ``beta_1`` of the least regret, which the test bed knows and
a user does not: it is the grid search's best case. :func:`user_grid_results` is the grid search a
user runs (:data:`USER_GRID`): the seven log runs, each with its own noise, and the one of the
highest evidence at the end kept (:attr:`~tvolib.bandit.testbed_run.CaseResult.evidence`). Its
regret depends on the noise, so it has one result per seed.

Example:
    >>> from tvolib.bandit.testbed import CASES
    >>> case = CASES["d5-tvo-lg-strong"]
    >>> IntegrandRule(case, "moments").current().shape
    torch.Size([5])
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..bias_optimal import bias_optimal_points
from ..checks import check_int
from ..schedules import FixedSchedule, Schedule
from ..tvo import linear, log_uniform
from .testbed_common import Case
from .testbed_run import CaseResult, run_cases
from .testbed_tvo import INTEGRANDS, TvoCase

__all__ = ["BASELINES", "LOG_BETA1_GRID", "USER_GRID", "USER_GRID_SEED", "FixedFactory", "IntegrandRule",
           "IntegrandRuleFactory", "baseline_jobs", "baseline_results", "user_grid_results"]

#: The ``beta_1`` grid of the grid-searched log schedule (its cost: one run per value).
LOG_BETA1_GRID = (0.001, 0.003, 0.01, 0.025, 0.05, 0.1, 0.2)
#: The baselines by label: ``"log"`` (the default ``beta_1``), ``"log (best beta_1)"`` (the best of
#: :data:`LOG_BETA1_GRID`, seven runs), ``"linear"``, ``"moments"`` and ``"bias-optimal"`` (the last
#: two on cases with an integrand only).
BASELINES = ("log", "log (best beta_1)", "linear", "moments", "bias-optimal")
#: The label of the grid search a user runs: the log schedule of the highest final evidence (7 runs).
USER_GRID = "log (kept by evidence)"
#: The user's grid search for seed ``s`` trains ``beta_1 = LOG_BETA1_GRID[k]`` with the noise seed
#: ``USER_GRID_SEED + 7 s + k``: seven independent runs, apart from the bandits' seeds.
USER_GRID_SEED = 1000
#: Epochs between the integrand rules' re-estimates (:class:`~tvolib.schedules.MomentsSchedule`'s default).
UPDATE_EVERY = 6


@dataclass(frozen=True)
class FixedFactory:
    """A picklable ``seed -> FixedSchedule(betas)`` (the seed is not used).

    Example:
        >>> FixedFactory((0.0, 0.5))(seed=3).current().tolist()
        [0.0, 0.5]
    """

    betas: tuple[float, ...]

    def __call__(self, seed: int) -> Schedule:
        return FixedSchedule(list(self.betas))


class IntegrandRule(Schedule):
    """The moments or bias-optimal schedule of a case's own integrand at the run's progress.

    Starts from ``log_uniform(d)``; at ``step(e)`` with ``e`` a multiple of ``update_every`` it
    reads ``f`` at the progress of the next epoch, ``p = e / (T - 1)`` (what the model looks like
    after epoch ``e``), on the integrand's grid, and moves to ``rule``'s points:

    * ``"moments"``: ``f(b_j) = f(0) + j (f(1) - f(0)) / d`` (``f`` interpolated linearly);
    * ``"bias-optimal"``: the grid points that minimise the left-sum gap of ``f``.

    Args:
        case: a :class:`~tvolib.bandit.testbed_tvo.TvoCase`.
        rule: ``"moments"`` or ``"bias-optimal"``.
        update_every: epochs between re-estimates, an int >= 1.
    """

    RULES = ("moments", "bias-optimal")

    def __init__(self, case: TvoCase, rule: str, update_every: int = UPDATE_EVERY) -> None:
        if not isinstance(case, TvoCase):
            raise ValueError(f"case must be a TvoCase (a case with an integrand); got {type(case).__name__}")
        if rule not in self.RULES:
            raise ValueError(f"rule must be one of {list(self.RULES)}; got {rule!r}")
        self.case, self.rule = case, rule
        self.update_every = check_int("update_every", update_every, 1)
        self._betas = log_uniform(case.d)
        self._history: list[dict[str, Any]] = []

    @property
    def d(self) -> int:
        return self.case.d

    def current(self) -> torch.Tensor:
        return self._betas.clone()

    def step(self, epoch: int, evidence: float | None = None, log_weights: Callable[[], torch.Tensor] | None = None
             ) -> None:
        epoch = check_int("epoch", epoch, 0)
        if epoch == 0 or epoch % self.update_every:
            return
        progress = min(epoch / max(self.case.epochs - 1, 1), 1.0)
        integrand = INTEGRANDS[self.case.integrand]
        grid = integrand.grid()
        with torch.no_grad():
            f = integrand.values(grid, progress)
        self._betas = _moments(self.case.d, grid, f) if self.rule == "moments" else bias_optimal_points(
            self.case.d, grid, f)
        self._history.append({"epoch": epoch, "betas": self._betas.tolist()})

    def history(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._history]

    def state_dict(self) -> dict[str, Any]:
        return {"betas": self._betas.clone(), "history": self.history()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._betas, self._history = state["betas"].clone(), [dict(row) for row in state["history"]]


def _moments(d: int, grid: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Equal steps in ``f``: ``b_j`` with ``f(b_j) = f(0) + j (f(1) - f(0)) / d``, ``f`` piecewise linear."""
    rising = torch.cummax(f, 0).values  # non-decreasing (the recorded estimate is rounded)
    targets = rising[0] + (rising[-1] - rising[0]) * torch.arange(1, d, dtype=torch.float64) / d
    k = (torch.searchsorted(rising, targets) - 1).clamp(0, grid.numel() - 2)
    step = (rising[k + 1] - rising[k]).clamp_min(1e-300)
    b = grid[k] + (targets - rising[k]) / step * (grid[k + 1] - grid[k])
    for j in range(1, b.numel()):  # a flat stretch could tie two points: keep the schedule valid
        b[j] = torch.maximum(b[j], b[j - 1] + 1e-9)
    return torch.cat([torch.zeros(1, dtype=torch.float64), b.clamp(max=1 - 1e-9)])


@dataclass(frozen=True)
class IntegrandRuleFactory:
    """A picklable ``seed -> IntegrandRule(case, rule)`` (the seed is not used)."""

    case: TvoCase
    rule: str

    def __call__(self, seed: int) -> Schedule:
        return IntegrandRule(self.case, self.rule)


def baseline_jobs(case: Case) -> list[tuple[str, float | None, Callable[[int], Schedule]]]:
    """The runs behind the baselines of ``case``: ``(label, beta_1 or None, factory)``; the log grid's
    runs all carry the label ``"log (best beta_1)"`` (the default's run is the grid's 0.025)."""
    jobs: list[tuple[str, float | None, Callable[[int], Schedule]]] = [
        ("log (best beta_1)", b, FixedFactory(tuple(log_uniform(case.d, beta1=b).tolist()))) for b in LOG_BETA1_GRID]
    jobs.append(("linear", None, FixedFactory(tuple(linear(case.d).tolist()))))
    if isinstance(case, TvoCase):
        jobs += [(rule, None, IntegrandRuleFactory(case, rule)) for rule in IntegrandRule.RULES]
    return jobs


def baseline_results(cases: Sequence[Case], max_workers: int = 2) -> list[dict[str, Any]]:
    """Every baseline of :data:`BASELINES` on every case, one run each (seed 0: none reads the noise).

    Returns:
        One record per case and baseline: ``case``, ``protocol`` (the label), ``beta1`` (the log
        rows' ``beta_1``, else None), ``runs`` (what the baseline costs in runs: 7 for the grid
        search, else 1) and ``result`` (its :class:`~tvolib.bandit.testbed_run.CaseResult`).
    """
    plan = [(case, label, beta1, factory) for case in cases for label, beta1, factory in baseline_jobs(case)]
    results = run_cases([(case, factory, 0) for case, _, _, factory in plan], max_workers)
    records: list[dict[str, Any]] = []
    for case in cases:
        runs = [(label, beta1, result) for (c, label, beta1, _), result in zip(plan, results) if c is case]
        grid = [(beta1, result) for label, beta1, result in runs if label == "log (best beta_1)"]
        default = next(result for beta1, result in grid if beta1 == 0.025)
        best_beta1, best = min(grid, key=lambda item: item[1].regret)
        records.append(_record(case, "log", 0.025, 1, default))
        records.append(_record(case, "log (best beta_1)", best_beta1, len(grid), best))
        records += [_record(case, label, None, 1, result) for label, _, result in runs
                    if label != "log (best beta_1)"]
    return records


def _record(case: Case, label: str, beta1: float | None, runs: int, result: CaseResult) -> dict[str, Any]:
    return {"case": case, "protocol": label, "beta1": beta1, "runs": runs, "result": result}


def user_grid_results(cases: Sequence[Case], seeds: Sequence[int], max_workers: int = 2) -> list[dict[str, Any]]:
    """The grid search a user runs (:data:`USER_GRID`), on every case, once per seed.

    For seed ``s``, ``log_uniform(d, beta_1)`` is run for each ``beta_1`` of :data:`LOG_BETA1_GRID`
    with the noise seed ``USER_GRID_SEED + 7 s + k``, and the run whose evidence at the end is
    highest is kept: what a user who grid-searches ``beta_1`` trains with.

    Returns:
        One record per case and seed: ``case``, ``protocol`` (:data:`USER_GRID`), ``beta1`` (the
        ``beta_1`` kept), ``runs`` (7), ``seed`` and ``result`` (the kept run's
        :class:`~tvolib.bandit.testbed_run.CaseResult`).

    Example:
        >>> from tvolib.bandit.testbed import CASES
        >>> record = user_grid_results([CASES["d2-log-strong"]], [0], max_workers=1)[0]  # doctest: +SKIP
        >>> record["beta1"] in LOG_BETA1_GRID, record["runs"]  # doctest: +SKIP
        (True, 7)
    """
    n = len(LOG_BETA1_GRID)
    seeds = [check_int("seed", seed, 0) for seed in seeds]
    plan = [(case, seed, beta1) for case in cases for seed in seeds for beta1 in LOG_BETA1_GRID]
    results = run_cases([(case, FixedFactory(tuple(log_uniform(case.d, beta1=beta1).tolist())),
                          USER_GRID_SEED + n * seed + LOG_BETA1_GRID.index(beta1)) for case, seed, beta1 in plan],
                        max_workers)
    records: list[dict[str, Any]] = []
    for start in range(0, len(plan), n):
        runs = list(zip(plan[start:start + n], results[start:start + n]))
        (case, seed, beta1), kept = max(runs, key=lambda item: item[1].evidence)
        records.append({**_record(case, USER_GRID, beta1, n, kept), "seed": seed})
    return records
