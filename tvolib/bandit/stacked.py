"""The bandit's GP for K runs at once: stacked hyperparameters, padded and masked observations.

Each run ``k`` has its own observations ``(X_k, y_k)`` (``N_k`` rows, normalised as in
:func:`~tvolib.bandit.model.training_data`), hyperparameters ``(l_k, rho_k, noise_k)`` and kernel
options (sorted arms, time-varying). The model and priors are those of
:class:`~tvolib.bandit.model.BanditGP` (Section 4.1, Appendix B)::

    k(x, x') = exp(-||Phi(b) - Phi(b')||^2 / (2 l^2)) * exp(-rho |t - t'| / 2),
    log p(y | theta) = -y^T (K + s^2 I)^{-1} y / 2 - log|K + s^2 I| / 2 - N log(2 pi) / 2,

computed for all runs with one batched Cholesky factorisation of ``(K, N_max, N_max)`` matrices.
Run ``k``'s rows beyond ``N_k`` are padding: its matrix is the identity there and its targets
zero, so the padding adds nothing to the quadratic term or the log-determinant and the constant
counts only ``N_k``. :func:`fit_map_stacked` maximises every run's log posterior with a batched
projected L-BFGS whose line search accepts or halves each run's step on that run's own values,
so a run's fit never depends on the other runs of the stack.

Example:
    >>> gp = StackedBanditGP(n_arm=2, K=2)
    >>> data = pad_observations([(torch.rand(5, 3, dtype=torch.float64), torch.randn(5, dtype=torch.float64)),
    ...                          (torch.rand(3, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64))])
    >>> results = fit_map_stacked(gp, data)
    >>> mean, var = gp.mean_and_variance(data, torch.rand(2, 4, 3, dtype=torch.float64))  # (K, M) each
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor
from torch.distributions import Gamma, LogNormal
from torch.nn.functional import softplus

from .model import _BOUNDS, NOISE_FLOOR, FitResult, Hyperparameters

__all__ = ["StackedBanditGP", "StackedObservations", "fit_map_stacked", "pad_observations"]


@dataclass(frozen=True)
class StackedObservations:
    """K GP training sets padded to ``N_max`` rows: ``X`` ``(K, N_max, n_arm + 1)``, ``y`` and ``mask`` ``(K, N_max)``."""

    X: Tensor
    y: Tensor
    mask: Tensor

    @property
    def n(self) -> Tensor:
        """Observations per run, ``(K,)``."""
        return self.mask.sum(-1)


def pad_observations(sets: Sequence[tuple[Tensor, Tensor]], *, dtype: torch.dtype = torch.float64,
                     device: torch.device | str | None = None) -> StackedObservations:
    """Stack K training sets ``(X_k (N_k, n_arm + 1), y_k (N_k,))`` with ``N_k >= 1``, padding at the end."""
    if not sets:
        raise ValueError("sets must hold at least one (X, y) training set")
    widths = {X.shape[-1] for X, _ in sets}
    if len(widths) != 1 or any(X.ndim != 2 or y.shape != X.shape[:1] or X.shape[0] < 1 for X, y in sets):
        raise ValueError(
            "each set must be (X (N_k, n_arm + 1), y (N_k,)) with N_k >= 1 and one n_arm for all; got "
            f"{[(tuple(X.shape), tuple(y.shape)) for X, y in sets]}"
        )
    n_max = max(X.shape[0] for X, _ in sets)
    K, width = len(sets), widths.pop()
    X_pad = torch.zeros(K, n_max, width, dtype=dtype, device=device)
    y_pad = torch.zeros(K, n_max, dtype=dtype, device=device)
    mask = torch.zeros(K, n_max, dtype=torch.bool, device=device)
    for k, (X, y) in enumerate(sets):
        n = X.shape[0]
        X_pad[k, :n], y_pad[k, :n], mask[k, :n] = X.to(X_pad), y.to(y_pad), True
    return StackedObservations(X_pad, y_pad, mask)


def _inv_softplus(x: Tensor) -> Tensor:
    return x + torch.log(-torch.expm1(-x))


def _flags(value: bool | Sequence[bool], K: int, name: str) -> Tensor:
    flags = [bool(value)] * K if isinstance(value, bool) else [bool(v) for v in value]
    if len(flags) != K:
        raise ValueError(f"{name} must be a bool or K={K} bools; got {value!r}")
    return torch.tensor(flags)


def _safe_cholesky(A: Tensor, tries: int = 3) -> Tensor:
    """Batched Cholesky; a run whose matrix is not positive definite gets jitter 1e-8, 1e-7, ... on
    its own diagonal (as ``psd_safe_cholesky`` does for one matrix), never the other runs."""
    L, info = torch.linalg.cholesky_ex(A)
    jitter = 1e-8 if A.dtype == torch.float64 else 1e-6
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    for _ in range(tries):
        bad = info > 0
        if not bool(bad.any()):
            return L
        retry, info_retry = torch.linalg.cholesky_ex(A[bad] + jitter * eye)
        L, info = L.clone(), info.clone()
        L[bad], info[bad] = retry, info_retry
        jitter *= 10
    raise torch.linalg.LinAlgError(f"runs {torch.nonzero(info > 0).flatten().tolist()}: matrix not positive definite")


class StackedBanditGP:
    """K exact GPs of :class:`~tvolib.bandit.model.BanditGP`'s form with per-run hyperparameters.

    Args:
        n_arm: arm coordinates (the GP input has ``n_arm + 1`` columns, time last).
        K: number of runs.
        hyperparameters: start values per run (default ``Hyperparameters()`` each).
        sort, time_varying: per-run kernel options (a bool for all, or K bools).
        priors: the MAP priors of Appendix B (as ``BanditGP``).
    """

    def __init__(self, n_arm: int, K: int, *, hyperparameters: Sequence[Hyperparameters] | None = None,
                 sort: bool | Sequence[bool] = True, time_varying: bool | Sequence[bool] = True,
                 priors: bool = True, dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        if n_arm < 1 or K < 1:
            raise ValueError(f"n_arm and K must be >= 1; got n_arm={n_arm}, K={K}")
        self.n_arm, self.K, self.priors = int(n_arm), int(K), bool(priors)
        self.dtype, self.device = dtype, torch.device(device or "cpu")
        self.sort = _flags(sort, K, "sort").to(self.device)
        self.time_varying = _flags(time_varying, K, "time_varying").to(self.device)
        self.raw = torch.zeros(K, 3, dtype=dtype, device=self.device)
        self.set_hyperparameters(hyperparameters or [Hyperparameters()] * K)
        self._cache: dict[str, Tensor] = {}

    # ----- hyperparameters: raw (K, 3) = softplus^{-1} of (lengthscale, rho, noise - floor) --------------
    def set_hyperparameters(self, hps: Sequence[Hyperparameters]) -> None:
        if len(hps) != self.K:
            raise ValueError(f"hyperparameters must hold K={self.K} entries; got {len(hps)}")
        values = torch.tensor([[h.validate().lengthscale, max(h.rho, 1e-12), h.noise - NOISE_FLOOR] for h in hps],
                              dtype=self.dtype, device=self.device)
        self.raw = _inv_softplus(values.clamp_min(1e-300))
        self._cache = {}

    @staticmethod
    def constrained(raw: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(lengthscale, rho, noise)``, each ``(K,)``, from raw values (gpytorch's softplus constraints)."""
        values = softplus(raw)
        return values[:, 0], values[:, 1], values[:, 2] + NOISE_FLOOR

    def hyperparameters(self) -> list[Hyperparameters]:
        ls, rho, noise = (v.tolist() for v in self.constrained(self.raw))
        tv = self.time_varying.tolist()
        return [Hyperparameters(ls[k], rho[k] if tv[k] else 0.0, noise[k]) for k in range(self.K)]

    def log_prior(self, raw: Tensor) -> Tensor:
        """Per-run log prior density of the hyperparameters (Appendix B; as ``BanditGP.log_prior``): ``(K,)``."""
        ls, rho, noise = self.constrained(raw)
        if not self.priors:
            return torch.zeros_like(ls)
        ls_prior = LogNormal(math.sqrt(2) + 0.5 * math.log(self.n_arm), math.sqrt(3))
        rho_prior = LogNormal(math.log(2.0), 1.5)
        total = ls_prior.log_prob(ls) + Gamma(1.1, 0.05).log_prob(noise)
        return total + torch.where(self.time_varying, rho_prior.log_prob(rho), torch.zeros_like(rho))

    # ----- kernel, marginal likelihood, posterior -----------------------------------------------------
    def covar(self, x1: Tensor, x2: Tensor, raw: Tensor | None = None) -> Tensor:
        """Prior covariance ``(K, M, N)`` between ``x1`` ``(K, M, n_arm + 1)`` and ``x2`` ``(K, N, n_arm + 1)``."""
        ls, rho, _ = self.constrained(self.raw if raw is None else raw)
        n, s = self.n_arm, self.sort[:, None, None]
        a1 = torch.where(s, torch.sort(x1[..., :n], dim=-1).values, x1[..., :n]) / ls[:, None, None]
        a2 = torch.where(s, torch.sort(x2[..., :n], dim=-1).values, x2[..., :n]) / ls[:, None, None]
        sq = ((a1[:, :, None, :] - a2[:, None, :, :]) ** 2).sum(-1)
        dt = (x1[..., n:] - x2[..., n:].transpose(-2, -1)).abs()
        rho_t = torch.where(self.time_varying, rho, torch.zeros_like(rho))[:, None, None]
        return torch.exp(-0.5 * sq) * torch.exp(-0.5 * rho_t * dt)

    def _train_matrix(self, data: StackedObservations, raw: Tensor) -> Tensor:
        """``K_k + s_k^2 I`` on the observed block, the identity on the padding: ``(K, N_max, N_max)``."""
        _, _, noise = self.constrained(raw)
        m = data.mask.to(data.X.dtype)
        eye = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
        K = self.covar(data.X, data.X, raw) * (m[:, :, None] * m[:, None, :])
        return K + eye * (noise[:, None, None] * m[:, None, :] + (1 - m)[:, None, :])

    def log_marginal_likelihood(self, data: StackedObservations, raw: Tensor | None = None) -> Tensor:
        """``log N(y_k | 0, K_k + s_k^2 I)`` per run: ``(K,)`` (differentiable in ``raw``)."""
        raw = self.raw if raw is None else raw
        L = _safe_cholesky(self._train_matrix(data, raw))
        y = data.y * data.mask
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        log_det = torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        return -0.5 * (y * alpha).sum(-1) - log_det - 0.5 * data.n.to(y.dtype) * math.log(2 * math.pi)

    def negative_log_posterior(self, data: StackedObservations, raw: Tensor | None = None) -> Tensor:
        """The MAP objective of ``BanditGP.negative_log_posterior`` per run, ``-(log lik + log prior) / N_k``: ``(K,)``."""
        raw = self.raw if raw is None else raw
        total = self.log_marginal_likelihood(data, raw) + self.log_prior(raw)
        return -total / data.n.to(total.dtype)

    def condition(self, data: StackedObservations) -> None:
        """Cache ``alpha = (K + s^2 I)^{-1} y`` and the inverse for :meth:`mean_and_variance`."""
        with torch.no_grad():
            L = _safe_cholesky(self._train_matrix(data, self.raw))
            y = (data.y * data.mask).unsqueeze(-1)
            self._cache = {"alpha": torch.cholesky_solve(y, L).squeeze(-1), "K_inv": torch.cholesky_inverse(L),
                           "data": data}

    def mean_and_variance(self, data: StackedObservations, x: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and variance of ``f`` at ``x`` ``(K, M, n_arm + 1)``: ``(K, M)`` each (Eqs. GP_mean, GP_var)."""
        if self._cache.get("data") is not data:
            self.condition(data)
        k_star = self.covar(x, data.X) * data.mask[:, None, :].to(x.dtype)  # (K, M, N_max)
        mean = (k_star @ self._cache["alpha"].unsqueeze(-1)).squeeze(-1)
        var = 1.0 - ((k_star @ self._cache["K_inv"]) * k_star).sum(-1)
        return mean, var.clamp_min(0.0)


def _raw_bounds(dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``fit_map``'s box (``tvolib.bandit.model``) in raw units, ``(3,)`` each."""
    lo = [_BOUNDS["lengthscale"][0], _BOUNDS["rho"][0], max(_BOUNDS["noise"][0], NOISE_FLOOR + 1e-12) - NOISE_FLOOR]
    hi = [_BOUNDS["lengthscale"][1], _BOUNDS["rho"][1], _BOUNDS["noise"][1] - NOISE_FLOOR]
    as_raw = lambda v: _inv_softplus(torch.tensor(v, dtype=dtype, device=device))  # noqa: E731
    return as_raw(lo), as_raw(hi)


def _value_and_grad(gp: StackedBanditGP, data: StackedObservations, raw: Tensor) -> tuple[Tensor, Tensor]:
    raw = raw.detach().requires_grad_(True)
    value = gp.negative_log_posterior(data, raw)
    (grad,) = torch.autograd.grad(value.sum(), raw)  # runs share nothing: the sum's gradient is per run
    return value.detach(), grad


def _two_loop(grad: Tensor, pairs: list[tuple[Tensor, Tensor]]) -> Tensor:
    """L-BFGS direction ``-H g`` per run (rows); pairs with ``s.y <= 0`` for a run are skipped for that run."""
    q, alphas = grad.clone(), []
    for s, y in reversed(pairs):
        sy = (s * y).sum(-1)
        rho = torch.where(sy > 1e-12, 1.0 / sy.clamp_min(1e-12), torch.zeros_like(sy))
        a = rho * (s * q).sum(-1)
        q = q - a[:, None] * y
        alphas.append((rho, a))
    gamma = torch.ones_like(grad[:, 0])
    for s, y in reversed(pairs):  # scaling from the newest usable pair of each run
        sy, yy = (s * y).sum(-1), (y * y).sum(-1)
        use = (sy > 1e-12) & (gamma == 1.0)
        gamma = torch.where(use, sy / yy.clamp_min(1e-300), gamma)
    r = gamma[:, None] * q
    for (s, y), (rho, a) in zip(pairs, reversed(alphas)):
        b = rho * (y * r).sum(-1)
        r = r + s * (a - b)[:, None]
    return -r


def fit_map_stacked(gp: StackedBanditGP, data: StackedObservations, *, maxiter: int = 30, ftol: float = 1e-6,
                    gtol: float = 1e-3, memory: int = 10) -> list[FitResult]:
    """MAP fit of every run's hyperparameters, warm-started from ``gp``'s current values.

    Batched projected L-BFGS in the raw (softplus) parameters within ``fit_map``'s box, with
    Armijo backtracking per run; a run stops when its objective changes by less than ``ftol``
    (relative), its projected gradient is below ``gtol``, its line search fails, or after
    ``maxiter`` iterations. A run whose objective turns non-finite keeps its start values
    (Appendix B: "keep the previous value"). Returns one :class:`FitResult` per run.
    """
    start = time.perf_counter()
    lo, hi = _raw_bounds(gp.dtype, gp.device)
    free = torch.ones(gp.K, 3, dtype=torch.bool, device=gp.device)
    free[:, 1] = gp.time_varying
    x0 = torch.minimum(torch.maximum(gp.raw, lo), hi)
    x = x0.clone()
    f, g = _value_and_grad(gp, data, x)
    g = g * free
    ok = torch.isfinite(f) & torch.isfinite(g).all(-1)
    active = ok.clone()
    evals = torch.ones(gp.K, dtype=torch.long, device=gp.device)
    pairs: list[tuple[Tensor, Tensor]] = []
    for _ in range(maxiter):
        if not bool(active.any()):
            break
        d = _two_loop(g, pairs) * free if pairs else -g / g.abs().amax(-1, keepdim=True).clamp_min(1.0)
        d = torch.where(((d * g).sum(-1) < 0)[:, None], d, -g)  # keep a descent direction
        step = torch.ones(gp.K, dtype=x.dtype, device=x.device)
        moved = ~active
        x_new, f_new, g_new = x.clone(), f.clone(), g.clone()
        for _ in range(20):
            trial = torch.minimum(torch.maximum(x + step[:, None] * d, lo), hi)
            ft, gt = _value_and_grad(gp, data, trial)
            gt = gt * free
            evals += (~moved).long()
            accept = ~moved & torch.isfinite(ft) & torch.isfinite(gt).all(-1) & (ft <= f + 1e-4 * (g * (trial - x)).sum(-1))
            x_new = torch.where(accept[:, None], trial, x_new)
            f_new, g_new = torch.where(accept, ft, f_new), torch.where(accept[:, None], gt, g_new)
            moved = moved | accept
            if bool(moved.all()):
                break
            step = torch.where(moved, step, 0.5 * step)
        stalled = active & ~moved  # line search failed: stop this run where it is
        change = (f - f_new).abs() <= ftol * torch.maximum(torch.maximum(f.abs(), f_new.abs()), torch.ones_like(f))
        projected = torch.minimum(torch.maximum(x_new - g_new, lo), hi) - x_new
        small = projected.abs().amax(-1) <= gtol
        pairs = (pairs + [(x_new - x, g_new - g)])[-memory:]
        x = torch.where(active[:, None], x_new, x)
        f, g = torch.where(active, f_new, f), torch.where(active[:, None], g_new, g)
        active = active & ~stalled & ~change & ~small
    gp.raw = torch.where(ok[:, None], x, gp.raw)
    gp._cache = {}
    seconds = time.perf_counter() - start
    hps = gp.hyperparameters()
    return [FitResult(hps[k], bool(ok[k]), int(evals[k]), seconds, "" if ok[k] else "non-finite MAP objective")
            for k in range(gp.K)]
