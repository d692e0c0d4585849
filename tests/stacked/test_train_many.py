"""train_many: a run trained in a stack is the run ``train`` trains, to float32 rounding on the CPU.

Small configs (batch 64, S = 8, 32 test points). A stack's batched kernels are not the single run's
(nor those of a stack of another size), so histories, schedule records, checkpoints and models of
the two trainers agree to float32 rounding (tests/README.md); what runs the same kernels on the same
inputs (a stack of the same shape, a kill-and-resume of the whole stack, a run both trainers train
alone) agrees bit for bit.
"""
from __future__ import annotations

import math
import statistics

import pytest
import torch

from tvolib.checkpoint import atomic_save, load
from tvolib.training.images import RunConfig, train
from tvolib.training.loop import TrainingDivergedError
from tvolib.training.many import TrainManyError, stack_key, train_many

from numerics import assert_runs_close, run_terms

BASE = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=4, d=3, eval_every=2)
WINDOWS = {"window": 1, "window_growth": 0}  # a bandit round every epoch: GP rounds within 4 epochs
CONFIGS = [
    BASE.replace(seed=1),
    BASE.replace(seed=2, schedule="moments", schedule_options={"update_every": 2}),
    BASE.replace(seed=3, schedule="gp_bandit", schedule_options=WINDOWS),
    BASE.replace(seed=4, schedule="random", schedule_options=WINDOWS),
    BASE.replace(seed=5, model="sbn"),  # a second stack
    BASE.replace(seed=6, objective="iwae"),  # a third
]

def _train_many(configs, dirs, **kwargs):
    return train_many(configs, dirs, device="cpu", progress=False, **kwargs)


def _same(a, b, path="") -> None:
    """Assert ``a == b`` exactly (tensors bitwise), ignoring timings (keys ending in ``seconds``)."""
    if isinstance(a, dict):
        keys = [k for k in a if not str(k).endswith("seconds")]
        assert keys == [k for k in b if not str(k).endswith("seconds")], path
        for k in keys:
            _same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif torch.is_tensor(a):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    else:
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), f"{path}: {a!r} != {b!r}"


def _same_run(result, folder, ref_result, ref_folder) -> None:
    """Exact: for runs computed by the same kernels on the same inputs."""
    _same(result.history, ref_result.history, "history")
    _same(result.schedule_history, ref_result.schedule_history, "schedule_history")
    _same(result.final, ref_result.final, "final")
    _same(load(folder / "model.pt"), load(ref_folder / "model.pt"), "model.pt")
    mine, ref = load(folder / "checkpoint.pt"), load(ref_folder / "checkpoint.pt")
    _same({k: v for k, v in mine.items() if k != "timers"}, {k: v for k, v in ref.items() if k != "timers"},
          "checkpoint")


def _close_run(result, folder, ref_result, ref_folder) -> None:
    """To float32 rounding: for a run computed by other kernels (the other trainer, another stack size)."""
    terms = run_terms(result.config)
    for name in ("history", "schedule_history", "final"):
        assert_runs_close(getattr(result, name), getattr(ref_result, name), terms=terms, path=name)
    if folder is not None:
        assert_runs_close(load(folder / "model.pt"), load(ref_folder / "model.pt"), terms=terms, path="model.pt")
        mine, ref = ({k: v for k, v in load(f / "checkpoint.pt").items() if k != "timers"}
                     for f in (folder, ref_folder))
        assert_runs_close(mine, ref, terms=terms, path="checkpoint")


@pytest.fixture(scope="module")
def stacked(tmp_path_factory):
    """CONFIGS trained by one train_many call (three stacks): (results, folders)."""
    root = tmp_path_factory.mktemp("stacked")
    dirs = [root / str(i) for i in range(len(CONFIGS))]
    return _train_many(CONFIGS, dirs), dirs


def test_stack_keys_group_what_may_share_a_stack():
    keys = [stack_key(c) for c in CONFIGS]
    assert len(set(keys[:4])) == 1 and len(set(keys)) == 3
    assert stack_key(BASE.replace(S=16)) != keys[0] and stack_key(BASE.replace(d=4)) != keys[0]
    assert stack_key(BASE.replace(objective="elbo", d=4)) == stack_key(BASE.replace(objective="elbo", d=7))
    assert stack_key(BASE.replace(objective="wake-wake")) is None


