"""Figs 4, 5, 7, 8 (final metrics versus d) and Fig 9 (training curves), one colour per schedule."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.paper.names import DATASET_ORDER, METRIC_LABELS, dataset_label, ordered, schedule_label
from tvolib.plotting.style import finish, schedule_markers, schedule_palette, set_style

__all__ = ["plot_metric_vs_d", "plot_training_curves"]


def _panels(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """Groups of ``frame`` by ``keys`` as (key tuple, part), datasets in the paper's order."""
    if not keys:
        return [((), frame)]
    groups = [(k if isinstance(k, tuple) else (k,), part) for k, part in frame.groupby(list(keys), sort=True)]
    if "dataset" in keys:
        at = list(keys).index("dataset")
        rank = {n: i for i, n in enumerate(DATASET_ORDER)}
        groups.sort(key=lambda g: (rank.get(g[0][at], len(rank)), str(g[0][at])))
    return groups


def _header(facet: str | None, value: Any, labels: Mapping[str, str] | None) -> str:
    if facet is None:
        return ""
    return dataset_label(value, labels=labels) if facet == "dataset" else f"{facet}={value}"


def _seeds_note(n_seeds: pd.Series) -> str:
    if n_seeds.max() <= 1:
        return "one seed: no error bars"
    lo, hi = int(n_seeds.min()), int(n_seeds.max())
    return f"mean $\\pm$ standard error over {lo if lo == hi else f'{lo}-{hi}'} seeds"


