"""The adaptive-d bandit's recommendation on the test bed: which candidates and which tolerance.

At every GP round :class:`tvolib.bandit.AdaptiveDBanditSchedule` recommends the smallest ``d``
whose candidate's lower bound ``m - s`` is not ``z`` posterior standard deviations (of its
difference from the best) below the best's. Revision 6 made each ``d``'s candidate the highest
lower bound among that ``d``'s posterior-mean maximiser ``x_d`` and the arms of ``d`` points the
GP has observed (revision 5: ``x_d`` alone), at ``z = 0.75`` (revision 5: 1). The recommendation
draws nothing from the schedule's generator, so every rule can be scored on the same runs: this
script keeps, at the last GP round of each run, the joint posterior of both candidate sets
(revision 5's ``x_d`` and revision 6's) and their true regrets, then applies the rule at each
``z`` of :data:`TOLERANCES` to each set. Printed per candidate set and ``z``, for each case: the
seeds on which the recommendation is the case's ``d`` (and the best candidate's ``d`` is),
the mean regret of the recommended arms and the recommended ``d``'s. The runs are those of
``benchmarks/adaptive_rules.py thompson`` (same seeds, budget and noise).

    .venv/bin/python benchmarks/adaptive_candidates.py [seeds] [epochs] [cases]   # 15 minutes on 2 cores

(defaults: seeds ``0:12``, 480 epochs, the three ``-quiet`` step cases; ``cases``: step cases of
the test bed separated by commas, e.g. ``d3-step-mild,d5-step-mild,d10-step-mild`` for the
default noise.)
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.adaptive import AdaptiveDBanditSchedule
from tvolib.bandit.model import BanditGP
from tvolib.bandit.recommendation import RECOMMENDATION_TOLERANCE, highest_lower_bound, one_standard_error_rule
from tvolib.bandit.testbed import CASES, ScheduleFactory, arm_value, run_cases

from adaptive_recommendation import N_INIT  # benchmarks/, this script's folder
from adaptive_tolerance import BUDGET, seed_range, step_cases

#: The tolerances ``z`` scored (revision 6 chose 0.75 from these on seeds 0 to 11 of the quiet cases).
TOLERANCES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
#: The quiet step cases, the script's default.
QUIET_CASES = ("d3-step-mild-quiet", "d5-step-mild-quiet", "d10-step-mild-quiet")
#: The candidate sets: revision 5's (each ``d``'s posterior-mean maximiser) and revision 6's.
CANDIDATE_SETS = ("x_d", "x_d or observed")


class RecordingBothCandidates(AdaptiveDBanditSchedule):
    """The library's schedule, whose recommendation rows also keep ``both``: the joint posterior
    mean and covariance (standardised) of revision 5's candidates (``x_d``, ``d = d_min..d_max``)
    followed by revision 6's, and their arms in beta units. Same draws, same arms."""

    def _maximise_each(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        self._maximisers = super()._maximise_each(gp, kappa, seed)
        return self._maximisers

    def _recommend(self, gp: BanditGP, seed: int) -> dict[str, Any]:
        row = super()._recommend(gp, seed)
        ds = sorted(self._maximisers)
        alone = [self._maximisers[d][0] for d in ds]
        observed = self._observed_arms(alone[0])
        pooled = [highest_lower_bound(gp, [*observed.get(d, []), x]) for d, x in zip(ds, alone)]
        mean, cov = arm_effect_posterior(gp, alone + pooled)
        arms = [(self.lo + (self.hi - self.lo) * x.cpu()).tolist() for x in alone + pooled]
        return {**row, "both": {"mean": mean.tolist(), "cov": cov.tolist(), "arms": arms,
                                "library_d": row["recommended_d"]}}


def scores(record: dict[str, Any], case_d: int, regrets: list[float], z: float, which: int
           ) -> tuple[int, bool, bool, float]:
    """The recommended ``d``, whether it and the best candidate's ``d`` are ``case_d``, and the
    recommended arm's regret, for candidate set ``which`` (index into :data:`CANDIDATE_SETS`)."""
    n = len(record["mean"]) // 2
    part = slice(which * n, (which + 1) * n)
    mean = torch.tensor(record["mean"][part], dtype=torch.float64)
    cov = torch.tensor(record["cov"], dtype=torch.float64)[part, part]
    rule = one_standard_error_rule(mean, cov, z)
    k, top = rule.index, rule.best
    d_min = case_d_min(record)
    return d_min + k, d_min + k == case_d, d_min + top == case_d, regrets[which * n + k]


def case_d_min(record: dict[str, Any]) -> int:
    """The smallest ``d`` of a record's candidates (their first arm has ``d - 1`` points)."""
    return len(record["arms"][0]) + 1


def main(seeds: range, epochs: int, cases: Sequence[str]) -> None:
    jobs = []
    for name in cases:
        case = dataclasses.replace(CASES[name], epochs=epochs)
        factory = ScheduleFactory.of(RecordingBothCandidates, 10, window=case.window, n_init=N_INIT, **BUDGET)
        jobs += [(case, factory, seed) for seed in seeds]
    results = run_cases(jobs, max_workers=2)
    records: dict[str, list[tuple[dict[str, Any], list[float]]]] = {}
    for (case, _, _), result in zip(jobs, results):
        both = [r for r in result.history if r.get("recommended_d") is not None][-1]["both"]
        records.setdefault(case.name, []).append((both, [1.0 - arm_value(case, a, 1.0) for a in both["arms"]]))
    print("| candidates | z | " + " | ".join(f"{name}: right d (best candidate's); regret; d's" for name in cases)
          + " |\n|---|---|" + "---|" * len(cases))
    for which, label in enumerate(CANDIDATE_SETS):
        for z in TOLERANCES:
            cells = []
            for name in cases:
                out = [scores(rec, CASES[name].d, regrets, z, which) for rec, regrets in records[name]]
                cells.append(f"{sum(o[1] for o in out)} of {len(out)} ({sum(o[2] for o in out)}); "
                             f"{sum(o[3] for o in out) / len(out):.3f}; {','.join(str(o[0]) for o in out)}")
            print(f"| {label} | {z} | " + " | ".join(cells) + " |", flush=True)
    mismatched = [(name, k) for name, recs in records.items() for k, (rec, regrets) in enumerate(recs)
                  if scores(rec, CASES[name].d, regrets, RECOMMENDATION_TOLERANCE, 1)[0] != rec["library_d"]]
    where = f"all runs but {mismatched} (a recomputed posterior can break a near tie)" if mismatched else "every run"
    print(f"the library's recommendation is this rule's ({CANDIDATE_SETS[1]!r}, "
          f"z = {RECOMMENDATION_TOLERANCE}) on {where}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) > 3 or not all(a[:1].isdigit() for a in args[:2]):
        sys.exit("usage: adaptive_candidates.py [seeds, e.g. 0:12] [epochs, e.g. 480] [step cases, comma-separated]")
    main(seed_range(args[0] if args else "0:12"), int(args[1]) if len(args) > 1 else 480,
         step_cases(args[2]) if len(args) > 2 else list(QUIET_CASES))
