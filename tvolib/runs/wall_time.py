"""A run's wall time over its attempts: ``wall_time.json``, opened at each attempt's start and closed
at its end.

``wall_time.json`` holds ``seconds``, the time of the attempts that ended (finished or failed), and
while an attempt runs its start: the time it began (``attempt_started``), the run's *clock* then
(``attempt_clock``) and the epoch it resumed from (``attempt_epoch``). The clock is what a
tvolib checkpoint records of the time spent in it: every trained epoch's ``seconds`` plus the
evaluation and bandit timers. So:

* an attempt that ends is closed: its seconds are added and its start removed (a finished run's
  record holds no open attempt, so nothing later counts it again);
* an attempt that resumed at the run's last epoch (a ``--repair`` that rebuilds results from the
  final checkpoint) trained nothing and adds nothing;
* an attempt that was killed left its start open; the next attempt counts it until its last
  checkpoint by the checkpoint's clock, which a copy (``cp -r``, new modification times) or a
  ``touch`` does not change. Its start-up (loading data, building the model) is not counted.
  Only a checkpoint without a clock (another trainer's format) falls back to the checkpoint's
  modification time, and only while ``wall_time.json`` still has the time it was written at (a
  copied folder's times say nothing about the attempt).

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> start_attempt(folder)
    >>> close_attempt(folder, 5.0); read_wall(folder)
    5.0
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from tvolib.checkpoint import CorruptFileError, load
from tvolib.runs.store import CHECKPOINT_FILE, WALL_FILE, write_json

__all__ = ["attempt_trains", "close_attempt", "read_wall", "start_attempt"]

#: How far a freshly written ``wall_time.json``'s modification time may lie from the start it records.
_WRITTEN_WITHIN = 2.0


def _record(folder: Path) -> dict[str, Any] | None:
    """``wall_time.json``'s content, or ``None`` when it is missing or unreadable."""
    try:
        record = json.loads((folder / WALL_FILE).read_text())
        float(record["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _checkpoint(folder: Path) -> tuple[int | None, float | None]:
    """The checkpoint's ``(epoch, clock)``; ``None`` for what it does not hold (no checkpoint, another
    trainer's format, a damaged file)."""
    path = folder / CHECKPOINT_FILE
    if not path.is_file():
        return None, None
    try:
        state = load(path, mmap=True)
    except (CorruptFileError, OSError):
        return None, None
    if not isinstance(state, dict):
        return None, None
    epoch = state.get("epoch") if isinstance(state.get("epoch"), int) else None
    history, timers = state.get("history"), state.get("timers")
    if not (isinstance(history, list) and isinstance(timers, dict)):
        return epoch, None
    parts = [row.get("seconds", 0.0) for row in history if isinstance(row, dict)] + list(timers.values())
    values = [_number(v) for v in parts]
    return epoch, None if None in values else sum(values)


def _killed_seconds(folder: Path, record: dict[str, Any]) -> float:
    """The open attempt's time until its last checkpoint (module docstring); 0 when there is none."""
    started = _number(record.get("attempt_started"))
    if started is None:
        return 0.0
    _, clock = _checkpoint(folder)
    before = _number(record.get("attempt_clock"))
    if clock is not None:
        return max(0.0, clock - (before or 0.0))
    try:  # no clock: the modification times, if the record is where and when it was written
        written = (folder / WALL_FILE).stat().st_mtime
        saved = (folder / CHECKPOINT_FILE).stat().st_mtime
    except OSError:
        return 0.0
    return max(0.0, saved - started) if abs(written - started) <= _WRITTEN_WITHIN else 0.0


def read_wall(folder: Path) -> float:
    """Seconds spent on the run by its earlier attempts: those that ended, plus one that was killed
    (until its last checkpoint, by the checkpoint's clock)."""
    record = _record(folder)
    return 0.0 if record is None else float(record["seconds"]) + _killed_seconds(folder, record)


def start_attempt(folder: Path) -> None:
    """Record an attempt's start (earlier attempts summed, a killed one closed): its time, the clock
    and the epoch of the checkpoint it resumes from."""
    epoch, clock = _checkpoint(folder)
    write_json(folder / WALL_FILE, {"seconds": read_wall(folder), "attempt_started": time.time(), "attempt_clock": clock,
                    "attempt_epoch": epoch})


def attempt_trains(folder: Path, epochs: int | None) -> bool:
    """Whether the open attempt has epochs to train: not when it resumed at the run's last epoch
    ``epochs`` (e.g. a repair that rebuilds the results from the final checkpoint)."""
    record = _record(folder)
    resumed = None if record is None else record.get("attempt_epoch")
    return epochs is None or resumed is None or resumed < epochs


def close_attempt(folder: Path, seconds: float) -> None:
    """Close the attempt: ``seconds`` is the run's wall time so far, every attempt included."""
    write_json(folder / WALL_FILE, {"seconds": seconds})
