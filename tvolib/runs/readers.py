"""Reading complete runs back: final metrics, histories, the trained model, one frame per sweep.

Every reader first verifies the folder (:func:`tvolib.runs.store.check_run`): a corrupt or foreign
folder raises :class:`~tvolib.runs.store.RunFolderError`, an unfinished run ``FileNotFoundError``.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from tvolib.runs.kinds import get_kind
from tvolib.runs.store import (
    FINAL_FILE, HISTORY_FILE, SCHEDULE_FILE, check_run, config_digest, config_kind, read_records_csv, run_dir,
)

__all__ = ["load_final", "load_history", "load_schedule_history", "load_model", "results_frame",
           "config_fields", "unique_configs"]

Root = str | os.PathLike[str] | None


def _complete_folder(config: Any, results_root: Root) -> Path:
    state = check_run(config, results_root)
    folder = run_dir(config, results_root)
    if state.status != "done":
        raise FileNotFoundError(
            f"run {folder.name} is not complete (status: {state.status}; folder {folder}); run it first with "
            f"tvolib.runs.run_configs([config]) or `python -m tvolib run-config`"
        )
    return folder


def load_final(config: Any, results_root: Root = None) -> dict[str, Any]:
    """The final metrics of a complete run.

    Args:
        config: a run config.
        results_root: the results folder (default ``$TVOLIB_RESULTS`` or ``<repo>/results``).

    Returns:
        The content of ``final.json``, e.g. ``{"test_log_px": -92.1, "epochs": 60, "kind": "tvo", ...}``.
    """
    return json.loads((_complete_folder(config, results_root) / FINAL_FILE).read_text())


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


def load_history(config: Any, results_root: Root = None, *,
                 as_records: bool = False) -> pd.DataFrame | list[dict[str, Any]]:
    """The per-epoch history of a complete run.

    Args:
        config: a run config.
        results_root: the results folder.
        as_records: return the trainer's list of dicts (keys absent from a row left out).

    Returns:
        A frame with one row per epoch (structured cells such as ``betas`` decoded back to lists),
        or the list of dicts.
    """
    frame = read_records_csv(_complete_folder(config, results_root) / HISTORY_FILE)
    return _records(frame) if as_records else frame


def load_schedule_history(config: Any, results_root: Root = None, *,
                          as_records: bool = False) -> pd.DataFrame | list[dict[str, Any]]:
    """The bandit rounds of a complete run (empty for fixed schedules).

    Args:
        config: a run config.
        results_root: the results folder.
        as_records: return the trainer's ``schedule_history`` list of dicts (e.g. for
            ``tvolib.bandit.reward_posterior``).

    Returns:
        A frame with one row per round, or the list of dicts.
    """
    frame = read_records_csv(_complete_folder(config, results_root) / SCHEDULE_FILE)
    return _records(frame) if as_records else frame


def load_model(config: Any, results_root: Root = None, **kwargs: Any) -> Any:
    """The trained model of a complete run, through its kind's ``load_model`` (``kwargs``: ``device``)."""
    folder = _complete_folder(config, results_root)
    return get_kind(config_kind(config)).load_model(config, folder, **kwargs)


def config_fields(config: Any) -> dict[str, Any]:
    """The config's fields by name (dataclass values as they are, else ``to_dict()``)."""
    if dataclasses.is_dataclass(config):
        return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return dict(config.to_dict())


def unique_configs(configs: Iterable[Any]) -> list[Any]:
    """Configs in first-seen order, duplicates (same kind and digest) dropped, each validated.

    Raises:
        ValueError: listing every invalid config at once.
    """
    seen: dict[str, Any] = {}
    errors = []
    for i, config in enumerate(configs):
        config_kind(config)  # a clear TypeError for what is not a run config
        try:
            key = config_digest(config)
        except (TypeError, ValueError) as e:  # a field value JSON cannot hold: no digest, hence no folder
            errors.append(f"config #{i} ({type(config).__name__}): a field holds a value that cannot be stored "
                          f"({e}); use Python numbers, strings, None or tuples of those")
            continue
        if key in seen:
            continue
        try:
            config.validate()
        except (ValueError, TypeError) as e:
            errors.append(f"config #{i} ({key}): {type(e).__name__}: {e}")
        seen[key] = config
    if errors:
        raise ValueError("invalid run config(s): " + "; ".join(errors))
    return list(seen.values())


def results_frame(configs: Iterable[Any], results_root: Root = None) -> pd.DataFrame:
    """One row per distinct complete config.

    Args:
        configs: run configs (duplicates read once).
        results_root: the results folder.

    Returns:
        Columns ``run``, ``kind``, ``digest``, the config's fields and its final metrics (a metric
        named like a config field gets the prefix ``final_``).
    """
    rows = []
    for config in unique_configs(configs):
        row: dict[str, Any] = {"run": config_digest(config), "kind": config_kind(config), "digest": config.digest()}
        row.update(config_fields(config))
        for key, value in load_final(config, results_root).items():
            if key in ("digest", "kind"):
                continue
            row[f"final_{key}" if key in row else key] = value
        rows.append(row)
    return pd.DataFrame(rows)
