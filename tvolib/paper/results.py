"""Reading completed runs back for the figures: histories tagged with their configs, dataset
labels, Fig 2's GP posteriors and Fig 1's trained model and test data."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from tvolib import runs
from tvolib.bandit import reward_posterior
from tvolib.data import load_dataset
from tvolib.paper.analysis import as_float_list
from tvolib.paper.names import dataset_label
from tvolib.plotting.bandit import RewardPanel

__all__ = [
    "config_fields",
    "config_frame",
    "collect_histories",
    "collect_schedule_histories",
    "dataset_labels",
    "reward_panels",
    "last_schedule",
    "trained_model_and_test_data",
]

def config_fields(config: Any) -> dict[str, Any]:
    """The scalar fields of a config (list/dict-valued ones would break ``groupby``)."""
    fields = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    return {k: v for k, v in fields.items() if not isinstance(v, (list, tuple, dict, set))}


def config_frame(configs: Sequence[Any]) -> pd.DataFrame:
    """One row of scalar config fields per config."""
    return pd.DataFrame([config_fields(c) for c in configs])


def _collect(configs: Sequence[Any], parts: list[pd.DataFrame], what: str) -> pd.DataFrame:
    tagged = []
    for config, part in zip(configs, parts):
        if part is None or len(part) == 0:
            continue
        part = part.copy()
        for key, value in config_fields(config).items():
            if key not in part.columns:
                part[key] = value
        tagged.append(part)
    if not tagged:
        raise ValueError(f"{what}: none of the {len(configs)} configs has a recorded history")
    return pd.concat(tagged, ignore_index=True)


def collect_histories(configs: Sequence[Any], results_root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The per-epoch histories of completed ``configs``, each row tagged with its config's scalar
    fields (``schedule``, ``d``, ``S``, ``seed``, ...)."""
    parts = [runs.load_history(c, results_root) for c in configs]
    return _collect(configs, parts, "collect_histories")


def collect_schedule_histories(configs: Sequence[Any],
                               results_root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """As :func:`collect_histories` for the bandit logs (one row per bandit round)."""
    parts = [runs.load_schedule_history(c, results_root) for c in configs]
    return _collect(configs, parts, "collect_schedule_histories")


def dataset_labels(frame: pd.DataFrame, data_root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Figure labels of the datasets in ``frame`` as the data that trained the runs state them
    (Omniglot derived from the 105x105 images reads "omniglot (derived 28x28)").

    Read from the results' ``dataset_label`` column where the runs recorded it; for runs without
    it (results written before the label was recorded), from the data loader's label.

    Raises:
        ValueError: runs of one dataset recorded different labels, i.e. were trained on different
            files (Omniglot's ``chardata.mat`` and its derived 28x28 set): one figure would mix them.
    """
    labels: dict[str, str] = {}
    for name in dict.fromkeys(frame["dataset"]):
        rows = frame[frame["dataset"] == name]
        recorded = rows["dataset_label"].dropna() if "dataset_label" in rows.columns else pd.Series(dtype=str)
        found = dict.fromkeys(str(label) for label in recorded)
        if len(found) > 1:
            raise ValueError(f"the runs of dataset {name!r} were trained on different data "
                             f"({', '.join(map(repr, found))}); one figure cannot mix them. Keep one set of "
                             "files under the data root and delete the runs trained on the others (each "
                             "run's final.json records its dataset_label)")
        if found:
            labels[name] = next(iter(found))
        else:
            labels[name] = load_dataset(name, data_root, n_train=1, n_test=1).label
    return {name: dataset_label(name, labels=labels) for name in labels}


def reward_panels(schedule_history: pd.DataFrame, positions: Sequence[int], *, grid_size: int = 200,
                  bounds: tuple[float, float] = (0.0, 1.0)) -> list[RewardPanel]:
    """Fig 2's stages: the GP posterior of the reward on a beta_1 grid after the bandit rounds at
    row ``positions`` (:func:`tvolib.paper.analysis.stage_rounds`), rebuilt from the recorded
    rounds by :func:`tvolib.bandit.reward_posterior`."""
    hist = schedule_history.reset_index(drop=True)
    rounds = hist["round"].to_numpy() if "round" in hist.columns else np.arange(len(hist))
    grid = np.linspace(bounds[0], bounds[1], grid_size).reshape(-1, 1)
    panels = []
    for pos in positions:
        mean, std = reward_posterior(hist, int(rounds[pos]), grid)
        panels.append(RewardPanel(position=int(pos), round=int(rounds[pos]), epoch=int(hist["epoch"].iloc[pos]),
                                  grid=grid[:, 0], mean=np.asarray(mean, dtype=float).reshape(-1),
                                  std=np.asarray(std, dtype=float).reshape(-1)))
    return panels


def last_schedule(config: Any, results_root: str | os.PathLike[str] | None = None) -> list[float]:
    """The schedule (left points) of a completed run's last epoch."""
    history = runs.load_history(config, results_root)
    return as_float_list(history["betas"].dropna().iloc[-1])


def trained_model_and_test_data(
    config: Any,
    n_data: int,
    *,
    data_root: str | os.PathLike[str] | None = None,
    results_root: str | os.PathLike[str] | None = None,
) -> tuple[Any, torch.Tensor, str]:
    """A completed run's trained model, the first ``n_data`` test examples of its own data subset
    (on the model's device) and the data's label."""
    model = runs.load_model(config, results_root)
    data = load_dataset(config.dataset, data_root, n_train=config.n_train, n_test=config.n_test,
                        seed=config.data_seed)
    return model, data.test[:n_data].to(next(model.parameters()).device), data.label
