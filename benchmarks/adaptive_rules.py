"""Rules for the adaptive-d bandit's choice of d, on the test bed's two step cases.

:class:`tvolib.bandit.AdaptiveDBanditSchedule` offers two: ``thompson`` (the default: one joint
posterior draw at every ``d``'s GP-UCB maximiser, the largest wins) and ``margin`` (the smallest
``d`` whose best GP-UCB value is within a margin of the largest, then points dropped while the
value stays within it; where nine spread points are best, ``d10-step-mild``, that keeps it at 3 to
4 points). The other rules here change only the margin rule's choice (same GP, windows, budget and
margin ``d_tolerance sqrt(kappa (1 - phi_trend))``):

* ``grow``: each ``d``'s search also starts from the best arm of ``d - 1`` points plus one point
  (at the middle of each of its gaps), so that the best value found never falls with ``d``; the
  choice of ``d`` and the dropping of points are the library's.
* ``confident``: ``grow``'s search; ``d`` is the GP-UCB maximiser over all ``d``; then points are
  dropped, the least useful first, unless the posterior is one standard deviation sure that the
  point helps (the posterior mean of ``f(b) - f(b without the point)`` over its standard deviation
  at least 1; no margin).
* ``optimistic``: as ``confident``, but a point is dropped only while even its optimistic gain,
  that posterior mean plus ``sqrt(kappa)`` standard deviations, is below the margin: points the GP
  knows little about are kept and trained, and dropped once it has learnt they add nothing.

``nested`` changes the Thompson rule instead: the candidates of its one joint posterior draw are
every ``d``'s GP-UCB maximiser and the arms it nests (less one point, then two, ..., each time the
point whose loss lowers the posterior mean least, down to ``d_min``); the largest draw trains, ties
to the fewer points. A point then stays with the posterior probability that it helps, and there is
still no constant to set.

``fixed-<d>`` (``d`` from 2 to 10) is the paper's bandit at that fixed ``d`` (the tvolib protocol),
for comparison.

Printed for each rule and case: the ``d`` each seed trains most in the second half of the run, and
the mean regret of the second half's arms, at the system tests' acquisition budget; for the
adaptive bandits, also the ``d`` recommended at the last GP round (the class's recommendation,
which does not change what is trained) and the regret of its arm.

    .venv/bin/python benchmarks/adaptive_rules.py [rules] [seeds] [epochs] [cases]   # 3 minutes a rule, 2 cores

e.g. ``benchmarks/adaptive_rules.py thompson,margin,grow,confident,optimistic 4`` (the defaults;
``seeds`` is a count from 0 or a range ``start:stop``; ``epochs`` defaults to the cases' 160;
``cases``, step cases of :mod:`tvolib.bandit.testbed` separated by commas, defaults to
``d3-step-mild,d10-step-mild``). ``benchmarks/adaptive_rules.py thompson 0:12 480
d3-step-mild-quiet,d5-step-mild-quiet,d10-step-mild-quiet`` runs the library's bandit where the
rewards can tell ``d`` (20 minutes).
"""
from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import torch
from torch import Tensor

from tvolib.bandit.acquisition import GPUCB, PaddedArms, maximize_ucb
from tvolib.bandit.adaptive import AdaptiveDBanditSchedule
from tvolib.bandit.model import BanditGP
from tvolib.bandit.scheduler import GPBanditSchedule

from adaptive_tolerance import STEP_CASES, compare, seed_range, step_cases  # benchmarks/, this script's folder


