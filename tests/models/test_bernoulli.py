"""The hand-written Bernoulli log-likelihood against torch.distributions, in float64 and float32."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Bernoulli

from tvolib.models.bernoulli import bernoulli_log_prob

from numerics import FP32_EPS


def _inputs(seed: int, shape=(3, 4, 7), dtype=torch.float64, spread: float = 8.0):
    g = torch.Generator().manual_seed(seed)
    logits = (spread * torch.randn(shape, generator=g, dtype=dtype)).requires_grad_()
    value = torch.bernoulli(torch.full(shape[1:], 0.5, dtype=dtype), generator=g)  # broadcast over dim 0
    return logits, value


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), spread=st.sampled_from([0.1, 3.0, 30.0]))
def test_equals_torch_bernoulli_in_float64(seed, spread):
    logits, value = _inputs(seed, spread=spread)
    expected = Bernoulli(logits=logits).log_prob(value)
    actual = bernoulli_log_prob(logits, value)
    # log(1 + e) rounds 1 + e once: at most one float64 epsilon per element.
    assert ((actual - expected).abs() <= 4 * torch.finfo(torch.float64).eps * (1 + logits.abs())).all()
    (g_expected,) = torch.autograd.grad(expected.sum(), logits)
    (g_actual,) = torch.autograd.grad(actual.sum(), logits)
    torch.testing.assert_close(g_actual, g_expected)


def test_float32_sum_over_pixels_within_rounding():
    logits, value = _inputs(0, shape=(10, 50, 784), dtype=torch.float32, spread=4.0)
    expected = Bernoulli(logits=logits.double()).log_prob(value.double()).sum(-1)
    actual = bernoulli_log_prob(logits, value).sum(-1).double()
    # per pixel: a few float32 roundings of values up to |l| + 1; then a sum of 784 terms
    scale = (logits.detach().abs() + 1).double().sum(-1)
    assert ((actual - expected).abs() <= 2 * 784 * FP32_EPS * scale).all()


def test_gradient_is_reduced_to_each_input_shape_and_gradcheck_passes():
    logits = torch.randn(5, dtype=torch.float64, requires_grad=True)  # e.g. the SBN's prior logits
    value = torch.bernoulli(torch.full((4, 3, 5), 0.5, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(bernoulli_log_prob, (logits, value))
    out = bernoulli_log_prob(logits, value)
    assert out.shape == (4, 3, 5)
    g_logits, g_value = torch.autograd.grad(out.sum(), (logits, value))
    assert g_logits.shape == logits.shape and g_value.shape == value.shape


def test_extreme_logits_stay_finite():
    logits = torch.tensor([-1e4, -50.0, 0.0, 50.0, 1e4])
    for y in (0.0, 1.0):
        value = torch.full_like(logits, y)
        torch.testing.assert_close(bernoulli_log_prob(logits, value), Bernoulli(logits=logits).log_prob(value))


INF = float("inf")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_infinite_logits_give_torchs_value_wherever_torch_gives_a_number(dtype):
    """At +-inf torch gives -inf where the value is impossible ((+inf, 0), (+inf, 0.5)) and NaN
    where its formula meets 0 * inf. Wherever torch's value is a number this equals it; where torch
    is NaN it is NaN too, except at (-inf, y > 0), whose limit -inf it gives."""
    big = torch.finfo(dtype).max
    logits = torch.tensor([-INF, -big, -1e4, -88.0, -1.0, -0.0, 0.0, 1.0, 88.0, 1e4, big, INF], dtype=dtype)
    for y in (0.0, 1.0, 0.5, 0.25, 0.75):
        value = torch.full_like(logits, y)
        expected = Bernoulli(logits=logits, validate_args=False).log_prob(value)
        actual = bernoulli_log_prob(logits, value)
        number = ~expected.isnan()
        finite = expected.isfinite()
        assert torch.equal(actual[number & ~finite], expected[number & ~finite])  # -inf
        error = (actual[finite] - expected[finite]).abs().double()
        assert (error <= 4 * torch.finfo(dtype).eps * (1 + logits[finite].abs().double())).all(), (y, error)
        limit = torch.where(logits == -INF, -INF if y > 0 else float("nan"), float("nan"))
        assert torch.equal(actual[~number].isnan(), limit[~number].isnan()), (y, actual, expected)
        assert (actual[~number & ~limit.isnan()] == -INF).all()
    assert bernoulli_log_prob(torch.tensor(INF), torch.tensor(0.0)).item() == -INF  # torch: -inf, not NaN
    assert bernoulli_log_prob(torch.tensor(-INF), torch.tensor(1.0)).item() == -INF
    assert bernoulli_log_prob(torch.tensor(float("nan")), torch.tensor(1.0)).isnan()


def test_the_gradient_at_infinite_logits_is_torchs():
    logits = torch.tensor([-INF, INF, INF, -INF], requires_grad=True)
    value = torch.tensor([1.0, 0.0, 0.5, 0.5])
    (grad,) = torch.autograd.grad(bernoulli_log_prob(logits, value).sum(), logits)
    assert grad.tolist() == [1.0, -1.0, -0.5, 0.5]  # y - sigmoid(l)


@pytest.mark.parametrize("logits, message", [
    (torch.tensor([1, 2]), r"logits must be a floating-point tensor \(float32 or float64\); got a torch.int64 tensor"),
    (torch.tensor([True]), r"got a torch.bool tensor"),
    ([0.5, 1.0], r"logits must be a floating-point tensor .*; got list"),
    (np.zeros(2), r"logits must be a floating-point tensor .*; got ndarray"),
])
def test_logits_that_are_not_a_floating_tensor_are_named(logits, message):
    with pytest.raises(ValueError, match=message):
        bernoulli_log_prob(logits, torch.tensor([0.0, 1.0]))


def test_a_value_that_is_not_a_tensor_is_named_and_integer_or_bool_values_are_converted():
    with pytest.raises(ValueError, match=r"value must be a tensor broadcastable against logits \(2,\); got list"):
        bernoulli_log_prob(torch.zeros(2), [0.0, 1.0])
    logits = torch.tensor([0.5, -2.0])
    expected = bernoulli_log_prob(logits, torch.tensor([1.0, 0.0]))
    for value in (torch.tensor([1, 0]), torch.tensor([True, False]), torch.tensor([1, 0], dtype=torch.uint8)):
        assert torch.equal(bernoulli_log_prob(logits, value), expected)


def test_second_derivatives_are_torchs():
    """The written-out gradient is differentiable: double backward gives -sigmoid'(l), as torch."""
    logits = (3 * torch.randn(4, 6, dtype=torch.float64)).requires_grad_()
    value = torch.bernoulli(torch.full((6,), 0.5, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradgradcheck(bernoulli_log_prob, (logits, value))
    mine = torch.autograd.functional.hessian(lambda l: bernoulli_log_prob(l, value.detach()).sum(), logits.detach())
    ref = torch.autograd.functional.hessian(lambda l: Bernoulli(logits=l).log_prob(value.detach()).sum(), logits.detach())
    torch.testing.assert_close(mine, ref)
