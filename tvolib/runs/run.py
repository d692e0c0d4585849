"""One run in this process: train a config into its folder, or read it if complete.

:func:`run_one` verifies the folder first (a corrupt or foreign one raises
:class:`~tvolib.runs.store.RunFolderError` unless ``repair``), checks the device and that the folder
is writable, locks it against a second process, then hands it to the kind's trainer, which resumes
from its checkpoint. Results are written last, ``final.json`` after everything else.
"""
from __future__ import annotations

import os
import time
import traceback
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from tvolib import paths
from tvolib.checkpoint import atomic_write
from tvolib.config import resolve_device
from tvolib.data import data_root as data_folder
from tvolib.runs.kinds import TrainFn, get_kind
from tvolib.training.many import TrainManyError, train_many
from tvolib.training.run_folder import RunFolder, RunLockedError
from tvolib.runs.readers import load_final
from tvolib.runs.wall_time import attempt_trains, close_attempt, read_wall, start_attempt
from tvolib.runs.store import (
    CONFIG_FILE, ERROR_FILE, FINAL_FILE, HISTORY_FILE, PROBLEMS, SCHEDULE_FILE,
    RunFolderError, clear_run, config_kind, config_record, inspect_run, run_dir, write_json, write_records_csv,
)

__all__ = ["RunLockedError", "TrainArg", "check_device", "check_folders", "run_one", "run_stack"]

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


def check_folders(results_root: str | os.PathLike[str] | None, data_root: str | os.PathLike[str] | None) -> None:
    """Refuse a results or data root that is not a path, or empty (``""`` is never the default), before
    anything runs; ``None`` stands for the defaults."""
    paths.results_root(results_root)
    if data_root is not None:
        data_folder(data_root)


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


def _record(result: Any, config: Any, folder: Path, wall_seconds: float) -> dict[str, Any]:
    """Write a trained run's CSVs and ``final.json`` (last); raise if the trainer's run is incomplete."""
    final = dict(_get(result, "final", {}) or {})
    epochs = getattr(config, "epochs", final.get("epochs"))
    if final.get("completed", True) is False or final.setdefault("epochs", epochs) != epochs:
        raise RuntimeError(
            f"the trainer returned an incomplete run ({final.get('epochs')} of {epochs} "
            f"epochs); not marking {folder.name} as done"
        )
    final["completed"] = True
    write_records_csv(folder / HISTORY_FILE, list(_get(result, "history", []) or []))
    write_records_csv(folder / SCHEDULE_FILE, list(_get(result, "schedule_history", []) or []))
    final.setdefault("wall_seconds", wall_seconds)
    final["digest"] = config.digest()
    final["kind"] = config_kind(config)
    close_attempt(folder, final["wall_seconds"])  # before final.json: a finished attempt is never counted again
    write_json(folder / FINAL_FILE, final)  # last: marks completion
    return final


def _record_failure(folder: Path, wall_seconds: float, error: BaseException) -> None:
    """``wall_time.json`` closed (summed into the next attempt's) and ``error.txt`` with ``error``'s traceback."""
    close_attempt(folder, wall_seconds)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    atomic_write(folder / ERROR_FILE, lambda f: f.write(text), "w")


