"""GP-bandit TVO schedule (paper Algorithm 1, Sections 3-4) and its random-search ablation.

Drop-in use from any training loop (no tvolib trainer needed)::

    import torch
    from tvolib.bandit import GPBanditSchedule

    sched = GPBanditSchedule(d=5, seed=0)            # b_0 = 0 plus 4 points in [0.05, 0.95]
    sched.step(0, evidence=train_log_evidence(model, sched.evidence_spec))  # L_0, untrained model
    for epoch in range(1, n_epochs + 1):
        betas = sched.current()                      # (5,) float64 tensor [0, b_1 < ... < b_4]
        train_one_epoch(model, betas)                # your TVO training with these left points
        L = train_log_evidence(model, sched.evidence_spec)  # TVO estimate, 50 linear left points
        sched.step(epoch, evidence=L,                # closes a window and picks the next arm when due;
                   log_weights=lambda: log_w_sample)  # log w (S, N) of some training points: the integrand
    torch.save(sched.state_dict(), "bandit.pt")      # resume exactly: sched.load_state_dict(
                                                     #   torch.load("bandit.pt", weights_only=True))

Windows and rewards (Section 3, Eq. 7) are defined in :mod:`tvolib.bandit.reward`; each reward is
attributed to the arm used during its whole window (never mixed across an early update), and every
round is one row of :meth:`~tvolib.bandit.base.BanditScheduleBase.history`.

The GP round (Section 4, Algorithm 1). After round ``k``: standardise the last
``max_observations`` finite observations ``(arm_i, i, y_i)``, add the corner guards, fit the GP of
:mod:`tvolib.bandit.model` (type-II ML from random starts, or MAP warm-started from round ``k-1``),
maximise GP-UCB (Eq. 17) at time ``k + 1`` (the round being chosen; the same time map is used for
the training points) over the arm domain, and project (Section 4.2). The first rounds draw random
arms (seeded) until ``n_init`` finite observations exist. Which of these choices apply is the
*protocol* (:mod:`tvolib.bandit.protocol`): by default ``"integrand"``, which does best on the
bandit's test bed (:mod:`tvolib.bandit.testbed`): :class:`GPBanditSchedule` then builds
:class:`~tvolib.bandit.integrand_bandit.IntegrandBanditSchedule`, which also reads the integrand
(pass ``log_weights`` to ``step``; without it every round is ``"tvolib"``'s GP-UCB, this package's
protocol); ``protocol="code"`` is the authors' code's, which produced the paper's numbers (the
paper's figures name it), and ``protocol="paper-text"`` what the paper's text alone specifies.
"""
from __future__ import annotations

import math
import time
from typing import Any, Literal

import torch
from torch import Tensor

from ..checks import check_bool, check_finite_float, check_int, check_state, plain_value
from ..config import resolve_device
from .acquisition import MAX_NUM_RESTARTS, MAX_RAW_SAMPLES, acquisition_budget, maximize_ucb, theorem1_kappa
from .base import BanditScheduleBase
from .fit import MAX_ML_STARTS, FitResult, fit_map, fit_ml
from .model import BanditGP, Hyperparameters, TrainingData, training_data
from .plan import warn_if_short
from .posterior import observations
from .protocol import DEFAULT_PROTOCOL, PRESET_CLASSES, coordinate_scale, ml_bounds, resolve_protocol, size_defaults
from .reward import evidence_spec_for

__all__ = ["BanditScheduleBase", "GPBanditSchedule", "RandomSchedule", "evidence_spec_for"]


class RandomSchedule(BanditScheduleBase):
    """Random search (paper Fig 8 ablation): a fresh uniform arm in the arm domain every round.

    Same arguments, windows, rewards and history as :class:`GPBanditSchedule`'s base
    :class:`~tvolib.bandit.base.BanditScheduleBase` (GP fields of the history are None).

    Example:
        >>> sched = RandomSchedule(3, window=2, seed=0)
        >>> for epoch, L in enumerate([-100.0, -99.0, -98.5]):
        ...     sched.step(epoch, evidence=L)
        >>> sched.history()[0]["reward"]               # (L_2 - L_0) / 2 (the default protocol's rate)
        0.75
    """

    def _choose_next(self) -> dict[str, Any]:
        self._arm = self._random_arm().tolist()
        return self._empty_decision("random")


