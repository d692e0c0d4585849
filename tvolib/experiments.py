"""The results store and the executors that fill it: run a list of configs once, read them forever.

Every run is identified by its config (a frozen dataclass with ``kind``, ``to_dict()``,
``from_dict()``, ``digest()``, ``validate()``: :class:`tvolib.train.RunConfig`,
:class:`tvolib.pcfg.PCFGConfig`). Its results live in ``<results_root>/<kind>-<digest>/``::

    config.json            {"kind", "digest", "config": config.to_dict()}   (written first)
    checkpoint.pt          the trainer's resumable state (written by the trainer)
    model.pt               the trained model (written by the trainer)
    history.csv            one row per epoch
    schedule_history.csv   one row per bandit round (empty for fixed schedules)
    final.json             final metrics, written LAST: its presence marks a complete run
    error.txt              traceback of the last failed attempt (removed when a new attempt starts)

Every file is written atomically (temporary file in the same folder, then ``os.replace``), so a
killed sweep never leaves a half-written ``final.json``. A complete run is read, never recomputed; a
partial one is handed back to the trainer, which resumes from ``checkpoint.pt``.

Executors (argument ``executor``, else ``$TVOLIB_EXECUTOR``, else ``"local"``):

- ``local``: a process pool (spawn context, one torch thread per worker) of ``max_workers``
  processes (default ``$TVOLIB_MAX_WORKERS`` or ``os.cpu_count()``), a tqdm bar over runs; with one
  worker (or one run) the runs execute in this process, which is simpler to debug.
- ``slurm``: submitit job arrays (``AutoExecutor(cluster="slurm")``); every job is a
  :class:`SubmititRun`, a ``Checkpointable`` that re-submits itself on timeout/preemption and then
  resumes from the run's checkpoint. Parameters come from ``executor_options`` or the environment
  (see :func:`slurm_parameters`).
- ``submitit-local`` / ``debug``: the same submitit path with submitit's ``LocalExecutor``
  (subprocesses) or ``DebugExecutor`` (in process), to test it without a cluster.

A failed run does not stop the others; :func:`run_configs` raises :class:`RunFailedError` at the end,
naming each failed config's digest and error.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import multiprocessing
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
import submitit

from tvolib import paths
from tvolib.checkpoint import atomic_write
from tvolib.profiles import estimate_seconds, estimate_wall_seconds

__all__ = [
    "EXECUTORS",
    "CONFIG_KINDS",
    "RunFailedError",
    "ResultsMismatchError",
    "run_dir",
    "config_kind",
    "config_digest",
    "config_from_dict",
    "load_config",
    "run_status",
    "status",
    "plan",
    "format_plan",
    "run_one",
    "run_configs",
    "results_frame",
    "load_history",
    "load_schedule_history",
    "load_final",
    "load_model",
    "resolve_executor",
    "slurm_parameters",
    "SubmititRun",
]

#: Executor names accepted by :func:`run_configs` (and ``$TVOLIB_EXECUTOR``).
EXECUTORS: tuple[str, ...] = ("local", "slurm", "submitit-local", "debug")

#: ``kind`` -> (config class, default train function), as ``"module:attribute"`` paths, imported
#: lazily so that this module does not import the trainers. Tests may add kinds.
CONFIG_KINDS: dict[str, tuple[str, str]] = {
    "tvo": ("tvolib.train:RunConfig", "tvolib.train:train"),
    "pcfg": ("tvolib.pcfg:PCFGConfig", "tvolib.pcfg:train_pcfg"),
}

FINAL_FILE = "final.json"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
SCHEDULE_FILE = "schedule_history.csv"
ERROR_FILE = "error.txt"
CHECKPOINT_FILE = "checkpoint.pt"
MODEL_FILE = "model.pt"
WALL_FILE = "wall_time.json"

TrainFn = Callable[..., Any]


class RunFailedError(RuntimeError):
    """One or more runs of a sweep failed; ``failures`` maps ``<kind>-<digest>`` to the error text."""

    def __init__(self, failures: Mapping[str, str], results_root: Path | None = None) -> None:
        self.failures = dict(failures)
        where = f" (tracebacks in {results_root}/<run>/{ERROR_FILE})" if results_root else ""
        lines = [f"{len(self.failures)} run(s) failed{where}:"]
        lines += [f"  {key}: {msg.strip().splitlines()[0] if msg.strip() else msg}" for key, msg in self.failures.items()]
        super().__init__("\n".join(lines))


class ResultsMismatchError(RuntimeError):
    """A results folder holds a different config than the one that hashes to it."""


# --------------------------------------------------------------------------------------------
# Configs and folders
# --------------------------------------------------------------------------------------------

def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


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
    """The folder of ``config``'s results: ``results_root()/<kind>-<digest>`` (not created)."""
    return paths.results_root(results_root) / config_digest(config)


