"""What a sweep would do before it runs: the cache status of every config and the estimated cost.

The cost of one run comes from :func:`tvolib.runs.cost.estimate_seconds` (single-thread CPU
seconds); the wall time on ``workers`` parallel workers from
:func:`tvolib.runs.cost.estimate_wall_seconds` (largest run first). With stacking, the runs to do
are grouped into jobs (:func:`tvolib.runs.stacks.stack_jobs`), and on a GPU the wall time comes
from :func:`tvolib.runs.cost.estimate_gpu_seconds`.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import pandas as pd

from tvolib import paths
from tvolib.runs.cost import estimate_gpu_seconds, estimate_seconds, estimate_wall_seconds
from tvolib.runs.readers import config_fields, unique_configs
from tvolib.runs.stacks import stack_jobs, stack_label
from tvolib.runs.store import ERROR_FILE, PROBLEMS, config_kind, error_headline, inspect_run, run_dir
from tvolib.training.run_folder import check_folder_path

__all__ = ["status", "plan", "format_plan", "format_seconds", "default_workers", "run_status"]

Root = str | os.PathLike[str] | None


def default_workers() -> int:
    """``$TVOLIB_MAX_WORKERS``, else the number of CPUs; a ``ValueError`` for a bad variable."""
    env = os.environ.get("TVOLIB_MAX_WORKERS")
    if not env:
        return os.cpu_count() or 1
    try:
        value = int(env)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"$TVOLIB_MAX_WORKERS must be a positive int, got {env!r}")
    return value


def run_status(config: Any, results_root: Root = None) -> str:
    """The verified status of one run: ``"done"``, ``"partial"``, ``"missing"``, ``"corrupt"`` or ``"foreign"``."""
    return inspect_run(config, results_root).status


def _last_error(folder: Any) -> str:
    try:
        return error_headline((folder / ERROR_FILE).read_text(errors="replace"))
    except OSError:
        return ""


def status(configs: Iterable[Any], results_root: Root = None) -> pd.DataFrame:
    """The cache status of every distinct config, problems included.

    Args:
        configs: run configs (duplicates reported once; each is validated).
        results_root: the results folder (default ``$TVOLIB_RESULTS`` or ``<repo>/results``).

    Returns:
        One row per config: ``run`` (folder name), ``kind``, ``digest``, ``status`` (see
        :func:`run_status`), ``error`` (the reason of a corrupt/foreign folder, else the last line
        of ``error.txt`` of an unfinished run), ``est_seconds``, ``stack`` (:func:`~tvolib.runs.stacks.stack_label`:
        runs with equal labels can train as one stack) and the config's fields.

    Example:
        >>> status(sweeps.fig4_vae_mnist_fashion("smoke"))["status"].value_counts()  # doctest: +SKIP
    """
    check_folder_path(paths.results_root(results_root), what="results root",
                      advice="choose another (--results-root / $TVOLIB_RESULTS)")
    rows = []
    for config in unique_configs(configs):
        folder = run_dir(config, results_root)
        state = inspect_run(config, results_root)
        error = state.reason
        if state.status in ("partial", "missing") and folder.is_dir() and (folder / ERROR_FILE).exists():
            error = _last_error(folder)
        rows.append({
            "run": folder.name, "kind": config_kind(config), "digest": config.digest(),
            "status": state.status, "error": error,
            "est_seconds": estimate_seconds(config), "stack": stack_label(config), **config_fields(config),
        })
    return pd.DataFrame(rows)


def _count(frame: pd.DataFrame, *states: str) -> int:
    return int(frame["status"].isin(states).sum()) if len(frame) else 0


def plan(configs: Iterable[Any], *, results_root: Root = None, workers: int | None = None,
         max_stack: int | None = None, gpu: bool = False) -> dict[str, Any]:
    """What :func:`tvolib.runs.run_configs` would do.

    Args:
        configs: run configs.
        results_root: the results folder.
        workers: parallel workers assumed for the wall time (default :func:`default_workers`).
        max_stack: the stack size when runs are stacked (``None``: no stacking).
        gpu: price the runs on one GPU (:func:`~tvolib.runs.cost.estimate_gpu_seconds`) instead
            of on ``workers`` CPU processes.

    Returns:
        ``total``, ``cached``, ``partial``, ``missing``, ``problems`` (corrupt or foreign),
        ``to_run`` (everything not done), ``workers``, ``stacks`` (jobs of more than one run),
        ``stacked_runs``, ``max_stack``, ``gpu``, ``est_cpu_seconds``, ``est_wall_seconds`` and
        ``status`` (the :func:`status` frame).
    """
    configs = unique_configs(configs)
    frame = status(configs, results_root)
    done = set(frame.loc[frame["status"] == "done", "run"]) if len(frame) else set()
    todo_configs = [c for c in configs if run_dir(c, results_root).name not in done]
    jobs = stack_jobs(todo_configs, max_stack) if max_stack else [[c] for c in todo_configs]
    stacks = [job for job in jobs if len(job) > 1]
    workers = workers or default_workers()
    costs = dict(zip(frame["run"], frame["est_seconds"])) if len(frame) else {}
    if not todo_configs:
        wall = 0.0
    elif gpu:
        wall = estimate_gpu_seconds(jobs)["wall_seconds"]
    else:
        wall = estimate_wall_seconds([sum(costs[run_dir(c, results_root).name] for c in job) for job in jobs], workers)
    return {
        "total": len(frame),
        "cached": _count(frame, "done"),
        "partial": _count(frame, "partial"),
        "missing": _count(frame, "missing"),
        "problems": _count(frame, *PROBLEMS),
        "to_run": len(todo_configs),
        "workers": workers,
        "stacks": len(stacks),
        "stacked_runs": sum(len(job) for job in stacks),
        "max_stack": max_stack,
        "gpu": gpu,
        "est_cpu_seconds": float(sum(costs[run_dir(c, results_root).name] for c in todo_configs)),
        "est_wall_seconds": float(wall),
        "status": frame,
    }


def format_seconds(s: float) -> str:
    """``"42 s"``, ``"12.5 min"`` or ``"3.2 h"``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def format_plan(p: Mapping[str, Any], executor: str = "local") -> str:
    """One line summarising :func:`plan`'s output, e.g.
    ``[tvolib] 16 runs: 4 cached, 1 partial (resume), 11 new -> 12 to run on executor 'local' ...``."""
    line = f"[tvolib] {p['total']} runs: {p['cached']} cached, {p['partial']} partial (resume), {p['missing']} new"
    if p.get("problems"):
        line += f", {p['problems']} corrupt or foreign"
    line += f" -> {p['to_run']} to run"
    if p.get("stacks"):
        line += f" ({p['stacked_runs']} of them in {p['stacks']} stack(s) of at most {p['max_stack']} runs)"
    if p["to_run"]:
        where = f" with {p['workers']} worker(s)" if executor == "local" and not p.get("gpu") else ""
        wall = " on one GPU" if p.get("gpu") else " wall"
        line += (f" on executor '{executor}'{where}; estimated {format_seconds(p['est_wall_seconds'])}{wall} "
                 f"({format_seconds(p['est_cpu_seconds'])} single-thread CPU)")
    return line
