"""On a CUDA device the stack computes what it computes on the CPU, to float32 rounding.

These tests need a GPU (benchmarks/gpu_check.sh runs them with ``-k cuda``); on a machine
without one they are skipped, and the CPU tests of this folder cover the arithmetic.
"""
from __future__ import annotations

import pytest
import torch

from tvolib.training.evaluate import evaluate
from tvolib.stacked.evaluate import evaluate_stack
from tvolib.stacked.objectives import left_points, stacked_loss
from tvolib.stacked.optim import StackedAdam

from helpers_stacked import B, S, batches, stack_of

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_cuda_step_matches_cpu(name):
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for device in ("cpu", "cuda"):
        stack, _ = stack_of(name)
        stack.to(device)
        opt = StackedAdam(stack)
        x = batches(stack.K).to(device)
        # the same noise on both devices (generators differ between devices)
        noise = [n.to(device) for n in stack_of(name)[0].draw_noise(
            [torch.Generator().manual_seed(k) for k in range(stack.K)], S, B)]
        out = stacked_loss("tvo", stack, x, S, noise, left_points([[0.0, 0.2, 0.6]] * stack.K, device=device))
        out.loss.sum().backward()
        opt.step()
        results.append((out.loss.detach().cpu(), {n: p.detach().cpu() for n, p in stack.params.items()}))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-4, atol=1e-3)
    for n in results[0][1]:
        torch.testing.assert_close(results[1][1][n], results[0][1][n], rtol=1e-4, atol=1e-5)


@needs_cuda
def test_cuda_stacked_evaluation_matches_the_single_evaluation():
    """Same CUDA generator streams as ``evaluate(seed=...)``: equal to float32/float64 rounding."""
    torch.backends.cuda.matmul.allow_tf32 = False
    stack, models = stack_of("vae")
    stack.to("cuda")
    x = batches(1)[0]
    seeds = [11, 12, 13]
    results = evaluate_stack(stack, x, seeds=seeds, S=24, batch_size=16, sample_chunk=8)
    for model, seed, got in zip(models, seeds, results):
        want = evaluate(model.to("cuda"), x, S=24, batch_size=16, sample_chunk=8, seed=seed)
        for key in ("log_px", "elbo"):
            assert got[key] == pytest.approx(want[key], rel=1e-5), key