def _normalise(obj: Any) -> Any:
    """JSON round trip, so that tuples and lists compare equal."""
    return json.loads(json.dumps(obj, default=_json_default, sort_keys=True))


def _config_record(config: Any) -> dict[str, Any]:
    return {"kind": config_kind(config), "digest": config.digest(), "config": _normalise(config.to_dict())}


def config_from_dict(record: Mapping[str, Any]) -> Any:
    """Rebuild a config from a ``config.json`` record, or from a bare ``to_dict()`` (kind "tvo" unless
    the dict has a ``"kind"`` key)."""
    if not isinstance(record, Mapping):
        raise TypeError(f"a config record must be a JSON object, got {type(record).__name__}")
    if "config" in record and isinstance(record["config"], Mapping):
        kind, fields = record.get("kind", "tvo"), dict(record["config"])
    else:
        fields = dict(record)
        kind = fields.pop("kind", "tvo")
    if kind not in CONFIG_KINDS:
        raise ValueError(f"unknown config kind {kind!r}; accepted kinds: {', '.join(CONFIG_KINDS)}")
    cls = _import(CONFIG_KINDS[kind][0])
    config = cls.from_dict(fields)
    config.validate()
    return config


def load_config(path: str | os.PathLike[str]) -> Any:
    """Read a config from a JSON file (a run folder's ``config.json`` or a bare ``to_dict()``)."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no config file at {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    return config_from_dict(record)


def _check_folder(config: Any, folder: Path) -> None:
    """Raise :class:`ResultsMismatchError` if ``folder/config.json`` holds another config."""
    file = folder / CONFIG_FILE
    if not file.exists():
        return
    try:
        stored = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ResultsMismatchError(
            f"{file} is unreadable ({e}); the results folder is corrupt. Delete {folder} to recompute the run."
        ) from None
    expected = _config_record(config)
    if not isinstance(stored, dict) or stored.get("kind") != expected["kind"] or stored.get("config") != expected["config"]:
        raise ResultsMismatchError(
            f"results folder {folder} holds a different config than the one hashing to it "
            f"(digest collision or corruption).\n  stored:   {stored}\n  expected: {expected}\n"
            f"Delete the folder (or use another results root) to recompute the run."
        )


# --------------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------------

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


def _write_json(path: Path, obj: Any) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=True)
    atomic_write(path, lambda f: f.write(text + "\n"), "w")


def _cell(value: Any) -> Any:
    """A CSV cell: scalars as they are, anything structured (lists, tensors, dicts) as JSON."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=_json_default)
    return value


