"""One run in this process: train a config into its folder, or read it if complete.

:func:`run_one` verifies the folder first (a corrupt or foreign one raises
:class:`~tvolib.runs.store.RunFolderError` unless ``repair``), checks the device and that the folder
is writable, locks it against a second process, then hands it to the kind's trainer, which resumes
from its checkpoint. Results are written last, ``final.json`` after everything else.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

import torch

from tvolib.checkpoint import atomic_write
from tvolib.config import resolve_device
from tvolib.runs.kinds import TrainFn, get_kind
from tvolib.training.run_folder import RunFolder, RunLockedError
from tvolib.runs.readers import load_final
from tvolib.runs.store import (
    CONFIG_FILE, ERROR_FILE, FINAL_FILE, HISTORY_FILE, PROBLEMS, SCHEDULE_FILE, WALL_FILE, RunFolderError,
    clear_run, config_kind, config_record, inspect_run, run_dir, write_json, write_records_csv,
)

__all__ = ["RunLockedError", "TrainArg", "check_device", "run_one"]

#: A trainer replacing the kinds' (or ``{kind: trainer}``), for tests.
TrainArg = TrainFn | Mapping[str, TrainFn] | None


def check_device(device: str | None, *, here: bool = True) -> None:
    """Reject an unusable ``device`` before anything runs.

    ``here``: also require it to be usable on this machine (not for jobs that run elsewhere).
    """
    if device is None:
        return
    try:
        dev = torch.device(device)
    except RuntimeError:
        reason = "not a torch device name"
    else:
        reason = "" if dev.type in ("cpu", "cuda") else f"device type {dev.type!r} is not supported"
        if not reason and here:
            try:
                resolve_device(dev)
            except ValueError as e:
                reason = str(e).splitlines()[0]
    if reason:
        raise ValueError(f"device={device!r} cannot be used ({reason}); accepted: 'cpu', 'cuda' or 'cuda:N' "
                         f"where CUDA is available")


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------

def _train_fn(train_fn: TrainArg, kind: str) -> TrainFn:
    if train_fn is None:
        return get_kind(kind).train
    if isinstance(train_fn, Mapping):
        return train_fn[kind] if kind in train_fn else get_kind(kind).train
    return train_fn


def _get(result: Any, name: str, default: Any) -> Any:
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def _read_wall(folder: Path) -> float:
    try:
        return float(json.loads((folder / WALL_FILE).read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _train_and_record(fn: TrainFn, config: Any, folder: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """Train, then write the CSVs and ``final.json`` (last); on failure write ``error.txt`` and re-raise."""
    previous = _read_wall(folder)
    start = time.perf_counter()
    try:
        result = fn(config, folder, **options)
        final = dict(_get(result, "final", {}) or {})
        if final.get("completed", True) is False:
            raise RuntimeError(
                f"the trainer returned an incomplete run ({final.get('epochs')} of {getattr(config, 'epochs', '?')} "
                f"epochs); not marking {folder.name} as done"
            )
        write_records_csv(folder / HISTORY_FILE, list(_get(result, "history", []) or []))
        write_records_csv(folder / SCHEDULE_FILE, list(_get(result, "schedule_history", []) or []))
        final.setdefault("wall_seconds", previous + time.perf_counter() - start)
        final["digest"] = config.digest()
        final["kind"] = config_kind(config)
        write_json(folder / FINAL_FILE, final)  # last: marks completion
    except Exception:
        write_json(folder / WALL_FILE, {"seconds": previous + time.perf_counter() - start})
        atomic_write(folder / ERROR_FILE, lambda f: f.write(traceback.format_exc()), "w")
        raise
    return final


def run_one(
    config: Any,
    *,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    device: str | None = None,
    progress: bool | None = None,
    train_fn: TrainArg = None,
    repair: bool = False,
) -> dict[str, Any]:
    """Run ``config`` to completion in this process (or read it if complete).

    The trainer gets the run folder and resumes from its checkpoint if present; its ``history`` /
    ``schedule_history`` go to CSV and ``final`` to ``final.json`` (last, with ``kind``, ``digest``
    and ``wall_seconds`` summed over attempts). On an exception the traceback goes to ``error.txt``
    and the exception is re-raised. The folder is locked while the run trains.

    Args:
        config: a run config.
        results_root: the results folder (default ``$TVOLIB_RESULTS`` or ``<repo>/results``).
        data_root: the dataset folder (default ``$TVOLIB_DATA``).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        progress: the trainer's progress bar (``None``: the trainer's default).
        train_fn: a trainer replacing the kind's (or ``{kind: trainer}``), for tests.
        repair: recompute a corrupt or foreign folder instead of raising :class:`RunFolderError`.

    Returns:
        The final metrics (the content of ``final.json``).

    Example:
        >>> run_one(RunConfig(model="vae", dataset="mnist", epochs=2), device="cpu")  # doctest: +SKIP
    """
    kind = config_kind(config)
    config.validate()
    check_device(device)
    state = inspect_run(config, results_root)
    if state.status == "done":
        return load_final(config, results_root)
    if state.status in PROBLEMS:
        if not repair:
            raise RunFolderError([(run_dir(config, results_root), state.status, state.reason)])
        clear_run(config, results_root)
    folder = run_dir(config, results_root)
    with RunFolder(folder):  # checked writable, locked (the trainer enters it again), stale temps removed
        if (folder / FINAL_FILE).exists():  # finished by another process since inspect_run
            return load_final(config, results_root)
        if not (folder / CONFIG_FILE).exists():
            write_json(folder / CONFIG_FILE, config_record(config))
        (folder / ERROR_FILE).unlink(missing_ok=True)
        options = {"data_root": data_root, "device": device, "progress": progress}
        return _train_and_record(_train_fn(train_fn, kind), config, folder, options)
