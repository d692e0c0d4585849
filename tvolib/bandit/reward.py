"""Rewards of the GP-bandit schedule: windows, ``L_end - L_start`` and early updates (Section 3).

Training is cut into windows; window ``k`` (round ``k``) trains with one arm. A window starts at
the epoch ``e_s`` whose evidence ``L_s`` was last reported and ends at the first report ``e``
with ``e - e_s >= w_k`` (the planned length), or earlier on an *early update*. With
``step(0, L_0)`` reported before training, round 0 trains epochs ``1..w`` and earns
``L_w - L_0``, the paper's reward ``f_t = L_{w(t+1)} - L_{wt}`` (Eq. 7).

* ``rule="paper"`` (Section 3, Eq. 7, and Appendix A): ``L`` is the training-set TVO
  log-evidence with 50 linear left points ``i/50``. Reward ``y_k = L_end - L_start``. Early update
  when the drop ``L_start - L_e`` exceeds the threshold (the paper's "update early if
  ``L_t <= -0.05``", reading ``L_t`` as the window's running reward): the window ends at ``e``
  and its reward is the (negative) change so far.
* ``rule="rate"`` (this package's own protocol, :mod:`tvolib.bandit.protocol`): the paper's
  window rule and early update, with the reward divided by the window's length in epochs,
  ``y_k = (L_end - L_start) / (e - e_s)``: the evidence gained per epoch of the arm. Windows grow
  (and early updates shorten them), so the paper's ``L_end - L_start`` grows with the window as
  much as with the arm; a rate compares arms of windows of any length. ``L`` is the code's
  estimate (trapezoid rule over 50 log-spaced points), the closer of the two to ``log p(x)``.
* ``rule="code"`` (the authors' code): ``L`` integrates 50 points ``10**linspace(-9, 0, 50)`` by
  the trapezoid rule; the window's value is the *mean* of its per-epoch ``L``; ``y_k`` is that
  mean minus the previous window's mean (``L_start`` for the first window); early update when
  ``L_e`` drops below the previous mean by more than the threshold.

Threshold comparisons are exact: see :func:`drop_exceeds`.

Example:
    >>> window_reward("paper", start=-100.0, end=-97.5, values=[-99.0, -97.5], previous_mean=None)
    (2.5, None)
    >>> early_update("paper", start=-100.0, current=-100.05, previous_mean=None, threshold=0.05)
    False
"""
from __future__ import annotations

from decimal import Decimal
from typing import Literal

import numpy as np

from tvolib.tvo import EvidenceSpec

__all__ = [
    "REWARD_RULES",
    "drop_exceeds",
    "early_update",
    "evidence_spec_for",
    "reward_reference",
    "window_reward",
]

#: Reward definitions: the paper's (Section 3, Appendix A) and the authors' code's.
REWARD_RULES = ("paper", "code", "rate")

RewardRule = Literal["paper", "code", "rate"]


def evidence_spec_for(reward: str) -> EvidenceSpec:
    """The log-evidence estimate ``L`` each reward definition needs.

    Args:
        reward: ``"paper"`` (left Riemann sum over 50 linear points ``i / 50``, Appendix A) or
            ``"code"`` (trapezoid rule over ``10**linspace(-9, 0, 50)``, the authors' code).

    Returns:
        An :class:`~tvolib.tvo.EvidenceSpec`.

    Example:
        >>> evidence_spec_for("paper").rule
        'left'
    """
    if reward == "paper":
        return EvidenceSpec.paper(50)
    if reward in ("code", "rate"):
        return EvidenceSpec.authors_code(50)
    raise ValueError(f"reward must be one of {REWARD_RULES}; got {reward!r}")


def drop_exceeds(reference: float, current: float, threshold: float) -> bool:
    """Whether the drop ``reference - current`` is strictly greater than ``threshold``, exactly.

    Each number is read as the decimal it prints as (Python's shortest round-trip ``repr``) and
    the difference is formed in exact decimal arithmetic, with no tolerance. A drop that prints as
    exactly the threshold therefore never fires, whatever the binary rounding of a float
    subtraction would give (in floats ``-200.0 - -200.05`` is ``0.05000000000001137`` but
    ``-100.0 - -100.05`` is ``0.04999999999999716``), and the decision can be re-derived from the
    printed evidence values.

    Args:
        reference: the evidence the drop is measured from (window start or previous mean).
        current: the evidence just reported.
        threshold: the early-update threshold (``early_drop``), >= 0.

    Returns:
        ``True`` when ``reference - current > threshold``.

    Example:
        >>> drop_exceeds(-100.0, -100.05, 0.05), drop_exceeds(-100.0, -100.0501, 0.05)
        (False, True)
    """
    exact = [Decimal(repr(float(v))) for v in (reference, current, threshold)]
    return exact[0] - exact[1] > exact[2]


def reward_reference(rule: RewardRule, start: float, previous_mean: float | None) -> float:
    """The value rewards and drops are measured from: ``L_start`` (paper, rate), else the previous
    window's mean."""
    if rule in ("paper", "rate") or previous_mean is None:
        return start
    return previous_mean


def early_update(
    rule: RewardRule, *, start: float, current: float, previous_mean: float | None, threshold: float | None
) -> bool:
    """Whether the report ``current`` ends the window early (``threshold=None``: never).

    Fires when ``reward_reference(rule, start, previous_mean) - current > threshold``, decided by
    :func:`drop_exceeds`. The caller applies it only before the window's planned end.
    """
    if threshold is None:
        return False
    return drop_exceeds(reward_reference(rule, start, previous_mean), current, threshold)


def window_reward(
    rule: RewardRule, *, start: float, end: float, values: list[float], previous_mean: float | None,
    length: int | None = None,
) -> tuple[float, float | None]:
    """The reward of a closed window and the ``previous_mean`` for the next one.

    ``paper``: ``y = L_end - L_start`` (Eq. 7); ``previous_mean`` is passed through. ``rate``:
    ``y = (L_end - L_start) / length``. ``code``:
    ``y = mean(values) - reference`` with ``values`` the window's per-epoch ``L`` (the end
    included); the window's mean becomes the next ``previous_mean``.

    Args:
        rule: ``"paper"`` or ``"code"``.
        start: ``L`` at the window's first report (its start).
        end: ``L`` at the report that closes it.
        values: the window's reports after the start.
        previous_mean: the previous window's mean (``None`` before the first ``code`` window).
        length: the window's length in epochs (``rate`` only; >= 1).

    Returns:
        ``(reward, previous_mean for the next window)``.
    """
    if rule == "paper":
        return end - start, previous_mean
    if rule == "rate":
        if length is None or length < 1:
            raise ValueError(f"the rate reward needs the window's length in epochs (>= 1); got {length!r}")
        return (end - start) / length, previous_mean
    window_mean = float(np.mean(values))
    return window_mean - reward_reference(rule, start, previous_mean), window_mean
