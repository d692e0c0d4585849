"""Checking a saved bandit state before anything is restored: every key, the window, each history row.

A state that does not fit the schedule (another format or configuration, an arm outside the box or
unsorted, a non-finite or huge reward, an incomplete history row, a bad generator state) raises a
``ValueError`` naming the key, so a damaged checkpoint never reaches the GP.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from ..checks import check_state

__all__ = ["MAX_ABS_REWARD", "STATE_VERSION", "check_state_dict"]

#: Format of :meth:`BanditScheduleBase.state_dict`: format 1 predates reward revision 2; format 3
#: adds the protocol items (:mod:`tvolib.bandit.protocol`) to the saved configuration.
STATE_VERSION = 3
#: Largest reward magnitude a saved history may hold (a change of log-evidence in nats; a real
#: window changes it by at most a few thousand).
MAX_ABS_REWARD = 1e6

_STATE_KEYS = (
    "version", "config", "round", "arm", "last_epoch", "start_epoch", "start_evidence",
    "window_evidence", "prev_window_mean", "ignored_epochs", "generator", "history",
)



def _bad(owner: str, key: str, expected: str, value: Any) -> ValueError:
    return ValueError(f"{owner} state key {key!r} must be {expected}; got {value!r:.200}")


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
    try:
        torch.Generator().set_state(state["generator"])
    except (TypeError, RuntimeError) as exc:
        raise _bad(owner, "generator", "a torch.Generator state (uint8 tensor)", state["generator"]) from exc


def _check_arm(schedule: Any, owner: str, arm: Any, key: str = "arm") -> None:
    expected = f"a list of {schedule.n_arm} distinct finite numbers in [{schedule.lo}, {schedule.hi}]"
    if not (isinstance(arm, (list, tuple)) and len(arm) == schedule.n_arm and all(map(_is_finite, arm))):
        raise _bad(owner, key, expected, arm)
    ordered = sorted(float(v) for v in arm)
    inside = schedule.lo <= ordered[0] and ordered[-1] <= schedule.hi
    if not inside or any(b <= a for a, b in zip(ordered, ordered[1:])):
        raise _bad(owner, key, expected, arm)
    if schedule.sort_arms and list(arm) != ordered:
        raise _bad(owner, key, "sorted (this schedule records sorted arms)", arm)


def _check_history_row(schedule: Any, owner: str, row: dict[str, Any]) -> None:
    """A saved round is complete (round, arm, reward, skipped), its arm lies in the box and its
    reward is finite and at most :data:`MAX_ABS_REWARD` in magnitude (or the round is skipped)."""
    where = f"history[{row['round']}]"
    missing = [k for k in ("arm", "reward", "skipped", "next_arm") if k not in row]
    if missing:
        raise _bad(owner, where, f"a round record with keys round, arm, reward, skipped, next_arm (missing {missing})", row)
    _check_arm(schedule, owner, row["arm"], key=f"{where}.arm")
    _check_arm(schedule, owner, row["next_arm"], key=f"{where}.next_arm")
    reward, skipped = row["reward"], row["skipped"]
    if not isinstance(skipped, bool):
        raise _bad(owner, f"{where}.skipped", "True or False", skipped)
    if not isinstance(reward, (int, float)) or isinstance(reward, bool):
        raise _bad(owner, f"{where}.reward", "a number", reward)
    if not skipped and not (math.isfinite(reward) and abs(reward) <= MAX_ABS_REWARD):
        raise _bad(owner, f"{where}.reward", f"a finite number within +-{MAX_ABS_REWARD:g} nats (or the round "
                   "marked skipped)", reward)


def _check_window(owner: str, state: dict[str, Any]) -> None:
    last, start, start_value = state["last_epoch"], state["start_epoch"], state["start_evidence"]
    if last is not None and not _is_int(last):
        raise _bad(owner, "last_epoch", "None or an int >= 0", last)
    if start is not None and not (_is_int(start) and last is not None and start <= last):
        raise _bad(owner, "start_epoch", f"None or an int in [0, last_epoch={last}]", start)
    if (start is None) != (start_value is None) or (start_value is not None and not _is_finite(start_value)):
        raise _bad(owner, "start_evidence", "a finite number when start_epoch is set, else None", start_value)
    values = state["window_evidence"]
    if not (isinstance(values, list) and all(map(_is_finite, values))):
        raise _bad(owner, "window_evidence", "a list of finite numbers", values)
    mean = state["prev_window_mean"]
    if mean is not None and not _is_finite(mean):
        raise _bad(owner, "prev_window_mean", "None or a finite number", mean)
    ignored = state["ignored_epochs"]
    if not (isinstance(ignored, list) and all(map(_is_int, ignored))):
        raise _bad(owner, "ignored_epochs", "a list of ints >= 0", ignored)
