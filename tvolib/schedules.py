"""Schedules as objects a training loop asks and tells: the ``Schedule`` interface, fixed and moments.

A schedule's points are defined in :mod:`tvolib.tvo` (``linear``, ``log_uniform``,
``validate_schedule``); the adaptive GP-bandit schedule is in :mod:`tvolib.bandit`.

Example:
    >>> schedule = FixedSchedule(linear(5))
    >>> for epoch in range(1, 3):
    ...     betas = schedule.current()          # train this epoch with these left points
    ...     schedule.step(epoch)                # fixed schedules ignore the report
    >>> schedule.current().tolist()
    [0.0, 0.2, 0.4, 0.6, 0.8]
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Literal

import torch
from torch import Tensor

from tvolib.checks import check_finite_float, check_int, check_log_w, check_state
from tvolib.tvo import EvidenceSpec, linear, log_uniform, snis_integrand, validate_schedule

__all__ = [
    "FixedSchedule",
    "MomentsSchedule",
    "ReestimatedSchedule",
    "Schedule",
    "moments",
]

_D_NAME = "d (the number of left points, including b_0 = 0)"


def _state_betas(state: Any, owner: str, d: int | None) -> Tensor:
    """The checked ``betas`` entry of a schedule state (of ``d`` points unless ``d`` is None)."""
    raw = check_state(state, ["betas"], owner)["betas"]
    try:
        betas = validate_schedule(raw)
    except ValueError as exc:
        raise ValueError(f"{owner} state key 'betas': {exc}") from exc
    if d is not None and betas.numel() != d:
        raise ValueError(f"{owner} state key 'betas' holds a schedule of d={betas.numel()}, this schedule has d={d}")
    return betas


class Schedule(ABC):
    """A (possibly adaptive) TVO schedule: what the training loop asks for and tells back.

    The training loop calls :meth:`current` before each epoch (or minibatch) and
    :meth:`step` after every epoch; it may first call ``step(0, evidence=L_0)`` with the untrained
    model's evidence (adaptive schedules that use rewards start their first window there). Fixed
    schedules ignore :meth:`step`.
    """

    #: Set by schedules that need the per-epoch training log-evidence ``L`` (the bandit).
    evidence_spec: EvidenceSpec | None = None

    #: Incremented when the schedule's decisions for the same reports change (so results
    #: computed by an older revision can be told apart, e.g. in cache keys).
    REVISION: ClassVar[int] = 1

    @property
    @abstractmethod
    def d(self) -> int:
        """Number of left points, including b_0 = 0."""

    @abstractmethod
    def current(self) -> Tensor:
        """The left points to train with now: a sorted float tensor of shape ``(d,)``, first entry 0."""

    def step(
        self,
        epoch: int,
        evidence: float | None = None,
        log_weights: Callable[[], Tensor] | None = None,
    ) -> None:
        """Tell the schedule that ``epoch`` epochs are complete (``epoch = 0``: the untrained model).

        Args:
            epoch: completed epochs, an int >= 0.
            evidence: the training-set log-evidence estimate described by :attr:`evidence_spec`
                (``None`` when the schedule did not ask for one).
            log_weights: lazily computes log importance weights ``log w`` of shape ``(S, N)`` on
                (a subset of) the training data, for schedules that re-estimate themselves from
                the integrand (moments).

        Fixed schedules ignore all three.
        """

    def history(self) -> list[dict[str, Any]]:
        """Per-update records (one dict per update) for analysis; empty for fixed schedules."""
        return []

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly (tensors, floats, ints, lists, dicts, str only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; a ``ValueError`` naming the key if it is invalid."""


