"""The hand-written Bernoulli log-likelihood against torch.distributions, in float64 and float32."""
from __future__ import annotations

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
