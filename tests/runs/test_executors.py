"""run_configs over every executor: caching, resume after a failure, bad input, damaged folders."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fake_trainer import FAIL_ENV, calls, cfg, fake_train, root, run  # noqa: F401 - root is a fixture
from tvolib import runs
from tvolib.runs import RunFailedError, RunFolderError


def test_run_writes_results_and_reads_them_back(root, capsys):
    c = cfg()
    frame = run([c], root, progress=True)
    assert "1 runs: 0 cached, 0 partial (resume), 1 new -> 1 to run" in capsys.readouterr().out
    folder = runs.run_dir(c, root)
    for name in ("config.json", "history.csv", "schedule_history.csv", "final.json", "checkpoint.pt", "model.pt"):
        assert (folder / name).exists(), name
    assert not list(folder.glob("*.tmp")) and not (folder / "error.txt").exists()
    row = frame.iloc[0]
    assert len(frame) == 1 and row["digest"] == c.digest() and row["kind"] == "tvo" and row["d"] == 3
    assert row["test_log_px"] == -103.0 and row["final_epochs"] == 3  # metric named like a field gets a prefix
    hist = runs.load_history(c, root)
    assert list(hist["epoch"]) == [0, 1, 2, 3] and hist["betas"].iloc[1] == [0.0, pytest.approx(0.03)]
    sched = runs.load_schedule_history(c, root)
    assert sched.to_dict("records") == [{"round": 0, "epoch": 1, "arm": [0.0, 0.3], "reward": 0.5, "hyper": {"omega": 0.1}}]
    records = runs.load_history(c, root, as_records=True)
    assert records[0] == {"epoch": 0, "test_log_px": -200.0}  # keys absent from a record stay absent
    assert records[2] == {"epoch": 2, "loss": 0.5, "betas": [0.0, pytest.approx(0.03)], "resumed": False}
    final = runs.load_final(c, root)
    assert final["test_kl"] == 1.5 and final["digest"] == c.digest() and final["wall_seconds"] >= 0
    assert runs.load_config(folder) == c and runs.status([c], root)["status"].tolist() == ["done"]


def test_complete_run_not_recomputed_and_duplicates_run_once(root, capsys):
    a, b = cfg(seed=0), cfg(seed=1)
    frame = run([a, a, b, cfg(seed=0)], root)
    assert len(frame) == 2 and calls(a, root) == 1 and calls(b, root) == 1
    mtime = (runs.run_dir(a, root) / "final.json").stat().st_mtime_ns
    frame2 = run([b, a], root, progress=True)
    assert "2 runs: 2 cached, 0 partial (resume), 0 new -> 0 to run" in capsys.readouterr().out
    assert calls(a, root) == 1 and calls(b, root) == 1
    assert (runs.run_dir(a, root) / "final.json").stat().st_mtime_ns == mtime
    assert list(frame2["digest"]) == [b.digest(), a.digest()]


def test_killed_sweep_resumes(root, monkeypatch):
    good, bad = cfg(seed=0), cfg(seed=1)
    monkeypatch.setenv(FAIL_ENV, f"{bad.digest()}@2")
    with pytest.raises(RunFailedError) as info:
        run([bad, good], root)
    assert list(info.value.failures) == [f"tvo-{bad.digest()}"] and "fake failure at epoch 2" in str(info.value)
    st = runs.status([good, bad], root).set_index("digest")
    assert st.loc[good.digest(), "status"] == "done"
    assert st.loc[bad.digest(), "status"] == "partial" and "fake failure" in st.loc[bad.digest(), "error"]
    folder = runs.run_dir(bad, root)
    assert json.loads((folder / "checkpoint.pt").read_text())["epoch"] == 1
    with pytest.raises(FileNotFoundError, match="not complete"):
        runs.load_history(bad, root)
    monkeypatch.delenv(FAIL_ENV)
    frame = run([good, bad], root)
    assert calls(good, root) == 1 and calls(bad, root) == 2 and len(frame) == 2
    assert list(runs.load_history(bad, root)["resumed"][1:]) == [False, False, False]


def test_damaged_folders_stop_the_sweep_before_anything_runs(root):
    a, b, c = cfg(seed=0), cfg(seed=1), cfg(seed=2)
    run([a, b], root)
    (runs.run_dir(a, root) / "final.json").write_text("{}")
    (runs.run_dir(b, root) / "final.json").write_text('{"kind": "tvo", "digest": "000000000000", "epochs": 3}')
    with pytest.raises(RunFolderError) as info:
        run([a, b, c], root)
    message = str(info.value)
    assert f"{runs.run_dir(a, root)} is corrupt" in message and f"{runs.run_dir(b, root)} is foreign" in message
    assert "Delete these folders" in message and calls(c, root) == 0
    status = runs.status([a, b, c], root)
    assert status["status"].tolist() == ["corrupt", "foreign", "missing"]  # status lists runs in conflict
    frame = run([a, b, c], root, repair=True)
    assert frame["test_log_px"].tolist() == [-103.0] * 3 and runs.status([a, b], root)["status"].tolist() == ["done"] * 2


def test_bad_input_rejected_with_clear_messages(root):
    with pytest.raises(ValueError, match=r"schedule='nope'.*choose one of"):
        run([cfg(), cfg(schedule="nope")], root)
    with pytest.raises(TypeError, match="expected a run config"):
        run([{"model": "vae"}], root)
    with pytest.raises(ValueError, match="unknown executor 'mpi'.*local, slurm, submitit-local, debug"):
        run([cfg()], root, executor="mpi")
    with pytest.raises(ValueError, match="max_workers"):
        run([cfg()], root, max_workers=0)
    with pytest.raises(ValueError, match="device='tpu' cannot be used"):
        run([cfg()], root, device="tpu")
    with pytest.raises(ValueError, match="Slurm option array_parallelism must be an int >= 1"):
        run([cfg()], root, slurm={"array_parallelism": 0})
    assert not root.exists() or not any(root.iterdir())  # nothing ran


def test_executor_and_workers_from_environment(monkeypatch):
    monkeypatch.setenv("TVOLIB_EXECUTOR", "Submitit_Local")
    assert runs.resolve_executor() == "submitit-local" and runs.resolve_executor("debug") == "debug"
    monkeypatch.delenv("TVOLIB_EXECUTOR")
    assert runs.resolve_executor() == "local"
    monkeypatch.setenv("TVOLIB_MAX_WORKERS", "zero")
    with pytest.raises(ValueError, match=r"\$TVOLIB_MAX_WORKERS must be a positive int, got 'zero'"):
        runs.plan([cfg()])


def test_local_process_pool(root):
    configs = [cfg(seed=s) for s in range(3)]
    frame = run(configs, root, max_workers=2)
    assert sorted(frame["seed"]) == [0, 1, 2]
    pids = {runs.run_dir(c, root).joinpath("fake_calls.log").read_text().strip() for c in configs}
    assert str(os.getpid()) not in pids  # ran in worker processes


def test_submitit_debug_executor_and_failure(root, monkeypatch):
    a, b = cfg(seed=0), cfg(seed=1)
    monkeypatch.setenv(FAIL_ENV, f"{b.digest()}@1")
    with pytest.raises(RunFailedError, match=b.digest()):
        run([a, b], root, executor="debug")
    assert runs.run_status(a, root) == "done" and (root / "submitit").is_dir()
    monkeypatch.delenv(FAIL_ENV)
    frame = run([a, b], root, executor="debug", slurm={"log_folder": str(root / "logs")})
    assert len(frame) == 2 and calls(a, root) == 1 and (root / "logs").is_dir()


def test_submitit_local_executor_runs_in_subprocess(root, monkeypatch):
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    c = cfg()
    frame = run([c], root, executor="submitit-local", executor_options={"timeout_min": 5})
    assert frame.iloc[0]["test_log_px"] == -103.0
    assert (runs.run_dir(c, root) / "fake_calls.log").read_text().strip() != str(os.getpid())


def test_submitit_job_requeues_itself_with_same_call():
    job = runs.SubmititRun({"results_root": "results-x", "train_fn": fake_train})
    c = cfg()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        delayed = job.checkpoint(c)  # what submitit calls on timeout/preemption
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert delayed.function is job and delayed.args == (c,)


def test_the_requeue_command_outlives_the_requeues_sigterm():
    """After ``checkpoint`` submitit runs ``scontrol requeue``, and the requeue sends SIGTERM to every
    process of the job: a child started after ``checkpoint`` must survive it (one started before dies)."""
    code = ("import subprocess; from tvolib import runs\n"
            "term = ['sh', '-c', 'kill -TERM $$; echo survived']\n"
            "print(subprocess.run(term, capture_output=True, text=True).returncode)\n"
            "runs.SubmititRun({}).checkpoint()\n"
            "done = subprocess.run(term, capture_output=True, text=True)\n"
            "print(done.returncode, done.stdout.strip())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [str(-signal.SIGTERM), "0 survived"]


@pytest.mark.slow
def test_real_tiny_run_end_to_end(root, data_root):
    c = cfg(n_train=60, n_test=20, epochs=2, batch_size=30, S=3, d=2, eval_S=8, schedule="linear")
    frame = runs.run_configs([c], results_root=root, data_root=data_root, max_workers=1, progress=False, device="cpu")
    row = frame.iloc[0]
    assert pd.notna(row["test_log_px"]) and row["test_log_px"] < 0 and row["test_kl"] >= -1e-3
    hist = runs.load_history(c, root)
    assert list(hist["epoch"]) == [0, 1, 2] and hist["betas"].iloc[1] == [0.0, 0.5]
    assert sum(p.numel() for p in runs.load_model(c, root).parameters()) > 0
    mtime = (runs.run_dir(c, root) / "final.json").stat().st_mtime_ns
    runs.run_configs([c], results_root=root, data_root=data_root, max_workers=1, progress=False)
    assert (runs.run_dir(c, root) / "final.json").stat().st_mtime_ns == mtime


def test_a_bad_slurm_setting_does_not_stop_a_local_sweep(root, monkeypatch):
    monkeypatch.setenv("TVOLIB_SLURM_MEM_GB", "lots")
    assert run([cfg()], root)["epochs"].tolist() == [3]
    with pytest.raises(ValueError, match=r"\$TVOLIB_SLURM_MEM_GB must be a float, got 'lots'"):
        run([cfg(seed=5)], root, executor="slurm", dry_run=False)


def test_a_run_finished_by_a_second_process_is_not_a_failure(root, monkeypatch):
    """Two processes on one sweep: the one that found a run locked must not report it failed once it is done."""
    from tvolib.runs import executors
    from tvolib.training.run_folder import RunLockedError

    real = executors.run_one

    def locked_then_done(config, **options):
        real(config, **options)  # the other process finishes it meanwhile
        raise RunLockedError(f"run folder {runs.run_dir(config, root)} is in use by another process")

    monkeypatch.setattr(executors, "run_one", locked_then_done)
    a, b = cfg(seed=1), cfg(seed=2)
    monkeypatch.setenv(FAIL_ENV, f"{b.digest()}@2")
    with pytest.raises(RunFailedError) as err:
        run([a, b], root)
    assert list(err.value.failures) == [f"tvo-{b.digest()}"]
    monkeypatch.delenv(FAIL_ENV)
    assert run([a, b], root)["epochs"].tolist() == [3, 3]


def test_a_script_without_main_guard_is_told_what_to_add(root, tmp_path):
    """Worker processes import the script (spawn): a sweep started at import time gets advice, not a tangle."""
    script = tmp_path / "sweep.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from fake_trainer import cfg, fake_train\n"
        "from tvolib import runs\n"
        f"runs.run_configs([cfg(seed=1), cfg(seed=2)], results_root={str(root)!r}, max_workers=2, "
        "progress=False, train_fn=fake_train)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode != 0
    assert 'put the call under `if __name__ == "__main__":` in your script' in out.stderr
