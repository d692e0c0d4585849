"""Figs 2, 3 and 10: the GP bandit's reward surface at three stages, its chosen betas over training,
and the protocol ablation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.paper.names import TRAINING_PHASES
from tvolib.plotting.style import finish, message_figure, set_style, suptitle

__all__ = ["RewardPanel", "plot_reward_surface", "plot_betas_over_time", "plot_protocol_ablation"]


@dataclass(frozen=True)
class RewardPanel:
    """One stage of Fig 2: the GP posterior ``mean`` and ``std`` of the reward on the beta_1
    ``grid`` as it stood after the bandit round at row ``position`` (its ``round`` and ``epoch``)."""

    position: int
    round: int
    epoch: int
    grid: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def plot_reward_surface(
    observations: pd.DataFrame,
    panels: Sequence[RewardPanel],
    *,
    title: str | None = None,
) -> Figure:
    """Fig 2: per panel, the GP posterior mean +- one std of the reward over beta_1 (a d = 2 run),
    with the observed (beta_1, reward) pairs up to that round coloured by round.

    Args:
        observations: :func:`tvolib.paper.analysis.reward_observations` of the run's bandit log.
        panels: the stages (:func:`tvolib.paper.analysis.stage_rounds`); none gives a figure saying
            that no round fitted a GP (a run shorter than the burn-in and random initial rounds).
        title: the figure title.

    Returns:
        The figure.
    """
    require(observations, ["position", "round", "epoch", "beta1", "reward"], "plot_reward_surface")
    if observations.empty or not panels:
        what = ("no bandit rounds" if observations.empty
                else f"{len(observations)} bandit rounds, all before the first GP fit")
        return message_figure(f"Nothing to draw: {what}\n(the run is shorter than the bandit's burn-in and "
                              "random initial rounds).", title)
    order = observations["round"].to_numpy()
    set_style()
    norm = matplotlib.colors.Normalize(vmin=float(np.min(order)), vmax=float(max(np.max(order), 1)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.8, 3.9), squeeze=False,
                             layout="constrained")
    colour = sns.color_palette("deep")[0]
    ok = np.isfinite(observations["reward"].to_numpy()) & np.isfinite(observations["beta1"].to_numpy())
    sc = None
    for ax, panel in zip(axes[0], panels):
        ax.plot(panel.grid, panel.mean, color=colour, linewidth=2, label="GP mean")
        ax.fill_between(panel.grid, panel.mean - panel.std, panel.mean + panel.std, color=colour, alpha=0.2,
                        label=r"$\pm$ 1 std")
        seen = observations[ok & (observations["position"].to_numpy() <= panel.position)]
        sc = ax.scatter(seen["beta1"], seen["reward"], c=seen["round"], cmap=plt.get_cmap("viridis"), norm=norm,
                        s=22, edgecolors="black", linewidths=0.3, zorder=3, label="chosen $\\beta_1$")
        ax.set_xlim(float(panel.grid[0]), float(panel.grid[-1]))
        ax.set_xlabel(r"$\beta_1$")
        ax.set_ylabel(r"reward: change in train $\mathcal{L}$ (nats)")
        ax.set_title(f"after epoch {panel.epoch} (round {panel.round})")
    axes[0][0].legend(loc="best", fontsize="small")
    bar = fig.colorbar(sc, ax=list(axes[0]), label="bandit round", fraction=0.03, pad=0.01)
    bar.locator = matplotlib.ticker.MaxNLocator(integer=True)
    bar.update_ticks()
    if title:
        suptitle(fig, title)
    return fig


def plot_betas_over_time(points: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Fig 3: the bandit's chosen interior betas versus epoch, coloured by training phase (the
    paper's blue/orange/green), and below, the distribution of the betas chosen in each phase.

    Args:
        points: :func:`tvolib.paper.analysis.betas_by_phase` (``epoch``, ``beta``, ``phase``; with a
            ``chosen_by`` column, arms of random rounds are drawn as crosses, the GP's as dots); an
            empty frame (a run shorter than the bandit's burn-in) gives a figure saying so.
        title: the figure title.

    Returns:
        The figure.
    """
    if points.empty:
        return message_figure("Nothing to draw: no bandit rounds\n(the run is shorter than the bandit's burn-in).",
                              title)
    require(points, ["epoch", "beta", "phase"], "plot_betas_over_time")
    set_style()
    palette = dict(zip(TRAINING_PHASES, sns.color_palette("deep", len(TRAINING_PHASES))))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.4), height_ratios=[3, 2], layout="constrained")
    style = {}
    if "chosen_by" in points.columns:
        style = dict(style="chosen_by", markers={"GP": "o", "random": "X"}, style_order=["GP", "random"])
    sns.scatterplot(data=points, x="epoch", y="beta", hue="phase", hue_order=list(TRAINING_PHASES),
                    palette=palette, s=14, linewidth=0, alpha=0.8, ax=top, **style)
    top.set_ylim(0, 1)
    top.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    top.set_xlabel("epoch")
    top.set_ylabel(r"chosen $\beta_j$ ($j \geq 1$)")
    top.get_legend().remove()
    bins = np.linspace(0, 1, 21)
    for name in TRAINING_PHASES:
        values = points.loc[points["phase"] == name, "beta"]
        if len(values):
            bottom.hist(values, bins=bins, density=True, histtype="step", linewidth=1.8, color=palette[name],
                        label=name)
    bottom.set_xlim(0, 1)
    bottom.set_xlabel(r"$\beta$")
    bottom.set_ylabel("density of chosen betas")
    return finish(fig, bottom, "training phase (thirds of the epochs)", title, ncol=3)


def plot_protocol_ablation(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The bandit-protocol ablation: per method, test log p(x) and KL (mean +- standard error over
    seeds) and the share of the GP's arms that are degenerate.

    Args:
        table: :func:`tvolib.paper.bandit_analysis.protocol_ablation_table` (one row per method).
        title: the figure title.

    Returns:
        The figure (three panels sharing the methods' axis).
    """
    require(table, ["method", "log_px", "log_px_sem", "kl", "kl_sem", "degenerate_share"], "plot_protocol_ablation")
    if table.empty:
        return message_figure("Nothing to draw: no completed runs.", title)
    set_style()
    y = np.arange(len(table))[::-1]
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 0.42 * len(table) + 1.8), sharey=True, layout="constrained")
    colour = sns.color_palette("deep")[0]
    for ax, (col, label) in zip(axes[:2], [("log_px", "test log p(x) (nats)"), ("kl", "test KL (nats)")]):
        ax.errorbar(table[col], y, xerr=table[f"{col}_sem"].fillna(0.0), fmt="o", color=colour, capsize=3)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
        ax.set_xlabel(label)
    share = table["degenerate_share"].to_numpy(dtype=float)
    axes[2].barh(y, np.nan_to_num(share), color=colour, alpha=0.7)
    for yi, value in zip(y, share):
        axes[2].text(0.01, yi, "no GP" if np.isnan(value) else f"{value:.0%}", va="center", fontsize="small")
    axes[2].set_xlim(0, 1)
    axes[2].set_xlabel("degenerate share of the GP's arms")
    axes[0].set_yticks(y, table["method"])
    if title:
        suptitle(fig, title)
    return fig
