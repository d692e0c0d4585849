"""The results store, executors and CLI (issue 5, "Runner" tests).

Most tests inject :func:`fake_train` (a picklable stand-in for ``tvolib.train.train`` that writes a
JSON "checkpoint" every epoch, resumes from it, counts its calls and can be told to fail at a given
epoch) so they take milliseconds; one test trains a real tiny model.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from tvolib import experiments
from tvolib.checkpoint import atomic_write
from tvolib.experiments import ResultsMismatchError, RunFailedError

train_mod = pytest.importorskip("tvolib.train")
RunConfig = train_mod.RunConfig

REPO = Path(__file__).resolve().parent.parent
DATA_MIRROR = REPO.parent / "shared" / "data"
FAIL_ENV = "TVOLIB_FAKE_FAIL"  # "digest@epoch,digest@epoch": fake_train raises when it reaches that epoch


# ---------------------------------------------------------------------------------------------
# A fake trainer with the trainer's contract: train(config, run_dir, *, data_root, device, progress)
# ---------------------------------------------------------------------------------------------

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
    (run_dir / "model.pt").write_text("weights")
    return SimpleNamespace(
        config=config,
        history=state["history"],
        schedule_history=[{"round": 0, "epoch": 1, "arm": [0.0, 0.3], "reward": 0.5, "hyper": {"omega": 0.1}}],
        final={"test_log_px": -100.0 - config.d, "test_kl": 1.5, "epochs": config.epochs, "completed": True},
    )


def cfg(**changes) -> RunConfig:
    base = dict(model="vae", dataset="mnist", n_train=100, n_test=50, schedule="log", d=3, S=4, epochs=3,
                batch_size=50, seed=0, eval_every=0, eval_S=10)
    base.update(changes)
    return RunConfig(**base)


def calls(config, root) -> int:
    log = experiments.run_dir(config, root) / "fake_calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture()
def root(tmp_path, monkeypatch):
    monkeypatch.delenv(FAIL_ENV, raising=False)
    monkeypatch.delenv("TVOLIB_EXECUTOR", raising=False)
    monkeypatch.delenv("TVOLIB_MAX_WORKERS", raising=False)
    return tmp_path / "results"


def run(configs, root, **kw):
    kw.setdefault("max_workers", 1)
    kw.setdefault("progress", False)
    kw.setdefault("train_fn", fake_train)
    return experiments.run_configs(configs, results_root=root, **kw)


# ---------------------------------------------------------------------------------------------
# Config hashing and folders
# ---------------------------------------------------------------------------------------------

def _perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5
    if isinstance(value, str):
        return value + "_x"
    if value is None:
        return 7
    if isinstance(value, tuple):
        return value + (("zz_extra", 1),)
    raise AssertionError(f"no perturbation for {value!r}")


def test_digest_sensitive_to_every_field():
    base = cfg()
    seen = {base.digest()}
    for f in dataclasses.fields(RunConfig):
        changed = dataclasses.replace(base, **{f.name: _perturb(getattr(base, f.name))})
        assert changed.digest() not in seen, f"digest ignores field {f.name}"
        seen.add(changed.digest())
        assert experiments.run_dir(changed) != experiments.run_dir(base)


def test_digest_stable_across_processes_and_spellings():
    a = cfg(schedule="gp_bandit", schedule_options={"b": 1, "a": (1, 2)})
    b = RunConfig.from_dict(json.loads(json.dumps(a.to_dict())))
    assert a == b and a.digest() == b.digest() and len(a.digest()) == 12
    code = ("import json,sys; from tvolib.train import RunConfig; "
            "print(RunConfig.from_dict(json.loads(sys.argv[1])).digest())")
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(a.to_dict())], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    assert out.stdout.strip() == a.digest()


def test_run_dir_layout_and_kinds_never_share_a_folder(tmp_path):
    c = cfg()
    assert experiments.run_dir(c, tmp_path) == tmp_path / f"tvo-{c.digest()}"

    @dataclasses.dataclass(frozen=True)
    class Other:  # same to_dict and digest, another kind
        kind = "pcfg"
        inner: RunConfig

        def to_dict(self):
            return self.inner.to_dict()

        def digest(self):
            return self.inner.digest()

        def validate(self):
            return self

    assert experiments.run_dir(Other(c), tmp_path) != experiments.run_dir(c, tmp_path)


def test_sweep_configs_have_distinct_folders():
    sweeps = pytest.importorskip("tvolib.sweeps")
    configs = sweeps.all_configs("quick", skip_unavailable=True)
    names = [experiments.run_dir(c).name for c in configs]
    assert len(names) == len(set(names)) == len({(c.kind, c.to_dict().__repr__()) for c in configs})


def test_folder_holding_another_config_is_an_error(root):
    a, b = cfg(seed=0), cfg(seed=1)
    run([a], root)
    # Simulate a digest collision / corruption: b's folder holds a's config.json.
    folder_b = experiments.run_dir(b, root)
    folder_b.mkdir(parents=True)
    (folder_b / "config.json").write_text((experiments.run_dir(a, root) / "config.json").read_text())
    with pytest.raises(ResultsMismatchError, match="different config"):
        run([b], root)
    (folder_b / "config.json").write_text("{not json")
    with pytest.raises(ResultsMismatchError, match="corrupt"):
        experiments.run_one(b, results_root=root, train_fn=fake_train)


# ---------------------------------------------------------------------------------------------
# Running, caching, resuming
# ---------------------------------------------------------------------------------------------

def test_run_writes_results_and_reads_them_back(root, capsys):
    c = cfg()
    frame = run([c], root, progress=True)
    assert "1 runs: 0 cached, 0 partial (resume), 1 new -> 1 to run" in capsys.readouterr().out
    folder = experiments.run_dir(c, root)
    for name in ("config.json", "history.csv", "schedule_history.csv", "final.json", "checkpoint.pt", "model.pt"):
        assert (folder / name).exists(), name
    assert not list(folder.glob("*.tmp")) and not (folder / "error.txt").exists()
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["digest"] == c.digest() and row["kind"] == "tvo" and row["schedule"] == "log" and row["d"] == 3
    assert row["test_log_px"] == -103.0 and row["final_epochs"] == 3  # metric named like a field gets a prefix
    hist = experiments.load_history(c, root)
    assert list(hist["epoch"]) == [0, 1, 2, 3] and hist["betas"].iloc[1] == [0.0, pytest.approx(0.03)]
    sched = experiments.load_schedule_history(c, root)
    assert sched.to_dict("records") == [{"round": 0, "epoch": 1, "arm": [0.0, 0.3], "reward": 0.5, "hyper": {"omega": 0.1}}]
    records = experiments.load_history(c, root, as_records=True)
    assert records[0] == {"epoch": 0, "test_log_px": -200.0}  # keys absent from a record stay absent
    assert records[2] == {"epoch": 2, "loss": 0.5, "betas": [0.0, pytest.approx(0.03)], "resumed": False}
    final = experiments.load_final(c, root)
    assert final["test_kl"] == 1.5 and final["digest"] == c.digest() and final["wall_seconds"] >= 0
    assert experiments.load_config(folder) == c
    assert experiments.status([c], root)["status"].tolist() == ["done"]


def test_complete_run_not_recomputed_and_duplicates_run_once(root, capsys):
    a, b = cfg(seed=0), cfg(seed=1)
    frame = run([a, a, b, cfg(seed=0)], root)
    assert len(frame) == 2 and calls(a, root) == 1 and calls(b, root) == 1
    mtime = (experiments.run_dir(a, root) / "final.json").stat().st_mtime_ns
    frame2 = run([b, a], root, progress=True)
    assert "2 runs: 2 cached, 0 partial (resume), 0 new -> 0 to run" in capsys.readouterr().out
    assert calls(a, root) == 1 and calls(b, root) == 1
    assert (experiments.run_dir(a, root) / "final.json").stat().st_mtime_ns == mtime
    assert list(frame2["digest"]) == [b.digest(), a.digest()]


def test_killed_sweep_resumes(root, monkeypatch):
    good, bad = cfg(seed=0), cfg(seed=1)
    monkeypatch.setenv(FAIL_ENV, f"{bad.digest()}@2")
    with pytest.raises(RunFailedError) as info:
        run([bad, good], root)
    assert f"tvo-{bad.digest()}" in str(info.value) and "fake failure at epoch 2" in str(info.value)
    assert list(info.value.failures) == [f"tvo-{bad.digest()}"]
    # The other run finished; the failed one left partial state and its traceback.
    st = experiments.status([good, bad], root).set_index("digest")
    assert st.loc[good.digest(), "status"] == "done"
    assert st.loc[bad.digest(), "status"] == "partial" and "fake failure" in st.loc[bad.digest(), "error"]
    folder = experiments.run_dir(bad, root)
    assert not (folder / "final.json").exists() and "RuntimeError" in (folder / "error.txt").read_text()
    assert json.loads((folder / "checkpoint.pt").read_text())["epoch"] == 1
    with pytest.raises(FileNotFoundError, match="not complete"):
        experiments.load_history(bad, root)
    # Rerun: only the partial run is trained, and it resumes from its checkpoint.
    monkeypatch.delenv(FAIL_ENV)
    frame = run([good, bad], root)
    assert calls(good, root) == 1 and calls(bad, root) == 2
    hist = experiments.load_history(bad, root)
    assert list(hist["epoch"]) == [0, 1, 2, 3] and list(hist["resumed"][1:]) == [False, False, False]
    assert not (folder / "error.txt").exists() and len(frame) == 2


def test_incomplete_trainer_result_is_not_marked_done(root):
    def stops_early(config, run_dir, **kw):
        out = fake_train(config, run_dir, **kw)
        out.final["completed"] = False
        return out

    c = cfg()
    with pytest.raises(RunFailedError, match="incomplete"):
        run([c], root, train_fn=stops_early)
    assert experiments.run_status(c, root) == "partial"


def test_failed_final_write_leaves_no_final_json(root, monkeypatch):
    c = cfg()
    real = experiments._write_json

    def flaky(path, obj):
        if path.name == "final.json":
            def half(f):
                f.write('{"test_log_px": ')
                raise OSError("disk full")
            atomic_write(path, half, "w")
        real(path, obj)

    monkeypatch.setattr(experiments, "_write_json", flaky)
    with pytest.raises(RunFailedError, match="disk full"):
        run([c], root)
    folder = experiments.run_dir(c, root)
    assert not (folder / "final.json").exists() and not list(folder.glob(".*.tmp"))
    assert experiments.run_status(c, root) == "partial"
    monkeypatch.setattr(experiments, "_write_json", real)
    run([c], root)
    assert experiments.load_final(c, root)["test_log_px"] == -103.0


def test_atomic_write_keeps_old_content_on_error(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")

    def boom(f):
        f.write("new but incomplete")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, boom, "w")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

def test_bad_configs_rejected_with_clear_messages(root):
    with pytest.raises(ValueError, match=r"schedule='nope'.*choose one of"):
        run([cfg(), cfg(schedule="nope")], root)
    with pytest.raises(TypeError, match="expected a run config"):
        run([{"model": "vae"}], root)
    with pytest.raises(ValueError, match="unknown executor 'mpi'.*local, slurm, submitit-local, debug"):
        run([cfg()], root, executor="mpi")
    with pytest.raises(ValueError, match="max_workers"):
        run([cfg()], root, max_workers=0)
    with pytest.raises(ValueError, match="unknown config kind 'nope'"):
        experiments.config_from_dict({"kind": "nope", "config": {}})
    with pytest.raises(ValueError, match="unknown RunConfig fields"):
        experiments.config_from_dict({"model": "vae", "colour": "red"})
    assert not root.exists() or not any(root.iterdir())  # nothing ran


def test_executor_from_environment(monkeypatch):
    monkeypatch.setenv("TVOLIB_EXECUTOR", "Submitit_Local")
    assert experiments.resolve_executor() == "submitit-local"
    assert experiments.resolve_executor("debug") == "debug"
    monkeypatch.delenv("TVOLIB_EXECUTOR")
    assert experiments.resolve_executor() == "local"


def test_slurm_parameters_from_environment(monkeypatch, tmp_path):
    import submitit

    monkeypatch.setenv("TVOLIB_SLURM_PARTITION", "gpu")
    monkeypatch.setenv("TVOLIB_SLURM_ACCOUNT", "lab")
    monkeypatch.setenv("TVOLIB_SLURM_GPUS", "1")
    monkeypatch.setenv("TVOLIB_SLURM_TIMEOUT_MIN", "90")
    p = experiments.slurm_parameters(cpus_per_task=8)
    assert p["slurm_partition"] == "gpu" and p["gpus_per_node"] == 1 and p["timeout_min"] == 90
    assert p["cpus_per_task"] == 8 and p["slurm_account"] == "lab"
    # submitit validates slurm-specific names even on a machine without slurm.
    submitit.AutoExecutor(folder=tmp_path, cluster="debug").update_parameters(**p)
    with pytest.raises(NameError, match="slurm_partitionn"):
        submitit.AutoExecutor(folder=tmp_path, cluster="debug").update_parameters(slurm_partitionn="gpu")
    monkeypatch.setenv("TVOLIB_SLURM_GPUS", "two")
    with pytest.raises(ValueError, match="TVOLIB_SLURM_GPUS must be a int"):
        experiments.slurm_parameters()


# ---------------------------------------------------------------------------------------------
# Executors
# ---------------------------------------------------------------------------------------------

def test_local_process_pool(root):
    configs = [cfg(seed=s) for s in range(3)]
    frame = run(configs, root, max_workers=2)
    assert sorted(frame["seed"]) == [0, 1, 2]
    pids = {experiments.run_dir(c, root).joinpath("fake_calls.log").read_text().strip() for c in configs}
    assert str(os.getpid()) not in pids  # ran in worker processes


def test_submitit_debug_executor_and_failure(root, monkeypatch):
    a, b = cfg(seed=0), cfg(seed=1)
    monkeypatch.setenv(FAIL_ENV, f"{b.digest()}@1")
    with pytest.raises(RunFailedError, match=b.digest()):
        run([a, b], root, executor="debug")
    assert experiments.run_status(a, root) == "done" and (experiments.run_dir(a, root) / "history.csv").exists()
    assert (root / "submitit").is_dir()
    monkeypatch.delenv(FAIL_ENV)
    frame = run([a, b], root, executor="debug")
    assert len(frame) == 2 and calls(a, root) == 1


def test_submitit_local_executor_runs_in_subprocess(root, monkeypatch):
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    c = cfg()
    frame = run([c], root, executor="submitit-local", executor_options={"timeout_min": 5})
    assert frame.iloc[0]["test_log_px"] == -103.0
    pid = (experiments.run_dir(c, root) / "fake_calls.log").read_text().strip()
    assert pid != str(os.getpid())


def test_submitit_job_requeues_itself_with_same_call():
    job = experiments.SubmititRun({"results_root": "/tmp/x", "train_fn": fake_train})
    c = cfg()
    delayed = job.checkpoint(c)  # what submitit calls on timeout/preemption
    assert delayed.function is job and delayed.args == (c,)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def test_cli_dry_run_status_and_errors(root, capsys, monkeypatch):
    from tvolib.__main__ import main

    assert main(["run", "fig2", "--profile", "smoke", "--dry-run", "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "profile 'smoke'" in out and "1 runs: 0 cached, 0 partial (resume), 1 new -> 1 to run" in out
    assert "gp_bandit" in out and "missing" in out
    assert not root.exists() or not any(root.iterdir())

    assert main(["status", "fig4", "--profile", "smoke", "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "fig4_vae at profile smoke: 0 done, 0 partial, 16 missing" in out

    assert main(["status", "--profile", "smoke", "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "table_permutation" in out and "all (distinct runs)" in out

    assert main(["run", "fig99", "--profile", "smoke", "--dry-run"]) == 2
    assert "unknown figure 'fig99'" in capsys.readouterr().err
    assert main(["status", "--profile", "huge"]) == 2
    assert "unknown profile 'huge'" in capsys.readouterr().err


def test_cli_run_config_and_status_after_run(root, tmp_path, capsys, monkeypatch):
    from tvolib.__main__ import main

    monkeypatch.setitem(experiments.CONFIG_KINDS, "tvo", ("tvolib.train:RunConfig", "test_experiments:fake_train"))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    c = cfg()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(c.to_dict()))
    assert main(["run-config", str(path), "--results-root", str(root)]) == 0
    assert "test_log_px: -103.0" in capsys.readouterr().out
    assert experiments.run_status(c, root) == "done"
    (tmp_path / "bad.json").write_text(json.dumps({**c.to_dict(), "model": "gan"}))
    assert main(["run-config", str(tmp_path / "bad.json"), "--results-root", str(root)]) == 2
    assert "model='gan'" in capsys.readouterr().err


def test_cli_entry_point_subprocess(root):
    env = {**os.environ, "TVOLIB_RESULTS": str(root)}
    out = subprocess.run([sys.executable, "-m", "tvolib", "run", "fig3", "--profile", "smoke", "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "1 to run" in out.stdout


# ---------------------------------------------------------------------------------------------
# One real run
# ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_real_tiny_run_end_to_end(root):
    if not (DATA_MIRROR / "MNIST").exists():
        pytest.skip("data mirror not found")
    c = cfg(n_train=60, n_test=20, epochs=2, batch_size=30, S=3, d=2, eval_S=8, schedule="linear")
    frame = experiments.run_configs([c], results_root=root, data_root=DATA_MIRROR, max_workers=1,
                                    progress=False, device="cpu")
    row = frame.iloc[0]
    assert pd.notna(row["test_log_px"]) and row["test_log_px"] < 0 and row["test_kl"] >= -1e-3
    hist = experiments.load_history(c, root)
    assert list(hist["epoch"]) == [0, 1, 2] and hist["betas"].iloc[1] == [0.0, 0.5]
    model = experiments.load_model(c, root)
    assert sum(p.numel() for p in model.parameters()) > 0
    mtime = (experiments.run_dir(c, root) / "final.json").stat().st_mtime_ns
    experiments.run_configs([c], results_root=root, data_root=DATA_MIRROR, max_workers=1, progress=False)
    assert (experiments.run_dir(c, root) / "final.json").stat().st_mtime_ns == mtime
