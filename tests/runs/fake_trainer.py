"""A picklable stand-in for the trainers, with their contract and their resume behaviour.

``fake_train(config, run_dir, *, data_root, device, progress)`` writes a JSON "checkpoint" every
epoch, resumes from it, writes a real (tiny) ``model.pt`` at the end, logs each call's pid to
``fake_calls.log``, and raises at ``digest@epoch`` pairs listed in ``$TVOLIB_FAKE_FAIL``
(comma-separated), so runner tests take milliseconds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tvolib import runs
from tvolib.training import RunConfig
from tvolib.training.run_folder import RunFolder

FAIL_ENV = "TVOLIB_FAKE_FAIL"


def fake_train(config, run_dir, *, data_root=None, device=None, progress=None):
    run_dir = Path(run_dir)
    with open(run_dir / "fake_calls.log", "a") as f:
        f.write(f"{os.getpid()}\n")
    ckpt = run_dir / "checkpoint.pt"
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"epoch": 0, "history": [{"epoch": 0, "test_log_px": -200.0}]}
    fail = {tuple(x.split("@")) for x in os.environ.get(FAIL_ENV, "").split(",") if x}
    for epoch in range(state["epoch"] + 1, config.epochs + 1):
        if (config.digest(), str(epoch)) in fail:
            raise RuntimeError(f"fake failure at epoch {epoch}")
        state["history"].append({"epoch": epoch, "loss": 1.0 / epoch, "betas": [0.0, 0.1 * config.d / 10],
                                 "resumed": len(state["history"]) < epoch})
        state["epoch"] = epoch
        ckpt.write_text(json.dumps(state))
    RunFolder(run_dir).save_model({"weights": torch.zeros(1)}, config.digest())
    return SimpleNamespace(
        config=config,
        history=state["history"],
        schedule_history=[{"round": 0, "epoch": 1, "arm": [0.0, 0.3], "reward": 0.5, "hyper": {"omega": 0.1}}],
        final={"test_log_px": -100.0 - config.d, "test_kl": 1.5, "epochs": config.epochs, "completed": True},
    )


def cfg(**changes: Any) -> RunConfig:
    """A small VAE config (never trained for real by these tests)."""
    base = dict(model="vae", dataset="mnist", n_train=100, n_test=50, schedule="log", d=3, S=4, epochs=3,
                batch_size=50, seed=0, eval_every=0, eval_S=10)
    base.update(changes)
    return RunConfig(**base)


def calls(config, root) -> int:
    """How many times the fake trainer ran ``config``."""
    log = runs.run_dir(config, root) / "fake_calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def run(configs, root, **kw):
    """``run_configs`` with the fake trainer, in process, quietly."""
    kw.setdefault("max_workers", 1)
    kw.setdefault("progress", False)
    kw.setdefault("train_fn", fake_train)
    return runs.run_configs(configs, results_root=root, **kw)


@pytest.fixture()
def root(tmp_path, monkeypatch):
    """An empty results root, with no executor/worker/failure settings from the environment."""
    for var in (FAIL_ENV, "TVOLIB_EXECUTOR", "TVOLIB_MAX_WORKERS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "results"


__all__ = ["FAIL_ENV", "fake_train", "cfg", "calls", "run", "root"]