def plot_metric_vs_d(
    summary: pd.DataFrame,
    metrics: Sequence[str] = ("test_log_px", "test_kl"),
    *,
    facets: Sequence[str] = ("dataset", "S"),
    schedules: Sequence[str] | None = None,
    dataset_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Figs 4, 5, 7 and 8: each metric (rows) versus d, one column per combination of ``facets``,
    one line per schedule at the mean over seeds with standard-error bars.

    Args:
        summary: :func:`tvolib.paper.analysis.summarise_by_schedule` (``<metric>_mean``/``_sem``,
            ``n_seeds``, ``d``, ``schedule`` and the facet columns present).
        metrics: the rows.
        facets: panel columns (those absent are skipped).
        schedules: restricts and orders the schedules (default: all, in the registry's order).
        dataset_labels: panel titles per dataset (default: the registry's).
        title: the figure title.

    Returns:
        The figure; schedules are dodged slightly along d so error bars stay readable.
    """
    require(summary, ["d", "schedule", "n_seeds", *(f"{m}_{s}" for m in metrics for s in ("mean", "sem"))],
            "plot_metric_vs_d")
    if schedules is not None:
        summary = summary[summary["schedule"].isin(schedules)]
    if summary.empty:
        raise ValueError("plot_metric_vs_d: no runs to plot (after filtering schedules)")
    facet_keys = [f for f in facets if f in summary.columns]
    panels = _panels(summary, facet_keys)
    present = set(summary["schedule"])
    names = [n for n in (list(schedules) if schedules is not None else ordered(present)) if n in present]
    palette, markers = schedule_palette(names), schedule_markers(names)
    set_style()
    fig, axes = plt.subplots(len(metrics), len(panels), figsize=(max(6.0, 3.9 * len(panels) + 0.6),
                             3.1 * len(metrics) + 0.8), squeeze=False, sharex="col", layout="constrained")
    d_values = np.sort(summary["d"].unique())
    step = float(np.min(np.diff(d_values))) if len(d_values) > 1 else 1.0
    offsets = {n: (i - (len(names) - 1) / 2) * 0.08 * step for i, n in enumerate(names)}
    for col, (key, part) in enumerate(panels):
        for row, metric in enumerate(metrics):
            ax = axes[row][col]
            for name in names:
                line = part[part["schedule"] == name].sort_values("d")
                if line.empty:
                    continue
                ax.errorbar(line["d"].to_numpy(dtype=float) + offsets[name],
                            line[f"{metric}_mean"].to_numpy(dtype=float), yerr=line[f"{metric}_sem"].fillna(0.0),
                            color=palette[name], marker=markers[name], markersize=5, capsize=3, linewidth=1.5,
                            label=schedule_label(name))
            ax.set_xticks(d_values)
            ax.set_ylabel(METRIC_LABELS.get(metric, metric))
            if row == len(metrics) - 1:
                ax.set_xlabel("d (number of partitions)")
            if row == 0:
                ax.set_title(", ".join(_header(f, v, dataset_labels) for f, v in zip(facet_keys, key)))
    return finish(fig, axes[0][0], f"schedule ({_seeds_note(summary['n_seeds'])})", title)


def _draw_curves(ax: plt.Axes, part: pd.DataFrame, names: list[str], palette: dict[str, Any], band: bool) -> None:
    for name in names:
        line = part[part["schedule"] == name].sort_values("epoch")
        if line.empty:
            continue
        ax.plot(line["epoch"], line["mean"], color=palette[name], linewidth=1.3, label=schedule_label(name))
        if band and line["sem"].notna().any():
            err = line["sem"].fillna(0.0)
            ax.fill_between(line["epoch"], line["mean"] - err, line["mean"] + err, color=palette[name], alpha=0.2,
                            linewidth=0)
    first, last = part["epoch"].min(), part["epoch"].max()
    late = part.loc[part["epoch"] >= first + 0.1 * (last - first), "mean"]
    if len(late) > 1:  # ignore the steep first tenth, which would flatten the curves
        lo, hi = float(late.quantile(0.01)), float(late.max())
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        ax.set_ylim(lo - pad, hi + pad)


def plot_training_curves(
    curves: pd.DataFrame,
    *,
    metric: str = "train_iwae",
    row: str | None = "dataset",
    col: str | None = "d",
    dataset_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Fig 9: ``metric`` versus epoch per schedule in a grid of panels (rows by ``row``, columns by
    ``col``; either may be None or absent).

    Args:
        curves: :func:`tvolib.paper.analysis.training_curves` (``schedule``, ``epoch``, ``mean``,
            ``sem``, ``count`` and the facet columns); a standard-error band is drawn when its
            ``attrs["seed"]`` is None (the mean over seeds).
        metric: names the y axis.
        row, col: facet columns.
        dataset_labels: panel titles per dataset.
        title: the figure title.

    Returns:
        The figure; each panel's y range ignores the first tenth of the epochs.
    """
    require(curves, ["epoch", "schedule", "mean", "sem"], "plot_training_curves")
    if curves.empty:
        raise ValueError("plot_training_curves: no curves to plot")
    row = row if row in curves.columns else None
    col = col if col in curves.columns else None
    rows = [k[0] for k, _ in _panels(curves, [row])] if row else [None]
    cols = [k[0] for k, _ in _panels(curves, [col])] if col else [None]
    names = ordered(curves["schedule"])
    palette = schedule_palette(names)
    seed = curves.attrs.get("seed")
    set_style()
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.6 * len(cols) + 0.4, 3.0 * len(rows) + 0.9),
                             squeeze=False, layout="constrained")
    for i, rv in enumerate(rows):
        for j, cv in enumerate(cols):
            ax = axes[i][j]
            part = curves
            if row:
                part = part[part[row] == rv]
            if col:
                part = part[part[col] == cv]
            ax.set_title(", ".join(t for t in (_header(row, rv, dataset_labels), _header(col, cv, dataset_labels)) if t))
            if part.empty:
                ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
            else:
                _draw_curves(ax, part, names, palette, band=seed is None)
            if i == len(rows) - 1:
                ax.set_xlabel("epoch")
            if j == 0:
                ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    which = "mean $\\pm$ s.e. over seeds" if seed is None else f"seed {seed}"
    return finish(fig, axes, f"schedule ({which})", title)

