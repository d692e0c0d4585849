"""Gaussian VAE for (dynamically binarised) MNIST and Fashion-MNIST (paper Appendix A).

Architecture, as in the authors' code: encoder 784 -> [100, 100] tanh -> a 25-dimensional
diagonal Gaussian q(z|x) (mean and log standard deviation); N(0, I) prior (fixed); decoder
25 -> [100, 100] tanh -> 784 Bernoulli logits. The paper's text says "two hidden layers of
[100, 25] nodes", read as hidden width 100 and latent size 25, as the code does. Widths, depth and
activation are configurable; weights use PyTorch's default initialisation (Appendix A).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.distributions import Bernoulli, Independent, Normal

from tvolib.checks import check_batch, check_int, check_positive_ints, check_samples
from tvolib.models.base import LatentVariableModel
from tvolib.models.bernoulli import bernoulli_log_prob

__all__ = ["GaussianVAE", "mlp"]

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def mlp(sizes: Sequence[int], activation: str = "tanh") -> nn.Sequential:
    """Linear layers between consecutive ``sizes`` with ``activation`` between them (not after the last)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}")
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class GaussianVAE(LatentVariableModel):
    """VAE with a diagonal Gaussian q(z|x), N(0, I) prior and Bernoulli likelihood.

    ``log p(x, z) = log N(z; 0, I) + sum_i log Bernoulli(x_i; sigmoid(decoder(z)_i))``.

    Args:
        data_dim: pixels per image (784 for MNIST).
        hidden: widths of the deterministic hidden layers, a sequence of positive ints (may be
            empty); the decoder mirrors them.
        latent_dim: dimension of z.
        activation: ``'tanh'`` or ``'relu'``.

    Example:
        >>> vae = GaussianVAE(hidden=(8,), latent_dim=2)
        >>> log_p, log_q = vae.log_joint_and_q(torch.zeros(3, 784), S=4, reparam=True)
        >>> log_p.shape
        torch.Size([4, 3])
    """

    discrete = False

    def __init__(
        self,
        data_dim: int = 784,
        hidden: Sequence[int] = (100, 100),
        latent_dim: int = 25,
        activation: str = "tanh",
    ) -> None:
        super().__init__()
        data_dim, latent_dim = check_int("data_dim", data_dim, 1), check_int("latent_dim", latent_dim, 1)
        hidden = check_positive_ints("hidden", hidden, allow_empty=True)
        self.data_dim, self.latent_dim = data_dim, latent_dim
        self.encoder = mlp([data_dim, *hidden, 2 * latent_dim], activation)
        self.decoder = mlp([latent_dim, *reversed(list(hidden)), data_dim], activation)

    def q(self, x: Tensor) -> Independent:
        """q(z | x): a diagonal Gaussian over the last dimension (batch shape of ``x`` minus 1)."""
        mean, log_std = self.encoder(x).float().chunk(2, dim=-1)  # float32 densities under autocast
        return Independent(Normal(mean, log_std.exp(), validate_args=False), 1, validate_args=False)

    def log_joint(self, z: Tensor, x: Tensor) -> Tensor:
        """log p(x, z) = log N(z; 0, I) + log Bernoulli(x; decoder(z)), summed over dimensions."""
        prior = Normal(z.new_zeros(()), z.new_ones(()), validate_args=False)  # no host-to-device copy
        return prior.log_prob(z).sum(-1) + bernoulli_log_prob(self.decoder(z).float(), x).sum(-1)

    def log_joint_and_q(self, x: Tensor, S: int, reparam: bool) -> tuple[Tensor, Tensor]:
        x = self._check_x(x)
        q = self.q(x)
        shape = (check_samples(S),)
        if reparam:
            z = q.rsample(shape)
        else:
            # Not q.sample: torch.normal with a tensor std checks std >= 0 on the host, a CUDA
            # synchronisation per minibatch. rsample draws the same eps (one normal_ of the sample shape)
            # and returns the same mean + eps * std (bit for bit on the development CPU).
            with torch.no_grad():
                z = q.rsample(shape)
        return self.log_joint(z, x), q.log_prob(z)

    def sample_joint(self, n: int) -> tuple[Tensor, Tensor]:
        z = torch.randn(n, self.latent_dim, device=self.device)
        x = Bernoulli(logits=self.decoder(z).float(), validate_args=False).sample()
        return z, x

    def log_q_given(self, z: Tensor, x: Tensor) -> Tensor:
        return self.q(self._check_x(x)).log_prob(z)

    def _check_x(self, x: Tensor) -> Tensor:
        return check_batch(x, data_dim=self.data_dim, like=self.decoder[0].weight)

    def generative_parameters(self) -> Iterator[nn.Parameter]:
        return self.decoder.parameters()

    def inference_parameters(self) -> Iterator[nn.Parameter]:
        return self.encoder.parameters()
