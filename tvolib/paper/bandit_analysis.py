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

from tvolib.paper.analysis import as_float_list, mean_sem, require, training_phase
from tvolib.paper.names import TRAINING_PHASES

__all__ = ["GP_SOURCES", "adaptive_d_table", "arm_summary", "d_over_training", "degenerate_share",
           "degenerate_by_phase", "with_chooser", "protocol_ablation_table"]

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


def with_chooser(rounds: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``rounds`` sorted by run (``keys``) and round, with ``chosen_by``: who chose the ``arm`` each
    round trained with, ``"GP"`` (the previous round's ``source`` in :data:`GP_SOURCES`) or
    ``"random"`` (a random round, and round 0's initial arm).

    Example:
        >>> rounds = pd.DataFrame({"seed": [0, 0, 0], "round": [0, 1, 2], "source": ["random", "gp", "gp"]})
        >>> with_chooser(rounds, ["seed"])["chosen_by"].tolist()
        ['random', 'random', 'GP']
    """
    require(rounds, [*keys, "round", "source"], "with_chooser")
    rounds = rounds.sort_values([*keys, "round"])
    chooser = rounds.groupby(list(keys), dropna=False)["source"].shift(1)
    return rounds.assign(chosen_by=["GP" if s in GP_SOURCES else "random" for s in chooser])


def degenerate_by_phase(rounds: pd.DataFrame, keys: Sequence[str] = ()) -> pd.DataFrame:
    """Per group of ``keys`` and third of training, the GP's arms chosen then and the share of them
    that are degenerate (``next_degenerate``): does the share fall as rounds accumulate?

    An arm belongs to the third of its run's ``epochs`` in which it was chosen (the round's
    ``epoch``, :func:`~tvolib.paper.analysis.training_phase`); seeds are pooled.

    Returns:
        Columns ``*keys, phase, gp_arms, degenerate, degenerate_share`` (NaN without GP arms), every
        phase of :data:`~tvolib.paper.names.TRAINING_PHASES` for every group.

    Example:
        >>> rounds = pd.DataFrame({"epoch": [10, 20, 50, 60], "epochs": 60, "source": ["random", "gp", "gp", "gp"],
        ...                        "next_degenerate": [True, True, False, True]})
        >>> degenerate_by_phase(rounds)["degenerate_share"].tolist()
        [1.0, nan, 0.5]
    """
    require(rounds, [*keys, "epoch", "epochs", "source", "next_degenerate"], "degenerate_by_phase")
    chosen = rounds[rounds["source"].isin(GP_SOURCES)]
    chosen = chosen.assign(phase=training_phase(chosen["epoch"], chosen["epochs"]),
                           degenerate=_flags(chosen["next_degenerate"]).astype(int))
    groups = [((), rounds)] if not keys else [
        (k if isinstance(k, tuple) else (k,), part) for k, part in rounds.groupby(list(keys), sort=False, dropna=False)]
    rows = []
    for key, _ in groups:
        part = chosen
        for name, value in zip(keys, key):
            part = part[part[name] == value]
        for phase in TRAINING_PHASES:
            in_phase = part[part["phase"] == phase]
            n, bad = len(in_phase), int(in_phase["degenerate"].sum())
            rows.append({**dict(zip(keys, key)), "phase": phase, "gp_arms": n, "degenerate": bad,
                         "degenerate_share": bad / n if n else float("nan")})
    return pd.DataFrame(rows)


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


def testbed_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """The test bed's table by ``(case, protocol)``, in the frame's order: mean regret and its
    standard error over seeds, mean RMS distance to the optimum, mean degenerate share, seeds, the
    GP's rounds per run, the regret relative to random arms' on the same case (< 1: better) and,
    where the frame has baselines (``kind == "baseline"``, :mod:`tvolib.bandit.testbed_baselines`),
    ``kind``, ``runs`` (a result's cost in runs), ``beta1`` (the log rows', where every seed has the
    same) and the case's best baseline (``best_baseline``, its ``best_baseline_regret``): what a
    user would have picked instead.

    Example:
        >>> frame = pd.DataFrame({"case": ["a"] * 4, "protocol": ["random arms"] * 2 + ["x"] * 2,
        ...                       "seed": [0, 1, 0, 1], "regret": [0.6, 0.8, 0.2, 0.4],
        ...                       "distance": [0.1] * 4, "degenerate": [0.0, 0.0, 0.5, 0.0], "gp_rounds": [0, 0, 9, 9]})
        >>> testbed_summary(frame)[["protocol", "regret", "vs_random"]].round(2).values.tolist()
        [['random arms', 0.7, 1.0], ['x', 0.3, 0.43]]
    """
    require(frame, ["case", "protocol", "seed", "regret", "distance", "degenerate", "gp_rounds"], "testbed_summary")
    extra = {c: (c, "first") for c in ("kind", "runs") if c in frame.columns}
    if "beta1" in frame.columns:  # one value per (case, protocol), else none: the user's grid search varies by seed
        extra["beta1"] = ("beta1", lambda s: s.iloc[0] if s.nunique(dropna=False) == 1 else float("nan"))
    grouped = frame.groupby(["case", "protocol"], sort=False)
    table = grouped.agg(regret=("regret", "mean"), regret_sem=("regret", "sem"), distance=("distance", "mean"),
                        degenerate=("degenerate", "mean"), seeds=("seed", "count"),
                        gp_rounds=("gp_rounds", "mean"), **extra).reset_index()
    random = table[table["protocol"] == "random arms"].set_index("case")["regret"]
    table["vs_random"] = table["regret"] / table["case"].map(random)
    if "kind" in table.columns and (table["kind"] == "baseline").any():
        baselines = table[table["kind"] == "baseline"]
        best = baselines.loc[baselines.groupby("case", sort=False)["regret"].idxmin()].set_index("case")
        table["best_baseline"] = table["case"].map(best["protocol"])
        table["best_baseline_regret"] = table["case"].map(best["regret"])
    return table


def adaptive_d_table(frame: pd.DataFrame, adaptive: str = "gp_bandit_adaptive",
                     time_columns: Sequence[str] = ("train_seconds", "eval_seconds", "bandit_seconds")) -> pd.DataFrame:
    """The adaptive-d figure's table, per dataset: the bandit that chooses d (one run per seed)
    beside every fixed-d schedule at each d and at its best d in hindsight (a grid over d: one run
    per d and seed), with what each costs.

    Args:
        frame: a run frame (one row per run: ``dataset, schedule, d, seed, test_log_px, test_kl``
            and the seconds of ``time_columns``, absent ones counted as 0), protocol series named
            (:func:`tvolib.paper.analysis.with_series`).
        adaptive: the adaptive schedule's name (its ``d`` is the most it may choose).
        time_columns: the seconds a run costs (training, evaluation, the schedule's own rounds).

    Returns:
        Columns ``dataset, schedule, d, log_px, log_px_sem, kl, kl_sem, seeds, runs_per_seed,
        minutes_per_seed``; ``d`` is ``"<= d_max"`` for the adaptive runs, the value for a fixed d,
        and ``"best (d = k)"`` for the d of highest mean log p(x) (the grid's answer, its runs and
        minutes those of the whole grid). Standard errors are over seeds.

    Example:
        >>> frame = pd.DataFrame({"dataset": "m", "seed": [0, 1] * 3, "test_kl": 1.0, "train_seconds": 60.0,
        ...     "schedule": ["log"] * 4 + ["gp_bandit_adaptive"] * 2, "d": [2, 2, 5, 5, 5, 5],
        ...     "test_log_px": [-100.0, -102.0, -99.0, -99.0, -98.0, -98.5]})
        >>> adaptive_d_table(frame)[["schedule", "d", "log_px", "runs_per_seed"]].values.tolist()
        [['gp_bandit_adaptive', '<= 5', -98.25, 1], ['log', '2', -101.0, 1], ['log', '5', -99.0, 1], ['log', 'best (d = 5)', -99.0, 2]]
    """
    require(frame, ["dataset", "schedule", "d", "seed", "test_log_px", "test_kl"], "adaptive_d_table")
    present = [c for c in time_columns if c in frame.columns]
    frame = frame.assign(_minutes=frame[present].fillna(0.0).sum(axis=1) / 60.0 if present else 0.0)
    rows = []

    def row(dataset, schedule, d, part, runs_per_seed, minutes):
        lp, lp_sem, n = mean_sem(part["test_log_px"])
        kl, kl_sem, _ = mean_sem(part["test_kl"])
        return {"dataset": dataset, "schedule": schedule, "d": d, "log_px": lp, "log_px_sem": lp_sem, "kl": kl,
                "kl_sem": kl_sem, "seeds": n, "runs_per_seed": runs_per_seed, "minutes_per_seed": minutes}

    for dataset, data in frame.groupby("dataset", sort=False):
        runs = data[data["schedule"] == adaptive]
        if len(runs):
            rows.append(row(dataset, adaptive, f"<= {int(runs['d'].max())}", runs, 1, float(runs["_minutes"].mean())))
        for schedule in dict.fromkeys(s for s in data["schedule"] if s != adaptive):
            grid = data[data["schedule"] == schedule]
            by_d = {int(d): part for d, part in grid.groupby("d", sort=True)}
            for d, part in by_d.items():
                rows.append(row(dataset, schedule, str(d), part, 1, float(part["_minutes"].mean())))
            best = max(by_d, key=lambda d: by_d[d]["test_log_px"].mean())
            minutes = float(sum(part.groupby("seed")["_minutes"].sum().mean() for part in by_d.values()))
            rows.append(row(dataset, schedule, f"best (d = {best})", by_d[best], len(by_d), minutes))
    return pd.DataFrame(rows)


def d_over_training(rounds: pd.DataFrame, keys: Sequence[str] = ("dataset", "seed")) -> pd.DataFrame:
    """The ``d`` each window of an adaptive-d run trained: one row per round with ``*keys``,
    ``start_epoch``, ``epoch`` (its end), ``d`` and, where the rounds recorded it, ``recommended_d``
    (the ``d`` the bandit recommended at the round's end; NaN in random rounds) (a rounds frame of
    :class:`~tvolib.bandit.AdaptiveDBanditSchedule` runs).

    Example:
        >>> rounds = pd.DataFrame({"seed": 0, "round": [0, 1], "start_epoch": [0, 3], "epoch": [3, 6], "d": [4, 2]})
        >>> d_over_training(rounds, ["seed"])["d"].tolist()
        [4, 2]
    """
    require(rounds, [*keys, "start_epoch", "epoch", "d"], "d_over_training")
    columns = [*keys, "start_epoch", "epoch", "d"] + (["recommended_d"] if "recommended_d" in rounds.columns else [])
    out = rounds[columns].dropna(subset=["start_epoch", "epoch"]).copy()
    for column in ("start_epoch", "epoch", "d"):
        out[column] = out[column].astype(int)
    return out.sort_values([*keys, "start_epoch"]).reset_index(drop=True)
