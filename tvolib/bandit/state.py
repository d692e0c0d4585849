"""Checking a saved bandit state before anything is restored: every key, the window, each history row.

A state that does not fit the schedule (another format or configuration, an arm outside the box or
unsorted, a non-finite or huge reward or evidence, a history field of the wrong kind or against its
value rule, rounds that do not follow one another, a bad generator state) raises a ``ValueError``
naming the key, so a damaged checkpoint never reaches the GP.

The history's columns, what each holds and the rule its values follow are one table,
:data:`HISTORY_FIELDS` (column -> kind of :data:`FIELD_KINDS` and a rule of
:mod:`tvolib.bandit.rules`); :func:`parse_history` reads rows of any origin (``Schedule.history()``,
a checkpoint, a CSV read back) as their kinds, naming the row and column of a bad cell, and
:func:`check_history` checks every value by its rule (wherever records are read: a saved state, the
runs' done check, ``replay``, ``reward_posterior``).

Example:
    >>> parse_history([{"round": 0, "arm": "[0.1, 0.5]", "n_obs": float("nan"), "skipped": "False"}])
    [{'round': 0, 'arm': [0.1, 0.5], 'n_obs': None, 'skipped': False}]
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import torch

from ..checks import check_state, plain_value
from . import rules as R
from .rules import MAX_ABS_REWARD, Rule, RowContext, expected_config

__all__ = [
    "FIELD_KINDS", "HISTORY_FIELDS", "MAX_ABS_EVIDENCE", "MAX_ABS_REWARD", "STATE_VERSION", "Field", "check_history", "check_history_sequence",
    "check_state_dict", "history_field", "parse_history",
]

#: Format of :meth:`BanditScheduleBase.state_dict`: format 1 predates reward revision 2; format 3
#: adds the protocol items (:mod:`tvolib.bandit.protocol`) to the saved configuration.
STATE_VERSION = 3
#: Largest magnitude of a reported evidence (a log-evidence per example, in nats): a reward, the
#: difference of two window values, then stays within :data:`MAX_ABS_REWARD`.
MAX_ABS_EVIDENCE = MAX_ABS_REWARD / 2

#: What a history column of each kind holds (``?``: or None, which a CSV reads back as an empty cell).
FIELD_KINDS: dict[str, str] = {
    "int": "an int >= 0",
    "int?": "None or an int >= 0",
    "float": "a finite number",
    "float?": "None or a finite number",
    "evidence?": f"None or a finite number within +-{MAX_ABS_EVIDENCE:.0e} nats",
    "number": "a number",
    "bool": "True or False",
    "bool?": "None, True or False",
    "str": "a string",
    "vector": "a list of finite numbers",
    "vector?": "None or a list of finite numbers",
    "vectors?": "None or a list of lists of finite numbers",
    "ints": "a list of ints >= 0",
}

class Field(NamedTuple):
    """A history column: its ``kind`` (a key of :data:`FIELD_KINDS`) and the :class:`~tvolib.bandit.rules.Rule`
    its values follow."""

    kind: str
    rule: Rule


#: Every column of :meth:`~tvolib.bandit.base.BanditScheduleBase.history`: its kind and its value
#: rule (:mod:`tvolib.bandit.rules`; a new column is one line here). Columns a row lacks are not
#: required by this table; columns it does not name pass unchecked. Rules are checked in this order
#: (the configuration first, so that a bad value is blamed rather than the fields that depend on it).
HISTORY_FIELDS: dict[str, Field] = {
    # the configuration
    "d_min": Field("int", R.D_MIN), "d_max": Field("int", R.D_MAX),  # AdaptiveDBanditSchedule's range
    "d": Field("int", R.D), "lo": Field("float", R.LO), "hi": Field("float", R.HI), "upper": Field("vector", R.UPPER),
    "sort": Field("bool", R.SORT), "time_varying": Field("bool", R.TIME_VARYING),
    "max_observations": Field("int?", R.MAX_OBSERVATIONS), "reward_rule": Field("str", R.REWARD_RULE),
    "protocol": Field("str", R.PROTOCOL), "corner_guards": Field("bool", R.CORNER_GUARDS),
    "standardize": Field("str", R.STANDARDIZE), "coordinate_scale": Field("vector", R.COORDINATE_SCALE),
    "trend": Field("bool", R.TREND), "guard_arms": Field("vectors?", R.GUARD_ARMS),
    # the observation
    "round": Field("int", R.ROUND), "epoch": Field("int?", R.EPOCH), "start_epoch": Field("int?", R.START_EPOCH),
    "window": Field("int", R.WINDOW), "length": Field("int?", R.LENGTH), "early": Field("bool", R.EARLY),
    "arm": Field("vector", R.ARM), "betas": Field("vector", R.BETAS),
    "evidence_start": Field("evidence?", R.EVIDENCE_START), "evidence_end": Field("evidence?", R.EVIDENCE_END),
    "reward": Field("number", R.REWARD), "skipped": Field("bool", R.SKIPPED),
    "ignored_epochs": Field("ints", R.IGNORED_EPOCHS),
    # the decision (what the GP saw first: the rules of the others refer to it)
    "source": Field("str", R.SOURCE), "next_d": Field("int", R.NEXT_D), "n_obs": Field("int?", R.N_OBS),
    "n_dropped": Field("int?", R.N_DROPPED), "t_origin": Field("int?", R.T_ORIGIN), "t_pred": Field("int?", R.T_PRED),
    "y_mean": Field("float?", R.SET_ON_GP), "y_std": Field("float?", R.Y_STD), "lengthscale": Field("float?", R.LENGTHSCALE),
    "rho": Field("float?", R.RHO), "omega": Field("float?", R.OMEGA), "noise": Field("float?", R.NOISE),
    "trend_share": Field("float?", R.TREND_SHARE), "trend_lengthscale": Field("float?", R.TREND_LENGTHSCALE),
    "kappa": Field("float?", R.KAPPA), "acq_value": Field("float?", R.ACQ_VALUE),
    "fit_seconds": Field("float?", R.SECONDS), "acq_seconds": Field("float?", R.SECONDS),
    "fit_ok": Field("bool?", R.SET_ON_GP), "fit_evals": Field("int?", R.SET_ON_GP),
    # the adaptive bandit's decision and recommendation
    "acq_by_d": Field("vector?", R.PER_D), "d_draws": Field("vector?", R.D_DRAWS),
    "points_dropped": Field("int?", R.POINTS_DROPPED), "recommended_d": Field("int?", R.RECOMMENDED_D),
    "recommended_arm": Field("vector?", R.RECOMMENDED_ARM), "mean_by_d": Field("vector?", R.PER_D),
    "sd_by_d": Field("vector?", R.SDS_BY_D), "gap_sd_by_d": Field("vector?", R.SDS_BY_D),
    # the integrand bandit's known part (tvolib.bandit.integrand_bandit)
    "known": Field("float?", R.KNOWN), "integrand": Field("vector?", R.INTEGRAND),
    "coefficient": Field("float?", R.COEFFICIENT), "coefficient_sd": Field("float?", R.COEFFICIENT),
    # the next arm
    "next_arm": Field("vector", R.NEXT_ARM),
    "next_spread": Field("float", R.DEGENERACY), "next_min_gap": Field("float?", R.DEGENERACY),
    "next_on_edge": Field("int", R.DEGENERACY), "next_degenerate": Field("bool", R.DEGENERACY),
}

_STATE_KEYS = (
    "version", "config", "round", "arm", "last_epoch", "start_epoch", "start_evidence",
    "window_evidence", "prev_window_mean", "ignored_epochs", "generator", "history",
)

_INVALID = object()


def _missing(value: Any) -> bool:
    """None, or the NaN of an empty CSV cell."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _as_float(value: Any) -> Any:
    """A real number (not bool) as a float (an int beyond float range: +-inf), else :data:`_INVALID`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _INVALID
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _as_int(value: Any) -> Any:
    """An int >= 0 (an integral float too, as a CSV column with empty cells reads back), else :data:`_INVALID`."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else _INVALID


