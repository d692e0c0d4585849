"""A prototype: the integrand protocol with a floor on the cost part's share of the GP's variance.

On the test bed's five-point TVO-form cases the integrand protocol's fits put the share of the
prior variance that the cost of points (the part the integrand does not show) takes at its lower
bound, 1e-4, on most rounds, the trend taking the rest; its arms then stay at the bias-optimal
ones. This variant fits with that share at least :data:`FLOOR` (chosen before any run, not tuned),
so that the GP keeps a cost it can learn. Not shipped: a candidate of ``integrand_candidates.py``
(``"integrand, cost share >= 0.1"``); ``replay`` and ``reward_posterior`` do not know the floor.
"""
from __future__ import annotations

from typing import Any

from tvolib.bandit import pointwise
from tvolib.bandit.integrand_bandit import IntegrandBanditSchedule

__all__ = ["CostFloorSchedule", "FLOOR"]

#: The least share of the prior variance that the cost part keeps (the trend's share at most 1 - FLOOR).
FLOOR = 0.1


class CostFloorSchedule(IntegrandBanditSchedule):
    """:class:`IntegrandBanditSchedule` whose GP fits keep the cost part's share at least :data:`FLOOR`."""

    def _choose_next(self) -> dict[str, Any]:
        saved = pointwise.POINTWISE_BOUNDS
        pointwise.POINTWISE_BOUNDS = {**saved, "trend_share": (saved["trend_share"][0], 1.0 - FLOOR)}
        try:
            return super()._choose_next()
        finally:
            pointwise.POINTWISE_BOUNDS = saved