class GPBanditSchedule(BanditScheduleBase):
    """The paper's GP-bandit schedule: time-varying, permutation-invariant GP-UCB (Algorithm 1).

    Args beyond :class:`BanditScheduleBase`'s (``protocol, burn_in_schedule, arm_domain,
    projection, reward, box, window, window_growth_every, window_growth, early_drop, burn_in,
    min_gap, seed``); the protocol items default to the preset's value (``None``):

    * ``sort=True``: permutation-invariant kernel; ``False`` is the unsorted ablation
      (``gp_bandit_unsorted``, Appendix D.4): arms are recorded in the order the acquisition
      proposed them and the GP sees them unsorted (training still uses the sorted schedule).
    * ``time_varying=True``: time kernel with fitted omega; ``False`` fixes omega = 0.
    * ``n_init``: random rounds until this many finite observations (code, tvolib: ``3 d``; paper-text:
      ``max(3, d)``).
    * ``max_observations``: keep only the last so many observations (code: ``30 d``; paper-text: all);
      at least ``n_init`` (else the GP would never run).
    * ``corner_guards``: two pseudo-observations, at the all-lower arm and at the arm with every
      point on the box's upper bound (:meth:`corner_arms`), with the worst standardised reward
      kept, at the latest observation's time; a random arm replaces a proposal at the all-lower
      corner (code, tvolib: on).
    * ``standardize``: ``"robust"`` (standardise, drop ``|z| > 3``, standardise again; code) or
      ``"global"`` (mean and standard deviation of all rewards).
    * ``kappa``: the GP-UCB exploration weight. ``"log_n"`` (code): ``log(N + 2)`` with ``N`` the
      number of observations. ``"theorem1"`` (paper-text): ``kappa_t`` of Theorem 1 with
      ``kappa_delta, kappa_a, kappa_b`` (see :func:`~tvolib.bandit.acquisition.theorem1_kappa`),
      ``t`` = completed rounds, dimension ``d - 1``; large (sqrt(kappa) ~ 8 after 40 rounds at
      d = 3), i.e. very exploratory. A number: that constant.
    * ``fit``: ``"ml"`` (code, tvolib: type-II maximum likelihood, best of ``ml_starts`` random starts
      then L-BFGS-B, within the bounds ``ml_bounds`` names; ``ml_starts`` at most
      :data:`~tvolib.bandit.fit.MAX_ML_STARTS`) or ``"map"`` (weak priors,
      warm-started from the previous round, ``fit_maxiter`` iterations).
    * ``ml_bounds``: ``"code"`` (:data:`~tvolib.bandit.protocol.ML_BOUNDS`) or ``"dimension"``
      (tvolib: the length scale in ``[0.1, 1] sqrt(d - 1)``; :func:`~tvolib.bandit.protocol.ml_bounds`).
    * ``trend``: ``True`` (tvolib) adds a trend shared by every arm to the GP, a smooth function of
      time (:class:`~tvolib.bandit.model.BanditGP`); the acquisition then ranks arms by the arm
      effect's posterior alone.
    * ``acq_maxiter``, ``raw_samples``, ``num_restarts``: acquisition budget (defaults grow with ``d``;
      at most :data:`~tvolib.bandit.acquisition.MAX_RAW_SAMPLES` and ``MAX_NUM_RESTARTS``, and no
      more restarts than raw samples).
    * ``initial_hyperparameters``: the GP's starting point (default ``rho = 2`` or 0 when not
      time-varying).
    * ``device``: where the GP computes (default CUDA when available); arms live on the CPU.
    * ``epochs``: the run's length, if known: a :class:`~tvolib.bandit.plan.ShortRunWarning` names
      the first epoch trained with a GP-chosen arm when such arms would train fewer than half of
      the epochs (:func:`~tvolib.bandit.plan.short_run_message`). Changes nothing else.

    NumPy and torch scalars are accepted wherever a number or flag is (stored as Python values); a
    flag (``sort``, ``time_varying``, ``corner_guards``, ``trend``) takes ``True``, ``False``, ``0``
    or ``1`` (:func:`~tvolib.checks.check_bool`), never a string.

    Example:
        >>> sched = GPBanditSchedule(d=3, window=2, seed=0, device="cpu")
        >>> sched.step(0, evidence=-100.0)                 # L_0 of the untrained model
        >>> sched.step(1, evidence=-99.0); sched.step(2, evidence=-98.0)
        >>> sched.history()[0]["reward"], sched.history()[0]["start_epoch"]   # (L_2 - L_0) / 2, the rate
        (1.0, 0)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> GPBanditSchedule:
        """A preset of :data:`~tvolib.bandit.protocol.PRESET_CLASSES` builds its own subclass."""
        protocol = kwargs.get("protocol", DEFAULT_PROTOCOL)
        chosen = PRESET_CLASSES.get(protocol) if cls is GPBanditSchedule and isinstance(protocol, str) else None
        return super().__new__(chosen or cls)

    def __init__(
        self,
        d: int,
        *,
        sort: bool = True,
        time_varying: bool = True,
        protocol: str = DEFAULT_PROTOCOL,
        n_init: int | None = None,
        max_observations: int | None = None,
        corner_guards: bool | None = None,
        standardize: str | None = None,
        kappa: float | Literal["theorem1", "log_n"] | None = None,
        fit: str | None = None,
        trend: bool | None = None,
        ml_bounds: str | None = None,
        kappa_delta: float = 0.1,
        kappa_a: float = 1.0,
        kappa_b: float = 1.0,
        fit_maxiter: int = 30,
        ml_starts: int = 200,
        acq_maxiter: int = 100,
        raw_samples: int | None = None,
        num_restarts: int | None = None,
        initial_hyperparameters: Hyperparameters | None = None,
        device: str | torch.device | None = None,
        epochs: int | None = None,
        **window_options: Any,
    ) -> None:
        corner_guards, kappa, window_options = plain_value((corner_guards, kappa, window_options))  # NumPy, torch
        self._sort = check_bool("sort", sort)  # needed by _finalise_arm during the base __init__
        super().__init__(d, protocol=protocol, **window_options)
        items = resolve_protocol(protocol, dict(corner_guards=corner_guards, standardize=standardize, fit=fit,
                                                trend=trend, ml_bounds=ml_bounds))
        self.corner_guards, self.standardize, self.fit = items["corner_guards"], items["standardize"], items["fit"]
        self.trend, self.ml_bounds = items["trend"], items["ml_bounds"]
        self.time_varying = check_bool("time_varying", time_varying)
        default_init, default_max = size_defaults(self.protocol, self.d)
        self.n_init = default_init if n_init is None else check_int("n_init", n_init, 1)
        self.max_observations = (default_max if max_observations is None
                                 else check_int("max_observations", max_observations, 1))
        self._check_sizes(self.n_init, self.max_observations)
        self.kappa: float | str = self._check_kappa(items["kappa"] if kappa is None else kappa)
        self.kappa_delta = check_finite_float("kappa_delta", kappa_delta)
        self.kappa_a, self.kappa_b = check_finite_float("kappa_a", kappa_a), check_finite_float("kappa_b", kappa_b)
        theorem1_kappa(1, self.n_arm, delta=self.kappa_delta, a=self.kappa_a, b=self.kappa_b)  # validates
        self.fit_maxiter = check_int("fit_maxiter", fit_maxiter, 1)
        self.ml_starts = check_int("ml_starts (random starts of the ML fit)", ml_starts, 1, MAX_ML_STARTS)
        self.acq_maxiter = check_int("acq_maxiter", acq_maxiter, 1)
        self.raw_samples = (None if raw_samples is None
                            else check_int("raw_samples (of the acquisition)", raw_samples, 1, MAX_RAW_SAMPLES))
        self.num_restarts = (None if num_restarts is None
                             else check_int("num_restarts (of the acquisition)", num_restarts, 1, MAX_NUM_RESTARTS))
        samples, restarts = acquisition_budget(self.n_arm)
        samples, restarts = self.raw_samples or samples, self.num_restarts or restarts
        if restarts > samples:
            raise ValueError(f"num_restarts ({restarts}) must not exceed raw_samples ({samples}): the acquisition's "
                             "restarts start from the best raw samples")
        hp = initial_hyperparameters or Hyperparameters(rho=2.0 if self.time_varying else 0.0,
                                                        trend_share=0.5 if self.trend else 0.0)
        self._hp: Hyperparameters = hp.validate()
        self.device = resolve_device(device)
        #: The GP's stretch of each sorted coordinate onto its own range in the arm domain.
        self.coordinate_scale = coordinate_scale(self.lo, self.upper)
        warn_if_short(self, epochs)  # not stored: the run's length changes no decision

    @staticmethod
    def _check_sizes(n_init: int, max_observations: int | None) -> None:
        """The GP must be able to see ``n_init`` observations under the cap ``max_observations``."""
        if max_observations is not None and max_observations < n_init:
            raise ValueError(
                f"max_observations={max_observations} is below n_init={n_init}: the GP waits for n_init observations "
                "but keeps only the last max_observations, so every round would draw a random arm; choose "
                "max_observations >= n_init (or a smaller n_init)"
            )

    @staticmethod
    def _check_kappa(kappa: Any) -> float | str:
        if isinstance(kappa, str) and kappa in ("theorem1", "log_n"):
            return kappa
        if isinstance(kappa, bool) or not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"kappa must be 'theorem1', 'log_n' or a finite number >= 0; got {kappa!r}")
        return float(kappa) + 0.0  # -0.0 is 0.0

    @property
    def sort_arms(self) -> bool:
        return self._sort

    def _config_row(self) -> dict[str, Any]:
        row = super()._config_row()
        row.update(time_varying=self.time_varying, max_observations=self.max_observations,
                   corner_guards=self.corner_guards, standardize=self.standardize,
                   coordinate_scale=list(self.coordinate_scale), trend=self.trend,
                   guard_arms=self.corner_arms().tolist() if self.corner_guards else None)
        return row

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(
            sort=self._sort, time_varying=self.time_varying, n_init=self.n_init,
            max_observations=self.max_observations, corner_guards=self.corner_guards,
            standardize=self.standardize, fit=self.fit, ml_bounds=self.ml_bounds, trend=self.trend,
            kappa=self.kappa, kappa_delta=self.kappa_delta,
            kappa_a=self.kappa_a, kappa_b=self.kappa_b,
        )
        return cfg

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["hyperparameters"] = self._hp.to_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; every entry is checked first (``ValueError`` naming the key)."""
        raw = check_state(state, ["hyperparameters"], type(self).__name__)["hyperparameters"]
        try:
            hp = Hyperparameters(**{k: float(v) for k, v in dict(raw).items()}).validate()
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{type(self).__name__} state key 'hyperparameters' must be a dict of lengthscale, rho and "
                f"noise with valid values; got {raw!r:.200} ({exc})"
            ) from exc
        super().load_state_dict(state)
        self._hp = hp

    def current_kappa(self, n_rounds: int, n_obs: int) -> float:
        """Exploration weight after ``n_rounds`` completed rounds with ``n_obs`` observations in the GP."""
        if self.kappa == "theorem1":
            value = theorem1_kappa(n_rounds, self.n_arm, delta=self.kappa_delta, a=self.kappa_a, b=self.kappa_b)
            return max(value, 0.0)
        if self.kappa == "log_n":
            return math.log(n_obs + 2)
        return float(self.kappa)

    def corner_arms(self) -> Tensor:
        """The two arms the corner guards cover, ``(2, d - 1)`` in beta units: every point on the
        box's lower bound, and every point on its upper bound ``hi`` (the authors' code's arms).

        In the staggered domain the upper one is not the domain's upper corner (``upper``): like
        every observation it goes through the GP's per-point scaling
        (:func:`~tvolib.bandit.protocol.coordinate_scale`), which puts it outside the unit cube,
        at ``(1, 1.36, 2.12, 4.8)`` (sorted) for ``d = 5``, as in the code.
        """
        return torch.tensor([[self.lo] * self.n_arm, [self.box[1]] * self.n_arm], dtype=torch.float64)

    def _fitted_gp(self, arms: Tensor, rounds: Tensor, rewards: Tensor) -> tuple[BanditGP, FitResult, TrainingData]:
        """The GP of this round, fitted to the observations (:func:`~tvolib.bandit.posterior.observations`)
        with the schedule's fit; keeps its hyperparameters as the next round's start."""
        data = training_data(
            arms, rounds, rewards, lo=self.lo, hi=self.hi, t_pred=self._round + 1, standardize=self.standardize,
            guards=self.corner_arms() if self.corner_guards else None, device=self.device,
        )
        gp = BanditGP(self.n_arm, sort=self._sort, time_varying=self.time_varying, hyperparameters=self._hp,
                      priors=self.fit == "map", coordinate_scale=self.coordinate_scale, trend=self.trend,
                      device=self.device)
        gp.set_train_data(data.X, data.y)
        if self.fit == "map":
            fit = fit_map(gp, maxiter=self.fit_maxiter)
        else:
            fit = fit_ml(gp, n_starts=self.ml_starts, generator=self._gen, maxiter=self.fit_maxiter,
                         bounds=ml_bounds(self.ml_bounds, self.n_arm))
        self._hp = fit.hyperparameters
        return gp, fit, data

    def _choose_next(self) -> dict[str, Any]:
        arms, rounds, rewards = observations(self._history, max_observations=self.max_observations)
        if rewards.numel() < self.n_init:
            self._arm = self._random_arm().tolist()
            return self._empty_decision("random")
        t_pred = self._round + 1  # the round whose arm is chosen now
        gp, fit, data = self._fitted_gp(arms, rounds, rewards)
        kappa = self.current_kappa(self._round + 1, int(rewards.numel()))
        round_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self._gen))
        start = time.perf_counter()
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        upper = (torch.tensor(self.upper, dtype=torch.float64) - self.lo) / (self.hi - self.lo)
        with torch.random.fork_rng(devices=devices):  # BoTorch's randomness: seeded, global RNG untouched
            torch.manual_seed(round_seed)
            x, value = maximize_ucb(
                gp, t_norm=1.0, kappa=kappa, seed=round_seed, raw_samples=self.raw_samples,
                num_restarts=self.num_restarts, maxiter=self.acq_maxiter, upper=upper,
            )
        acq_seconds = time.perf_counter() - start
        arm = self._finalise_arm(self.lo + (self.hi - self.lo) * x.cpu())
        source = "gp"
        if self.corner_guards and bool((arm <= self.lo + self._gap * (self.n_arm - 1) + 1e-12).all()):
            arm, source = self._random_arm(), "corner"  # the code's guard: never the all-lower corner
        self._arm = arm.tolist()
        hp = fit.hyperparameters
        return {
            "source": source,
            "lengthscale": hp.lengthscale,
            "omega": hp.omega if self.time_varying else 0.0,
            "rho": hp.rho,
            "noise": hp.noise,
            "trend_share": hp.trend_share if self.trend else None,
            "trend_lengthscale": hp.trend_lengthscale if self.trend else None,
            "kappa": kappa,
            "acq_value": value,
            "fit_seconds": fit.seconds,
            "acq_seconds": acq_seconds,
            "fit_ok": fit.ok,
            "fit_evals": fit.n_evals,
            "n_obs": int(rewards.numel()),
            "n_dropped": data.n_dropped,
            "t_origin": data.t_origin,
            "t_pred": t_pred,
            "y_mean": data.y_mean,
            "y_std": data.y_std,
        }