def _write_records_csv(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    frame = pd.DataFrame([{str(k): _cell(v) for k, v in dict(r).items()} for r in records])
    atomic_write(path, lambda f: frame.to_csv(f, index=False), "w")


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _read_records_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    for col in frame.columns:
        if frame[col].dtype == object or pd.api.types.is_string_dtype(frame[col]):
            frame[col] = frame[col].map(_decode).astype(object)
    return frame


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------

def run_status(config: Any, results_root: str | os.PathLike[str] | None = None) -> str:
    """``"done"`` (final.json present), ``"partial"`` (folder started, not finished) or ``"missing"``."""
    folder = run_dir(config, results_root)
    if (folder / FINAL_FILE).exists():
        return "done"
    if folder.exists() and any(folder.iterdir()):
        return "partial"
    return "missing"


def _unique(configs: Iterable[Any]) -> list[Any]:
    """Configs in first-seen order, duplicates (same kind and digest) dropped; each validated."""
    seen: dict[str, Any] = {}
    errors = []
    for i, config in enumerate(configs):
        key = config_digest(config)
        if key in seen:
            continue
        try:
            config.validate()
        except Exception as e:  # noqa: BLE001 - report every bad config at once
            errors.append(f"  config #{i} ({key}): {type(e).__name__}: {e}")
        seen[key] = config
    if errors:
        raise ValueError("invalid run config(s):\n" + "\n".join(errors))
    return list(seen.values())


def _fields(config: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(config):
        return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return dict(config.to_dict())


def status(configs: Iterable[Any], results_root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per distinct config: ``run`` (folder name), ``kind``, ``digest``, ``status`` ("done",
    "partial", "missing", or "conflict" when the folder holds another config), ``error`` (last line of
    error.txt, or the conflict), ``est_seconds`` and the config's fields."""
    rows = []
    for config in _unique(configs):
        folder = run_dir(config, results_root)
        error, state = "", run_status(config, results_root)
        try:
            _check_folder(config, folder)
        except ResultsMismatchError as e:
            error, state = str(e).splitlines()[0], "conflict"
        if not error and (folder / ERROR_FILE).exists() and not (folder / FINAL_FILE).exists():
            lines = (folder / ERROR_FILE).read_text().strip().splitlines()
            error = lines[-1] if lines else "failed"
        rows.append({
            "run": folder.name, "kind": config_kind(config), "digest": config.digest(),
            "status": state, "error": error,
            "est_seconds": estimate_seconds(config), **_fields(config),
        })
    return pd.DataFrame(rows)


def _fmt_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def plan(configs: Iterable[Any], *, results_root: str | os.PathLike[str] | None = None,
         workers: int | None = None) -> dict[str, Any]:
    """What :func:`run_configs` would do: counts of runs (total, cached, partial, missing, to run) and
    the estimated single-thread seconds and wall seconds on ``workers`` workers (cost model of
    :func:`tvolib.profiles.estimate_seconds`)."""
    frame = status(configs, results_root)
    todo = frame[frame["status"] != "done"] if len(frame) else frame
    workers = workers or _default_workers()
    costs = list(todo["est_seconds"]) if len(todo) else []
    return {
        "total": len(frame),
        "cached": int((frame["status"] == "done").sum()) if len(frame) else 0,
        "partial": int((frame["status"] == "partial").sum()) if len(frame) else 0,
        "missing": int((frame["status"] == "missing").sum()) if len(frame) else 0,
        "to_run": len(todo),
        "workers": workers,
        "est_cpu_seconds": float(sum(costs)),
        "est_wall_seconds": float(estimate_wall_seconds(costs, workers)) if costs else 0.0,
        "status": frame,
    }


def format_plan(p: Mapping[str, Any], executor: str = "local") -> str:
    """One line summarising :func:`plan`'s output."""
    line = (f"[tvolib] {p['total']} runs: {p['cached']} cached, {p['partial']} partial (resume), "
            f"{p['missing']} new -> {p['to_run']} to run")
    if p["to_run"]:
        line += (f" on executor '{executor}'"
                 + (f" with {p['workers']} worker(s)" if executor == "local" else "")
                 + f"; estimated {_fmt_seconds(p['est_wall_seconds'])} wall "
                 f"({_fmt_seconds(p['est_cpu_seconds'])} single-thread)")
    return line


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------

def _default_train_fn(kind: str) -> TrainFn:
    if kind not in CONFIG_KINDS:
        raise ValueError(f"no trainer for config kind {kind!r}; known kinds: {', '.join(CONFIG_KINDS)}")
    return _import(CONFIG_KINDS[kind][1])


def _resolve_train_fn(train_fn: TrainFn | Mapping[str, TrainFn] | None, kind: str) -> TrainFn:
    if train_fn is None:
        return _default_train_fn(kind)
    if isinstance(train_fn, Mapping):
        return train_fn[kind] if kind in train_fn else _default_train_fn(kind)
    return train_fn


def _call_train(fn: TrainFn, config: Any, folder: Path, options: Mapping[str, Any]) -> Any:
    """Call ``fn(config, folder, **options)``, passing only the options ``fn`` accepts
    (``train_pcfg`` takes no ``data_root``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(config, folder, **options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn(config, folder, **options)
    return fn(config, folder, **{k: v for k, v in options.items() if k in params})


def _get(result: Any, name: str, default: Any) -> Any:
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def _read_wall(folder: Path) -> float:
    try:
        return float(json.loads((folder / WALL_FILE).read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def run_one(
    config: Any,
    *,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    device: str | None = None,
    progress: bool | None = None,
    train_fn: TrainFn | Mapping[str, TrainFn] | None = None,
) -> dict[str, Any]:
    """Run ``config`` to completion in this process (or read it if complete); return its final metrics.

    The trainer gets the run folder and resumes from its ``checkpoint.pt`` if present. Its
    ``history`` / ``schedule_history`` go to CSV and ``final`` to ``final.json`` (last). On an
    exception the traceback is written to ``error.txt`` and the exception re-raised.
    ``final.json`` also records ``wall_seconds`` (summed over attempts that ended in this function,
    unless the trainer reports its own) and ``digest``.
    """
    kind = config_kind(config)
    config.validate()
    folder = run_dir(config, results_root)
    folder.mkdir(parents=True, exist_ok=True)
    _check_folder(config, folder)
    if (folder / FINAL_FILE).exists():
        return load_final(config, results_root)
    if not (folder / CONFIG_FILE).exists():
        _write_json(folder / CONFIG_FILE, _config_record(config))
    (folder / ERROR_FILE).unlink(missing_ok=True)
    fn = _resolve_train_fn(train_fn, kind)
    previous = _read_wall(folder)
    start = time.perf_counter()
    try:
        result = _call_train(fn, config, folder, {"data_root": data_root, "device": device, "progress": progress})
        history = list(_get(result, "history", []) or [])
        schedule_history = list(_get(result, "schedule_history", []) or [])
        final = dict(_get(result, "final", {}) or {})
        if final.get("completed", True) is False:
            raise RuntimeError(
                f"the trainer returned an incomplete run ({final.get('epochs')} of {getattr(config, 'epochs', '?')} "
                f"epochs); not marking {folder.name} as done"
            )
        _write_records_csv(folder / HISTORY_FILE, history)
        _write_records_csv(folder / SCHEDULE_FILE, schedule_history)
        final.setdefault("wall_seconds", previous + time.perf_counter() - start)
        final["digest"] = config.digest()
        final["kind"] = kind
        _write_json(folder / FINAL_FILE, final)  # last: marks completion
    except Exception:
        _write_json(folder / WALL_FILE, {"seconds": previous + time.perf_counter() - start})
        atomic_write(folder / ERROR_FILE, lambda f: f.write(traceback.format_exc()), "w")
        raise
    return final


def _run_job(config: Any, options: dict[str, Any]) -> tuple[str, str | None]:
    """Worker entry point: never raises (exceptions may not pickle); returns (run name, error or None)."""
    name = config_digest(config)
    try:
        run_one(config, **options)
        return name, None
    except Exception as e:  # noqa: BLE001 - reported by run_configs after the others finish
        return name, f"{type(e).__name__}: {e}"


def _init_worker() -> None:
    """Pool initializer: one torch thread per worker so that workers do not oversubscribe the cores."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


# --------------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------------

def resolve_executor(executor: str | None = None) -> str:
    """``executor``, else ``$TVOLIB_EXECUTOR``, else ``"local"``; a clear ``ValueError`` if unknown."""
    name = executor or os.environ.get("TVOLIB_EXECUTOR") or "local"
    key = name.strip().lower().replace("_", "-")
    if key not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; accepted executors: {', '.join(EXECUTORS)} "
                         f"(argument 'executor' or $TVOLIB_EXECUTOR)")
    return key


def _default_workers() -> int:
    env = os.environ.get("TVOLIB_MAX_WORKERS")
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"$TVOLIB_MAX_WORKERS must be a positive int, got {env!r}") from None
        if value < 1:
            raise ValueError(f"$TVOLIB_MAX_WORKERS must be a positive int, got {env!r}")
        return value
    return os.cpu_count() or 1


def _progress_bar(total: int, enabled: bool, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit="run", file=sys.stdout)


def _run_in_process(todo: Sequence[Any], options: dict[str, Any], progress: bool) -> dict[str, str]:
    failures: dict[str, str] = {}
    with _progress_bar(len(todo), progress, "runs") as bar:
        for config in todo:
            name, error = _run_job(config, options)
            if error is not None:
                failures[name] = error
            bar.update(1)
    return failures


def _run_pool(todo: Sequence[Any], options: dict[str, Any], workers: int, progress: bool) -> dict[str, str]:
    failures: dict[str, str] = {}
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker)
    try:
        futures = {pool.submit(_run_job, config, options): config_digest(config) for config in todo}
        with _progress_bar(len(todo), progress, "runs") as bar:
            for future in as_completed(futures):
                try:
                    name, error = future.result()
                except Exception as e:  # noqa: BLE001 - a worker died (e.g. out of memory)
                    name, error = futures[future], f"{type(e).__name__}: {e} (worker process died)"
                if error is not None:
                    failures[name] = error
                bar.update(1)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return failures


