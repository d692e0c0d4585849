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
