"""Stacked losses equal tvolib.objectives.compute_loss run by run, with per-run schedules."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from tvolib.objectives import compute_loss, covariance_surrogate
from tvolib.stacked.objectives import (
    left_points,
    stacked_covariance_surrogate,
    stacked_iwae_bound,
    stacked_loss,
    stacked_tvo_surrogate,
)
from tvolib.tvo import iwae_bound, linear, log_uniform

from helpers_stacked import B, S, SEEDS, batches, generators, stack_of
from numerics import assert_close_fp32, log_w_terms

SCHEDULES = [log_uniform(4), linear(4), torch.tensor([0.0, 0.05, 0.5, 0.9], dtype=torch.float64)]
CASES = [("vae", "tvo"), ("vae", "tvo_reparam"), ("vae", "elbo"), ("vae", "iwae"), ("sbn", "tvo"), ("sbn", "elbo")]


@pytest.mark.parametrize("name,objective", CASES)
def test_run_k_loss_and_gradients_equal_compute_loss(name, objective):
    """To float32 rounding: the stack's batched kernels are not the single model's."""
    stack, models = stack_of(name)
    x = batches(stack.K)
    points = left_points(SCHEDULES)
    out = stacked_loss(objective, stack, x, S, stack.draw_noise(generators(SEEDS), S, B), points)
    out.loss.sum().backward()
    assert out.loss.shape == (stack.K,) and out.log_w.shape == (stack.K, S, B)
    for k, (model, seed) in enumerate(zip(models, SEEDS)):
        torch.manual_seed(1000 + seed)
        single = compute_loss(objective, model, x[k], S, SCHEDULES[k])
        single.loss.backward()
        terms = log_w_terms(model) + S * B  # a log weight's chain, then the sums over samples and points
        assert_close_fp32(out.log_w[k], single.log_w, terms=terms, what=f"run {k} log w")
        assert_close_fp32(out.loss[k], single.loss, terms=terms, what=f"run {k} loss")
        for n, p in model.named_parameters():
            assert_close_fp32(stack.params[n].grad[k], p.grad, terms=2 * terms, what=f"run {k} {n}.grad")


@settings(max_examples=30)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_covariance_surrogate_and_iwae_bound_batched_equal_single(s, b, seed):
    g = torch.Generator().manual_seed(seed)
    log_w = torch.randn(3, s, b, generator=g) * 5
    log_pi = torch.randn(3, 4, s, b, generator=g)
    points = left_points(SCHEDULES)
    batched = stacked_covariance_surrogate(log_w, log_pi, points)
    bounds = stacked_iwae_bound(log_w)
    for k in range(3):  # reductions over a (K, S, B) tensor vs an (S, B) one: other kernels
        single = covariance_surrogate(log_w[k], log_pi[k], points.points[k], points.deltas[k])
        # per column: softmax and three weighted sums over S samples at each of d = 4 points, summed over
        # the points; the summands are at most |f| + 2 (2 |f|)(2 |log pi|) (the weights sum to 1)
        f, pi = log_w[k].abs().max().item(), log_pi[k].abs().max().item()
        assert_close_fp32(batched[k], single, terms=4 * s + 4, scale=f + 2 * 4 * f * pi, what=f"run {k} surrogate")
        assert_close_fp32(bounds[k], iwae_bound(log_w[k]), terms=s, scale=log_w.abs().max().item(),
                          what=f"run {k} IWAE bound")


def test_left_points_are_the_single_run_widths():
    points = left_points([[0.0, 0.5], [0.0, 0.25]], dtype=torch.float64)
    assert points.points.tolist() == [[0.0, 0.5], [0.0, 0.25]]
    assert points.deltas.tolist() == [[0.5, 0.5], [0.25, 0.75]]


def test_a_shorter_schedule_is_padded_with_intervals_of_width_zero():
    points = left_points([[0.0, 0.5], [0.0, 0.25, 0.75]], dtype=torch.float64)
    assert points.points.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.25, 0.75]]
    assert points.deltas.tolist() == [[0.5, 0.5, 0.0], [0.25, 0.5, 0.25]]


@pytest.mark.parametrize("reparam", [False, True])
def test_padding_leaves_the_surrogate_and_its_gradient_unchanged(reparam):
    """In float64: the zero-width terms add exact zeros, so the padded sum is the sum (to the
    rounding of a longer reduction) and so is its gradient."""
    g = torch.Generator().manual_seed(0)
    log_p, log_q = (torch.randn(1, 6, 3, generator=g, dtype=torch.float64) * 4 for _ in range(2))
    schedule = [[0.0, 0.1, 0.45]]
    values, grads = [], []
    for d in (3, 7):
        lp = log_p.clone().requires_grad_()
        value = stacked_tvo_surrogate(lp, log_q, left_points(schedule, d=d, dtype=torch.float64), reparam)
        value.sum().backward()
        values.append(value.detach())
        grads.append(lp.grad)
    torch.testing.assert_close(values[1], values[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)


def test_bad_inputs_are_named():
    stack, _ = stack_of("sbn")
    x, noise = batches(3), stack.draw_noise(generators(SEEDS), S, B)
    with pytest.raises(ValueError, match=r"at most d = 2 points .*lengths \[3\]"):
        left_points([[0.0, 0.1, 0.2]], d=2)
    with pytest.raises(ValueError, match="K >= 1 schedules"):
        left_points([])
    with pytest.raises(ValueError, match="schedule must be"):
        left_points([[0.1, 0.5]])
    with pytest.raises(ValueError, match="cannot be stacked"):
        stacked_loss("wake-wake", stack, x, S, noise)
    with pytest.raises(ValueError, match="needs reparameterised"):
        stacked_loss("iwae", stack, x, S, noise)
    with pytest.raises(ValueError, match="points=left_points"):
        stacked_loss("tvo", stack, x, S, noise)
    with pytest.raises(ValueError, match="2 schedules; the stack has 3"):
        stacked_loss("tvo", stack, x, S, noise, left_points(SCHEDULES[:2]))
