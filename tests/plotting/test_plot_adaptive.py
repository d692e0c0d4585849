"""The adaptive-d figure's drawing from summaries."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tvolib.paper.analysis import summarise_by_schedule  # noqa: E402
from tvolib.plotting import plot_adaptive_d  # noqa: E402


def frames():
    fixed = pd.DataFrame([dict(dataset=ds, S=10, d=d, schedule=s, seed=seed, test_log_px=-90.0 - d - seed, test_kl=5.0)
                          for ds in ("mnist", "fashion_mnist") for d in (2, 5, 10) for s in ("log", "moments")
                          for seed in (0, 1)])
    adaptive = pd.DataFrame([dict(dataset=ds, S=10, schedule="gp_bandit_adaptive", seed=seed,
                                  test_log_px=-91.0 - seed, test_kl=4.0) for ds in ("mnist", "fashion_mnist")
                             for seed in (0, 1)])
    rounds = pd.DataFrame([dict(dataset=ds, seed=seed, start_epoch=3 * r, epoch=3 * r + 3, d=2 + (r + seed) % 4)
                           for ds in ("mnist", "fashion_mnist") for seed in (0, 1) for r in range(5)])
    return (summarise_by_schedule(fixed), summarise_by_schedule(adaptive, by=("dataset", "S", "schedule")), rounds)


def test_fixed_lines_the_adaptive_band_and_the_d_it_chose():
    summary, band, rounds = frames()
    fig = plot_adaptive_d(summary, band, rounds, title="smoke")
    assert len(fig.axes) == 3 * 2
    top = fig.axes[0]
    assert top.get_title() == "MNIST" and len(top.containers) == 2  # log and moments with error bars
    assert any(line.get_ydata()[0] == pytest.approx(-91.5) for line in top.get_lines())  # the adaptive mean
    bottom = fig.axes[4]  # row-major: the last row, MNIST: its d over training
    assert len(bottom.get_lines()) == 2 and bottom.get_xlabel() == "epoch"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "GP-bandit (adaptive d) (one run per seed)" in labels and "log" in labels


def test_missing_columns_are_named():
    summary, band, rounds = frames()
    with pytest.raises(ValueError, match=r"plot_adaptive_d \(d_rounds\) needs columns"):
        plot_adaptive_d(summary, band, rounds.drop(columns="d"))


def test_the_recommended_d_is_drawn_dashed_where_recorded():
    """Rounds that recorded a recommendation add one dashed line per seed at its values; random
    rounds (NaN) are left out of it."""
    summary, band, rounds = frames()
    rounds["recommended_d"] = [float("nan") if r < 2 else 3.0 for r in rounds["start_epoch"] // 3]
    fig = plot_adaptive_d(summary, band, rounds, title="smoke")
    bottom = fig.axes[4]
    dashed = [line for line in bottom.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 2 and all(len(line.get_xdata()) == 3 for line in dashed)
    assert {round(float(y)) for line in dashed for y in line.get_ydata()} == {3}
    assert "recommended" in bottom.get_ylabel()
