"""The results store: one folder per run config, its files, and the check that a folder is trustworthy.

A run is identified by its config (a frozen dataclass with ``kind``, ``to_dict()``, ``from_dict()``,
``digest()``, ``validate()``). Its results live in ``<results_root>/<kind>-<digest>/``::

    config.json            {"kind", "digest", "config": config.to_dict()}   (written first)
    checkpoint.pt          the trainer's resumable state (written by the trainer)
    model.pt               the trained model (written by the trainer)
    history.csv            one row per epoch
    schedule_history.csv   one row per bandit round (empty for fixed schedules)
    final.json             final metrics plus "kind" and "digest", written LAST
    error.txt              traceback of the last failed attempt (removed when a new attempt starts)
    wall_time.json         seconds spent by earlier attempts and the current one's start (summed into
                           the final wall time; a killed attempt counts until its last checkpoint)

Every file is written atomically (temporary sibling, then ``os.replace``). A run is complete
(``"done"``) only if ``final.json`` parses, has the keys :data:`FINAL_KEYS`, its ``kind`` and
``digest`` are the folder's config's, it records all the config's epochs and ``"completed": true``,
both CSVs parse (``history.csv`` with one row per epoch and one for epoch 0), a bandit run's
``schedule_history.csv`` holds exactly the rounds of its final checkpoint (one row per round, every
column, every cell parsable and equal to the checkpoint's record: :func:`schedule_history_problem`)
and ``model.pt`` loads and belongs to the config; a folder that fails these checks is ``"corrupt"``
(unreadable or incomplete files: ``repair`` removes the results and the trainer rebuilds them from
its checkpoint) or ``"foreign"`` (files of another config), see :func:`inspect_run`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from tvolib import paths
from tvolib.bandit.state import check_history, parse_history
from tvolib.checkpoint import CorruptFileError, atomic_write
from tvolib.runs.kinds import get_kind
from tvolib.training.run_folder import MODEL_ADVICE, RunFolder, load_model_state
from tvolib.training.images import build_schedule
from tvolib.training.pcfg import build_pcfg_schedule
from tvolib.training.schedule import BANDIT_SCHEDULES

__all__ = [
    "CONFIG_FILE", "FINAL_FILE", "HISTORY_FILE", "SCHEDULE_FILE", "ERROR_FILE", "CHECKPOINT_FILE",
    "MODEL_FILE", "WALL_FILE", "FINAL_KEYS", "STATUSES", "PROBLEMS", "FROM_SCRATCH",
    "RunFolderError", "RunState",
    "config_kind", "config_digest", "run_dir", "config_record", "config_from_dict", "load_config",
    "inspect_run", "check_run", "clear_run", "error_headline", "checkpoint_problem", "schedule_history_problem",
    "write_json", "write_records_csv", "read_records_csv",
]

CONFIG_FILE = "config.json"
FINAL_FILE = "final.json"
HISTORY_FILE = "history.csv"
SCHEDULE_FILE = "schedule_history.csv"
ERROR_FILE = "error.txt"
CHECKPOINT_FILE = "checkpoint.pt"
MODEL_FILE = "model.pt"
WALL_FILE = "wall_time.json"

#: Keys every ``final.json`` holds (``kind`` and ``digest`` are written by the runner).
FINAL_KEYS: tuple[str, ...] = ("kind", "digest", "epochs")
#: Every status :func:`inspect_run` reports.
STATUSES: tuple[str, ...] = ("done", "partial", "missing", "corrupt", "foreign")
#: The statuses of folders that cannot be trusted (deleted by ``repair``).
PROBLEMS: tuple[str, ...] = ("corrupt", "foreign")
#: The way out of a folder whose checkpoint cannot be trusted (the end of its reason): ``repair``
#: rebuilds results from the checkpoint, so it refuses such a folder.
FROM_SCRATCH = ("no file can be rebuilt from it: delete the run folder and rerun the run from scratch (--repair "
                "does not rebuild from a damaged checkpoint)")


class RunFolderError(ValueError):
    """One or more run folders are corrupt or hold another config's files.

    ``problems`` lists ``(folder, status, reason)``; the message says which folders to delete, and
    offers ``--repair`` unless every reason ends in :data:`FROM_SCRATCH` (a damaged checkpoint).
    """

    def __init__(self, problems: Sequence[tuple[Path, str, str]]) -> None:
        self.problems = [(Path(f), s, r) for f, s, r in problems]
        parts = [f"run folder {f} is {s}: {r}" for f, s, r in self.problems]
        repairable = [r for _, _, r in self.problems if FROM_SCRATCH not in r]
        advice = ("Delete the folder to recompute the run" if len(parts) == 1
                  else "Delete these folders to recompute the runs")
        advice = f". {advice}, or rerun with --repair (repair=True)." if repairable else "."
        super().__init__("; ".join(parts) + advice)


@dataclass(frozen=True)
class RunState:
    """The status of one run folder (one of :data:`STATUSES`) and, for a problem, the reason."""

    status: str
    reason: str = ""


# --------------------------------------------------------------------------------------------
# Configs and folders
# --------------------------------------------------------------------------------------------

def config_kind(config: Any) -> str:
    """The config's ``kind`` ("tvo", "pcfg", ...); a clear ``TypeError`` for non-configs."""
    kind = getattr(config, "kind", None)
    needed = ("to_dict", "digest", "validate")
    if not isinstance(kind, str) or not all(callable(getattr(config, m, None)) for m in needed):
        raise TypeError(
            f"expected a run config (RunConfig or PCFGConfig: a dataclass with kind, to_dict(), digest(), "
            f"validate()), got {type(config).__name__}: {config!r}"
        )
    return kind


