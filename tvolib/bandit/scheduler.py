"""GP-bandit TVO schedule (paper Algorithm 1, Sections 3-4) and its random-search ablation.

Drop-in use from any training loop (no tvolib trainer needed)::

    import torch
    from tvolib.bandit import GPBanditSchedule

    sched = GPBanditSchedule(d=5, seed=0)            # b_0 = 0 plus 4 points in [0.05, 0.95]
    for epoch in range(1, n_epochs + 1):
        betas = sched.current()                      # (5,) float64 tensor [0, b_1 < ... < b_4]
        train_one_epoch(model, betas)                # your TVO training with these left points
        L = train_log_evidence(model, sched.evidence_spec)  # TVO estimate, 50 linear left points
        sched.step(epoch, evidence=L)                # closes a window and picks the next arm when due
    torch.save(sched.state_dict(), "bandit.pt")      # resume exactly: sched.load_state_dict(
                                                     #   torch.load("bandit.pt", weights_only=True))

Rounds and rewards (Section 3). Training is cut into windows; window ``k`` (round ``k``) uses one
arm for all its epochs. A window starts at the epoch ``e_s`` whose evidence ``L_s`` was last
reported (the first report at or after ``burn_in``; report ``step(0, L_0)`` to start at the
untrained model) and ends at the first report ``e`` with ``e - e_s >= w_k`` (planned length
``w_k = window + window_growth * floor(k / window_growth_every)``: 6, +1 every 10 rounds) or
earlier on an *early update*:

* ``reward="paper"`` (default; Section 3, Eq. reward_function, and Appendix A): ``L`` is the
  training-set TVO log-evidence with 50 linear left points ``i/50`` (``evidence_spec``). Reward
  ``y_k = L_end - L_start``. Early update when ``L_e - L_start <= -early_drop`` (the paper's
  "update early if L_t <= -0.05", reading ``L_t`` as the window's running reward): the window
  ends at ``e`` and its reward is the (negative) change so far.
* ``reward="code"`` (the authors' code): ``L`` integrates 50 points ``10**linspace(-9, 0, 50)`` by
  the trapezoid rule; the window's value is the *mean* of its per-epoch ``L``; ``y_k`` is that mean
  minus the previous window's mean (``L_start`` for the first window); early update when
  ``L_e < previous mean - early_drop``.

Either way the reward is attributed to the arm used during the whole window (never mixed across
an early update), non-finite rewards are skipped with a warning and never reach the GP, and every
round is one row of :meth:`history`.

The GP round (Section 4, Algorithm 1). After round ``k``: fit the GP of
:mod:`tvolib.bandit.model` to all finite observations ``(arm_i, i, y_i)`` (or the last
``max_observations``) by MAP, warm-started from round ``k-1``; maximise GP-UCB with
``kappa`` of Theorem 1 at time ``k + 1`` (the round being chosen; the same time map is used for
the training points); project by sorting. The first rounds draw uniform random arms (seeded)
until ``n_init`` finite observations exist (default ``max(3, d)``, i.e. one more than the arm's
dimension, and at least 3).
"""
from __future__ import annotations

import math
import time
import warnings
from abc import abstractmethod
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from ..config import resolve_device
from ..schedules import Schedule
from ..tvo import EvidenceSpec
from .acquisition import maximize_ucb, project_arm, theorem1_kappa
from .model import BanditGP, Hyperparameters, fit_map, training_data
from .posterior import observations

__all__ = ["BanditScheduleBase", "GPBanditSchedule", "RandomSchedule", "evidence_spec_for"]

_STATE_VERSION = 1


def evidence_spec_for(reward: str) -> EvidenceSpec:
    """The log-evidence estimate each reward definition needs (paper Appendix A / authors' code)."""
    if reward == "paper":  # left Riemann sum over 50 linear points i / 50
        return EvidenceSpec.paper(50)
    if reward == "code":  # trapezoid rule over 10**linspace(-9, 0, 50)
        return EvidenceSpec.authors_code(50)
    raise ValueError(f"reward must be 'paper' or 'code'; got {reward!r}")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _as_float(value: Any, name: str) -> float:
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError(f"{name} must be a scalar; got a tensor of shape {tuple(value.shape)}")
        return float(value.detach().cpu().item())
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number; got {value!r}") from exc


