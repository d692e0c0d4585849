"""Figs 2, 3, 10 and 11's drawings."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tvolib.paper.analysis import betas_by_phase, reward_observations  # noqa: E402
from tvolib.plotting import (  # noqa: E402
    RewardPanel,
    plot_bandit_budget,
    plot_betas_over_time,
    plot_protocol_ablation,
    plot_reward_surface,
)


def observations(n=12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    hist = pd.DataFrame({"round": np.arange(n), "epoch": 6 * (np.arange(n) + 1),
                         "arm": [[0.0, float(v)] for v in rng.uniform(0.05, 0.95, n)], "reward": rng.normal(size=n)})
    return reward_observations(hist)


def test_reward_surface_draws_each_stage_with_the_rounds_seen_so_far():
    obs = observations()
    grid = np.linspace(0, 1, 50)
    panels = [RewardPanel(p, p, 6 * (p + 1), grid, np.sin(3 * grid) * p, np.full(50, 0.2)) for p in (2, 5, 11)]
    fig = plot_reward_surface(obs, panels, title="t")
    axes = [ax for ax in fig.axes if ax.get_xlabel() == r"$\beta_1$"]
    assert len(axes) == 3
    assert [len(ax.collections[-1].get_offsets()) for ax in axes] == [3, 6, 12]
    assert axes[1].get_title() == "after epoch 36 (round 5)"
    assert np.allclose(axes[2].lines[0].get_ydata(), np.sin(3 * grid) * 11)


def test_empty_inputs_give_a_figure_that_says_why():
    fig = plot_reward_surface(observations().iloc[:0], [])
    assert "no bandit rounds" in fig.axes[0].texts[0].get_text()
    fig = plot_reward_surface(observations(), [])
    assert "before the first GP fit" in fig.axes[0].texts[0].get_text()
    fig = plot_betas_over_time(betas_by_phase(pd.DataFrame(columns=["epoch", "arm"]), "arm"))
    assert "no bandit rounds" in fig.axes[0].texts[0].get_text()


def test_betas_over_time_scatter_and_phase_histograms():
    frame = pd.DataFrame({"epoch": np.arange(30), "betas": [str([0.0, 0.1 + e / 100, 0.5]) for e in range(30)]})
    fig = plot_betas_over_time(betas_by_phase(frame), title="t")
    top, bottom = fig.axes
    assert len(top.collections[0].get_offsets()) == 60
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["early", "middle", "late"]
    assert len(bottom.patches) == 3  # one step histogram per phase


def test_betas_over_time_draws_one_column_per_budget():
    frame = pd.DataFrame({"epoch": np.arange(30), "betas": [str([0.0, 0.1 + e / 100, 0.5]) for e in range(30)]})
    short = betas_by_phase(frame).assign(budget="30 epochs")
    long = betas_by_phase(frame.assign(epoch=frame["epoch"] * 10)).assign(budget="300 epochs (bandit budget)")
    fig = plot_betas_over_time(pd.concat([short, long], ignore_index=True), title="t")
    assert len(fig.axes) == 4
    tops = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in tops] == ["30 epochs", "300 epochs (bandit budget)"]
    assert [len(ax.collections[0].get_offsets()) for ax in tops] == [60, 60]
    assert tops[1].get_xlim()[1] > 250  # each budget on its own epochs


def ablation_table(methods, budget=None):
    table = pd.DataFrame({"method": methods, "log_px": -np.arange(len(methods), dtype=float) - 100,
                          "log_px_sem": 0.5, "kl": 5.0, "kl_sem": 0.1,
                          "degenerate_share": [np.nan] * (len(methods) - 1) + [0.25]})
    return table if budget is None else table.assign(budget=budget)


def test_protocol_ablation_draws_one_row_per_budget():
    table = pd.concat([ablation_table(["log (schedule)", "code", "paper-text"], "60 epochs"),
                       ablation_table(["log (schedule)", "code"], "475 epochs (bandit budget)")], ignore_index=True)
    fig = plot_protocol_ablation(table, title="t")
    assert len(fig.axes) == 6
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["60 epochs", "475 epochs (bandit budget)"]
    rows = [[t.get_text() for t in ax.get_yticklabels()] for ax in (fig.axes[0], fig.axes[3])]
    assert rows == [["log (schedule)", "code", "paper-text"], ["log (schedule)", "code"]]
    assert [t.get_text() for t in fig.axes[5].texts] == ["no GP", "25%"]
    assert len(plot_protocol_ablation(ablation_table(["log (schedule)", "code"])).axes) == 3  # one budget


def budget_inputs():
    """Two series' test curves; the bandit's arms (first 2 rounds random) and its degenerate shares."""
    epochs = np.arange(0, 101, 25)
    curves = pd.DataFrame({"schedule": ["log"] * 5 + ["gp_bandit"] * 5, "epoch": np.tile(epochs, 2),
                           "mean": np.concatenate([-150 + epochs / 2, -149 + epochs / 2]), "sem": 0.5})
    rounds = pd.DataFrame({"epoch": [10, 20, 30, 60, 90], "arm": [[0.1, 0.2], [0.3, 0.5], [0.05, 0.05],
                                                                  [0.1, 0.4], [0.05, 0.6]],
                           "seed": 0, "chosen_by": ["random", "random", "GP", "GP", "GP"], "schedule": "gp_bandit"})
    arms = betas_by_phase(rounds, "arm", keep=("seed", "chosen_by", "schedule"))
    degenerate = pd.DataFrame({"schedule": "gp_bandit", "phase": ["early", "middle", "late"], "gp_arms": [0, 2, 1],
                               "degenerate": [0, 1, 1], "degenerate_share": [np.nan, 0.5, 1.0]})
    return curves, arms, degenerate


def test_bandit_budget_draws_curves_arms_and_degenerate_shares():
    curves, arms, degenerate = budget_inputs()
    fig = plot_bandit_budget(curves, arms, degenerate, title="t")
    lines, points, shares = fig.axes
    assert [line.get_label() for line in lines.lines] == ["log", "GP-bandit"]
    assert np.allclose(lines.lines[1].get_ydata(), -149 + np.arange(0, 101, 25) / 2)
    assert len(lines.collections) == 2  # a standard-error band per series
    low, high = lines.get_ylim()  # the last two thirds (epochs 50..100: -125.5..-98.5 with the bands)
    assert -130 < low < -125.5 and -98.5 < high < -95
    gp = sum(len(c.get_offsets()) for c in points.collections if c.get_label().startswith("$\\beta"))
    crosses = sum(len(c.get_offsets()) for c in points.collections if not c.get_label().startswith("$\\beta"))
    assert (gp, crosses) == (6, 4)  # 3 GP arms and 2 random arms of two points each
    assert "random round" in [t.get_text() for t in points.get_legend().get_texts()]
    assert [round(p.get_height(), 2) for p in shares.patches] == [0.0, 0.5, 1.0]
    assert [t.get_text() for t in shares.texts] == ["no GP arm", "n=2", "n=1"]


def test_bandit_budget_draws_a_panel_of_arms_per_bandit_series():
    curves, arms, degenerate = budget_inputs()
    other = arms.assign(schedule="GP-bandit (another protocol)")
    fig = plot_bandit_budget(curves, pd.concat([arms, other]), pd.concat([degenerate, degenerate.assign(
        schedule="GP-bandit (another protocol)")]))
    assert len(fig.axes) == 4 and fig.axes[2].get_title() == "GP-bandit (another protocol): arms, every seed"
    assert len(fig.axes[3].patches) == 6
