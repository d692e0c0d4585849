"""The runner's ``compile`` switch (``--compile``) reaches the trainers: ``train_many`` for stacks,
``train`` for image runs alone; nothing else changes (not part of the digest)."""
from __future__ import annotations

import pytest

from tvolib.__main__ import build_parser
from tvolib.runs import run as runner
from tvolib.training.images import RunConfig

CONFIGS = [RunConfig(n_train=64, n_test=16, batch_size=32, S=4, eval_S=8, epochs=1, d=3, seed=s) for s in (1, 2)]


class _Stop(Exception):
    pass


@pytest.mark.parametrize("compile", [False, True])
def test_run_stack_and_run_one_pass_compile_on(monkeypatch, tmp_path, compile):
    seen = []

    def fake(*args, **kwargs):
        seen.append(kwargs.get("compile", False))
        raise _Stop

    monkeypatch.setattr(runner, "train_many", fake)
    with pytest.raises(_Stop):
        runner.run_stack(CONFIGS, results_root=tmp_path / "stack", device="cpu", compile=compile)
    with pytest.raises(_Stop):
        runner.run_one(CONFIGS[0], results_root=tmp_path / "one", device="cpu", train_fn=fake, compile=compile)
    assert seen == [compile, compile]


def test_cli_compile_flag():
    parser = build_parser()
    assert parser.parse_args(["run", "fig4", "--compile"]).compile is True
    assert parser.parse_args(["run", "fig4"]).compile is False
