"""Figs 2 and 3's drawings."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tvolib.paper.analysis import betas_by_phase, reward_observations  # noqa: E402
from tvolib.plotting import RewardPanel, plot_betas_over_time, plot_reward_surface  # noqa: E402


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
