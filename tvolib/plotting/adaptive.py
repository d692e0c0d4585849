"""The bandit that chooses d (not in the paper): its final metrics beside every schedule at each
fixed d, and the d it chose over training."""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.paper.names import DATASET_ORDER, METRIC_LABELS, dataset_label, ordered, schedule_label
from tvolib.plotting.style import finish, schedule_markers, schedule_palette, set_style

__all__ = ["plot_adaptive_d"]


def plot_adaptive_d(
    summary: pd.DataFrame,
    adaptive: pd.DataFrame,
    d_rounds: pd.DataFrame,
    *,
    metrics: tuple[str, ...] = ("test_log_px", "test_kl"),
    dataset_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """One column per dataset: each metric versus d for the fixed-d schedules (mean and standard
    error over seeds), the adaptive-d bandit as a horizontal line with its standard-error band (one
    run per seed, whatever d it chose), and below, the d each of its windows trained (one line per
    seed) and, where recorded, the d it recommended after each round (dashed).

    Args:
        summary: :func:`tvolib.paper.analysis.summarise_by_schedule` of the fixed-d runs
            (``dataset, d, schedule, n_seeds, <metric>_mean, <metric>_sem``).
        adaptive: the same summary of the adaptive runs by ``dataset`` and ``schedule``.
        d_rounds: :func:`tvolib.paper.bandit_analysis.d_over_training` (``dataset, seed,
            start_epoch, epoch, d``, optionally ``recommended_d``).
        metrics: the first rows.
        dataset_labels: panel titles per dataset.
        title: the figure title.

    Returns:
        The figure.
    """
    columns = [f"{m}_{s}" for m in metrics for s in ("mean", "sem")]
    require(summary, ["dataset", "d", "schedule", "n_seeds", *columns], "plot_adaptive_d (summary)")
    require(adaptive, ["dataset", "schedule", "n_seeds", *columns], "plot_adaptive_d (adaptive)")
    require(d_rounds, ["dataset", "seed", "start_epoch", "epoch", "d"], "plot_adaptive_d (d_rounds)")
    datasets = [d for d in DATASET_ORDER if d in set(summary["dataset"]) | set(adaptive["dataset"])]
    if not datasets:
        raise ValueError("plot_adaptive_d: no runs to plot")
    names = ordered(set(summary["schedule"]) | set(adaptive["schedule"]))
    palette, markers = schedule_palette(names), schedule_markers(names)
    set_style()
    rows = len(metrics) + 1
    fig, axes = plt.subplots(rows, len(datasets), figsize=(max(6.0, 4.4 * len(datasets) + 0.6), 3.0 * rows + 0.8),
                             squeeze=False, layout="constrained")
    d_values = np.sort(summary["d"].unique()) if len(summary) else np.array([])
    step = float(np.min(np.diff(d_values))) if len(d_values) > 1 else 1.0
    fixed = [n for n in names if n in set(summary["schedule"])]
    offsets = {n: (i - (len(fixed) - 1) / 2) * 0.06 * step for i, n in enumerate(fixed)}
    for col, dataset in enumerate(datasets):
        part, band = summary[summary["dataset"] == dataset], adaptive[adaptive["dataset"] == dataset]
        for row, metric in enumerate(metrics):
            ax = axes[row][col]
            for name in fixed:
                line = part[part["schedule"] == name].sort_values("d")
                ax.errorbar(line["d"].to_numpy(dtype=float) + offsets[name], line[f"{metric}_mean"].to_numpy(dtype=float),
                            yerr=line[f"{metric}_sem"].fillna(0.0), color=palette[name], marker=markers[name],
                            markersize=5, capsize=3, linewidth=1.3, label=schedule_label(name))
            for _, run in band.iterrows():
                mean, sem = float(run[f"{metric}_mean"]), float(np.nan_to_num(run[f"{metric}_sem"]))
                name = run["schedule"]
                ax.axhline(mean, color=palette[name], linewidth=2.0, label=f"{schedule_label(name)} (one run per seed)")
                ax.axhspan(mean - sem, mean + sem, color=palette[name], alpha=0.18, linewidth=0)
            if len(d_values):
                ax.set_xticks(d_values)
            ax.set_xlabel("d (number of partitions)")
            ax.set_ylabel(METRIC_LABELS.get(metric, metric))
            if row == 0:
                ax.set_title(dataset_label(dataset, labels=dataset_labels))
        ax = axes[-1][col]
        chosen = d_rounds[d_rounds["dataset"] == dataset]
        name = adaptive["schedule"].iloc[0] if len(adaptive) else "gp_bandit_adaptive"
        for seed, run in chosen.groupby("seed", sort=True):
            x = np.ravel(np.column_stack([run["start_epoch"], run["epoch"]]))
            y = np.repeat(run["d"].to_numpy(dtype=float), 2)
            ax.plot(x, y + 0.04 * (int(seed) % 5 - 2), color=palette.get(name, "k"), alpha=0.75, linewidth=1.2)
            if "recommended_d" in run.columns and run["recommended_d"].notna().any():
                shown = run.dropna(subset=["recommended_d"])
                ax.plot(shown["epoch"], shown["recommended_d"].to_numpy(dtype=float) + 0.04 * (int(seed) % 5 - 2),
                        color="0.25", alpha=0.75, linewidth=1.0, linestyle="--", drawstyle="steps-post")
        recommended = "recommended_d" in chosen.columns and chosen["recommended_d"].notna().any()
        ax.set_xlabel("epoch")
        ax.set_ylabel("d trained (solid), recommended (dashed)" if recommended else "d trained (each line a seed)")
        if len(chosen):
            ax.set_yticks(range(int(chosen["d"].min()), int(chosen["d"].max()) + 1))
    return finish(fig, axes[0][0], "schedule (mean $\\pm$ standard error over seeds)", title, ncol=3)
