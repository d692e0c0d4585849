"""StackedAdam is K torch.optim.Adam optimisers: given the same gradients, the same parameters and state
dicts to float32 rounding (elementwise kernels on a stack vs one tensor)."""
from __future__ import annotations

import pytest
import torch

from tvolib.objectives import compute_loss
from tvolib.stacked.objectives import left_points, stacked_loss
from tvolib.stacked.optim import StackedAdam

from helpers_stacked import B, S, SEEDS, batches, generators, stack_of
from numerics import ADAM_TERMS, assert_close_fp32, assert_tree_close

SCHEDULES = [[0.0, 0.1, 0.4], [0.0, 0.2, 0.5], [0.0, 0.3, 0.6]]


def _torch_adams(model, lr=1e-3):
    """The single-run trainer's two optimisers (theta, phi)."""
    return [torch.optim.Adam(list(model.generative_parameters()), lr=lr),
            torch.optim.Adam(list(model.inference_parameters()), lr=lr)]


def _train_stack(stack, opt, xs, seeds, singles=()):
    """A TVO step of the stack per minibatch; each ``(k, model, opts)`` of ``singles`` steps its torch
    Adams on a copy of run k's gradients (identical inputs: Adam's normalised step ``m / sqrt(v)`` turns
    a gradient at rounding level into a step of either sign, so optimisers are compared on one gradient)."""
    gens = generators(seeds)
    points = left_points(SCHEDULES)
    for x in xs:
        stacked_loss("tvo", stack, x, S, stack.draw_noise(gens, S, B), points).loss.sum().backward()
        for k, model, opts in singles:
            for n, p in model.named_parameters():
                p.grad = stack.params[n].grad[k].clone()
            for o in opts:
                o.step()
                o.zero_grad(set_to_none=True)
        opt.step()
        opt.zero_grad()


def _train_single(model, opts, xs, seed, k):
    torch.manual_seed(1000 + seed)
    for x in xs:
        compute_loss("tvo", model, x[k], S, SCHEDULES[k]).loss.backward()
        for o in opts:
            o.step()
            o.zero_grad(set_to_none=True)


def _assert_follows_torch_adam(stack, opt, k, model, opts, steps):
    terms = ADAM_TERMS * steps
    for n, v in model.state_dict().items():
        assert_close_fp32(stack.state_dict(k)[n], v, terms=terms, what=f"run {k} {n}")
    for mine, ref in zip(opt.run_state_dicts(k), opts):
        ref = ref.state_dict()
        assert mine["param_groups"] == ref["param_groups"]
        assert_tree_close(mine["state"], ref["state"], terms=terms, path=f"run {k} Adam state")


@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_three_steps_equal_independent_torch_adams(name):
    stack, models = stack_of(name)
    opt = StackedAdam(stack, lr=1e-3)
    xs = [batches(stack.K, seed=i) for i in range(3)]
    singles = [(k, model, _torch_adams(model)) for k, model in enumerate(models)]
    _train_stack(stack, opt, xs, SEEDS, singles)
    for k, model, opts in singles:
        _assert_follows_torch_adam(stack, opt, k, model, opts, steps=3)


def test_runs_with_different_step_counts_each_follow_torch_adam():
    """A run resumed from a checkpoint at another step keeps its own bias corrections."""
    stack, models = stack_of("vae")
    xs = [batches(stack.K, seed=i) for i in range(4)]
    ahead = _torch_adams(models[1])  # run 1 has already taken two steps alone
    _train_single(models[1], ahead, xs[:2], 7, 1)
    stack.load_state_dict(1, models[1].state_dict())
    opt = StackedAdam(stack)
    opt.load_run_state_dicts(1, [o.state_dict() for o in ahead])
    assert opt.steps == [0, 2, 0]
    seeds = (SEEDS[0], 8, SEEDS[2])
    fresh = _torch_adams(models[0])
    _train_stack(stack, opt, xs[2:], seeds, [(0, models[0], fresh), (1, models[1], ahead)])
    _assert_follows_torch_adam(stack, opt, 0, models[0], fresh, steps=2)
    _assert_follows_torch_adam(stack, opt, 1, models[1], ahead, steps=2)
    assert opt.steps == [2, 4, 2]


def test_changing_run_j_leaves_other_runs_updates_bit_identical():
    """Exact: both stacks have K = 3 and the same shapes, so the same kernels compute runs 0 and 2."""
    results = []
    for flip in (False, True):
        stack, _ = stack_of("sbn")
        opt = StackedAdam(stack)
        xs = [batches(stack.K, seed=i) for i in range(2)]
        if flip:
            for x in xs:
                x[1] = 1 - x[1]
        _train_stack(stack, opt, xs, SEEDS)
        results.append(stack)
    for n in results[0].params:
        a, b = results[0].params[n], results[1].params[n]
        # exact for runs 0 and 2: the same kernels (K = 3, the same shapes) on their unchanged inputs
        assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2]) and not torch.equal(a[1], b[1])


def test_select_keeps_the_chosen_runs_state():
    stack, _ = stack_of("vae")
    opt = StackedAdam(stack)
    _train_stack(stack, opt, [batches(stack.K)], SEEDS)
    sub = stack.select([2, 0])
    sub_opt = opt.select([2, 0], sub)
    assert sub_opt.steps == [1, 1]
    assert torch.equal(sub_opt.exp_avg["encoder.0.weight"][0], opt.exp_avg["encoder.0.weight"][2])  # a copy


def test_bad_arguments_are_named():
    stack, _ = stack_of("vae")
    with pytest.raises(ValueError, match="lr must be"):
        StackedAdam(stack, lr=0.0)
    with pytest.raises(ValueError, match="two Adam state dicts"):
        StackedAdam(stack).load_run_state_dicts(0, [{}])


def test_a_saved_adam_state_of_the_wrong_shape_is_named():
    """A checkpoint's moments must have the parameter's shape (not a copy error deep inside torch)."""
    stack, models = stack_of("vae")
    adams = _torch_adams(models[0])
    _train_single(models[0], adams, [batches(stack.K)], SEEDS[0], 0)
    states = [o.state_dict() for o in adams]
    name = stack.generative_names[0]
    states[0]["state"][0]["exp_avg"] = states[0]["state"][0]["exp_avg"].reshape(-1)[:3].clone()
    with pytest.raises(ValueError, match=rf"parameter {name}: 'exp_avg' has shape \(3,\), the parameter \("):
        StackedAdam(stack).load_run_state_dicts(0, states)
