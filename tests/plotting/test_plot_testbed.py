"""Fig 12: bandits as bars, baselines as markers (hollow at the axis' end when off scale)."""
from __future__ import annotations

import pandas as pd

from tvolib.plotting.testbed import REGRET_CAP, plot_testbed


def _summary(with_kind: bool = True) -> pd.DataFrame:
    rows = [("a", "random arms", "bandit", 0.6), ("a", "tvolib", "bandit", 0.3), ("a", "log", "baseline", 0.1),
            ("a", "linear", "baseline", 5.0), ("b", "random arms", "bandit", 0.6), ("b", "tvolib", "bandit", 0.5),
            ("b", "log", "baseline", 0.7), ("b", "linear", "baseline", 0.2)]
    frame = pd.DataFrame([{"case": c, "protocol": p, "kind": k, "regret": r, "regret_sem": 0.0 if k == "baseline"
                           else 0.05, "degenerate": 0.1} for c, p, k, r in rows])
    return frame if with_kind else frame[frame["kind"] == "bandit"].drop(columns="kind")


def test_baselines_are_markers_and_an_off_scale_one_is_drawn_hollow_at_the_cap():
    fig = plot_testbed(_summary(), title="t")
    regret, degenerate = fig.axes[:2]
    assert len(regret.patches) == 4 + 2 and len(degenerate.patches) == 4  # two bandits on two cases (+ their legend entries)
    assert regret.get_xlim()[1] == REGRET_CAP
    offsets = [c.get_offsets() for c in regret.collections if len(c.get_offsets())]
    assert any(REGRET_CAP in list(o[:, 0]) for o in offsets)  # linear's 5.0 on case a, at the cap
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["random arms", "tvolib", "log", "linear"]


def test_a_summary_without_kinds_is_all_bandits():
    fig = plot_testbed(_summary(with_kind=False))
    assert len(fig.axes[0].patches) == 4 + 2 and fig.axes[0].get_xlim()[1] == 1.0
