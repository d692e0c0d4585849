"""Schedules as objects a training loop asks and tells: the ``Schedule`` interface, fixed and moments.

A schedule's points are defined in :mod:`tvolib.tvo` (``linear``, ``log_uniform``,
``validate_schedule``); the adaptive GP-bandit schedule is in :mod:`tvolib.bandit`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Literal

import torch
from torch import Tensor

from tvolib.tvo import EvidenceSpec, _check_d, linear, log_uniform, snis_integrand, validate_schedule

__all__ = [
    "FixedSchedule",
    "MomentsSchedule",
    "Schedule",
    "moments",
]


class Schedule(ABC):
    """A (possibly adaptive) TVO schedule: what the training loop asks for and tells back.

    The training loop calls :meth:`current` before each epoch (or minibatch) and
    :meth:`step` after every epoch. Fixed schedules ignore :meth:`step`.
    """

    #: Set by schedules that need the per-epoch training log-evidence ``L`` (the bandit).
    evidence_spec: EvidenceSpec | None = None

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
        """Tell the schedule that ``epoch`` epochs are complete.

        ``evidence`` is the training-set log-evidence estimate described by :attr:`evidence_spec`
        (``None`` when the schedule did not ask for one). ``log_weights`` lazily computes log
        importance weights ``log w`` of shape ``(S, N)`` on (a subset of) the training data, for
        schedules that re-estimate themselves from the integrand (moments). Fixed schedules ignore both.
        """

    def history(self) -> list[dict[str, Any]]:
        """Per-update records (one dict per update) for analysis; empty for fixed schedules."""
        return []

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly (tensors, floats, ints, lists, dicts, str only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""



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
    always a valid schedule. Returns a float64 CPU tensor of shape ``(d,)``.
    """
    _check_d(d)
    if not isinstance(log_w, Tensor) or log_w.ndim != 2 or log_w.shape[0] < 1 or log_w.shape[1] < 1:
        shape = tuple(log_w.shape) if isinstance(log_w, Tensor) else type(log_w).__name__
        raise ValueError(f"log_w must be a tensor of shape (S, N) with S, N >= 1; got {shape}")
    if not (tol > 0 and max_iter >= 1):
        raise ValueError(f"tol must be > 0 and max_iter >= 1; got tol={tol!r}, max_iter={max_iter!r}")
    lw = log_w.detach().to(torch.float64)
    if not torch.isfinite(lw).all():
        raise ValueError("log_w must be finite to compute the moments schedule")
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


def _strictly_increasing(betas: Tensor, gap: float = 1e-9) -> Tensor:
    """Push apart points closer than ``gap`` (keeping them below 1) and validate."""
    b = betas.clone()
    d = b.numel()
    for j in range(1, d):
        b[j] = min(max(b[j].item(), b[j - 1].item() + gap), 1.0 - (d - j) * gap)
    return validate_schedule(b)


class FixedSchedule(Schedule):
    """A schedule that never changes (linear, log-uniform, a grid-search point, ...)."""

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
        self._betas = validate_schedule(state["betas"])

    def __repr__(self) -> str:
        return f"FixedSchedule({[round(b, 6) for b in self._betas.tolist()]})"


class MomentsSchedule(Schedule):
    """The moments schedule, re-estimated every ``update_every`` epochs (Section 4 baseline).

    Starts from ``log_uniform(d)`` (``initial='log'``) or ``linear(d)`` (``initial='linear'``)
    until the first update; :meth:`step` at an epoch divisible by ``update_every`` calls
    ``log_weights()`` (log weights ``(S, N)`` on the training data) and recomputes
    :func:`moments`. The paper gives no update period; the default 6 matches the bandit's initial
    window w = 6 so that both adaptive schedules change at the same pace.
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
        _check_d(d)
        if isinstance(update_every, bool) or not isinstance(update_every, int) or update_every < 1:
            raise ValueError(f"update_every must be an int >= 1; got {update_every!r}")
        starts = {"log": log_uniform, "linear": linear}
        if initial not in starts:
            raise ValueError(f"initial must be one of {sorted(starts)}; got {initial!r}")
        self._d, self.update_every, self.initial = d, update_every, initial
        self.tol, self.max_iter = tol, max_iter
        self._betas = starts[initial](d)
        self._history: list[dict[str, Any]] = []

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
        if epoch <= 0 or epoch % self.update_every != 0:
            return
        if log_weights is None:
            raise ValueError(
                f"MomentsSchedule.step(epoch={epoch}) must re-estimate the schedule and needs "
                "log_weights, a callable returning log w of shape (S, N)"
            )
        self._betas = moments(self._d, log_weights(), tol=self.tol, max_iter=self.max_iter)
        self._history.append({"epoch": int(epoch), "betas": self._betas.tolist()})

    def history(self) -> list[dict[str, Any]]:
        return [dict(record, betas=list(record["betas"])) for record in self._history]

    def state_dict(self) -> dict[str, Any]:
        return {"betas": self._betas.clone(), "history": self.history()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        betas = validate_schedule(state["betas"])
        if betas.numel() != self._d:
            raise ValueError(f"state holds a schedule of d={betas.numel()}, this schedule has d={self._d}")
        self._betas = betas
        self._history = [dict(record, betas=list(record["betas"])) for record in state["history"]]
