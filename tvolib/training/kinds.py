"""The trainers by config kind: the plain registry a runner dispatches on, and the one ``load_model``.

Every trainer has the signature ``(config, run_dir=None, *, data_root=None, device=None,
progress=None)`` and returns a :class:`~tvolib.training.loop.RunResult`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from tvolib.config import ExperimentConfig, resolve_device
from tvolib.training.run_folder import MODEL_NAME
from tvolib.training.images import RunConfig, load_image_model, train
from tvolib.training.loop import RunResult
from tvolib.training.pcfg import PCFGConfig, load_pcfg_models, train_pcfg

__all__ = ["CONFIG_KINDS", "TRAINERS", "load_model"]

#: config kind -> config class.
CONFIG_KINDS: dict[str, type[ExperimentConfig]] = {RunConfig.kind: RunConfig, PCFGConfig.kind: PCFGConfig}
#: config kind -> trainer.
TRAINERS: dict[str, Callable[..., RunResult]] = {RunConfig.kind: train, PCFGConfig.kind: train_pcfg}
_LOADERS: dict[str, Callable[[Any, Path, torch.device], Any]] = {
    RunConfig.kind: load_image_model, PCFGConfig.kind: load_pcfg_models}


def load_model(config: Any, run_dir: str | Path, *, device: str | torch.device | None = "cpu") -> Any:
    """The trained model of a complete run in ``run_dir`` (its ``model.pt``), in eval mode.

    Args:
        config: the run's config (a :class:`RunConfig` or :class:`PCFGConfig`).
        run_dir: the run's results folder.
        device: where to put the model (default CPU).

    Returns:
        The image model (an ``nn.Module``) or, for the PCFG, a
        :class:`~tvolib.training.pcfg.PCFGModels` ``(grammar, model, inference_network)``.

    Example:
        >>> model = load_model(config, "results/tvo-d01831eb8b26")  # doctest: +SKIP
    """
    kind = getattr(config, "kind", None)
    if kind not in _LOADERS:
        raise ValueError(f"config must be one of {[c.__name__ for c in CONFIG_KINDS.values()]}; "
                         f"got {type(config).__name__}")
    path = Path(run_dir) / MODEL_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the run is not complete; train it to the end first")
    return _LOADERS[kind](config, path, resolve_device(device))
