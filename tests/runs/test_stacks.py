"""The runner stacks compatible runs: grouping, stack size, and stacked sweeps equal unstacked ones.

Real (tiny) trainings on the CPU with ``stack="on"`` (batch 64, S = 8, 32 test points): a stacked
run's files equal the single run's to float32 rounding (other kernels: tests/README.md).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from tvolib import runs
from tvolib.checkpoint import load
from tvolib.paper import sweeps
from tvolib.runs.plan import format_plan, plan
from tvolib.runs.run import run_stack
from tvolib.runs.stacks import (MAX_STACK, default_max_stack, resolve_stack, run_bytes, stack_jobs, stack_label,
                                stacking_active, sweep_max_stack)
from tvolib.training import PCFGConfig, RunConfig
from tvolib.training.many import stack_key

from numerics import assert_runs_close, run_terms

BASE = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=2, d=3, eval_every=2)
CONFIGS = [BASE.replace(seed=seed, schedule=schedule) for seed in (1, 2) for schedule in ("log", "linear", "moments")]


# -- grouping -------------------------------------------------------------------------------------

MIXED = (sweeps.fig4_vae_mnist_fashion("smoke") + sweeps.fig5_sbn_binarized_mnist("smoke")
         + sweeps.fig6_pcfg("smoke") + [BASE.replace(objective="reinforce")])


@settings(max_examples=25, deadline=None)
@given(max_stack=st.integers(1, 12), order=st.permutations(range(len(MIXED))))
def test_every_config_in_exactly_one_job_of_one_key(max_stack, order):
    configs = [MIXED[i] for i in order]
    jobs = stack_jobs(configs, max_stack)
    assert sorted(c.digest() for job in jobs for c in job) == sorted(c.digest() for c in configs)
    for job in jobs:
        assert 1 <= len(job) <= max_stack
        keys = {stack_key(c) for c in job}
        assert len(keys) == 1
        if None in keys:  # the PCFG and objectives the stack cannot batch train alone
            assert len(job) == 1
    # as few jobs as the key groups and max_stack allow
    groups: dict = {}
    for c in configs:
        groups[stack_key(c) or c.digest()] = groups.get(stack_key(c) or c.digest(), 0) + 1
    assert len(jobs) == sum(-(-n // max_stack) for n in groups.values())


def test_smoke_fig4_groups_by_dataset_S_and_d():
    jobs = stack_jobs(sweeps.fig4_vae_mnist_fashion("smoke"), MAX_STACK)
    assert [len(job) for job in jobs] == [7, 7, 7, 7]  # 2 datasets x 2 d, the 7 series in each
    assert all(len({(c.dataset, c.d, c.S) for c in job}) == 1 for job in jobs)
    assert len({stack_label(job[0]) for job in jobs}) == 4
    assert stack_label(sweeps.fig6_pcfg("smoke")[0]) is None


def test_bad_stack_arguments_are_named():
    with pytest.raises(ValueError, match="accepted: auto, on, off"):
        resolve_stack("sometimes")
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="max_stack"):
            stack_jobs(CONFIGS, bad)
        with pytest.raises(ValueError, match="max_stack"):
            sweep_max_stack(CONFIGS, bad, "cpu")


def test_stacking_mode(monkeypatch):
    monkeypatch.delenv("TVOLIB_STACK", raising=False)
    assert resolve_stack(None) == "auto"
    assert not stacking_active("auto", "cpu")
    assert stacking_active("on", "cpu") and not stacking_active("off", "cpu")
    assert stacking_active("auto", "cuda", here=False)  # a Slurm job asked to run on CUDA
    assert not stacking_active("auto", None, here=False)
    monkeypatch.setenv("TVOLIB_STACK", "on")
    assert resolve_stack(None) == "on"


def test_max_stack_from_free_memory():
    s10, s50 = BASE.replace(S=10, batch_size=1000), BASE.replace(S=50, batch_size=1000)
    assert run_bytes(s50) > 4 * run_bytes(s10)
    gib = 2 ** 30
    assert default_max_stack([s50], free_bytes=80 * gib) < default_max_stack([s10], free_bytes=80 * gib) == MAX_STACK
    assert default_max_stack([s10, s50], free_bytes=80 * gib) == default_max_stack([s50], free_bytes=80 * gib)
    assert default_max_stack([s50], free_bytes=1) == 1
    assert 1 <= default_max_stack(CONFIGS, "cpu") <= MAX_STACK
    assert sweep_max_stack(CONFIGS, 5, "cpu") == 5


# -- plan ----------------------------------------------------------------------------------------

def test_plan_shows_stacks(tmp_path):
    p = plan(CONFIGS + sweeps.fig6_pcfg("smoke"), results_root=tmp_path, workers=2, max_stack=4)
    assert (p["stacks"], p["stacked_runs"], p["to_run"]) == (2, 6, 6 + len(sweeps.fig6_pcfg("smoke")))
    line = format_plan(p)
    assert "6 of them in 2 stack(s) of at most 4 runs" in line
    gpu = plan(CONFIGS, results_root=tmp_path, max_stack=8, gpu=True)
    assert "on one GPU" in format_plan(gpu) and gpu["stacks"] == 1
    assert set(p["status"]["stack"].dropna()) == {stack_label(CONFIGS[0])}
    assert plan(CONFIGS, results_root=tmp_path)["stacks"] == 0


# -- stacked sweeps equal unstacked ones --------------------------------------------------------------

def _files(folder):
    final = json.loads((folder / "final.json").read_text())
    return ({k: v for k, v in final.items() if not k.endswith("seconds")},
            (folder / "history.csv").read_text().splitlines()[0], load(folder / "model.pt")["state"])


def test_stacked_sweep_equals_unstacked_sweep(tmp_path, data_root):
    kw = dict(data_root=data_root, max_workers=1, progress=False, device="cpu")
    stacked = runs.run_configs(CONFIGS, results_root=tmp_path / "stacked", stack="on", max_stack=4, **kw)
    alone = runs.run_configs(CONFIGS, results_root=tmp_path / "alone", stack="off", **kw)
    assert list(stacked["run"]) == list(alone["run"])
    for config in CONFIGS:
        name, terms = runs.config_digest(config), run_terms(config)
        a, b = (_files(runs.run_dir(config, tmp_path / which)) for which in ("stacked", "alone"))
        assert a[1] == b[1]  # the same history columns
        assert_runs_close(a[0], b[0], terms=terms, path=f"{name}/final.json")
        assert_runs_close(a[2], b[2], terms=terms, path=f"{name}/model.pt")
        a, b = (runs.load_history(config, tmp_path / which, as_records=True) for which in ("stacked", "alone"))
        assert_runs_close(a, b, terms=terms, path=f"{name}/history.csv")
    again = runs.run_configs(CONFIGS, results_root=tmp_path / "stacked", stack="on", max_stack=4, **kw)
    assert list(again["test_log_px"]) == list(stacked["test_log_px"])  # exact: read back, not retrained


@pytest.mark.usefixtures("one_torch_thread")
def test_a_failing_run_leaves_its_stack_going(tmp_path, data_root):
    folder = runs.run_dir(CONFIGS[1], tmp_path)
    folder.mkdir(parents=True)
    (folder / "checkpoint.pt").write_bytes(b"not a checkpoint")  # this run cannot resume
    outcomes = run_stack(CONFIGS[:3], results_root=tmp_path, data_root=data_root, device="cpu", progress=False)
    assert isinstance(outcomes[1], Exception)
    assert "checkpoint" in (folder / "error.txt").read_text()
    assert [runs.run_status(c, tmp_path) for c in CONFIGS[:3]] == ["done", "partial", "done"]
    with pytest.raises(runs.RunFailedError, match=runs.config_digest(CONFIGS[1])):
        runs.run_configs(CONFIGS[:3], results_root=tmp_path, data_root=data_root, device="cpu", progress=False,
                         stack="on", max_workers=1)


@pytest.mark.usefixtures("one_torch_thread")
def test_stacks_through_submitit_debug_executor(tmp_path, data_root):
    frame = runs.run_configs(CONFIGS[:2] + [PCFGConfig(epochs=1, n_train=2, n_test=2, S=2, train_max_words=7,
                                                       eval_max_words=7, max_productions=31)],
                             executor="debug", results_root=tmp_path, data_root=data_root, device="cpu",
                             progress=False, stack="on")
    assert len(frame) == 3 and (runs.status(CONFIGS[:2], tmp_path)["status"] == "done").all()


def test_train_fn_cannot_be_stacked(tmp_path):
    with pytest.raises(ValueError, match="stack='off'"):
        runs.run_configs(CONFIGS, results_root=tmp_path, stack="on", train_fn=lambda *a, **k: None, progress=False)


def test_bandit_pool_only_for_stacks_with_bandits_on_four_cores_or_more():
    from tvolib.runs.executors import _bandit_pool
    from tvolib.stacked import StepPool

    bandits = [[BASE.replace(seed=1, schedule="gp_bandit"), BASE.replace(seed=2, schedule="log")]]
    with _bandit_pool(bandits, 2) as pool:
        assert pool is None  # 2 cores: stepped inline
    with _bandit_pool([CONFIGS[:3]], 8) as pool:
        assert pool is None  # no bandit schedule
    with _bandit_pool([bandits[0][:1]], 8) as pool:
        assert pool is None  # a run alone is stepped by its own trainer
    with _bandit_pool(bandits, 4) as pool:
        assert isinstance(pool, StepPool) and pool.workers == 3


def test_free_ram_fallback_where_sysconf_cannot_say(monkeypatch):
    from tvolib.runs import stacks

    def no_sysconf(name):
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(stacks.os, "sysconf", no_sysconf)
    assert stacks._available_ram() == 8 * 10**9
    assert default_max_stack(CONFIGS, "cpu") == min(MAX_STACK, int(0.7 * 8 * 10**9 // run_bytes(CONFIGS[0])))