def difference_posterior(gp: BanditGP, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Posterior mean and standard deviation of the arm effect's ``f(a) - f(b)``, row by row
    (GP inputs ``(M, n_arm + 1)``): ``var = k(a, a) + k(b, b) - 2 k(a, b) - dk^T K^-1 dk``."""
    X, _ = gp._require_data()
    cache = gp._posterior_cache()
    dk = gp.covar(a, X, "arm") - gp.covar(b, X, "arm")
    mean = dk @ cache["alpha"]
    var = (gp.prior_variance(a, "arm") + gp.prior_variance(b, "arm") - 2 * gp.covar(a, b, "arm").diagonal()
           - ((dk @ cache["K_inv"]) * dk).sum(-1))
    return mean, var.clamp_min(1e-18).sqrt()


class GrowSearch(AdaptiveDBanditSchedule):
    """``grow``: each ``d``'s search also starts from the best arm of ``d - 1`` points plus one."""

    def _maximise(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        best = super()._maximise(gp, kappa, seed)
        for d in range(self.d_min + 1, self.d_max + 1):
            upper = self._normalised_upper(d).to(best[d][0])
            points = torch.sort(best[d - 1][0]).values
            edges = torch.cat([points.new_zeros(1), points, upper[-1:]])
            middles = (edges[:-1] + edges[1:]) / 2
            grown = torch.sort(torch.cat([points.expand(len(middles), -1), middles[:, None]], -1), -1).values
            grown = torch.minimum(grown, upper)
            with torch.no_grad():
                values = GPUCB(PaddedArms(gp, d - 1), kappa)(
                    torch.cat([grown, torch.ones_like(grown[:, :1])], -1).unsqueeze(-2))
            initial = grown[torch.argsort(values, descending=True)[:2]]
            with torch.random.fork_rng(devices=[]):  # BoTorch's randomness: seeded, global RNG untouched
                torch.manual_seed(seed + 100 + d)
                x, value = maximize_ucb(PaddedArms(gp, d - 1), t_norm=1.0, kappa=kappa, seed=seed + 100 + d,
                                        maxiter=self.acq_maxiter, upper=upper, initial=initial)
            if value > best[d][1]:
                best[d] = (x, value)
        return best


class ConfidentPoints(GrowSearch):
    """``confident``: the GP-UCB maximiser over all ``d``, then drop each point the posterior is not
    one standard deviation sure helps."""

    def _maximise(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        best = super()._maximise(gp, kappa, seed)
        top = max(best, key=lambda d: best[d][1])
        return {top: best[top]}  # the library's parsimony then has one d to choose from

    def _point_scores(self, gain: Tensor, sd: Tensor, kappa: float, margin: float) -> Tensor:
        """A score per point of the arm: the lowest-scored point is dropped while its score is below 0.
        Here the posterior mean gain over its standard deviation, less one."""
        return gain / sd - 1.0

    def _simplify(self, gp: BanditGP, kappa: float, x: Tensor, value: float, floor: float
                  ) -> tuple[Tensor, float, int]:
        margin, dropped = value - floor, 0
        with torch.no_grad():
            while x.numel() + 1 > self.d_min:
                n = x.numel()
                without = x.expand(n, -1)[~torch.eye(n, dtype=torch.bool)].reshape(n, n - 1)
                t = torch.ones(n, 1, dtype=x.dtype)
                whole = PaddedArms(gp, n).pad(torch.cat([x.expand(n, -1), t], -1))
                gain, sd = difference_posterior(gp, whole, PaddedArms(gp, n - 1).pad(torch.cat([without, t], -1)))
                score = self._point_scores(gain, sd, kappa, margin)
                k = int(torch.argmin(score))
                if float(score[k]) >= 0:
                    break
                x, dropped = without[k], dropped + 1
        return x, value, dropped


class OptimisticPoints(ConfidentPoints):
    """``optimistic``: drop a point only while its optimistic gain is below the margin."""

    def _point_scores(self, gain: Tensor, sd: Tensor, kappa: float, margin: float) -> Tensor:
        return gain + math.sqrt(kappa) * sd - margin


class NestedThompson(AdaptiveDBanditSchedule):
    """``nested``: Thompson sampling over every ``d``'s GP-UCB maximiser and the arms it nests,
    the maximiser less one point, then less two, ... (each time the point whose loss lowers the
    posterior mean least), down to ``d_min``. One joint draw at all of them; the largest draw
    trains, ties to the fewer points. A point stays with the posterior probability that it helps.
    The history's ``acq_by_d`` keeps the maximisers' GP-UCB values; a nested arm's ``acq_value`` is
    its draw, and ``points_dropped`` stays 0."""

    @staticmethod
    def _thompson_draws(gp: BanditGP, best: dict[int, tuple[Tensor, float]], seed: int) -> dict[int, float]:
        candidates: list[tuple[int, Tensor]] = []
        for d, (x, _) in best.items():
            candidates.append((d, x))
            with torch.no_grad():
                while x.numel() >= min(best):  # a drop leaves at least d_min - 1 points
                    n = x.numel()
                    without = x.expand(n, -1)[~torch.eye(n, dtype=torch.bool)].reshape(n, n - 1)
                    rows = PaddedArms(gp, n - 1).pad(torch.cat([without, torch.ones(n, 1, dtype=x.dtype)], -1))
                    mean, _ = gp.mean_and_variance(rows, "arm")
                    x = without[int(torch.argmax(mean))]
                    candidates.append((n, x))  # n - 1 points: d = n
        draw = AdaptiveDBanditSchedule._joint_draw(gp, [x for _, x in candidates], seed)
        draws: dict[int, float] = {}
        for (d, x), value in zip(candidates, draw.tolist()):
            if d not in draws or value > draws[d]:
                draws[d], best[d] = value, (x, best[d][1] if x is best[d][0] else value)
        return dict(sorted(draws.items()))  # the library trains best[d] of the largest draw, ties to fewer points


MARGIN = {"d_choice": "margin"}
#: Each rule: the schedule class, its first argument (``d_max``, or ``d`` of a fixed bandit) and options.
RULES: dict[str, tuple[type[GPBanditSchedule], int, dict[str, str]]] = {
    "thompson": (AdaptiveDBanditSchedule, 10, {}), "margin": (AdaptiveDBanditSchedule, 10, MARGIN),
    "grow": (GrowSearch, 10, MARGIN), "confident": (ConfidentPoints, 10, MARGIN),
    "optimistic": (OptimisticPoints, 10, MARGIN), "nested": (NestedThompson, 10, {}),
    **{f"fixed-{d}": (GPBanditSchedule, d, {}) for d in range(2, 11)},  # the paper's bandit at one d
}


def main(rules: list[str], seeds: range, epochs: int | None = None, cases: Sequence[str] = STEP_CASES) -> None:
    compare({rule: RULES[rule] for rule in rules}, seeds, epochs, "rule", cases)


if __name__ == "__main__":
    chosen = (sys.argv[1] if len(sys.argv) > 1 else "thompson,margin,grow,confident,optimistic").split(",")
    unknown = [r for r in chosen if r not in RULES]
    if unknown:
        sys.exit(f"unknown rule(s) {unknown}; accepted: {', '.join(RULES)}")
    main(chosen, seed_range(sys.argv[2] if len(sys.argv) > 2 else "4"), int(sys.argv[3]) if len(sys.argv) > 3 else None,
         step_cases(sys.argv[4] if len(sys.argv) > 4 else None))
