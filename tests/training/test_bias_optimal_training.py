"""The bias-optimal schedule in the trainer: built by name from a config, and a killed and resumed run
is bit-identical to an uninterrupted one (the same kernels on the same inputs)."""
from __future__ import annotations

import pytest
import torch

from tvolib import checkpoint as ckpt
from tvolib.bias_optimal import BiasOptimalSchedule
from tvolib.training.images import RunConfig, build_schedule, train

TINY = RunConfig(n_train=200, n_test=50, batch_size=100, epochs=4, S=4, eval_S=8, d=3, schedule="bias_optimal")


def _equal(a, b) -> bool:
    """Nested states equal, tensors bitwise, wall-clock fields (``*seconds``) ignored."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a if not str(k).endswith("seconds"))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def _strip(rows):
    return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in rows]


def test_the_config_builds_the_schedule_with_its_options():
    schedule = build_schedule(TINY.replace(schedule_options={"update_every": 3, "initial": "linear"}).validate())
    assert isinstance(schedule, BiasOptimalSchedule) and (schedule.update_every, schedule.initial, schedule.d) == (
        3, "linear", 3)
    with pytest.raises(ValueError, match="unknown names \\['window'\\]"):
        TINY.replace(schedule_options={"window": 3}).validate()
    with pytest.raises(ValueError, match="d"):
        TINY.replace(d=1).validate()  # an adaptive schedule needs a point beside 0


def test_killed_and_resumed_bias_optimal_run_is_bit_identical(tmp_path, data_root):
    def fit(run_dir, **kwargs):
        return train(TINY, run_dir, data_root=data_root, device="cpu", progress=False, **kwargs)

    straight = fit(tmp_path / "straight", checkpoint_every=1)
    first = fit(tmp_path / "killed", checkpoint_every=3, stop_after=3)
    assert len(first.history) == 4 and not first.final["completed"]
    resumed = fit(tmp_path / "killed", checkpoint_every=3)
    assert _strip(resumed.history) == _strip(straight.history)
    assert resumed.schedule_history == straight.schedule_history
    assert [r["epoch"] for r in straight.schedule_history] == [1, 2, 3, 4]
    c1, c2 = (ckpt.load(tmp_path / name / "checkpoint.pt") for name in ("straight", "killed"))
    for key in ("optimizers", "rng", "schedule"):
        assert _equal(c1[key], c2[key]), key
    assert _equal(ckpt.load(tmp_path / "straight" / "model.pt"), ckpt.load(tmp_path / "killed" / "model.pt"))
    assert len({tuple(row["betas"]) for row in straight.history[1:]}) > 1  # the schedule moved


def test_the_cost_model_prices_an_update_every_epoch():
    """tvolib.runs.cost: a bias-optimal run costs more than a log run, less when it updates less often."""
    from tvolib.paper import sweeps
    from tvolib.runs.cost import estimate_seconds

    base = sweeps.tvo_config("quick", model="vae", dataset="mnist", schedule="log", d=5, S=10, seed=0)
    every = base.replace(schedule="bias_optimal")
    assert estimate_seconds(every) > estimate_seconds(every.replace(schedule_options={"update_every": 6})) \
        > estimate_seconds(base)
