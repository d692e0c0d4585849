"""``train_many(..., compile=True)``: the stacked forward pass and loss compiled by ``torch.compile``.

Compiled kernels round differently from eager ones, so the comparison is to float32 rounding (the
Monte-Carlo noise and the data are the same inputs), not bit for bit. One small stack on the CPU
(Inductor compiles C++ there; tens of seconds with a cold cache).
"""
from __future__ import annotations

import pytest
import torch

from tvolib.stacked import epoch as stacked_epoch
from tvolib.training.images import RunConfig
from tvolib.training.many import train_many

SMALL = RunConfig(n_train=96, n_test=32, batch_size=32, S=8, eval_S=16, epochs=2, d=3,
                  model_options={"hidden": (16,), "latent_dim": 4})


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_compiled_stack_trains_as_the_eager_stack(monkeypatch):
    compiled = []
    real = stacked_epoch.compiled_loss
    monkeypatch.setattr("tvolib.training.stack_runs.compiled_loss", lambda: compiled.append(1) or real())
    configs = [SMALL.replace(seed=s, schedule=schedule) for s, schedule in ((1, "log"), (2, "linear"))]
    eager = train_many(configs, [None, None], device="cpu", progress=False)
    fused = train_many(configs, [None, None], device="cpu", progress=False, compile=True)
    assert compiled == [1]  # one stack, compiled once
    for a, b in zip(eager, fused):
        assert [row["epoch"] for row in a.history] == [row["epoch"] for row in b.history] == [0, 1, 2]
        assert a.history[0]["test_log_px"] == b.history[0]["test_log_px"]  # the same initial model, eager evaluation
        for row_a, row_b in zip(a.history[1:], b.history[1:]):
            # sums of 784 pixel terms and S samples in float32: relative differences of a few 1e-7 per
            # minibatch, carried through two epochs of Adam (updates of lr = 1e-3 per parameter)
            for key in ("loss", "train_elbo", "train_iwae", "train_evidence", "test_log_px", "test_elbo"):
                if key in row_a:
                    assert row_b[key] == pytest.approx(row_a[key], rel=1e-5), key
        assert b.final["test_log_px"] == pytest.approx(a.final["test_log_px"], rel=1e-5)


def test_compiled_loss_is_static_and_wraps_stacked_loss(monkeypatch):
    seen = {}
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: seen.update(fn=fn, **kwargs) or fn)
    stacked_epoch.compiled_loss()
    assert seen == {"fn": stacked_epoch.stacked_loss, "dynamic": False}
