"""The bandit test bed's results for the figure: every protocol and baseline on every case, cached on disk.

:mod:`tvolib.bandit.testbed` defines the synthetic runs; this module runs a profile's cases for the
protocols compared (the authors' code's, the text's, this package's, and random arms in the same
domain, :data:`TESTBED_PROTOCOLS`) and for what a user would pick instead
(:data:`~tvolib.bandit.testbed_baselines.BASELINES`: the log schedule at its default ``beta_1``
and grid-searched, linear, and on cases with an integrand moments and the bias-optimal schedule;
and the grid search as a user runs it, :data:`~tvolib.bandit.testbed_baselines.USER_GRID`, the log
run of the highest final evidence, once per seed), in a pool of worker processes. Each case's rows
are cached in the results root by group (a protocol, the baselines, or the user's grid search) as
``testbed/<case>-<group>-<key>.csv``, ``key`` changing with anything that changes the group's numbers
(the case, the protocol's options or the baselines, seeds, the bandit's revision), so that a profile
that adds a case or a protocol computes only those rows. The figure only reads the table.

Example:
    >>> frame = testbed_frame("smoke")            # doctest: +SKIP
    >>> frame.groupby(["case", "protocol"]).regret.mean()  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from tvolib import paths
from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.bandit.testbed import CASES, CaseResult, ScheduleFactory, TestbedCase, TvoCase, run_cases
from tvolib.bandit.testbed_baselines import (BASELINES, LOG_BETA1_GRID, UPDATE_EVERY, USER_GRID, USER_GRID_SEED,
                                             baseline_results, user_grid_results)
from tvolib.checkpoint import atomic_write
from tvolib.paper.profiles import Profile, get_profile

__all__ = ["COLUMNS", "TESTBED_PROTOCOLS", "testbed_cases", "testbed_frame"]

#: The protocols compared: label -> options of :class:`~tvolib.bandit.GPBanditSchedule` (``None``:
#: :class:`~tvolib.bandit.RandomSchedule`, random arms in the code's staggered domain).
TESTBED_PROTOCOLS: dict[str, dict[str, Any] | None] = {
    "random arms": None,
    "code": {"protocol": "code"},
    "paper-text": {"protocol": "paper-text"},
    "tvolib": {"protocol": "tvolib"},
    "integrand": {"protocol": "integrand"},
}
#: The table's columns (``kind``: ``"bandit"`` for the protocols and random arms, ``"baseline"``;
#: ``runs``: what one result costs in runs, 7 for the grid-searched log; ``beta1``: the log rows').
COLUMNS = ("case", "d", "trend", "protocol", "kind", "seed", "regret", "distance", "degenerate", "rounds",
           "gp_rounds", "seconds", "runs", "beta1")


def testbed_cases(profile: Profile | str) -> list[TestbedCase | TvoCase]:
    """The profile's cases (its ``testbed.cases``), with its ``testbed.epochs`` when set."""
    scale = get_profile(profile).testbed
    unknown = [name for name in scale.cases if name not in CASES]
    if unknown:
        raise ValueError(f"profile {get_profile(profile).name!r}: test-bed cases {unknown} are not in "
                         f"tvolib.bandit.testbed.CASES ({', '.join(CASES)})")
    cases = [CASES[name] for name in scale.cases]
    if scale.epochs is not None:
        cases = [dataclasses.replace(case, epochs=scale.epochs) for case in cases]
    return cases


def _factory(case: TestbedCase | TvoCase, options: dict[str, Any] | None) -> ScheduleFactory:
    """Random arms (``None``) or the GP bandit with ``options``, at the case's d and window."""
    if options is None:
        return ScheduleFactory.of(RandomSchedule, case.d, window=case.window)
    return ScheduleFactory.of(GPBanditSchedule, case.d, **{"window": case.window, "device": "cpu", **options})


def _row(case: TestbedCase | TvoCase, label: str, seed: int, result: CaseResult, kind: str = "bandit",
         runs: int = 1, beta1: float | None = None) -> dict[str, Any]:
    """One row of the table: a case, a protocol or baseline, a seed."""
    gp = [row for row in result.history if row.get("source") in ("gp", "corner")] if kind == "bandit" else []
    return {
        "case": case.name, "d": case.d, "trend": case.trend, "protocol": label, "kind": kind, "seed": seed,
        "regret": result.regret, "distance": result.distance, "degenerate": result.degenerate,
        "rounds": len(result.history) if kind == "bandit" else 0, "gp_rounds": len(gp), "seconds": result.seconds,
        "runs": runs, "beta1": beta1,
    }