def _as_list(value: Any, item: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str):  # a NumPy array or a tensor
        value = value.tolist()
    if isinstance(value, str):  # a CSV cell
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return _INVALID
    if not isinstance(value, (list, tuple)):
        return _INVALID
    items = [item(v) for v in plain_value(list(value))]
    return _INVALID if any(v is _INVALID for v in items) else items


def _as_finite(value: Any, bound: float = math.inf) -> Any:
    out = _as_float(value)
    return out if out is not _INVALID and math.isfinite(out) and abs(out) <= bound else _INVALID


def _as_bool(value: Any) -> Any:
    if isinstance(value, str) and value.strip() in ("True", "False"):  # a CSV cell read as text
        return value.strip() == "True"
    return value if isinstance(value, bool) else _INVALID


_PARSERS = {
    "int": _as_int,
    "float": _as_finite,
    "evidence": lambda v: _as_finite(v, MAX_ABS_EVIDENCE),
    "number": _as_float,
    "bool": _as_bool,
    "str": lambda v: v if isinstance(v, str) else _INVALID,
    "vector": lambda v: _as_list(v, _as_finite),
    "vectors": lambda v: _as_list(v, lambda row: _as_list(row, _as_finite)),
    "ints": lambda v: _as_list(v, _as_int),
}


