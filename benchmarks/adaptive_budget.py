"""The adaptive-d bandit over Fig 11's long budget: with many rounds on real data, where does it stand?

Fig 13 gives the adaptive-d bandit (:class:`tvolib.bandit.AdaptiveDBanditSchedule`, Thompson
sampling of ``d``) about 18 rounds at ``quick``; on the test bed it needed about 80 to be level with
the bandit fixed at the right ``d`` (``benchmarks/adaptive_rules.py``). This script trains it under
Fig 11's budget (MNIST, 475 epochs of 3,000 examples at ``quick``; its windows and burn-in; the
tvolib protocol; ``d`` in ``[2, 10]``, the profile's largest), three seeds, beside Fig 11's runs
(log, linear, moments, random arms and both bandits at ``d = 5``, read from the results folder when
``make figures`` has computed them, trained otherwise), and prints test log p(x) and KL at the last
epoch, the ``d`` the adaptive runs trained in each third of their rounds and the ``d`` they
recommended after each GP round.

With ``--grid`` it also trains, under the same budget, the fixed-``d`` runs that say which ``d`` is
right there: log, moments and the tvolib-protocol bandit at every ``d`` of :data:`GRID_D` (three
seeds each; ``d = 5`` is Fig 11's), and prints their test log p(x) by ``d`` and the best ``d`` of
each in hindsight.

    TVOLIB_DATA=<data root> .venv/bin/python benchmarks/adaptive_budget.py [profile] [--grid]
    # quick: ~20 min on 2 cores; --grid adds 36 runs, about 80 minutes
"""
from __future__ import annotations

import sys
from collections import Counter

import pandas as pd

from tvolib import runs
from tvolib.paper.profiles import get_profile
from tvolib.paper.results import collect_schedule_histories
from tvolib.paper.sweeps import budget_series, fig11_bandit_budget


def adaptive_configs(profile: str) -> list:
    """Fig 11's tvolib-protocol bandit runs with the adaptive-d bandit (``d`` up to the profile's largest)."""
    d_max = max(get_profile(profile).d_values)
    return [c.replace(schedule="gp_bandit_adaptive", d=d_max).validate()
            for c in fig11_bandit_budget(profile) if budget_series(c) == "gp_bandit_tvolib"]


#: The fixed ``d`` of ``--grid``: the profile's ``d`` values at ``quick`` and 3 and 4, where the adaptive
#: runs' recommendation ends.
GRID_D = (2, 3, 4, 5, 10)
#: The fixed-``d`` series of ``--grid`` (:data:`~tvolib.paper.sweeps.BUDGET_SERIES` names).
GRID_SERIES = ("log", "moments", "gp_bandit_tvolib")


def grid_configs(profile: str) -> list:
    """Fig 11's runs of :data:`GRID_SERIES` at every ``d`` of :data:`GRID_D` (its own ``d = 5`` included)."""
    return [c.replace(d=d).validate() for c in fig11_bandit_budget(profile)
            if budget_series(c) in GRID_SERIES for d in GRID_D]


def grid_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Test log p(x) (mean and standard error over seeds) of each series at each ``d``, the best
    ``d`` of each series in hindsight and the minutes a run took (mean over its runs)."""
    stats = frame.groupby(["series", "d"])["test_log_px"].agg(["mean", "sem"])
    table = stats.apply(lambda r: f"{r['mean']:.2f} ± {r['sem']:.2f}", axis=1).unstack("d")
    table["best d"] = stats["mean"].unstack("d").idxmax(axis=1)
    table["min a run"] = (frame.groupby("series")["wall_seconds"].mean() / 60).round(1)
    return table


def d_by_third(rounds: pd.DataFrame) -> str:
    """The ``d`` trained in each third of the GP's rounds, most common first (``d: count``)."""
    gp = rounds[rounds["source"] == "gp"]
    thirds = [gp.iloc[k * len(gp) // 3:(k + 1) * len(gp) // 3]["d"] for k in range(3)]
    return " | ".join(", ".join(f"{d}: {n}" for d, n in Counter(t).most_common(4)) for t in thirds)


def main(profile: str, grid: bool = False) -> None:
    reference, adaptive = fig11_bandit_budget(profile), adaptive_configs(profile)
    if not reference:
        sys.exit(f"profile {profile!r} runs no Fig 11 budget")
    fixed = [c for c in grid_configs(profile) if c not in reference] if grid else []
    frame = runs.run_configs(reference + adaptive + fixed, progress=False)
    frame["series"] = ([budget_series(c) for c in reference] + ["gp_bandit_adaptive"] * len(adaptive)
                       + [budget_series(c) for c in fixed])
    main_runs = frame.iloc[:len(reference) + len(adaptive)]
    columns = ["test_log_px", "test_kl", "wall_seconds"]
    table = main_runs.groupby("series")[columns].agg(["mean", "sem", "count"]).round(2)
    print(table.sort_values(("test_log_px", "mean"), ascending=False).to_string())
    if grid:
        print("\nTest log p(x) by d under the same budget (mean ± s.e., 3 seeds):")
        print(grid_table(frame[frame["series"].isin(GRID_SERIES)]).to_string())
    rounds = collect_schedule_histories(adaptive)
    for seed, part in rounds.groupby("seed"):
        print(f"seed {seed}: {len(part)} rounds, {int((part['source'] == 'gp').sum())} by the GP; d trained "
              f"per third of them: {d_by_third(part)}")
        if "recommended_d" in part.columns:
            recommended = [int(d) for d in part["recommended_d"].dropna()]
            print(f"  d recommended after each GP round: {' '.join(map(str, recommended))}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--grid"]
    main(args[0] if args else "quick", grid="--grid" in sys.argv[1:])