def slurm_parameters(**overrides: Any) -> dict[str, Any]:
    """submitit ``AutoExecutor`` parameters for the ``slurm`` executor, from the environment.

    ``TVOLIB_SLURM_TIMEOUT_MIN`` (default 720), ``TVOLIB_SLURM_PARTITION`` (none),
    ``TVOLIB_SLURM_GPUS`` (GPUs per job, default 0), ``TVOLIB_SLURM_CPUS`` (default 4),
    ``TVOLIB_SLURM_MEM_GB`` (default 16), ``TVOLIB_SLURM_ARRAY_PARALLELISM`` (default 64),
    ``TVOLIB_SLURM_ACCOUNT`` (none). Keyword ``overrides`` (submitit names, e.g.
    ``slurm_partition="gpu"``, ``timeout_min=60``) win.
    """
    env = os.environ.get

    def number(name: str, default: str, cast: type) -> Any:
        raw = env(name, default)
        try:
            return cast(raw)
        except ValueError:
            raise ValueError(f"${name} must be a {cast.__name__}, got {raw!r}") from None

    params: dict[str, Any] = {
        "name": "tvolib",
        "timeout_min": number("TVOLIB_SLURM_TIMEOUT_MIN", "720", int),
        "gpus_per_node": number("TVOLIB_SLURM_GPUS", "0", int),
        "cpus_per_task": number("TVOLIB_SLURM_CPUS", "4", int),
        "mem_gb": number("TVOLIB_SLURM_MEM_GB", "16", float),
        "slurm_array_parallelism": number("TVOLIB_SLURM_ARRAY_PARALLELISM", "64", int),
    }
    if env("TVOLIB_SLURM_PARTITION"):
        params["slurm_partition"] = env("TVOLIB_SLURM_PARTITION")
    if env("TVOLIB_SLURM_ACCOUNT"):
        params["slurm_account"] = env("TVOLIB_SLURM_ACCOUNT")
    params.update(overrides)
    return params


