"""Figs 2, 3, 10 and 11: the GP bandit's reward surface at three stages, its chosen betas over
training, the protocol ablation and the bandit budget."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from tvolib.paper.analysis import require
from tvolib.paper.names import METRIC_LABELS, TRAINING_PHASES, ordered, schedule_label
from tvolib.plotting.metrics import _draw_curves
from tvolib.plotting.style import finish, message_figure, schedule_palette, set_style, suptitle

__all__ = ["RewardPanel", "plot_reward_surface", "plot_betas_over_time", "plot_bandit_budget",
           "plot_protocol_ablation"]


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


def _betas_panel(top: plt.Axes, bottom: plt.Axes, points: pd.DataFrame, palette: dict[str, Any]) -> None:
    """Fig 3's two panels for one budget: the chosen betas over training, their density per phase."""
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


def plot_betas_over_time(points: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Fig 3: the bandit's chosen interior betas versus epoch, coloured by training phase (the
    paper's blue/orange/green), and below, the distribution of the betas chosen in each phase; one
    column per ``budget`` when the frame has that column (e.g. the profile's runs and the longer
    runs of the bandit budget).

    Args:
        points: :func:`tvolib.paper.analysis.betas_by_phase` (``epoch``, ``beta``, ``phase``; with a
            ``chosen_by`` column, arms of random rounds are drawn as crosses, the GP's as dots;
            optionally ``budget``, the column titles in order of appearance); an empty frame (a run
            shorter than the bandit's burn-in) gives a figure saying so.
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
    budgets = list(dict.fromkeys(points["budget"])) if "budget" in points.columns else [None]
    fig, axes = plt.subplots(2, len(budgets), figsize=(6.4 * len(budgets), 6.4), height_ratios=[3, 2],
                             squeeze=False, layout="constrained")
    for col, budget in enumerate(budgets):
        part = points if budget is None else points[points["budget"] == budget]
        _betas_panel(axes[0][col], axes[1][col], part, palette)
        if budget is not None:
            axes[0][col].set_title(str(budget))
    return finish(fig, axes[1], "training phase (thirds of the epochs)", title, ncol=3)


def plot_bandit_budget(
    curves: pd.DataFrame,
    arms: pd.DataFrame,
    degenerate: pd.DataFrame,
    *,
    title: str | None = None,
) -> Figure:
    """The bandit budget (Fig 11): test log p(x) against epochs per series (mean +- standard error
    over seeds); each bandit series' chosen arms over training (every seed; crosses: random rounds);
    the share of the GP's arms that are degenerate in each third of training.

    Args:
        curves: :func:`tvolib.paper.analysis.training_curves` of ``test_log_px`` over every seed
            (``schedule``: the series, ``epoch``, ``mean``, ``sem``).
        arms: :func:`tvolib.paper.analysis.betas_by_phase` of the bandit runs' ``arm`` with
            ``schedule`` (the series), ``j`` and ``chosen_by`` ("GP" or "random").
        degenerate: :func:`tvolib.paper.bandit_analysis.degenerate_by_phase` by ``schedule``.
        title: the figure title.

    Returns:
        The figure: the curves and the shares in the top row, one arms panel per bandit series below
        (axes in that order: curves, arms..., shares), so the panels stay readable at any number of series.
    """
    require(curves, ["epoch", "schedule", "mean", "sem"], "plot_bandit_budget(curves)")
    require(arms, ["epoch", "beta", "j", "schedule", "chosen_by"], "plot_bandit_budget(arms)")
    require(degenerate, ["schedule", "phase", "gp_arms", "degenerate_share"], "plot_bandit_budget(degenerate)")
    if curves.empty:
        return message_figure("Nothing to draw: no completed runs.", title)
    set_style()
    bandits = ordered(arms["schedule"]) if len(arms) else []
    columns = max(len(bandits), 2)
    fig = plt.figure(figsize=(4.6 * columns + 0.6, 9.0), layout="constrained")
    grid = fig.add_gridspec(2, 2 * columns)
    half = columns  # the top row: the curves on the left half, the shares on the right half
    curves_ax = fig.add_subplot(grid[0, :half])
    arm_axes = [fig.add_subplot(grid[1, 2 * i:2 * i + 2]) for i in range(len(bandits))]
    shares_ax = fig.add_subplot(grid[0, half:])
    axes = [[curves_ax, *arm_axes, shares_ax]]
    ax = axes[0][0]
    names = ordered(curves["schedule"])
    palette = schedule_palette(names)
    _draw_curves(ax, curves, names, palette, band=True)
    first, last = curves["epoch"].min(), curves["epoch"].max()
    late = curves[curves["epoch"] >= first + (last - first) / 3]
    if late["epoch"].nunique() > 1:  # the schedules differ by nats where the first third spans hundreds
        err = late["sem"].fillna(0.0)
        lo, hi = float((late["mean"] - err).min()), float((late["mean"] + err).max())
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("epoch")
    ax.set_ylabel(METRIC_LABELS["test_log_px"])
    ax.set_title("test log p(x), mean $\\pm$ s.e. over seeds\n(y range: the last two thirds of training)")
    ax.legend(loc="lower right", fontsize="small")
    coordinates = sorted(arms["j"].unique()) if len(arms) else []
    shades = dict(zip(coordinates, sns.color_palette("viridis", len(coordinates))))
    for ax, name in zip(axes[0][1:], bandits):
        part = arms[arms["schedule"] == name]
        for j in coordinates:
            for chooser, marker in (("GP", "o"), ("random", "X")):
                pts = part[(part["j"] == j) & (part["chosen_by"] == chooser)]
                ax.scatter(pts["epoch"], pts["beta"], s=12 if chooser == "GP" else 22, marker=marker,
                           color=shades[j], alpha=0.7, linewidths=0,
                           label=f"$\\beta_{{{j}}}$" if chooser == "GP" else None)
        ax.scatter([], [], marker="X", color="grey", label="random round")
        ax.set_ylim(0, 1)
        ax.set_xlabel("epoch")
        ax.set_ylabel(r"chosen $\beta_j$")
        ax.set_title(f"{schedule_label(name)}: arms, every seed")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize="small", ncol=len(coordinates) + 1,
                  handletextpad=0.1, columnspacing=0.8)
    ax = axes[0][-1]
    width = 0.8 / max(len(bandits), 1)
    x = np.arange(len(TRAINING_PHASES))
    for i, name in enumerate(bandits):
        part = degenerate[degenerate["schedule"] == name].set_index("phase").reindex(list(TRAINING_PHASES))
        share = part["degenerate_share"].to_numpy(dtype=float)
        at = x + (i - (len(bandits) - 1) / 2) * width
        ax.bar(at, np.nan_to_num(share), width=width, color=palette.get(name, "grey"), alpha=0.8,
               label=schedule_label(name))
        for xi, value, n in zip(at, share, part["gp_arms"].fillna(0).astype(int)):
            ax.text(xi, 0.02 if np.isnan(value) else value + 0.02, "no GP arm" if np.isnan(value) else f"n={n}",
                    ha="center", fontsize="x-small")
    ax.set_xticks(x, [f"{p} third" for p in TRAINING_PHASES])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("degenerate share of the GP's arms")
    ax.set_title("degenerate GP arms per third of training")
    if len(bandits) > 1:
        ax.legend(loc="upper right", fontsize="small")
    if title:
        suptitle(fig, title)
    return fig


def plot_protocol_ablation(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The bandit-protocol ablation: per method, test log p(x) and KL (mean +- standard error over
    seeds) and the share of the GP's arms that are degenerate; one row of panels per ``budget``
    when the table has that column (e.g. the profile's runs and the longer runs of the bandit budget).

    Args:
        table: :func:`tvolib.paper.bandit_analysis.protocol_ablation_table` (one row per method;
            optionally ``budget``, the row titles in order of appearance).
        title: the figure title.

    Returns:
        The figure (three panels per row sharing the methods' axis).
    """
    require(table, ["method", "log_px", "log_px_sem", "kl", "kl_sem", "degenerate_share"], "plot_protocol_ablation")
    if table.empty:
        return message_figure("Nothing to draw: no completed runs.", title)
    set_style()
    budgets = list(dict.fromkeys(table["budget"])) if "budget" in table.columns else [None]
    parts = [table if b is None else table[table["budget"] == b] for b in budgets]
    heights = [len(part) + 1.5 for part in parts]
    fig, axes = plt.subplots(len(parts), 3, figsize=(11.5, 0.42 * sum(heights) + 1.2), sharey="row", squeeze=False,
                             height_ratios=heights, layout="constrained")
    colour = sns.color_palette("deep")[0]
    for row, (budget, part) in enumerate(zip(budgets, parts)):
        y = np.arange(len(part))[::-1]
        for ax, (col, label) in zip(axes[row][:2], [("log_px", "test log p(x) (nats)"), ("kl", "test KL (nats)")]):
            ax.errorbar(part[col], y, xerr=part[f"{col}_sem"].fillna(0.0), fmt="o", color=colour, capsize=3)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
            ax.set_xlabel(label)
        share = part["degenerate_share"].to_numpy(dtype=float)
        axes[row][2].barh(y, np.nan_to_num(share), color=colour, alpha=0.7)
        for yi, value in zip(y, share):
            axes[row][2].text(0.01, yi, "no GP" if np.isnan(value) else f"{value:.0%}", va="center",
                              fontsize="small")
        axes[row][2].set_xlim(0, 1)
        axes[row][2].set_xlabel("degenerate share of the GP's arms")
        axes[row][0].set_yticks(y, part["method"])
        if budget is not None:
            axes[row][1].set_title(str(budget))
    if title:
        suptitle(fig, title)
    return fig
