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

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import check_finite_float
from .acquisition import arm_effect_posterior
from .model import BanditGP

__all__ = ["RECOMMENDATION_FIELDS", "RECOMMENDATION_TOLERANCE", "Recommendation", "highest_lower_bound",
           "one_standard_error_rule"]

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

    Example:
        >>> mean, cov = torch.tensor([0.0, 1.0]), torch.eye(2)
        >>> one_standard_error_rule(mean, cov, 0.0).index, one_standard_error_rule(mean, cov, 1.0).index
        (1, 0)
    """
    tolerance = check_finite_float("tolerance (in sd of a candidate's difference from the best)", tolerance,
                                   minimum=0.0)
    if mean.ndim != 1 or mean.numel() == 0 or cov.shape != (mean.numel(), mean.numel()):
        raise ValueError(f"mean must be (M,) with M >= 1 and cov (M, M); got {tuple(mean.shape)} and "
                         f"{tuple(cov.shape)}")
    sd = cov.diagonal().clamp_min(0.0).sqrt()
    lower = mean - sd
    best = int(torch.argmax(lower))
    gap_sd = (cov[best, best] + cov.diagonal() - 2 * cov[best]).clamp_min(0.0).sqrt()
    index = next(i for i, (low, s) in enumerate(zip(lower.tolist(), gap_sd.tolist()))
                 if low >= float(lower[best]) - tolerance * s)
    return Recommendation(index=index, best=best, sd=sd, gap_sd=gap_sd)


def highest_lower_bound(gp: BanditGP, arms: list[Tensor]) -> Tensor:
    """The one of ``arms`` (normalised, all of one length) of the highest posterior lower bound ``m - s``
    of the arm effect at the prediction time (:func:`~tvolib.bandit.acquisition.arm_effect_posterior`)."""
    mean, cov = arm_effect_posterior(gp, arms)
    return arms[int(torch.argmax(mean - cov.diagonal().clamp_min(0.0).sqrt()))]
