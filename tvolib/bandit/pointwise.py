"""The GP of the integrand bandit: the predicted bias change with a fitted weight, and a cost per point.

The reward of round ``i`` (arm ``b_i`` of ``m`` interior points, round ``t_i``), standardised:

    y_i = c g_i + a(b_i, t_i) + tau(t_i) + eps_i,        a(b, t) = (1/m) sum_j psi(u(b_j), t),

* ``g_i`` the predicted bias change of the arm (:func:`~tvolib.bandit.known.predicted_gain`),
  divided by the rewards' scale, and ``c`` its weight, fitted: the generalised-least-squares
  estimate ``c = g^T K^-1 y / g^T K^-1 g`` with variance ``1 / g^T K^-1 g`` (a flat prior on ``c``,
  profiled out of the likelihood);
* ``psi`` what each point adds that the integrand does not say (e.g. the gradient variance of
  points at small beta), a GP in ``u``, the point's logit mapped onto [0, 1] over the arms' box,
  with covariance ``(1 - s) exp(-(u - u')^2 / (2 l^2)) exp(-rho |t - t'| / 2)`` (the paper's time
  kernel). The TVO's left sum and its bias are sums over points, so a sum over points is the form
  of what is left; it is invariant to the points' order and the same function at every ``d``;
* ``tau`` a trend shared by every arm, covariance ``s exp(-(t - t')^2 / (2 l_T^2))``, and ``eps``
  noise of variance ``sigma^2`` (the ``tvolib`` protocol's trend, :class:`~tvolib.bandit.model.BanditGP`).

``psi`` is represented by its values at ``K`` nodes evenly spread in ``u`` and read between them
by linear interpolation, so ``a(b, t) = w(b) psi_t`` with ``w(b)`` the points' interpolation
weights averaged over the points: an exact GP with a finite basis, cheap at any number of
observations, whose posterior at the nodes is what the acquisition draws from
(:meth:`PointwiseGP.node_posterior`). Hyperparameters ``(l, rho, sigma^2, s, l_T)`` (in
:class:`~tvolib.bandit.model.Hyperparameters`' fields ``lengthscale, rho, noise, trend_share,
trend_lengthscale``) by type-II maximum likelihood, ``c`` profiled: the best of random starts,
then L-BFGS-B (:meth:`PointwiseGP.fit`).

Example:
    >>> gp = PointwiseGP(torch.rand(12, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64),
    ...                  torch.linspace(0, 0.9, 12, dtype=torch.float64), torch.linspace(-1, 0, 12, dtype=torch.float64),
    ...                  torch.linspace(-1, 1, 12, dtype=torch.float64))
    >>> hp = gp.fit(torch.Generator().manual_seed(0))
    >>> mean, cov = gp.node_posterior()
    >>> mean.shape, cov.shape, gp.coefficient > 0
    (torch.Size([41]), torch.Size([41, 41]), True)
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.optimize
import torch
from torch import Tensor

from .known import integrand_grid, predicted_gain
from .model import Hyperparameters
from .protocol import robust_standardize
from .threads import one_blas_thread

__all__ = ["NODES", "POINTWISE_BOUNDS", "PointwiseGP", "interpolation_weights", "logit_unit", "pointwise_data",
           "pointwise_reward_posterior"]

#: Nodes of ``psi`` in ``u`` (module docstring): spaced 0.025, a quarter of the smallest length scale.
NODES = 41
#: Bounds of the type-II ML fit: the length scale in ``u`` (the box's logit range is 1), ``rho`` as
#: the code's omega in [0, 0.9], the noise up to all of the standardised rewards' variance, the trend's.
POINTWISE_BOUNDS: dict[str, tuple[float, float]] = {
    "lengthscale": (0.1, 3.0),
    "rho": (1e-6, math.log(10.0)),
    "noise": (1e-4, 1.0),
    "trend_share": (1e-4, 0.9999),
    "trend_lengthscale": (0.1, 2.0),
}
_NAMES = tuple(POINTWISE_BOUNDS)


def _raw(hp: Hyperparameters) -> np.ndarray:
    """The fit's coordinates of ``hp``: logs of ``l, rho, sigma^2, 1 - s, l_T``."""
    values = [hp.lengthscale, hp.rho, hp.noise, 1.0 - hp.trend_share, hp.trend_lengthscale]
    return np.log(np.maximum(values, 1e-300))


