"""A prototype: the GP bandit searching a trust region around an incumbent that starts at log (TuRBO's idea).

Arms are offsets from an incumbent, in logit units, within a trust region of side ``L``: the
incumbent starts as the log schedule (``log_uniform(d)`` projected into the box); the first three
rounds train it and two arms around it; then every round fits the ``tvolib`` protocol's GP (arm
kernel on the sorted points, time kernel, trend), takes as incumbent the observed arm of the
highest posterior arm effect now, and trains the best of 512 uniform draws in the region around
it by the upper confidence bound of the arm effect. As in TuRBO (Eriksson et al., 2019), ``L``
doubles after three rounds in a row whose new arm became the incumbent, halves after ``d - 1``
rounds in a row whose did not, and restarts at 1 below 1/16; it stays at most 2.

Not shipped: a measurement for the test bed only (``integrand_candidates.py --candidates "trust
region"``), item by item as the other candidates.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from tvolib.bandit import GPBanditSchedule
from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.posterior import observations
from tvolib.tvo import log_uniform

__all__ = ["TrustRegionSchedule"]

#: Initial side, bounds, success and draw counts of the trust region (logit units).
START, LOWEST, HIGHEST, SUCCESSES, DRAWS = 1.0, 1.0 / 16, 2.0, 3, 512


def _logit(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x) - torch.log1p(-x)


class TrustRegionSchedule(GPBanditSchedule):
    """GP-UCB in a trust region around an incumbent that starts at log (see the module)."""

    def __init__(self, d: int, **options: Any) -> None:
        options = {"protocol": "tvolib", "n_init": 3, "corner_guards": False, **options}
        self._incumbent: list[float] | None = None
        super().__init__(d, **options)
        self._side, self._wins, self._losses = START, 0, 0

    def _random_arm(self) -> torch.Tensor:
        if self._incumbent is None:  # the first arm (drawn in __init__): the log schedule, projected
            self._incumbent = self._finalise_arm(log_uniform(self.d)[1:]).tolist()
            return torch.tensor(self._incumbent, dtype=torch.float64)
        return self._finalise_arm(self._around(torch.tensor(self._incumbent, dtype=torch.float64), 1)[0])

    def _around(self, centre: torch.Tensor, count: int) -> torch.Tensor:
        """``count`` arms drawn uniformly in the region of side ``L`` around ``centre`` (logit units),
        clamped to the box and sorted (not yet finalised: only the one trained is)."""
        move = self._side * (torch.rand(count, self.n_arm, generator=self._gen, dtype=torch.float64) - 0.5)
        return torch.sigmoid(_logit(centre) + move).clamp(self.lo, self.hi).sort(dim=-1).values

    def _choose_next(self) -> dict[str, Any]:
        arms, rounds, rewards = observations(self._history, max_observations=self.max_observations)
        if rewards.numel() < self.n_init:
            self._arm = self._random_arm().tolist()
            return self._empty_decision("random")
        gp, fit, data = self._fitted_gp(arms, rounds, rewards)
        unit = lambda a: ((a - self.lo) / (self.hi - self.lo)).to(self.device)  # noqa: E731
        observed = [torch.tensor(sorted(a), dtype=torch.float64) for a in arms.tolist()]
        mean, _ = arm_effect_posterior(gp, [unit(a) for a in observed])
        best = int(mean.argmax())
        self._update_side(won=best == len(observed) - 1)
        self._incumbent = observed[best].tolist()
        draws = self._around(observed[best], DRAWS)
        kappa = self.current_kappa(self._round + 1, int(rewards.numel()))
        mean, cov = arm_effect_posterior(gp, [unit(a) for a in draws])
        ucb = mean + math.sqrt(kappa) * cov.diagonal().clamp_min(1e-12).sqrt()
        pick = int(ucb.argmax())
        self._arm = self._finalise_arm(draws[pick]).tolist()
        return {**self._empty_decision("gp"), "kappa": kappa, "acq_value": float(ucb[pick]),
                "lengthscale": fit.hyperparameters.lengthscale, "n_obs": int(rewards.numel()),
                "t_pred": self._round + 1, "y_mean": data.y_mean, "y_std": data.y_std}

    def _update_side(self, won: bool) -> None:
        self._wins, self._losses = (self._wins + 1, 0) if won else (0, self._losses + 1)
        if self._wins >= SUCCESSES:
            self._side, self._wins = min(2 * self._side, HIGHEST), 0
        elif self._losses >= max(self.d - 1, 2):
            self._side, self._losses = self._side / 2, 0
        if self._side < LOWEST:
            self._side = START