def test_a_run_in_a_stack_is_the_single_run_to_float32_rounding(stacked, tmp_path):
    """(b), strong form: history, bandit arms, final metrics, checkpoint and model equal ``train``'s."""
    results, dirs = stacked
    for i, config in enumerate(CONFIGS):
        ref = train(config, tmp_path / str(i), device="cpu", progress=False)
        _close_run(results[i], dirs[i], ref, tmp_path / str(i))
    assert [r["epoch"] for r in results[1].schedule_history] == [2, 4]  # moments re-estimated (log_weights)
    assert len(results[2].schedule_history) == 4 and results[2].history[-1]["betas"] != results[2].history[1]["betas"]


def test_a_run_alone_equals_the_run_in_a_stack(stacked, tmp_path):
    """(b): stacks of one run (``max_stack=1``) give the stack's numbers (to rounding: K = 1 vs 4 are
    other matmul shapes, whose kernels may split the work differently)."""
    results, dirs = stacked
    alone = _train_many(CONFIGS[:4], [tmp_path / str(i) for i in range(4)], max_stack=1)
    for i in range(4):
        _close_run(alone[i], tmp_path / str(i), results[i], dirs[i])


def test_changing_one_run_leaves_the_others_bit_identical(stacked, tmp_path):
    """(a): another seed for run 1 (initialisation, data order, binarisation, noise) changes run 1 only.
    Exact: a stack of the same shape runs the same kernels on runs 0, 2 and 3."""
    results, dirs = stacked
    configs = [CONFIGS[0], CONFIGS[1].replace(seed=7), *CONFIGS[2:4]]
    changed = _train_many(configs, [tmp_path / str(i) for i in range(4)])
    for i in (0, 2, 3):
        _same_run(changed[i], tmp_path / str(i), results[i], dirs[i])
    assert changed[1].history[1]["loss"] != results[1].history[1]["loss"]


def test_killed_and_resumed_stack_is_bit_identical(stacked, tmp_path):
    """(d): a stack stopped after epoch 1 and resumed equals the uninterrupted one bit for bit (the same
    stack: the same kernels), bandit arms included."""
    results, dirs = stacked
    mine = [tmp_path / str(i) for i in range(len(CONFIGS))]
    _train_many(CONFIGS, mine, stop_after=1)
    assert load(mine[0] / "checkpoint.pt")["epoch"] == 1 and not (mine[0] / "model.pt").exists()
    resumed = _train_many(CONFIGS, mine)
    for i in range(len(CONFIGS)):
        _same_run(resumed[i], mine[i], results[i], dirs[i])


def test_runs_resume_from_different_epochs_and_across_trainers(stacked, tmp_path):
    """(d): runs of one stack may resume from different epochs, and checkpoints cross between the
    trainers; to float32 rounding (stacks of other sizes, epochs of the single trainer)."""
    results, dirs = stacked
    configs, mine = CONFIGS[:4], [tmp_path / str(i) for i in range(4)]
    _train_many(configs[:3], mine[:3], stop_after=1)  # run 3 stays fresh
    train(configs[2], mine[2], device="cpu", progress=False, stop_after=2)  # run 2 goes on alone to epoch 2
    assert load(mine[0] / "checkpoint.pt")["epoch"] == 1 and not (mine[0] / "model.pt").exists()
    resumed = _train_many(configs, mine)
    for i in range(4):
        _close_run(resumed[i], mine[i], results[i], dirs[i])
    # and the single trainer resumes a stacked run's checkpoint
    single_dir = tmp_path / "single"
    _train_many(configs[2:3], [single_dir], stop_after=3)
    _close_run(train(configs[2], single_dir, device="cpu", progress=False), single_dir, results[2], dirs[2])


def test_a_diverged_run_stops_and_the_others_go_on(stacked, tmp_path):
    results, dirs = stacked
    mine = [tmp_path / str(i) for i in range(2)]
    train(CONFIGS[1], mine[1], device="cpu", progress=False, stop_after=1)
    state = load(mine[1] / "checkpoint.pt")
    name = next(iter(state["model"]))
    state["model"][name] = torch.full_like(state["model"][name], math.nan)
    atomic_save(state, mine[1] / "checkpoint.pt")
    with pytest.raises(TrainManyError, match="1 of 2 runs failed") as info:
        _train_many(CONFIGS[:2], mine)
    ok, diverged = info.value.outcomes
    _close_run(ok, mine[0], results[0], dirs[0])  # a stack of 2, then 1: other kernels than 4
    assert isinstance(diverged, TrainingDivergedError) and diverged.epoch == 2
    assert load(mine[1] / "checkpoint.pt")["epoch"] == 1  # the last good checkpoint is kept


