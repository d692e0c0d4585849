"""No host synchronisation in the single-run image trainer's minibatch loop.

On CUDA (``-k cuda``) the loop runs under ``torch.cuda.set_sync_debug_mode("error")``, which also
catches copies from pageable host memory. On the CPU, what changed for it is checked: the schedule
is validated and moved to the device once, not once per minibatch (``torch.optim.Adam`` reads its
step counter on the host, so forbidding every read-back, as the stacked loop's test does with its
own optimiser, is not possible here).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import tvolib.objectives as objectives
from tvolib.training.images import ImageTask, RunConfig

#: Two minibatches of 100 MNIST images, the log schedule with d = 3.
CONFIG = RunConfig(n_train=200, n_test=50, batch_size=100, epochs=1, S=4, eval_S=8, d=3)


def _task(data_root, device: str, **changes) -> tuple[ImageTask, torch.Tensor, torch.Tensor, list[float]]:
    task = ImageTask(dataclasses.replace(CONFIG, **changes).validate(), torch.device(device), data_root)
    x = task.data.train_epoch(task.generators["data"])
    perm = torch.randperm(x.shape[0], generator=task.generators["shuffle"]).to(task.device)
    return task, x, perm, [float(v) for v in task.schedule.current().tolist()]


def test_the_schedule_is_moved_to_the_device_once(monkeypatch, data_root):
    calls = []
    original = objectives.riemann_weights
    monkeypatch.setattr(objectives, "riemann_weights", lambda *a, **k: calls.append(a) or original(*a, **k))
    objectives._left_points_on.cache_clear()
    task, x, perm, betas = _task(data_root, "cpu")
    for _ in range(2):
        outputs = task.minibatch_steps(x, perm, betas)
    assert len(outputs) == 2 and len(calls) == 1  # four minibatches, one validation
    assert torch.isfinite(task.loss_log).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
@pytest.mark.parametrize("model, dataset", [("vae", "mnist"), ("sbn", "binarized_mnist")])
def test_cuda_single_run_minibatch_loop_has_no_host_synchronisation(data_root, model, dataset, precision):
    task, x, perm, betas = _task(data_root, "cuda", model=model, dataset=dataset, precision=precision)
    task.minibatch_steps(x, perm, betas)  # warm-up: CUDA libraries, and the schedule moved once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outputs = task.minibatch_steps(x, perm, betas)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert len(outputs) == 2 and torch.isfinite(task.loss_log).all()
