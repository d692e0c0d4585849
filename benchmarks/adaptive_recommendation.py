"""What limits the adaptive-d bandit's recommendation on the test bed: its GP, its search or its rule.

At every GP round :class:`tvolib.bandit.AdaptiveDBanditSchedule` recommends the smallest ``d``
whose posterior-mean maximiser ``x_d`` is not one posterior standard deviation (of the
difference) below the best ``x*`` (the one-standard-error rule). On the test bed the true value
of every ``x_d`` is known, so one can tell apart the ways the recommendation can miss the right
``d``:

* the rule: the GP's ``x_d`` of the right ``d`` is good, but the rule prefers fewer points;
* the GP: the ``x_d`` of the right ``d`` is itself far from the optimum, so no rule over these
  candidates can see what the right ``d`` gains;
* the search: it misses the posterior mean's peak (the GP would rate the optimum higher than the
  candidates it found).

Printed per case and seed, at the last GP round: the recommended ``d``, the ``d`` of a rule tried
in its place and its arm's true regret (``nested d``, :meth:`RecordingCandidates._nested`: backward
elimination of points from the best candidate, under the same one-standard-deviation tolerance),
the ``d`` whose ``x_d`` the GP rates best, the ``d`` whose ``x_d`` is truly best, ``optimum_z`` (the GP's view of the
case's optimum against its best candidate, :class:`RecordingCandidates`), the time kernel's fitted
``omega`` (median of the last 20 GP rounds; the step cases' optimum does not move, so the truth is
0; the GP's time is normalised over its history, so ``omega`` is the forgetting over the whole
history), the oldest round's correlation with the next, ``sqrt(1 - omega)``, and the true regret
``1 - f`` of every ``x_d`` (``d`` = 2, or ``--d-min``, to 10). The runs are those of
``benchmarks/adaptive_rules.py thompson`` (same seeds, budget and noise), so the recommendations
match its table.

    .venv/bin/python benchmarks/adaptive_recommendation.py [seeds] [epochs] [cases] [--time-invariant] [--d-min=N]

(480 epochs: 16 minutes for 8 seeds on 2 cores; ``cases``, step cases separated by commas, defaults
to ``d3-step-mild,d10-step-mild``)

e.g. ``benchmarks/adaptive_recommendation.py 4:12 480`` (the defaults). ``--time-invariant`` gives
the bandit's GP no time kernel (``time_varying=False``): the step cases' optimum does not move.
``--d-min=N`` lets the bandit choose ``d`` in ``[N, 10]`` only, with the default's random rounds
(those of ``d_min = 2``), so every GP round trains a schedule of ``N`` or more points: whether
rounds spread over every ``d`` are what keeps the large ``d``'s candidates from the optimum.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.adaptive import AdaptiveDBanditSchedule
from tvolib.bandit.model import BanditGP
from tvolib.bandit.protocol import DEFAULT_PROTOCOL, size_defaults
from tvolib.bandit.testbed import CASES, ScheduleFactory, arm_value, run_cases

from adaptive_tolerance import BUDGET, STEP_CASES, seeds_epochs_flag, step_cases  # benchmarks/, this script's folder


N_INIT = size_defaults(DEFAULT_PROTOCOL, 2 + 3)[0]  # the library's random rounds at d_min = 2, for every --d-min


class RecordingCandidates(AdaptiveDBanditSchedule):
    """The library's schedule, whose history also keeps every ``d``'s posterior-mean maximiser
    (``candidates_by_d``, beta units) of each GP round's recommendation, and how the GP rates the
    case's ``optimum`` (interior points) against the best of them: ``optimum_z``, the posterior
    mean of ``f(optimum) - f(x*)`` over its standard deviation. Positive: the GP rates the optimum
    higher, so its search missed it; negative: the GP itself prefers ``x*``. It also keeps the arm
    of the rule tried in the library's place (``nested_arm``, :meth:`_nested`). Same draws, same arms.
    """

    def __init__(self, d_max: int, *, optimum: tuple[float, ...], **options: Any) -> None:
        super().__init__(d_max, **options)
        self._optimum = torch.tensor(optimum, dtype=torch.float64)

    def _maximise_each(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        best = super()._maximise_each(gp, kappa, seed)  # the recommendation's search (kappa = 0)
        self._candidates = {d: x for d, (x, _) in best.items()}
        return best

    def _recommend(self, gp: BanditGP, seed: int) -> dict[str, Any]:
        row = super()._recommend(gp, seed)
        ds = sorted(self._candidates)
        best = self._candidates[ds[max(range(len(ds)), key=row["mean_by_d"].__getitem__)]]
        optimum = ((self._optimum - self.lo) / (self.hi - self.lo)).to(best)
        mean, cov = arm_effect_posterior(gp, [optimum, best])
        z = float((mean[0] - mean[1]) / (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]).clamp_min(1e-12).sqrt())
        candidates = {d: (self.lo + (self.hi - self.lo) * x.cpu()).tolist() for d, x in self._candidates.items()}
        nested = self._nested(gp, self._candidates[ds[max(range(len(ds)), key=lambda k: row["mean_by_d"][k]
                                                                   - row["sd_by_d"][k])]])
        return {**row, "candidates_by_d": candidates, "optimum_z": z,
                "nested_arm": (self.lo + (self.hi - self.lo) * nested.cpu()).tolist()}

    def _nested(self, gp: BanditGP, top: Tensor) -> Tensor:
        """The rule tried in place of the library's, backward elimination from the best candidate
        ``top`` (the highest lower bound): drop the point whose loss the posterior mean rates least,
        again and again, and keep the fewest points whose lower bound is not one standard deviation
        of the difference from ``top`` below ``top``'s (stopping at the first that is)."""
        chain = [top]
        while chain[-1].numel() > self.d_min - 1:
            x = chain[-1]
            drops = [torch.cat([x[:j], x[j + 1:]]) for j in range(x.numel())]
            chain.append(drops[int(torch.argmax(arm_effect_posterior(gp, drops)[0]))])
        mean, cov = arm_effect_posterior(gp, chain)
        lower = mean - cov.diagonal().clamp_min(0.0).sqrt()
        gap_sd = (cov[0, 0] + cov.diagonal() - 2 * cov[0]).clamp_min(0.0).sqrt()
        k = 0
        while k + 1 < len(chain) and float(lower[k + 1]) >= float(lower[0]) - float(gap_sd[k + 1]):
            k += 1
        return chain[k]