def _raw_bounds(name: str, bounds: tuple[float, float]) -> tuple[float, float]:
    lo, hi = (1.0 - bounds[1], 1.0 - bounds[0]) if name == "trend_share" else bounds
    return math.log(lo), math.log(hi)


def _cooked(x: np.ndarray) -> Hyperparameters:
    ls, rho, noise, arm_share, t_ls = np.exp(x).tolist()
    return Hyperparameters(ls, rho, noise, min(max(1.0 - arm_share, 0.0), 1.0 - 1e-12), t_ls)


def interpolation_weights(u: Tensor, nodes: int = NODES) -> Tensor:
    """``w``: ``(N, nodes)``, row ``i`` the mean over the points ``u[i, j]`` (in [0, 1]) of their
    linear-interpolation weights on ``nodes`` evenly spaced nodes; each row sums to 1.

    Example:
        >>> interpolation_weights(torch.tensor([[0.0, 0.5]], dtype=torch.float64), nodes=3).tolist()
        [[0.5, 0.5, 0.0]]
    """
    u = torch.as_tensor(u, dtype=torch.float64).clamp(0.0, 1.0)
    x = u * (nodes - 1)
    k = x.floor().clamp(max=nodes - 2).long()
    frac = x - k
    w = torch.zeros(*u.shape, nodes, dtype=torch.float64)
    w.scatter_(-1, k.unsqueeze(-1), (1 - frac).unsqueeze(-1))
    w.scatter_add_(-1, (k + 1).unsqueeze(-1), frac.unsqueeze(-1))
    return w.mean(-2)


