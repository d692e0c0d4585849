"""Latent-variable models of the paper: Gaussian VAE (continuous) and Sigmoid Belief Network (discrete).

``build_model(name, train_mean=..., **options)`` is what the trainer calls; ``LinearGaussian`` is a
closed-form toy for tests and Figure 1 (not buildable by name).
"""
from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor

from tvolib.models.base import LatentVariableModel
from tvolib.models.linear_gaussian import LinearGaussian
from tvolib.models.sbn import SigmoidBeliefNetwork
from tvolib.models.vae import GaussianVAE

__all__ = ["MODELS", "GaussianVAE", "LatentVariableModel", "LinearGaussian", "SigmoidBeliefNetwork", "build_model"]

#: Models buildable by name (the trainer's ``model`` field).
MODELS: dict[str, type[LatentVariableModel]] = {"vae": GaussianVAE, "sbn": SigmoidBeliefNetwork}


def build_model(name: str, *, train_mean: Tensor | None = None, **options: Any) -> LatentVariableModel:
    """A fresh model by name, float32 on the CPU (move it with ``.to``).

    Option values are checked by the constructors, so building a model is also the cheap way to
    validate a configuration's ``model_options``.

    Args:
        name: a key of :data:`MODELS` (``"vae"`` or ``"sbn"``).
        train_mean: the per-pixel training mean; initialises the SBN's output bias and centres its
            encoder input. The VAE ignores it (default initialisation, Appendix A).
        **options: the model's constructor arguments (``hidden``, ``latent_dim``, ``activation``
            for the VAE; ``latent_dims`` for the SBN; ``data_dim`` for both).

    Returns:
        A :class:`LatentVariableModel`.

    Raises:
        ValueError: for an unknown name, an unknown option, or a bad option value (e.g.
            ``hidden=7``: "hidden must be a sequence of positive ints").

    Example:
        >>> build_model("vae", hidden=(100, 100), latent_dim=25).latent_dim
        25
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; accepted: {sorted(MODELS)}")
    cls = MODELS[name]
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "train_mean")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for model {name!r}; accepted: {accepted}")
    if name == "sbn":
        options["train_mean"] = train_mean
    return cls(**options)
