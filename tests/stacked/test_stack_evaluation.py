"""The runner's stacked evaluation: one batched IWAE pass per stack on CUDA, smaller groups on OOM."""
from __future__ import annotations

import pytest
import torch

from tvolib.stacked import evaluate as stacked_evaluate
from tvolib.stacked.evaluate import DEFAULT_MAX_ELEMENTS, EVAL_BYTES_PER_ELEMENT, EVAL_MEMORY_SHARE, max_elements_for
from tvolib.training import stack_runs
from tvolib.training.images import RunConfig
from tvolib.training.stack_runs import Stack

TINY = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=1, d=3)


def test_max_elements_from_free_device_memory(monkeypatch):
    assert max_elements_for("cpu") == DEFAULT_MAX_ELEMENTS
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 10**9, 96 * 10**9))
    assert max_elements_for(torch.device("cuda")) == int(EVAL_MEMORY_SHARE * 80 * 10**9 / EVAL_BYTES_PER_ELEMENT)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10**6, 96 * 10**9))
    assert max_elements_for(torch.device("cuda")) == DEFAULT_MAX_ELEMENTS


def _evaluated(stack):
    stack.evaluate(stack.runs, [0] * len(stack.runs))
    return [run.results.pop(("evaluate", 0)) for run in stack.runs]


@pytest.mark.usefixtures("one_torch_thread")
def test_stack_evaluation_retries_in_smaller_groups_when_out_of_memory(monkeypatch):
    configs = [TINY.replace(seed=s) for s in (1, 2, 3)]
    stack = Stack(configs, ["a", "b", "c"], torch.device("cpu"), None)
    expected = _evaluated(stack)
    tried = []
    real = stacked_evaluate.evaluate_stack

    def short_of_memory(*args, max_elements, **kwargs):
        tried.append(max_elements)
        if max_elements > 4 * DEFAULT_MAX_ELEMENTS:
            raise torch.OutOfMemoryError("fake")
        return real(*args, max_elements=max_elements, **kwargs)

    monkeypatch.setattr(stack_runs, "max_elements_for", lambda device: 64 * DEFAULT_MAX_ELEMENTS)
    monkeypatch.setattr(stack_runs, "evaluate_stack", short_of_memory)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    assert _evaluated(stack) == expected  # started again from the seeds: the same numbers
    assert tried == [64 * DEFAULT_MAX_ELEMENTS, 16 * DEFAULT_MAX_ELEMENTS, 4 * DEFAULT_MAX_ELEMENTS]
    monkeypatch.setattr(stack_runs, "max_elements_for", lambda device: DEFAULT_MAX_ELEMENTS)
    monkeypatch.setattr(stack_runs, "evaluate_stack", lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError()))
    with pytest.raises(torch.OutOfMemoryError):
        stack.evaluate(stack.runs, [0] * 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_stack_evaluates_in_one_pass(monkeypatch):
    configs = [TINY.replace(seed=s, eval_S=1000) for s in range(1, 9)]
    stack = Stack(configs, [str(s) for s in range(8)], torch.device("cuda"), None)
    groups = []
    real = stacked_evaluate._evaluate_group
    monkeypatch.setattr(stacked_evaluate, "_evaluate_group", lambda sub, *a: groups.append(sub.K) or real(sub, *a))
    _evaluated(stack)
    assert groups == [8]