#: The cache's group of a case's baseline rows (beside one group per protocol of TESTBED_PROTOCOLS).
BASELINE_GROUP = "baselines"
#: The cache's group of a case's rows of the user's grid search (one per seed).
USER_GRID_GROUP = "user-grid"


def _groups() -> list[str]:
    """A case's row groups, each cached in a file of its own: every protocol, the baselines, the user's grid search."""
    return [*TESTBED_PROTOCOLS, BASELINE_GROUP, USER_GRID_GROUP]


def _what(group: str) -> Any:
    """What a group's numbers depend on beside the case and seeds: a protocol's options, the baselines'
    or the user's grid search's."""
    if group in TESTBED_PROTOCOLS:
        return TESTBED_PROTOCOLS[group]
    if group == USER_GRID_GROUP:
        return [USER_GRID, LOG_BETA1_GRID, USER_GRID_SEED]
    return [BASELINES, LOG_BETA1_GRID, UPDATE_EVERY]


def _file(folder: Path, case: TestbedCase | TvoCase, group: str, seeds: int) -> Path:
    """``<folder>/<case>-<group>-<key>.csv``, ``key`` changing with anything that changes the group's
    numbers (the case, the protocol's options or the baselines, the seeds, the bandit's revision)."""
    payload = {"case": {"class": type(case).__name__, **dataclasses.asdict(case)}, "group": group,
               "what": _what(group), "seeds": seeds, "revision": GPBanditSchedule.REVISION}
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")
    return folder / f"{case.name}-{slug}-{key}.csv"


def _compute(missing: list[tuple[TestbedCase | TvoCase, str]], seeds: int,
             max_workers: int) -> dict[tuple[str, str], pd.DataFrame]:
    """The rows of each missing ``(case, group)``: a protocol for ``seeds`` seeds, or every baseline
    once (its rows repeated for each seed: a baseline reads no reward, so its regret is the same
    whatever the seed), or the user's grid search for every seed."""
    jobs = [(case, label, seed) for case, label in missing if label in TESTBED_PROTOCOLS for seed in range(seeds)]
    results = run_cases([(case, _factory(case, TESTBED_PROTOCOLS[label]), seed) for case, label, seed in jobs],
                        max_workers)
    rows = [_row(*job, result) for job, result in zip(jobs, results)]
    baseline_cases = [case for case, label in missing if label == BASELINE_GROUP]
    for record in baseline_results(baseline_cases, max_workers) if baseline_cases else []:
        rows += [_row(record["case"], record["protocol"], seed, record["result"], "baseline", record["runs"],
                      record["beta1"]) for seed in range(seeds)]
    user_cases = [case for case, label in missing if label == USER_GRID_GROUP]
    for record in user_grid_results(user_cases, range(seeds), max_workers) if user_cases else []:
        rows.append(_row(record["case"], record["protocol"], record["seed"], record["result"], "baseline",
                         record["runs"], record["beta1"]))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    groups = frame["protocol"].where(frame["kind"] == "bandit", BASELINE_GROUP).mask(
        frame["protocol"] == USER_GRID, USER_GRID_GROUP)
    return {(case.name, label): frame[(frame["case"] == case.name) & (groups == label)] for case, label in missing}


def testbed_frame(profile: Profile | str, results_root: str | os.PathLike[str] | None = None,
                  max_workers: int = 2) -> pd.DataFrame:
    """Every protocol of :data:`TESTBED_PROTOCOLS`, every baseline and the user's grid search on the
    profile's cases and seeds.

    Each case's rows are cached by group, one protocol, the baselines or the user's grid search, in
    ``<results root>/testbed/<case>-<group>-<key>.csv``: a file is read when it exists, else computed
    (``max_workers`` processes, every missing group together) and written there atomically, so a
    protocol added to :data:`TESTBED_PROTOCOLS` computes only its own rows.

    Returns:
        Columns :data:`COLUMNS`, one row per case, protocol (or baseline) and seed, cases in the
        profile's order, the protocols then the baselines (:func:`~tvolib.bandit.testbed.run_case`'s
        second-half metrics).
    """
    p = get_profile(profile)
    cases = testbed_cases(p)
    folder = Path(paths.results_root(results_root)) / "testbed"
    files = {(case.name, group): _file(folder, case, group, p.testbed.seeds) for case in cases for group in _groups()}
    missing = [(case, group) for case in cases for group in _groups() if not files[case.name, group].exists()]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        for name, part in _compute(missing, p.testbed.seeds, max_workers).items():
            atomic_write(files[name], lambda f, part=part: part.to_csv(f, index=False), "w")
    frames = [pd.read_csv(files[case.name, group]) for case in cases for group in _groups()]
    return pd.concat(frames, ignore_index=True)