def history_field(kind: str, value: Any, *, strict: bool = False) -> Any:
    """``value`` of a history column of ``kind`` (:data:`FIELD_KINDS`) as a plain Python value.

    Accepts what a schedule records and, unless ``strict`` (a saved state), what a CSV reads back:
    ``NaN`` for an empty cell of an optional column, an integral float in an int column with empty
    cells, JSON text for a list, ``"True"``/``"False"``. NumPy numbers are accepted either way.

    Raises:
        ValueError: ``value`` is not of ``kind`` (the message says what is accepted).
    """
    value = plain_value(value)
    if kind.endswith("?") and (value is None or (not strict and _missing(value))):
        return None
    text = isinstance(value, str) and kind != "str"  # a CSV cell's spelling: no state holds it
    out = _INVALID if strict and (text or (kind.startswith("int") and isinstance(value, float))) \
        else _PARSERS[kind.rstrip("?")](value)
    if out is _INVALID:
        raise ValueError(f"must be {FIELD_KINDS[kind]}; got {value!r:.200}")
    return out


def parse_history(rows: Iterable[dict[str, Any]], *, source: str = "history",
                  required: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Bandit history rows with every column of :data:`HISTORY_FIELDS` read as its kind.

    Args:
        rows: dicts (``Schedule.history()``, ``DataFrame.to_dict("records")`` of a CSV read back).
        source: what the rows are, for messages (e.g. ``"schedule_history.csv"``).
        required: columns every row must have.

    Returns:
        New dicts, known columns parsed, other columns as they were.

    Raises:
        ValueError: naming the row (its position and round), the column, what it holds and what is
            accepted.
    """
    out = []
    for i, row in enumerate(rows):
        where = f"{source} row {i}" + (f" (round {row['round']!r})" if "round" in row else "")
        missing = [k for k in required if k not in row]
        if missing:
            raise ValueError(f"{where} has no column(s) {missing}; columns found: {sorted(map(str, row))}")
        parsed = dict(row)
        for key, value in row.items():
            if key in HISTORY_FIELDS:
                try:
                    parsed[key] = history_field(HISTORY_FIELDS[key].kind, value)
                except ValueError as exc:
                    raise ValueError(f"{where} column {key!r} {exc}") from None
        out.append(parsed)
    return out


def check_history_sequence(rows: Sequence[dict[str, Any]], *, source: str = "history") -> None:
    """Rows read by :func:`parse_history` are one run's rounds ``0..n-1`` in order, each round's arm is
    the previous round's ``next_arm``, and a reward is non-finite exactly when its round is ``skipped``.

    Raises:
        ValueError: naming the row or round and what disagrees.
    """
    for i, row in enumerate(rows):
        if row["round"] != i:
            raise ValueError(f"{source} row {i} holds round {row['round']}: the rows must be the rounds "
                             f"0..{len(rows) - 1} in order (rows swapped, repeated or missing?)")
        if "skipped" in row and row["skipped"] == math.isfinite(row["reward"]):
            raise ValueError(f"{source} round {i}: reward {row['reward']!r} with skipped={row['skipped']}: a round "
                             "is skipped exactly when its reward is not finite (an edited reward?)")
    for prev, row in zip(rows, rows[1:]):
        if "next_arm" in prev and row["arm"] != prev["next_arm"]:
            raise ValueError(f"{source} round {row['round']}: its arm {row['arm']} is not round {prev['round']}'s "
                             f"next_arm {prev['next_arm']}: the rows do not follow one another (edited, or "
                             "from another run?)")


def check_history(rows: Sequence[dict[str, Any]], schedule: Any = None, *, source: str = "history") -> None:
    """Every field of rows read as their kinds (:func:`parse_history`, or a saved state's) follows its
    value rule (:data:`HISTORY_FIELDS`, :mod:`tvolib.bandit.rules`): its range and its relations to
    the row's other fields, to the previous row and, given ``schedule``, to the schedule's
    configuration.

    Args:
        rows: one run's rounds in order.
        schedule: the schedule the rows must fit (its configuration, not its state), or ``None``.
        source: what the rows are, for messages.

    Raises:
        ValueError: naming the first row (position and round), column and value that break a rule,
            and the rule.

    Example:
        >>> check_history([{"round": 0, "source": "alien"}], source="schedule_history.csv")
        Traceback (most recent call last):
        ...
        ValueError: schedule_history.csv row 0 (round 0) column 'source' is 'alien', against its rule: one of random, \
gp, corner (corner only with corner guards), never random after a GP round; random exactly while the GP keeps fewer \
than the schedule's n_init rewards
    """
    expected = expected_config(schedule) if schedule is not None else {}
    prev, observed = None, []
    for i, row in enumerate(rows):
        reward = row.get("reward")
        if isinstance(reward, (int, float)) and math.isfinite(reward) and not row.get("skipped"):
            observed.append(row.get("round", i))
        ctx = RowContext(prev, tuple(observed), schedule, expected)
        for key, field in HISTORY_FIELDS.items():
            if key not in row:
                continue
            try:
                ok = field.rule.check(key, row, ctx)
            except (TypeError, ValueError, IndexError, KeyError, AttributeError):
                ok = False  # e.g. a length that indexes past a list: the values do not fit together
            if not ok:
                where = f"{source} row {i}" + (f" (round {row['round']!r})" if "round" in row else "")
                raise ValueError(f"{where} column {key!r} is {row[key]!r:.120}, against its rule: {field.rule.text}")
        prev = row


def _bad(owner: str, key: str, expected: str, value: Any) -> ValueError:
    return ValueError(f"{owner} state key {key!r} must be {expected}; got {value!r:.200}")


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_finite(value: Any, bound: float = math.inf) -> bool:
    return _as_finite(value, bound) is not _INVALID


def check_state_dict(schedule: Any, state: Any) -> None:
    """Raise a ``ValueError`` naming the first invalid key of a bandit ``state`` (see ``load_state_dict``)."""
    owner = type(schedule).__name__
    check_state(state, ["version"], owner)
    if state["version"] != STATE_VERSION:
        raise ValueError(
            f"{owner} state key 'version' is {state['version']!r}, this code reads format {STATE_VERSION} "
            f"(reward revision {schedule.REVISION}); restart the run from scratch"
        )
    check_state(state, _STATE_KEYS, owner)
    mine, theirs = schedule._config(), state["config"]
    if not isinstance(theirs, dict):
        raise _bad(owner, "config", "a dict", theirs)
    if mine != theirs:
        diff = {k: (theirs.get(k), mine.get(k)) for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
        raise ValueError(f"state was saved by a differently configured schedule (saved, this): {diff}")
    _check_arm(schedule, owner, state["arm"])
    _check_window(owner, state)
    history, n_rounds = state["history"], state["round"]
    if not _is_int(n_rounds):
        raise _bad(owner, "round", "an int >= 0", n_rounds)
    if not (isinstance(history, list) and len(history) == n_rounds
            and all(isinstance(r, dict) and r.get("round") == k for k, r in enumerate(history))):
        raise _bad(owner, "history", f"a list of {n_rounds} round records numbered 0..{n_rounds - 1}", history)
    for row in history:
        _check_history_row(schedule, owner, row)
    _check_rounds(schedule, owner, state)
    check_history(history, schedule, source=f"{owner} state key 'history'")
    try:
        torch.Generator().set_state(state["generator"])
    except (TypeError, RuntimeError) as exc:
        raise _bad(owner, "generator", "a torch.Generator state (uint8 tensor)", state["generator"]) from exc


def _check_arm(schedule: Any, owner: str, arm: Any, key: str = "arm") -> None:
    sizes = schedule.arm_sizes
    count = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    expected = f"a list of {count} distinct finite numbers in [{schedule.lo}, {schedule.hi}]"
    if not (isinstance(arm, (list, tuple)) and len(arm) in sizes and all(map(_is_finite, arm))):
        raise _bad(owner, key, expected, arm)
    ordered = sorted(float(v) for v in arm)
    inside = schedule.lo <= ordered[0] and ordered[-1] <= schedule.hi
    if not inside or any(b <= a for a, b in zip(ordered, ordered[1:])):
        raise _bad(owner, key, expected, arm)
    if schedule.sort_arms and list(arm) != ordered:
        raise _bad(owner, key, "sorted (this schedule records sorted arms)", arm)


def _check_history_row(schedule: Any, owner: str, row: dict[str, Any]) -> None:
    """A saved round is complete (round, arm, reward, skipped), every field is of its kind
    (:data:`HISTORY_FIELDS`), its arm lies in the box and its reward is finite and at most
    :data:`MAX_ABS_REWARD` in magnitude (or the round is skipped)."""
    where = f"history[{row['round']}]"
    missing = [k for k in ("arm", "reward", "skipped", "next_arm") if k not in row]
    if missing:
        raise _bad(owner, where, f"a round record with keys round, arm, reward, skipped, next_arm (missing {missing})", row)
    _check_arm(schedule, owner, row["arm"], key=f"{where}.arm")
    _check_arm(schedule, owner, row["next_arm"], key=f"{where}.next_arm")
    for key, value in row.items():
        kind = HISTORY_FIELDS[key].kind if key in HISTORY_FIELDS else None
        if kind is not None:
            try:
                history_field(kind, value, strict=True)
            except ValueError:
                raise _bad(owner, f"{where}.{key}", FIELD_KINDS[kind], value) from None
    reward, skipped = _as_float(row["reward"]), row["skipped"]
    if not skipped and not (math.isfinite(reward) and abs(reward) <= MAX_ABS_REWARD):
        raise _bad(owner, f"{where}.reward", f"a finite number within +-{MAX_ABS_REWARD:g} nats (or the round "
                   "marked skipped)", row["reward"])


def _check_rounds(schedule: Any, owner: str, state: dict[str, Any]) -> None:
    """The rounds follow one another: each round's arm is the previous round's ``next_arm`` and the
    arm trained now the last one's; each window has the planned length (shorter only when closed
    early) and starts where the previous one ended; the open window starts where the last ended."""
    history = state["history"]
    for prev, row in zip(history, history[1:]):
        if list(row["arm"]) != list(prev["next_arm"]):
            raise ValueError(f"{owner} state key 'history[{row['round']}].arm' is {row['arm']}, but round "
                             f"{prev['round']} chose next_arm {prev['next_arm']}: the rounds do not follow one "
                             "another (an edited or spliced history)")
    if history and list(state["arm"]) != list(history[-1]["next_arm"]):
        raise ValueError(f"{owner} state key 'arm' is {state['arm']}, but round {history[-1]['round']} chose "
                         f"next_arm {history[-1]['next_arm']}: the run would train an arm the bandit never chose")
    for prev, row in zip([None, *history], history):
        _check_row_window(schedule, owner, prev, row)
    last = history[-1] if history else None
    if last is not None and last.get("epoch") is not None and state["start_epoch"] != last["epoch"]:
        raise ValueError(f"{owner} state key 'start_epoch' is {state['start_epoch']}, but the last recorded round "
                         f"({last['round']}) ended at epoch {last['epoch']}: the open window starts where the last "
                         "round ended (rounds cut from the history, or its round counter edited?)")


def _check_row_window(schedule: Any, owner: str, prev: dict[str, Any] | None, row: dict[str, Any]) -> None:
    """Round ``row``'s window: planned length, its epochs, and its start at the previous round's end."""
    key = f"history[{row['round']}]"
    planned = schedule.window_length(row["round"])
    if "window" in row and row["window"] != planned:
        raise ValueError(f"{owner} state key '{key}.window' is {row['window']}, but this schedule plans {planned} "
                         f"epochs for round {row['round']}")
    start, end = row.get("start_epoch"), row.get("epoch")
    if start is None or end is None:
        return  # a round closed by observe()
    if prev is not None and prev.get("epoch") is not None and start != prev["epoch"]:
        raise ValueError(f"{owner} state key '{key}.start_epoch' is {start}, but round {prev['round']} ended at "
                         f"epoch {prev['epoch']}: each window starts where the previous one ended")
    length = end - start
    if length < 1 or row.get("length", length) != length:
        raise ValueError(f"{owner} state key '{key}' spans epochs {start}..{end} with length {row.get('length')!r}: "
                         "a window ends after it starts and its length is the difference")
    if bool(row.get("early")) != (length < planned):
        raise ValueError(f"{owner} state key '{key}.early' is {row.get('early')!r} for a window of {length} of "
                         f"{planned} planned epochs: only an early update closes a window before it is due")


def _check_window(owner: str, state: dict[str, Any]) -> None:
    last, start, start_value = state["last_epoch"], state["start_epoch"], state["start_evidence"]
    within = f"within +-{MAX_ABS_EVIDENCE:.0e} nats"
    if last is not None and not _is_int(last):
        raise _bad(owner, "last_epoch", "None or an int >= 0", last)
    if start is not None and not (_is_int(start) and last is not None and start <= last):
        raise _bad(owner, "start_epoch", f"None or an int in [0, last_epoch={last}]", start)
    if (start is None) != (start_value is None) or (start_value is not None
                                                     and not _is_finite(start_value, MAX_ABS_EVIDENCE)):
        raise _bad(owner, "start_evidence", f"a finite number {within} when start_epoch is set, else None",
                   start_value)
    values = state["window_evidence"]
    if not (isinstance(values, list) and all(_is_finite(v, MAX_ABS_EVIDENCE) for v in values)):
        raise _bad(owner, "window_evidence", f"a list of finite numbers {within}", values)
    mean = state["prev_window_mean"]
    if mean is not None and not _is_finite(mean, MAX_ABS_EVIDENCE):
        raise _bad(owner, "prev_window_mean", f"None or a finite number {within}", mean)
    ignored = state["ignored_epochs"]
    if not (isinstance(ignored, list) and all(map(_is_int, ignored))):
        raise _bad(owner, "ignored_epochs", "a list of ints >= 0", ignored)