def test_means_over_seeds_agree_with_the_single_trainer():
    """(c): four seeds stacked vs four other seeds trained alone: the means of the test log p(x) agree
    within three standard errors of their difference."""
    stacked_runs = _train_many([BASE.replace(seed=s, epochs=2) for s in range(10, 14)], [None] * 4)
    single_runs = [train(BASE.replace(seed=s, epochs=2), None, device="cpu", progress=False) for s in range(20, 24)]
    a = [r.final["test_log_px"] for r in stacked_runs]
    b = [r.final["test_log_px"] for r in single_runs]
    spread = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    assert 0 < spread and abs(statistics.mean(a) - statistics.mean(b)) <= 3 * spread


def test_configs_that_cannot_be_stacked_train_alone(tmp_path):
    config = BASE.replace(objective="wake-wake", epochs=1)
    (result,) = _train_many([config], [tmp_path / "many"])
    ref = train(config, tmp_path / "single", device="cpu", progress=False)
    _same_run(result, tmp_path / "many", ref, tmp_path / "single")  # exact: both are ``train``


def test_a_run_whose_d_changes_trains_in_a_stack_of_its_largest_d(tmp_path):
    """A bandit that chooses d stacks with the runs of its config's d (its shorter schedules padded
    with intervals of width zero): it is the run ``train`` trains to float32 rounding, its length
    changing within the stack, and the stack resumes after a kill bit for bit."""
    adaptive = BASE.replace(seed=7, d=5, schedule="gp_bandit_adaptive",
                            schedule_options={**WINDOWS, "n_init": 2, "raw_samples": 16, "num_restarts": 2})
    configs = [adaptive, BASE.replace(seed=8, d=5), BASE.replace(seed=9, d=5, schedule="gp_bandit",
                                                                 schedule_options=WINDOWS)]
    assert len({stack_key(c) for c in configs}) == 1 and stack_key(adaptive) != stack_key(BASE)
    dirs = [tmp_path / f"stack{i}" for i in range(3)]
    results = _train_many(configs, dirs)
    trained = [len(row["betas"]) for row in results[0].history if "betas" in row]
    assert len(set(trained)) > 1 and min(trained) < 5  # its length changes, below the stack's d
    ref = train(adaptive, tmp_path / "single", device="cpu", progress=False)
    _close_run(results[0], dirs[0], ref, tmp_path / "single")
    mine = [tmp_path / f"resumed{i}" for i in range(3)]
    _train_many(configs, mine, stop_after=2)
    resumed = _train_many(configs, mine)
    for i in range(3):
        _same_run(resumed[i], mine[i], results[i], dirs[i])


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="one folder"):
        _train_many(CONFIGS[:2], [tmp_path])
    with pytest.raises(ValueError, match="same folder"):
        _train_many(CONFIGS[:2], [tmp_path, tmp_path / "."])
    with pytest.raises(ValueError, match="max_stack"):
        _train_many(CONFIGS[:1], [None], max_stack=0)
    with pytest.raises(ValueError, match="configs\\[0\\]"):
        _train_many([{"seed": 1}], [None])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_stacked_runs_follow_the_single_runs():
    """On CUDA the same noise streams, batched kernels: the runs agree with ``train`` to float32 rounding
    (a bandit that chooses d among them, padded to the stack's d)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    adaptive = BASE.replace(seed=3, epochs=3, schedule="gp_bandit_adaptive",
                            schedule_options={**WINDOWS, "n_init": 1, "raw_samples": 16, "num_restarts": 2})
    configs = [BASE.replace(seed=1, epochs=3), BASE.replace(seed=2, epochs=3, schedule="linear"), adaptive]
    stacked_runs = train_many(configs, [None] * len(configs), device="cuda", progress=False)
    for config, result in zip(configs, stacked_runs):
        _close_run(result, None, train(config, None, device="cuda", progress=False), None)
