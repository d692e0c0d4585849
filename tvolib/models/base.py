"""The interface every latent-variable model offers to the objectives."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator

import torch
from torch import Tensor, nn

__all__ = ["LatentVariableModel"]


class LatentVariableModel(nn.Module, ABC):
    """A generative model p_theta(x, z) with an inference network q_phi(z | x).

    ``discrete`` says whether z is discrete (no reparameterisation; score-function gradients).
    Samples come from torch's global RNG on the model's device. Implementations check their
    inputs with :mod:`tvolib.checks` (shape, dtype, device, finiteness, binary values).
    """

    discrete: bool = False

    @abstractmethod
    def log_joint_and_q(self, x: Tensor, S: int, reparam: bool) -> tuple[Tensor, Tensor]:
        """``(log p(x, z_s), log q(z_s | x))``, each ``(S, B)``, for ``z_s ~ q(z | x)``.

        ``reparam=True`` keeps the pathwise gradient through z (continuous models only);
        ``reparam=False`` detaches z so gradients flow only through the two densities.
        """

    @abstractmethod
    def sample_joint(self, n: int) -> tuple[Tensor, Tensor]:
        """``n`` draws ``(z, x)`` from p(z) p(x | z); z in the layout :meth:`log_q_given` takes."""

    @abstractmethod
    def log_q_given(self, z: Tensor, x: Tensor) -> Tensor:
        """``log q(z_i | x_i)`` for paired rows: ``(n,)``."""

    @abstractmethod
    def generative_parameters(self) -> Iterator[nn.Parameter]:
        """theta: the parameters of p(x, z)."""

    @abstractmethod
    def inference_parameters(self) -> Iterator[nn.Parameter]:
        """phi: the parameters of q(z | x)."""

    def log_weights(self, x: Tensor, S: int) -> Tensor:
        """``log w = log p(x, z) - log q(z | x)`` for ``z ~ q``: ``(S, B)`` (densities' gradients only)."""
        log_p, log_q = self.log_joint_and_q(x, S, reparam=False)
        return log_p - log_q

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device
