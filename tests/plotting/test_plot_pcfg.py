"""Fig 6's drawing from its summary and curves."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tvolib.paper.names import PCFG_METHOD_ORDER, PCFG_METRICS, pcfg_method_label  # noqa: E402
from tvolib.paper.pcfg_analysis import pcfg_curves, pcfg_summary  # noqa: E402
from tvolib.paper.sweeps import PCFG_METHODS  # noqa: E402
from tvolib.plotting import plot_pcfg  # noqa: E402


def histories(value=None) -> pd.DataFrame:
    value = value or (lambda i, s, seed: (i + 1) * 10.0 ** (-s / 10) * (1 + seed))
    return pd.DataFrame([dict(epoch=e, objective=o, schedule=sc, S=s, seed=seed,
                              **{m: value(i, s, seed) for m in PCFG_METRICS})
                         for i, (o, sc) in enumerate(PCFG_METHODS) for s in (2, 20) for seed in (0, 1, 2)
                         for e in range(41)])


def lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_summary_versus_S_with_log_axes_when_values_span_decades():
    frame = histories()
    fig = plot_pcfg(pcfg_summary(frame), pcfg_curves(frame, 20), tail_fraction=0.05, title="synthetic")
    axes = np.array(fig.axes[:6]).reshape(3, 2)
    left = lines(axes[0][0])
    assert set(left) == {pcfg_method_label(m) for m in PCFG_METHOD_ORDER}
    x, y = left["REINFORCE"].get_data()
    assert list(x) == [2.0, 20.0] and np.allclose(y, [3 * 10 ** -0.2 * 2, 3 * 10 ** -2.0 * 2])
    assert left["wake-sleep"].get_linestyle() == "--" and left["TVO-log"].get_linestyle() == "-"
    assert axes[0][0].get_yscale() == "log"  # 0.01 .. 6: two decades
    assert axes[0][0].get_title() == "median over seeds, mean over the last 5% of epochs"
    assert axes[0][1].get_title() == "median over seeds per epoch, S=20 (tail shaded)"
    assert np.allclose(lines(axes[0][1])["TVO-log"].get_data()[1], 1 * 10 ** -2.0 * 2)


def test_linear_axes_for_narrow_ranges_no_curves_and_a_method_subset():
    summary = pcfg_summary(histories(lambda i, s, seed: 1.0 + 0.01 * i))
    fig = plot_pcfg(summary, metrics=("kl_p",))
    assert len(fig.axes) == 1 and fig.axes[0].get_yscale() == "linear"
    fig = plot_pcfg(summary, methods=["tvo-gp_bandit", "tvo-log"])
    assert len(fig.axes) == 3 and list(lines(fig.axes[0])) == ["TVO-GP-bandit", "TVO-log"]


def test_bad_requests_are_rejected():
    summary = pcfg_summary(histories())
    with pytest.raises(ValueError, match="no runs"):
        plot_pcfg(summary, methods=["vimco"])
    with pytest.raises(ValueError, match="tail_first"):
        plot_pcfg(summary.drop(columns="tail_first"))
