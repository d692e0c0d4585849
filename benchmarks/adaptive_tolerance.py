"""The adaptive-d bandit's parsimony margin on the test bed: which d it trains, and its regret.

For each ``d_tolerance`` of the margin rule (``d_choice="margin"``: the margin, as a share of an
unknown arm's exploration bonus, that a point must add to be kept;
:class:`tvolib.bandit.AdaptiveDBanditSchedule`) and each of the two
step cases (``d3-step-mild``: two interior points best; ``d10-step-mild``: nine spread points
best), prints the ``d`` trained most often in the second half of each seed's run and the mean
regret of the second half's arms, at the system tests' acquisition budget
(``raw_samples=128, num_restarts=4``).

    .venv/bin/python benchmarks/adaptive_tolerance.py [tolerances] [seeds] [epochs]   # about 4 minutes on 2 cores

e.g. ``benchmarks/adaptive_tolerance.py 0,0.02,0.05,0.1,0.2 4`` (the defaults; ``epochs`` defaults to
the cases' 160). ``benchmarks/adaptive_tolerance.py 0.2 4 480`` gives the bandit three times the
epochs (about 80 rounds instead of 45; about 6 minutes).
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from tvolib.bandit.adaptive import AdaptiveDBanditSchedule
from tvolib.bandit.testbed import CASES, CaseResult, ScheduleFactory, TestbedCase, arm_value, run_cases

#: The step cases and the acquisition budget of tests/bandit/test_adaptive.py.
STEP_CASES = ("d3-step-mild", "d10-step-mild")
BUDGET = dict(raw_samples=128, num_restarts=4, device="cpu")


def compare(variants: dict[str, tuple[type, int, dict[str, Any]]], seeds: range, epochs: int | None = None,
            column: str = "variant", cases: Sequence[str] = STEP_CASES) -> None:
    """Run every variant (label -> schedule class, its first argument: ``d_max`` of an adaptive
    bandit, ``d`` of a fixed one, and options) on each of ``cases`` (default both step cases), all
    seeds, two at a time, and print one Markdown row per case and variant."""
    keys, jobs = [], []
    for name in cases:
        case = CASES[name] if epochs is None else dataclasses.replace(CASES[name], epochs=epochs)
        for label, (cls, size, options) in variants.items():
            factory = ScheduleFactory.of(cls, size, window=case.window, **BUDGET, **options)
            for seed in seeds:
                keys.append((name, label))
                jobs.append((case, factory, seed))
    results = run_cases(jobs, max_workers=2)
    print(f"| case | {column} | d trained most (per seed) | mean regret (per seed) | d recommended at the end "
          "(per seed) | its arm's regret |\n|---|---|---|---|---|---|")
    for start in range(0, len(jobs), len(seeds)):
        name, label = keys[start]
        part = results[start:start + len(seeds)]
        regrets = [round(r.regret, 2) for r in part]
        modes = [r.d_mode for r in part]
        print(f"| {name} | {label} | {modes} | {statistics.mean(regrets):.2f} {regrets} | "
              f"{recommendation_cells(CASES[name], part)} |", flush=True)


def recommendation_cells(case: TestbedCase, part: list[CaseResult]) -> str:
    """The last GP round's recommended ``d`` of each run, and the mean regret of its recommended arm
    at the end of the run; ``- | -`` for schedules that recommend nothing."""
    last = [[row for row in r.history if row.get("recommended_arm") is not None][-1:] for r in part]
    if not all(last):
        return "- | -"
    regrets = [round(1.0 - arm_value(case, rows[0]["recommended_arm"], 1.0), 2) for rows in last]
    return f"{[rows[0]['recommended_d'] for rows in last]} | {statistics.mean(regrets):.2f} {regrets}"


def seed_range(text: str) -> range:
    """``"4"``: seeds 0 to 3; ``"4:12"``: seeds 4 to 11."""
    return range(*[int(v) for v in text.split(":")]) if ":" in text else range(int(text))


def step_cases(text: str | None) -> list[str]:
    """A command line's comma-separated step cases of :mod:`tvolib.bandit.testbed` (``None``: the
    two of :data:`STEP_CASES`); exits naming an unknown one and the accepted ones."""
    names = list(STEP_CASES) if text is None else text.split(",")
    accepted = [name for name, case in CASES.items() if case.metric == "step"]
    unknown = [name for name in names if name not in accepted]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}; accepted: {', '.join(accepted)}")
    return names


def seeds_epochs_flag(argv: list[str], flag: str, seeds: str, epochs: int = 480) -> tuple[range, int, bool]:
    """``[seeds] [epochs] [flag]`` of a benchmark's command line: the seed range (default ``seeds``),
    the epochs and whether ``flag`` is given; exits naming an unknown option."""
    flags = [a for a in argv if a.startswith("--")]
    if set(flags) - {flag}:
        sys.exit(f"unknown option(s) {sorted(set(flags) - {flag})}; accepted: {flag}")
    args = [a for a in argv if not a.startswith("--")]
    return seed_range(args[0] if args else seeds), int(args[1]) if len(args) > 1 else epochs, flag in flags


def main(tolerances: list[float], seeds: range, epochs: int | None = None) -> None:
    compare({str(tol): (AdaptiveDBanditSchedule, 10, {"d_choice": "margin", "d_tolerance": tol})
             for tol in tolerances}, seeds, epochs,
            "d_tolerance")


if __name__ == "__main__":
    tols = [float(t) for t in (sys.argv[1] if len(sys.argv) > 1 else "0,0.02,0.05,0.1,0.2").split(",")]
    main(tols, seed_range(sys.argv[2] if len(sys.argv) > 2 else "4"), int(sys.argv[3]) if len(sys.argv) > 3 else None)
