"""Kernels of the time-varying, permutation-invariant GP (paper Sections 4.1-4.2, Appendix B).

* :class:`TimeDecayKernel` is ``k_T(t, t') = (1 - omega)^{|t - t'| / 2}`` (Section 4.1, after
  Bogunovic et al. 2016). It equals ``exp(-|t - t'| / l_t)`` with ``l_t = -2 / log(1 - omega)``, i.e.
  a Matern-1/2 kernel on the time column. It is written by hand (a few lines) because GPyTorch has no
  kernel parameterised by ``omega``; internally it stores ``rho = -log(1 - omega) > 0`` so that any
  forgetting rate (``omega`` arbitrarily close to 1, needed when time is normalised to [0, 1] over
  hundreds of rounds) stays representable in floating point.
* :class:`SortedRBFKernel` is GPyTorch's squared-exponential kernel
  ``exp(-||b - b'||^2 / (2 l^2))`` (Appendix B) applied to the *sorted* arm, the projection
  ``Phi`` of Section 4.2, which makes it invariant to permutations of the arm. ``sort=False`` gives
  the unsorted ablation (Appendix D.4).
* :class:`StepFunctionKernel` is the same squared-exponential on the step-function embedding of
  :mod:`tvolib.bandit.embedding`: one kernel for arms of any length (padded by repeating their
  largest point), used by :class:`~tvolib.bandit.adaptive.AdaptiveDBanditSchedule`.

The GP input is ``x = [normalised arm (n_arm columns), normalised time (1 column)]``;
:class:`tvolib.bandit.model.BanditGP` gives each kernel its columns.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from gpytorch.constraints import Positive
from gpytorch.kernels import Kernel, RBFKernel
from gpytorch.priors import Prior
from torch import Tensor

from .embedding import step_embedding, step_grid

__all__ = ["SortedRBFKernel", "StepFunctionKernel", "TimeDecayKernel", "omega_to_rho", "rho_to_omega"]


def omega_to_rho(omega: float | Tensor) -> Tensor:
    """``rho = -log(1 - omega)``: the decay rate per unit time of ``k_T`` (``k_T = exp(-rho |dt| / 2)``)."""
    omega = torch.as_tensor(omega, dtype=torch.float64)
    if not torch.all((omega > 0) & (omega < 1)):
        raise ValueError(f"omega must lie in the open interval (0, 1); got {omega.tolist()}")
    return -torch.log1p(-omega)


def rho_to_omega(rho: float | Tensor) -> Tensor:
    """Inverse of :func:`omega_to_rho`: ``omega = 1 - exp(-rho)``."""
    return -torch.expm1(-torch.as_tensor(rho))


class TimeDecayKernel(Kernel):
    """``k_T(t, t') = (1 - omega)^{|t - t'| / 2}`` on a single time column (paper Section 4.1).

    ``k_T(t, t) = 1``; the Gram matrix is positive definite for distinct times (it is the
    Ornstein-Uhlenbeck / Matern-1/2 covariance). ``omega`` in (0, 1) is the forgetting-remembering
    trade-off: 0 means the reward function never changes, 1 that rounds are independent.
    ``rho_prior`` (optional) is a GPyTorch prior on ``rho = -log(1 - omega)``.
    """

    has_lengthscale = False

    def __init__(self, omega: float = 0.5, rho_prior: Prior | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.register_parameter("raw_rho", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1, 1)))
        self.register_constraint("raw_rho", Positive())
        if rho_prior is not None:
            self.register_prior("rho_prior", rho_prior, lambda m: m.rho, lambda m, v: m._set_rho(v))
        self.omega = omega

    @property
    def rho(self) -> Tensor:
        """Decay rate ``-log(1 - omega)`` (> 0)."""
        return self.raw_rho_constraint.transform(self.raw_rho)

    @rho.setter
    def rho(self, value: float | Tensor) -> None:
        self._set_rho(value)

    def _set_rho(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value, dtype=self.raw_rho.dtype, device=self.raw_rho.device)
        if not torch.all(value > 0):
            raise ValueError(f"rho = -log(1 - omega) must be > 0; got {value.tolist()}")
        self.initialize(raw_rho=self.raw_rho_constraint.inverse_transform(value.expand_as(self.raw_rho)))

    @property
    def omega(self) -> Tensor:
        """The paper's ``omega = 1 - exp(-rho)`` in (0, 1)."""
        return rho_to_omega(self.rho)

    @omega.setter
    def omega(self, value: float | Tensor) -> None:
        self._set_rho(omega_to_rho(value).to(self.raw_rho))

    @property
    def time_lengthscale(self) -> Tensor:
        """``l_t = 2 / rho``: ``k_T = exp(-|t - t'| / l_t)``."""
        return 2.0 / self.rho

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if x1.shape[-1] != 1 or x2.shape[-1] != 1:
            raise ValueError(
                f"TimeDecayKernel acts on one time column; got inputs with {x1.shape[-1]} and "
                f"{x2.shape[-1]} columns (pass only the time column)"
            )
        # |t - t'| by hand (abs has a zero sub-gradient at t = t'; a sqrt-based distance would not).
        if diag:
            dist = (x1 - x2).abs().squeeze(-1)
            rho = self.rho.squeeze(-1)
        else:
            dist = (x1 - x2.transpose(-2, -1)).abs()
            rho = self.rho
        return torch.exp(-0.5 * rho * dist)


