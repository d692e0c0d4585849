"""StackedModel: each run equals the single model with the same parameters and noise (to float32 rounding:
other kernels); runs are independent (bitwise: the same kernels)."""
from __future__ import annotations

import pytest
import torch

from tvolib.stacked import StackedModel

from helpers_stacked import B, S, SEEDS, batches, generators, stack_of
from numerics import assert_close_fp32, log_w_terms

CASES = [("vae", True), ("vae", False), ("sbn", False)]


def _grads(stack):
    return {n: p.grad.clone() for n, p in stack.params.items()}


def _stacked_pass(stack, x, seeds, reparam, s=S):
    noise = stack.draw_noise(generators(seeds), s, x.shape[1])
    log_p, log_q = stack.log_joint_and_q(x, s, reparam, noise)
    (log_p - 2 * log_q).sum().backward()
    return log_p.detach(), log_q.detach(), _grads(stack)


@pytest.mark.parametrize("name,reparam,batch,samples", [
    *[(name, reparam, B, S) for name, reparam in CASES],
    ("sbn", False, 50, 10),  # per-run sizes that are not multiples of the CPU vector width
])
def test_run_k_is_the_single_model_to_float32_rounding(name, reparam, batch, samples):
    """Batched matmuls over K runs vs the single model's ``nn.Linear``: other kernels, other
    reduction orders (CPU instruction set, threads, vector remainder loops), so equal to rounding."""
    stack, models = stack_of(name)
    x = batches(stack.K, batch=batch)
    log_p, log_q, grads = _stacked_pass(stack, x, SEEDS, reparam, s=samples)
    terms = log_w_terms(models[0])
    for k, (model, seed) in enumerate(zip(models, SEEDS)):
        torch.manual_seed(1000 + seed)  # the global RNG in the state of run k's generator
        p, q = model.log_joint_and_q(x[k], samples, reparam)
        (p - 2 * q).sum().backward()
        assert_close_fp32(log_p[k], p, terms=terms, what=f"run {k} log p")
        assert_close_fp32(log_q[k], q, terms=terms, what=f"run {k} log q")
        for n, param in model.named_parameters():  # backward through the chain, then a sum over B x S
            assert_close_fp32(grads[n][k], param.grad, terms=2 * terms + batch * samples, what=f"run {k} {n}.grad")


@pytest.mark.parametrize("name,reparam", CASES)
@pytest.mark.parametrize("j", [0, 2])
def test_changing_run_j_leaves_the_other_runs_bit_identical(name, reparam, j):
    """Exact: both stacks have K = 3 and the same shapes, so the same kernels compute run k."""
    stack, _ = stack_of(name)
    x = batches(stack.K)
    base = _stacked_pass(stack, x, SEEDS, reparam)
    other, _ = stack_of(name)
    x2 = x.clone()
    x2[j] = 1 - x2[j]
    with torch.no_grad():
        for p in other.params.values():
            p[j].mul_(1.5).add_(0.01)
    seeds2 = list(SEEDS)
    seeds2[j] = 99  # run j's noise changes too
    changed = _stacked_pass(other, x2, seeds2, reparam)
    for k in range(stack.K):
        if k == j:
            assert not torch.equal(base[0][k], changed[0][k])
            continue
        # exact: the same kernels (K = 3, the same shapes) on run k's unchanged inputs
        assert torch.equal(base[0][k], changed[0][k]) and torch.equal(base[1][k], changed[1][k])
        assert all(torch.equal(base[2][n][k], changed[2][n][k]) for n in base[2])


@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_runs_go_out_and_in_in_the_single_model_format(name):
    """Exact: tensors are copied, not computed."""
    stack, models = stack_of(name)
    for k, model in enumerate(models):
        out = stack.state_dict(k)
        assert list(out) == list(model.state_dict())
        assert all(torch.equal(out[n], v) for n, v in model.state_dict().items())  # exact: copies
        assert all(torch.equal(a, b) for a, b in zip(stack.unstack(k).state_dict().values(), out.values()))  # copies
    stack.load_state_dict(0, models[2].state_dict())
    assert all(torch.equal(a, b) for a, b in zip(stack.state_dict(0).values(), stack.state_dict(2).values()))  # copies
    picked = stack.select([2, 1])
    # exact: select copies the chosen runs' tensors
    assert picked.K == 2 and torch.equal(picked.params["decoder.0.weight"][1], stack.params["decoder.0.weight"][1])
    assert picked.params["decoder.0.weight"].is_leaf and picked.params["decoder.0.weight"].requires_grad


def test_parameter_orders_follow_the_single_models_optimisers():
    stack, models = stack_of("sbn")
    names = {id(p): n for n, p in models[0].named_parameters()}
    assert stack.generative_names == [names[id(p)] for p in models[0].generative_parameters()]
    assert stack.generative_names[0] == "prior_logits"
    assert stack.inference_names == [names[id(p)] for p in models[0].inference_parameters()]


def test_bad_inputs_are_named():
    stack, models = stack_of("vae")
    with pytest.raises(ValueError, match="at least one"):
        StackedModel([])
    sbn = stack_of("sbn")[1][0]
    with pytest.raises(ValueError, match="models\\[1\\]"):
        StackedModel([models[0], sbn])
    noise = stack.draw_noise(generators(SEEDS), S, B)
    with pytest.raises(ValueError, match="x must be a tensor of shape \\(K=3"):
        stack.log_joint_and_q(batches(2), S, True, noise)
    with pytest.raises(ValueError, match="noise must be tensors of shapes"):
        stack.log_joint_and_q(batches(3), S + 1, True, noise)
    with pytest.raises(ValueError, match="one torch.Generator per run"):
        stack.draw_noise(generators(SEEDS[:2]), S, B)
    with pytest.raises(ValueError, match="run index"):
        stack.state_dict(3)
    sbn_stack = stack_of("sbn")[0]
    with pytest.raises(ValueError, match="discrete latents"):
        sbn_stack.log_joint_and_q(batches(3), S, True, sbn_stack.draw_noise(generators(SEEDS), S, B))
