"""Fitting the bandit GP's hyperparameters (Appendix B): MAP warm-started from the previous round, or
type-II maximum likelihood from random starts as the authors' code does.

Both end in one L-BFGS-B run (SciPy) on the softplus-raw hyperparameters, with the analytic
marginal-likelihood gradient of :class:`~tvolib.bandit.model.BanditGP`; a numerical failure keeps
the previous values (Appendix B).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
import torch
from torch import Tensor

from .kernels import omega_to_rho, rho_to_omega
from .model import NOISE_FLOOR, BanditGP, Hyperparameters
from .protocol import ML_BOUNDS
from .threads import one_blas_thread

__all__ = ["FitResult", "MAX_ML_STARTS", "fit_map", "fit_ml"]

#: Largest number of random starts of :func:`fit_ml` accepted (10 times the code's 200): their
#: marginal likelihoods are evaluated in one batch.
MAX_ML_STARTS = 2000


@dataclass(frozen=True)
class FitResult:
    """Outcome of one MAP fit: the hyperparameters now in the model and how it went."""

    hyperparameters: Hyperparameters
    ok: bool
    n_evals: int
    seconds: float
    message: str


# Bounds (in hyperparameter units) keep L-BFGS-B away from degenerate regions.
_BOUNDS = {"lengthscale": (1e-3, 1e2), "rho": (1e-6, 1e4), "noise": (NOISE_FLOOR, 10.0),
           "trend_share": (1e-6, 1 - 1e-6), "trend_lengthscale": (1e-2, 1e2)}


def fit_map(
    gp: BanditGP,
    *,
    maxiter: int = 30,
    ftol: float = 1e-6,
    gtol: float = 1e-3,
    bounds: dict[str, tuple[float, float]] | None = None,
) -> FitResult:
    """Fit ``gp``'s hyperparameters by MAP with L-BFGS-B, starting from its current values.

    The warm start (previous round's values, Appendix B) means a round usually needs 1-10
    objective evaluations; ``maxiter`` caps the L-BFGS-B iterations. The objective is per
    observation, so ``gtol = 1e-3`` stops when the whole log posterior changes by less than
    ``1e-3 N`` nats per unit of a (softplus-raw) hyperparameter: far below what moves the
    posterior. If anything fails numerically (Cholesky error, non-finite objective or result), the
    previous values are restored and a ``RuntimeWarning`` is emitted (Appendix B: "keep the previous value of the hyperparameters").
    ``bounds`` (hyperparameter units, per name) replaces the default box; a model built with
    ``priors=False`` makes this type-II maximum likelihood.
    """
    box = _BOUNDS if bounds is None else bounds
    start = time.perf_counter()
    previous = gp.get_hyperparameters()
    parts = gp.hyperparameter_parts()
    params = [param for _, param, _ in parts]
    saved = [p.detach().clone() for p in params]  # restored exactly on failure (no round trip)
    bounds = _raw_bounds(parts, box, params[0].dtype)
    x0 = np.array([float(p.detach().reshape(-1)[0]) for p in params])
    x0 = np.clip(x0, [b[0] for b in bounds], [b[1] for b in bounds])
    n_evals = 0
    last: dict[str, Any] = {"x": None, "stash": {}}

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal n_evals
        n_evals += 1
        _fill(params, x)
        stash: dict[str, Tensor] = {}
        last["x"], last["stash"] = None, stash
        loss = gp.negative_log_posterior(stash)
        grads = torch.autograd.grad(loss, params)
        g = np.array([float(gi.reshape(-1)[0]) for gi in grads])
        value = float(loss)
        if not (math.isfinite(value) and np.all(np.isfinite(g))):
            raise FloatingPointError(f"non-finite MAP objective {value} or gradient {g}")
        last["x"] = np.array(x, copy=True)
        return value, g

    message = ""
    ok = True
    try:
        # One BLAS thread for SciPy's L-BFGS-B (tvolib.bandit.threads).
        with warnings.catch_warnings(), one_blas_thread():
            warnings.simplefilter("ignore")  # linear_operator's jitter warnings; failures raise below
            res = scipy.optimize.minimize(
                objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                options={"maxiter": maxiter, "ftol": ftol, "gtol": gtol},
            )
        x = res.x
        message = str(res.message)
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("L-BFGS-B returned non-finite hyperparameters")
        _fill(params, x)
        gp._cache = {}
        reusable = last["x"] is not None and np.array_equal(last["x"], x) and len(last["stash"]) == 2
        if reusable:  # the usual case: the final evaluation was at the result
            gp._cache = {k: v.detach() for k, v in last["stash"].items()}
        gp.get_hyperparameters().validate()
        gp._posterior_cache()  # fails here rather than in the acquisition if K is singular
    except Exception as exc:  # noqa: BLE001 - any numerical failure means: keep the previous values
        ok = False
        message = f"{type(exc).__name__}: {exc}"
        with torch.no_grad():
            for p, v in zip(params, saved):
                p.copy_(v)
        gp._cache = {}
        warnings.warn(
            f"GP hyperparameter fit failed ({message}); keeping the previous values {previous}",
            RuntimeWarning,
            stacklevel=2,
        )
    return FitResult(gp.get_hyperparameters(), ok, n_evals, time.perf_counter() - start, message)


def _raw_bounds(parts: list[tuple[str, Tensor, Any]], box: dict[str, tuple[float, float]], dtype: torch.dtype) -> list[tuple[float, float]]:
    """L-BFGS-B's box in raw (untransformed) units: ``box[name]`` per hyperparameter, its lower end
    raised above the constraint's own lower bound where it has one."""
    bounds = []
    for name, _, constraint in parts:
        lo, hi = box[name]
        lower = getattr(constraint, "lower_bound", None)
        lo = max(lo, float(lower) + 1e-12) if lower is not None else lo
        bounds.append(tuple(float(constraint.inverse_transform(torch.tensor(v, dtype=dtype))) for v in (lo, hi)))
    return bounds


def _fill(params: list[Tensor], x: np.ndarray) -> None:
    """Write the optimiser's point ``x`` into the raw hyperparameters (each a one-element tensor)."""
    with torch.no_grad():
        for p, v in zip(params, x):
            p.fill_(float(v))


def _batched_objective(gp: BanditGP, hps: list[Hyperparameters]) -> Tensor:
    """``gp.negative_log_posterior()`` at many hyperparameters in one batched Cholesky (``inf`` where
    the covariance is not positive definite); the same kernel as :meth:`BanditGP.covar`, written
    out over a batch because evaluating 200 starts one by one cost seconds per round."""
    if gp.has_priors:
        raise ValueError("batched starts are for type-II maximum likelihood: build the GP with priors=False")
    X, y = gp._require_data()
    n, n_arm = y.shape[0], gp.n_arm
    arms = gp.spatial.features(X[:, :n_arm])
    sq = torch.cdist(arms, arms).square()
    dt = (X[:, n_arm:] - X[:, n_arm:].T).abs()
    ls, rho, noise = (torch.tensor([getattr(h, k) for h in hps], dtype=X.dtype, device=X.device)
                      for k in ("lengthscale", "rho", "noise"))
    K = torch.exp(-0.5 * sq / ls.view(-1, 1, 1) ** 2)
    if gp.temporal is not None:
        K = K * torch.exp(-0.5 * rho.view(-1, 1, 1) * dt)
    if gp.trend is not None:
        share, t_ls = (torch.tensor([getattr(h, k) for h in hps], dtype=X.dtype, device=X.device).view(-1, 1, 1)
                       for k in ("trend_share", "trend_lengthscale"))
        K = (1 - share) * K + share * torch.exp(-0.5 * dt.square() / t_ls**2)
    K = K + noise.view(-1, 1, 1) * torch.eye(n, dtype=X.dtype, device=X.device)
    L, info = torch.linalg.cholesky_ex(K)
    alpha = torch.cholesky_solve(y.expand(len(hps), n).unsqueeze(-1), L).squeeze(-1)
    nll = 0.5 * (y * alpha).sum(-1) + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1) + 0.5 * n * math.log(2 * math.pi)
    return torch.where(info == 0, nll / n, torch.full_like(nll, math.inf)).nan_to_num(math.inf)


