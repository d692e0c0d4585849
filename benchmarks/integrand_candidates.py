"""The integrand bandit on the test bed, one item at a time, against the schedules a user would keep.

Each candidate runs every chosen case of the test bed (:mod:`tvolib.bandit.testbed`: the TVO-form
cases, whose integrand the bandits that read one are given, and the bump cases, which have none)
over the given seeds; the baselines of :mod:`tvolib.bandit.testbed_baselines` (log at its default
beta_1, the best log over a beta_1 grid in hindsight, linear, moments and bias-optimal where there
is an integrand) run once each (they read no reward). Printed: the mean regret of the second
half's arms per case (mean over seeds, the standard error over seeds in brackets with ``--se``),
and per candidate its mean over the cases; with ``--targets``, each target of the integrand
protocol (regret below random arms' in every case; on stationary cases whose optimum is a
standard schedule, the bump cases' log-like and linear-like optima, within 0.1 of the grid-searched
log; on moving cases below every baseline) case by case. ``--csv`` writes one row
per run. ``--user-grid`` adds the grid search a user runs
(:func:`~tvolib.bandit.testbed_baselines.user_grid_results`): seven log runs, each with its own
noise, the one of the highest final evidence kept.

Candidates (``--candidates``, default all): ``random arms``, ``tvolib`` (the package's GP-UCB
protocol), ``integrand`` (the integrand protocol as it ships: UCB, the predicted bias change with
a fitted weight, three initial rounds, the box (0.05, 0.95)) and that protocol with one item
changed: ``thompson``, ``no known part`` (the GP over points learns everything), ``box 0.001`` (a
wider box), ``3 d initial rounds`` (the tvolib protocol's number of random rounds), ``spread 2``
(initial arms moved by up to 2 in logit instead of 0.5) and ``6 initial rounds, spread 2``; and
``standard choice``, the prototype of ``standard_choice.py`` (GP-UCB over the log schedules of the
grid-searched log's beta_1 grid and linear) and ``standard choice + bias-optimal`` (with the
bias-optimal schedule of the integrand read at each window's end as one more member); ``trust
region``, the prototype of ``trust_region.py`` (GP-UCB in a TuRBO trust region around an incumbent
that starts at log); ``integrand, cost share >= 0.1`` (``cost_floor.py``); ``floor family``
(``floor_family.py``: GP-UCB over the bias-optimal schedules with a floor on the points, and the
standard schedules), ``floor family, floors only`` (no standard schedules once an integrand is
read) and ``floor index`` (the GP over the floor, not the points); ``integrand, floor design`` (the
integrand protocol whose initial arms are members of that family); ``integrand, no GP`` (every
round the bias-optimal arm in the protocol's box: an ablation).

    .venv/bin/python benchmarks/integrand_candidates.py --cases tvo --seeds 0 1 2
    .venv/bin/python benchmarks/integrand_candidates.py --cases all --seeds 20-29 --targets \\
        --candidates "random arms" tvolib integrand

Time on the shared 2-core CPU (2 workers): a TVO-form case costs the integrand bandit about 20-40 s
a run (160 epochs, about 40 GP rounds), tvolib about 10-20 s, a bump case 5-15 s; the nine TVO-form
cases at three seeds take about 10 minutes per bandit candidate, the baselines about 5 minutes.
"""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import warnings
from typing import Any

from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.bandit.testbed import CASES
from tvolib.bandit.testbed_baselines import USER_GRID, baseline_results, user_grid_results
from tvolib.bandit.testbed_run import ScheduleFactory, run_cases
from tvolib.bandit.testbed_tvo import TvoCase

from cost_floor import CostFloorSchedule
from floor_family import BoxBiasOnlySchedule, FloorDesignSchedule, FloorFamilySchedule, FloorIndexSchedule, FloorsOnlySchedule
from standard_choice import StandardAndBiasOptimalSchedule, StandardChoiceSchedule
from trust_region import TrustRegionSchedule

