"""The bandit test bed's results for the figure: every protocol on every case, cached on disk.

:mod:`tvolib.bandit.testbed` defines the synthetic runs; this module runs a profile's cases for the
protocols compared (the authors' code's, the text's, this package's, and random arms in the same
domain), in a pool of worker processes, and caches the table in the results root under a name
that changes with anything that changes the numbers (cases, protocols, seeds, the bandit's
revision). The figure only reads the table.

Example:
    >>> frame = testbed_frame("smoke")            # doctest: +SKIP
    >>> frame.groupby(["case", "protocol"]).regret.mean()  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from tvolib import paths
from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.bandit.testbed import CASES, CaseResult, ScheduleFactory, TestbedCase, run_cases
from tvolib.paper.profiles import Profile, get_profile
from tvolib.checkpoint import atomic_write

__all__ = ["TESTBED_PROTOCOLS", "testbed_cases", "testbed_frame"]

#: The protocols compared: label -> options of :class:`~tvolib.bandit.GPBanditSchedule` (``None``:
#: :class:`~tvolib.bandit.RandomSchedule`, random arms in the code's staggered domain).
TESTBED_PROTOCOLS: dict[str, dict[str, Any] | None] = {
    "random arms": None,
    "code": {"protocol": "code"},
    "paper-text": {"protocol": "paper-text"},
    "tvolib": {"protocol": "tvolib"},
}


def testbed_cases(profile: Profile | str) -> list[TestbedCase]:
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


def _factory(case: TestbedCase, options: dict[str, Any] | None) -> ScheduleFactory:
    """Random arms (``None``) or the GP bandit with ``options``, at the case's d and window."""
    if options is None:
        return ScheduleFactory.of(RandomSchedule, case.d, window=case.window)
    return ScheduleFactory.of(GPBanditSchedule, case.d, **{"window": case.window, "device": "cpu", **options})


def _row(case: TestbedCase, label: str, seed: int, result: CaseResult) -> dict[str, Any]:
    """One row of the table: a case, a protocol, a seed."""
    gp = [row for row in result.history if row.get("source") in ("gp", "corner")]
    return {
        "case": case.name, "d": case.d, "trend": case.trend, "protocol": label, "seed": seed,
        "regret": result.regret, "distance": result.distance, "degenerate": result.degenerate,
        "rounds": len(result.history), "gp_rounds": len(gp), "seconds": result.seconds,
    }


def _key(cases: list[TestbedCase], seeds: int) -> str:
    payload = {"cases": [dataclasses.asdict(c) for c in cases], "protocols": TESTBED_PROTOCOLS, "seeds": seeds,
               "revision": GPBanditSchedule.REVISION}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def testbed_frame(profile: Profile | str, results_root: str | os.PathLike[str] | None = None,
                  max_workers: int = 2) -> pd.DataFrame:
    """Every protocol of :data:`TESTBED_PROTOCOLS` on the profile's cases and seeds, one row each.

    Read from ``<results root>/testbed-<key>.csv`` when it exists, else computed (``max_workers``
    processes) and written there atomically.

    Returns:
        Columns ``case, d, trend, protocol, seed, regret, distance, degenerate, rounds, gp_rounds,
        seconds`` (:func:`~tvolib.bandit.testbed.run_case`'s second-half metrics).
    """
    p = get_profile(profile)
    cases = testbed_cases(p)
    path = Path(paths.results_root(results_root)) / f"testbed-{_key(cases, p.testbed.seeds)}.csv"
    if path.exists():
        return pd.read_csv(path)
    jobs = [(case, label, seed) for case in cases for label in TESTBED_PROTOCOLS for seed in range(p.testbed.seeds)]
    results = run_cases([(case, _factory(case, TESTBED_PROTOCOLS[label]), seed) for case, label, seed in jobs],
                        max_workers)
    frame = pd.DataFrame([_row(*job, result) for job, result in zip(jobs, results)])
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: frame.to_csv(f, index=False), "w")
    return frame
