"""What a sweep would do before it runs: the cache status of every config and the estimated cost.

The cost of one run comes from :func:`tvolib.runs.cost.estimate_seconds` (single-thread CPU
seconds); the wall time on ``workers`` parallel workers from
:func:`tvolib.runs.cost.estimate_wall_seconds` (largest run first).
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import pandas as pd

from tvolib.runs.cost import estimate_seconds, estimate_wall_seconds
from tvolib.runs.readers import config_fields, unique_configs
from tvolib.runs.store import ERROR_FILE, PROBLEMS, config_kind, error_headline, inspect_run, run_dir

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
        of ``error.txt`` of an unfinished run), ``est_seconds`` and the config's fields.

    Example:
        >>> status(sweeps.fig4_vae_mnist_fashion("smoke"))["status"].value_counts()  # doctest: +SKIP
    """
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
            "est_seconds": estimate_seconds(config), **config_fields(config),
        })
    return pd.DataFrame(rows)


def _count(frame: pd.DataFrame, *states: str) -> int:
    return int(frame["status"].isin(states).sum()) if len(frame) else 0


def plan(configs: Iterable[Any], *, results_root: Root = None, workers: int | None = None) -> dict[str, Any]:
    """What :func:`tvolib.runs.run_configs` would do.

    Args:
        configs: run configs.
        results_root: the results folder.
        workers: parallel workers assumed for the wall time (default :func:`default_workers`).

    Returns:
        ``total``, ``cached``, ``partial``, ``missing``, ``problems`` (corrupt or foreign),
        ``to_run`` (everything not done), ``workers``, ``est_cpu_seconds``, ``est_wall_seconds``
        and ``status`` (the :func:`status` frame).
    """
    frame = status(configs, results_root)
    todo = frame[frame["status"] != "done"] if len(frame) else frame
    workers = workers or default_workers()
    costs = list(todo["est_seconds"]) if len(todo) else []
    return {
        "total": len(frame),
        "cached": _count(frame, "done"),
        "partial": _count(frame, "partial"),
        "missing": _count(frame, "missing"),
        "problems": _count(frame, *PROBLEMS),
        "to_run": len(todo),
        "workers": workers,
        "est_cpu_seconds": float(sum(costs)),
        "est_wall_seconds": float(estimate_wall_seconds(costs, workers)) if costs else 0.0,
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
    if p["to_run"]:
        line += (f" on executor '{executor}'"
                 + (f" with {p['workers']} worker(s)" if executor == "local" else "")
                 + f"; estimated {format_seconds(p['est_wall_seconds'])} wall "
                 f"({format_seconds(p['est_cpu_seconds'])} single-thread)")
    return line
