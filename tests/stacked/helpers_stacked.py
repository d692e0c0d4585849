"""Shared builders for the stacked-run tests: K single models with their own seeds, and their stack."""
from __future__ import annotations

import torch

from tvolib.models import build_model
from tvolib.stacked import StackedModel

SEEDS = (1, 2, 3)
B, S = 32, 8


def single_models(name: str, seeds=SEEDS) -> list:
    """One model per seed, initialised as the single-run trainer does (global seed, then build)."""
    mean = torch.linspace(0.05, 0.95, 784)
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(build_model(name, train_mean=mean))
    return models


def stack_of(name: str, seeds=SEEDS) -> tuple[StackedModel, list]:
    models = single_models(name, seeds)
    return StackedModel(models), models


def batches(K: int, batch: int = B, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(K, batch, 784, generator=g).round()


def generators(seeds) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(1000 + s) for s in seeds]