def main(seeds: range, epochs: int, time_varying: bool = True, cases: Sequence[str] = STEP_CASES,
         d_min: int = 2) -> None:
    jobs = []
    for name in cases:
        case = dataclasses.replace(CASES[name], epochs=epochs)
        factory = ScheduleFactory.of(RecordingCandidates, 10, window=case.window, optimum=case.optimum,
                                     time_varying=time_varying, d_min=d_min, n_init=N_INIT, **BUDGET)
        jobs += [(case, factory, seed) for seed in seeds]
    results = run_cases(jobs, max_workers=2)
    print(f"| case | seed | recommended d | nested d | GP's best d | truly best d | optimum_z | omega | oldest corr | "
          f"true regret of x_d, d = {d_min}..10 |\n|---|---|---|---|---|---|---|---|---|---|")
    right: dict[str, list[tuple[int, int]]] = {}
    nested: dict[str, list[int]] = {}
    for (case, _, seed), result in zip(jobs, results):
        row = [r for r in result.history if r.get("recommended_d") is not None][-1]
        regret = {int(d): 1.0 - arm_value(case, arm, 1.0) for d, arm in row["candidates_by_d"].items()}
        ds = sorted(regret)
        gp_best = ds[max(range(len(ds)), key=row["mean_by_d"].__getitem__)]
        true_best = min(ds, key=lambda d: (round(regret[d], 2), d))  # ties (to 0.01) to the fewer points
        right.setdefault(case.name, []).append((row["recommended_d"], true_best))
        nested.setdefault(case.name, []).append(len(row["nested_arm"]) + 1)
        fitted = [r["omega"] for r in result.history if r.get("lengthscale") is not None]
        omega = statistics.median(fitted[-20:])  # the time kernel's fit over the last 20 GP rounds
        nested_regret = 1.0 - arm_value(case, row["nested_arm"], 1.0)
        print(f"| {case.name} | {seed} | {row['recommended_d']} | {len(row['nested_arm']) + 1} ({nested_regret:.2f}) | {gp_best} | {true_best} | {row['optimum_z']:+.2f} | "
              f"{omega:.2f} | {math.sqrt(1.0 - omega):.2f} | "
              f"{' '.join(f'{regret[d]:.2f}' for d in ds)} |", flush=True)
    for name, pairs in right.items():
        print(f"{name}: the recommended d is the truly best candidate's on {sum(r == t for r, t in pairs)} "
              f"of {len(pairs)} seeds (truly best d, mean {statistics.mean(t for _, t in pairs):.1f}); "
              f"recommended d {[r for r, _ in pairs]}, nested {nested[name]}")


def d_min_option(argv: list[str]) -> tuple[int, list[str]]:
    """``--d-min=N`` of the command line (default 2) and the other arguments; exits naming a bad value."""
    values = [a.split("=", 1)[1] for a in argv if a.startswith("--d-min=")]
    rest = [a for a in argv if not a.startswith("--d-min=")]
    if not values:
        return 2, rest
    if len(values) > 1 or not values[0].isdigit() or not 2 <= int(values[0]) <= 9:
        sys.exit(f"--d-min takes one integer in [2, 9] (d_max is 10); got {values}")
    return int(values[0]), rest


if __name__ == "__main__":
    d_min, argv = d_min_option(sys.argv[1:])
    seeds, epochs, time_invariant = seeds_epochs_flag(argv, "--time-invariant", "4:12")
    positional = [a for a in argv if not a.startswith("--")]
    main(seeds, epochs, time_varying=not time_invariant,
         cases=step_cases(positional[2] if len(positional) > 2 else None), d_min=d_min)
