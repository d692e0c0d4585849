"""The one rule that turns a figure's numbers into a verdict on a claim.

A claim is checked by one or more *comparisons*, each the difference of two quantities oriented so
that a positive difference is the direction the claim states (``A`` better than ``B``). A quantity
is a mean over seeds with its standard error; the difference's standard error is

    se(A - B) = sqrt(se_A^2 + se_B^2)        (independent runs: different seeds or schedules).

Each comparison is one of

* ``holds``: the difference exceeds two standard errors of the difference, ``A - B > 2 se``;
* ``reversed``: ``A - B < -2 se``: the opposite of the claim, beyond noise;
* ``within noise``: ``|A - B| <= 2 se``;
* ``untested``: no standard error (one run per quantity): the sign alone is not evidence.

An *exact* comparison (a closed-form quantity, a count, a measured time) has no noise: it holds or
is reversed by its sign. A claim of *equality* ("comparable", "matches") holds where the difference
is within noise and is reversed where it is not; a claim of *no worse* ("as well as") holds unless
the difference is below ``-2 se``.

The claim's verdict, from its comparisons:

* **reproduced**: every comparison holds;
* **partly**: some hold, none is reversed;
* **within noise**: none holds, none is reversed, at least one was tested;
* **not reproduced**: at least one comparison is reversed;
* **not assessed**: nothing could be tested (no comparison, or only untested ones).

Example:
    >>> c = compare("bandit vs log", 1.0, 0.2, 0.0, 0.3)
    >>> c.outcome, round(c.z, 2)
    ('holds', 2.77)
    >>> judge([c, compare("d = 10", 0.1, 0.2, 0.0, 0.2)])
    'partly'
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "OUTCOMES",
    "RULE",
    "THRESHOLD",
    "VERDICTS",
    "Comparison",
    "compare",
    "compare_equal",
    "compare_no_worse",
    "exact",
    "judge",
    "untested",
]

#: Standard errors of the difference a comparison must exceed to count as evidence.
THRESHOLD = 2.0
#: What one comparison can show.
OUTCOMES: tuple[str, ...] = ("holds", "reversed", "within noise", "untested")
#: What a claim's comparisons together show, in the order of the rule.
VERDICTS: tuple[str, ...] = ("reproduced", "partly", "within noise", "not reproduced", "not assessed")

#: The rule in words, as the results page states it once at the top.
RULE = (
    "Each claim is checked by comparisons of two means over seeds, oriented so that a positive "
    "difference is the claimed direction; the difference's standard error is sqrt(se_A^2 + se_B^2). "
    f"A comparison **holds** when the difference exceeds {THRESHOLD:g} standard errors, is **reversed** "
    f"when it is below -{THRESHOLD:g}, and is **within noise** otherwise; a closed-form value, a count or "
    "a time is exact and goes by its sign; a quantity with one run has no standard error and is "
    "**untested**. A claim of equality holds within noise; a claim of \"no worse\" holds unless reversed. The verdict: **reproduced** if every "
    "comparison holds; **partly** if some hold and none is reversed; **within noise** if none holds "
    "and none is reversed; **not reproduced** if any is reversed; **not assessed** if nothing could "
    "be tested."
)


@dataclass(frozen=True)
class Comparison:
    """One oriented difference ``A - B`` (positive: the claimed direction) and what it shows.

    ``se`` is the standard error of the difference (0 for an exact comparison, NaN when untested).
    """

    label: str
    diff: float
    se: float
    outcome: str

    @property
    def z(self) -> float:
        """The difference in standard errors (``inf`` for an exact comparison, NaN untested)."""
        if self.outcome == "untested" or math.isnan(self.se):
            return math.nan
        if self.se == 0.0:
            return math.copysign(math.inf, self.diff) if self.diff else 0.0
        return self.diff / self.se

    def text(self, digits: int = 2) -> str:
        """``"+1.20 ± 0.36"`` (``"+1.20"`` for exact or untested comparisons)."""
        value = f"{self.diff:+.{digits}f}"
        return value if self.se == 0.0 or math.isnan(self.se) else f"{value} ± {self.se:.{digits}f}"


def _number(name: str, value: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number; got {value!r}") from None
    if math.isnan(out) or math.isinf(out):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return out


def _se(name: str, value: float | None) -> float:
    """A standard error: a number >= 0, or NaN/None for 'not available' (one run)."""
    if value is None:
        return math.nan
    out = float(value)
    if math.isnan(out):
        return math.nan
    if math.isinf(out) or out < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (or NaN/None: one run); got {value!r}")
    return out


def compare(label: str, a: float, se_a: float | None, b: float, se_b: float | None) -> Comparison:
    """The claim "``A`` is above ``B``" on means ``a``, ``b`` with standard errors ``se_a``, ``se_b``.

    For a claim that ``A`` is *lower* (a KL, a regret), pass the negated means.

    Args:
        label: what is compared, e.g. ``"MNIST, d = 5"``.
        a, b: finite means.
        se_a, se_b: their standard errors (>= 0); NaN or None where a mean is one run.

    Returns:
        A :class:`Comparison` with the outcome of the rule (module docstring).
    """
    diff = _number("a", a) - _number("b", b)
    se = math.sqrt(_se("se_a", se_a) ** 2 + _se("se_b", se_b) ** 2)
    if math.isnan(se):
        return Comparison(label, diff, math.nan, "untested")
    if se == 0.0:
        return Comparison(label, diff, 0.0, "holds" if diff > 0 else "reversed" if diff < 0 else "within noise")
    z = diff / se
    outcome = "holds" if z > THRESHOLD else "reversed" if z < -THRESHOLD else "within noise"
    return Comparison(label, diff, se, outcome)


def compare_equal(label: str, a: float, se_a: float | None, b: float, se_b: float | None) -> Comparison:
    """The claim "``A`` equals ``B``" ("comparable"): holds within noise, reversed beyond it.

    Example:
        >>> compare_equal("d = 5", -144.6, 0.1, -144.8, 0.2).outcome
        'holds'
    """
    c = compare(label, a, se_a, b, se_b)
    if c.outcome == "untested" or c.se == 0.0:
        return Comparison(label, c.diff, c.se, "untested" if c.outcome == "untested" else
                          ("holds" if c.diff == 0 else "reversed"))
    return Comparison(label, c.diff, c.se, "holds" if c.outcome == "within noise" else "reversed")


def compare_no_worse(label: str, a: float, se_a: float | None, b: float, se_b: float | None) -> Comparison:
    """The claim "``A`` is no worse than ``B``": holds unless ``A - B < -2 se`` (then reversed).

    Example:
        >>> compare_no_worse("adaptive d", -105.1, 0.4, -105.0, 0.2).outcome
        'holds'
    """
    c = compare(label, a, se_a, b, se_b)
    return c if c.outcome in ("reversed", "untested") else Comparison(label, c.diff, c.se, "holds")


def exact(label: str, diff: float) -> Comparison:
    """An exact comparison (closed form, count, time): holds if ``diff > 0``, reversed if ``< 0``.

    Example:
        >>> exact("right sum - log p(x)", 0.44).outcome
        'holds'
    """
    return compare(label, _number("diff", diff), 0.0, 0.0, 0.0)


def untested(label: str, diff: float) -> Comparison:
    """A difference of single runs: reported, not evidence."""
    return Comparison(label, _number("diff", diff), math.nan, "untested")


def judge(comparisons: Sequence[Comparison]) -> str:
    """The claim's verdict from its comparisons (one of :data:`VERDICTS`; module docstring)."""
    outcomes = [c.outcome for c in comparisons]
    unknown = sorted(set(outcomes) - set(OUTCOMES))
    if unknown:
        raise ValueError(f"unknown comparison outcome(s) {unknown}; accepted: {list(OUTCOMES)}")
    tested = [o for o in outcomes if o != "untested"]
    if "reversed" in tested:
        return "not reproduced"
    if not tested:
        return "not assessed"
    if all(o == "holds" for o in outcomes):
        return "reproduced"
    if "holds" in tested:
        return "partly"
    return "within noise"
