"""The time-varying, permutation-invariant GP surrogate of the bandit (paper Section 4.1, Appendix B).

Model: ``y = f(x) + eps``, ``f ~ GP(0, k)``, ``eps ~ N(0, noise)``, on inputs
``x = [arm normalised by the arm domain's [lo, hi], t normalised to [0, 1]]`` with
``k(x, x') = exp(-||Phi(b) - Phi(b')||^2 / (2 l^2)) * (1 - omega)^{|t - t'| / 2}`` and rewards
``y`` standardised (zero mean, unit variance), so the kernel has no output scale (Appendix B).
``Phi(b) = sort(b)`` in a box domain; in the code's staggered domain, where coordinate ``k`` of a
sorted arm has a range of its own, ``Phi(b) = sort(D sort(b))`` with ``D`` (``coordinate_scale``,
fixed) scaling each range onto ``[0, 1]`` as the authors' code does
(:class:`~tvolib.bandit.kernels.SortedRBFKernel`).

Hyperparameters ``(l, omega, noise)`` are fitted (:mod:`tvolib.bandit.fit`) by MAP, i.e. by maximising
``log N(y | 0, K + noise I) + log p(l) + log p(rho) + log p(noise)`` (Appendix B, Eq. 19, with
the standard *minus* sign on the quadratic term; the paper prints a plus),
warm-started from the previous round. Priors (stated, all weak):

* length-scale ``l`` (normalised arm units): ``LogNormal(sqrt(2) + log(n_arm) / 2, sqrt(3))``,
  BoTorch's dimension-scaled default (Hvarfner et al., 2024); mode ``0.2 sqrt(n_arm)``.
* time decay ``rho = -log(1 - omega)`` (per unit of normalised time): ``LogNormal(log 2, 1.5)``,
  i.e. a time length-scale ``l_t = 2 / rho`` with median the whole history (95%: 1/20 to 20 times it).
* noise variance (standardised units): ``Gamma(1.1, 0.05)`` (BoTorch's classic weak default),
  constrained to ``>= 1e-6``.

The kernels are GPyTorch modules and the priors GPyTorch priors, but the exact-GP algebra (one
Cholesky factor and its inverse per evaluation, the posterior of Eqs. 15-16, the log marginal
likelihood) is a few lines of torch, which avoids GPyTorch's ``ExactGP`` overhead (timings in
``benchmarks/``). The model is still a BoTorch :class:`~botorch.models.model.Model`, so BoTorch's
acquisition functions and ``optimize_acqf`` run on it unchanged.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from botorch.models.model import Model
from botorch.posteriors.torch import TorchPosterior
from gpytorch.constraints import GreaterThan, Interval, Positive
from gpytorch.kernels import Kernel, RBFKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.priors import GammaPrior, LogNormalPrior
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from .kernels import SortedRBFKernel, TimeDecayKernel, rho_to_omega
from .protocol import robust_standardize

__all__ = [
    "BanditGP",
    "Hyperparameters",
    "TrainingData",
    "training_data",
]

NOISE_FLOOR = 1e-6


@dataclass(frozen=True)
class Hyperparameters:
    """GP hyperparameters in the model's units (normalised inputs, standardised rewards).

    ``rho = -log(1 - omega)`` is stored instead of ``omega`` because ``omega`` may round to 1 in
    floating point when time is normalised over long runs; ``rho = 0`` means time-invariant.
    """

    lengthscale: float = 0.5
    rho: float = 2.0
    noise: float = 0.1
    trend_share: float = 0.0
    trend_lengthscale: float = 0.5

    @property
    def omega(self) -> float:
        """The paper's forgetting-remembering trade-off ``omega = 1 - exp(-rho)``."""
        return float(rho_to_omega(torch.tensor(self.rho, dtype=torch.float64)))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def validate(self) -> "Hyperparameters":
        if not (math.isfinite(self.lengthscale) and self.lengthscale > 0):
            raise ValueError(f"lengthscale must be finite and > 0; got {self.lengthscale!r}")
        if not (math.isfinite(self.rho) and self.rho >= 0):
            raise ValueError(f"rho = -log(1 - omega) must be finite and >= 0; got {self.rho!r}")
        if not (math.isfinite(self.noise) and self.noise >= NOISE_FLOOR):
            raise ValueError(f"noise must be finite and >= {NOISE_FLOOR}; got {self.noise!r}")
        if not (math.isfinite(self.trend_share) and 0.0 <= self.trend_share < 1.0):
            raise ValueError(f"trend_share must lie in [0, 1); got {self.trend_share!r}")
        if not (math.isfinite(self.trend_lengthscale) and self.trend_lengthscale > 0):
            raise ValueError(f"trend_lengthscale must be finite and > 0; got {self.trend_lengthscale!r}")
        return self


