"""The bias-optimal schedule in a stack: a run trained by train_many is the run ``train`` trains, to
float32 rounding on the CPU, its schedule re-estimated from its own log weights every epoch."""
from __future__ import annotations

from tvolib.checkpoint import load
from tvolib.training.images import RunConfig, train
from tvolib.training.many import stack_key, train_many

from numerics import assert_runs_close, run_terms

BASE = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=4, d=3, eval_every=2)
CONFIGS = [BASE.replace(seed=1, schedule="bias_optimal"), BASE.replace(seed=2, schedule="moments",
                                                                        schedule_options={"update_every": 2}),
           BASE.replace(seed=3, schedule="bias_optimal", schedule_options={"update_every": 2, "initial": "linear"})]


def test_bias_optimal_runs_stack_and_equal_the_single_run(tmp_path):
    assert len({stack_key(c) for c in CONFIGS}) == 1  # one stack with the moments run
    dirs = [tmp_path / "stack" / str(i) for i in range(len(CONFIGS))]
    stacked = train_many(CONFIGS, dirs, device="cpu", progress=False)
    for i, config in enumerate(CONFIGS):
        ref = train(config, tmp_path / "single" / str(i), device="cpu", progress=False)
        terms = run_terms(config)
        for name in ("history", "schedule_history", "final"):
            assert_runs_close(getattr(stacked[i], name), getattr(ref, name), terms=terms, path=name)
        assert_runs_close(load(dirs[i] / "model.pt"), load(tmp_path / "single" / str(i) / "model.pt"), terms=terms,
                          path="model.pt")
    assert [r["epoch"] for r in stacked[0].schedule_history] == [1, 2, 3, 4]  # every epoch (log_weights)
    assert [r["epoch"] for r in stacked[2].schedule_history] == [2, 4]
    trained = [tuple(row["betas"]) for row in stacked[0].history[1:]]
    assert trained[0] != trained[1]  # epoch 2 trains the points estimated after epoch 1
    assert list(trained[1]) == stacked[0].schedule_history[0]["betas"]
