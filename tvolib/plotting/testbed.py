"""The bandit test bed's figure: regret and degenerate arms per case and protocol (draws only)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.plotting.style import finish, message_figure, set_style

__all__ = ["plot_testbed"]


def plot_testbed(summary: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Per case (rows of bars), each protocol's mean regret of its second-half arms with the
    standard error over seeds, and the share of those arms that are degenerate.

    Args:
        summary: one row per ``(case, protocol)`` with ``regret``, ``regret_sem`` and
            ``degenerate`` (:func:`tvolib.paper.bandit_analysis.testbed_summary`), cases and
            protocols in the order to draw.
        title: the figure title.

    Returns:
        The figure: two panels sharing the cases' axis.
    """
    require(summary, ["case", "protocol", "regret", "regret_sem", "degenerate"], "plot_testbed")
    if summary.empty:
        return message_figure("Nothing to draw: no test-bed results.", title)
    set_style()
    cases = list(dict.fromkeys(summary["case"]))
    protocols = list(dict.fromkeys(summary["protocol"]))
    colours = dict(zip(protocols, sns.color_palette("deep", len(protocols))))
    height = 0.8 / len(protocols)
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 0.55 * len(cases) * max(1, len(protocols) / 3) + 1.6),
                             sharey=True, layout="constrained")
    y0 = np.arange(len(cases))[::-1].astype(float)
    for k, protocol in enumerate(protocols):
        part = summary[summary["protocol"] == protocol].set_index("case").reindex(cases)
        y = y0 + 0.4 - height * (k + 0.5)
        axes[0].barh(y, part["regret"], height, xerr=part["regret_sem"].fillna(0.0), color=colours[protocol],
                     label=protocol, capsize=2)
        axes[1].barh(y, part["degenerate"], height, color=colours[protocol])
    axes[0].set_yticks(y0, cases)
    axes[0].set_xlim(0, 1)
    axes[0].set_xlabel("regret of the second half's arms (1 - f; 0 = the optimum)")
    axes[1].set_xlim(0, 1)
    axes[1].set_xlabel("share of the second half's arms that are degenerate")
    return finish(fig, axes, "protocol", title, ncol=len(protocols))