@dataclass(frozen=True)
class TrainingData:
    """GP training set in model units, plus what maps rewards back to reward units."""

    X: Tensor  # (N, n_arm + 1): normalised arm columns, then normalised time
    y: Tensor  # (N,): standardised rewards
    y_mean: float
    y_std: float
    t_origin: int  # round index mapped to time 0
    t_pred: int  # round index mapped to time 1 (the round whose arm is being chosen)
    n_dropped: int = 0  # observations left out by the robust standardisation
    n_guards: int = 0  # pseudo-observations appended (corner guards), the last rows of X and y


def training_data(
    arms: Tensor,
    rounds: Tensor,
    rewards: Tensor,
    *,
    lo: float,
    hi: float,
    t_pred: int,
    standardize: str = "global",
    guards: Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> TrainingData:
    """Normalise observations for the GP (Appendix B): arms to [0,1], time to [0,1], rewards to N(0,1).

    ``arms`` ``(N, n_arm)`` in beta units inside ``[lo, hi]``, ``rounds`` ``(N,)`` integer round
    indices, ``rewards`` ``(N,)`` finite. Times map affinely so the oldest observation's round
    ``t_origin`` goes to 0 and the prediction round ``t_pred`` to 1: the same map for training and
    prediction points. Arms map by ``(b - lo) / (hi - lo)`` in every coordinate, which commutes with
    sorting.

    Args:
        standardize: ``"global"``: rewards standardised by their mean and (population) standard
            deviation; ``"robust"`` (the authors' code): standardise, drop ``|z| > 3``, standardise
            the rest again (:func:`~tvolib.bandit.protocol.robust_standardize`).
        guards: ``(G, n_arm)`` arms (beta units) given pseudo-observations with the lowest
            standardised reward kept, at the latest observation's time (the code's corner guards),
            appended after the real observations.
    """
    arms = torch.as_tensor(arms, dtype=dtype, device=device)
    rounds = torch.as_tensor(rounds, dtype=dtype, device=device)
    rewards = torch.as_tensor(rewards, dtype=dtype, device=device)
    if arms.ndim != 2 or rounds.shape != arms.shape[:1] or rewards.shape != arms.shape[:1]:
        raise ValueError(
            f"expected arms (N, n_arm), rounds (N,), rewards (N,); got {tuple(arms.shape)}, "
            f"{tuple(rounds.shape)}, {tuple(rewards.shape)}"
        )
    if arms.shape[0] == 0:
        raise ValueError("the GP needs at least one observation")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards passed to the GP must be finite (non-finite ones are skipped upstream)")
    if standardize not in ("global", "robust"):
        raise ValueError(f"standardize must be 'global' or 'robust'; got {standardize!r}")
    t_origin = int(rounds.min().item())
    if t_pred <= t_origin:
        raise ValueError(f"prediction round {t_pred} must come after the oldest observation {t_origin}")
    if standardize == "robust":
        keep, y_mean, y_std = robust_standardize(rewards)
    else:
        keep, y_mean, y_std = torch.ones_like(rewards, dtype=torch.bool), *robust_standardize(rewards, math.inf)[1:]
    x_arm = (arms[keep] - lo) / (hi - lo)
    x_t = (rounds[keep] - t_origin) / (t_pred - t_origin)
    X = torch.cat([x_arm, x_t.unsqueeze(-1)], dim=-1)
    y = (rewards[keep] - y_mean) / y_std
    n_guards = 0
    if guards is not None:
        g = (torch.as_tensor(guards, dtype=dtype, device=device) - lo) / (hi - lo)
        t_last = torch.full((g.shape[0], 1), float(x_t.max()), dtype=dtype, device=device)
        X = torch.cat([X, torch.cat([g, t_last], dim=-1)])
        y = torch.cat([y, y.min().expand(g.shape[0])])
        n_guards = g.shape[0]
    return TrainingData(X, y, y_mean, y_std, t_origin, int(t_pred), int((~keep).sum()), n_guards)


class _GaussianLogLikelihood(torch.autograd.Function):
    """``log N(y | 0, K)`` with the analytic gradient ``d/dK = (alpha alpha^T - K^{-1}) / 2``.

    Written by hand (Appendix B: "providing the analytical gradient") because it needs one
    Cholesky factor and one ``cholesky_inverse``, several times cheaper than autograd through
    ``torch.linalg.cholesky`` (timings in ``benchmarks/``); gradients to the hyperparameters then
    flow through the kernel by ordinary autograd.

    ``stash`` (a dict, optional) receives ``alpha = K^{-1} y`` and, after the backward pass,
    ``K_inv``: the posterior cache at these hyperparameters, so the final evaluation of a fit
    also serves the predictions without another factorisation.
    """

    @staticmethod
    def forward(ctx, K: Tensor, y: Tensor, stash: dict | None = None) -> Tensor:
        L = psd_safe_cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        ctx.save_for_backward(L, alpha)
        ctx.stash = stash
        if stash is not None:
            stash.clear()
            stash["alpha"] = alpha
        n = y.shape[-1]
        return -0.5 * (y * alpha).sum() - torch.log(torch.diagonal(L)).sum() - 0.5 * n * math.log(2 * math.pi)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        L, alpha = ctx.saved_tensors
        K_inv = torch.cholesky_inverse(L)
        if ctx.stash is not None:
            ctx.stash["K_inv"] = K_inv
        grad_K = 0.5 * (torch.outer(alpha, alpha) - K_inv) * grad_output
        return grad_K, None, None


class BanditGP(Model):
    """Exact GP with the product kernel of Section 4.1 on ``x = [arm (n_arm cols), t (1 col)]``.

    ``sort=False`` drops the projection Phi (unsorted ablation); ``time_varying=False`` drops the
    time kernel (omega fixed at 0, the time-invariant GP); ``spatial`` replaces the arm's kernel
    (a GPyTorch RBF kernel with a ``features`` map and a ``sort`` flag, e.g.
    :class:`~tvolib.bandit.kernels.StepFunctionKernel`, carrying its own length-scale prior when
    ``priors``); ``coordinate_scale`` ``(n_arm,)`` is the
    fixed stretch of the sorted arm's coordinates (:class:`~tvolib.bandit.kernels.SortedRBFKernel`;
    :func:`~tvolib.bandit.protocol.coordinate_scale` computes it from the arm domain). Call
    :meth:`set_train_data` to condition on data; :meth:`posterior` then gives the posterior of
    Section 4.1 (Eqs. GP_mean, GP_var) in standardised units.
    """

    @property
    def num_outputs(self) -> int:
        return 1

    def __init__(
        self,
        n_arm: int,
        *,
        sort: bool = True,
        time_varying: bool = True,
        hyperparameters: Hyperparameters | None = None,
        priors: bool = True,
        coordinate_scale: Sequence[float] | None = None,
        trend: bool = False,
        spatial: Kernel | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if n_arm < 1:
            raise ValueError(f"n_arm must be >= 1; got {n_arm}")
        self.n_arm = int(n_arm)
        self.has_priors = bool(priors)
        self.time_varying = bool(time_varying)
        if coordinate_scale is not None and len(coordinate_scale) != self.n_arm:
            raise ValueError(f"coordinate_scale needs one entry per arm coordinate ({self.n_arm}); "
                             f"got {len(coordinate_scale)}")
        if spatial is not None and not (isinstance(spatial, RBFKernel) and callable(getattr(spatial, "features", None))):
            raise ValueError(f"spatial must be a GPyTorch RBFKernel with a features(x) map (the RBF acts on the "
                             f"features), e.g. StepFunctionKernel; got {type(spatial).__name__}")
        if spatial is not None and (coordinate_scale is not None or not sort):
            raise ValueError("a given spatial kernel replaces the sorted one: pass neither coordinate_scale nor sort=False")
        self.spatial = spatial if spatial is not None else SortedRBFKernel(
            sort=sort,
            coordinate_scale=coordinate_scale,
            lengthscale_prior=(
                LogNormalPrior(math.sqrt(2) + 0.5 * math.log(n_arm), math.sqrt(3)) if priors else None
            ),
        )
        self.temporal = (
            TimeDecayKernel(rho_prior=LogNormalPrior(math.log(2.0), 1.5) if priors else None)
            if time_varying
            else None
        )
        self.likelihood = GaussianLikelihood(
            noise_prior=GammaPrior(1.1, 0.05) if priors else None,
            noise_constraint=GreaterThan(NOISE_FLOOR, initial_value=0.1),
        )
        # The trend: a smooth function of time shared by every arm (flat priors under MAP).
        self.trend = RBFKernel(lengthscale_constraint=Positive()) if trend else None
        if trend:
            self.raw_trend_share = torch.nn.Parameter(torch.zeros(1))
            self.trend_share_constraint = Interval(0.0, 1.0)
        self.to(dtype=dtype, device=device)
        self.set_hyperparameters(hyperparameters or Hyperparameters())
        self._X: Tensor | None = None
        self._y: Tensor | None = None
        self._cache: dict[str, Tensor] = {}
        self._train_features: tuple[int, Tensor] | None = None  # (X's version, its arm features)

    # ----- hyperparameters -------------------------------------------------------------------
    @property
    def sort(self) -> bool:
        return self.spatial.sort

    def set_hyperparameters(self, hp: Hyperparameters) -> None:
        hp.validate()
        ref = self.spatial.raw_lengthscale
        as_t = lambda v: torch.tensor(float(v), dtype=ref.dtype, device=ref.device)  # noqa: E731
        with torch.no_grad():  # tensors in the model's dtype: python floats would pass through float32
            self.spatial.lengthscale = as_t(hp.lengthscale)
            if self.temporal is not None:
                self.temporal.rho = as_t(max(hp.rho, 1e-12))
            self.likelihood.noise = as_t(hp.noise)
            if self.trend is not None:
                share = min(max(hp.trend_share, 1e-9), 1 - 1e-9)  # the logit of 0 or 1 is infinite
                self.raw_trend_share.copy_(self.trend_share_constraint.inverse_transform(as_t(share)).reshape(1))
                self.trend.lengthscale = as_t(hp.trend_lengthscale)
        self._cache = {}

    def get_hyperparameters(self) -> Hyperparameters:
        rho = float(self.temporal.rho.detach()) if self.temporal is not None else 0.0
        trend = {}
        if self.trend is not None:
            trend = {"trend_share": float(self.trend_share.detach()),
                     "trend_lengthscale": float(self.trend.lengthscale.detach())}
        return Hyperparameters(
            lengthscale=float(self.spatial.lengthscale.detach()),
            rho=rho,
            noise=float(self.likelihood.noise.detach()),
            **trend,
        )

    @property
    def trend_share(self) -> Tensor:
        """``phi``: the share of the prior variance given to the trend (0 without one)."""
        if self.trend is None:
            return torch.zeros((), dtype=self.spatial.raw_lengthscale.dtype, device=self.spatial.raw_lengthscale.device)
        return self.trend_share_constraint.transform(self.raw_trend_share).reshape(())

    def hyperparameter_parts(self) -> list[tuple[str, torch.nn.Parameter, Any]]:
        """``(name, raw parameter, constraint)`` of every fitted hyperparameter, in a fixed order:
        ``lengthscale``, ``rho`` (time-varying only), ``noise``, then ``trend_share`` and
        ``trend_lengthscale`` (with a trend)."""
        parts = [("lengthscale", self.spatial.raw_lengthscale, self.spatial.raw_lengthscale_constraint)]
        if self.temporal is not None:
            parts.append(("rho", self.temporal.raw_rho, self.temporal.raw_rho_constraint))
        parts.append(("noise", self.likelihood.noise_covar.raw_noise, self.likelihood.noise_covar.raw_noise_constraint))
        if self.trend is not None:
            parts.append(("trend_share", self.raw_trend_share, self.trend_share_constraint))
            parts.append(("trend_lengthscale", self.trend.raw_lengthscale, self.trend.raw_lengthscale_constraint))
        return parts

    def _raw_parameters(self) -> list[torch.nn.Parameter]:
        return [param for _, param, _ in self.hyperparameter_parts()]

    def log_prior(self) -> Tensor:
        """Sum of the log prior densities of the hyperparameters (0 without priors)."""
        total = torch.zeros((), dtype=self.spatial.raw_lengthscale.dtype, device=self.spatial.raw_lengthscale.device)
        for part in (self.spatial, self.temporal, self.likelihood):
            if part is None:
                continue
            for _, module, prior, closure, _ in part.named_priors():
                total = total + prior.log_prob(closure(module)).sum()
        return total

    # ----- kernel ---------------------------------------------------------------------------
    def covar(self, x1: Tensor, x2: Tensor, component: str = "total") -> Tensor:
        """Dense prior covariance ``k(x1, x2)`` of shape ``(..., n1, n2)``.

        ``component="arm"``: only the arm effect's part ``(1 - phi) k_b k_T`` (without a trend,
        the whole kernel).
        """
        # Kernels' forward() on explicit column slices: GPyTorch's lazy __call__ path added
        # milliseconds per call, and the acquisition calls this hundreds of times per round.
        n = self.n_arm
        K = RBFKernel.forward(self.spatial, self._arm_features(x1), self._arm_features(x2))
        if self.temporal is not None:
            K = K * self.temporal.forward(x1[..., n:], x2[..., n:])
        if self.trend is None:
            return K
        share = self.trend_share
        K = (1 - share) * K
        if component == "arm":
            return K
        return K + share * self.trend.forward(x1[..., n:], x2[..., n:])

    def _arm_features(self, x: Tensor) -> Tensor:
        """The arm kernel's ``features`` of the arm columns of ``x`` (its forward is the RBF on them).

        The training inputs' are computed once per training data (the features hold no
        hyperparameter): recomputing the step-function embedding of 80 training arms of 9 points
        took about a third of an acquisition evaluation's time."""
        if x is not self._X:
            return self.spatial.features(x[..., :self.n_arm])
        if self._train_features is None or self._train_features[0] != x._version:  # in-place edits recompute
            self._train_features = (x._version, self.spatial.features(x[..., :self.n_arm]))
        return self._train_features[1]

    def prior_variance(self, x: Tensor, component: str = "total") -> Tensor:
        """``k(x, x)``: 1 for the whole kernel (every factor is 1 on the diagonal), ``1 - phi`` for
        the arm effect's part."""
        ones = torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
        return ones * (1 - self.trend_share) if component == "arm" else ones

    # ----- data, MAP objective, posterior -----------------------------------------------------
    def set_train_data(self, X: Tensor, y: Tensor) -> None:
        if X.ndim != 2 or X.shape[-1] != self.n_arm + 1 or y.shape != X.shape[:1]:
            raise ValueError(
                f"expected X (N, {self.n_arm + 1}) and y (N,); got {tuple(X.shape)} and {tuple(y.shape)}"
            )
        self._X, self._y = X, y
        self._cache = {}
        self._train_features = None

    def negative_log_posterior(self, stash: dict | None = None) -> Tensor:
        """``-(log N(y | 0, K + noise I) + log prior)``, the MAP objective (per observation).

        ``stash``: see :class:`_GaussianLogLikelihood` (filled with the posterior cache).
        """
        X, y = self._require_data()
        n = y.shape[0]
        K = self.covar(X, X) + self.likelihood.noise * torch.eye(n, dtype=X.dtype, device=X.device)
        mll = _GaussianLogLikelihood.apply(K, y, stash)
        return -(mll + self.log_prior()) / n

    def _require_data(self) -> tuple[Tensor, Tensor]:
        if self._X is None or self._y is None:
            raise RuntimeError("call set_train_data(X, y) before using the GP")
        return self._X, self._y

    def _posterior_cache(self) -> dict[str, Tensor]:
        if not self._cache:
            X, y = self._require_data()
            with torch.no_grad():
                n = y.shape[0]
                K = self.covar(X, X) + self.likelihood.noise * torch.eye(n, dtype=X.dtype, device=X.device)
                L = psd_safe_cholesky(K)
                self._cache = {
                    "alpha": torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1),
                    "K_inv": torch.cholesky_inverse(L),
                }
        return self._cache

    def mean_and_variance(self, x: Tensor, component: str = "total") -> tuple[Tensor, Tensor]:
        """Posterior mean and variance of ``f`` at ``x`` ``(..., n_arm + 1)`` (Eqs. GP_mean, GP_var).

        ``mu = k_*^T (K + s^2 I)^{-1} y``; ``sigma^2 = k(x, x) - k_*^T (K + s^2 I)^{-1} k_*``, with
        the inverse cached (the noise floor keeps it well conditioned in float64). Differentiable in
        ``x`` (for the acquisition's L-BFGS). ``component="arm"``: the posterior of the arm effect
        alone (``k_*`` and ``k(x, x)`` from the arm's part of the kernel), the same for every arm
        up to the trend's posterior, which no arm changes.
        """
        if component not in ("total", "arm"):
            raise ValueError(f"component must be 'total' or 'arm'; got {component!r}")
        X, _ = self._require_data()
        cache = self._posterior_cache()
        batch = x.shape[:-1]
        x2d = x.reshape(-1, x.shape[-1])  # one (M, N) matrix product, not M broadcast gemv's
        k_star = self.covar(x2d, X, component)  # (M, N)
        mean = k_star @ cache["alpha"]
        var = (self.prior_variance(x2d, component) - ((k_star @ cache["K_inv"]) * k_star).sum(-1)).clamp_min(0.0)
        return mean.reshape(batch), var.reshape(batch)

    def joint_posterior(self, x: Tensor, component: str = "total") -> tuple[Tensor, Tensor]:
        """Posterior mean ``(M,)`` and covariance ``(M, M)`` of ``f`` jointly at the rows of ``x``
        ``(M, n_arm + 1)``: ``mu = K_*^T (K + s^2 I)^{-1} y``, ``Sigma = k(x, x) - K_*^T (K + s^2 I)^{-1}
        K_*`` (``component`` as in :meth:`mean_and_variance`, whose diagonal this is). For joint
        posterior draws, e.g. Thompson sampling between arms."""
        if component not in ("total", "arm"):
            raise ValueError(f"component must be 'total' or 'arm'; got {component!r}")
        X, _ = self._require_data()
        cache = self._posterior_cache()
        k_star = self.covar(x, X, component)
        cov = self.covar(x, x, component) - k_star @ cache["K_inv"] @ k_star.T
        return k_star @ cache["alpha"], (cov + cov.T) / 2

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None, **kwargs):
        """BoTorch posterior of ``f`` at ``X`` ``(batch, q, n_arm + 1)``, independent over points.

        Only the marginal mean and variance are needed by GP-UCB (q = 1), so the posterior is a
        :class:`TorchPosterior` over ``Normal`` marginals of shape ``(batch, q, 1)``.
        """
        if posterior_transform is not None or output_indices not in (None, [0]):
            raise NotImplementedError("BanditGP has one output and no posterior transforms")
        mean, var = self.mean_and_variance(X)
        if observation_noise is True:
            var = var + self.likelihood.noise
        return TorchPosterior(torch.distributions.Normal(mean.unsqueeze(-1), var.clamp_min(1e-18).sqrt().unsqueeze(-1)))