def config_digest(config: Any) -> str:
    """``<kind>-<digest>``: the name of the run's folder (two kinds never share a folder)."""
    return f"{config_kind(config)}-{config.digest()}"


def run_dir(config: Any, results_root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of a run's results (not created).

    Args:
        config: a run config.
        results_root: the results folder; default ``$TVOLIB_RESULTS`` or ``<repo>/results``.

    Returns:
        ``results_root/<kind>-<digest>``, e.g. ``results/tvo-1162bce91751``.
    """
    return paths.results_root(results_root) / config_digest(config)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # tensors, numpy arrays and scalars
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def _normalise(obj: Any) -> Any:
    """JSON round trip, so that tuples and lists compare equal."""
    return json.loads(json.dumps(obj, default=_json_default, sort_keys=True))


def config_record(config: Any) -> dict[str, Any]:
    """The content of ``config.json``: ``{"kind", "digest", "config": config.to_dict()}``."""
    return {"kind": config_kind(config), "digest": config.digest(), "config": _normalise(config.to_dict())}


def config_from_dict(record: Mapping[str, Any]) -> Any:
    """Rebuild and validate a config from a ``config.json`` record or a bare ``to_dict()``.

    Args:
        record: ``{"kind", "config": {...}}``, or the fields themselves (kind ``"tvo"`` unless the
            dict has a ``"kind"`` key).

    Returns:
        The config, e.g. a :class:`tvolib.training.RunConfig`.
    """
    if not isinstance(record, Mapping):
        raise ValueError(f"a config record must be a JSON object, got {type(record).__name__}")
    if "config" in record and isinstance(record["config"], Mapping):
        kind, fields = record.get("kind", "tvo"), dict(record["config"])
    else:
        fields = dict(record)
        kind = fields.pop("kind", "tvo")
    config = get_kind(kind).config_class.from_dict(fields)
    config.validate()
    return config


def load_config(path: str | os.PathLike[str]) -> Any:
    """Read a config from a JSON file (a run folder's ``config.json``, the folder, or a bare ``to_dict()``)."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no config file at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    return config_from_dict(record)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON, atomically."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=True)
    atomic_write(path, lambda f: f.write(text + "\n"), "w")


def _cell(value: Any) -> Any:
    """A CSV cell: scalars as they are, anything structured (lists, tensors, dicts) as JSON."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=_json_default)
    return value


def write_records_csv(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Write a list of dicts as CSV (structured cells as JSON), atomically."""
    frame = pd.DataFrame([{str(k): _cell(v) for k, v in dict(r).items()} for r in records])
    atomic_write(path, lambda f: frame.to_csv(f, index=False), "w")


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def read_records_csv(path: Path) -> pd.DataFrame:
    """Read a CSV written by :func:`write_records_csv` (JSON cells decoded).

    Raises:
        RunFolderError: the file is missing or cannot be parsed (the message names the file).
    """
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except FileNotFoundError:
        raise RunFolderError([(path.parent, "corrupt", f"{path} is missing")]) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        reason = f"{path} cannot be parsed ({type(e).__name__}: {str(e).strip()})"
        raise RunFolderError([(path.parent, "corrupt", reason)]) from None
    for col in frame.columns:
        if frame[col].dtype == object or pd.api.types.is_string_dtype(frame[col]):
            frame[col] = frame[col].map(_decode).astype(object)
    return frame


# --------------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------------

def _read_json(path: Path) -> tuple[Any, str]:
    """``(content, "")``, or ``(None, reason)`` when the file cannot be read or parsed."""
    try:
        return json.loads(path.read_text()), ""
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"{path.name} is not valid JSON (truncated or overwritten?): {e}"
    except OSError as e:
        return None, f"{path.name} cannot be read: {e.strerror or e}"


def _config_problem(config: Any, folder: Path) -> RunState | None:
    """A problem with ``folder/config.json`` (absent is fine: it is written first)."""
    file = folder / CONFIG_FILE
    if not file.exists():
        return None
    stored, reason = _read_json(file)
    if reason:
        return RunState("corrupt", reason)
    expected = config_record(config)
    if not isinstance(stored, dict) or stored.get("kind") != expected["kind"] or stored.get("config") != expected["config"]:
        other = f"{stored.get('kind')}-{stored.get('digest')}" if isinstance(stored, dict) else repr(stored)[:60]
        return RunState("foreign", f"{CONFIG_FILE} holds another config ({other}), not {config_digest(config)}"
                                   + _differing_fields(stored, expected))
    return None


def _differing_fields(stored: Any, expected: dict[str, Any]) -> str:
    """``": fields [...] differ (an edited file?)"`` naming the fields a stored record gets wrong, or ``""``."""
    fields = stored.get("config") if isinstance(stored, dict) else None
    if not isinstance(fields, dict):
        return ""
    names = sorted(k for k in set(fields) | set(expected["config"]) if fields.get(k, ...) != expected["config"].get(k, ...))
    return f": fields {names} differ" + (" (an edited file?)" if stored.get("digest") == expected["digest"] else "")


def _final_problem(config: Any, file: Path) -> RunState | None:
    """A problem with a present ``final.json``: unparsable, keys missing, or another run's."""
    final, reason = _read_json(file)
    if reason:
        return RunState("corrupt", reason)
    if not isinstance(final, dict):
        return RunState("corrupt", f"{FINAL_FILE} is not a JSON object")
    missing = [k for k in FINAL_KEYS if k not in final]
    if missing:
        return RunState("corrupt", f"{FINAL_FILE} lacks the keys {missing}")
    if final["kind"] != config_kind(config) or final["digest"] != config.digest():
        return RunState("foreign", f"{FINAL_FILE} belongs to run {final['kind']}-{final['digest']}, "
                                   f"not {config_digest(config)}")
    epochs = getattr(config, "epochs", final["epochs"])
    if final["epochs"] != epochs or final.get("completed") is not True:
        return RunState("corrupt", f"{FINAL_FILE} records {final['epochs']!r} of the config's {epochs} epochs "
                                   f"(completed: {final.get('completed')!r}): the run is not complete")
    return None


def _csv_problem(config: Any, folder: Path, name: str) -> RunState | None:
    """A missing or unparsable CSV of a complete run; ``history.csv`` must hold epochs 0..``epochs``."""
    if not (folder / name).is_file():
        return RunState("corrupt", f"{name} is missing although {FINAL_FILE} marks the run complete")
    try:
        rows = len(read_records_csv(folder / name))
    except RunFolderError as err:
        return RunState("corrupt", err.problems[0][2])
    expected = getattr(config, "epochs", rows - 1) + 1
    if name == HISTORY_FILE and rows != expected:
        return RunState("corrupt", f"{name} holds {rows} rows, not the {expected} of epochs 0..{expected - 1}")
    return None


def _bandit_run(config: Any) -> bool:
    """Whether ``config`` trains with a bandit schedule, whose rounds ``schedule_history.csv`` records."""
    return bool(getattr(config, "uses_schedule", False)) and getattr(config, "schedule", None) in BANDIT_SCHEDULES


def _same_cell(mine: Any, theirs: Any) -> bool:
    """Two parsed cells agree: equal, numbers to the CSV's text round trip (rel. 1e-12), empty as None."""
    mine, theirs = (None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in (mine, theirs))
    if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
        return len(mine) == len(theirs) and all(map(_same_cell, mine, theirs))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (mine, theirs))
    if numbers:
        return mine == theirs or math.isclose(mine, theirs, rel_tol=1e-12, abs_tol=0.0)
    return bool(mine == theirs)


def _run_schedule(config: Any) -> Any:
    """A fresh schedule of ``config`` on the CPU, what its saved bandit state must fit (``None`` for
    a kind whose schedule this store cannot build)."""
    builders = {"tvo": build_schedule, "pcfg": build_pcfg_schedule}
    build = builders.get(config_kind(config))
    return None if build is None else build(config, device="cpu")


def _bandit_record_problem(config: Any, state: Any) -> str:
    """Why a loaded checkpoint's bandit record cannot be trusted, or ``""``: the schedule of ``config``
    must take its state (every key, every history row by kind and by value rule, the schedule's
    configuration: :meth:`~tvolib.bandit.base.BanditScheduleBase.load_state_dict`)."""
    schedule = _run_schedule(config)
    try:
        if schedule is not None:
            schedule.load_state_dict(state.get("schedule") if isinstance(state, dict) else None)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{CHECKPOINT_FILE} is damaged: its bandit record cannot be restored ({detail}); {FROM_SCRATCH}"
    return ""


def checkpoint_problem(config: Any, folder: Path) -> str:
    """Why ``repair`` cannot rebuild a bandit run's results from its checkpoint, or ``""``: a present
    ``checkpoint.pt`` that cannot be read as this config's, or whose bandit record is damaged
    (:func:`_bandit_record_problem`). The reason ends in :data:`FROM_SCRATCH`. Other runs, and a
    bandit run without a checkpoint (retrained), pass."""
    if not _bandit_run(config) or not (folder / CHECKPOINT_FILE).exists():
        return ""
    try:
        state = RunFolder(folder).load_checkpoint(config.digest(), config.epochs, mmap=True)
    except CorruptFileError as err:
        return f"{str(err).split('; ')[0]}; {FROM_SCRATCH}"
    return _bandit_record_problem(config, state)


def schedule_history_problem(config: Any, folder: Path) -> str:
    """Why a complete bandit run's ``schedule_history.csv`` cannot be trusted, or ``""``.

    First the run's own final checkpoint (its digest, at the config's last epoch), the record the
    file is rebuilt from, must be sound: the schedule takes its bandit state (every history field by
    kind and by value rule, :data:`tvolib.bandit.state.HISTORY_FIELDS`); a damaged one is named, with
    the way out (:data:`FROM_SCRATCH`), never blamed on the file. Then the file must hold its rounds:
    one row per round, every column, every cell parsable as its kind, every value by its rule and
    equal to the checkpoint's. Runs without a bandit schedule pass.
    """
    if not _bandit_run(config):
        return ""
    try:
        state = RunFolder(folder).load_checkpoint(config.digest(), config.epochs, mmap=True)
    except CorruptFileError as err:
        return f"{SCHEDULE_FILE} cannot be verified: {str(err).split('; ')[0]}; {FROM_SCRATCH}"
    if state is None:
        return f"{SCHEDULE_FILE} cannot be verified: {CHECKPOINT_FILE}, the bandit's own record of its rounds, is missing"
    if state["epoch"] != config.epochs:
        return f"{CHECKPOINT_FILE} is at epoch {state['epoch']}, not the run's last epoch {config.epochs}"
    damage = _bandit_record_problem(config, state)
    if damage:
        return damage
    expected = parse_history(state["schedule"]["history"], source=CHECKPOINT_FILE)
    try:
        frame = read_records_csv(folder / SCHEDULE_FILE)
        rows = parse_history(frame.to_dict("records"), source=SCHEDULE_FILE)
    except RunFolderError as err:
        return err.problems[0][2]
    except ValueError as err:
        return str(err)
    return _rounds_differ(frame, rows, expected, _run_schedule(config))


def _rounds_differ(frame: pd.DataFrame, rows: list[dict[str, Any]], expected: list[dict[str, Any]],
                   schedule: Any) -> str:
    """How the file's rows (``frame``, parsed as ``rows``) differ from the checkpoint's rounds, or ``""``:
    their number, their columns, a value against its rule (given ``schedule``), a cell."""
    if len(rows) != len(expected):
        return f"{SCHEDULE_FILE} holds {len(rows)} rows, not the {len(expected)} rounds recorded in {CHECKPOINT_FILE}"
    columns = [str(c) for c in frame.columns]
    wanted = {key for row in expected for key in row}
    missing, extra = sorted(wanted - set(columns)), sorted(set(columns) - wanted)
    if missing or extra:
        parts = [f"lacks the columns {missing}"] if missing else []
        parts += [f"has the columns {extra}, which the rounds in {CHECKPOINT_FILE} do not"] if extra else []
        return f"{SCHEDULE_FILE} " + " and ".join(parts)
    try:
        check_history(rows, schedule, source=SCHEDULE_FILE)
    except ValueError as err:
        return f"{err} (edited, or another run's file?)"
    for i, (mine, theirs) in enumerate(zip(rows, expected)):
        for key in columns:
            if not _same_cell(mine.get(key), theirs.get(key)):
                return (f"{SCHEDULE_FILE} row {i}, column {key!r} holds {mine.get(key)!r:.80}, but round {i} in "
                        f"{CHECKPOINT_FILE} records {theirs.get(key)!r:.80} (edited, or another run's file?)")
    return ""


def _model_problem(config: Any, folder: Path) -> RunState | None:
    """A missing, damaged or foreign ``model.pt`` in a complete run (its tensors mapped, not read)."""
    path = folder / MODEL_FILE
    if not path.is_file():
        return RunState("corrupt", f"{MODEL_FILE} is missing although {FINAL_FILE} marks the run complete")
    try:
        load_model_state(path, config.digest(), advice=MODEL_ADVICE.format(path=path), mmap=True)
    except CorruptFileError as err:
        return RunState("corrupt", str(err).split("; ")[0])
    return None


def inspect_run(config: Any, results_root: str | os.PathLike[str] | None = None) -> RunState:
    """The verified status of ``config``'s run folder.

    Args:
        config: a run config.
        results_root: the results folder (default as in :func:`run_dir`).

    Returns:
        A :class:`RunState`: ``"done"`` (``final.json`` valid, complete and this config's, the CSVs
        readable, a bandit's rounds those of its final checkpoint, ``model.pt`` this config's: see
        the module docstring),
        ``"partial"`` (started, not finished), ``"missing"``, ``"corrupt"`` or ``"foreign"`` (with
        the reason).
    """
    folder = run_dir(config, results_root)
    if not folder.exists():
        return RunState("missing")
    if not folder.is_dir():
        return RunState("corrupt", "the path is a file, not a folder")
    problem = _config_problem(config, folder)
    if problem is not None:
        return problem
    if not (folder / FINAL_FILE).exists():
        return RunState("partial" if any(folder.iterdir()) else "missing")
    problem = _final_problem(config, folder / FINAL_FILE)
    problem = problem or _csv_problem(config, folder, HISTORY_FILE) or _csv_problem(config, folder, SCHEDULE_FILE)
    reason = "" if problem else schedule_history_problem(config, folder)
    problem = problem or (RunState("corrupt", reason) if reason else None)
    return problem or _model_problem(config, folder) or RunState("done")


def check_run(config: Any, results_root: str | os.PathLike[str] | None = None) -> RunState:
    """:func:`inspect_run`, raising :class:`RunFolderError` for a corrupt or foreign folder."""
    state = inspect_run(config, results_root)
    if state.status in PROBLEMS:
        raise RunFolderError([(run_dir(config, results_root), state.status, state.reason)])
    return state


def clear_run(config: Any, results_root: str | os.PathLike[str] | None = None) -> None:
    """Repair a corrupt or foreign folder so that the run can be recomputed.

    When ``config.json`` is this config's, only the result files (``final.json``, the CSVs and
    ``model.pt``) are removed and the trainer rebuilds them from its checkpoint (a complete run's
    checkpoint is at its last epoch: nothing is trained again); otherwise the whole folder is removed.

    Raises:
        RunFolderError: the results cannot be rebuilt because the bandit run's checkpoint is
            damaged (:func:`checkpoint_problem`); nothing is removed, and the message says to delete
            the folder and rerun the run from scratch.
    """
    folder = run_dir(config, results_root)
    if folder.is_file() or folder.is_symlink():
        folder.unlink()
    elif folder.is_dir() and (not (folder / CONFIG_FILE).exists() or _config_problem(config, folder) is not None):
        shutil.rmtree(folder)
    elif folder.is_dir():
        reason = checkpoint_problem(config, folder)
        if reason:  # nothing is removed: the results cannot be rebuilt from this checkpoint
            raise RunFolderError([(folder, "corrupt", reason)])
        for name in (FINAL_FILE, HISTORY_FILE, SCHEDULE_FILE, MODEL_FILE):
            (folder / name).unlink(missing_ok=True)


#: A traceback line's exception class with its module path (``tvolib.data.files.DatasetNotFoundError:``).
_MODULE_PATH = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))")


def error_headline(text: str) -> str:
    """The exception's first line (``"ValueError: bad input"``) from a formatted traceback.

    The header of the last ``Traceback (most recent call last):`` block is its first unindented line
    (frames are indented; a multi-line message follows its first line), given without the module
    path of the exception's class (``DatasetNotFoundError``, not ``tvolib.data.files.DatasetNotFoundError``).
    Text without a traceback gives its first line; empty text gives ``"failed"``.
    """
    lines = text.strip().splitlines()
    if not lines:
        return "failed"
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if starts:
        for line in lines[starts[-1] + 1:]:
            if line.strip() and not line[0].isspace():
                return _MODULE_PATH.sub("", line.strip())
    return lines[0].strip()
