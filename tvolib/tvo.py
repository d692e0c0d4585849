"""The thermodynamic variational objective: the paper's Eqs. 1-5 as named functions.

Notation (paper Section 2): ``log w_s = log p(x, z_s) - log q(z_s | x)`` for ``z_s ~ q(z|x)``,
stored as a tensor of shape ``(S, B)`` (samples first). ``pi_beta ∝ q^(1-beta) p^beta`` (Eq. 2);
the thermodynamic identity (Eq. 3) writes ``log p(x) = int_0^1 E_{pi_beta}[log w] dbeta``. The
integrand is estimated by self-normalised importance sampling with weights ``w^beta`` (SNIS,
Eq. 4); the TVO is its left Riemann sum over a *schedule* (Eq. 5).

A schedule is the vector of left Riemann points ``beta = [b_0, ..., b_{d-1}]`` with
``0 = b_0 < b_1 < ... < b_{d-1} < 1``; the right end point 1 is appended only when the sum is
formed. ``d`` therefore counts ``b_0 = 0`` (d = 5 means 0 and four interior points), as in the
authors' code.

Example:
    >>> log_w = torch.randn(10, 3)                 # S = 10 samples for B = 3 data points
    >>> tvo_bound(log_w, linear(5)).shape          # the TVO lower bound per data point
    torch.Size([3])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "RULES",
    "EvidenceSpec",
    "iwae_bound",
    "linear",
    "log_evidence",
    "log_uniform",
    "riemann_weights",
    "snis_integrand",
    "tvo_bound",
    "validate_schedule",
]

RULES = ("left", "right", "trapezoid")


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

    @classmethod
    def paper(cls, d: int = 50) -> "EvidenceSpec":
        """The paper's reward signal: left Riemann sum over ``linear(d)`` (Appendix A, d = 50)."""
        return cls(betas=tuple(linear(d).tolist()), rule="left")

    @classmethod
    def authors_code(cls, d: int = 50) -> "EvidenceSpec":
        """The authors' code: trapezoid rule over the nodes ``10**linspace(-9, 0, d)`` (its default reward signal)."""
        return cls(betas=tuple(torch.logspace(-9, 0, d, dtype=torch.float64).tolist()), rule="trapezoid")


def _check_d(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"d (the number of left points, including b_0 = 0) must be an int >= 1; got {d!r}")
    return d


def linear(d: int) -> Tensor:
    """Left points of the uniform partition of [0, 1] into ``d`` intervals: ``arange(d) / d``.

    ``linear(50)`` is the paper's reward schedule (Appendix A, "Reward Evaluation").
    Returns a float64 CPU tensor of shape ``(d,)``.
    """
    _check_d(d)
    return torch.arange(d, dtype=torch.float64) / d


def log_uniform(d: int, beta1: float = 0.025) -> Tensor:
    """``[0] + logspace(log10(beta1), 0, d)[:-1]``: 0, then log spacing from ``beta1`` towards 1.

    The paper's log baseline with ``beta1 = 0.025`` (Section 4, from the grid search of Masrani et
    al. 2019); for d = 5 this is 0, .025, .0629, .1581, .3976. ``d = 1`` gives [0]
    (the ELBO). Returns a float64 CPU tensor of shape ``(d,)``.
    """
    _check_d(d)
    if not (isinstance(beta1, (int, float)) and math.isfinite(beta1) and 0.0 < beta1 < 1.0):
        raise ValueError(f"beta1 must be a float in (0, 1); got {beta1!r}")
    points = torch.logspace(math.log10(beta1), 0.0, d, dtype=torch.float64)[:-1]
    return validate_schedule(torch.cat([torch.zeros(1, dtype=torch.float64), points]))



def _check_log_w(log_w: Tensor) -> None:
    if not isinstance(log_w, Tensor) or log_w.ndim != 2 or log_w.shape[0] < 1:
        shape = tuple(log_w.shape) if isinstance(log_w, Tensor) else type(log_w).__name__
        raise ValueError(f"log_w must be a tensor of shape (S, B) with S >= 1 samples first; got {shape}")


