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

from tvolib.checks import check_betas, check_int, check_log_w

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

#: Riemann-sum rules accepted by :func:`riemann_weights` and :func:`tvo_bound`.
RULES = ("left", "right", "trapezoid")

_D_NAME = "d (the number of left points, including b_0 = 0)"


def validate_schedule(betas: Tensor | list[float]) -> Tensor:
    """Check that ``betas`` is a left-point schedule for Eq. 5 and return it as float64.

    Accepted: a non-empty, finite, 1-D sequence ``0 = b_0 < b_1 < ... < b_{d-1} < 1``.

    Args:
        betas: the left points (tensor, list or tuple).

    Returns:
        A 1-D float64 CPU tensor of shape ``(d,)``.

    Raises:
        ValueError: naming what is wrong (shape, non-finite, first point, order or range).

    Example:
        >>> validate_schedule([0.0, 0.3, 0.6]).dtype
        torch.float64
    """
    return check_betas(betas, name="schedule")


@dataclass(frozen=True)
class EvidenceSpec:
    """Which log-evidence estimate ``L`` an adaptive schedule wants after every epoch.

    The paper (Appendix A, "Reward Evaluation") uses the TVO left Riemann sum over a fixed linear
    schedule of 50 points; the authors' code uses the trapezoid rule over 50 points
    ``10**linspace(-9, 0, 50)``.

    Attributes:
        betas: for ``rule='left'`` a left-point schedule (1 is appended); for ``rule='trapezoid'``
            the quadrature nodes, strictly increasing in [0, 1] and ending at 1.
        rule: ``'left'`` or ``'trapezoid'``. Both are checked when the spec is built.

    Example:
        >>> EvidenceSpec.paper(4)
        EvidenceSpec(betas=(0.0, 0.25, 0.5, 0.75), rule='left')
    """

    betas: tuple[float, ...]
    rule: Literal["left", "trapezoid"] = "left"

    def __post_init__(self) -> None:
        if self.rule == "left":
            check_betas(self.betas, name="EvidenceSpec.betas")
        elif self.rule == "trapezoid":
            _check_trapezoid_nodes(self.betas)
        else:
            raise ValueError(f"EvidenceSpec.rule must be 'left' or 'trapezoid'; got {self.rule!r}")

    def quadrature(self, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
                   ) -> tuple[Tensor, Tensor | None]:
        """The estimate's ``(nodes, weights)`` in ``dtype`` on ``device``, for :func:`log_evidence`'s
        ``quadrature`` (move them once, not once per minibatch). ``left``: the nodes with non-zero
        Riemann weights and those weights; ``trapezoid``: the nodes and ``None``."""
        if self.rule == "left":
            nodes, weights = riemann_weights(self.betas, "left")
            used = weights != 0
            return nodes[used].to(dtype=dtype, device=device), weights[used].to(dtype=dtype, device=device)
        return _check_trapezoid_nodes(self.betas).to(dtype=dtype, device=device), None

    @classmethod
    def paper(cls, d: int = 50) -> "EvidenceSpec":
        """The paper's reward signal: left Riemann sum over ``linear(d)`` (Appendix A, d = 50)."""
        return cls(betas=tuple(linear(d).tolist()), rule="left")

    @classmethod
    def authors_code(cls, d: int = 50) -> "EvidenceSpec":
        """The authors' code: trapezoid rule over the nodes ``10**linspace(-9, 0, d)`` (its default reward signal)."""
        return cls(betas=tuple(torch.logspace(-9, 0, d, dtype=torch.float64).tolist()), rule="trapezoid")


def _check_trapezoid_nodes(betas: tuple[float, ...]) -> Tensor:
    try:
        nodes = torch.as_tensor(betas, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        nodes = torch.zeros(0)
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
            "EvidenceSpec.betas (trapezoid nodes) must be >= 2 finite, strictly increasing points in "
            f"[0, 1] ending at 1; got {betas!r}"
        )
    return nodes