class SubmititRun(submitit.helpers.Checkpointable):
    """A submitit job: ``run_one`` with fixed options. On timeout or preemption submitit calls
    :meth:`checkpoint` (inherited), which re-submits this same call; the trainer then resumes from
    the run's ``checkpoint.pt``, so a long run spans several jobs (requeue through checkpoints)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)

    def __call__(self, config: Any) -> dict[str, Any]:
        _init_threads_from_slurm()
        return run_one(config, **self.options)


def _init_threads_from_slurm() -> None:
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and cpus.isdigit():
        import torch

        torch.set_num_threads(int(cpus))


def _run_submitit(todo: Sequence[Any], options: dict[str, Any], executor: str, folder: Path,
                  progress: bool, executor_options: Mapping[str, Any]) -> dict[str, str]:
    cluster = {"slurm": "slurm", "submitit-local": "local", "debug": "debug"}[executor]
    ex = submitit.AutoExecutor(folder=folder, cluster=cluster)
    if cluster == "slurm":
        params = slurm_parameters(**executor_options)
    else:
        params = {"name": "tvolib", "timeout_min": 60, **executor_options}
    ex.update_parameters(**params)
    jobs = ex.map_array(SubmititRun(options), list(todo))
    names = [config_digest(c) for c in todo]
    failures: dict[str, str] = {}
    with _progress_bar(len(jobs), progress, f"runs ({executor})") as bar:
        for job, name in zip(jobs, names):
            try:
                job.result()
            except Exception as e:  # noqa: BLE001 - collected and raised after all jobs
                failures[name] = f"{type(e).__name__}: {e}"
            bar.update(1)
    return failures


def run_configs(
    configs: Iterable[Any],
    *,
    executor: str | None = None,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    max_workers: int | None = None,
    progress: bool = True,
    device: str | None = None,
    dry_run: bool = False,
    train_fn: TrainFn | Mapping[str, TrainFn] | None = None,
    executor_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Make sure every config has a complete run, then return one row per distinct config.

    Rows hold ``run`` (folder name), ``kind``, ``digest``, the config's fields and the final
    metrics (see :func:`results_frame`). Identical configs are run once; complete runs are read,
    never recomputed; partial ones resume. The plan (runs total/cached/partial/new, estimated wall
    time) is printed first when ``progress`` (or ``dry_run``). With ``dry_run`` nothing runs and the
    :func:`status` frame is returned. ``train_fn`` (a callable, or ``{kind: callable}``; must be
    picklable for process executors) replaces the trainers, for tests. Raises
    :class:`RunFailedError` after all runs finished if any failed.
    """
    name = resolve_executor(executor)
    root = paths.results_root(results_root)
    unique = _unique(configs)
    if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
        raise ValueError(f"max_workers must be a positive int or None, got {max_workers!r}")
    workers = max_workers or _default_workers()
    p = plan(unique, results_root=root, workers=workers)
    if progress or dry_run:
        print(format_plan(p, name), flush=True)
    if dry_run:
        return p["status"]
    for config in unique:  # a folder holding another config is an error before anything runs
        _check_folder(config, run_dir(config, root))
    frame = p["status"]
    todo = [c for c, s in zip(unique, frame["status"] if len(frame) else []) if s != "done"]
    if todo:
        # Largest first: a pool fed this way approaches the best makespan (LPT).
        todo.sort(key=estimate_seconds, reverse=True)
        options = {"results_root": str(root), "data_root": None if data_root is None else str(data_root),
                   "device": device, "train_fn": train_fn}
        if name == "local":
            workers = min(workers, len(todo))
            if workers == 1:
                failures = _run_in_process(todo, {**options, "progress": None}, progress)
            else:
                failures = _run_pool(todo, {**options, "progress": False}, workers, progress)
        else:
            failures = _run_submitit(todo, {**options, "progress": False}, name, root / "submitit",
                                     progress, dict(executor_options or {}))
        if failures:
            raise RunFailedError(failures, root)
    return results_frame(unique, results_root=root)


