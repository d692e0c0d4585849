"""Stacked test evaluation equals the single-run evaluation of each run, to float32 rounding."""
from __future__ import annotations

import pytest
import torch

from tvolib.training.evaluate import evaluate
from tvolib.stacked.evaluate import evaluate_stack

from helpers_stacked import SEEDS, stack_of
from numerics import assert_close_fp32, log_w_terms

EVAL_SEEDS = [1_000_003 * s + 7 for s in SEEDS]  # the trainer's seed * 1_000_003 + epoch


def _test_set(n: int = 32, seed: int = 5) -> torch.Tensor:
    return torch.rand(n, 784, generator=torch.Generator().manual_seed(seed)).round()


def _assert_runs_equal_single(models, results, x, S, **kw):
    """Run k's numbers are the single evaluation's to float32 rounding (batched kernels, other groups)."""
    for k, (model, got) in enumerate(zip(models, results)):
        xk = x if x.ndim == 2 else x[k]
        want = evaluate(model, xk, seed=EVAL_SEEDS[k], per_point=True, S=S, **kw)
        assert (got["S"], got["n_points"]) == (want["S"], want["n_points"])
        # a log weight's chain, then logsumexp or mean over S samples, then the mean over the points;
        # the KL is a difference of two such log-likelihoods: their magnitude is its scale
        terms, scale = log_w_terms(model) + S + xk.shape[0], abs(want["elbo"])
        for key in ("log_px", "elbo", "kl"):
            assert_close_fp32(got[key], want[key], terms=terms, scale=scale, what=f"run {k} {key}")
        for key in ("log_px_points", "elbo_points"):
            assert_close_fp32(got[key], want[key], terms=terms, what=f"run {k} {key}")


@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_each_run_equals_the_single_evaluation(name):
    stack, models = stack_of(name)
    x = _test_set()
    kw = dict(S=24, batch_size=16, sample_chunk=8)
    results = evaluate_stack(stack, x, seeds=EVAL_SEEDS, per_point=True, **kw)
    _assert_runs_equal_single(models, results, x, **kw)
    for a, b in zip(evaluate_stack(stack, x, seeds=EVAL_SEEDS, per_point=True, **kw), results):
        # exact: a rerun runs the same kernels on the same inputs
        assert all(torch.equal(a[key], b[key]) if torch.is_tensor(a[key]) else a[key] == b[key] for key in b)


def test_run_groups_and_per_run_test_sets_change_nothing():
    """Memory-bounded groups of 1 or 2 runs give the numbers of one group (to float32 rounding: a group's
    batched matmuls have another shape); each run may have its own x."""
    stack, models = stack_of("vae")
    x = torch.stack([_test_set(seed=s) for s in SEEDS])  # (K, N, D)
    kw = dict(S=16, batch_size=16, sample_chunk=8)
    per_elem = 8 * 16 * 784
    for max_elements in (1, 2 * per_elem, 10 * per_elem):
        results = evaluate_stack(stack, x, seeds=EVAL_SEEDS, per_point=True, max_elements=max_elements, **kw)
        _assert_runs_equal_single(models, results, x, **kw)


def test_default_chunks_and_the_global_rng_untouched():
    stack, models = stack_of("vae", seeds=(4, 5))
    x = _test_set(16)
    state = torch.get_rng_state()
    results = evaluate_stack(stack, x, seeds=EVAL_SEEDS[:2], S=32, per_point=True)
    assert torch.equal(torch.get_rng_state(), state)  # a state, not a computed number
    _assert_runs_equal_single(models, results, x, S=32)


def test_kl_is_nonnegative_per_point_and_log_px_bounds_the_elbo():
    stack, _ = stack_of("vae")
    for out in evaluate_stack(stack, _test_set(16), seeds=EVAL_SEEDS, S=16, per_point=True):
        gap = out["log_px_points"] - out["elbo_points"]
        assert bool((gap >= 0).all()) and out["kl"] >= 0
        assert out["kl"] == out["log_px"] - out["elbo"]  # exact: the KL is computed as this difference


def test_bad_arguments_are_named():
    stack, _ = stack_of("vae")
    x = _test_set(8)
    with pytest.raises(ValueError, match="seeds must hold one int per run"):
        evaluate_stack(stack, x, seeds=[1, 2], S=4)
    with pytest.raises(ValueError, match="x_test must be"):
        evaluate_stack(stack, x[:, :100], seeds=EVAL_SEEDS, S=4)
    with pytest.raises(ValueError, match="x_test must be"):
        evaluate_stack(stack, torch.stack([x, x]), seeds=EVAL_SEEDS, S=4)
    with pytest.raises(ValueError, match="S must be an int"):
        evaluate_stack(stack, x, seeds=EVAL_SEEDS, S=0)
    with pytest.raises(ValueError, match="sample_chunk must be"):
        evaluate_stack(stack, x, seeds=EVAL_SEEDS, S=4, sample_chunk=0)
