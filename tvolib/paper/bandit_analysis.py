"""What the bandit chose: per-run summaries of its rounds, and the protocol ablation's table.

Pure pandas, like :mod:`tvolib.paper.analysis`. A *rounds frame* is one or more runs' schedule
histories (:func:`tvolib.paper.results.collect_schedule_histories`): one row per bandit round with
``source`` ("random", "gp" or "corner"), ``next_arm`` and its degeneracy ``next_degenerate``
(:func:`tvolib.bandit.protocol.arm_degeneracy`), tagged with the run's config fields.

Example:
    >>> rounds = pd.DataFrame({"seed": [0, 0, 0], "source": ["random", "gp", "gp"],
    ...                        "next_arm": ["[0.1, 0.3]", "[0.05, 0.0501]", "[0.12, 0.4]"],
    ...                        "next_degenerate": [False, True, False]})
    >>> row = arm_summary(rounds, ["seed"]).iloc[0]
    >>> int(row["rounds"]), int(row["gp_rounds"]), float(row["degenerate_share"])
    (3, 2, 0.5)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tvolib.paper.analysis import as_float_list, mean_sem, require

__all__ = ["GP_SOURCES", "arm_summary", "degenerate_share", "protocol_ablation_table"]

#: Sources of arms chosen after a GP fit ("corner": the code's random replacement of a proposal
#: at the all-lower corner, counted with the GP's choices because the GP made the proposal).
GP_SOURCES = ("gp", "corner")


def _flags(values: pd.Series) -> pd.Series:
    """Booleans as written (bool) or read back from CSV (bool or the text "True"/"False")."""
    return values.map(lambda v: str(v).strip().lower() == "true" if isinstance(v, str) else bool(v))


def degenerate_share(rounds: pd.DataFrame) -> float:
    """Share of the GP-chosen arms (:data:`GP_SOURCES`) that are degenerate; NaN without any."""
    require(rounds, ["source", "next_degenerate"], "degenerate_share")
    chosen = rounds[rounds["source"].isin(GP_SOURCES)]
    return float(_flags(chosen["next_degenerate"]).mean()) if len(chosen) else float("nan")


def arm_summary(rounds: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per run (grouped by ``keys``): how many rounds, how many were the GP's, the share of
    its arms that are degenerate, and the mean of the arms it chose (sorted, in beta units).

    Returns:
        Columns ``*keys, rounds, random_rounds, gp_rounds, corner_rounds, degenerate_share,
        mean_gp_arm`` (a list, empty without GP rounds).
    """
    require(rounds, [*keys, "source", "next_arm", "next_degenerate"], "arm_summary")
    rows = []
    for key, run in rounds.groupby(list(keys), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        chosen = run[run["source"].isin(GP_SOURCES)]
        arms = [sorted(as_float_list(a)) for a in chosen["next_arm"]]
        rows.append({
            **dict(zip(keys, key)),
            "rounds": len(run),
            "random_rounds": int((run["source"] == "random").sum()),
            "gp_rounds": len(chosen),
            "corner_rounds": int((run["source"] == "corner").sum()),
            "degenerate_share": degenerate_share(run),
            "mean_gp_arm": np.round(np.mean(arms, axis=0), 3).tolist() if arms else [],
        })
    return pd.DataFrame(rows)


def protocol_ablation_table(runs: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """The ablation figure's numbers: per method (a protocol variant or a schedule), the mean and
    standard error over seeds of the final test log p(x) and KL, and the share of degenerate GP arms
    over all its runs' rounds.

    Args:
        runs: one row per run: ``method``, ``seed``, ``test_log_px``, ``test_kl``, and
            ``gp_rounds`` and ``degenerate_gp_rounds`` (0 for runs without a GP).
        order: the methods in the order to list them.

    Returns:
        Columns ``method, log_px, log_px_sem, kl, kl_sem, degenerate_share, gp_rounds, seeds``.
    """
    require(runs, ["method", "test_log_px", "test_kl", "gp_rounds", "degenerate_gp_rounds"], "protocol_ablation_table")
    rows = []
    for method in order:
        part = runs[runs["method"] == method]
        if part.empty:
            continue
        lp, lp_sem, n = mean_sem(part["test_log_px"])
        kl, kl_sem, _ = mean_sem(part["test_kl"])
        gp = int(part["gp_rounds"].sum())
        share = float(part["degenerate_gp_rounds"].sum()) / gp if gp else float("nan")
        rows.append({"method": method, "log_px": lp, "log_px_sem": lp_sem, "kl": kl, "kl_sem": kl_sem,
                     "degenerate_share": share, "gp_rounds": gp, "seeds": n})
    return pd.DataFrame(rows)
