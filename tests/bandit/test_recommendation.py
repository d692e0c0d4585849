"""The adaptive-d bandit's recommendation rule: analytic cases, properties and bad input."""
from __future__ import annotations

import math

import numpy as np
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


# ----- bad input: named, never a recommendation ---------------------------------------------------
INF, NAN = float("inf"), float("nan")
EYE = torch.eye(3, dtype=torch.float64)


@pytest.mark.parametrize("mean, message", [
    ([0.0, INF, 1.0], r"mean must be finite; got inf at candidate 1"),
    ([0.0, 1.0, -INF], r"mean must be finite; got -inf at candidate 2"),
    ([NAN, 1.0, 0.0], r"mean must be finite; got nan at candidate 0"),
])
def test_a_mean_that_is_not_finite_is_refused(mean, message):
    """+inf would be recommended; NaN made the search for the first candidate within the tolerance
    find none (a bare StopIteration)."""
    with pytest.raises(ValueError, match=message):
        one_standard_error_rule(torch.tensor(mean, dtype=torch.float64), EYE)


@pytest.mark.parametrize("entry, value, message", [
    ((1, 1), NAN, r"cov must be finite; got nan at entry \(1, 1\)"),
    ((0, 2), INF, r"cov must be finite; got inf at entry \(0, 2\)"),
    ((2, 2), -0.5, r"cov's diagonal holds variances, which must be >= 0; got -0.5 at candidate 2"),
])
def test_a_covariance_that_is_not_finite_or_has_a_negative_variance_is_refused(entry, value, message):
    cov = EYE.clone()
    cov[entry] = value
    with pytest.raises(ValueError, match=message):
        one_standard_error_rule(torch.tensor([0.0, 1.0, 1.1], dtype=torch.float64), cov)


def test_a_covariance_that_is_not_positive_semi_definite_is_refused():
    """With a negative variance of the difference the gap's sd was clamped to 0 and the answer flipped."""
    mean = torch.tensor([0.0, 0.1], dtype=torch.float64)
    not_psd = torch.tensor([[1.0, 1.2], [1.2, 1.0]], dtype=torch.float64)  # eigenvalues 2.2, -0.2
    with pytest.raises(ValueError, match=r"cov must be positive semi-definite .* smallest eigenvalue is -0.2, beyond "
                                         r"float rounding"):
        one_standard_error_rule(mean, not_psd, 1.0)
    with pytest.raises(ValueError, match=r"cov must be symmetric .* cov - cov\^T reaches 0.5"):
        one_standard_error_rule(mean, torch.tensor([[1.0, 0.5], [0.0, 1.0]], dtype=torch.float64))


def test_rounding_below_zero_counts_as_zero():
    """A variance or eigenvalue a few units in the last place below zero is rounding: accepted, as 0."""
    eps = torch.finfo(torch.float64).eps
    cov = torch.tensor([[1.0, 1.0], [1.0, 1.0 - 2 * eps]], dtype=torch.float64)  # a candidate and its copy
    rule = one_standard_error_rule(torch.tensor([0.5, 0.5], dtype=torch.float64), cov)
    assert rule.gap_sd.tolist() == [0.0, 0.0]  # the difference's variance, -2 eps, is 0
    zero = one_standard_error_rule(torch.tensor([0.0, 1.0], dtype=torch.float64),
                                   torch.diag(torch.tensor([1.0, -3 * eps], dtype=torch.float64)))
    assert zero.sd.tolist() == [1.0, 0.0] and (zero.index, zero.best) == (1, 1)


@pytest.mark.parametrize("mean, cov, message", [
    ([0.0, 1.0], torch.eye(2), r"mean must be a floating-point tensor \(\(M,\), float32 or float64\); got list"),
    (np.zeros(2), torch.eye(2), r"mean must be a floating-point tensor .*; got ndarray"),
    (torch.tensor([True, False]), torch.eye(2), r"mean must be a floating-point tensor .*; got a torch.bool tensor"),
    (torch.tensor([0, 1]), torch.eye(2), r"mean must be a floating-point tensor .*; got a torch.int64 tensor"),
    (torch.zeros(2), np.eye(2), r"cov must be a floating-point tensor \(\(M, M\), float32 or float64\); got ndarray"),
    (torch.zeros(2), torch.eye(2, dtype=torch.bool), r"cov must be a floating-point tensor .*; got a torch.bool tensor"),
    (torch.zeros(2), [[1.0, 0.0], [0.0, 1.0]], r"cov must be a floating-point tensor .*; got list"),
])
def test_input_that_is_not_a_floating_tensor_is_named(mean, cov, message):
    with pytest.raises(ValueError, match=message):
        one_standard_error_rule(mean, cov)


