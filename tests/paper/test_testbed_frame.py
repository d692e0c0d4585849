"""The test bed's table for Fig 12: protocols, baselines and the user's grid search per case, cached per case,
summarised."""
from __future__ import annotations

import pandas as pd
import pytest

from tvolib.bandit.testbed_baselines import LOG_BETA1_GRID, USER_GRID
from tvolib.paper import testbed
from tvolib.paper import bandit_analysis
from tvolib.paper.profiles import TestbedScale, get_profile

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = ("d5-log-strong", "d5-tvo-lg-strong")


@pytest.fixture(scope="module")
def profile():
    return get_profile("smoke").replace(testbed=TestbedScale(cases=CASES, seeds=2, epochs=12))


@pytest.fixture(scope="module")
def frame(profile, tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    return root, testbed.testbed_frame(profile, root, max_workers=1)


def test_every_case_has_the_protocols_for_every_seed_and_the_baselines(frame):
    root, table = frame
    assert list(table.columns) == list(testbed.COLUMNS)
    for case in CASES:
        rows = table[table["case"] == case]
        bandits = rows[rows["kind"] == "bandit"]
        assert set(bandits["protocol"]) == set(testbed.TESTBED_PROTOCOLS) and len(bandits) == len(testbed.TESTBED_PROTOCOLS) * 2
        baselines = rows[rows["kind"] == "baseline"]
        expected = {"log", "log (best beta_1)", "linear"} | ({"moments", "bias-optimal"} if "tvo" in case else set())
        assert set(baselines["protocol"]) == expected | {USER_GRID}
        fixed = baselines[baselines["protocol"] != USER_GRID]
        for _, runs in fixed.groupby("protocol"):  # a fixed baseline reads no reward: one result for every seed
            assert sorted(runs["seed"]) == [0, 1] and runs["regret"].nunique() == 1
        by = fixed.drop_duplicates("protocol").set_index("protocol")
        assert by.at["log", "beta1"] == 0.025 and by.at["log (best beta_1)", "runs"] == 7
        assert by.at["log (best beta_1)", "regret"] <= by.at["log", "regret"]
        user = baselines[baselines["protocol"] == USER_GRID]  # one run kept of seven, per seed
        assert sorted(user["seed"]) == [0, 1] and (user["runs"] == 7).all() and user["beta1"].isin(LOG_BETA1_GRID).all()
        assert (user["regret"] >= by.at["log (best beta_1)", "regret"] - 1e-12).all()
    assert len(list((root / "testbed").glob("*.csv"))) == len(CASES) * (len(testbed.TESTBED_PROTOCOLS) + 2)


def test_the_table_is_read_back_and_a_new_case_or_protocol_computes_only_itself(frame, profile, monkeypatch):
    root, table = frame
    again = testbed.testbed_frame(profile, root)
    pd.testing.assert_frame_equal(again, table, check_dtype=False)
    computed = []
    real = testbed._compute
    monkeypatch.setattr(testbed, "_compute", lambda missing, *a: computed.append(
        sorted((c.name, g) for c, g in missing)) or real(missing, *a))
    wider = profile.replace(testbed=TestbedScale(cases=CASES + ("d2-log-none",), seeds=2, epochs=12))
    testbed.testbed_frame(wider, root, max_workers=1)
    assert computed == [sorted(("d2-log-none", g) for g in testbed._groups())]
    computed.clear()
    monkeypatch.setitem(testbed.TESTBED_PROTOCOLS, "code, kappa 0", {"protocol": "code", "kappa": 0.0})
    more = testbed.testbed_frame(profile, root, max_workers=1)
    assert computed == [[(case, "code, kappa 0") for case in CASES]]
    pd.testing.assert_frame_equal(more[more["protocol"] != "code, kappa 0"].reset_index(drop=True),
                                  table.reset_index(drop=True), check_dtype=False)


def test_the_summary_names_each_case_s_best_baseline(frame):
    summary = bandit_analysis.testbed_summary(frame[1])
    assert {"kind", "runs", "beta1", "best_baseline", "best_baseline_regret"} <= set(summary.columns)
    for case, rows in summary.groupby("case"):
        baselines = rows[rows["kind"] == "baseline"]
        assert rows["best_baseline_regret"].iloc[0] == baselines["regret"].min()
        assert (baselines[baselines["protocol"] != USER_GRID]["regret_sem"] == 0).all()



def test_the_summary_gives_beta1_only_where_every_seed_kept_the_same():
    rows = [("log", 0, 0.025), ("log", 1, 0.025), (USER_GRID, 0, 0.05), (USER_GRID, 1, 0.1)]
    frame = pd.DataFrame([{"case": "a", "protocol": p, "seed": s, "regret": 0.1, "distance": 0.0, "degenerate": 0.0,
                           "gp_rounds": 0, "kind": "baseline", "runs": 7, "beta1": b} for p, s, b in rows])
    summary = bandit_analysis.testbed_summary(frame).set_index("protocol")
    assert summary.at["log", "beta1"] == 0.025 and pd.isna(summary.at[USER_GRID, "beta1"])
