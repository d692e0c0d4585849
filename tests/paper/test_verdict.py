"""The verdict rule on hand-made numbers: each outcome at its threshold, the verdict of every mix,
and the rule's symmetries."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvolib.paper.verdict import (
    RULE,
    THRESHOLD,
    VERDICTS,
    compare,
    compare_equal,
    compare_no_worse,
    exact,
    judge,
    untested,
)


def test_two_standard_errors_of_the_difference_separate_the_outcomes():
    se = math.hypot(0.3, 0.4)  # 0.5
    assert compare("a", 1.01, 0.3, 0.0, 0.4).outcome == "holds"          # 2.02 se
    assert compare("a", 0.99, 0.3, 0.0, 0.4).outcome == "within noise"   # 1.98 se
    assert compare("a", -1.01, 0.3, 0.0, 0.4).outcome == "reversed"
    assert compare("a", 1.0, 0.3, 0.0, 0.4).se == pytest.approx(se)
    assert compare("a", 1.0, 0.3, 0.0, 0.4).z == pytest.approx(2.0)


def test_a_single_run_is_untested_and_an_exact_value_goes_by_its_sign():
    assert compare("a", 5.0, float("nan"), 0.0, 0.1).outcome == "untested"
    assert compare("a", 5.0, None, 0.0, 0.1).outcome == "untested"
    assert math.isnan(untested("a", 1.0).z)
    assert exact("a", 1e-9).outcome == "holds" and exact("a", -1e-9).outcome == "reversed"
    assert exact("a", 0.0).outcome == "within noise" and exact("a", 2.0).z == math.inf


def test_equality_holds_within_noise_and_no_worse_holds_unless_reversed():
    assert compare_equal("a", 0.5, 0.3, 0.0, 0.4).outcome == "holds"
    assert compare_equal("a", 1.5, 0.3, 0.0, 0.4).outcome == "reversed"
    assert compare_equal("a", -1.5, 0.3, 0.0, 0.4).outcome == "reversed"
    assert compare_no_worse("a", 1.5, 0.3, 0.0, 0.4).outcome == "holds"
    assert compare_no_worse("a", 0.0, 0.3, 0.0, 0.4).outcome == "holds"
    assert compare_no_worse("a", -1.5, 0.3, 0.0, 0.4).outcome == "reversed"
    assert compare_no_worse("a", -1.5, None, 0.0, 0.4).outcome == "untested"


@pytest.mark.parametrize("outcomes, verdict", [
    (["holds", "holds"], "reproduced"),
    (["holds", "within noise"], "partly"),
    (["holds", "untested"], "partly"),
    (["within noise", "within noise"], "within noise"),
    (["within noise", "untested"], "within noise"),
    (["holds", "reversed"], "not reproduced"),
    (["reversed"], "not reproduced"),
    (["untested"], "not assessed"),
    ([], "not assessed"),
])
def test_the_verdict_of_each_mix_of_outcomes(outcomes, verdict):
    make = {"holds": exact("h", 1.0), "reversed": exact("r", -1.0), "within noise": exact("w", 0.0),
            "untested": untested("u", 1.0)}
    assert judge([make[o] for o in outcomes]) == verdict
    assert verdict in VERDICTS


@given(a=st.floats(-1e3, 1e3), b=st.floats(-1e3, 1e3), sa=st.floats(1e-3, 1e2), sb=st.floats(1e-3, 1e2),
       scale=st.floats(1e-2, 1e2))
def test_swapping_flips_and_rescaling_keeps_the_outcome(a, b, sa, sb, scale):
    flip = {"holds": "reversed", "reversed": "holds", "within noise": "within noise"}
    one = compare("x", a, sa, b, sb)
    z = (a - b) / math.hypot(sa, sb)
    if abs(abs(z) - THRESHOLD) < 1e-6:
        return  # at the threshold rounding may decide either way
    assert compare("x", b, sb, a, sa).outcome == flip[one.outcome]
    assert compare("x", scale * a, scale * sa, scale * b, scale * sb).outcome == one.outcome


def test_bad_numbers_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="a must be finite"):
        compare("x", float("inf"), 0.1, 0.0, 0.1)
    with pytest.raises(ValueError, match="b must be a number"):
        compare("x", 0.0, 0.1, "zero", 0.1)
    with pytest.raises(ValueError, match="se_a must be a finite number >= 0"):
        compare("x", 0.0, -0.1, 0.0, 0.1)
    with pytest.raises(ValueError, match="unknown comparison outcome"):
        judge([exact("x", 1.0).__class__("x", 1.0, 0.1, "maybe")])


def test_the_rule_states_the_threshold_and_every_verdict():
    assert f"{THRESHOLD:g} standard errors" in RULE
    assert all(f"**{v}**" in RULE for v in VERDICTS)