#: The TVO-form cases of fixed d (the step cases, whose d is the bandit's to choose, are left out).
TVO = ("d5-tvo-lg-strong", "d10-tvo-lg-strong", "d5-tvo-lg-moving-strong", "d10-tvo-lg-moving-strong",
       "d5-tvo-recorded-strong", "d10-tvo-recorded-strong", "d5-tvo-recorded-end-strong",
       "d10-tvo-recorded-end-strong", "d5-tvo-recorded-quick")
#: The bump cases of the test-bed figure.
BUMP = ("d2-log-strong", "d2-drift-strong", "d5-log-strong", "d5-linear-strong", "d5-corner-strong",
        "d5-drift-strong", "d5-log-none", "d5-log-mild", "d5-log-quick", "d10-log-strong", "d10-corner-strong")
#: Bump cases whose optimum moves, and whose optimum is a standard schedule (log_uniform(d, 0.05), linear-like).
MOVING_BUMP = ("d2-drift-strong", "d5-drift-strong")
#: label -> options of GPBanditSchedule (None: RandomSchedule); "3 d initial rounds" is set per d.
CANDIDATES: dict[str, dict[str, Any] | None] = {
    "random arms": None,
    "tvolib": {"protocol": "tvolib"},
    "integrand": {"protocol": "integrand"},
    "integrand, thompson": {"protocol": "integrand", "acquisition": "thompson"},
    "integrand, no known part": {"protocol": "integrand", "known": False},
    "integrand, box 0.001": {"protocol": "integrand", "box": (0.001, 0.95)},
    "integrand, 3 d initial rounds": {"protocol": "integrand", "n_init_integrand": "3d"},
    "integrand, spread 2": {"protocol": "integrand", "init_spread": 2.0},
    "integrand, 6 initial rounds, spread 2": {"protocol": "integrand", "n_init_integrand": 6, "init_spread": 2.0},
    "standard choice": {"family": StandardChoiceSchedule},
    "standard choice + bias-optimal": {"family": StandardAndBiasOptimalSchedule},
    "trust region": {"family": TrustRegionSchedule},
    "integrand, cost share >= 0.1": {"family": CostFloorSchedule},
    "floor family": {"family": FloorFamilySchedule},
    "floor family, floors only": {"family": FloorsOnlySchedule},
    "floor index": {"family": FloorIndexSchedule},
    "integrand, floor design": {"family": FloorDesignSchedule},
    "integrand, no GP": {"family": BoxBiasOnlySchedule},
}


def factory(label: str, case: Any) -> ScheduleFactory:
    options = CANDIDATES[label]
    if options is None:
        return ScheduleFactory.of(RandomSchedule, case.d, window=case.window)
    if "family" in options:  # a prototype's class (standard_choice.py, trust_region.py, cost_floor.py)
        return ScheduleFactory.of(options["family"], case.d, window=case.window, device="cpu")
    options = {k: (3 * case.d if v == "3d" else v) for k, v in options.items()}
    return ScheduleFactory.of(GPBanditSchedule, case.d, window=case.window, device="cpu", **options)


def moving(case: Any) -> bool:
    return case.moving if isinstance(case, TvoCase) else case.name in MOVING_BUMP


def standard_optimum(case: Any) -> bool:
    """A stationary bump case whose optimum is a standard schedule (log_uniform(d, 0.05) or linear-like)."""
    return not isinstance(case, TvoCase) and not moving(case) and ("-log-" in case.name or "-linear-" in case.name)


