"""The value rules of the bandit's history rows: what each recorded field may hold, given its row,
the previous row and, when known, the schedule that recorded it.

A row's fields are first read as their kinds; then each must satisfy its rule. Both are one table,
:data:`tvolib.bandit.state.HISTORY_FIELDS` (column -> kind and one :class:`Rule` of this module),
checked by :func:`tvolib.bandit.state.check_history`. By family:

* the observation: rounds ``0, 1, 2, ...``; each window starts where the previous one ended, lasts
  ``epoch - start_epoch`` epochs (at most its planned ``window``, ``early`` exactly when shorter)
  and trains the arm the previous round chose (``betas = [0, sorted arm]``); its reward is the one
  its evidence gives under the row's reward rule, finite exactly when the round is not skipped;
* the configuration (``d``, the box, ``upper``, the protocol items, ``d_min``, ``d_max``): in range,
  the same in every row and, when the schedule is known, the schedule's; ``d`` is the arm's length
  plus one, ``upper`` the arm domain's bounds for that ``d``;
* the decision: ``source`` one of :data:`SOURCES`, random only before the first GP round; every GP
  field set exactly on GP rounds and in its range (``t_pred = round + 1``, ``n_obs`` the rewards
  the GP keeps, ``t_origin`` the oldest one's round, ``0 <= omega < 1``, ...); the adaptive
  bandit's per-``d`` values one per ``d`` in ``[d_min, d_max]``, its recommendation a sorted arm of
  ``recommended_d - 1`` points in the box;
* the next arm: ``d - 1`` points (``next_d - 1`` for the adaptive bandit) in the box, and its
  degeneracy measures those of :func:`~tvolib.bandit.protocol.arm_degeneracy`.

Numbers are compared to the precision a CSV read back keeps (relative ``1e-12``); a rule whose
other fields a row lacks (a history of an older revision) checks what it can.

Example:
    >>> T_PRED.check("t_pred", {"round": 4, "source": "gp", "t_pred": 104}, RowContext(None, (0,)))
    False
    >>> T_PRED.text
    'round + 1 (the round whose arm is chosen), set exactly on GP rounds (source gp or corner)'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .protocol import PROTOCOLS, arm_degeneracy, coordinate_scale, staggered_upper
from .reward import REWARD_RULES

__all__ = ["GP_SOURCES", "MAX_ABS_REWARD", "SOURCES", "Rule", "RowContext", "expected_config"]

#: What ``source`` may hold: an initial random round, the GP-UCB maximiser, or a random arm replacing
#: a GP proposal at the all-lower corner.
SOURCES = ("random", "gp", "corner")
#: The sources of a GP round (a GP was fitted and its fields recorded).
GP_SOURCES = ("gp", "corner")
#: Largest reward magnitude a history may hold (a change of log-evidence in nats; a real window
#: changes it by at most a few thousand).
MAX_ABS_REWARD = 1e6
#: Relative precision of numbers compared across fields (a CSV read back may differ in the last digit).
_REL = 1e-12
_MISSING = object()
Check = Callable[[str, dict[str, Any], "RowContext"], bool]


@dataclass(frozen=True)
class RowContext:
    """What a row's rules may look at besides the row.

    Attributes:
        prev: the previous row (``None`` for the first).
        observed: the rounds of the finite, not skipped rewards up to this row's (included).
        schedule: the schedule the rows must fit (``None``: the rows are read alone).
        expected: the configuration fields the schedule records in every row
            (:func:`expected_config`; ``{}`` without a schedule).
    """

    prev: dict[str, Any] | None
    observed: tuple[int, ...]
    schedule: Any = None
    expected: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """A field's rule: ``text`` states it; ``check(column, row, context)`` tests ``row[column]``."""

    text: str
    check: Check


def expected_config(schedule: Any) -> dict[str, Any]:
    """The configuration fields ``schedule`` records in every row (not ``d`` and ``upper``, which
    follow the round's ``d``: the adaptive bandit changes it)."""
    return {k: v for k, v in schedule._config_row().items() if k not in ("d", "upper")}


# ----- helpers ------------------------------------------------------------------------------------
def _get(row: dict[str, Any] | None, key: str) -> Any:
    return _MISSING if row is None else row.get(key, _MISSING)


def _known(*values: Any) -> bool:
    return all(v is not _MISSING and v is not None for v in values)


