"""Figs 4, 5, 7, 8 and 9's drawings from summaries."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tvolib.paper.analysis import summarise_by_schedule, training_curves  # noqa: E402
from tvolib.plotting import plot_metric_vs_d, plot_training_curves  # noqa: E402

SCHEDULES = ["gp_bandit", "linear", "log", "moments"]


def run_frame(datasets=("mnist", "fashion_mnist"), S=(10, 50), d=(2, 5, 10), seeds=(0, 1, 2)) -> pd.DataFrame:
    rows = [dict(dataset=ds, S=s, d=dd, schedule=sch, seed=seed, test_log_px=-90.0 - i - seed / 10,
                 test_kl=5.0 + dd / 10)
            for ds in datasets for s in S for dd in d for i, sch in enumerate(SCHEDULES) for seed in seeds]
    return pd.DataFrame(rows)


def test_metric_vs_d_grid_lines_and_error_bars():
    fig = plot_metric_vs_d(summarise_by_schedule(run_frame()), title="quick profile")
    assert len(fig.axes) == 2 * 4  # 2 metrics x (2 datasets x 2 S)
    ax = fig.axes[0]
    assert len(ax.containers) == len(SCHEDULES) and ax.get_title() == "MNIST, S=10"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["linear", "log", "moments", "GP-bandit"]
    assert fig.legends[0].get_title().get_text() == "schedule (mean $\\pm$ standard error over 3 seeds)"
    line = ax.containers[0].lines[0]
    assert np.allclose(np.round(line.get_xdata()), [2, 5, 10]) and np.allclose(line.get_ydata(), -91.1)


def test_metric_vs_d_schedule_subset_labels_and_single_seed():
    summary = summarise_by_schedule(run_frame(datasets=("omniglot",), S=(10,), seeds=(0,)))
    fig = plot_metric_vs_d(summary, ("test_log_px",), schedules=["random", "gp_bandit", "log"],
                           dataset_labels={"omniglot": "omniglot (derived 28x28)"})
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "omniglot (derived 28x28), S=10"
    assert len(fig.axes[0].containers) == 2  # random has no runs; the others keep the given order
    assert "one seed" in fig.legends[0].get_title().get_text()
    with pytest.raises(ValueError, match="no runs"):
        plot_metric_vs_d(summary, schedules=["random"])
    with pytest.raises(ValueError, match="test_kl_mean"):
        plot_metric_vs_d(summary.drop(columns="test_kl_mean"))


def _histories() -> pd.DataFrame:
    rows = [dict(dataset="mnist", d=d, schedule=sch, seed=seed, epoch=epoch,
                 train_iwae=-200 + 100 * (1 - np.exp(-epoch / 10)) - seed)
            for d in (5, 15) for sch in SCHEDULES for seed in (0, 1) for epoch in range(50)]
    return pd.DataFrame(rows)


def test_training_curves_one_line_per_schedule_per_panel():
    fig = plot_training_curves(training_curves(_histories()))
    assert len(fig.axes) == 2  # one dataset row, two d columns
    for ax in fig.axes:
        assert len(ax.lines) == len(SCHEDULES) and np.allclose(ax.lines[0].get_ydata()[0], -200)
        assert not ax.collections  # one seed: no band
    assert fig.axes[1].get_title() == "MNIST, d=15"
    assert fig.legends[0].get_title().get_text() == "schedule (seed 0)"
    mean = plot_training_curves(training_curves(_histories(), seed=None))
    assert np.allclose(mean.axes[0].lines[0].get_ydata()[0], -200.5)
    assert len(mean.axes[0].collections) == len(SCHEDULES)  # s.e. bands


def test_training_curves_rows_by_dataset_with_labels():
    hist = pd.concat([_histories(), _histories().assign(dataset="omniglot")])
    fig = plot_training_curves(training_curves(hist), dataset_labels={"omniglot": "omniglot (derived 28x28)"})
    assert [ax.get_title() for ax in fig.axes] == ["MNIST, d=5", "MNIST, d=15", "omniglot (derived 28x28), d=5",
                                                  "omniglot (derived 28x28), d=15"]
    lo, hi = fig.axes[0].get_ylim()
    assert lo > -200  # the steep first tenth of the epochs does not set the range