def _train_and_record(fn: TrainFn, config: Any, folder: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """Train, then write the CSVs and ``final.json`` (last); on failure write ``error.txt`` and re-raise.
    The wall time is the earlier attempts' plus this one's, unless it had no epoch to train."""
    previous, trains = read_wall(folder), attempt_trains(folder, getattr(config, "epochs", None))
    start = time.perf_counter()
    spent = lambda: previous + (time.perf_counter() - start if trains else 0.0)  # noqa: E731
    try:
        return _record(fn(config, folder, **options), config, folder, spent())
    except Exception as error:
        _record_failure(folder, spent(), error)
        raise


def _open_folder(config: Any, results_root: str | os.PathLike[str] | None, repair: bool) -> tuple[Path, dict | None]:
    """Check ``config`` and its folder: ``(folder, final)`` with ``final`` when the run is complete.

    A corrupt or foreign folder raises :class:`RunFolderError`, or is cleared with ``repair``.
    """
    config_kind(config)
    config.validate()
    state = inspect_run(config, results_root)
    if state.status == "done":
        return run_dir(config, results_root), load_final(config, results_root)
    if state.status in PROBLEMS:
        if not repair:
            raise RunFolderError([(run_dir(config, results_root), state.status, state.reason)])
        clear_run(config, results_root)
    return run_dir(config, results_root), None


def _start_attempt(config: Any, folder: Path) -> None:
    """A locked folder about to train: its ``config.json`` written, the last attempt's error removed, its
    start recorded in ``wall_time.json`` (so that a killed attempt's time still counts:
    :mod:`tvolib.runs.wall_time`)."""
    if not (folder / CONFIG_FILE).exists():
        write_json(folder / CONFIG_FILE, config_record(config))
    (folder / ERROR_FILE).unlink(missing_ok=True)
    start_attempt(folder)


def run_one(
    config: Any,
    *,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    device: str | None = None,
    progress: bool | None = None,
    train_fn: TrainArg = None,
    repair: bool = False,
    compile: bool = False,
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
        compile: ``train(..., compile=True)`` for an image-model run (other kinds ignore it).

    Returns:
        The final metrics (the content of ``final.json``).

    Example:
        >>> run_one(RunConfig(model="vae", dataset="mnist", epochs=2), device="cpu")  # doctest: +SKIP
    """
    check_device(device)
    check_folders(results_root, data_root)
    folder, final = _open_folder(config, results_root, repair)
    if final is not None:
        return final
    with RunFolder(folder):  # checked writable, locked (the trainer enters it again), stale temps removed
        if (folder / FINAL_FILE).exists():  # finished by another process since inspect_run
            return load_final(config, results_root)
        _start_attempt(config, folder)
        options = {"data_root": data_root, "device": device, "progress": progress}
        if compile and config_kind(config) == "tvo":
            options["compile"] = True
        return _train_and_record(_train_fn(train_fn, config_kind(config)), config, folder, options)


def run_stack(
    configs: Sequence[Any],
    *,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    device: str | None = None,
    progress: bool | None = None,
    repair: bool = False,
    pool: Any = None,
    compile: bool = False,
) -> list[dict[str, Any] | BaseException]:
    """Run ``configs`` as one stack (:func:`tvolib.training.train_many`) into their folders, or read them.

    The stacked counterpart of :func:`run_one`: each folder is verified, locked and resumed the same
    way, and each finished run gets the files :func:`run_one` writes. ``wall_seconds`` of a stacked
    run is its share of the stack's wall time (the stack's time divided by its runs). A run that
    fails or diverges gets its ``error.txt``; the others go on.

    Args:
        configs: configs of one :func:`~tvolib.training.many.stack_key` (others train alone,
            one after the other).
        results_root, data_root, device, progress, repair: as for :func:`run_one`.
        pool: a :class:`~tvolib.stacked.StepPool` for the GP-bandit rounds (default: inline).
        compile: ``train_many(..., compile=True)`` (the stack's training minibatches compiled).

    Returns:
        Per config, its final metrics or the exception that stopped it.

    Example:
        >>> outcomes = run_stack(sweeps.fig4_vae_mnist_fashion("smoke")[:4], device="cpu")  # doctest: +SKIP
    """
    check_device(device)
    check_folders(results_root, data_root)
    opened = [_open_folder(config, results_root, repair) for config in configs]
    outcomes: list[dict[str, Any] | BaseException | None] = [final for _, final in opened]
    todo = [i for i, final in enumerate(outcomes) if final is None]
    with ExitStack() as locks:
        for i in list(todo):
            folder = opened[i][0]
            locks.enter_context(RunFolder(folder))
            if (folder / FINAL_FILE).exists():  # finished by another process since inspect_run
                outcomes[i] = load_final(configs[i], results_root)
                todo.remove(i)
            else:
                _start_attempt(configs[i], folder)
        if todo:
            _train_stack(configs, [opened[i][0] for i in todo], todo, outcomes,
                         dict(data_root=data_root, device=device, progress=progress, pool=pool, compile=compile))
    return outcomes  # type: ignore[return-value]


def _train_stack(configs: Sequence[Any], folders: list[Path], todo: list[int], outcomes: list[Any],
                 options: dict[str, Any]) -> None:
    """``train_many`` over ``todo``; each run's files (or ``error.txt``) written and its outcome set."""
    previous = [read_wall(folder) for folder in folders]
    trains = [attempt_trains(folder, getattr(configs[i], "epochs", None)) for i, folder in zip(todo, folders)]
    start = time.perf_counter()
    try:
        results: list[Any] = train_many([configs[i] for i in todo], folders, **options)
    except TrainManyError as err:
        results = err.outcomes
    share = (time.perf_counter() - start) / len(todo)
    for i, folder, before, trained, result in zip(todo, folders, previous, trains, results):
        spent = before + (share if trained else 0.0)
        try:
            if isinstance(result, BaseException):
                raise result
            outcomes[i] = _record(result, configs[i], folder, spent)
        except Exception as error:  # noqa: BLE001 -- this run's failure, recorded; the others go on
            _record_failure(folder, spent, error)
            outcomes[i] = error
