"""Integration schedules for the TVO (paper Section 2, Eq. 4) and the interface shared with the bandit.

A *schedule* is the vector of left Riemann points ``beta = [b_0, ..., b_{d-1}]`` with
``0 = b_0 < b_1 < ... < b_{d-1} < 1``; the right end point 1 is appended only when the sum is
formed (see :func:`tvolib.objectives.riemann_weights`). ``d`` therefore counts ``b_0 = 0``
(d = 5 means 0 and four interior points), as in the authors' code (REFERENCE.md).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch
from torch import Tensor

__all__ = ["EvidenceSpec", "Schedule", "validate_schedule"]


def validate_schedule(betas: Tensor | list[float]) -> Tensor:
    """Return ``betas`` as a 1-D float64 CPU tensor after checking it is a valid left-point schedule.

    Raises ``ValueError`` (saying what is wrong and what is accepted) unless ``betas`` is a
    non-empty, finite, 1-D sequence with first point 0, strictly increasing, and every point in [0, 1).
    """
    t = torch.as_tensor(betas, dtype=torch.float64).detach().cpu()
    accepted = "a non-empty 1-D sequence 0 = b_0 < b_1 < ... < b_{d-1} < 1"
    if t.ndim != 1 or t.numel() == 0:
        raise ValueError(f"schedule must be {accepted}; got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"schedule must be {accepted}; got non-finite values {t.tolist()}")
    if t[0].item() != 0.0:
        raise ValueError(f"schedule must be {accepted}; first point is {t[0].item()!r}, not 0")
    if t.numel() > 1 and not (t[1:] > t[:-1]).all():
        raise ValueError(f"schedule must be {accepted}; got a non-increasing sequence {t.tolist()}")
    if (t >= 1).any() or (t < 0).any():
        raise ValueError(f"schedule must be {accepted}; got points outside [0, 1): {t.tolist()}")
    return t


@dataclass(frozen=True)
class EvidenceSpec:
    """Which log-evidence estimate ``L`` an adaptive schedule wants after every epoch.

    The paper (Appendix A, "Reward Evaluation") uses the TVO left Riemann sum over a fixed linear
    schedule of 50 points; the authors' code uses the trapezoid rule over 50 points
    ``10**linspace(-9, 0, 50)``. ``betas`` here are the quadrature nodes *including* 1 for
    ``rule='trapezoid'``; for ``rule='left'`` they are left points (1 is appended).
    """

    betas: tuple[float, ...]
    rule: Literal["left", "trapezoid"] = "left"


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
