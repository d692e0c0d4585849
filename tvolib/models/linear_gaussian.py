"""A linear-Gaussian model where every TVO quantity has a closed form (tests and Figure 1).

Model: z ~ N(0, 1), x | z ~ N(a z + b, s^2); inference: q(z | x) = N(c x + m, v). Then the
posterior is Gaussian, and so is every member of the geometric path (Eq. 2)
``pi_beta ∝ q^(1-beta) p(x, .)^beta``. With precisions ``lambda_beta = (1-beta)/v + beta/v_post``::

    log Z_beta = beta log p(x) + log int N(z; mu_q, v)^(1-beta) N(z; mu_post, v_post)^beta dz,

a Gaussian integral, and ``d/dbeta log Z_beta = E_{pi_beta}[log w]`` (Eq. 3) is the expectation of
a quadratic under a Gaussian. Both are computed here with torch, so autograd gives exact gradients
of the exact TVO with respect to (a, b, s) and (c, m, v). Defaults to float64 for accurate checks.
"""
from __future__ import annotations

import math
from typing import Iterator

import torch
from torch import Tensor, nn
from torch.distributions import Normal

from tvolib.checks import check_finite_float, check_samples
from tvolib.models.base import LatentVariableModel

__all__ = ["LinearGaussian"]

_LOG_2PI = math.log(2 * math.pi)


