"""What the GP bandit and random search share: arms in a box, windows and rounds, history, state.

The window and reward rules themselves are in :mod:`tvolib.bandit.reward`; subclasses only choose
the next arm (:meth:`BanditScheduleBase._choose_next`).
"""
from __future__ import annotations

import math
import warnings
from abc import abstractmethod
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from ..checks import check_finite_float, check_int
from ..schedules import Schedule
from ..tvo import log_uniform
from .acquisition import project_arm
from .protocol import DEFAULT_PROTOCOL, ROUND_DECIMALS, arm_degeneracy, resolve_protocol, staggered_upper
from .state import MAX_ABS_EVIDENCE, MAX_ABS_REWARD, STATE_VERSION, check_state_dict
from .reward import early_update, evidence_spec_for, window_reward

__all__ = ["BanditScheduleBase"]

def _evidence_value(value: Any) -> float:
    """A reported evidence as a float (NaN and infinities pass: they are handled by the caller)."""
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError(f"evidence must be a scalar; got a tensor of shape {tuple(value.shape)}")
        return float(value.detach().cpu().item())
    if isinstance(value, bool):
        raise ValueError(f"evidence must be a real number; got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"evidence must be a real number; got {value!r}") from exc


class BanditScheduleBase(Schedule):
    """Windows, rewards, history and state shared by :class:`GPBanditSchedule` and :class:`RandomSchedule`.

    Args:
        d: number of left points including ``b_0 = 0`` (>= 2); the arm holds the other ``d - 1``.
        protocol: ``"integrand"`` (default: the best on the test bed, :mod:`tvolib.bandit.testbed`;
            its items are ``"tvolib"``'s), ``"tvolib"`` (this package's GP-UCB), ``"code"`` (the
            authors' code, which produced the paper's numbers) or ``"paper-text"``; sets every item
            below left at ``None`` (:mod:`tvolib.bandit.protocol`).
        burn_in_schedule: what trains before the first window starts: ``"log"`` (the log schedule,
            ``beta_1 = 0.025``) or ``"arm"`` (the first random arm).
        arm_domain: ``"staggered"`` (coordinate ``k`` of the sorted arm in ``[lo, hi k / (d - 1)]``)
            or ``"box"`` (every coordinate in ``[lo, hi]``); random arms and the acquisition use it.
        projection: ``"round"`` (round to 4 decimals and sort; ties are separated by 1e-4 because
            the TVO's schedule must increase strictly) or ``"spread"`` (clamp, sort and push points
            ``min_gap`` apart).
        reward: ``"code"``, ``"paper"`` or ``"rate"`` (see :mod:`tvolib.bandit.reward`).
        box: ``(lo, hi)`` with ``0 < lo < hi < 1``; the arm's points lie in it (Section 5: [0.05, 0.95]).
        window, window_growth_every, window_growth: planned window length
            ``w_k = window + window_growth * floor(k / window_growth_every)`` (6, +1 every 10 rounds).
        early_drop: end a window early when the evidence drops by more than this (``None``: never).
        burn_in: reports before this epoch are ignored (the first window starts at or after it).
        min_gap: smallest distance between neighbouring points of an arm (``"spread"`` projection).
        seed: seeds the random arms (and the acquisition's restarts).
    """

    #: Revision 2: round 0 may start at ``step(0, L_0)`` (reward ``L_w - L_0``), early updates fire
    #: on a drop strictly greater than ``early_drop`` (exact comparison), and non-finite evidence
    #: is ignored instead of starting the next window. Revision 3: the protocol of the authors'
    #: code by default (:mod:`tvolib.bandit.protocol`). Revision 4: the GP stretches each sorted
    #: coordinate onto its own range in the arm domain, as the code's min-max scaling does
    #: (:func:`~tvolib.bandit.protocol.coordinate_scale`; no change in a box domain). Revision 5:
    #: the upper corner guard is the code's arm (every point on the box's upper bound, scaled like
    #: every observation), the GP's start screening sees the per-point scaling, and the
    #: ``"tvolib"`` protocol (a trend term, the rate reward, dimension-scaled bounds) exists.
    REVISION: ClassVar[int] = 5

    def __init__(
        self,
        d: int,
        *,
        protocol: str = DEFAULT_PROTOCOL,
        burn_in_schedule: str | None = None,
        arm_domain: str | None = None,
        projection: str | None = None,
        reward: Literal["paper", "code", "rate"] | None = None,
        box: tuple[float, float] = (0.05, 0.95),
        window: int = 6,
        window_growth_every: int = 10,
        window_growth: int = 1,
        early_drop: float | None = 0.05,
        burn_in: int = 0,
        min_gap: float = 1e-3,
        seed: int = 0,
    ) -> None:
        self._d = check_int("d (b_0 = 0 plus at least one interior point to choose)", d, 2)
        items = resolve_protocol(protocol, dict(burn_in_schedule=burn_in_schedule, arm_domain=arm_domain,
                                                projection=projection, reward=reward))
        self.protocol = items["protocol"]  # a NumPy string as a str
        self.burn_in_schedule, self.arm_domain = items["burn_in_schedule"], items["arm_domain"]
        self.projection, reward = items["projection"], items["reward"]
        self.box = self._check_box(box)
        self.lo = self.box[0]
        self.upper = (staggered_upper(self._d, *self.box) if self.arm_domain == "staggered"
                      else (self.box[1],) * (self._d - 1))
        self.hi = max(self.upper)  # the arms' range: the GP normalises by [lo, hi]
        self.min_gap = check_finite_float("min_gap", min_gap, minimum=0.0, strict=True)
        if (self._d - 2) * self._gap > self.hi - self.lo:
            raise ValueError(f"min_gap must fit {self._d - 1} points in [{self.lo}, {self.hi}]; got {self._gap}")
        self.window = check_int("window", window, 1)
        self.window_growth_every = check_int("window_growth_every", window_growth_every, 1)
        self.window_growth = check_int("window_growth", window_growth, 0)
        self.early_drop = None if early_drop is None else check_finite_float("early_drop", early_drop, minimum=0.0)
        self.burn_in = check_int("burn_in", burn_in, 0)
        self.evidence_spec = evidence_spec_for(reward)
        self.reward = reward
        self.seed = check_int("seed", seed, 0)
        self._gen = torch.Generator().manual_seed(self.seed)
        self._history: list[dict[str, Any]] = []
        self._round = 0
        self._last_epoch: int | None = None
        self._start_epoch: int | None = None
        self._start_evidence: float | None = None
        self._window_evidence: list[float] = []
        self._prev_window_mean: float | None = None
        self._ignored_epochs: list[int] = []
        self._arm: list[float] = self._random_arm().tolist()

    @staticmethod
    def _check_box(box: Any) -> tuple[float, float]:
        try:
            lo, hi = (float(v) for v in box)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"box must be a pair (lo, hi); got {box!r}") from exc
        if not (0.0 < lo < hi < 1.0):
            raise ValueError(
                f"box must satisfy 0 < lo < hi < 1 (b_0 = 0 is fixed and 1 is appended, so interior "
                f"points lie strictly inside); got {box!r}"
            )
        return lo, hi

    # ----- the Schedule interface ------------------------------------------------------------
    @property
    def d(self) -> int:
        return self._d

    @property
    def n_arm(self) -> int:
        """Number of interior points chosen by the bandit, ``d - 1``."""
        return self._d - 1

    @property
    def arm_sizes(self) -> range:
        """The numbers of points an arm of this schedule may have: ``d - 1`` only (a fixed ``d``)."""
        return range(self.n_arm, self.n_arm + 1)

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

    @property
    def in_burn_in(self) -> bool:
        """Whether training is still before the first window (``burn_in > 0`` and no window started)."""
        return self.burn_in > 0 and self._start_epoch is None and self._round == 0

    def current(self) -> Tensor:
        """The left points to train with now, float64 ``(d,)``: ``[0, sorted arm]``, or the log
        schedule during the burn-in when ``burn_in_schedule="log"``."""
        if self.burn_in_schedule == "log" and self.in_burn_in:
            return log_uniform(self._d)
        return torch.cat([torch.zeros(1, dtype=torch.float64), torch.sort(self.current_arm()).values])

    def step(self, epoch: int, evidence: float | Tensor | None = None, log_weights: Any = None) -> None:
        """Report that ``epoch`` epochs are done and the training log-evidence is ``evidence``.

        Report ``step(0, L_0)`` for the untrained model before training so that round 0 earns
        ``L_w - L_0``; without it the first report (at or after ``burn_in``) starts the first
        window. A non-finite ``evidence`` is ignored with a ``RuntimeWarning`` (the window goes on;
        the epoch is listed in the round's ``ignored_epochs``); a finite one beyond
        :data:`~tvolib.bandit.state.MAX_ABS_EVIDENCE` is refused (``ValueError``, nothing recorded).
        The window closes when it reaches its planned length or on an early update
        (:mod:`tvolib.bandit.reward`), and the next arm is chosen.

        Args:
            epoch: completed epochs, an int >= 0, increasing from call to call.
            evidence: the estimate described by :attr:`evidence_spec` (a float or 0-d tensor).
            log_weights: ignored (the bandit needs only ``evidence``).
        """
        epoch = check_int("epoch", epoch, 0)
        if self._last_epoch is not None and epoch <= self._last_epoch:
            raise ValueError(f"epochs must increase: got {epoch} after {self._last_epoch}")
        if evidence is None:
            raise ValueError(
                f"{type(self).__name__}.step needs evidence=L, the training log-evidence described by "
                "its evidence_spec, after every epoch"
            )
        value = _evidence_value(evidence)
        if math.isfinite(value) and abs(value) > MAX_ABS_EVIDENCE:
            raise ValueError(f"evidence at epoch {epoch} must be a log-evidence per example within "
                             f"+-{MAX_ABS_EVIDENCE:.0e} nats (or NaN, ignored); got {value!r}")
        self._last_epoch = epoch
        if epoch < self.burn_in:
            return
        if not math.isfinite(value):
            self._ignore(epoch, value)
        elif self._start_epoch is None:
            self._start_epoch, self._start_evidence = epoch, value
        else:
            self._window_evidence.append(value)
            self._advance(epoch, value)

    def _ignore(self, epoch: int, value: float) -> None:
        warnings.warn(
            f"epoch {epoch}: non-finite evidence {value!r} ignored (round {self._round} goes on)",
            RuntimeWarning,
            stacklevel=3,
        )
        self._ignored_epochs.append(epoch)

    def _advance(self, epoch: int, value: float) -> None:
        """Close the open window at ``epoch`` when it is due or on an early update."""
        assert self._start_epoch is not None and self._start_evidence is not None
        due = epoch - self._start_epoch >= self.window_length()
        early = not due and early_update(
            self.reward, start=self._start_evidence, current=value,
            previous_mean=self._prev_window_mean, threshold=self.early_drop,
        )
        if not (due or early):
            return
        reward, self._prev_window_mean = window_reward(
            self.reward, start=self._start_evidence, end=value,
            values=self._window_evidence, previous_mean=self._prev_window_mean, length=epoch - self._start_epoch,
        )
        self._complete_round(
            reward, epoch=epoch, start_epoch=self._start_epoch, early=early,
            evidence_start=self._start_evidence, evidence_end=value,
        )
        self._start_epoch, self._start_evidence = epoch, value
        self._window_evidence = []

    def observe(self, reward: float) -> Tensor:
        """Close the current round with a reward computed by the caller; return the next ``current()``.

        An alternative to :meth:`step` for callers that compute rewards themselves (e.g. synthetic
        benchmarks): the reward is attributed to the current arm at the current round index; a
        non-finite reward is recorded as skipped and never reaches the GP, a finite one beyond
        :data:`~tvolib.bandit.state.MAX_ABS_REWARD` is refused. Do not mix with
        :meth:`step` in one run.
        """
        value = _evidence_value(reward)
        if math.isfinite(value) and abs(value) > MAX_ABS_REWARD:
            raise ValueError(f"reward must be a finite number within +-{MAX_ABS_REWARD:g} nats; got {value!r}")
        self._complete_round(
            value, epoch=None, start_epoch=None, early=False,
            evidence_start=None, evidence_end=None,
        )
        return self.current()

    def history(self) -> list[dict[str, Any]]:
        """One dict per completed round: the observation, then the decision taken after it.

        Keys: ``round, epoch, start_epoch, window, length, early, arm, betas, evidence_start,
        evidence_end, reward, skipped, ignored_epochs`` (the observation; ``arm`` is the GP input in
        beta units, ``betas = [0, sorted(arm)]`` the schedule trained with, ``ignored_epochs`` the
        epochs whose non-finite evidence was ignored); ``source`` of the next arm ("random": an
        initial random round; "gp": the GP-UCB maximiser; "corner": a random arm replacing a
        proposal at the all-lower corner), ``next_arm``, its degeneracy ``next_spread,
        next_min_gap, next_on_edge, next_degenerate`` (:func:`~tvolib.bandit.protocol.arm_degeneracy`),
        ``lengthscale, omega, rho, noise, kappa, acq_value, fit_seconds, acq_seconds, fit_ok,
        fit_evals, n_obs, n_dropped, t_origin, t_pred, y_mean, y_std`` (the decision; GP fields are
        None for random rounds; hyperparameters and ``acq_value`` are in the GP's units: normalised
        arm and time, standardised rewards), and the configuration ``d, lo, hi, upper, sort,
        time_varying, max_observations, reward_rule, protocol, corner_guards, standardize`` (and the
        GP's ``coordinate_scale``) so
        :func:`tvolib.bandit.reward_posterior` can rebuild the GP from the rows alone.
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
        length = None
        if info["epoch"] is not None and info["start_epoch"] is not None:
            length = info["epoch"] - info["start_epoch"]
        row: dict[str, Any] = {
            "round": self._round, "epoch": info["epoch"], "start_epoch": info["start_epoch"],
            "window": self.window_length(), "length": length, "early": bool(info["early"]),
            "arm": list(self._arm), "betas": [0.0] + sorted(self._arm),
            "evidence_start": info["evidence_start"], "evidence_end": info["evidence_end"],
            "reward": float(reward), "skipped": skipped, "ignored_epochs": list(self._ignored_epochs),
            **self._config_row(),
        }
        self._ignored_epochs = []
        self._history.append(row)
        decision = self._choose_next()
        row.update(decision)
        row["next_arm"] = list(self._arm)
        row.update({f"next_{k}": v for k, v in arm_degeneracy(self._arm, self.lo, self.hi).items()})
        self._round += 1

    def _config_row(self) -> dict[str, Any]:
        return {
            "d": self._d, "lo": self.lo, "hi": self.hi, "upper": list(self.upper), "sort": self.sort_arms,
            "time_varying": False, "max_observations": None, "reward_rule": self.reward,
            "protocol": self.protocol, "corner_guards": False, "standardize": "global",
        }

    @staticmethod
    def _empty_decision(source: str) -> dict[str, Any]:
        return {
            "source": source, "lengthscale": None, "omega": None, "rho": None, "noise": None,
            "trend_share": None, "trend_lengthscale": None, "kappa": None, "acq_value": None, "fit_seconds": None, "acq_seconds": None,
            "fit_ok": None, "fit_evals": None, "n_obs": None, "n_dropped": None, "t_origin": None,
            "t_pred": None, "y_mean": None, "y_std": None,
        }

    @abstractmethod
    def _choose_next(self) -> dict[str, Any]:
        """Set ``self._arm`` for the next round; return the decision's history fields."""

    @property
    def _gap(self) -> float:
        """Smallest distance between neighbouring points after :meth:`_finalise_arm`."""
        return self.min_gap if self.projection == "spread" else 10.0**-ROUND_DECIMALS

    def _random_arm(self) -> Tensor:
        """A uniform draw in the arm domain (coordinate ``k`` in ``[lo, upper_k]``), finalised."""
        span = torch.tensor(self.upper, dtype=torch.float64) - self.lo
        raw = self.lo + span * torch.rand(self.n_arm, generator=self._gen, dtype=torch.float64)
        return self._finalise_arm(raw)

    def _rounded_box(self) -> tuple[float, float]:
        """The arms' range under ``projection="round"``: the values of ``ROUND_DECIMALS`` decimals in
        ``[lo, hi]``, so that a rounded arm never leaves the box (with ``hi = 0.99999`` a point on
        it would round to 1, and its saved state would not load).

        Example:
            >>> from tvolib.bandit import GPBanditSchedule
            >>> GPBanditSchedule(3, box=(0.01234, 0.99999), device="cpu")._rounded_box()
            (0.0124, 0.9999)
        """
        unit = 10.0**-ROUND_DECIMALS
        lo, hi = round(self.lo, ROUND_DECIMALS), round(self.hi, ROUND_DECIMALS)
        lo = round(lo + unit, ROUND_DECIMALS) if lo < self.lo else lo
        hi = round(hi - unit, ROUND_DECIMALS) if hi > self.hi else hi
        if (self.n_arm - 1) * self._gap > hi - lo:
            raise ValueError(f"box {self.box!r} holds too few {ROUND_DECIMALS}-decimal values ([{lo}, {hi}]) for "
                             f"{self.n_arm} points {self._gap} apart; widen it or use projection='spread'")
        return lo, hi

    def _finalise_arm(self, raw: Tensor) -> Tensor:
        """Project ``raw`` (beta units) to a valid arm; for unsorted GPs keep ``raw``'s order.

        ``"round"``: round to 4 decimals first, within the box (:meth:`_rounded_box`). Invariant:
        ``sort(result)`` is the strictly increasing interior schedule trained with.
        """
        raw = raw.detach().to("cpu", torch.float64)
        lo, hi = self.lo, self.hi
        if self.projection == "round":
            raw = raw.round(decimals=ROUND_DECIMALS)
            lo, hi = self._rounded_box()
        projected = project_arm(raw, lo, hi, self._gap)
        if self.projection == "round":  # pushing ties apart by one unit may leave float noise
            projected = projected.round(decimals=ROUND_DECIMALS)
        if self.sort_arms:
            return projected
        out = torch.empty_like(projected)
        out[torch.argsort(raw.clamp(self.lo, self.hi), stable=True)] = projected
        return out

    # ----- state -----------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {
            "class": type(self).__name__, "d": self._d, "box": list(self.box), "upper": list(self.upper),
            "protocol": self.protocol, "burn_in_schedule": self.burn_in_schedule, "arm_domain": self.arm_domain,
            "projection": self.projection, "min_gap": self.min_gap,
            "window": self.window, "window_growth_every": self.window_growth_every,
            "window_growth": self.window_growth, "early_drop": self.early_drop, "burn_in": self.burn_in,
            "reward": self.reward, "seed": self.seed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly; safe for ``torch.load(weights_only=True)``."""
        return {
            "version": STATE_VERSION,
            "config": self._config(),
            "round": self._round,
            "arm": list(self._arm),
            "last_epoch": self._last_epoch,
            "start_epoch": self._start_epoch,
            "start_evidence": self._start_evidence,
            "window_evidence": list(self._window_evidence),
            "prev_window_mean": self._prev_window_mean,
            "ignored_epochs": list(self._ignored_epochs),
            "generator": self._gen.get_state(),
            "history": self.history(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output after checking every entry.

        Raises:
            ValueError: naming the key, for a foreign or older-format dict, a different
                configuration, an arm of the wrong length, outside the box or not finite, an
                inconsistent window or history, or a bad generator state.
        """
        check_state_dict(self, state)
        self._round = int(state["round"])
        self._arm = [float(v) for v in state["arm"]]
        self._last_epoch = state["last_epoch"]
        self._start_epoch = state["start_epoch"]
        self._start_evidence = state["start_evidence"]
        self._window_evidence = [float(v) for v in state["window_evidence"]]
        self._prev_window_mean = state["prev_window_mean"]
        self._ignored_epochs = [int(e) for e in state["ignored_epochs"]]
        self._gen.set_state(state["generator"])
        self._history = [{k: (list(v) if isinstance(v, list) else v) for k, v in row.items()} for row in state["history"]]