def _start_value(name: str, u: float, bounds: tuple[float, float]) -> float:
    """A random start for hyperparameter ``name`` from ``u`` in [0, 1): omega uniform in its range
    (given as ``rho`` bounds), the arm's share ``1 - trend_share`` and the others log-uniform."""
    lo, hi = bounds
    if name == "rho":
        omega_lo, omega_hi = float(rho_to_omega(torch.tensor(lo))), float(rho_to_omega(torch.tensor(hi)))
        return float(omega_to_rho(torch.tensor(omega_lo + u * (omega_hi - omega_lo))))
    if name == "trend_share":
        return 1.0 - math.exp(math.log(1.0 - hi) + u * math.log((1.0 - lo) / (1.0 - hi)))
    return math.exp(math.log(lo) + u * math.log(hi / lo))


def fit_ml(
    gp: BanditGP,
    *,
    n_starts: int = 200,
    generator: torch.Generator,
    maxiter: int = 30,
    bounds: dict[str, tuple[float, float]] = ML_BOUNDS,
) -> FitResult:
    """Type-II maximum likelihood as the authors' code fits it: random starts, then L-BFGS-B.

    The marginal likelihood (``gp`` built with ``priors=False``) is evaluated at ``n_starts`` random points of ``bounds`` (length scale and noise log-uniform, omega uniform in
    its range) and at the current values; L-BFGS-B (:func:`fit_map`) then starts from the best. One
    descent from the best start, rather than one per start, keeps a round to a fraction of a second.

    Args:
        gp: the model, with its training data set.
        n_starts: random starting points (the code: 200).
        generator: seeds the starts (the schedule's own generator, so a run is reproducible).
        maxiter: L-BFGS-B iterations.
        bounds: hyperparameter bounds (default: the code's, :data:`~tvolib.bandit.protocol.ML_BOUNDS`).

    Returns:
        The :class:`FitResult` of the descent (``n_evals`` counts the starts too).
    """
    start = time.perf_counter()
    # Every start draws lengthscale, rho and noise (rho unused by a time-invariant GP), then the trend's.
    names = ["lengthscale", "rho", "noise"] + (["trend_share", "trend_lengthscale"] if gp.trend is not None else [])
    u = torch.rand(n_starts, len(names), generator=generator, dtype=torch.float64)
    candidates = [gp.get_hyperparameters()] + [
        Hyperparameters(**{name: _start_value(name, float(v), bounds[name]) for name, v in zip(names, row)})
        for row in u
    ]
    clipped = [Hyperparameters(**{name: min(max(getattr(hp, name), bounds[name][0]), bounds[name][1]) for name in names})
               for hp in candidates]
    with torch.no_grad():
        values = _batched_objective(gp, clipped)
    best = clipped[int(torch.argmin(values))] if torch.isfinite(values).any() else clipped[0]
    gp.set_hyperparameters(best)
    result = fit_map(gp, maxiter=maxiter, bounds=bounds)
    return FitResult(result.hyperparameters, result.ok, result.n_evals + len(candidates),
                     time.perf_counter() - start, result.message)
