"""The shared style: fixed colours and markers, the legend below the panels, the empty-figure message."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tvolib.paper.names import PCFG_METHOD_ORDER  # noqa: E402
from tvolib.plotting import style  # noqa: E402


def test_schedule_colours_and_markers_are_fixed_across_figures():
    a = style.schedule_palette(["log", "gp_bandit"])
    b = style.schedule_palette(["gp_bandit", "random", "linear", "log"])
    assert a["gp_bandit"] == b["gp_bandit"] and a["log"] == b["log"]
    assert len({tuple(c) for c in b.values()}) == 4
    assert style.schedule_markers(["random", "gp_bandit"]) == {"gp_bandit": "D", "random": "X"}
    new = style.schedule_markers(["new_a", "new_b", "linear"])
    assert new == {"linear": "o", "new_a": ">", "new_b": "d"}  # "P", "h": the GP bandit under tvolib's and the
    # integrand protocol; "*": adaptive d
    spare = style.schedule_palette(["zz", "linear"])
    assert spare["zz"] not in style.schedule_palette(["linear", "log", "moments", "gp_bandit", "random"]).values()


def test_pcfg_palette_matches_schedule_colours_and_is_distinct():
    pal = style.pcfg_palette(PCFG_METHOD_ORDER)
    sched = style.schedule_palette(["log", "gp_bandit"])
    assert pal["tvo-log"] == sched["log"] and pal["tvo-gp_bandit"] == sched["gp_bandit"]
    assert len({tuple(c) for c in pal.values()}) == len(pal)
    assert style.pcfg_palette(["wake-sleep"])["wake-sleep"] == pal["wake-sleep"]  # fixed, not by position


def test_finish_puts_each_label_once_below_and_wraps_the_title():
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a")
        ax.plot([0, 1], [1, 0], label="b")
    style.finish(fig, axes, "legend", "word " * 40)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
    assert "\n" in fig._suptitle.get_text()
    message = style.message_figure("nothing here", "t")
    assert message.axes[0].texts[0].get_text() == "nothing here"
    plt.close("all")