def _seeds(text: list[str]) -> list[int]:
    seeds: list[int] = []
    for item in text:
        lo, _, hi = item.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="tvo", help="tvo, bump, all, or comma-separated case names")
    parser.add_argument("--seeds", nargs="+", default=["0-2"], help="seeds or ranges (0-2)")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--se", action="store_true", help="print standard errors over seeds")
    parser.add_argument("--targets", action="store_true", help="check the integrand protocol's targets")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--user-grid", action="store_true",
                        help="add the grid search a user runs: the log schedule of the highest final evidence")
    parser.add_argument("--csv", help="write one row per run here")
    args = parser.parse_args(argv)
    names = {"tvo": TVO, "bump": BUMP, "all": TVO + BUMP}.get(args.cases, tuple(args.cases.split(",")))
    cases, seeds = [CASES[n] for n in names], _seeds(args.seeds)
    warnings.simplefilter("ignore")
    jobs = [(label, case, seed) for label in args.candidates for case in cases for seed in seeds]
    results = run_cases([(case, factory(label, case), seed) for label, case, seed in jobs], args.workers)
    table: dict[str, dict[str, list[float]]] = {}
    for (label, case, seed), result in zip(jobs, results):
        table.setdefault(label, {}).setdefault(case.name, []).append(result.regret)
    if not args.no_baselines:
        for record in baseline_results(cases, args.workers):
            table.setdefault(record["protocol"], {})[record["case"].name] = [record["result"].regret]
    if args.user_grid:
        for record in user_grid_results(cases, seeds, args.workers):
            table.setdefault(USER_GRID, {}).setdefault(record["case"].name, []).append(record["result"].regret)
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["candidate", "case", "seed", "regret"])
            for (label, case, seed), result in zip(jobs, results):
                out.writerow([label, case.name, seed, result.regret])
    _print(table, cases, seeds, args.se)
    if args.targets:
        _targets(table, cases)
        if args.user_grid:
            _targets(table, cases, USER_GRID)


def _cell(values: list[float], se: bool) -> str:
    mean = statistics.mean(values)
    if not se or len(values) < 2:
        return f"{mean:.3f}"
    return f"{mean:.3f} ({statistics.stdev(values) / math.sqrt(len(values)):.3f})"


def _print(table: dict[str, dict[str, list[float]]], cases: list[Any], seeds: list[int], se: bool) -> None:
    print(f"Regret of the second half's arms, seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); baselines: one run each.\n")
    print("| candidate | " + " | ".join(c.name for c in cases) + " | mean |")
    print("|---|" + "---:|" * (len(cases) + 1))
    for label, by_case in table.items():
        cells = [_cell(by_case[c.name], se) if c.name in by_case else "-" for c in cases]
        present = [statistics.mean(by_case[c.name]) for c in cases if c.name in by_case]
        mean = f"{statistics.mean(present):.3f}" if len(present) == len(cases) else "-"
        print(f"| {label} | " + " | ".join(cells) + f" | {mean} |")


def _targets(table: dict[str, dict[str, list[float]]], cases: list[Any], grid: str = "log (best beta_1)") -> None:
    """The integrand protocol's targets, case by case (module docstring), the grid search being ``grid``:
    the best log in hindsight, or the user's (:data:`USER_GRID`, the mean over seeds)."""
    ours, random_arms = table.get("integrand", {}), table.get("random arms", {})
    baselines = ("log", grid, "linear", "moments", "bias-optimal")
    print(f"\nThe grid search: {grid}.\n")
    print("| case | kind | integrand | random arms | best log | best baseline | target | met |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for case in cases:
        if case.name not in ours:
            continue
        mine = statistics.mean(ours[case.name])
        rand = statistics.mean(random_arms[case.name]) if case.name in random_arms else math.nan
        best_log = statistics.mean(table.get(grid, {}).get(case.name, [math.nan]))
        base = {b: statistics.mean(table[b][case.name]) for b in baselines if case.name in table.get(b, {})}
        best = min(base.values()) if base else math.nan
        checks = [("< random", mine < rand)]
        if moving(case):
            checks.append(("< every baseline", mine < best))
        elif standard_optimum(case):
            checks.append(("<= best log + 0.1", mine <= best_log + 0.1))
        text = ", ".join(name for name, _ in checks)
        met = "yes" if all(ok for _, ok in checks) else "no: " + ", ".join(n for n, ok in checks if not ok)
        kind = "moving" if moving(case) else ("stationary, standard optimum" if standard_optimum(case)
                                              else "stationary")
        print(f"| {case.name} | {kind} | {mine:.3f} | {rand:.3f} | {best_log:.3f} | {best:.3f} | {text} | {met} |")


if __name__ == "__main__":
    sys.exit(main())
