"""Fig. 6 (PCFG) aggregation, table and figure on synthetic history frames (no training)."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tvolib import plotting  # noqa: E402

METHODS = [("tvo", "log"), ("tvo", "gp_bandit"), ("reinforce", "none"), ("wake-wake", "none"), ("wake-sleep", "none")]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def histories(S=(2, 20), seeds=(0, 1, 2), epochs=40, value=None) -> pd.DataFrame:
    """A synthetic PCFG history frame: by default every metric is ``(i + 1) * 10**-(S/10) * (1 + seed)``
    for method index ``i``, constant over epochs, so the summary is the median over seeds of that."""
    if value is None:
        def value(i, s, seed, epoch, metric):
            return (i + 1) * 10.0 ** (-s / 10) * (1 + seed)
    rows = []
    for i, (objective, schedule) in enumerate(METHODS):
        for s in S:
            for seed in seeds:
                for epoch in range(epochs + 1):
                    row = dict(epoch=epoch, objective=objective, schedule=schedule, S=s, seed=seed,
                               d=5 if objective == "tvo" else 1, epochs=epochs, n_train=10, n_test=7,
                               batch_size=2, lr=3e-3, hidden_dim=32, eval_max_words=9)
                    for metric in ("kl_p", "kl_q_true", "kl_q_theta", "q_parse_mass", "kl_true_q"):
                        row[metric] = value(i, s, seed, epoch, metric)
                    rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# pcfg_summary: median over seeds per epoch, then the mean over the tail
# --------------------------------------------------------------------------------------------


def test_summary_takes_median_per_epoch_then_tail_mean():
    # epochs 0..40, tail = round(0.05 * 40) = 2 epochs (39, 40). Per-epoch medians over seeds are
    # 2 (epoch 39) and 4 (epoch 40): the answer is 3. Mean-then-median would give median(2, 26, 52) = 26;
    # epoch 38 (outside the tail) holds a huge value that must not count.
    table = {39: (1.0, 2.0, 100.0), 40: (3.0, 50.0, 4.0), 38: (1e6, 1e6, 1e6)}

    def value(i, s, seed, epoch, metric):
        return table.get(epoch, (7.0, 7.0, 7.0))[seed]

    out = plotting.pcfg_summary(histories(S=(5,), value=value))
    assert list(out["method"]) == list(plotting.PCFG_METHOD_ORDER)
    assert np.allclose(out["kl_p"], 3.0)
    assert np.allclose(out["kl_q_theta"], 3.0)
    assert (out["tail_first"] == 39).all() and (out["tail_last"] == 40).all()
    assert (out["n_seeds"] == 3).all()


def test_summary_tail_fraction_one_averages_all_training_epochs():
    def value(i, s, seed, epoch, metric):
        return float(epoch)

    out = plotting.pcfg_summary(histories(S=(2,), seeds=(0,), epochs=4, value=value), tail_fraction=1.0)
    assert np.allclose(out["kl_p"], (1 + 2 + 3 + 4) / 4)  # epoch 0 (the untrained model) excluded


def test_summary_falls_back_to_last_evaluation_when_the_tail_has_none():
    def value(i, s, seed, epoch, metric):
        return float(epoch) if epoch % 10 == 0 else math.nan

    out = plotting.pcfg_summary(histories(S=(2,), seeds=(0, 1), epochs=45, value=value))
    assert np.allclose(out["kl_p"], 40.0)


def test_summary_accepts_method_column_and_orders_unknown_methods_last():
    frame = histories(S=(2,), seeds=(0,), epochs=3).drop(columns=["objective", "schedule"])
    frame["method"] = ["zzz-new" if i % 7 == 0 else "reinforce" for i in range(len(frame))]
    out = plotting.pcfg_summary(frame)
    assert list(out["method"]) == ["reinforce", "zzz-new"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1e-4, 1e3), min_size=1, max_size=6))
def test_summary_of_constant_runs_is_the_median_over_seeds(per_seed):
    def value(i, s, seed, epoch, metric):
        return per_seed[seed]

    out = plotting.pcfg_summary(histories(S=(2,), seeds=tuple(range(len(per_seed))), epochs=20, value=value))
    assert np.allclose(out["kl_q_true"], np.median(per_seed))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**31 - 1))
def test_single_seed_summary_equals_the_trainers_tail_mean(epochs, seed):
    # The figure's tail rule must agree with tvolib.pcfg's own *_tail values (one seed: no median).
    from tvolib import pcfg

    rng = np.random.default_rng(seed)
    values = rng.exponential(size=epochs + 1)
    rows = [{"epoch": e, **{m: float(values[e]) for m in (*pcfg.METRICS, "q_parse_mass", "kl_true_q")}}
            for e in range(epochs + 1)]
    config = pcfg.PCFGConfig(epochs=epochs)
    final = pcfg._final(rows, config, {"eval_seconds": 0.0, "bandit_seconds": 0.0}, "cpu", epochs)
    frame = pd.DataFrame(rows).assign(objective="tvo", schedule="log", S=20, seed=0)
    out = plotting.pcfg_summary(frame)
    assert out["kl_p"].iloc[0] == pytest.approx(final["kl_p_tail"], rel=1e-12)


def test_constants_agree_with_the_pcfg_module():
    from tvolib import pcfg

    assert plotting.PCFG_TAIL_FRACTION == pcfg.TAIL_FRACTION
    assert plotting.PCFG_METRICS == pcfg.METRICS
    assert {pcfg.method_label(c) for c in pcfg.pcfg_sweep("smoke")} == set(plotting.PCFG_METHOD_ORDER)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, True, "0.05", math.nan])
def test_bad_tail_fraction_is_rejected(bad):
    with pytest.raises(ValueError, match="tail_fraction"):
        plotting.pcfg_summary(histories(S=(2,), seeds=(0,), epochs=3), tail_fraction=bad)


def test_missing_columns_and_empty_frames_are_rejected():
    frame = histories(S=(2,), seeds=(0,), epochs=3)
    with pytest.raises(ValueError, match="kl_q_theta"):
        plotting.pcfg_summary(frame.drop(columns=["kl_q_theta"]))
    with pytest.raises(ValueError, match="objective"):
        plotting.pcfg_summary(frame.drop(columns=["objective"]))
    with pytest.raises(ValueError, match="empty"):
        plotting.pcfg_summary(frame.iloc[:0])
    with pytest.raises(ValueError, match="history frame"):
        plotting.plot_pcfg(pd.DataFrame({"x": [1.0]}))


# --------------------------------------------------------------------------------------------
# Colours, table, caption
# --------------------------------------------------------------------------------------------


def test_palette_matches_schedule_colours_and_is_distinct():
    pal = plotting.pcfg_palette(plotting.PCFG_METHOD_ORDER)
    sched = plotting.schedule_palette(["log", "gp_bandit"])
    assert pal["tvo-log"] == sched["log"]
    assert pal["tvo-gp_bandit"] == sched["gp_bandit"]
    assert len({tuple(c) for c in pal.values()}) == len(pal)
    assert plotting.pcfg_palette(["wake-sleep"])["wake-sleep"] == pal["wake-sleep"]  # fixed, not by position


def test_table_holds_the_summary_numbers(tmp_path):
    frame = histories()
    summary = plotting.pcfg_summary(frame, [*plotting.PCFG_METRICS, "q_parse_mass", "kl_true_q"])
    table = plotting.pcfg_table(frame)
    assert table.index.names == ["S", "method"]
    assert list(table.index.get_level_values("S")) == [2] * 5 + [20] * 5
    assert table.loc[(20, "TVO-GP-bandit"), "KL(p_theta || p_true)"] == pytest.approx(
        float(summary.query("method == 'tvo-gp_bandit' and S == 20")["kl_p"].iloc[0]))
    # method index 1, S = 20, median seed 1: 2 * 10**-2 * 2
    assert table.loc[(20, "TVO-GP-bandit"), "KL(q(z|x) || p_true(z|x))"] == pytest.approx(0.04)
    assert "q mass on parses" in table.columns and "KL(p_true(z|x) || q(z|x))" in table.columns
    assert (table["seeds"] == 3).all() and (table["tail epochs"] == "39-40").all()
    csv, md = plotting.save_table(table, "table_pcfg", tmp_path)
    back = pd.read_csv(csv)
    assert len(back) == 10 and "TVO-log" in md.read_text()


def test_scale_caption_states_the_scale():
    text = plotting.pcfg_scale_caption(histories(), "quick")
    assert "10 training / 7 test sentences" in text
    assert "40 epochs" in text and "3 seeds" in text and "S in {2, 20}" in text
    assert "TVO d = 5," in text  # the baselines' d = 1 is not reported
    assert "paper: 2000 epochs" in text
    assert "reduced" not in plotting.pcfg_scale_caption(histories(), "paper")


# --------------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------------


def _left_lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_figure_plots_the_summary_versus_S_with_log_axes_when_values_span_decades():
    frame = histories()
    fig = plotting.plot_pcfg(frame, title="synthetic")
    axes = np.array(fig.axes[:6]).reshape(3, 2)
    lines = _left_lines(axes[0][0])
    assert set(lines) == {plotting.pcfg_method_label(m) for m in plotting.PCFG_METHOD_ORDER}
    x, y = lines["REINFORCE"].get_data()
    assert list(x) == [2.0, 20.0]
    assert np.allclose(y, [3 * 10 ** -0.2 * 2, 3 * 10 ** -2.0 * 2])  # method index 2, median seed 1
    assert lines["wake-sleep"].get_linestyle() == "--" and lines["TVO-log"].get_linestyle() == "-"
    assert axes[0][0].get_yscale() == "log"  # 0.01 .. 6: two decades
    assert axes[0][1].get_title().endswith("S=20 (tail shaded)")
    right = _left_lines(axes[0][1])
    assert np.allclose(right["TVO-log"].get_data()[1], 1 * 10 ** -2.0 * 2)


def test_figure_keeps_linear_axes_for_narrow_ranges_and_accepts_a_summary():
    def value(i, s, seed, epoch, metric):
        return 1.0 + 0.01 * i

    summary = plotting.pcfg_summary(histories(value=value))
    fig = plotting.plot_pcfg(summary, metrics=("kl_p",))
    assert len(fig.axes) == 1  # no history: no curve panel
    assert fig.axes[0].get_yscale() == "linear"
    fig = plotting.plot_pcfg(histories(value=value), curves_S=None, methods=["tvo-gp_bandit", "tvo-log"])
    assert len(fig.axes) == 3
    assert list(_left_lines(fig.axes[0])) == ["TVO-GP-bandit", "TVO-log"]


def test_figure_rejects_bad_requests():
    frame = histories(S=(2,), seeds=(0,), epochs=3)
    with pytest.raises(ValueError, match="curves_S"):
        plotting.plot_pcfg(frame, curves_S=7)
    with pytest.raises(ValueError, match="no runs"):
        plotting.plot_pcfg(frame, methods=["vimco"])
    with pytest.raises(ValueError, match="at least one metric"):
        plotting.plot_pcfg(frame, metrics=())
