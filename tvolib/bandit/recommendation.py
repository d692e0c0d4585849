"""Which schedule a bandit that chooses ``d`` recommends: the fewest points the GP cannot tell from the best.

Training and answering are two questions (cumulative against simple regret; Bubeck, Munos and
Stoltz, "Pure exploration in multi-armed bandits", 2009). Thompson sampling
(:class:`~tvolib.bandit.adaptive.AdaptiveDBanditSchedule`) trains every ``d`` whose candidate may
be the best, so the ``d`` it trains does not say how many points the run needs; where fewer
points suffice, more tie with them and it trains those too. So every GP round also records a
recommendation (:data:`RECOMMENDATION_FIELDS`), as Bayesian optimisation recommends the
posterior mean's maximiser rather than its last query:

* for each ``d``, the maximiser ``x_d`` of the arm effect's posterior mean ``m_d`` at the next
  round's time (GP-UCB's search at ``kappa = 0``), every ``d`` searched on its own with the budget
  a bandit fixed at that ``d`` would use;
* each ``d``'s candidate: of ``x_d`` and the arms of ``d`` points the GP has observations of, the
  one of the highest lower bound ``m - s`` (``s`` its posterior standard deviation;
  :func:`highest_lower_bound`);
* with ``x*`` the candidate of the highest lower bound, the smallest ``d`` whose lower bound is not
  ``z =`` :data:`RECOMMENDATION_TOLERANCE` posterior standard deviations of the difference below
  it (:func:`one_standard_error_rule`):

      (m* - s*) - (m_d - s_d) <= z sd(f(x*) - f(x_d)).

This is the one-standard-error rule of model selection (Breiman et al., 1984; Hastie, Tibshirani
and Friedman, *Elements of Statistical Learning*, 7.10), at ``z = 0.75``: the fewest points the
GP cannot tell from the best. The standard deviation is the difference's, not the best arm's own
(the usual rule, which treats the estimates as independent): the arms share the GP's
uncertainty, and what is asked is whether ``x_d`` is worse. It compares lower bounds, not means
(revision 5), because a recommendation is not explored: by means, a candidate the GP knows little
about passed for its large difference's standard deviation alone (on the test bed, 2 points of
regret 1.0 where ten are best). For the same reason the observed arms are candidates (revision
6): the GP knows them best, and a posterior-mean maximiser in nine dimensions is often off its
data. The tolerance trades two errors: fewer points than needed where the extra point's gain is
under ``z`` standard deviations, and more than needed where extra points tie with the optimum's
and noise favours them; ``z = 0.75`` was chosen on the quiet test-bed cases, seeds 0 to 11, before
seeds 24 to 71 were run (``docs/adaptive-d.md``, *Revision 6*, has the counts).

Example:
    >>> mean = torch.tensor([0.0, 1.0, 1.1], dtype=torch.float64)  # candidates of d = 2, 3, 4
    >>> rule = one_standard_error_rule(mean, 0.01 * torch.eye(3, dtype=torch.float64))
    >>> rule.index, rule.best  # d = 3 is 0.1 below d = 4, within 0.75 sd (0.14) of the difference
    (1, 2)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..checks import check_finite_float
from .acquisition import arm_effect_posterior
from .model import BanditGP

__all__ = ["RECOMMENDATION_FIELDS", "RECOMMENDATION_TOLERANCE", "ROUNDING_ULPS", "Recommendation",
           "check_posterior", "highest_lower_bound", "one_standard_error_rule"]

#: The history's columns of the recommendation (module docstring), ``None`` in random rounds: the
#: recommended ``d`` and arm, and for each ``d`` in ``[d_min, d_max]`` the posterior mean and
#: standard deviation at its candidate (revision 6: its posterior-mean maximiser or an observed arm
#: of ``d`` points) and the standard deviation of its difference from the best candidate's (the
#: highest lower bound ``mean - sd``; standardised units).
RECOMMENDATION_FIELDS = ("recommended_d", "recommended_arm", "mean_by_d", "sd_by_d", "gap_sd_by_d")
#: The recommendation's tolerance, in standard deviations of a candidate's difference from the
#: best: the smallest ``d`` whose lower bound is no more than this below the best's is recommended
#: (module docstring; chosen on the test bed, revision 6).
RECOMMENDATION_TOLERANCE = 0.75
#: How many units in the last place of a covariance's largest entry, per candidate, rounding may
#: take its smallest eigenvalue below zero before :func:`check_posterior` refuses it: computed
#: ``F F^T`` of rank below ``M`` (2 to 9 candidates, float32 and float64, 20,000 draws) reach 1.3;
#: the adaptive bandit's candidate posteriors on the test bed (104 GP rounds, cases d3-step-mild,
#: d5- and d10-step-mild-quiet, seeds 0 and 1) are positive definite, their smallest eigenvalue at
#: least 6.8e7 of these units.
ROUNDING_ULPS = 8


@dataclass(frozen=True)
class Recommendation:
    """What :func:`one_standard_error_rule` decided over candidates ordered by ``d``.

    Attributes:
        index: the recommended candidate, the first within the tolerance (never after ``best``).
        best: the candidate of the highest lower bound ``mean - sd``.
        sd: ``(M,)`` each candidate's posterior standard deviation.
        gap_sd: ``(M,)`` the standard deviation of each candidate's difference from the best (0 at ``best``).
    """

    index: int
    best: int
    sd: Tensor
    gap_sd: Tensor


def _rounding(cov: Tensor) -> float:
    """How far rounding may take a computed covariance from positive semi-definite: :data:`ROUNDING_ULPS`
    times ``M`` units in the last place of its largest entry (``M`` candidates, the size of a
    row's sum)."""
    scale = float(cov.abs().max()) if cov.numel() else 0.0
    return ROUNDING_ULPS * cov.shape[0] * torch.finfo(cov.dtype).eps * scale


def _first(bad: Tensor) -> int:
    return int(bad.reshape(-1).nonzero()[0])


def check_posterior(mean: Any, cov: Any) -> tuple[Tensor, Tensor]:
    """``(mean, cov)`` if they are a joint posterior of ``M >= 1`` candidates, else a ``ValueError``
    naming the argument and the candidate.

    ``mean`` ``(M,)`` and ``cov`` ``(M, M)`` floating-point tensors, finite; ``cov`` symmetric and
    positive semi-definite up to float rounding (:func:`_rounding`: no entry of ``cov - cov^T`` and no
    eigenvalue beyond it), so no variance or variance of a difference is negative but by rounding.

    Example:
        >>> check_posterior(torch.zeros(2), torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
        Traceback (most recent call last):
        ...
        ValueError: cov must be positive semi-definite (a joint posterior covariance); its smallest eigenvalue is -1, beyond float rounding (3.8e-06)
    """
    for name, value, ndim in (("mean", mean, 1), ("cov", cov, 2)):
        if not torch.is_tensor(value) or not value.is_floating_point():
            what = f"a {value.dtype} tensor" if torch.is_tensor(value) else type(value).__name__
            raise ValueError(f"{name} must be a floating-point tensor ({'(M,)' if ndim == 1 else '(M, M)'}, "
                             f"float32 or float64); got {what} (convert it with torch.as_tensor(..., "
                             "dtype=torch.float64))")
    if mean.ndim != 1 or mean.numel() == 0 or cov.shape != (mean.numel(), mean.numel()):
        raise ValueError(f"mean must be (M,) with M >= 1 and cov (M, M); got {tuple(mean.shape)} and "
                         f"{tuple(cov.shape)}")
    if not bool(torch.isfinite(mean).all()):
        k = _first(~torch.isfinite(mean))
        raise ValueError(f"mean must be finite; got {float(mean[k])!r} at candidate {k}")
    if not bool(torch.isfinite(cov).all()):
        k = _first(~torch.isfinite(cov))
        raise ValueError(f"cov must be finite; got {float(cov.reshape(-1)[k])!r} at entry "
                         f"({k // cov.shape[0]}, {k % cov.shape[0]})")
    tol = _rounding(cov)
    variance = cov.diagonal()
    if bool((variance < -tol).any()):
        k = _first(variance < -tol)
        raise ValueError(f"cov's diagonal holds variances, which must be >= 0; got {float(variance[k])!r} at "
                         f"candidate {k}")
    asymmetry = float((cov - cov.T).abs().max())
    if asymmetry > tol:
        raise ValueError(f"cov must be symmetric (a joint posterior covariance); cov - cov^T reaches "
                         f"{asymmetry:.3g}, beyond float rounding ({tol:.2g})")
    smallest = float(torch.linalg.eigvalsh((cov + cov.T) / 2).min())
    if smallest < -tol:
        raise ValueError(f"cov must be positive semi-definite (a joint posterior covariance); its smallest "
                         f"eigenvalue is {smallest:.3g}, beyond float rounding ({tol:.2g})")
    return mean, cov


def one_standard_error_rule(mean: Tensor, cov: Tensor, tolerance: float = RECOMMENDATION_TOLERANCE
                            ) -> Recommendation:
    """The first candidate whose lower bound is within ``tolerance`` sd of its difference from the best's.

    ``lower_i = mean_i - sqrt(cov_ii)``, ``best = argmax_i lower_i``, and the recommendation is the
    first ``i`` with ``lower_best - lower_i <= tolerance sqrt(cov_bb + cov_ii - 2 cov_bi)``.

    Args:
        mean: ``(M,)`` the joint posterior mean at the candidates, ordered by ``d`` (fewest points first).
        cov: ``(M, M)`` their joint posterior covariance.
        tolerance: ``z`` (>= 0), default :data:`RECOMMENDATION_TOLERANCE`.

    Returns:
        The :class:`Recommendation`.

    Raises:
        ValueError: ``mean`` or ``cov`` not floating-point tensors of those shapes, not finite, or
            ``cov`` not symmetric positive semi-definite beyond float rounding
            (:func:`check_posterior`); a bad ``tolerance``. Variances that rounding made negative
            count as 0.

    Example:
        >>> mean, cov = torch.tensor([0.0, 1.0]), torch.eye(2)
        >>> one_standard_error_rule(mean, cov, 0.0).index, one_standard_error_rule(mean, cov, 1.0).index
        (1, 0)
    """
    tolerance = check_finite_float("tolerance (in sd of a candidate's difference from the best)", tolerance,
                                   minimum=0.0)
    mean, cov = check_posterior(mean, cov)
    sd = cov.diagonal().clamp_min(0.0).sqrt()
    lower = mean - sd
    best = int(torch.argmax(lower))
    gap_sd = (cov[best, best] + cov.diagonal() - 2 * cov[best]).clamp_min(0.0).sqrt()
    index = next(i for i, (low, s) in enumerate(zip(lower.tolist(), gap_sd.tolist()))
                 if low >= float(lower[best]) - tolerance * s)
    return Recommendation(index=index, best=best, sd=sd, gap_sd=gap_sd)


def highest_lower_bound(gp: BanditGP, arms: Sequence[Tensor]) -> Tensor:
    """The one of ``arms`` of the highest posterior lower bound ``m - s`` of the arm effect at the
    prediction time (:func:`~tvolib.bandit.acquisition.arm_effect_posterior`).

    Args:
        gp: a :class:`~tvolib.bandit.model.BanditGP` with data.
        arms: a non-empty list of 1-D floating-point tensors, all of one length (at most
            ``gp.n_arm`` points), in the GP's normalised units: finite, in ``[0, 1]``.

    Returns:
        That arm (the object given).

    Raises:
        ValueError: naming the argument: no arms, an arm that is not such a tensor, arms of
            different lengths, a point outside ``[0, 1]`` or not finite; or a posterior at an arm
            that is not finite, or a variance negative beyond float rounding.
    """
    if isinstance(arms, Tensor) or not isinstance(arms, Sequence) or len(arms) == 0:
        raise ValueError(f"arms must be a non-empty list of 1-D tensors (arms in the GP's normalised units); got "
                         f"{arms!r:.80}")
    for k, arm in enumerate(arms):
        if not torch.is_tensor(arm) or not arm.is_floating_point() or arm.ndim != 1 or not 1 <= arm.numel() <= gp.n_arm:
            raise ValueError(f"arms[{k}] must be a 1-D floating-point tensor of 1 to {gp.n_arm} points; got {arm!r:.80}")
        if arm.numel() != arms[0].numel():
            raise ValueError(f"arms must all have one length (one d); arms[0] has {arms[0].numel()} points, "
                             f"arms[{k}] {arm.numel()}")
        outside = ~torch.isfinite(arm) | (arm < 0) | (arm > 1)
        if bool(outside.any()):
            raise ValueError(f"arms[{k}] must lie in [0, 1] (the GP's normalised units), finite; got "
                             f"{float(arm[_first(outside)])!r} at point {_first(outside)}")
    mean, cov = arm_effect_posterior(gp, list(arms))
    variance = cov.diagonal()
    bad = ~torch.isfinite(mean) | ~torch.isfinite(variance) | (variance < -_rounding(cov))
    if bool(bad.any()):
        k = _first(bad)
        raise ValueError(f"the GP's posterior at arms[{k}] is not a number and a variance >= 0 (mean "
                         f"{float(mean[k])!r}, variance {float(variance[k])!r}): its fit or data are broken")
    return arms[int(torch.argmax(mean - variance.clamp_min(0.0).sqrt()))]
