"""The adaptive-d bandit's recommendation rule: analytic cases, properties and bad input."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.kernels import StepFunctionKernel
from tvolib.bandit.model import BanditGP
from tvolib.bandit.recommendation import RECOMMENDATION_TOLERANCE, highest_lower_bound, one_standard_error_rule


def test_independent_candidates_by_hand():
    """Three independent candidates, sd 0.1, 0.2, 0.1: lower bounds -0.1, 0.8, 1.0; the best is the
    last; the middle one's gap has sd sqrt(0.04 + 0.01) = 0.2236, so it is within z = 1 (0.2 below)
    and not within z = 0.75 (0.168); the first never is."""
    mean = torch.tensor([0.0, 1.0, 1.1], dtype=torch.float64)
    cov = torch.diag(torch.tensor([0.01, 0.04, 0.01], dtype=torch.float64))
    rule = one_standard_error_rule(mean, cov, 1.0)
    assert (rule.index, rule.best) == (1, 2)
    assert rule.sd.tolist() == pytest.approx([0.1, 0.2, 0.1])
    assert rule.gap_sd.tolist() == pytest.approx([math.sqrt(0.02), math.sqrt(0.05), 0.0])
    assert one_standard_error_rule(mean, cov, 0.75).index == 2
    assert RECOMMENDATION_TOLERANCE == 0.75 and one_standard_error_rule(mean, cov).index == 2  # the default


def test_a_shared_uncertainty_is_not_counted_against_a_candidate():
    """Two candidates that differ by 0.1 in mean with the same large sd, almost perfectly correlated:
    their difference is known to be about 0.1 (sd 0.045), so the smaller is not within z = 1 of the
    best, although the rule that treats them as independent (sd 1.41) would call them tied."""
    mean = torch.tensor([0.0, 0.1], dtype=torch.float64)
    cov = torch.tensor([[1.0, 0.999], [0.999, 1.0]], dtype=torch.float64)
    rule = one_standard_error_rule(mean, cov, 1.0)
    assert (rule.index, rule.best) == (1, 1)
    assert float(rule.gap_sd[0]) == pytest.approx(math.sqrt(0.002))


@st.composite
def posteriors(draw):
    """A joint posterior of 1 to 8 candidates: a mean and a positive definite covariance (every
    difference of two candidates has a variance of at least 0.002)."""
    m = draw(st.integers(1, 8))
    values = st.floats(-3.0, 3.0, allow_nan=False)
    mean = torch.tensor(draw(st.lists(values, min_size=m, max_size=m)), dtype=torch.float64)
    factor = torch.tensor(draw(st.lists(values, min_size=m * m, max_size=m * m)), dtype=torch.float64).reshape(m, m)
    return mean, factor @ factor.T / m + 1e-3 * torch.eye(m, dtype=torch.float64)


@settings(max_examples=200, deadline=None)
@given(posteriors(), st.floats(0.0, 5.0), st.floats(0.0, 5.0))
def test_the_recommendation_is_never_after_the_best_and_falls_with_the_tolerance(posterior, z1, z2):
    mean, cov = posterior
    lower = mean - cov.diagonal().clamp_min(0.0).sqrt()
    small, large = one_standard_error_rule(mean, cov, min(z1, z2)), one_standard_error_rule(mean, cov, max(z1, z2))
    assert float(lower[small.best]) == float(lower.max())
    assert large.index <= small.index <= small.best
    assert float(small.gap_sd[small.best]) == 0.0
    assert one_standard_error_rule(mean, cov, 0.0).index == int((lower >= lower.max()).nonzero()[0])
    assert one_standard_error_rule(mean, cov, 1e12).index == 0


@pytest.mark.parametrize("tolerance, message", [(-0.5, "tolerance"), (float("nan"), "tolerance"),
                                                 ("1", "tolerance")])
def test_a_bad_tolerance_is_refused(tolerance, message):
    with pytest.raises(ValueError, match=message):
        one_standard_error_rule(torch.zeros(2), torch.eye(2), tolerance)


@pytest.mark.parametrize("mean, cov", [(torch.zeros(3), torch.eye(2)), (torch.zeros(2, 1), torch.eye(2)),
                                       (torch.zeros(0), torch.zeros(0, 0))])
def test_mismatched_shapes_are_refused(mean, cov):
    with pytest.raises(ValueError, match=r"mean must be \(M,\)"):
        one_standard_error_rule(mean, cov)


def test_an_arm_and_its_copy_with_a_tied_point_share_one_posterior():
    """The candidates of different ``d`` are compared by one GP: an arm of three points and the same
    arm with its last point repeated (an interval of width zero) are one schedule, so their joint
    posterior has equal means and variances and a correlation of one (float64 rounding)."""
    gp = BanditGP(4, spatial=StepFunctionKernel(0.05, 0.95), priors=False, dtype=torch.float64)
    gp.set_train_data(torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.5, 0.5, 0.9, 0.9, 0.5], [0.2, 0.6, 0.6, 0.6, 1.0]],
                                   dtype=torch.float64), torch.tensor([0.5, -0.5, 0.2], dtype=torch.float64))
    arm = torch.tensor([0.1, 0.4, 0.7], dtype=torch.float64)
    far = torch.tensor([0.9, 0.95, 0.99, 1.0], dtype=torch.float64)
    mean, cov = arm_effect_posterior(gp, [arm, torch.cat([arm, arm[-1:]]), far])
    assert float(mean[0]) == pytest.approx(float(mean[1]), abs=1e-12)
    assert float(cov[0, 0]) == pytest.approx(float(cov[1, 1]), abs=1e-12)
    assert float(cov[0, 1]) == pytest.approx(float(cov[0, 0]), abs=1e-12)
    pair = [arm, far[:3]]
    pair_mean, pair_cov = arm_effect_posterior(gp, pair)
    lower = pair_mean - pair_cov.diagonal().sqrt()
    assert highest_lower_bound(gp, pair) is pair[int(torch.argmax(lower))]
    assert highest_lower_bound(gp, pair[::-1]) is pair[int(torch.argmax(lower))]
