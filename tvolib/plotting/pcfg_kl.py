"""Fig 6 (Appendix D.1): the PCFG's KLs versus S per method, and their median curves over epochs."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.paper.names import PCFG_METHOD_MARKERS, PCFG_METHOD_ORDER, PCFG_METRIC_LABELS, PCFG_METRICS, ordered, \
    pcfg_method_label
from tvolib.plotting.style import finish, pcfg_palette, set_style

__all__ = ["plot_pcfg"]


def _spans_decades(values: Iterable[float], decades: float = 1.0) -> bool:
    """True when the finite values are all positive and span at least ``decades`` powers of ten."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    return bool(arr.size > 1 and (arr > 0).all() and np.log10(arr.max() / arr.min()) >= decades)


def _draw_vs_S(ax: plt.Axes, summary: pd.DataFrame, metric: str, names: list[str], styles: dict) -> None:
    S_values = sorted(int(s) for s in summary["S"].unique())
    for name in names:
        line = summary[summary["method"] == name].sort_values("S")
        if not line.empty:
            ax.plot(line["S"].to_numpy(dtype=float), line[metric].to_numpy(dtype=float), linewidth=1.6,
                    marker=PCFG_METHOD_MARKERS.get(name, "o"), markersize=6, **styles[name])
    ax.set_xscale("log")
    ax.set_xticks(S_values)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(S_values) == 1:
        ax.set_xlim(S_values[0] / 1.5, S_values[0] * 1.5)
    if _spans_decades(summary[metric]):
        ax.set_yscale("log")
    ax.set_ylabel(PCFG_METRIC_LABELS.get(metric, metric))


def _draw_levels(ax: plt.Axes, levels: Sequence[tuple[str, float]]) -> None:
    """Horizontal reference lines (e.g. the uniform-theta value and the length cut's floor), labelled."""
    for (label, value), style in zip(levels, (":", "-.", (0, (1, 3)))):
        ax.axhline(value, color="black", linestyle=style, linewidth=1.0, alpha=0.7, label=label)


def _draw_curves(ax: plt.Axes, curves: pd.DataFrame, metric: str, names: list[str], styles: dict,
                 tail: tuple[float, float]) -> None:
    part = curves[curves[metric].notna()]
    shown: list[float] = []
    for name in names:
        curve = part[part["method"] == name].sort_values("epoch")
        if not curve.empty:
            ax.plot(curve["epoch"].to_numpy(dtype=float), curve[metric].to_numpy(dtype=float), linewidth=1.3,
                    **styles[name])
            shown.extend(curve[metric].tolist())
    if not part.empty:
        lo = float(part["epoch"].min())
        ax.axvspan(max(lo, tail[0] - 0.5), tail[1], color="grey", alpha=0.15, linewidth=0)
        ax.set_xlim(lo, max(tail[1], lo + 1))
    if _spans_decades(shown):
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def plot_pcfg(
    summary: pd.DataFrame,
    curves: pd.DataFrame | None = None,
    *,
    metrics: Sequence[str] = PCFG_METRICS,
    tail_fraction: float | None = None,
    methods: Sequence[str] | None = None,
    title: str | None = None,
    reference_levels: dict[str, Sequence[tuple[str, float]]] | None = None,
) -> Figure:
    """Fig 6: one row per KL metric; left, the tail mean of the median over seeds versus S, one
    line per method; right (with ``curves``), the median curves over epochs at one S with the
    averaged tail shaded, to show whether the runs have settled.

    Args:
        summary: :func:`tvolib.paper.pcfg_analysis.pcfg_summary` (``method``, ``S``, ``n_seeds``,
            ``tail_first``/``tail_last`` and the metrics).
        curves: :func:`tvolib.paper.pcfg_analysis.pcfg_curves` at one S, or None.
        metrics: the rows.
        tail_fraction: stated in the left column's title.
        methods: restricts and orders the methods (:func:`tvolib.paper.names.pcfg_method` names).
        title: the figure title.
        reference_levels: per metric, ``(label, value)`` horizontal lines drawn in that metric's
            panels (Fig 6: the uniform-theta level and the length cut's floor for ``kl_p``).

    Returns:
        The figure. TVO-log and TVO-GP-bandit take the log and GP-bandit schedules' colours;
        baselines are dashed; a panel whose positive values span a decade or more has a log y axis.
    """
    require(summary, ["method", "S", "tail_first", "tail_last", *metrics], "plot_pcfg")
    if not metrics:
        raise ValueError("plot_pcfg needs at least one metric")
    if methods is not None:
        unknown = sorted(set(methods) - set(summary["method"]))
        if unknown:
            raise ValueError(f"plot_pcfg: methods {unknown} have no runs; available: {sorted(set(summary['method']))}")
        summary = summary[summary["method"].isin(methods)]
    if summary.empty:
        raise ValueError("plot_pcfg: no runs to plot")
    names = list(methods) if methods is not None else ordered(summary["method"], PCFG_METHOD_ORDER)
    palette = pcfg_palette(names)
    styles: dict[str, dict[str, Any]] = {
        n: dict(color=palette[n], linestyle="-" if str(n).startswith("tvo") else "--", label=pcfg_method_label(n))
        for n in names}
    set_style()
    ncols = 2 if curves is not None else 1
    fig, axes = plt.subplots(len(metrics), ncols, figsize=(5.0 * ncols + 0.6, 2.7 * len(metrics) + 1.0),
                             squeeze=False, layout="constrained")
    at_S = summary[summary["S"] == curves.attrs.get("S")] if curves is not None else summary
    at_S = at_S if len(at_S) else summary
    tail = (float(at_S["tail_first"].min()), float(at_S["tail_last"].max()))
    for row, metric in enumerate(metrics):
        _draw_vs_S(axes[row][0], summary, metric, names, styles)
        if curves is not None:
            _draw_curves(axes[row][1], curves, metric, names, styles, tail)
        for ax in axes[row]:
            _draw_levels(ax, (reference_levels or {}).get(metric, ()))
    share = "" if tail_fraction is None else f" over the last {tail_fraction:.0%} of epochs"
    axes[0][0].set_title(f"median over seeds, mean{share}")
    axes[-1][0].set_xlabel("S (samples per data point)")
    if curves is not None:
        S = curves.attrs.get("S")
        axes[0][1].set_title(f"median over seeds per epoch{'' if S is None else f', S={S}'} (tail shaded)")
        axes[-1][1].set_xlabel("epoch")
    seeds = summary["n_seeds"] if "n_seeds" in summary.columns else pd.Series([1])
    span = f"{int(seeds.min())}" if seeds.min() == seeds.max() else f"{int(seeds.min())}-{int(seeds.max())}"
    return finish(fig, axes, f"method ({span} seed{'s' if seeds.max() > 1 else ''})", title)