def moments(d: int, log_w: Tensor, *, tol: float = 1e-3, max_iter: int = 100) -> Tensor:
    """The moments schedule (Grosse et al. 2013; Brekelmans et al. 2020): equal steps in the integrand.

    With ``I(beta)`` the SNIS integrand E_{pi_beta}[log w] (Eq. 4) averaged over the data points
    (the columns of ``log_w``, shape ``(S, N)``), the targets are
    ``t_j = I(0) + j / d * (I(1) - I(0))`` for ``j = 0..d-1``; ``b_0 = 0`` and each other ``b_j``
    solves ``I(b_j) = t_j`` by bisection on [0, 1] (the SNIS integrand is non-decreasing in beta:
    its derivative is a weighted variance). All d - 1 bisections run together, in float64, on
    ``log_w``'s device (CPU or GPU).

    Tolerance: a point is accepted when ``|I(b_j) - t_j| <= tol * (I(1) - I(0))`` (``tol`` is
    relative to the integrand's total rise; the authors' code stops at an absolute 0.05 nats, at most
    500 steps), or after ``max_iter`` halvings. Graceful cases: a flat
    integrand (rise <= 1e-9 max(1, |I(0)|), e.g. q equal to the posterior) returns ``linear(d)``;
    points closer than 1e-9 (a near-vertical integrand) are pushed apart so that the result is
    always a valid schedule.

    Args:
        d: number of left points, including ``b_0 = 0``.
        log_w: ``(S, N)`` finite log importance weights on N data points.
        tol: relative tolerance of the bisection, a finite number > 0.
        max_iter: maximum number of halvings, an int >= 1.

    Returns:
        A float64 CPU tensor of shape ``(d,)``.

    Example:
        >>> moments(3, torch.randn(50, 20)).shape
        torch.Size([3])
    """
    check_int(_D_NAME, d, 1)
    tol, max_iter = _check_moments_options(tol, max_iter)
    lw = check_log_w(log_w).detach().to(torch.float64)
    if not torch.isfinite(lw).all():
        raise ValueError("log_w must be finite (no -inf) to compute the moments schedule")
    if d == 1:
        return torch.zeros(1, dtype=torch.float64)

    # Chunk the data points so that the (d, S, chunk) SNIS tensor stays near 2**22 elements.
    chunk = max(1, 2**22 // (d * lw.shape[0]))

    def integrand(betas: Tensor) -> Tensor:
        total = sum(snis_integrand(part, betas).sum(dim=1) for part in lw.split(chunk, dim=1))
        return total / lw.shape[1]

    ends = integrand(torch.tensor([0.0, 1.0], dtype=torch.float64, device=lw.device))
    start, rise = ends[0], ends[1] - ends[0]
    if rise.item() <= 1e-9 * max(1.0, abs(start.item())):
        return linear(d)
    targets = start + rise * torch.arange(1, d, dtype=torch.float64, device=lw.device) / d
    lo = torch.zeros(d - 1, dtype=torch.float64, device=lw.device)
    hi = torch.ones_like(lo)
    found = torch.full_like(lo, float("nan"))
    for _ in range(max_iter):
        mid = (lo + hi) / 2
        values = integrand(mid)
        newly = torch.isnan(found) & ((values - targets).abs() <= tol * rise)
        found = torch.where(newly, mid, found)
        if not torch.isnan(found).any():
            break
        below = values < targets
        lo = torch.where(below, mid, lo)
        hi = torch.where(below, hi, mid)
    found = torch.where(torch.isnan(found), (lo + hi) / 2, found).cpu()
    return _strictly_increasing(torch.cat([torch.zeros(1, dtype=torch.float64), found]))


def _check_moments_options(tol: Any, max_iter: Any) -> tuple[float, int]:
    return check_finite_float("tol", tol, minimum=0.0, strict=True), check_int("max_iter", max_iter, 1)


def _strictly_increasing(betas: Tensor, gap: float = 1e-9) -> Tensor:
    """Push apart points closer than ``gap`` (keeping them below 1) and validate."""
    b = betas.clone()
    d = b.numel()
    for j in range(1, d):
        b[j] = min(max(b[j].item(), b[j - 1].item() + gap), 1.0 - (d - j) * gap)
    return validate_schedule(b)


class FixedSchedule(Schedule):
    """A schedule that never changes (linear, log-uniform, a grid-search point, ...).

    Args:
        betas: a left-point schedule (see :func:`tvolib.tvo.validate_schedule`).

    Example:
        >>> FixedSchedule([0.0, 0.5]).current().tolist()
        [0.0, 0.5]
    """

    def __init__(self, betas: Tensor | list[float]) -> None:
        self._betas = validate_schedule(betas)

    @property
    def d(self) -> int:
        return self._betas.numel()

    def current(self) -> Tensor:
        return self._betas.clone()

    def state_dict(self) -> dict[str, Any]:
        return {"betas": self._betas.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (any valid schedule); ``ValueError`` naming a bad key."""
        self._betas = _state_betas(state, "FixedSchedule", None)

    def __repr__(self) -> str:
        return f"FixedSchedule({[round(b, 6) for b in self._betas.tolist()]})"


class ReestimatedSchedule(Schedule):
    """A schedule re-estimated from the integrand every ``update_every`` epochs (moments, bias-optimal).

    Starts from ``log_uniform(d)`` (``initial='log'``) or ``linear(d)`` (``initial='linear'``)
    until the first update; :meth:`step` at an epoch divisible by ``update_every`` calls
    ``log_weights()`` (log weights ``(S, N)`` on the training data) and moves to
    :meth:`estimate`'s schedule, recording ``{"epoch", "betas", **extra}``. A subclass names its
    extra record fields (:attr:`RECORD_FLOATS`) and implements :meth:`estimate`.

    Args:
        d: number of left points, including ``b_0 = 0``.
        update_every: epochs between re-estimates, an int >= 1.
        initial: the schedule before the first update, ``'log'`` or ``'linear'``.
    """

    #: Float fields of a history record besides ``epoch`` and ``betas``.
    RECORD_FLOATS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, d: int, update_every: int = 6, initial: Literal["log", "linear"] = "log") -> None:
        check_int(_D_NAME, d, 1)
        update_every = check_int("update_every", update_every, 1)
        starts = {"log": log_uniform, "linear": linear}
        if initial not in starts:
            raise ValueError(f"initial must be one of {sorted(starts)}; got {initial!r}")
        self._d, self.update_every, self.initial = int(d), update_every, initial
        self._betas = starts[initial](d)
        self._history: list[dict[str, Any]] = []

    @abstractmethod
    def estimate(self, log_w: Tensor) -> tuple[Tensor, dict[str, float]]:
        """The new schedule ``(d,)`` from log weights ``(S, N)``, and the record's extra fields."""

    @property
    def d(self) -> int:
        return self._d

    def current(self) -> Tensor:
        return self._betas.clone()

    def step(
        self,
        epoch: int,
        evidence: float | None = None,
        log_weights: Callable[[], Tensor] | None = None,
    ) -> None:
        epoch = check_int("epoch", epoch, 0)
        if epoch == 0 or epoch % self.update_every != 0:
            return
        if log_weights is None:
            raise ValueError(
                f"{type(self).__name__}.step(epoch={epoch}) must re-estimate the schedule and needs "
                "log_weights, a callable returning log w of shape (S, N)"
            )
        self._betas, extra = self.estimate(log_weights())
        self._history.append({"epoch": int(epoch), "betas": self._betas.tolist(), **extra})

    def history(self) -> list[dict[str, Any]]:
        return [dict(record, betas=list(record["betas"])) for record in self._history]

    def state_dict(self) -> dict[str, Any]:
        return {"betas": self._betas.clone(), "history": self.history()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (the same ``d``); ``ValueError`` naming a bad key."""
        owner = type(self).__name__
        betas = _state_betas(state, owner, self._d)
        history = check_state(state, ["history"], owner)["history"]
        if not isinstance(history, list) or not all(self._is_record(r) for r in history):
            extra = "".join(f", {k!r}: float" for k in self.RECORD_FLOATS)
            raise ValueError(
                f"{owner} state key 'history' must be a list of {{'epoch': int, 'betas': "
                f"list of {self._d} floats{extra}}} records; got {history!r:.200}"
            )
        self._betas = betas
        self._history = [dict(record, betas=list(record["betas"])) for record in history]

    def _is_record(self, record: Any) -> bool:
        return (
            isinstance(record, dict)
            and isinstance(record.get("epoch"), int)
            and isinstance(record.get("betas"), list)
            and len(record["betas"]) == self._d
            and all(isinstance(record.get(k), float) for k in self.RECORD_FLOATS)
        )


class MomentsSchedule(ReestimatedSchedule):
    """The moments schedule, re-estimated every ``update_every`` epochs (Section 4 baseline).

    Starts from ``log_uniform(d)`` (``initial='log'``) or ``linear(d)`` (``initial='linear'``)
    until the first update; :meth:`step` at an epoch divisible by ``update_every`` calls
    ``log_weights()`` (log weights ``(S, N)`` on the training data) and recomputes
    :func:`moments`. The paper gives no update period; the default 6 matches the bandit's initial
    window w = 6 so that both adaptive schedules change at the same pace.

    Args:
        d: number of left points, including ``b_0 = 0``.
        update_every: epochs between re-estimates, an int >= 1.
        initial: the schedule before the first update, ``'log'`` or ``'linear'``.
        tol, max_iter: passed to :func:`moments` (checked here, not at the first update).

    Example:
        >>> schedule = MomentsSchedule(4, update_every=2)
        >>> schedule.step(2, log_weights=lambda: torch.randn(30, 10))
        >>> schedule.history()[0]["epoch"]
        2
    """

    def __init__(
        self,
        d: int,
        update_every: int = 6,
        initial: Literal["log", "linear"] = "log",
        *,
        tol: float = 1e-3,
        max_iter: int = 100,
    ) -> None:
        super().__init__(d, update_every, initial)
        self.tol, self.max_iter = _check_moments_options(tol, max_iter)

    def estimate(self, log_w: Tensor) -> tuple[Tensor, dict[str, float]]:
        return moments(self._d, log_w, tol=self.tol, max_iter=self.max_iter), {}