class PointwiseGP:
    """The model of the module docstring on ``N`` standardised observations.

    Args:
        u: ``(N, m)`` the arms' points in ``u`` units ([0, 1]).
        t: ``(N,)`` the rounds' times (the oldest 0, the round being chosen 1).
        g: ``(N,)`` the predicted bias changes in standardised units.
        y: ``(N,)`` standardised rewards.
    """

    def __init__(self, u: Tensor, t: Tensor, g: Tensor, y: Tensor, nodes: int = NODES) -> None:
        self.W = interpolation_weights(u, nodes)
        self.t, self.g, self.y = (torch.as_tensor(v, dtype=torch.float64) for v in (t, g, y))
        grid = torch.linspace(0.0, 1.0, nodes, dtype=torch.float64)
        self._sq = (grid[:, None] - grid[None, :]) ** 2
        self._dt = (self.t[:, None] - self.t[None, :]).abs()
        self.hyperparameters: Hyperparameters | None = None

    # ----- kernel and likelihood -------------------------------------------------------------
    def covariance(self, x: Tensor) -> Tensor:
        """``K + sigma^2 I`` of the observations at raw hyperparameters ``x`` (:func:`_raw`: logs of
        ``l, rho, sigma^2, 1 - s, l_T``; the arm's share ``1 - s`` in log, where the fits end near 0)."""
        ls, rho, noise, arm_share, t_ls = torch.exp(x)
        arm = self.W @ torch.exp(-0.5 * self._sq / ls**2) @ self.W.T
        K = arm_share * arm * torch.exp(-0.5 * rho * self._dt) + (1 - arm_share) * torch.exp(-0.5 * self._dt**2 / t_ls**2)
        return K + noise * torch.eye(K.shape[0], dtype=K.dtype)

    def _profiled(self, K: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(Cholesky factor, c, c's variance, K^-1 (y - c g))`` at the covariance ``K``."""
        L = torch.linalg.cholesky(K)
        Kg = torch.cholesky_solve(self.g[:, None], L)[:, 0]
        precision = Kg @ self.g
        c = (Kg @ self.y) / precision if float(precision) > 1e-12 else torch.zeros((), dtype=K.dtype)
        alpha = torch.cholesky_solve((self.y - c * self.g)[:, None], L)[:, 0]
        return L, c, 1.0 / precision.clamp_min(1e-12), alpha

    def negative_log_likelihood(self, x: Tensor) -> Tensor:
        """``-log N(y - c g | 0, K)`` per observation, ``c`` at its GLS estimate (module docstring)."""
        L, c, _, alpha = self._profiled(self.covariance(x))
        r = self.y - c * self.g
        n = r.numel()
        return (0.5 * (r @ alpha) + torch.log(torch.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)) / n

    # ----- fit -------------------------------------------------------------------------------
    def fit(self, generator: torch.Generator, start: Hyperparameters | None = None, n_starts: int = 64,
            maxiter: int = 50, bounds: dict[str, tuple[float, float]] | None = None) -> Hyperparameters:
        """Type-II ML: the best of ``n_starts`` random starts in ``bounds`` (default
        :data:`POINTWISE_BOUNDS`; log-uniform in ``l, rho, sigma^2, 1 - s, l_T``) and ``start``
        (clipped), then L-BFGS-B; conditions the GP on the result and returns it."""
        bounds = POINTWISE_BOUNDS if bounds is None else bounds
        lo, hi = (np.array(v) for v in zip(*(_raw_bounds(k, bounds[k]) for k in _NAMES)))
        u = torch.rand(n_starts, len(_NAMES), generator=generator, dtype=torch.float64).numpy()
        starts = list(lo + u * (hi - lo))
        if start is not None:
            starts.insert(0, np.clip(_raw(start), lo, hi))
        with torch.no_grad(), one_blas_thread():
            values = [self._value(x) for x in starts]
        best = starts[int(np.argmin(values))]

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
            try:
                value = self.negative_log_likelihood(xt)
                value.backward()
            except RuntimeError:  # not positive definite: a wall for L-BFGS-B
                return 1e10, np.zeros_like(x)
            return float(value.detach()), xt.grad.numpy().astype(np.float64)

        with warnings.catch_warnings(), one_blas_thread():
            warnings.simplefilter("ignore")
            result = scipy.optimize.minimize(objective, best, jac=True, method="L-BFGS-B",
                                             bounds=list(zip(lo, hi)), options={"maxiter": maxiter})
        x = result.x if np.isfinite(result.fun) and result.fun <= min(values) else best
        self.condition(_cooked(x))
        return self.hyperparameters

    def _value(self, x: np.ndarray) -> float:
        try:
            return float(self.negative_log_likelihood(torch.tensor(x, dtype=torch.float64)))
        except RuntimeError:
            return math.inf

    def condition(self, hp: Hyperparameters) -> None:
        """Condition on the observations at ``hp``: sets :attr:`coefficient` (``c``), its variance, and
        the posterior's cache."""
        x = torch.tensor(_raw(hp), dtype=torch.float64)
        with torch.no_grad():
            self._L, c, variance, self._alpha = self._profiled(self.covariance(x))
        self.hyperparameters, self.coefficient, self.coefficient_variance = hp, float(c), float(variance)

    # ----- posterior at the next round (t = 1) --------------------------------------------------
    def _cross(self) -> Tensor:
        """``Cov(psi_1 at the nodes, y)``: ``(nodes, N)``."""
        hp = self.hyperparameters
        nodes = torch.exp(-0.5 * self._sq / hp.lengthscale**2)
        return (1 - hp.trend_share) * (nodes @ self.W.T) * torch.exp(-0.5 * hp.rho * (1.0 - self.t).abs())[None]

    def node_posterior(self) -> tuple[Tensor, Tensor]:
        """Mean ``(nodes,)`` and covariance ``(nodes, nodes)`` of ``psi`` at the nodes at ``t = 1``,
        standardised units."""
        if self.hyperparameters is None:
            raise RuntimeError("fit() or condition() the GP first")
        hp = self.hyperparameters
        C = self._cross()
        prior = (1 - hp.trend_share) * torch.exp(-0.5 * self._sq / hp.lengthscale**2)
        cov = prior - C @ torch.cholesky_solve(C.T, self._L)
        return C @ self._alpha, (cov + cov.T) / 2

    def trend_mean(self) -> float:
        """The trend's posterior mean at ``t = 1`` (standardised units; the same for every arm)."""
        hp = self.hyperparameters
        k = hp.trend_share * torch.exp(-0.5 * (1.0 - self.t) ** 2 / hp.trend_lengthscale**2)
        return float(k @ self._alpha)


def logit_unit(betas: Tensor, lo: float, hi: float) -> Tensor:
    """``u``: the logit of ``betas`` mapped onto [0, 1] over the box's logit range ``[logit lo, logit hi]``.

    Example:
        >>> [round(v, 12) for v in logit_unit(torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64), 0.05, 0.95).tolist()]
        [0.0, 0.5, 1.0]
    """
    b = torch.as_tensor(betas, dtype=torch.float64)
    a, z = math.log(lo / (1 - lo)), math.log(hi / (1 - hi))
    return (torch.log(b) - torch.log1p(-b) - a) / (z - a)


def pointwise_data(rows: list[dict], lo: float, hi: float, t_pred: int) -> dict:
    """The GP's observations from history rows that have a ``known`` part (the rounds it keeps): the
    arms in ``u``, times (the oldest row's round 0, ``t_pred`` 1), known parts and rewards standardised
    by the code's robust rule (:func:`~tvolib.bandit.protocol.robust_standardize`, outliers dropped)."""
    arms = torch.tensor([sorted(r["arm"]) for r in rows], dtype=torch.float64)
    rounds = torch.tensor([int(r["round"]) for r in rows], dtype=torch.float64)
    rewards = torch.tensor([float(r["reward"]) for r in rows], dtype=torch.float64)
    known = torch.tensor([float(r["known"]) for r in rows], dtype=torch.float64)
    keep, y_mean, y_std = robust_standardize(rewards)
    t_origin = int(rounds.min())
    return {
        "u": logit_unit(arms[keep], lo, hi), "t": (rounds[keep] - t_origin) / (t_pred - t_origin),
        "g": known[keep] / y_std, "y": (rewards[keep] - y_mean) / y_std, "y_mean": y_mean, "y_std": y_std,
        "t_origin": t_origin, "n_dropped": int((~keep).sum()),
    }


def pointwise_reward_posterior(rows: list[dict], row: dict, grid: Tensor, component: str = "total"
                               ) -> tuple[Tensor, Tensor]:
    """The reward's posterior at the arms ``grid`` ``(n, m)`` after the integrand bandit's GP round ``row``,
    rebuilt from the rows it kept (``rows``) and the round's recorded hyperparameters and integrand,
    at the next round (``t = 1``), reward units (:func:`~tvolib.bandit.reward_posterior` calls it).

    ``component="arm"``: ``c g(b) + a(b)`` (the arm's part); ``"total"`` adds the trend's posterior mean
    and the rewards' mean. The sd is that of ``a`` (``c`` at its estimate).
    """
    lo, hi = float(row["lo"]), float(row["hi"])
    data = pointwise_data(rows, lo, hi, int(row["t_pred"]))
    if len(rows) != int(row["n_obs"]) or data["t_origin"] != int(row["t_origin"]):
        raise ValueError(f"history is inconsistent at round {row['round']}: rebuilt {len(rows)} observations from "
                         f"round {data['t_origin']}, recorded {row['n_obs']} from round {row['t_origin']}")
    gp = PointwiseGP(data["u"], data["t"], data["g"], data["y"])
    gp.condition(Hyperparameters(float(row["lengthscale"]), float(row["rho"]), float(row["noise"]),
                                 float(row["trend_share"]), float(row["trend_lengthscale"])))
    mean, cov = gp.node_posterior()
    arms = torch.sort(torch.as_tensor(grid, dtype=torch.float64), dim=-1).values
    w = interpolation_weights(logit_unit(arms, lo, hi))
    f = torch.as_tensor(row["integrand"], dtype=torch.float64)
    arm = gp.coefficient * predicted_gain(arms, integrand_grid(lo, hi), f) + data["y_std"] * (w @ mean)
    sd = data["y_std"] * ((w @ cov) * w).sum(-1).clamp_min(0.0).sqrt()
    if component == "arm":
        return arm, sd
    return arm + data["y_std"] * gp.trend_mean() + data["y_mean"], sd
