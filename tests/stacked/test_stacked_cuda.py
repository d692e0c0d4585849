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
from numerics import ADAM_TERMS, assert_close_fp32, fp32_tolerance, log_w_terms

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _one_step(name, device):
    """A stack's TVO loss, gradients and parameters after one StackedAdam step on ``device``, with the
    CPU's noise (the devices' generators differ), all returned on the CPU."""
    stack, models = stack_of(name)
    stack.to(device)
    opt = StackedAdam(stack)
    x = batches(stack.K).to(device)
    noise = [n.to(device) for n in stack_of(name)[0].draw_noise(
        [torch.Generator().manual_seed(k) for k in range(stack.K)], S, B)]
    out = stacked_loss("tvo", stack, x, S, noise, left_points([[0.0, 0.2, 0.6]] * stack.K, device=device))
    out.loss.sum().backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in stack.params.items()}
    opt.step()
    return out.loss.detach().cpu(), grads, {n: p.detach().cpu() for n, p in stack.params.items()}, models[0]


@needs_cuda
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_cuda_step_matches_cpu(name):
    """Loss and gradients to float32 rounding (other kernels); after the Adam step, the parameters whose
    gradient is well above its rounding level. Adam's first step is ``lr * g / (|g| + eps)``, about
    ``lr * sign(g)``: where ``|g|`` is at rounding level the two devices may step either way by ``lr``."""
    torch.backends.cuda.matmul.allow_tf32 = False
    loss, grads, params, model = _one_step(name, "cpu")
    cuda_loss, cuda_grads, cuda_params, _ = _one_step(name, "cuda")
    terms = log_w_terms(model) + S * B  # a log weight's chain, then the sums over samples and points
    assert_close_fp32(cuda_loss, loss, terms=terms, what="loss")
    stepped = 0
    for n, g in grads.items():
        assert_close_fp32(cuda_grads[n], g, terms=2 * terms, what=f"{n}.grad")
        clear = g.abs() > 100 * fp32_tolerance(2 * terms, g.abs().max().item())  # sign(g) the same on both
        assert_close_fp32(cuda_params[n][clear], params[n][clear], terms=ADAM_TERMS, what=n)
        stepped += int(clear.sum())
    assert stepped > 0.5 * sum(g.numel() for g in grads.values())  # most parameters are compared


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
        # the same as the CPU test (test_stacked_evaluate.py): a log weight's chain, logsumexp, mean
        terms = log_w_terms(model) + 24 + x.shape[0]
        for key in ("log_px", "elbo"):
            assert_close_fp32(got[key], want[key], terms=terms, what=key)