def _same(a: Any, b: Any) -> bool:
    """Equal; numbers to relative 1e-12, lists element by element."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
        return a == b or math.isclose(a, b, rel_tol=_REL, abs_tol=0.0)
    return bool(a == b)


def _near(a: float, b: float, scale: float) -> bool:
    """``a`` and ``b`` agree to 1e-12 of the magnitudes they were computed from."""
    return abs(a - b) <= _REL * (abs(a) + abs(b) + scale)


def _is_gp(row: dict[str, Any]) -> Any:
    """Whether the row is a GP round (``_MISSING`` when it has no ``source``)."""
    source = _get(row, "source")
    return _MISSING if source is _MISSING else source in GP_SOURCES


def _n_ds(row: dict[str, Any]) -> Any:
    """``d_max - d_min + 1``: the ``d``'s the adaptive bandit compares."""
    lo, hi = _get(row, "d_min"), _get(row, "d_max")
    return hi - lo + 1 if _known(lo, hi) else _MISSING


def _in_box(points: list[float], row: dict[str, Any]) -> bool:
    lo, hi = _get(row, "lo"), _get(row, "hi")
    return not _known(lo, hi) or all(lo * (1 - _REL) <= p <= hi * (1 + _REL) for p in points)


def _valid_arm(arm: list[float], row: dict[str, Any], length: Any, *, sort: bool | None = None) -> bool:
    """``length`` (when known) distinct points in the box, sorted when ``sort`` (default: the row's)."""
    ordered = sorted(arm)
    sort = _get(row, "sort") is True if sort is None else sort
    return ((not _known(length) or len(arm) == length) and len(arm) >= 1 and _in_box(arm, row)
            and all(b > a for a, b in zip(ordered, ordered[1:])) and (not sort or list(arm) == ordered))


def _rule(text: str, check: Callable[[Any, dict[str, Any], RowContext], bool]) -> Rule:
    """A rule on the value itself (``check(value, row, context)``)."""
    return Rule(text, lambda key, row, ctx: check(row[key], row, ctx))


def _config(text: str, allowed: Callable[[Any, dict[str, Any]], bool]) -> Rule:
    """A configuration field: ``allowed(value, row)``, the previous row's value, and the schedule's."""
    def check(key: str, row: dict[str, Any], ctx: RowContext) -> bool:
        value, prev, mine = row[key], _get(ctx.prev, key), ctx.expected.get(key, _MISSING)
        return (allowed(value, row) and (prev is _MISSING or _same(value, prev))
                and (mine is _MISSING or _same(value, mine)))
    return Rule(f"{text}; the same in every row, and the schedule's", check)


def _decision(text: str, allowed: Callable[[Any, dict[str, Any], RowContext], bool] = lambda v, r, c: True,
              when: Callable[[dict[str, Any], RowContext], Any] = lambda row, ctx: _is_gp(row),
              on: str = "GP rounds (source gp or corner)") -> Rule:
    """A decision field: set exactly when ``when(row, context)`` (default: on GP rounds), and then
    ``allowed(value, row, context)``."""
    def check(key: str, row: dict[str, Any], ctx: RowContext) -> bool:
        value, wanted = row[key], when(row, ctx)
        return (wanted is _MISSING or (value is not None) == bool(wanted)) and (
            value is None or allowed(value, row, ctx))
    return Rule(f"{text}, set exactly on {on}" if text else f"set exactly on {on}", check)


# ----- the observation ----------------------------------------------------------------------------
def _round(value: int, row: dict[str, Any], ctx: RowContext) -> bool:
    prev = _get(ctx.prev, "round")
    return value == 0 if ctx.prev is None else (prev is _MISSING or value == prev + 1)


def _start_epoch(value: int | None, row: dict[str, Any], ctx: RowContext) -> bool:
    prev_end = _get(ctx.prev, "epoch")
    burn_in = getattr(ctx.schedule, "burn_in", 0)
    return value is None or ((not _known(prev_end) or value == prev_end) and value >= burn_in)


def _epoch(value: int | None, row: dict[str, Any], ctx: RowContext) -> bool:
    start = _get(row, "start_epoch")
    return start is _MISSING or ((value is None) == (start is None) and (value is None or value > start))


def _window(value: int, row: dict[str, Any], ctx: RowContext) -> bool:
    prev = _get(ctx.prev, "window")
    planned = ctx.schedule.window_length(row["round"]) if ctx.schedule is not None and "round" in row else value
    return value >= 1 and (prev is _MISSING or value >= prev) and value == planned


