"""The bandit test bed's figure: regret and degenerate arms per case, bandits beside baselines (draws only)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tvolib.paper.analysis import require
from tvolib.plotting.style import finish, message_figure, set_style

__all__ = ["plot_testbed"]

#: Markers of the baselines (what a user would pick instead), drawn over the bandits' bars.
BASELINE_MARKERS = {"log": "o", "log (best beta_1)": "D", "log (kept by evidence)": "d", "linear": "s",
                    "moments": "^", "bias-optimal": "v"}
#: Regrets above this are drawn at it (hollow markers, clipped bars): a few baselines are far off.
REGRET_CAP = 2.0


def plot_testbed(summary: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Per case (rows), each bandit protocol's mean regret of its second-half arms (bars, with the
    standard error over seeds) and each baseline's (markers: the mean over seeds; the fixed schedules
    have one result whatever the seed), and the share of the bandits' arms that are degenerate.

    Args:
        summary: one row per ``(case, protocol)`` with ``regret``, ``regret_sem`` and
            ``degenerate``, and optionally ``kind`` (``"bandit"`` or ``"baseline"``; without it
            every row is a bandit's) (:func:`tvolib.paper.bandit_analysis.testbed_summary`), cases
            and protocols in the order to draw.
        title: the figure title.

    Returns:
        The figure: two panels sharing the cases' axis. Regrets above :data:`REGRET_CAP` are drawn
        at it (bars clipped, markers hollow).
    """
    require(summary, ["case", "protocol", "regret", "regret_sem", "degenerate"], "plot_testbed")
    if summary.empty:
        return message_figure("Nothing to draw: no test-bed results.", title)
    set_style()
    kind = summary["kind"] if "kind" in summary.columns else pd.Series("bandit", index=summary.index)
    bandits, baselines = summary[kind != "baseline"], summary[kind == "baseline"]
    cases = list(dict.fromkeys(summary["case"]))
    protocols = list(dict.fromkeys(bandits["protocol"]))
    colours = dict(zip(protocols, sns.color_palette("deep", len(protocols))))
    height = 0.8 / max(len(protocols), 1)
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 0.55 * len(cases) * max(1, len(protocols) / 3) + 1.8),
                             sharey=True, layout="constrained", gridspec_kw={"width_ratios": [2, 1]})
    y0 = np.arange(len(cases))[::-1].astype(float)
    top = min(REGRET_CAP, max(1.0, float(summary["regret"].max()) * 1.05))
    for k, protocol in enumerate(protocols):
        part = bandits[bandits["protocol"] == protocol].set_index("case").reindex(cases)
        y = y0 + 0.4 - height * (k + 0.5)
        axes[0].barh(y, part["regret"].clip(upper=top), height, xerr=part["regret_sem"].fillna(0.0),
                     color=colours[protocol], capsize=2)
        axes[0].add_patch(Rectangle((0, y0[-1]), 0, 0, color=colours[protocol], label=protocol))  # legend: bars first
        axes[1].barh(y, part["degenerate"], height, color=colours[protocol])
    for protocol in dict.fromkeys(baselines["protocol"]):
        part = baselines[baselines["protocol"] == protocol].set_index("case").reindex(cases)
        regret = part["regret"].to_numpy(dtype=float)
        marker = BASELINE_MARKERS.get(protocol, "x")
        inside, beyond = regret <= top, regret > top  # NaN (no such baseline on the case): neither
        axes[0].scatter(regret[inside], y0[inside], marker=marker, color="black", edgecolors="white",
                        linewidths=0.6, zorder=3, s=36, label=protocol)
        axes[0].scatter(np.full(beyond.sum(), top), y0[beyond], marker=marker, facecolors="none",
                        edgecolors="black", zorder=3, s=36)
    axes[0].set_yticks(y0, cases)
    axes[0].set_xlim(0, top)
    axes[0].set_xlabel("regret, second half of the run (0 = the optimum; hollow: beyond the axis)")
    axes[1].set_xlim(0, 1)
    axes[1].set_xlabel("share of degenerate arms (bandits)")
    return finish(fig, axes, "protocol (bars) and baseline (markers)", title,
                  ncol=min(len(protocols) + baselines["protocol"].nunique(), 5))
