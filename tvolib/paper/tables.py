"""The numbers a figure saves beside its picture, where the figure itself draws no table.

Every figure writes ``figures/<stem>.csv``; the claims (:mod:`tvolib.paper.claims`) and the results
page read only those files. Figs 4, 5, 7 and 8 save :func:`~tvolib.paper.analysis.summarise_by_schedule`'s
table and Figs 6, 10-13 and the appendix tables their own; this module makes the rest:

* Fig 2: :func:`reward_stage_table`, the GP posterior at each stage drawn;
* Fig 3: :func:`phase_beta_table`, the GP arms' mean interior point per seed and third of training;
* Fig 6: :func:`seed_tail_table`, each method's tail mean per seed, then mean ± s.e. over seeds
  (the paper's median over seeds has no standard error);
* Fig 9: :func:`drop_table`, how often each run's training curve falls from one epoch to the next.

Example:
    >>> import pandas as pd
    >>> h = pd.DataFrame({"epoch": [0, 1, 2, 3], "train_iwae": [-9.0, -5.0, -6.0, -4.0], "schedule": "log",
    ...                   "dataset": "mnist", "S": 10, "d": 5, "seed": 0})
    >>> drop_table(h, burn_in=1)[["schedule", "drops_mean", "largest_drop_mean"]].values.tolist()
    [['log', 1.0, 1.0]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tvolib.paper.analysis import interior, mean_sem, require
from tvolib.paper.bandit_analysis import GP_SOURCES

__all__ = ["drop_table", "phase_beta_table", "reward_stage_table", "seed_tail_table"]


def reward_stage_table(panels: Sequence[object]) -> pd.DataFrame:
    """Fig 2: per stage drawn (a :class:`~tvolib.plotting.bandit.RewardPanel`), the round, epoch,
    the posterior mean's lowest and highest value over beta_1, the beta_1 of the highest and the
    posterior sd there."""
    rows = []
    for panel in panels:
        best = int(np.argmax(panel.mean))
        rows.append({"round": panel.round, "epoch": panel.epoch, "mean_min": float(np.min(panel.mean)),
                     "mean_max": float(panel.mean[best]), "best_beta_1": float(panel.grid[best]),
                     "sd_at_best": float(panel.std[best])})
    return pd.DataFrame(rows, columns=["round", "epoch", "mean_min", "mean_max", "best_beta_1", "sd_at_best"])


def phase_beta_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Fig 3: per ``budget``, seed and third of training, the GP-chosen arms' count, mean interior
    point and share of points below 0.5.

    Args:
        rounds: bandit rounds with ``budget``, ``seed``, ``phase`` (the third of the arm's epoch),
            ``source`` and ``next_arm``.
    """
    require(rounds, ["budget", "seed", "phase", "source", "next_arm"], "phase_beta_table")
    chosen = rounds[rounds["source"].isin(GP_SOURCES)]
    rows = []
    for (budget, seed, phase), part in chosen.groupby(["budget", "seed", "phase"], sort=False):
        points = np.concatenate([interior(arm) for arm in part["next_arm"]])
        rows.append({"budget": budget, "seed": int(seed), "phase": phase, "gp_rounds": len(part),
                     "mean_beta": float(points.mean()), "share_below_half": float((points < 0.5).mean())})
    return pd.DataFrame(rows, columns=["budget", "seed", "phase", "gp_rounds", "mean_beta", "share_below_half"])


def seed_tail_table(histories: pd.DataFrame, metric: str, tail_epochs: int) -> pd.DataFrame:
    """Fig 6: per method and S, ``metric``'s mean over each run's last ``tail_epochs`` evaluated
    epochs, then the mean and standard error of those over seeds.

    Returns:
        Columns ``method, S, seed_mean, seed_sem, seeds``.
    """
    require(histories, ["method", "S", "seed", "epoch", metric], "seed_tail_table")
    rows = []
    for (method, S), part in histories.groupby(["method", "S"], sort=True):
        evaluated = part[part[metric].notna()]
        last = evaluated["epoch"].max()
        tail = evaluated[evaluated["epoch"] > last - max(1, tail_epochs)]
        mean, sem, n = mean_sem(tail.groupby("seed")[metric].mean())
        rows.append({"method": method, "S": int(S), "seed_mean": mean, "seed_sem": sem, "seeds": n})
    return pd.DataFrame(rows, columns=["method", "S", "seed_mean", "seed_sem", "seeds"])


def drop_table(histories: pd.DataFrame, burn_in: int, metric: str = "train_iwae") -> pd.DataFrame:
    """Fig 9: per dataset, S, d and schedule, how many epochs after ``burn_in`` each run's ``metric``
    fell below the epoch before (a drop) and its largest fall, mean ± s.e. over runs.

    Returns:
        Columns ``dataset, S, d, schedule, runs, drops_mean, drops_sem, largest_drop_mean``
        (the keys absent from ``histories`` are left out).
    """
    require(histories, ["epoch", "schedule", "seed", metric], "drop_table")
    keys = [k for k in ("dataset", "S", "d") if k in histories.columns] + ["schedule"]
    runs = []
    for key, run in histories[histories[metric].notna()].groupby([*keys, "seed"], sort=True):
        values = run.sort_values("epoch")
        falls = -np.diff(values[values["epoch"] >= burn_in][metric].to_numpy(dtype=float))
        runs.append({**dict(zip(keys, key[:-1])), "drops": int((falls > 0).sum()),
                     "largest_drop": float(falls.max()) if falls.size and falls.max() > 0 else 0.0})
    per_run = pd.DataFrame(runs)
    rows = []
    for key, part in per_run.groupby(keys, sort=True):
        mean, sem, n = mean_sem(part["drops"])
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), "runs": n, "drops_mean": mean,
                     "drops_sem": sem, "largest_drop_mean": float(part["largest_drop"].mean())})
    return pd.DataFrame(rows)
