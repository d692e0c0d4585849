"""Window rewards and the early-update rule (tvolib.bandit.reward), against hand computations."""
from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvolib.bandit.reward import (
    REWARD_RULES,
    drop_exceeds,
    early_update,
    evidence_spec_for,
    reward_reference,
    window_reward,
)
from tvolib.tvo import EvidenceSpec


def test_evidence_specs() -> None:
    assert evidence_spec_for("rate") == evidence_spec_for("code")  # the closer estimate of log p(x)
    assert evidence_spec_for("paper") == EvidenceSpec.paper(50)
    assert evidence_spec_for("code") == EvidenceSpec.authors_code(50)
    assert REWARD_RULES == ("paper", "code", "rate")
    with pytest.raises(ValueError, match=r"reward must be one of \('paper', 'code', 'rate'\); got 'mean'"):
        evidence_spec_for("mean")


def test_a_drop_of_exactly_the_threshold_never_fires() -> None:
    # In float arithmetic -200.0 - -200.05 = 0.05000000000001137 > 0.05: the float rule misfired here.
    assert -200.0 - -200.05 > 0.05
    assert not drop_exceeds(-200.0, -200.05, 0.05)
    assert not drop_exceeds(-100.0, -100.05, 0.05)
    assert drop_exceeds(-200.0, -200.0501, 0.05)
    assert drop_exceeds(0.0, -0.0501, 0.05)
    assert not drop_exceeds(0.0, 0.0, 0.0) and drop_exceeds(0.0, -1e-300, 0.0)


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6), st.integers(0, 500))
def test_drop_is_decided_on_the_printed_decimals(i: int, j: int, t: int) -> None:
    """Evidence values with two decimals: the rule is exactly (i - j) > t in hundredths."""
    assert drop_exceeds(i / 100, j / 100, t / 100) == (i - j > t)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(0, 10))
def test_drop_agrees_with_exact_decimal_arithmetic(a: float, b: float, t: float) -> None:
    assert drop_exceeds(a, b, t) == (Decimal(repr(a)) - Decimal(repr(b)) > Decimal(repr(t)))


def test_reference_and_early_update() -> None:
    assert reward_reference("paper", -10.0, -5.0) == -10.0
    assert reward_reference("code", -10.0, None) == -10.0 and reward_reference("code", -10.0, -5.0) == -5.0
    assert not early_update("paper", start=-10.0, current=-20.0, previous_mean=None, threshold=None)
    assert early_update("paper", start=-10.0, current=-10.1, previous_mean=-12.0, threshold=0.05)
    # the code rule measures from the previous window's mean
    assert not early_update("code", start=-10.0, current=-10.1, previous_mean=-12.0, threshold=0.05)
    assert early_update("code", start=-10.0, current=-12.06, previous_mean=-12.0, threshold=0.05)


def test_window_rewards() -> None:
    assert window_reward("paper", start=-100.0, end=-97.0, values=[-99.0, -97.0], previous_mean=None) == (3.0, None)
    values = [-99.0, -98.0, -94.0]
    reward, mean = window_reward("code", start=-100.0, end=-94.0, values=values, previous_mean=None)
    assert mean == pytest.approx(np.mean(values)) and reward == pytest.approx(np.mean(values) + 100.0)
    reward, mean = window_reward("code", start=-94.0, end=-90.0, values=[-92.0, -90.0], previous_mean=-97.0)
    assert (reward, mean) == (pytest.approx(-91.0 + 97.0), -91.0)
    # the rate: the paper's L_end - L_start per epoch of the window; drops measured from L_start
    assert window_reward("rate", start=-100.0, end=-97.0, values=[-99.0, -97.0], previous_mean=None, length=2) == (1.5, None)
    assert reward_reference("rate", -10.0, -5.0) == -10.0
    with pytest.raises(ValueError, match="length"):
        window_reward("rate", start=-100.0, end=-97.0, values=[-97.0], previous_mean=None)