class SortedRBFKernel(RBFKernel):
    """Squared-exponential kernel on ``Phi(b)``, the sorted arm (paper Section 4.2, Appendix B).

    ``k(b, b') = exp(-||Phi(b) - Phi(b')||^2 / (2 l^2))`` with one length-scale ``l`` shared by all
    coordinates (the paper's ``sigma_beta``) and ``Phi(b) = sort(b)``, or, with a fixed
    ``coordinate_scale`` ``D``, ``Phi(b) = sort(D sort(b))``. With ``sort=True`` the kernel, and so
    the GP posterior and the acquisition, are invariant to permutations of the arm; sorting is
    applied to both arguments inside the kernel, hence identically to training and prediction
    points. ``sort=False`` is the plain RBF on ``D b`` (the non-permutation-invariant ablation).

    ``coordinate_scale`` is the authors' code's per-coordinate min-max scaling: when coordinate ``k``
    of the sorted arm lives in ``[lo, u_k]`` (the staggered arm domain) and inputs are normalised by
    ``[lo, max u]``, the scale ``(max u - lo) / (u_k - lo)`` maps each coordinate's range onto
    ``[0, 1]``. The code then sorts the scaled vector; on the sorted arms it trains with, that is
    ``sort(D sort(b))``, and sorting first (in beta units) keeps the kernel invariant to permutations
    of ``b`` where the code's is not (one of its known defects).
    """

    def __init__(self, sort: bool = True, coordinate_scale: Sequence[float] | Tensor | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sort = bool(sort)
        scale = None if coordinate_scale is None else torch.as_tensor(coordinate_scale, dtype=torch.float64)
        if scale is not None and (scale.ndim != 1 or not bool(torch.isfinite(scale).all() & (scale > 0).all())):
            raise ValueError(f"coordinate_scale must be a vector of finite numbers > 0; got {coordinate_scale!r}")
        self.register_buffer("coordinate_scale", scale)

    def features(self, x: Tensor) -> Tensor:
        """``Phi(x)``: the arm as the squared-exponential sees it (sorted, scaled, sorted again)."""
        if self.sort:
            x = torch.sort(x, dim=-1).values
        if self.coordinate_scale is not None:
            if self.coordinate_scale.shape[0] != x.shape[-1]:
                raise ValueError(f"coordinate_scale has {self.coordinate_scale.shape[0]} entries for arms of "
                                 f"{x.shape[-1]} coordinates")
            x = x * self.coordinate_scale
            if self.sort:  # the code sorts the scaled vector (class docstring)
                x = torch.sort(x, dim=-1).values
        return x

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        return super().forward(self.features(x1), self.features(x2), diag=diag, **params)



class StepFunctionKernel(RBFKernel):
    """Squared-exponential kernel on the step-function embedding of a schedule of any length.

    ``k(b, b') = exp(-||phi(b) - phi(b')||^2 / (2 l^2))`` with ``phi`` of
    :func:`~tvolib.bandit.embedding.step_embedding`: approximately
    ``exp(-int_0^1 (s_b(u) - s_b'(u))^2 du / (2 l^2))``, a comparison of the two schedules'
    left-Riemann step functions, which is all of a schedule the TVO sees. It is
    positive definite for any arms (an SE kernel of a feature map), invariant to permutations of an
    arm and to repeated points, so arms of ``m <= n`` points padded to ``n`` columns by repeating
    their largest (:func:`~tvolib.bandit.embedding.pad_arm`) are compared as the schedules they are.

    Args:
        lo, hi: the GP's normalisation of the arm columns: a column value ``x`` is the beta
            ``lo + (hi - lo) x``.
        grid_size: grid points of the embedding.
        **kwargs: GPyTorch's kernel arguments (``lengthscale_prior`` ...).
    """

    #: Invariant to permutations of an arm (read as :attr:`BanditGP.sort <tvolib.bandit.model.BanditGP.sort>`).
    sort = True

    def __init__(self, lo: float, hi: float, grid_size: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"the arm columns' range must satisfy 0 <= lo < hi <= 1; got ({lo}, {hi})")
        self.lo, self.hi = float(lo), float(hi)
        self.register_buffer("grid", step_grid() if grid_size is None else step_grid(grid_size))

    def features(self, x: Tensor) -> Tensor:
        """``phi``: the embedding ``(..., G)`` of normalised arm columns ``(..., n)``."""
        return step_embedding(self.lo + (self.hi - self.lo) * x, grid=self.grid.to(x))

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        return super().forward(self.features(x1), self.features(x2), diag=diag, **params)