# --------------------------------------------------------------------------------------------
# Reading results
# --------------------------------------------------------------------------------------------

def _complete_folder(config: Any, results_root: str | os.PathLike[str] | None) -> Path:
    folder = run_dir(config, results_root)
    if not (folder / FINAL_FILE).exists():
        state = run_status(config, results_root)
        raise FileNotFoundError(
            f"run {folder.name} is not complete (status: {state}; folder {folder}); run it first with "
            f"tvolib.experiments.run_configs([config]) or `python -m tvolib run-config`"
        )
    _check_folder(config, folder)
    return folder


def load_final(config: Any, results_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The final metrics of a complete run (``final.json``)."""
    folder = _complete_folder(config, results_root)
    return json.loads((folder / FINAL_FILE).read_text())


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts, cells that were absent in the original record (NaN) left out."""
    out = []
    for row in frame.to_dict("records"):
        rec = {}
        for key, value in row.items():
            if isinstance(value, float) and value != value:  # NaN: the record did not have this key
                continue
            rec[key] = value.item() if hasattr(value, "item") else value
        out.append(rec)
    return out


def load_history(config: Any, results_root: str | os.PathLike[str] | None = None, *,
                 as_records: bool = False) -> pd.DataFrame | list[dict[str, Any]]:
    """Per-epoch history of a complete run (structured cells such as ``betas`` decoded back to
    lists); ``as_records`` gives the trainer's list of dicts instead (absent keys left out)."""
    frame = _read_records_csv(_complete_folder(config, results_root) / HISTORY_FILE)
    return _records(frame) if as_records else frame


def load_schedule_history(config: Any, results_root: str | os.PathLike[str] | None = None, *,
                          as_records: bool = False) -> pd.DataFrame | list[dict[str, Any]]:
    """Bandit rounds of a complete run (empty for fixed schedules); ``as_records`` gives the
    trainer's ``schedule_history`` list of dicts back (e.g. for ``tvolib.bandit.reward_posterior``)."""
    frame = _read_records_csv(_complete_folder(config, results_root) / SCHEDULE_FILE)
    return _records(frame) if as_records else frame


def load_model(config: Any, results_root: str | os.PathLike[str] | None = None, **kwargs: Any) -> Any:
    """The trained model of a complete run (delegates to ``tvolib.train.load_model``)."""
    folder = _complete_folder(config, results_root)
    loader = _import("tvolib.pcfg:load_model" if config_kind(config) == "pcfg" else "tvolib.train:load_model")
    return loader(config, folder, **kwargs)


def results_frame(configs: Iterable[Any], results_root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per distinct complete config: ``run``, ``kind``, ``digest``, the config's fields and
    its final metrics (a metric named like a config field gets the prefix ``final_``)."""
    rows = []
    for config in _unique(configs):
        fields = _fields(config)
        row: dict[str, Any] = {"run": config_digest(config), "kind": config_kind(config), "digest": config.digest()}
        row.update(fields)
        for key, value in load_final(config, results_root).items():
            if key in ("digest", "kind"):
                continue
            row[f"final_{key}" if key in row else key] = value
        rows.append(row)
    return pd.DataFrame(rows)