def linear(d: int) -> Tensor:
    """Left points of the uniform partition of [0, 1] into ``d`` intervals: ``b_j = j / d``.

    ``linear(50)`` is the paper's reward schedule (Appendix A, "Reward Evaluation").

    Args:
        d: number of left points, including ``b_0 = 0`` (an int >= 1).

    Returns:
        A float64 CPU tensor of shape ``(d,)``.

    Example:
        >>> linear(4).tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    check_int(_D_NAME, d, 1)
    return torch.arange(d, dtype=torch.float64) / d


def log_uniform(d: int, beta1: float = 0.025) -> Tensor:
    """``[0] + logspace(log10(beta1), 0, d)[:-1]``: 0, then log spacing from ``beta1`` towards 1.

    The paper's log baseline with ``beta1 = 0.025`` (Section 4, from the grid search of Masrani et
    al. 2019). ``d = 1`` gives ``[0]`` (the ELBO).

    Args:
        d: number of left points, including ``b_0 = 0`` (an int >= 1).
        beta1: the first point after 0, in (0, 1).

    Returns:
        A float64 CPU tensor of shape ``(d,)``.

    Example:
        >>> [round(b, 4) for b in log_uniform(5).tolist()]
        [0.0, 0.025, 0.0629, 0.1581, 0.3976]
    """
    check_int(_D_NAME, d, 1)
    if not (isinstance(beta1, (int, float)) and math.isfinite(beta1) and 0.0 < beta1 < 1.0):
        raise ValueError(f"beta1 must be a float in (0, 1); got {beta1!r}")
    points = torch.logspace(math.log10(beta1), 0.0, d, dtype=torch.float64)[:-1]
    return validate_schedule(torch.cat([torch.zeros(1, dtype=torch.float64), points]))


def snis_integrand(log_w: Tensor, betas: Tensor | list[float], *, zero_weights: bool | None = None) -> Tensor:
    """SNIS estimates of the integrand ``E_{pi_beta}[log w]`` (Eq. 4) for every beta at once.

    ``E_{pi_beta}[log w] ≈ sum_s softmax_s(beta log w_s) log w_s``, computed for all betas in one
    broadcast ``(d, S, B)`` operation; differentiable. A weight ``w_s = 0`` (``log w_s = -inf``)
    has ``w_s^0 = 1`` and ``w_s^beta = 0`` for ``beta > 0``: at beta = 0 the estimate is then
    ``-inf`` (the ELBO of a sample with zero weight), for beta > 0 the sample drops out, and a
    data point whose samples all have zero weight gets ``-inf`` everywhere.

    Args:
        log_w: ``(S, B)`` log importance weights (floating point; no NaN or +inf).
        betas: any 1-D sequence of points (not validated as a schedule, so it may hold 1).
        zero_weights: ``None`` checks ``log_w`` for NaN and +inf and looks for ``-inf`` entries,
            reading two values back from its device; ``True`` / ``False`` says that the caller has
            checked ``log_w`` and whether it holds a ``-inf`` (nothing is read back: a GPU loop
            checks a whole epoch's weights at once). ``True`` on weights without ``-inf`` gives
            the same values as ``False``, with more work.

    Returns:
        A tensor ``(d, B)`` in ``log_w``'s dtype and device.

    Example:
        >>> snis_integrand(torch.zeros(4, 2), [0.0, 1.0])
        tensor([[0., 0.],
                [0., 0.]])
    """
    if zero_weights is None:
        check_log_w(log_w)
    b = torch.as_tensor(betas, dtype=log_w.dtype, device=log_w.device).reshape(-1)
    zero_weight = torch.isneginf(log_w)
    if not (bool(zero_weight.any()) if zero_weights is None else zero_weights):
        weights = torch.softmax(b[:, None, None] * log_w[None], dim=1)
        return (weights * log_w[None]).sum(dim=1)
    logits = b[:, None, None] * log_w.masked_fill(zero_weight, 0.0)[None]
    logits = logits.masked_fill(zero_weight[None] & (b[:, None, None] > 0), -math.inf)
    weights = torch.softmax(logits, dim=1)
    terms = torch.where(weights > 0, weights * log_w[None], torch.zeros((), dtype=log_w.dtype, device=log_w.device))
    values = terms.sum(dim=1)
    return values.masked_fill(zero_weight.all(dim=0)[None], -math.inf)


def riemann_weights(betas: Tensor | list[float], rule: str = "left") -> tuple[Tensor, Tensor]:
    """Quadrature nodes ``[b_0, ..., b_{d-1}, 1]`` and their weights for a schedule (Eq. 5).

    With ``delta_j = b_{j+1} - b_j`` (``b_d = 1``): ``left`` puts ``delta_j`` on ``b_j`` (the TVO,
    a lower bound since the integrand increases), ``right`` puts it on ``b_{j+1}`` (an upper
    bound for the exact integrand; with SNIS estimates it need not be one), ``trapezoid`` averages
    the two.

    Args:
        betas: a left-point schedule (see :func:`validate_schedule`).
        rule: one of :data:`RULES`.

    Returns:
        ``(nodes, weights)``, two float64 CPU tensors of shape ``(d + 1,)``.

    Example:
        >>> riemann_weights([0.0, 0.5])[1].tolist()
        [0.5, 0.5, 0.0]
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


def tvo_bound(log_w: Tensor, betas: Tensor | list[float], rule: str = "left", *,
              zero_weights: bool | None = None) -> Tensor:
    """Riemann sum of the SNIS integrand over a schedule; ``rule='left'`` is the TVO (Eq. 5).

    ``TVO = sum_j (b_{j+1} - b_j) E_{pi_{b_j}}[log w]`` with ``b_d = 1``. ``betas=[0]`` gives the
    ELBO (Eq. 1, the mean of ``log w``). ``right`` is an upper bound for the exact integrand (with
    SNIS estimates it need not be one), ``trapezoid`` the trapezoid rule. A ``-inf`` log weight
    gives ``-inf`` for the left and trapezoid rules (their beta = 0 term), see :func:`snis_integrand`.

    Args:
        log_w: ``(S, B)`` log importance weights.
        betas: a left-point schedule (see :func:`validate_schedule`).
        rule: one of :data:`RULES`.
        zero_weights: as in :func:`snis_integrand` (``None``: ``log_w`` checked there).

    Returns:
        A tensor ``(B,)``, differentiable with respect to ``log_w``.

    Example:
        >>> tvo_bound(torch.zeros(3, 2), [0.0, 0.5]).tolist()
        [0.0, 0.0]
    """
    nodes, weights = riemann_weights(betas, rule)
    used = weights != 0
    values = snis_integrand(log_w, nodes[used], zero_weights=zero_weights)
    return (weights[used].to(values)[:, None] * values).sum(dim=0)


def iwae_bound(log_w: Tensor) -> Tensor:
    """The IWAE-S bound ``logsumexp_s(log w_s) - log S`` (Burda et al. 2016).

    Args:
        log_w: ``(S, B)`` log importance weights.

    Returns:
        A tensor ``(B,)``.

    Example:
        >>> iwae_bound(torch.zeros(5, 1)).tolist()
        [0.0]
    """
    check_log_w(log_w)
    return torch.logsumexp(log_w, dim=0) - math.log(log_w.shape[0])


def log_evidence(log_w: Tensor, spec: EvidenceSpec, *, zero_weights: bool | None = None,
                 quadrature: tuple[Tensor, Tensor | None] | None = None) -> Tensor:
    """The log-evidence estimate ``L`` named by ``spec`` (the bandit's reward signal).

    ``rule='left'``: the TVO left sum (Eq. 5) over the left points ``spec.betas`` (the paper,
    Appendix A: ``EvidenceSpec.paper()``, linear d = 50). ``rule='trapezoid'``: the trapezoid rule
    over the nodes ``spec.betas`` (the authors' code: ``EvidenceSpec.authors_code()``, nodes
    ``10**linspace(-9, 0, 50)``).

    Args:
        log_w: ``(S, B)`` log importance weights.
        spec: an :class:`EvidenceSpec`.
        zero_weights: as in :func:`snis_integrand` (``None``: ``log_w`` checked there).
        quadrature: ``spec.quadrature(log_w.dtype, log_w.device)``, computed once by the caller
            (``None``: computed here; on a GPU that copies it to the device, a host synchronisation).

    Returns:
        A tensor ``(B,)``.

    Example:
        >>> log_evidence(torch.zeros(3, 2), EvidenceSpec.paper()).tolist()
        [0.0, 0.0]
    """
    if not isinstance(spec, EvidenceSpec):
        raise ValueError(f"spec must be an EvidenceSpec; got {type(spec).__name__}")
    nodes, weights = spec.quadrature() if quadrature is None else quadrature
    values = snis_integrand(log_w, nodes, zero_weights=zero_weights)  # the operations of tvo_bound
    if weights is not None:
        return (weights.to(values)[:, None] * values).sum(dim=0)
    return torch.trapezoid(values, x=nodes.to(values), dim=0)