def snis_integrand(log_w: Tensor, betas: Tensor | list[float]) -> Tensor:
    """SNIS estimates of ``E_{pi_beta}[log w]`` (Eq. 4) for every beta at once: ``(d, B)``.

    ``log_w`` is ``(S, B)``; ``betas`` any 1-D sequence (not validated as a schedule, so it can
    also hold the right end point 1). The normalised weights are ``softmax(beta * log w)`` over the
    samples, computed for all betas in one broadcast ``(d, S, B)`` operation. Differentiable.
    """
    _check_log_w(log_w)
    b = torch.as_tensor(betas, dtype=log_w.dtype, device=log_w.device).reshape(-1)
    weights = torch.softmax(b[:, None, None] * log_w[None], dim=1)
    return (weights * log_w[None]).sum(dim=1)


def riemann_weights(betas: Tensor | list[float], rule: str = "left") -> tuple[Tensor, Tensor]:
    """Quadrature nodes ``[b_0, ..., b_{d-1}, 1]`` and their weights for a schedule (Eq. 5).

    With ``delta_j = b_{j+1} - b_j`` (``b_d = 1``): ``left`` puts ``delta_j`` on ``b_j`` (the TVO,
    a lower bound since the integrand increases), ``right`` puts it on ``b_{j+1}`` (an upper
    bound for the exact integrand; with SNIS estimates it need not be one), ``trapezoid`` averages
    the two. Returns two float64 CPU tensors of shape ``(d + 1,)``.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}")
    left_points = validate_schedule(betas)
    nodes = torch.cat([left_points, torch.ones(1, dtype=torch.float64)])
    deltas = nodes[1:] - nodes[:-1]
    zero = torch.zeros(1, dtype=torch.float64)
    left, right = torch.cat([deltas, zero]), torch.cat([zero, deltas])
    weights = {"left": left, "right": right, "trapezoid": (left + right) / 2}[rule]
    return nodes, weights


def tvo_bound(log_w: Tensor, betas: Tensor | list[float], rule: str = "left") -> Tensor:
    """Riemann sum of the SNIS integrand over a schedule: ``(B,)``.

    ``rule='left'`` is the TVO lower bound (Eq. 5); ``betas=[0]`` gives the ELBO (Eq. 1, the mean of
    ``log w``). ``right`` is an upper bound for the exact integrand (with SNIS estimates it need not
    be one), ``trapezoid`` the trapezoid rule.
    """
    nodes, weights = riemann_weights(betas, rule)
    used = weights != 0
    values = snis_integrand(log_w, nodes[used])
    return (weights[used].to(values)[:, None] * values).sum(dim=0)


def iwae_bound(log_w: Tensor) -> Tensor:
    """The IWAE-S bound ``logsumexp_s(log w_s) - log S`` (Burda et al. 2016): ``(B,)``."""
    _check_log_w(log_w)
    return torch.logsumexp(log_w, dim=0) - math.log(log_w.shape[0])


def log_evidence(log_w: Tensor, spec: EvidenceSpec) -> Tensor:
    """The log-evidence estimate ``L`` named by ``spec`` (the bandit's reward signal): ``(B,)``.

    ``rule='left'``: the TVO left sum over the left points ``spec.betas`` (the paper, Appendix A:
    ``EvidenceSpec.paper()``, linear d = 50). ``rule='trapezoid'``: the trapezoid rule over the nodes
    ``spec.betas``, which must increase strictly within [0, 1] and end at 1 (the authors' code:
    ``EvidenceSpec.authors_code()``, nodes ``10**linspace(-9, 0, 50)``).
    """
    if not isinstance(spec, EvidenceSpec):
        raise ValueError(f"spec must be an EvidenceSpec; got {type(spec).__name__}")
    if spec.rule == "left":
        return tvo_bound(log_w, spec.betas, "left")
    if spec.rule != "trapezoid":
        raise ValueError(f"EvidenceSpec.rule must be 'left' or 'trapezoid'; got {spec.rule!r}")
    nodes = torch.as_tensor(spec.betas, dtype=torch.float64)
    ok = (
        nodes.ndim == 1
        and nodes.numel() >= 2
        and bool(torch.isfinite(nodes).all())
        and bool((nodes[1:] > nodes[:-1]).all())
        and nodes[0].item() >= 0
        and nodes[-1].item() == 1.0
    )
    if not ok:
        raise ValueError(
            "trapezoid nodes must be >= 2 finite, strictly increasing points in [0, 1] ending at 1; "
            f"got {spec.betas!r}"
        )
    values = snis_integrand(log_w, nodes)
    return torch.trapezoid(values, x=nodes.to(values), dim=0)