@st.composite
def singular_posteriors(draw):
    """Positive semi-definite covariances of rank r < M (candidates that are copies or mixtures of
    each other), computed in float32 or float64: rounding leaves eigenvalues just below zero."""
    m, dtype = draw(st.integers(2, 9)), draw(st.sampled_from([torch.float32, torch.float64]))
    r = draw(st.integers(1, m - 1))
    scale = draw(st.sampled_from([1e-6, 1e-2, 1.0, 1e3]))
    values = st.floats(-3.0, 3.0, allow_nan=False)
    factor = torch.tensor(draw(st.lists(values, min_size=m * r, max_size=m * r)), dtype=dtype).reshape(m, r)
    return torch.zeros(m, dtype=dtype), scale * factor @ factor.T


@settings(max_examples=300, deadline=None)
@given(singular_posteriors())
def test_every_positive_semi_definite_covariance_is_accepted(posterior):
    mean, cov = posterior
    rule = one_standard_error_rule(mean, cov)
    assert rule.index <= rule.best and bool(torch.isfinite(rule.gap_sd).all())


def _toy_gp():
    gp = BanditGP(3, spatial=StepFunctionKernel(0.05, 0.95), priors=False, dtype=torch.float64)
    gp.set_train_data(torch.tensor([[0.1, 0.2, 0.3, 0.0], [0.5, 0.6, 0.9, 0.5], [0.2, 0.6, 0.7, 1.0]],
                                   dtype=torch.float64), torch.tensor([0.5, -0.5, 0.2], dtype=torch.float64))
    return gp


@pytest.mark.parametrize("arms, message", [
    ([], r"arms must be a non-empty list of 1-D tensors .*; got \[\]"),
    (torch.zeros(2, 3), r"arms must be a non-empty list of 1-D tensors"),
    ([[0.1, 0.2]], r"arms\[0\] must be a 1-D floating-point tensor of 1 to 3 points; got \[0.1, 0.2\]"),
    ([torch.tensor([1, 0])], r"arms\[0\] must be a 1-D floating-point tensor"),
    ([torch.zeros(4, dtype=torch.float64)], r"arms\[0\] must be a 1-D floating-point tensor of 1 to 3 points"),
    ([torch.tensor([0.1, 0.2]), torch.tensor([0.1, 0.2, 0.3])], r"arms must all have one length \(one d\); arms\[0\] "
                                                                 r"has 2 points, arms\[1\] 3"),
    ([torch.tensor([0.1, 0.2]), torch.tensor([0.1, NAN])], r"arms\[1\] must lie in \[0, 1\] .*; got nan at point 1"),
    ([torch.tensor([-0.1, 0.2])], r"arms\[0\] must lie in \[0, 1\] .*; got -0.1"),
    ([torch.tensor([0.5, 1.5])], r"arms\[0\] must lie in \[0, 1\] .*; got 1.5 at point 1"),
])
def test_highest_lower_bound_names_bad_arms(arms, message):
    with pytest.raises(ValueError, match=message):
        highest_lower_bound(_toy_gp(), arms)


def test_highest_lower_bound_never_returns_an_arm_of_a_broken_posterior(monkeypatch):
    """argmax takes NaN for the largest: a GP whose posterior is NaN at an arm would return that arm."""
    import tvolib.bandit.recommendation as recommendation

    arms = [torch.tensor([0.1, 0.2], dtype=torch.float64), torch.tensor([0.3, 0.4], dtype=torch.float64)]
    assert any(highest_lower_bound(_toy_gp(), arms) is arm for arm in arms)
    for mean, variance in (([0.0, NAN], [1.0, 1.0]), ([0.0, 0.0], [1.0, NAN]), ([0.0, 0.0], [1.0, -0.5])):
        monkeypatch.setattr(recommendation, "arm_effect_posterior",
                            lambda gp, a, m=mean, v=variance: (torch.tensor(m), torch.diag(torch.tensor(v))))
        with pytest.raises(ValueError, match=r"the GP's posterior at arms\[1\] is not a number and a variance >= 0"):
            highest_lower_bound(_toy_gp(), arms)