class LinearGaussian(LatentVariableModel):
    """z ~ N(0,1), x|z ~ N(a z + b, s^2), q(z|x) = N(c x + m, v); data ``x`` of shape ``(B, 1)`` or ``(B,)``.

    Args:
        a, b, s: the generative model (``s > 0`` the noise standard deviation).
        m, v, c: the inference model (``v > 0`` the variance of q).
        dtype: parameter dtype (float64 for accurate checks).

    Example:
        >>> toy = LinearGaussian(a=1.5, v=0.5)
        >>> x = torch.tensor([[0.3]], dtype=torch.float64)
        >>> bool(toy.elbo(x) < toy.log_px(x))
        True
    """

    discrete = False

    def __init__(
        self,
        a: float = 1.0,
        b: float = 0.0,
        s: float = 1.0,
        m: float = 0.0,
        v: float = 1.0,
        c: float = 0.0,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        for name, value in (("a", a), ("b", b), ("m", m), ("c", c)):
            check_finite_float(name, value)
        s = check_finite_float("s", s, minimum=0.0, strict=True)
        v = check_finite_float("v", v, minimum=0.0, strict=True)

        def param(value: float) -> nn.Parameter:
            return nn.Parameter(torch.tensor(float(value), dtype=dtype))

        self.a, self.b, self.log_s = param(a), param(b), param(math.log(s))
        self.c, self.m, self.log_v = param(c), param(m), param(math.log(v))

    # -- sampling interface ------------------------------------------------------------------
    @staticmethod
    def _flat(x: Tensor) -> Tensor:
        if x.ndim == 2 and x.shape[1] == 1:
            return x[:, 0]
        if x.ndim == 1:
            return x
        raise ValueError(f"x must have shape (B, 1) or (B,); got {tuple(x.shape)}")

    def q(self, x: Tensor) -> Normal:
        x = self._flat(x)
        return Normal(self.c * x + self.m, (self.log_v / 2).exp(), validate_args=False)

    def log_joint(self, z: Tensor, x: Tensor) -> Tensor:
        x = self._flat(x)
        prior = Normal(torch.zeros((), dtype=z.dtype, device=z.device), 1.0, validate_args=False)
        likelihood = Normal(self.a * z + self.b, self.log_s.exp(), validate_args=False)
        return prior.log_prob(z) + likelihood.log_prob(x)

    def log_joint_and_q(self, x: Tensor, S: int, reparam: bool) -> tuple[Tensor, Tensor]:
        q = self.q(x)
        shape = (check_samples(S),)
        z = q.rsample(shape) if reparam else q.sample(shape)
        return self.log_joint(z, x), q.log_prob(z)

    def sample_joint(self, n: int) -> tuple[Tensor, Tensor]:
        z = torch.randn(n, dtype=self.a.dtype, device=self.device)
        x = self.a * z + self.b + self.log_s.exp() * torch.randn_like(z)
        return z[:, None], x[:, None]

    def log_q_given(self, z: Tensor, x: Tensor) -> Tensor:
        return self.q(x).log_prob(self._flat(z))

    def generative_parameters(self) -> Iterator[nn.Parameter]:
        return iter([self.a, self.b, self.log_s])

    def inference_parameters(self) -> Iterator[nn.Parameter]:
        return iter([self.c, self.m, self.log_v])

    # -- closed forms --------------------------------------------------------------------------
    def log_px(self, x: Tensor) -> Tensor:
        """log p(x) = log N(x; b, a^2 + s^2): ``(B,)``."""
        x = self._flat(x)
        var = self.a**2 + (2 * self.log_s).exp()
        return -0.5 * (_LOG_2PI + var.log() + (x - self.b) ** 2 / var)

    def posterior(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Mean ``(B,)`` and variance (scalar) of p(z | x)."""
        x = self._flat(x)
        s2 = (2 * self.log_s).exp()
        var = 1 / (1 + self.a**2 / s2)
        return var * self.a * (x - self.b) / s2, var

    def _path(self, x: Tensor, beta: Tensor | float) -> tuple[Tensor, ...]:
        """Broadcast ``beta`` (scalar -> (B,), (d,) -> (d, B)) and return path quantities."""
        x = self._flat(x)
        beta = torch.as_tensor(beta, dtype=x.dtype, device=x.device)
        if beta.ndim == 1:
            beta = beta[:, None]
        elif beta.ndim != 0:
            raise ValueError(f"beta must be a scalar or 1-D; got shape {tuple(beta.shape)}")
        mu_q, v = self.c * x + self.m, self.log_v.exp()
        mu_p, v_p = self.posterior(x)
        prec_q, prec_p = (1 - beta) / v, beta / v_p
        precision = prec_q + prec_p
        mean = (prec_q * mu_q + prec_p * mu_p) / precision
        return x, beta, mu_q, v, mu_p, v_p, prec_q, prec_p, precision, mean

    def log_Z(self, x: Tensor, beta: Tensor | float) -> Tensor:
        """log Z_beta(x) (Eq. 2) in closed form: ``(B,)`` for scalar beta, ``(d, B)`` for ``(d,)``."""
        x, beta, mu_q, v, mu_p, v_p, prec_q, prec_p, precision, _ = self._path(x, beta)
        # int N1^(1-beta) N2^beta = exp(-(1-beta)/2 log 2pi v1 - beta/2 log 2pi v2) sqrt(2pi/lambda) exp(-C/2)
        spread = prec_q * prec_p * (mu_q - mu_p) ** 2 / precision
        log_integral = (
            -0.5 * (1 - beta) * (_LOG_2PI + v.log())
            - 0.5 * beta * (_LOG_2PI + v_p.log())
            + 0.5 * (_LOG_2PI - precision.log())
            - 0.5 * spread
        )
        return beta * self.log_px(x) + log_integral

    def dlogZ_dbeta(self, x: Tensor, beta: Tensor | float) -> Tensor:
        """``E_{pi_beta}[log w]`` (Eq. 3's integrand) in closed form; shapes as :meth:`log_Z`."""
        x, beta, mu_q, v, _, _, _, _, precision, mean = self._path(x, beta)
        tau = 1 / precision
        s2 = (2 * self.log_s).exp()
        e_log_prior = -0.5 * (_LOG_2PI + mean**2 + tau)
        e_log_lik = -0.5 * (_LOG_2PI + s2.log() + ((x - self.a * mean - self.b) ** 2 + self.a**2 * tau) / s2)
        e_log_q = -0.5 * (_LOG_2PI + v.log() + ((mean - mu_q) ** 2 + tau) / v)
        return e_log_prior + e_log_lik - e_log_q

    def elbo(self, x: Tensor) -> Tensor:
        """The exact ELBO (Eq. 1): the integrand at beta = 0."""
        return self.dlogZ_dbeta(x, 0.0)

    def exact_tvo(self, x: Tensor, betas: Tensor | list[float], rule: str = "left") -> Tensor:
        """Riemann sum of the exact integrand over ``betas`` with 1 appended (Eq. 5 for ``left``): ``(B,)``."""
        left = torch.as_tensor(betas, dtype=self.a.dtype, device=self.device).reshape(-1)
        nodes = torch.cat([left, torch.ones(1, dtype=left.dtype, device=left.device)])
        deltas = (nodes[1:] - nodes[:-1])[:, None]
        values = self.dlogZ_dbeta(x, nodes)
        sums = {
            "left": lambda: (deltas * values[:-1]).sum(0),
            "right": lambda: (deltas * values[1:]).sum(0),
            "trapezoid": lambda: (deltas * (values[:-1] + values[1:]) / 2).sum(0),
        }
        if rule not in sums:
            raise ValueError(f"rule must be one of {sorted(sums)}; got {rule!r}")
        return sums[rule]()