class BanditScheduleBase(Schedule):
    """Windows, rewards, history and state shared by the GP bandit and random search.

    Subclasses implement :meth:`_choose_next`, which picks the arm of the next round from the
    history (whose last row is the round just completed).
    """

    def __init__(
        self,
        d: int,
        *,
        box: tuple[float, float] = (0.05, 0.95),
        window: int = 6,
        window_growth_every: int = 10,
        window_growth: int = 1,
        early_drop: float | None = 0.05,
        burn_in: int = 0,
        reward: Literal["paper", "code"] = "paper",
        min_gap: float = 1e-3,
        seed: int = 0,
    ) -> None:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
            raise ValueError(
                f"d must be an integer >= 2 (b_0 = 0 plus at least one interior point to choose); got {d!r}"
            )
        self._d = int(d)
        try:
            lo, hi = (float(v) for v in box)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"box must be a pair (lo, hi); got {box!r}") from exc
        if not (0.0 < lo < hi < 1.0):
            raise ValueError(
                f"box must satisfy 0 < lo < hi < 1 (b_0 = 0 is fixed and 1 is appended, so interior "
                f"points lie strictly inside); got {box!r}"
            )
        if not (min_gap > 0 and (self._d - 2) * min_gap <= hi - lo):
            raise ValueError(f"min_gap must be > 0 and fit {self._d - 1} points in [{lo}, {hi}]; got {min_gap}")
        self.lo, self.hi, self.min_gap = lo, hi, float(min_gap)
        self.window = _check_int("window", window, 1)
        self.window_growth_every = _check_int("window_growth_every", window_growth_every, 1)
        self.window_growth = _check_int("window_growth", window_growth, 0)
        if early_drop is not None and not (math.isfinite(early_drop) and early_drop >= 0):
            raise ValueError(f"early_drop must be None (no early updates) or a finite number >= 0; got {early_drop!r}")
        self.early_drop = None if early_drop is None else float(early_drop)
        self.burn_in = _check_int("burn_in", burn_in, 0)
        self.reward = reward
        self.evidence_spec = evidence_spec_for(reward)
        self.seed = _check_int("seed", seed, 0)
        self._gen = torch.Generator().manual_seed(self.seed)
        self._history: list[dict[str, Any]] = []
        self._round = 0
        self._last_epoch: int | None = None
        self._start_epoch: int | None = None
        self._start_evidence: float | None = None
        self._window_evidence: list[float] = []
        self._prev_window_mean: float | None = None
        self._arm: list[float] = self._random_arm().tolist()

    # ----- the Schedule interface ------------------------------------------------------------
    @property
    def d(self) -> int:
        return self._d

    @property
    def n_arm(self) -> int:
        """Number of interior points chosen by the bandit, ``d - 1``."""
        return self._d - 1

    @property
    def sort_arms(self) -> bool:
        """Whether recorded arms are sorted (the GP's inputs); schedules used are always sorted."""
        return True

    @property
    def round(self) -> int:
        """Index of the round (window) in progress."""
        return self._round

    def window_length(self, round_index: int | None = None) -> int:
        """Planned length in epochs of window ``round_index`` (default: the current one)."""
        k = self._round if round_index is None else round_index
        return self.window + self.window_growth * (k // self.window_growth_every)

    def current_arm(self) -> Tensor:
        """The arm of the current round as recorded for the GP, ``(d - 1,)`` in beta units."""
        return torch.tensor(self._arm, dtype=torch.float64)

    def current(self) -> Tensor:
        """``[0, sorted arm]``: the left points to train with now, float64 ``(d,)``."""
        return torch.cat([torch.zeros(1, dtype=torch.float64), torch.sort(self.current_arm()).values])

    def step(self, epoch: int, evidence: float | Tensor | None = None, log_weights=None) -> None:
        """Report that ``epoch`` epochs are done and the training log-evidence is ``evidence``.

        ``evidence`` must be the estimate described by :attr:`evidence_spec`. Epochs must
        increase. Closes the current window (and chooses the next arm) when it is due or on an
        early update; see the module docstring for the exact rules.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"epoch must be an integer >= 0; got {epoch!r}")
        epoch = int(epoch)
        if self._last_epoch is not None and epoch <= self._last_epoch:
            raise ValueError(f"epochs must increase: got {epoch} after {self._last_epoch}")
        if evidence is None:
            raise ValueError(
                f"{type(self).__name__}.step needs evidence=L, the training log-evidence described by "
                "its evidence_spec, after every epoch"
            )
        value = _as_float(evidence, "evidence")
        self._last_epoch = epoch
        if epoch < self.burn_in:
            return
        if self._start_epoch is None:
            self._start_epoch, self._start_evidence = epoch, value
            return
        self._window_evidence.append(value)
        length = epoch - self._start_epoch
        planned = self.window_length()
        if self.reward == "paper":
            reference = self._start_evidence
            early = self.early_drop is not None and value - reference <= -self.early_drop
        else:
            reference = self._start_evidence if self._prev_window_mean is None else self._prev_window_mean
            early = self.early_drop is not None and value - reference < -self.early_drop
        early = bool(early and length < planned)
        if length < planned and not early:
            return
        if self.reward == "paper":
            reward = value - self._start_evidence
        else:
            window_mean = float(np.mean(self._window_evidence))
            reward = window_mean - reference
            self._prev_window_mean = window_mean
        self._complete_round(
            reward,
            epoch=epoch,
            start_epoch=self._start_epoch,
            early=early,
            evidence_start=self._start_evidence,
            evidence_end=value,
        )
        self._start_epoch, self._start_evidence = epoch, value
        self._window_evidence = []

    def observe(self, reward: float) -> Tensor:
        """Close the current round with a reward computed by the caller; return the next ``current()``.

        An alternative to :meth:`step` for callers that compute rewards themselves (e.g. synthetic
        benchmarks): the reward is attributed to the current arm at the current round index. Do not
        mix with :meth:`step` in one run.
        """
        self._complete_round(
            _as_float(reward, "reward"), epoch=None, start_epoch=None, early=False,
            evidence_start=None, evidence_end=None,
        )
        return self.current()

    def history(self) -> list[dict[str, Any]]:
        """One dict per completed round: the observation, then the decision taken after it.

        Keys: ``round, epoch, start_epoch, window, length, early, arm, betas, evidence_start,
        evidence_end, reward, skipped`` (the observation; ``arm`` is the GP input in beta units,
        ``betas = [0, sorted(arm)]`` the schedule trained with), ``source`` ("random" or "gp"),
        ``next_arm, lengthscale, omega, rho, noise, kappa, acq_value, fit_seconds, acq_seconds,
        fit_ok, fit_evals, n_obs, t_origin, t_pred, y_mean, y_std`` (the decision; GP fields are
        None for random rounds; hyperparameters and ``acq_value`` are in the GP's units: normalised
        arm and time, standardised rewards), and the configuration ``d, lo, hi, sort, time_varying,
        max_observations, reward_rule`` so :func:`tvolib.bandit.reward_posterior` can rebuild the
        GP from the rows alone.
        """
        return [{k: (list(v) if isinstance(v, list) else v) for k, v in row.items()} for row in self._history]

    # ----- rounds ----------------------------------------------------------------------------
    def _complete_round(self, reward: float, **info: Any) -> None:
        skipped = not math.isfinite(reward)
        if skipped:
            warnings.warn(
                f"round {self._round}: non-finite reward {reward!r} skipped (not given to the GP)",
                RuntimeWarning,
                stacklevel=3,
            )
        arm = list(self._arm)
        length = None
        if info["epoch"] is not None and info["start_epoch"] is not None:
            length = info["epoch"] - info["start_epoch"]
        row: dict[str, Any] = {
            "round": self._round,
            "epoch": info["epoch"],
            "start_epoch": info["start_epoch"],
            "window": self.window_length(),
            "length": length,
            "early": bool(info["early"]),
            "arm": arm,
            "betas": [0.0] + sorted(arm),
            "evidence_start": info["evidence_start"],
            "evidence_end": info["evidence_end"],
            "reward": float(reward),
            "skipped": skipped,
            **self._config_row(),
        }
        self._history.append(row)
        decision = self._choose_next()
        row.update(decision)
        row["next_arm"] = list(self._arm)
        self._round += 1

    def _config_row(self) -> dict[str, Any]:
        return {
            "d": self._d, "lo": self.lo, "hi": self.hi, "sort": self.sort_arms,
            "time_varying": False, "max_observations": None, "reward_rule": self.reward,
        }

    @staticmethod
    def _empty_decision(source: str) -> dict[str, Any]:
        return {
            "source": source, "lengthscale": None, "omega": None, "rho": None, "noise": None,
            "kappa": None, "acq_value": None, "fit_seconds": None, "acq_seconds": None,
            "fit_ok": None, "fit_evals": None, "n_obs": None, "t_origin": None, "t_pred": None,
            "y_mean": None, "y_std": None,
        }

    @abstractmethod
    def _choose_next(self) -> dict[str, Any]:
        """Set ``self._arm`` for the next round; return the decision's history fields."""

    def _random_arm(self) -> Tensor:
        raw = self.lo + (self.hi - self.lo) * torch.rand(self.n_arm, generator=self._gen, dtype=torch.float64)
        return self._finalise_arm(raw)

    def _finalise_arm(self, raw: Tensor) -> Tensor:
        """Project ``raw`` (beta units) to a valid arm; for unsorted GPs keep ``raw``'s order.

        Invariant: ``sort(result)`` is the strictly increasing interior schedule trained with.
        """
        raw = raw.detach().to("cpu", torch.float64)
        projected = project_arm(raw, self.lo, self.hi, self.min_gap)
        if self.sort_arms:
            return projected
        out = torch.empty_like(projected)
        out[torch.argsort(raw.clamp(self.lo, self.hi), stable=True)] = projected
        return out

    # ----- state -----------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {
            "class": type(self).__name__, "d": self._d, "lo": self.lo, "hi": self.hi, "min_gap": self.min_gap,
            "window": self.window, "window_growth_every": self.window_growth_every,
            "window_growth": self.window_growth, "early_drop": self.early_drop, "burn_in": self.burn_in,
            "reward": self.reward, "seed": self.seed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly; safe for ``torch.load(weights_only=True)``."""
        return {
            "version": _STATE_VERSION,
            "config": self._config(),
            "round": self._round,
            "arm": list(self._arm),
            "last_epoch": self._last_epoch,
            "start_epoch": self._start_epoch,
            "start_evidence": self._start_evidence,
            "window_evidence": list(self._window_evidence),
            "prev_window_mean": self._prev_window_mean,
            "generator": self._gen.get_state(),
            "history": self.history(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; the configuration must match this schedule's."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported bandit state version {state.get('version')!r} (expected {_STATE_VERSION})")
        mine, theirs = self._config(), dict(state["config"])
        if mine != theirs:
            diff = {k: (theirs.get(k), mine.get(k)) for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
            raise ValueError(f"state was saved by a differently configured schedule (saved, this): {diff}")
        self._round = int(state["round"])
        self._arm = [float(v) for v in state["arm"]]
        self._last_epoch = state["last_epoch"]
        self._start_epoch = state["start_epoch"]
        self._start_evidence = state["start_evidence"]
        self._window_evidence = [float(v) for v in state["window_evidence"]]
        self._prev_window_mean = state["prev_window_mean"]
        self._gen.set_state(state["generator"])
        self._history = [{k: (list(v) if isinstance(v, list) else v) for k, v in row.items()} for row in state["history"]]


class RandomSchedule(BanditScheduleBase):
    """Random search (paper Fig 8 ablation): a fresh uniform arm in the box every round.

    Same windows, rewards and history as :class:`GPBanditSchedule` (GP fields are None).
    """

    def _choose_next(self) -> dict[str, Any]:
        self._arm = self._random_arm().tolist()
        return self._empty_decision("random")


class GPBanditSchedule(BanditScheduleBase):
    """The paper's GP-bandit schedule: time-varying, permutation-invariant GP-UCB (Algorithm 1).

    Args beyond :class:`BanditScheduleBase`'s (``box, window, window_growth_every, window_growth,
    early_drop, burn_in, reward, min_gap, seed``):

    * ``sort=True``: permutation-invariant kernel; ``False`` is the unsorted ablation
      (``gp_bandit_unsorted``, Appendix D.4): arms are recorded in the order the acquisition
      proposed them and the GP sees them unsorted (training still uses the sorted schedule).
    * ``time_varying=True``: time kernel with fitted omega; ``False`` fixes omega = 0.
    * ``n_init``: random rounds until this many finite observations (default ``max(3, d)``).
    * ``max_observations``: keep only the last so many observations in the GP (default all).
    * ``kappa``: the GP-UCB exploration weight. ``"theorem1"`` (default, the paper): ``kappa_t`` of
      Theorem 1 with ``kappa_delta, kappa_a, kappa_b`` (see
      :func:`~tvolib.bandit.acquisition.theorem1_kappa`), ``t`` = completed rounds, dimension
      ``d - 1``. It is large (sqrt(kappa) ~ 8 after 40 rounds at d = 3, ~ 23 after 1000 at d = 15),
      i.e. very exploratory. ``"log_n"``: ``log(number of observations)``, what the authors' code
      uses. A number: that constant.
    * ``fit_maxiter``: L-BFGS-B iteration cap of the warm-started MAP fit; ``acq_maxiter``,
      ``raw_samples``, ``num_restarts``: acquisition budget (defaults grow with ``d``).
    * ``device``: where the GP computes (default CUDA when available); arms live on the CPU.
    """

    def __init__(
        self,
        d: int,
        *,
        sort: bool = True,
        time_varying: bool = True,
        n_init: int | None = None,
        max_observations: int | None = None,
        kappa: float | Literal["theorem1", "log_n"] = "theorem1",
        kappa_delta: float = 0.1,
        kappa_a: float = 1.0,
        kappa_b: float = 1.0,
        fit_maxiter: int = 30,
        acq_maxiter: int = 100,
        raw_samples: int | None = None,
        num_restarts: int | None = None,
        initial_hyperparameters: Hyperparameters | None = None,
        device: str | torch.device | None = None,
        **window_options: Any,
    ) -> None:
        self._sort = bool(sort)  # needed by _finalise_arm during the base __init__
        super().__init__(d, **window_options)
        self.time_varying = bool(time_varying)
        self.n_init = max(3, self.d) if n_init is None else _check_int("n_init", n_init, 1)
        self.max_observations = None if max_observations is None else _check_int("max_observations", max_observations, 1)
        if isinstance(kappa, str):
            if kappa not in ("theorem1", "log_n"):
                raise ValueError(f"kappa must be 'theorem1', 'log_n' or a finite number >= 0; got {kappa!r}")
            self.kappa: float | str = kappa
        elif isinstance(kappa, bool) or not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"kappa must be 'theorem1', 'log_n' or a finite number >= 0; got {kappa!r}")
        else:
            self.kappa = float(kappa)
        self.kappa_delta, self.kappa_a, self.kappa_b = float(kappa_delta), float(kappa_a), float(kappa_b)
        theorem1_kappa(1, self.n_arm, delta=self.kappa_delta, a=self.kappa_a, b=self.kappa_b)  # validates
        self.fit_maxiter = _check_int("fit_maxiter", fit_maxiter, 1)
        self.acq_maxiter = _check_int("acq_maxiter", acq_maxiter, 1)
        self.raw_samples = None if raw_samples is None else _check_int("raw_samples", raw_samples, 1)
        self.num_restarts = None if num_restarts is None else _check_int("num_restarts", num_restarts, 1)
        hp = initial_hyperparameters or Hyperparameters(rho=2.0 if self.time_varying else 0.0)
        self._hp: Hyperparameters = hp.validate()
        self.device = resolve_device(device)

    @property
    def sort_arms(self) -> bool:
        return self._sort

    def _config_row(self) -> dict[str, Any]:
        row = super()._config_row()
        row.update(time_varying=self.time_varying, max_observations=self.max_observations)
        return row

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(
            sort=self._sort, time_varying=self.time_varying, n_init=self.n_init,
            max_observations=self.max_observations, kappa=self.kappa, kappa_delta=self.kappa_delta,
            kappa_a=self.kappa_a, kappa_b=self.kappa_b,
        )
        return cfg

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["hyperparameters"] = self._hp.to_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._hp = Hyperparameters(**{k: float(v) for k, v in state["hyperparameters"].items()}).validate()

    def current_kappa(self, n_rounds: int, n_obs: int) -> float:
        """Exploration weight after ``n_rounds`` completed rounds with ``n_obs`` observations in the GP."""
        if self.kappa == "theorem1":
            value = theorem1_kappa(n_rounds, self.n_arm, delta=self.kappa_delta, a=self.kappa_a, b=self.kappa_b)
            return max(value, 0.0)
        if self.kappa == "log_n":
            return math.log(max(n_obs, 1))
        return float(self.kappa)

    def _choose_next(self) -> dict[str, Any]:
        arms, rounds, rewards = observations(self._history, max_observations=self.max_observations)
        if rewards.numel() < self.n_init:
            self._arm = self._random_arm().tolist()
            return self._empty_decision("random")
        t_pred = self._round + 1  # the round whose arm is chosen now
        data = training_data(arms, rounds, rewards, lo=self.lo, hi=self.hi, t_pred=t_pred, device=self.device)
        gp = BanditGP(
            self.n_arm, sort=self._sort, time_varying=self.time_varying, hyperparameters=self._hp, device=self.device
        )
        gp.set_train_data(data.X, data.y)
        fit = fit_map(gp, maxiter=self.fit_maxiter)
        self._hp = fit.hyperparameters
        kappa = self.current_kappa(self._round + 1, int(rewards.numel()))
        round_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self._gen))
        start = time.perf_counter()
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # BoTorch's randomness: seeded, global RNG untouched
            torch.manual_seed(round_seed)
            x, value = maximize_ucb(
                gp, t_norm=1.0, kappa=kappa, seed=round_seed, raw_samples=self.raw_samples,
                num_restarts=self.num_restarts, maxiter=self.acq_maxiter,
            )
        acq_seconds = time.perf_counter() - start
        self._arm = self._finalise_arm(self.lo + (self.hi - self.lo) * x.cpu()).tolist()
        hp = fit.hyperparameters
        return {
            "source": "gp",
            "lengthscale": hp.lengthscale,
            "omega": hp.omega if self.time_varying else 0.0,
            "rho": hp.rho,
            "noise": hp.noise,
            "kappa": kappa,
            "acq_value": value,
            "fit_seconds": fit.seconds,
            "acq_seconds": acq_seconds,
            "fit_ok": fit.ok,
            "fit_evals": fit.n_evals,
            "n_obs": int(rewards.numel()),
            "t_origin": data.t_origin,
            "t_pred": t_pred,
            "y_mean": data.y_mean,
            "y_std": data.y_std,
        }
