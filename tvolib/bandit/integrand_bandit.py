"""A GP bandit that learns only what the integrand does not say (``protocol="integrand"``).

The reward of a window is the evidence gained per epoch with the arm trained. Part of it the
integrand ``f(beta) = E_{pi_beta}[log w]`` predicts: a schedule whose left sum is less biased gives
a tighter bound to train on. :class:`IntegrandBanditSchedule` reads ``f`` when a window closes
(from the ``log_weights`` the training loop hands every schedule's ``step``, as the moments schedule
does, or from a synthetic run's ``integrand``) and models the reward as

    y = c g(b) + (1/m) sum_j psi(b_j) + trend(t) + noise

(:mod:`tvolib.bandit.pointwise`): ``g(b)`` the arm's predicted bias change
(:func:`~tvolib.bandit.known.predicted_gain`) with a fitted weight ``c``, and a cost per point
``psi`` for what the integrand does not say. Both the left sum and the cost are sums over
consecutive points, so the arm that maximises a draw of the model is found exactly by the dynamic
programme of :func:`~tvolib.bias_optimal.bias_optimal_points` (``f`` weighted by ``c``, the cost
``-psi``): at every ``d`` the search is over one function of one variable, and the arms follow the
integrand as it moves during training.

Each round after the first ``n_init_integrand`` observations:

1. ``c``'s estimate and ``psi``'s posterior at the nodes and the next round's time, from the
   hyperparameters fitted by type-II ML (:meth:`~tvolib.bandit.pointwise.PointwiseGP.fit`);
2. ``"ucb"`` (default): ``psi``'s posterior mean plus ``sqrt(kappa)`` posterior sds at every node
   (``kappa = log(N + 2)``, the protocol's), ``c`` its estimate (kept ``>= 0``); ``"thompson"``: one
   joint draw of ``psi`` at the nodes and one of ``c``;
3. the next arm: the grid points of ``d - 1`` interior points with the largest ``c S(b) - cost``.

The first rounds with the integrand (``n_init_integrand``, 3 whatever ``d``, rather than the
``tvolib`` protocol's ``3 d`` random rounds; ``source`` ``"random"``) train the bias-optimal arm and
then that arm with each point moved by a uniform ``+-init_spread`` in logit: an initial design
around the incumbent the integrand gives. Where no integrand is given (the PCFG trainer, a loop
that reports only the evidence, the test bed's bump cases) every round is the ``tvolib`` protocol's
GP-UCB (:class:`~tvolib.bandit.GPBanditSchedule`), arm for arm; once one has been read, a round
without one reuses the last.

The arms' box is the other protocols' ``(0.05, 0.95)``. A wider one, ``(0.001, 0.95)``, lets the
first point follow integrands that rise steeply near 0, as real ones do, but on the test bed it
did worse (mean regret 0.151 against 0.123 over the nine TVO-form cases, seeds 0-2,
``benchmarks/integrand_candidates.py``): the GP learns little of the cost of points at small beta
(its fits give the arm's part of the rewards almost none of their variance once the arms sit near
the bias-optimal ones), and the box's edge keeps the points out of the region that cost lives in.

Measured, not designed: the GP part rarely moves the arm. On the ``quick`` figures' runs 82% of the
GP rounds train the bias-optimal arm in the box, and on the test bed the protocol with that arm in
every round scores the same to the third decimal on seven of nine cases (benchmarks/README.md,
"What the integrand protocol's GP adds"). Its fits give the cost part almost none of the reward's
variance, so what it gains over the bias-only rule is mostly the box's floor at 0.05.

Every round records the integrand it used on :attr:`IntegrandBanditSchedule.grid` (``integrand``),
each observation its ``known`` part ``g`` (nats), and GP rounds the fitted ``coefficient`` (``c``,
reward units per nat) and its sd, so that :func:`~tvolib.bandit.replay` and
:func:`~tvolib.bandit.reward_posterior` work from the history alone
(:func:`~tvolib.bandit.pointwise.pointwise_reward_posterior`).

Example:
    >>> sched = IntegrandBanditSchedule(3, window=2, seed=0, device="cpu")
    >>> f = lambda betas: -torch.exp(-20 * betas)        # an integrand rising steeply near 0
    >>> for epoch in range(0, 9):
    ...     sched.step(epoch, evidence=-100.0 + epoch, integrand=f)
    >>> [row["source"] for row in sched.history()]
    ['random', 'random', 'gp', 'gp']
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..bias_optimal import bias_optimal_points
from ..checks import check_bool, check_finite_float, check_int
from .known import integrand_grid, left_sums, predicted_gain, read_integrand
from .model import Hyperparameters
from .pointwise import NODES, PointwiseGP, interpolation_weights, logit_unit, pointwise_data
from .posterior import observed_rows
from .protocol import PRESET_CLASSES
from .scheduler import GPBanditSchedule
from .threads import one_blas_thread

__all__ = ["ACQUISITIONS", "IntegrandBanditSchedule"]

#: How the next arm is chosen from the GP (module docstring).
ACQUISITIONS = ("thompson", "ucb")
#: Random starts of the pointwise GP's ML fit (each one Cholesky factor of the observations).
FIT_STARTS = 64


class IntegrandBanditSchedule(GPBanditSchedule):
    """The bandit of the module docstring; :class:`~tvolib.bandit.GPBanditSchedule` builds it for
    ``protocol="integrand"``.

    Args beyond :class:`~tvolib.bandit.GPBanditSchedule`'s (whose items and sizes, the ``tvolib``
    protocol's, serve the rounds without an integrand):

    * ``acquisition``: ``"ucb"`` (default) or ``"thompson"`` (module docstring).
    * ``known``: whether the predicted bias change enters the reward's model (``False``: ``c = 0``,
      the GP over points learns everything; an ablation).
    * ``n_init_integrand``: observations with the integrand before the GP chooses (>= 2).
    * ``init_spread``: the initial design's moves of each point, in logit units (> 0).

    ``step(epoch, evidence, log_weights=None, integrand=None)``: ``log_weights`` (a callable
    returning ``log w`` of shape ``(S, N)``, what the training loop passes) or ``integrand`` (a
    callable ``betas -> f(betas)``, a synthetic run's exact integrand) is read only when the report
    closes a window.
    """

    #: The test bed passes a synthetic run's exact integrand to schedules that say they read one.
    reads_integrand = True
    #: The stacked trainer evaluates ``log_weights`` for this schedule before a window closes in a worker.
    reads_log_weights = True

    def __init__(self, d: int, *, protocol: str = "integrand", acquisition: str = "ucb", known: bool = True,
                 n_init_integrand: int = 3, init_spread: float = 0.5, **options: Any) -> None:
        if protocol != "integrand":
            raise ValueError(f"{type(self).__name__} is the 'integrand' protocol's bandit; got protocol={protocol!r} "
                             "(GPBanditSchedule(d, protocol=...) builds the bandit of any preset)")
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"acquisition must be one of {list(ACQUISITIONS)}; got {acquisition!r}")
        self.acquisition = acquisition
        self.known = check_bool("known", known)
        self.n_init_integrand = check_int("n_init_integrand (observations with the integrand before the GP)",
                                          n_init_integrand, 2)
        self.init_spread = check_finite_float("init_spread (logit units)", init_spread, minimum=0.0, strict=True)
        super().__init__(d, protocol=protocol, **options)
        #: The betas at which the integrand is read (:func:`~tvolib.bandit.known.integrand_grid`).
        self.grid = integrand_grid(self.lo, self.hi)
        self._pointwise_hp: Hyperparameters | None = None
        self._inputs: tuple[Any, Any] = (None, None)

    # ----- reports ---------------------------------------------------------------------------
    def step(self, epoch: int, evidence: float | Tensor | None = None, log_weights: Callable[[], Tensor] | None = None,
             integrand: Callable[[Tensor], Tensor] | None = None) -> None:
        """:meth:`GPBanditSchedule.step <tvolib.bandit.base.BanditScheduleBase.step>`, reading the
        integrand from ``integrand`` or ``log_weights`` if the report closes a window."""
        self._inputs = (integrand, log_weights)
        try:
            super().step(epoch, evidence=evidence)
        finally:
            self._inputs = (None, None)

    def observe(self, reward: float, integrand: Callable[[Tensor], Tensor] | None = None,
                integrand_values: Any = None) -> Tensor:
        """:meth:`~tvolib.bandit.base.BanditScheduleBase.observe` with the integrand of the round's end:
        a callable, or its values on :attr:`grid` (a history row's ``integrand``, as
        :func:`~tvolib.bandit.replay` passes them)."""
        if integrand is None and integrand_values is not None:
            values = torch.as_tensor(integrand_values, dtype=torch.float64)
            integrand = lambda betas: values  # noqa: E731 -- read on self.grid only
        self._inputs = (integrand, None)
        try:
            return super().observe(reward)
        finally:
            self._inputs = (None, None)

    @staticmethod
    def replay_inputs(row: dict[str, Any]) -> dict[str, Any]:
        """What :func:`~tvolib.bandit.replay` passes to :meth:`observe` with a recorded row's reward."""
        return {"integrand_values": row.get("integrand")}

    # ----- the decision ----------------------------------------------------------------------
    def random_round(self, row: dict[str, Any], kept: int) -> bool:
        """Whether round ``row`` (with ``kept`` observations up to it) chose a random arm: the initial
        design while fewer than ``n_init_integrand`` observations exist where an integrand was read,
        else the ``tvolib`` protocol's ``n_init`` random rounds (:mod:`tvolib.bandit.rules` asks)."""
        return kept < (self.n_init if row.get("integrand") is None else self.n_init_integrand)

    def _choose_next(self) -> dict[str, Any]:
        integrand, log_weights = self._inputs
        f = read_integrand(self.grid, integrand=integrand, log_weights=log_weights)
        if f is None:  # none given: the last one read, else the rounds are the tvolib protocol's
            last = next((r["integrand"] for r in reversed(self._history) if r.get("integrand") is not None), None)
            f = None if last is None else torch.tensor(last, dtype=torch.float64)
        if f is None:
            self._history[-1]["known"] = None
            return {**super()._choose_next(), **_no_integrand()}
        for row in self._history:  # this round's, and any before the first integrand was read
            if row.get("known") is None:
                arm = torch.tensor([sorted(row["arm"])], dtype=torch.float64)
                row["known"] = float(predicted_gain(arm, self.grid, f)[0])
        rows = observed_rows(self._history, None, self.max_observations)
        with one_blas_thread():
            if len(rows) < self.n_init_integrand:
                return self._initial(f, len(rows))
            return self._from_gp(f, rows)

    def _initial(self, f: Tensor, count: int) -> dict[str, Any]:
        """The initial design: the bias-optimal arm, then that arm with every point moved in logit."""
        best = bias_optimal_points(self.d, self.grid, f)[1:]
        spread = 0.0 if count <= 1 else self.init_spread
        move = spread * (2 * torch.rand(self.n_arm, generator=self._gen, dtype=torch.float64) - 1)
        self._arm = self._finalise_arm(torch.sigmoid(_logit(best) + move)).tolist()
        return {**self._empty_decision("random"), **_no_integrand(), "integrand": f.tolist()}

    def _from_gp(self, f: Tensor, rows: list[dict[str, Any]]) -> dict[str, Any]:
        t_pred = self._round + 1
        start = time.perf_counter()
        data = pointwise_data(rows, self.lo, self.hi, t_pred)
        gp = PointwiseGP(data["u"], data["t"], data["g"] if self.known else 0 * data["g"], data["y"])
        hp = gp.fit(self._gen, start=self._pointwise_hp, n_starts=FIT_STARTS)
        self._pointwise_hp = hp
        fit_seconds, start = time.perf_counter() - start, time.perf_counter()
        mean, cov = gp.node_posterior()
        c_sd = math.sqrt(max(gp.coefficient_variance, 0.0))
        kappa = self.current_kappa(self._round + 1, len(rows))
        if self.acquisition == "thompson":
            values, vectors = torch.linalg.eigh(cov)
            z = torch.randn(mean.numel(), generator=self._gen, dtype=torch.float64)
            psi = mean + vectors @ (values.clamp_min(0.0).sqrt() * z)
            c = max(0.0, gp.coefficient + c_sd * float(torch.randn((), generator=self._gen, dtype=torch.float64)))
        else:
            psi, c = mean + math.sqrt(kappa) * cov.diagonal().clamp_min(0.0).sqrt(), max(0.0, gp.coefficient)
        cost = torch.zeros_like(self.grid)
        inside = logit_unit(self.grid[1:-1], self.lo, self.hi)
        cost[1:-1] = -data["y_std"] * (interpolation_weights(inside[:, None]) @ psi) / self.n_arm
        points = bias_optimal_points(self.d, self.grid, c * f, cost=cost)
        value = float(left_sums(points[1:][None], self.grid, c * f)[0] - cost[torch.searchsorted(self.grid, points)].sum())
        self._arm = self._finalise_arm(points[1:]).tolist()
        return {
            **self._empty_decision("gp"), "integrand": f.tolist(), "coefficient": gp.coefficient,
            "coefficient_sd": c_sd, "lengthscale": hp.lengthscale, "rho": hp.rho,
            "omega": hp.omega if self.time_varying else 0.0, "noise": hp.noise, "trend_share": hp.trend_share,
            "trend_lengthscale": hp.trend_lengthscale, "kappa": kappa, "acq_value": value,
            "fit_seconds": fit_seconds, "acq_seconds": time.perf_counter() - start, "fit_ok": True,
            "fit_evals": FIT_STARTS, "n_obs": len(rows), "n_dropped": data["n_dropped"],
            "t_origin": data["t_origin"], "t_pred": t_pred, "y_mean": data["y_mean"], "y_std": data["y_std"],
        }

    # ----- state -----------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(acquisition=self.acquisition, known=self.known, n_init_integrand=self.n_init_integrand,
                   init_spread=self.init_spread, nodes=NODES)
        return cfg

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["pointwise_hyperparameters"] = None if self._pointwise_hp is None else self._pointwise_hp.to_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """:meth:`GPBanditSchedule.load_state_dict` and the pointwise GP's warm start (checked first)."""
        raw = state.get("pointwise_hyperparameters") if isinstance(state, dict) else None
        hp = None
        if raw is not None:
            try:
                hp = Hyperparameters(**{k: float(v) for k, v in dict(raw).items()}).validate()
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{type(self).__name__} state key 'pointwise_hyperparameters' must be None or a "
                                 f"dict of valid hyperparameters; got {raw!r:.200} ({exc})") from exc
        super().load_state_dict(state)
        self._pointwise_hp = hp


def _logit(x: Tensor) -> Tensor:
    return torch.log(x) - torch.log1p(-x)


def _no_integrand() -> dict[str, Any]:
    return {"integrand": None, "coefficient": None, "coefficient_sd": None}


PRESET_CLASSES["integrand"] = IntegrandBanditSchedule
