"""Fig 6's summary (median over seeds, then the tail mean) and table on synthetic histories."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.paper import pcfg_analysis
from tvolib.paper.names import PCFG_METHOD_ORDER, PCFG_METRICS
from tvolib.paper.sweeps import PCFG_METHODS


def histories(S=(2, 20), seeds=(0, 1, 2), epochs=40, value=None) -> pd.DataFrame:
    """Every metric is ``(i + 1) * 10**-(S/10) * (1 + seed)`` for method index ``i`` unless ``value`` says
    otherwise, constant over epochs, so the summary is the median over seeds of that."""
    if value is None:
        def value(i, s, seed, epoch, metric):
            return (i + 1) * 10.0 ** (-s / 10) * (1 + seed)
    rows = []
    for i, (objective, schedule) in enumerate(PCFG_METHODS):
        for s in S:
            for seed in seeds:
                for epoch in range(epochs + 1):
                    row = dict(epoch=epoch, objective=objective, schedule=schedule, S=s, seed=seed)
                    row.update({m: value(i, s, seed, epoch, m) for m in (*PCFG_METRICS, "q_parse_mass", "kl_true_q")})
                    rows.append(row)
    return pd.DataFrame(rows)


def test_summary_takes_median_per_epoch_then_tail_mean():
    # epochs 0..40, tail = round(0.05 * 40) = 2 epochs (39, 40). Per-epoch medians over seeds are 2 and 4:
    # the answer is 3. Mean-then-median would give median(2, 26, 52) = 26; epoch 38 lies outside the tail.
    table = {39: (1.0, 2.0, 100.0), 40: (3.0, 50.0, 4.0), 38: (1e6, 1e6, 1e6)}

    def value(i, s, seed, epoch, metric):
        return table.get(epoch, (7.0, 7.0, 7.0))[seed]

    out = pcfg_analysis.pcfg_summary(histories(S=(5,), value=value))
    assert list(out["method"]) == list(PCFG_METHOD_ORDER)
    assert np.allclose(out["kl_p"], 3.0) and np.allclose(out["kl_q_theta"], 3.0)
    assert (out["tail_first"] == 39).all() and (out["tail_last"] == 40).all() and (out["n_seeds"] == 3).all()


def test_summary_tail_fraction_one_averages_all_training_epochs():
    out = pcfg_analysis.pcfg_summary(histories(S=(2,), seeds=(0,), epochs=4, value=lambda *a: float(a[3])),
                                     tail_fraction=1.0)
    assert np.allclose(out["kl_p"], (1 + 2 + 3 + 4) / 4)  # epoch 0 (the untrained model) excluded


def test_summary_falls_back_to_last_evaluation_when_the_tail_has_none():
    def value(i, s, seed, epoch, metric):
        return float(epoch) if epoch % 10 == 0 else math.nan

    out = pcfg_analysis.pcfg_summary(histories(S=(2,), seeds=(0, 1), epochs=45, value=value))
    assert np.allclose(out["kl_p"], 40.0)


def test_summary_accepts_method_column_and_orders_unknown_methods_last():
    frame = histories(S=(2,), seeds=(0,), epochs=3).drop(columns=["objective", "schedule"])
    frame["method"] = ["zzz-new" if i % 7 == 0 else "reinforce" for i in range(len(frame))]
    assert list(pcfg_analysis.pcfg_summary(frame)["method"]) == ["reinforce", "zzz-new"]


@settings(max_examples=25)
@given(st.lists(st.floats(1e-4, 1e3), min_size=1, max_size=6))
def test_summary_of_constant_runs_is_the_median_over_seeds(per_seed):
    frame = histories(S=(2,), seeds=tuple(range(len(per_seed))), epochs=20, value=lambda *a: per_seed[a[2]])
    assert np.allclose(pcfg_analysis.pcfg_summary(frame)["kl_q_true"], np.median(per_seed))


@settings(max_examples=30)
@given(st.integers(1, 400), st.floats(0.01, 1.0), st.integers(0, 2**31 - 1))
def test_single_seed_summary_is_the_mean_of_the_last_epochs(epochs, fraction, seed):
    values = np.random.default_rng(seed).exponential(size=epochs + 1)
    frame = pd.DataFrame({"epoch": np.arange(epochs + 1), "kl_p": values}).assign(objective="tvo", schedule="log",
                                                                                   S=20, seed=0)
    tail = max(1, round(fraction * epochs))
    out = pcfg_analysis.pcfg_summary(frame, ("kl_p",), tail_fraction=fraction)
    assert out["kl_p"].iloc[0] == pytest.approx(values[-tail:].mean(), rel=1e-12)
    assert (out["tail_first"].iloc[0], out["tail_last"].iloc[0]) == (epochs - tail + 1, epochs)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, True, "0.05", math.nan])
def test_bad_tail_fraction_is_rejected(bad):
    with pytest.raises(ValueError, match="tail_fraction"):
        pcfg_analysis.pcfg_summary(histories(S=(2,), seeds=(0,), epochs=3), tail_fraction=bad)


def test_missing_columns_and_empty_frames_are_rejected():
    frame = histories(S=(2,), seeds=(0,), epochs=3)
    with pytest.raises(ValueError, match="kl_q_theta"):
        pcfg_analysis.pcfg_summary(frame.drop(columns=["kl_q_theta"]))
    with pytest.raises(ValueError, match="objective"):
        pcfg_analysis.pcfg_summary(frame.drop(columns=["objective"]))
    with pytest.raises(ValueError, match="empty"):
        pcfg_analysis.pcfg_summary(frame.iloc[:0])
    with pytest.raises(ValueError, match="S=7"):
        pcfg_analysis.pcfg_curves(frame, 7)


def test_curves_are_medians_over_seeds_per_epoch():
    curves = pcfg_analysis.pcfg_curves(histories(), 20)
    assert curves.attrs["S"] == 20 and len(curves) == 5 * 41
    tvo_log = curves[curves["method"] == "tvo-log"]
    assert np.allclose(tvo_log["kl_p"], 1 * 10 ** -2.0 * 2)  # method 0, S = 20, median seed 1


def test_table_holds_the_summary_numbers():
    frame = histories()
    summary = pcfg_analysis.pcfg_summary(frame, [*PCFG_METRICS, "q_parse_mass", "kl_true_q"])
    table = pcfg_analysis.pcfg_table(frame)
    assert table.index.names == ["S", "method"]
    assert list(table.index.get_level_values("S")) == [2] * 5 + [20] * 5
    assert table.loc[(20, "TVO-GP-bandit"), "KL(p_theta || p_true)"] == pytest.approx(
        float(summary.query("method == 'tvo-gp_bandit' and S == 20")["kl_p"].iloc[0]))
    assert table.loc[(20, "TVO-GP-bandit"), "KL(q(z|x) || p_true(z|x))"] == pytest.approx(0.04)
    assert "q mass on parses" in table.columns and "KL(p_true(z|x) || q(z|x))" in table.columns
    assert (table["seeds"] == 3).all() and (table["tail epochs"] == "39-40").all()
    assert table.equals(pcfg_analysis.pcfg_table(summary))  # from a summary: the same table
