"""The cost model of the printed plan (tvolib.runs.cost)."""
from __future__ import annotations

from tvolib.paper import sweeps
from tvolib.runs import cost
from tvolib.runs.cost import bandit_rounds, estimate_seconds, estimate_wall_seconds


# ---------------------------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------------------------

def test_cost_model_monotone_and_schedule_aware():
    base = sweeps.tvo_config("quick", model="vae", dataset="mnist", schedule="log", d=5, S=10, seed=0)
    t = estimate_seconds(base)
    assert estimate_seconds(base.replace(epochs=120)) > t
    assert estimate_seconds(base.replace(S=50)) > t
    assert estimate_seconds(base.replace(n_train=None)) > t  # the full dataset
    assert estimate_seconds(base.replace(eval_S=5000)) > t
    assert estimate_seconds(base.replace(schedule="moments")) > t
    assert estimate_seconds(base.replace(schedule="gp_bandit")) > t
    assert estimate_seconds(base.replace(model="sbn", dataset="binarized_mnist")) < t
    wide = base.replace(schedule="gp_bandit", schedule_options={"window": 1})
    assert estimate_seconds(wide) > estimate_seconds(base.replace(schedule="gp_bandit"))


def test_bandit_rounds_and_makespan():
    assert bandit_rounds(60, 6) == 10  # ten windows of 6 before the first growth
    assert bandit_rounds(80, 2) == 28  # 10 x 2 + 10 x 3 + 8 x 4 >= 80
    assert bandit_rounds(10_000, 6) > 300
    assert estimate_wall_seconds([3, 3, 2, 2, 2], workers=2) == 7  # LPT greedy
    assert estimate_wall_seconds([3, 3, 2, 2, 2], workers=1) == 12
    assert estimate_wall_seconds([5, 1], workers=8) == 5


def test_cost_constants_documented():
    doc = cost.__dict__["COST_CONSTANTS"]
    assert {"startup_s", "train_s_per_sample", "eval_s_per_sample", "bandit_round_s", "pcfg_step_s"} <= set(doc)
