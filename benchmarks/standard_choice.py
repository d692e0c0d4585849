"""A prototype: the GP bandit choosing among the standard schedules a user would try, not over all arms.

The arms are the log schedules of the grid-searched log baseline (``log_uniform(d, beta_1)`` for
``beta_1`` in :data:`~tvolib.bandit.testbed_baselines.LOG_BETA1_GRID`) and ``linear(d)``: a family
of eight schedules, the same at every ``d``. The first eight rounds train each once (in an order
drawn from the seed); then every round fits the ``tvolib`` protocol's GP (arm kernel on the sorted
points, time kernel, trend) and trains the family member of the largest upper confidence bound of
the arm effect at the next round. It is the grid search made online: one run instead of eight,
and free to move from one member to another as the optimum moves.

:class:`StandardAndBiasOptimalSchedule` adds a ninth member where an integrand is read (as the
integrand protocol reads it): the bias-optimal schedule of the integrand read at the window's end
(:func:`~tvolib.bias_optimal.bias_optimal_points`), which moves as the integrand does.

Not shipped: a measurement for the test bed only (``integrand_candidates.py --candidates
"standard choice"``), to learn whether a low-dimensional family closes the gap to the grid-searched
log before it is built into the package (state, resume, ``replay``, stacks).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tvolib.bandit import GPBanditSchedule
from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.known import integrand_grid, read_integrand
from tvolib.bandit.posterior import observations
from tvolib.bandit.testbed_baselines import LOG_BETA1_GRID
from tvolib.bias_optimal import bias_optimal_points
from tvolib.tvo import linear, log_uniform

__all__ = ["ReadsIntegrand", "StandardAndBiasOptimalSchedule", "StandardChoiceSchedule", "choose_member", "standard_family", "ucb_best"]

#: The box of the family's arms: the grid's smallest beta_1 up to the tvolib protocol's top.
BOX = (0.001, 0.95)


def standard_family(d: int) -> list[list[float]]:
    """The log schedules of the beta_1 grid and the linear one, interior points (``d - 1`` each)."""
    family = [log_uniform(d, beta1=b)[1:].tolist() for b in LOG_BETA1_GRID]
    return family + [linear(d)[1:].tolist()]


class StandardChoiceSchedule(GPBanditSchedule):
    """GP-UCB over :func:`standard_family` (the ``tvolib`` protocol's GP; see the module)."""

    def __init__(self, d: int, **options: Any) -> None:
        self._family = standard_family(d)
        self._order: list[int] | None = None
        options = {"protocol": "tvolib", "box": BOX, "n_init": len(self._family), "corner_guards": False,
                   **options}
        super().__init__(d, **options)

    def _member(self, round_index: int) -> list[float]:
        if self._order is None:  # drawn on first use: the base class draws the first arm in __init__
            self._order = torch.randperm(len(self._family), generator=self._gen).tolist()
        return list(self._family[self._order[round_index % len(self._order)]])

    def _random_arm(self) -> torch.Tensor:
        return torch.tensor(self._member(self._round), dtype=torch.float64)

    def _choose_next(self) -> dict[str, Any]:
        arms, rounds, rewards = observations(self._history, max_observations=self.max_observations)
        if rewards.numel() < self.n_init:
            self._arm = self._member(self._round + 1)
            return self._empty_decision("random")
        return choose_member(self, self._family, arms, rounds, rewards)


def ucb_best(mean: torch.Tensor, cov: torch.Tensor, kappa: float) -> tuple[int, float]:
    """The index and value of the largest ``mean + sqrt(kappa) sd``."""
    ucb = mean + math.sqrt(kappa) * cov.diagonal().clamp_min(1e-12).sqrt()
    best = int(ucb.argmax())
    return best, float(ucb[best])


def choose_member(schedule: GPBanditSchedule, family: list[list[float]], arms: torch.Tensor, rounds: torch.Tensor,
                  rewards: torch.Tensor) -> dict[str, Any]:
    """Fit ``schedule``'s GP, set its next arm to the member of ``family`` of the largest UCB of the arm
    effect at the next round, and return the round's decision record."""
    gp, fit, data = schedule._fitted_gp(arms, rounds, rewards)
    kappa = schedule.current_kappa(schedule._round + 1, int(rewards.numel()))
    lo, hi = schedule.lo, schedule.hi
    unit = [(torch.tensor(arm, dtype=torch.float64) - lo) / (hi - lo) for arm in family]
    best, value = ucb_best(*arm_effect_posterior(gp, [x.to(schedule.device) for x in unit]), kappa)
    schedule._arm = list(family[best])
    return {**schedule._empty_decision("gp"), "kappa": kappa, "acq_value": value,
            "lengthscale": fit.hyperparameters.lengthscale, "n_obs": int(rewards.numel()),
            "t_pred": schedule._round + 1, "y_mean": data.y_mean, "y_std": data.y_std}


class ReadsIntegrand:
    """A mixin for a :class:`GPBanditSchedule`: ``step`` takes the integrand (a callable or the loop's
    ``log_weights``) and keeps it in ``self._inputs`` while the base class's ``step`` runs."""

    reads_integrand = True
    _inputs: tuple[Any, Any] = (None, None)

    def step(self, epoch: int, evidence: Any = None, log_weights: Callable[[], torch.Tensor] | None = None,
             integrand: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self._inputs = (integrand, log_weights)
        try:
            super().step(epoch, evidence=evidence)  # type: ignore[misc]
        finally:
            self._inputs = (None, None)


class StandardAndBiasOptimalSchedule(ReadsIntegrand, StandardChoiceSchedule):
    """:class:`StandardChoiceSchedule` with the bias-optimal schedule of the latest integrand as a member."""

    def __init__(self, d: int, **options: Any) -> None:
        super().__init__(d, **options)
        self._standard = list(self._family)
        self._grid = integrand_grid(*self.box)

    def _choose_next(self) -> dict[str, Any]:
        integrand, log_weights = self._inputs
        f = read_integrand(self._grid, integrand=integrand, log_weights=log_weights)
        self._family = list(self._standard)
        if f is not None:
            self._family.append(bias_optimal_points(self.d, self._grid, f)[1:].tolist())
        return super()._choose_next()
