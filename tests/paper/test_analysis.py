"""Summaries and the paper's tables on synthetic frames with hand-computed answers."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.paper import analysis

SCHEDULES = ["gp_bandit", "linear", "log", "moments"]


def run_frame(datasets=("mnist", "fashion_mnist"), S=(10, 50), d=(2, 5, 10), seeds=(0, 1, 2)) -> pd.DataFrame:
    """A synthetic run frame: log p(x) = -90 - schedule index - seed/10, KL = 5 + d/10."""
    rows = [dict(model="vae", dataset=ds, S=s, d=dd, schedule=sch, seed=seed, test_log_px=-90.0 - i - seed / 10,
                 test_kl=5.0 + dd / 10, train_seconds=60.0 * (seed + 1))
            for ds in datasets for s in S for dd in d for i, sch in enumerate(SCHEDULES) for seed in seeds]
    return pd.DataFrame(rows)


def test_mean_sem_matches_formula():
    mean, sem, n = analysis.mean_sem([1.0, 2.0, 3.0, float("nan")])
    assert (mean, n) == (2.0, 3)
    assert sem == pytest.approx(1.0 / math.sqrt(3))
    assert math.isnan(analysis.mean_sem([4.0])[1])
    assert analysis.mean_sem([])[2] == 0


@settings(max_examples=40)
@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=20))
def test_mean_sem_agrees_with_pandas(values):
    mean, sem, n = analysis.mean_sem(values)
    series = pd.Series(values)
    assert n == len(values)
    assert mean == pytest.approx(series.mean(), abs=1e-6)
    assert sem == pytest.approx(series.sem(), abs=1e-6)


@pytest.mark.parametrize("cell, expected", [
    ([0.0, 0.3], [0.0, 0.3]), ((0.0, 0.3), [0.0, 0.3]), (np.array([0.0, 0.3]), [0.0, 0.3]),
    ("[0.0, 0.3]", [0.0, 0.3]), ("[0.  0.3]", [0.0, 0.3]), (0.4, [0.4]), (float("nan"), []), (None, []),
])
def test_as_float_list_accepts_csv_round_trips(cell, expected):
    assert analysis.as_float_list(cell) == pytest.approx(expected)
    assert analysis.interior("[0.0, 0.2, 0.7]") == [0.2, 0.7] and analysis.interior([0.4]) == [0.4]


def test_summarise_by_schedule_mean_and_sem():
    out = analysis.summarise_by_schedule(run_frame())
    assert len(out) == 2 * 2 * 3 * 4
    assert list(out.columns) == ["dataset", "S", "d", "schedule", "n_seeds", "test_log_px_mean", "test_log_px_sem",
                                 "test_kl_mean", "test_kl_sem"]
    assert (out["n_seeds"] == 3).all()
    row = out[(out.schedule == "linear") & (out.d == 5) & (out.S == 10) & (out.dataset == "mnist")].iloc[0]
    assert row["test_log_px_mean"] == pytest.approx(-91.1)
    assert row["test_log_px_sem"] == pytest.approx(0.1 / math.sqrt(3))
    assert row["test_kl_sem"] == pytest.approx(0.0)
    first = out[(out.dataset == "fashion_mnist") & (out.S == 10) & (out.d == 2)]["schedule"].tolist()
    assert first == ["linear", "log", "moments", "gp_bandit"]


def test_summarise_skips_absent_group_columns_and_rejects_bad_input():
    frame = run_frame(datasets=("mnist",)).drop(columns="dataset")
    out = analysis.summarise_by_schedule(frame)
    assert "dataset" not in out.columns and len(out) == 2 * 3 * 4
    with pytest.raises(ValueError, match="missing \\['test_log_px'\\]"):
        analysis.summarise_by_schedule(frame.drop(columns="test_log_px"))
    with pytest.raises(ValueError, match="empty frame"):
        analysis.summarise_by_schedule(frame.iloc[:0])


def _histories() -> pd.DataFrame:
    rows = [dict(dataset="mnist", d=d, schedule=sch, seed=seed, epoch=epoch,
                 train_iwae=-200 + 100 * (1 - np.exp(-epoch / 10)) - seed)
            for d in (5, 15) for sch in SCHEDULES for seed in (0, 1) for epoch in range(50)]
    return pd.DataFrame(rows)


def test_training_curves_first_seed_or_mean_over_seeds():
    first = analysis.training_curves(_histories())
    assert first.attrs["seed"] == 0 and (first["count"] == 1).all() and first["sem"].isna().all()
    assert len(first) == 2 * 4 * 50 and list(first.columns[:4]) == ["dataset", "d", "schedule", "epoch"]
    assert first.query("epoch == 0")["mean"].tolist() == pytest.approx([-200.0] * 8)
    mean = analysis.training_curves(_histories(), seed=None)
    assert mean.attrs["seed"] is None and mean.query("epoch == 0")["mean"].tolist() == pytest.approx([-200.5] * 8)
    assert mean["sem"].iloc[0] == pytest.approx(0.5)  # seeds differ by 1: std 1/sqrt(2), sem 1/2
    assert analysis.training_curves(_histories(), seed=1).attrs["seed"] == 1
    with pytest.raises(ValueError, match="no run with seed 7"):
        analysis.training_curves(_histories(), seed=7)


def test_wallclock_table_best_run_and_cumulative_time():
    frame = pd.DataFrame({
        "schedule": ["log"] * 4 + ["gp_bandit"] * 3,
        "d": [2, 2, 3, 3, 2, 3, 4],
        "log_beta1": [0.01, 0.3, 0.01, 0.3] + [0.025] * 3,
        "test_log_px": [-115.0, -110.0, -111.0, -113.0, -111.0, -110.5, -112.0],
        "test_kl": [9.0, 8.4, 8.0, 8.1, 7.0, 7.5, 8.0],
        "train_seconds": [1800.0] * 4 + [3000.0] * 3,
        "eval_seconds": [0.0] * 4 + [400.0] * 3,
        "bandit_seconds": [0.0] * 4 + [200.0] * 3,
    })
    table = analysis.wallclock_table(frame, time_unit="h")
    assert table["schedule"].tolist() == ["GP-bandit", "grid-searched log"]
    assert list(table.columns) == ["schedule", "best log p(x)", "KL at best", "d at best", "beta_1 at best",
                                   "number of runs", "cumulative run time (h)"]
    bandit, log = table.iloc[0], table.iloc[1]
    assert bandit["best log p(x)"] == -110.5 and bandit["KL at best"] == 7.5 and bandit["d at best"] == 3
    assert bandit["number of runs"] == 3 and bandit["cumulative run time (h)"] == pytest.approx(3.0)
    assert math.isnan(bandit["beta_1 at best"])
    assert log["best log p(x)"] == -110.0 and log["KL at best"] == 8.4 and log["beta_1 at best"] == 0.3
    assert log["cumulative run time (h)"] == pytest.approx(2.0)
    minutes = analysis.wallclock_table(frame, time_columns=("train_seconds",))
    assert minutes["cumulative run time (min)"].tolist() == pytest.approx([150.0, 120.0])
    with pytest.raises(ValueError, match="time_unit"):
        analysis.wallclock_table(frame, time_unit="days")


def _perm_histories() -> pd.DataFrame:
    rows = []
    for d in (5, 10):
        for sort in (True, False):
            for seed in (0, 1):
                for epoch in range(0, 31):
                    value = -100 + epoch / 10 + (1.0 if sort else 0.0) + seed if epoch % 10 == 0 else np.nan
                    rows.append(dict(S=10, d=d, schedule="gp_bandit" if sort else "gp_bandit_unsorted",
                                     seed=seed, epoch=epoch, test_log_px=value))
    return pd.DataFrame(rows)


def test_permutation_table_cells_are_seed_means_at_budget():
    hist = _perm_histories()
    table = analysis.permutation_table(hist, budgets=[10, 25])
    assert list(table.columns) == ["T=10", "T=25"] and table.index.names == ["S", "d", "GP"]
    assert [i[2] for i in table.index] == ["sorted (perm. invariant)", "unsorted"] * 2
    # sorted, d=5: mean over seeds of -100 + 1 + 1 + seed = -97.5 at T=10; at T=25 the last evaluation is epoch 20
    assert table.loc[(10, 5, "sorted (perm. invariant)"), "T=10"] == pytest.approx(-97.5)
    assert table.loc[(10, 5, "sorted (perm. invariant)"), "T=25"] == pytest.approx(-96.5)
    assert table.loc[(10, 10, "unsorted"), "T=10"] == pytest.approx(-98.5)
    assert list(analysis.permutation_table(hist).columns) == ["T=10", "T=20", "T=30"]


def test_permutation_table_counts_rounds_and_accepts_a_flag():
    hist = _perm_histories()
    rounds = pd.DataFrame([dict(S=10, d=d, schedule=s, seed=seed, epoch=e) for d in (5, 10)
                           for s in ("gp_bandit", "gp_bandit_unsorted") for seed in (0, 1) for e in (3, 6, 9, 12)])
    assert list(analysis.permutation_table(hist, budgets=[10], rounds=rounds).columns) == ["T=10 / 3 rounds"]
    as_bool = hist.assign(sort=hist["schedule"] == "gp_bandit").drop(columns="schedule")
    by_flag = analysis.permutation_table(as_bool, budgets=[10], variant="sort")
    assert by_flag["T=10"].tolist() == pytest.approx(analysis.permutation_table(hist, budgets=[10])["T=10"].tolist())


def test_markdown_table_by_hand():
    frame = pd.DataFrame({"name": ["a|b", "c"], "value": [1.23456, float("nan")], "n": [3, 4]})
    lines = analysis.markdown_table(frame).strip().split("\n")
    assert lines == ["| name | value | n |", "| :--- | ---: | ---: |", r"| a\|b | 1.235 | 3 |", "| c |  | 4 |"]
    assert analysis.markdown_table(frame.set_index("name")).split("\n")[0] == "| name | value | n |"


def _bandit_history(n=12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"round": np.arange(n), "epoch": 6 * (np.arange(n) + 1),
                         "arm": [[0.0, float(v)] for v in rng.uniform(0.05, 0.95, n)], "reward": rng.normal(size=n)})


def test_stage_rounds_picks_the_gp_as_of_each_epoch():
    hist = pd.DataFrame({"epoch": np.arange(20, 121, 10)})
    assert analysis.stage_rounds(hist, fractions=(0.2, 0.3, 1.0)) == [0, 1, 10]
    assert analysis.stage_rounds(hist, [24, 36, 120]) == [0, 1, 10]
    assert analysis.stage_rounds(hist, [5, 10, 25]) == [0]  # before the first round: the first round
    gp_late = _bandit_history(6).assign(source=["random"] * 3 + ["gp"] * 3)  # epochs 6..36
    assert analysis.stage_rounds(gp_late, [6, 24, 100]) == [3, 5]
    assert analysis.stage_rounds(_bandit_history(4).assign(source="random"), [10, 20]) == []


def test_reward_observations_of_a_d2_run():
    hist = _bandit_history().assign(reward=lambda f: f["reward"].astype(object))
    hist.loc[3, "reward"] = "nan"
    obs = analysis.reward_observations(hist)
    assert list(obs.columns) == ["position", "round", "epoch", "beta1", "reward"]
    assert obs["beta1"].tolist() == pytest.approx([a[1] for a in hist["arm"]]) and np.isnan(obs["reward"][3])
    assert analysis.reward_observations(hist.iloc[:0]).empty
    with pytest.raises(ValueError, match="d = 2"):
        analysis.reward_observations(hist.assign(arm=[[0.0, 0.2, 0.5]] * len(hist)))


def test_betas_by_phase_splits_training_in_thirds():
    frame = pd.DataFrame({"epoch": np.arange(1, 31), "betas": [str([0.0, 0.1 + e / 100, 0.5]) for e in range(30)]})
    points = analysis.betas_by_phase(frame)
    assert len(points) == 60 and set(points["j"]) == {1, 2}
    phases = points.drop_duplicates("epoch").set_index("epoch")["phase"]
    assert (phases[1], phases[10], phases[11], phases[20], phases[21], phases[30]) == (
        "early", "early", "middle", "middle", "late", "late")  # an epoch ending a third belongs to it
    assert analysis.betas_by_phase(frame.iloc[:0]).empty
