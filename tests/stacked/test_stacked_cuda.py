"""On a CUDA device the stack computes what it computes on the CPU, to float32 rounding.

These tests need a GPU (benchmarks/gpu_check.sh runs them with ``-k cuda``); on a machine
without one they are skipped, and the CPU tests of this folder cover the arithmetic.
"""
from __future__ import annotations

import pytest
import torch

from tvolib.bandit.model import Hyperparameters
from tvolib.bandit.stacked import StackedBanditGP, pad_observations
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
def test_cuda_stacked_gp_matches_cpu():
    g = torch.Generator().manual_seed(0)
    sets = [(torch.rand(n, 4, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64))
            for n in (5, 40)]
    x = torch.rand(2, 7, 4, generator=g, dtype=torch.float64)
    out = []
    for device in ("cpu", "cuda"):
        gp = StackedBanditGP(3, 2, hyperparameters=[Hyperparameters()] * 2, device=device)
        data = pad_observations(sets, device=device)
        mean, var = gp.mean_and_variance(data, x.to(device))
        out.append((mean.cpu(), var.cpu(), gp.negative_log_posterior(data).cpu()))
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
