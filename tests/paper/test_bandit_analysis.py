"""What the bandit chose: who chose each arm, and the degenerate share per third of training."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tvolib.paper import analysis, bandit_analysis


def rounds_of(n: int, *, seed: int = 0, n_random: int = 3, epochs: int = 60) -> pd.DataFrame:
    """A run of ``n`` rounds ending at epochs 6, 12, ...: decisions random until round ``n_random - 1``,
    then the GP's, every other GP arm degenerate (the first not)."""
    sources = ["random"] * (n_random - 1) + ["gp", "corner"] * n
    return pd.DataFrame({"seed": seed, "round": np.arange(n), "epoch": 6 * (np.arange(n) + 1), "epochs": epochs,
                         "source": sources[:n], "next_degenerate": [r >= n_random - 1 and (r - n_random) % 2 == 0
                                                                    for r in range(n)]})


def test_with_chooser_reads_who_chose_each_arm_per_run():
    frame = pd.concat([rounds_of(5, seed=1), rounds_of(4, seed=0)]).sample(frac=1.0, random_state=0)
    out = bandit_analysis.with_chooser(frame, ["seed"])
    assert out[["seed", "round"]].values.tolist() == [[0, r] for r in range(4)] + [[1, r] for r in range(5)]
    # round r trains the arm chosen after round r - 1: random for rounds 0..2, the GP's ("gp", "corner") after
    assert out["chosen_by"].tolist() == ["random"] * 3 + ["GP"] + ["random"] * 3 + ["GP"] * 2


def test_degenerate_by_phase_pools_seeds_per_third():
    frame = pd.concat([rounds_of(10, seed=0), rounds_of(10, seed=1)])  # decisions at epochs 6..60 of 60
    out = bandit_analysis.degenerate_by_phase(frame.assign(method="bandit"), ["method"])
    assert out["phase"].tolist() == ["early", "middle", "late"] and set(out["method"]) == {"bandit"}
    # GP decisions at rounds 2..9 (epochs 18..60): early 18 (round 2: not degenerate, round 3 at 24 is
    # middle); middle 24..40: rounds 3..5 (degenerate 3, 5); late 42..60: rounds 6..9 (degenerate 7, 9)
    assert out["gp_arms"].tolist() == [2, 6, 8]
    assert out["degenerate"].tolist() == [0, 4, 4]
    assert out["degenerate_share"].tolist() == pytest.approx([0.0, 4 / 6, 0.5])
    empty = bandit_analysis.degenerate_by_phase(rounds_of(2))  # no GP decision yet
    assert empty["gp_arms"].tolist() == [0, 0, 0] and empty["degenerate_share"].isna().all()


def test_degenerate_by_phase_uses_each_runs_own_length():
    frame = rounds_of(10, epochs=60)
    longer = frame.assign(epochs=180)  # the same decisions are all in the first third of a longer run
    assert bandit_analysis.degenerate_by_phase(longer)["gp_arms"].tolist() == [8, 0, 0]
    with pytest.raises(ValueError, match="degenerate_by_phase needs columns"):
        bandit_analysis.degenerate_by_phase(frame.drop(columns="epochs"))


def test_training_phase_puts_an_epoch_ending_a_third_in_it():
    assert analysis.training_phase([0, 158, 159, 316, 317, 475], 475) == [
        "early", "early", "middle", "middle", "late", "late"]
    assert analysis.training_phase([20, 20], [60, 61]) == ["early", "early"]
    assert analysis.training_phase([21, 40, 41], [60, 60, 60]) == ["middle", "middle", "late"]


def test_adaptive_d_table_gives_each_grid_its_best_d_and_what_the_grid_costs():
    rows = []
    for seed in (0, 1):
        for d, lp in ((2, -101.0), (5, -99.0), (10, -100.0)):
            rows.append({"dataset": "mnist", "schedule": "log", "d": d, "seed": seed, "test_log_px": lp - seed,
                         "test_kl": 5.0, "train_seconds": 60.0 * d, "eval_seconds": 6.0})
        rows.append({"dataset": "mnist", "schedule": "gp_bandit_adaptive", "d": 10, "seed": seed,
                     "test_log_px": -98.0 - seed, "test_kl": 4.0, "train_seconds": 600.0, "eval_seconds": 6.0,
                     "bandit_seconds": 30.0})
    table = bandit_analysis.adaptive_d_table(pd.DataFrame(rows)).set_index(["schedule", "d"])
    adaptive = table.loc[("gp_bandit_adaptive", "<= 10")]
    assert (adaptive["log_px"], adaptive["log_px_sem"], adaptive["runs_per_seed"]) == (-98.5, 0.5, 1)
    assert adaptive["minutes_per_seed"] == pytest.approx(636.0 / 60)
    best = table.loc[("log", "best (d = 5)")]  # the d of the highest mean log p(x), its seeds' numbers
    assert best["log_px"] == -99.5 and best["seeds"] == 2 and best["runs_per_seed"] == 3
    assert best["minutes_per_seed"] == pytest.approx((120 + 300 + 600 + 3 * 6) / 60)  # the whole grid
    assert table.loc[("log", "2"), "minutes_per_seed"] == pytest.approx(126 / 60)
    with pytest.raises(ValueError, match="adaptive_d_table needs columns"):
        bandit_analysis.adaptive_d_table(pd.DataFrame(rows).drop(columns="d"))


def test_d_over_training_orders_each_runs_windows():
    rounds = pd.DataFrame({"dataset": "mnist", "seed": [1, 0, 0], "start_epoch": [0, 3.0, 0.0],
                           "epoch": [3, 6.0, 3.0], "d": [4, 2.0, 7.0], "arm": ["[0.1]"] * 3})
    out = bandit_analysis.d_over_training(rounds)
    assert out[["seed", "start_epoch", "d"]].values.tolist() == [[0, 0, 7], [0, 3, 2], [1, 0, 4]]
    assert out["d"].dtype.kind == "i" and "recommended_d" not in out  # rounds that recorded none
    rounds["recommended_d"] = [3.0, float("nan"), 5.0]
    assert bandit_analysis.d_over_training(rounds)["recommended_d"].fillna(0).tolist() == [5.0, 0.0, 3.0]