def _length(value: int | None, row: dict[str, Any], ctx: RowContext) -> bool:
    start, end, window = _get(row, "start_epoch"), _get(row, "epoch"), _get(row, "window")
    if end is _MISSING or start is _MISSING:
        return True
    if end is None or start is None:
        return value is None
    late = len(_get(row, "ignored_epochs")) if _known(_get(row, "ignored_epochs")) else math.inf
    return value == end - start and (window is _MISSING or value <= window + late)


def _early(value: bool, row: dict[str, Any], ctx: RowContext) -> bool:
    length, window = _get(row, "length"), _get(row, "window")
    if length is _MISSING or window is _MISSING:
        return True
    return value == (length < window) if length is not None else value is False


def _arm(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    d, chosen = _get(row, "d"), _get(ctx.prev, "next_arm")
    sizes = getattr(ctx.schedule, "arm_sizes", None)
    return (_valid_arm(value, row, d - 1 if _known(d) else _MISSING)
            and (chosen is _MISSING or list(value) == list(chosen)) and (sizes is None or len(value) in sizes))


def _betas(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    arm = _get(row, "arm")
    return arm is _MISSING or list(value) == [0.0, *sorted(arm)]


def _evidence(value: float | None, row: dict[str, Any], ctx: RowContext) -> bool:
    return _get(row, "epoch") is _MISSING or (value is None) == (row["epoch"] is None)


def _evidence_start(value: float | None, row: dict[str, Any], ctx: RowContext) -> bool:
    prev = _get(ctx.prev, "evidence_end")
    return _evidence(value, row, ctx) and (value is None or not _known(prev) or _same(value, prev))


def _reward(value: float, row: dict[str, Any], ctx: RowContext) -> bool:
    skipped = _get(row, "skipped")
    if skipped is not _MISSING and skipped == math.isfinite(value):
        return False
    if not math.isfinite(value):
        return True
    start, end, length, rule = (_get(row, k) for k in ("evidence_start", "evidence_end", "length", "reward_rule"))
    if abs(value) > MAX_ABS_REWARD:
        return False
    if not _known(start, end) or rule not in ("paper", "rate"):
        return True  # the code's reward is a window mean the row does not record
    if rule == "rate":
        return _known(length) and length >= 1 and _near(value * length, end - start, abs(start) + abs(end))
    return _near(value, end - start, abs(start) + abs(end))


def _skipped(value: bool, row: dict[str, Any], ctx: RowContext) -> bool:
    reward, epoch = _get(row, "reward"), _get(row, "epoch")
    return ((reward is _MISSING or value != math.isfinite(reward))
            and (not value or epoch is _MISSING or epoch is None))


def _ignored(value: list[int], row: dict[str, Any], ctx: RowContext) -> bool:
    after, before = _get(ctx.prev, "epoch"), _get(row, "epoch")
    floor = after if _known(after) else getattr(ctx.schedule, "burn_in", 0) - 1
    return (all(b > a for a, b in zip(value, value[1:])) and all(e > floor for e in value)
            and (not _known(before) or all(e < before for e in value)))


ROUND = _rule("0 in the first row, then the previous row's round + 1", _round)
START_EPOCH = _rule("where the previous row's window ended (its epoch), at or after the burn-in", _start_epoch)
EPOCH = _rule("after start_epoch; both set (a window closed by step()) or both empty (by observe())", _epoch)
WINDOW = _rule(">= 1, never below the previous row's, the schedule's planned length for the round", _window)
LENGTH = _rule("epoch - start_epoch, at most window (plus the epochs whose evidence was ignored); empty "
               "when epoch is", _length)
EARLY = _rule("True exactly when the window closed before its planned length (False for observe())", _early)
ARM = _rule("d - 1 distinct points in [lo, hi] (sorted when sort is; a length the schedule allows), the previous "
            "row's next_arm", _arm)
BETAS = _rule("0 followed by the sorted arm", _betas)
EVIDENCE_START = _rule("set exactly when epoch is; the previous row's evidence_end", _evidence_start)
EVIDENCE_END = _rule("set exactly when epoch is", _evidence)
REWARD = _rule("finite and within +-1e6 nats exactly when the round is not skipped; for a window closed by "
               "step(), evidence_end - evidence_start (reward rule paper) or that over length (rate)", _reward)
SKIPPED = _rule("True exactly when the reward is not finite, never for a window closed by step()", _skipped)
IGNORED_EPOCHS = _rule("increasing epochs after the previous row's epoch (at or after the burn-in) and before this "
                       "row's", _ignored)


# ----- the configuration --------------------------------------------------------------------------
def _d(value: int, row: dict[str, Any], ctx: RowContext) -> bool:
    arm, lo, hi, prev = _get(row, "arm"), _get(row, "d_min"), _get(row, "d_max"), _get(ctx.prev, "d")
    sizes = getattr(ctx.schedule, "arm_sizes", None)
    return ((arm is _MISSING or value == len(arm) + 1) and value >= 2
            and (lo if _known(lo) else value) <= value <= (hi if _known(hi) else value)
            and (_known(hi) or prev is _MISSING or value == prev) and (sizes is None or value - 1 in sizes))


def _upper(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    d, lo, hi = _get(row, "d"), _get(row, "lo"), _get(row, "hi")
    if not _known(d, lo, hi):
        return True
    domain = getattr(ctx.schedule, "arm_domain", None)
    forms = [] if domain == "staggered" else [[hi] * (d - 1)]
    if domain != "box" and hi > lo:
        try:
            forms.append(list(staggered_upper(d, lo, hi)))
        except ValueError:
            pass
    return any(_same(list(value), form) for form in forms)


def _coordinate_scale(value: list[float], row: dict[str, Any]) -> bool:
    lo, upper = _get(row, "lo"), _get(row, "upper")
    if not _known(lo, upper):
        return True
    try:
        return _same(list(value), list(coordinate_scale(lo, upper)))
    except ValueError:
        return False


def _guard_arms(value: list[list[float]] | None, row: dict[str, Any]) -> bool:
    guards, lo, hi = _get(row, "corner_guards"), _get(row, "lo"), _get(row, "hi")
    if value is None:
        return guards is not True
    if guards is False or len(value) != 2:
        return False
    low, high = value
    n = _get(row, "d_max") if _known(_get(row, "d_max")) else _get(row, "d")
    return ((not _known(n) or len(low) == len(high) == n - 1) and len(set(high)) == 1
            and (not _known(lo) or all(_same(p, lo) for p in low))
            and (not _known(hi) or hi * (1 - _REL) <= high[0]) and high[0] < 1)


D = _rule("len(arm) + 1, in [d_min, d_max] when they are recorded (else the same in every row), a d the "
          "schedule allows", _d)
LO = _config("in (0, hi)", lambda v, row: 0 < v and (_get(row, "hi") is _MISSING or v < row["hi"]))
HI = _config("in (lo, 1)", lambda v, row: v < 1)
UPPER = _rule("the arm domain's upper bounds for d: d - 1 values, all hi (a box) or the staggered hi k / (d - 1) "
              "(the schedule's domain)", _upper)
SORT = _config("True for the adaptive bandit", lambda v, row: v is True or _get(row, "d_max") is _MISSING)
TIME_VARYING = _config("True or False", lambda v, row: True)
MAX_OBSERVATIONS = _config("empty (all rewards) or an int >= 1", lambda v, row: v is None or v >= 1)
REWARD_RULE = _config(f"one of {', '.join(REWARD_RULES)}", lambda v, row: v in REWARD_RULES)
PROTOCOL = _config(f"one of {', '.join(PROTOCOLS)}", lambda v, row: v in PROTOCOLS)
CORNER_GUARDS = _config("True or False", lambda v, row: True)
STANDARDIZE = _config("robust or global", lambda v, row: v in ("robust", "global"))
COORDINATE_SCALE = _config("coordinate_scale(lo, upper): the GP's stretch of each coordinate", _coordinate_scale)
TREND = _config("True or False", lambda v, row: True)
GUARD_ARMS = _config("empty without corner guards; with them two arms of d - 1 points (d_max - 1 for the "
                     "adaptive bandit), every point on lo, then every point on the box's upper bound", _guard_arms)
D_MIN = _config("2 <= d_min < d_max", lambda v, row: 2 <= v and (_get(row, "d_max") is _MISSING or v < row["d_max"]))
D_MAX = _config("d_max > d_min", lambda v, row: v >= 3)


# ----- the decision -------------------------------------------------------------------------------
def _source(value: str, row: dict[str, Any], ctx: RowContext) -> bool:
    if value not in SOURCES or (value == "corner" and _get(row, "corner_guards") is False):
        return False
    if value == "random" and _get(ctx.prev, "source") in GP_SOURCES:
        return False
    schedule = ctx.schedule
    if schedule is None:
        return True
    cap = getattr(schedule, "max_observations", None)
    kept = len(ctx.observed) if cap is None else min(len(ctx.observed), cap)
    if hasattr(schedule, "random_round"):  # a schedule with its own rule (the integrand bandit's)
        return (value == "random") == schedule.random_round(row, kept)
    n_init = getattr(schedule, "n_init", None)
    if n_init is None:  # random search: every round is random
        return value == "random"
    return (value == "random") == (kept < n_init)


def _kept(row: dict[str, Any], ctx: RowContext) -> tuple[int, ...]:
    """The rounds of the observations the GP kept (the last ``max_observations`` finite rewards)."""
    cap = _get(row, "max_observations")
    return ctx.observed if not _known(cap) else ctx.observed[-cap:]


def _gp_with_trend(row: dict[str, Any], ctx: RowContext) -> Any:
    gp, trend = _is_gp(row), _get(row, "trend")
    if gp is False:
        return False
    return _MISSING if gp is _MISSING or trend is _MISSING else trend is True


def _kappa(value: float, row: dict[str, Any], ctx: RowContext) -> bool:
    schedule, n_obs = ctx.schedule, _get(row, "n_obs")
    if value < 0 or schedule is None or not hasattr(schedule, "current_kappa") or not _known(n_obs):
        return value >= 0
    return _same(value, schedule.current_kappa(row["round"] + 1, n_obs))


def _omega(value: float, row: dict[str, Any], ctx: RowContext) -> bool:
    varying, rho = _get(row, "time_varying"), _get(row, "rho")
    if not 0 <= value < 1:
        return False
    if varying is False:
        return value == 0.0
    return not _known(rho) or _same(value, -math.expm1(-rho))


def _acq_value(value: float, row: dict[str, Any], ctx: RowContext) -> bool:
    """On a GP round of the adaptive bandit that dropped no point, the chosen ``d``'s best value."""
    by_d, d, lo = _get(row, "acq_by_d"), _get(row, "next_d"), _get(row, "d_min")
    if row.get("source") != "gp" or row.get("points_dropped") != 0 or not _known(by_d, d, lo):
        return True
    return 0 <= d - lo < len(by_d) and _same(value, by_d[d - lo])


def _d_draws(row: dict[str, Any], ctx: RowContext) -> Any:
    choice = getattr(ctx.schedule, "d_choice", None)
    gp = _is_gp(row)
    if choice is None or gp is _MISSING:
        return _MISSING if gp is not False else False
    return gp and choice == "thompson"


def _draws(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    """One draw per ``d``; on a GP round the next ``d`` is the largest draw's."""
    n, d, lo = _n_ds(row), _get(row, "next_d"), _get(row, "d_min")
    if _known(n) and len(value) != n:
        return False
    return row.get("source") != "gp" or not _known(d, lo) or d - lo == value.index(max(value))


def _per_d(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    n = _n_ds(row)
    return not _known(n) or len(value) == n


def _recommended_arm(row: dict[str, Any], ctx: RowContext) -> Any:
    d = _get(row, "recommended_d")
    return _MISSING if d is _MISSING else d is not None


def _recommendation(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    d = _get(row, "recommended_d")
    return _valid_arm(value, row, d - 1 if _known(d) else _MISSING, sort=True)


def _in_range(value: int, row: dict[str, Any], ctx: RowContext) -> bool:
    lo, hi = _get(row, "d_min"), _get(row, "d_max")
    return not _known(lo, hi) or lo <= value <= hi


SOURCE = _rule(f"one of {', '.join(SOURCES)} (corner only with corner guards), never random after a GP round; "
               "random exactly while the GP keeps fewer than the schedule's n_init rewards", _source)
LENGTHSCALE = _decision("> 0", lambda v, r, c: v > 0)
OMEGA = _decision("in [0, 1): 1 - exp(-rho), 0 when not time-varying", _omega)
RHO = _decision(">= 0", lambda v, r, c: v >= 0)
NOISE = _decision("> 0", lambda v, r, c: v > 0)
TREND_SHARE = _decision("in [0, 1)", lambda v, r, c: 0 <= v < 1, when=_gp_with_trend, on="GP rounds with a trend")
TREND_LENGTHSCALE = _decision("> 0", lambda v, r, c: v > 0, when=_gp_with_trend, on="GP rounds with a trend")
KAPPA = _decision(">= 0, the schedule's exploration weight for the round and n_obs", _kappa)
ACQ_VALUE = _decision("finite; the chosen d's acq_by_d on a GP round that dropped no point", _acq_value)
SECONDS = _decision(">= 0", lambda v, r, c: v >= 0)
SET_ON_GP = _decision("")
N_OBS = _decision("the finite, not skipped rewards of rounds 0..round, at most max_observations of them",
                  lambda v, r, c: v == len(_kept(r, c)))
N_DROPPED = _decision("<= n_obs, 0 under global standardisation",
                      lambda v, r, c: (not _known(_get(r, "n_obs")) or v <= r["n_obs"])
                      and (v == 0 or _get(r, "standardize") != "global"))
T_ORIGIN = _decision("the round of the oldest reward the GP keeps",
                     lambda v, r, c: not _kept(r, c) or v == _kept(r, c)[0])
T_PRED = _decision("round + 1 (the round whose arm is chosen)", lambda v, r, c: v == r["round"] + 1)
Y_STD = _decision("> 0", lambda v, r, c: v > 0)
PER_D = _decision("one value per d in [d_min, d_max]", _per_d)
SDS_BY_D = _decision("one value >= 0 per d in [d_min, d_max]", lambda v, r, c: _per_d(v, r, c) and min(v) >= 0)
D_DRAWS = _decision("one draw per d in [d_min, d_max], the next d the largest's on a GP round", _draws,
                    when=_d_draws, on="GP rounds under Thompson sampling (d_choice='thompson')")
POINTS_DROPPED = _decision("in [0, d_max - d_min], 0 under Thompson sampling (d_draws set)",
                           lambda v, r, c: (not _known(_n_ds(r)) or v < _n_ds(r))
                           and (v == 0 or _get(r, "d_draws") is None))
RECOMMENDED_D = _decision("in [d_min, d_max]", _in_range)
KNOWN = _rule("empty, or the arm's predicted bias change in nats (the integrand bandit, once it has read an "
              "integrand)", lambda v, r, c: True)
INTEGRAND = _rule("empty, or the integrand the integrand bandit used, on its grid (at least 0 and 1)",
                  lambda v, r, c: v is None or len(v) >= 2)
COEFFICIENT = _decision("set on the integrand bandit's GP rounds (with an integrand)", lambda v, r, c: True,
                        when=lambda r, c: _is_gp(r) if _get(r, "integrand") is not None else False,
                        on="GP rounds with an integrand")
RECOMMENDED_ARM = _decision("recommended_d - 1 increasing points in [lo, hi]", _recommendation,
                            when=_recommended_arm, on="rounds with a recommended_d")


# ----- the next arm -------------------------------------------------------------------------------
def _next_arm(value: list[float], row: dict[str, Any], ctx: RowContext) -> bool:
    d = _get(row, "next_d") if _known(_get(row, "next_d")) else _get(row, "d")
    if _known(_get(row, "d_max")) and not _known(_get(row, "next_d")):
        d = _MISSING  # the adaptive bandit's next d is its own column
    sizes = getattr(ctx.schedule, "arm_sizes", None)
    return _valid_arm(value, row, d - 1 if _known(d) else _MISSING) and (sizes is None or len(value) in sizes)


def _next_d(value: int, row: dict[str, Any], ctx: RowContext) -> bool:
    arm = _get(row, "next_arm")
    return (arm is _MISSING or value == len(arm) + 1) and _in_range(value, row, ctx)


def _degeneracy(key: str, row: dict[str, Any], ctx: RowContext) -> bool:
    """The recorded measure equals :func:`arm_degeneracy`'s (its edge test at 1e-3 taken either side of
    a last-digit difference in ``lo`` or ``hi``, as a CSV read back may have)."""
    arm, lo, hi = _get(row, "next_arm"), _get(row, "lo"), _get(row, "hi")
    if not _known(arm, lo, hi) or not arm:
        return True
    name = key.removeprefix("next_")
    values = [arm_degeneracy(arm, lo, hi, edge_tol=1e-3 * (1 + s * 1e-9))[name] for s in (-1, 1)]
    value = row[key]
    if name == "on_edge":
        return values[0] <= value <= values[1]
    return any(_same(value, v) if v is not None else value is None for v in values)


NEXT_ARM = _rule("d - 1 distinct points in [lo, hi] (next_d - 1 for the adaptive bandit; sorted when sort is)",
                 _next_arm)
NEXT_D = _rule("len(next_arm) + 1, in [d_min, d_max]", _next_d)
DEGENERACY = Rule("arm_degeneracy(next_arm, lo, hi)'s value", _degeneracy)
