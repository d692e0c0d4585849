"""Slurm without a cluster: options and the sbatch script they give, job state from files and squeue."""
from __future__ import annotations

import logging
import os
import pickle
import shutil
import stat
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest
import submitit

from fake_trainer import cfg, root, run  # noqa: F401 - root is a fixture
from tvolib import runs
from tvolib.runs.slurm import (
    SLURM_ENV, JobState, SlurmOptions, error_headline, job_state, parse_sbatch_flags, quiet_sacct, squeue_states,
    wait_for_jobs,
)


@pytest.fixture()
def clean_env(monkeypatch):
    for var in SLURM_ENV.values():
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_options_from_defaults_environment_and_overrides(clean_env):
    assert SlurmOptions.from_env() == SlurmOptions()
    clean_env.setenv("TVOLIB_SLURM_PARTITION", "gpu")
    clean_env.setenv("TVOLIB_SLURM_GPUS", "1")
    clean_env.setenv("TVOLIB_SLURM_TIMEOUT_MIN", "90")
    clean_env.setenv("TVOLIB_SLURM_EXTRA", "--qos=high --exclusive")
    clean_env.setenv("TVOLIB_SLURM_MAX_REQUEUES", "4")
    clean_env.setenv("TVOLIB_SLURM_POLL_S", "2.5")
    opts = SlurmOptions.from_env(cpus_per_task=8, partition=None, timeout_min=30)
    assert (opts.partition, opts.gpus_per_task, opts.cpus_per_task, opts.timeout_min) == ("gpu", 1, 8, 30)
    assert (opts.max_requeues, opts.poll_s) == (4, 2.5)
    params = opts.to_submitit()
    assert params["slurm_partition"] == "gpu" and params["gpus_per_node"] == 1 and params["timeout_min"] == 30
    assert params["slurm_additional_parameters"] == {"qos": "high", "exclusive": True}
    assert "max_requeues" not in str(params) and "poll" not in str(params)  # not update_parameters' to take
    assert runs.slurm_parameters(timeout_min=5)["timeout_min"] == 5


@pytest.mark.parametrize("env, value, message", [
    ("TVOLIB_SLURM_GPUS", "two", r"\$TVOLIB_SLURM_GPUS must be a int, got 'two'"),
    ("TVOLIB_SLURM_MEM_GB", "lots", r"\$TVOLIB_SLURM_MEM_GB must be a float"),
    ("TVOLIB_SLURM_ARRAY_PARALLELISM", "0", "array_parallelism must be an int >= 1, got 0"),
    ("TVOLIB_SLURM_EXTRA", "qos=high", "extra sbatch flags must look like '--key=value'"),
    ("TVOLIB_SLURM_MAX_REQUEUES", "-1", "max_requeues must be an int >= 0, got -1"),
    ("TVOLIB_SLURM_POLL_S", "0", "poll_s must be a positive number, got 0.0"),
])
def test_bad_options_name_the_variable(clean_env, env, value, message):
    clean_env.setenv(env, value)
    with pytest.raises(ValueError, match=message):
        SlurmOptions.from_env()


def test_unknown_option_and_flag_parsing():
    with pytest.raises(ValueError, match=r"unknown Slurm options \['queue'\]"):
        SlurmOptions.from_env(environ={}, queue="x")
    assert parse_sbatch_flags("--constraint='v100|a100' --mail-type=END --exclusive") == {
        "constraint": "v100|a100", "mail_type": "END", "exclusive": True}


def _fake_command(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


#: submitit's Slurm executor refuses to start without ``srun`` on the PATH; like the real-cluster tests
#: (test_slurm.py), the test that goes through it skips, with the reason, where Slurm is not installed.
needs_srun = pytest.mark.skipif(
    shutil.which("srun") is None,
    reason="Slurm is not installed (no srun, which submitit's Slurm executor requires); .ci/run installs it, "
           "or install slurm-wlm and start a one-node cluster with `eval \"$(scripts/slurm-local.sh start)\"`",
)


@needs_srun
def test_one_array_per_sweep_with_the_options(root, clean_env, tmp_path):
    """A fake ``sbatch`` records the job script; a fake ``squeue`` says every task failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_command(bin_dir, "sbatch", 'echo "$@" >> "$(dirname "$0")/sbatch_calls"\necho "Submitted batch job 4242"\n')
    _fake_command(bin_dir, "squeue", 'for i in 0 1 2 3 4; do echo "4242_$i FAILED"; done\n')
    _fake_command(bin_dir, "sacct", "exit 1\n")
    clean_env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    configs = [cfg(seed=s) for s in range(5)]
    with pytest.raises(runs.RunFailedError, match="5 run.s. failed") as info:
        run(configs, root, executor="slurm", slurm={"partition": "debug", "array_parallelism": 2,
                                                    "extra": "--qos=high", "timeout_min": 3, "max_requeues": 7,
                                                    "poll_s": 0.01})
    assert len((bin_dir / "sbatch_calls").read_text().splitlines()) == 1  # one sbatch: one array
    for submitted in (root / "submitit").glob("4242_*_submitted.pkl"):  # requeues left on timeout, per task
        with open(submitted, "rb") as f:
            assert pickle.load(f)._timeout_countdown == 7
    script = (root / "submitit" / "4242_submission.sh").read_text()
    for line in ("#SBATCH --array=0-4%2", "#SBATCH --partition=debug", "#SBATCH --qos=high", "#SBATCH --time=3",
                 "#SBATCH --signal=USR2@90"):
        assert line in script
    logs = {f"Slurm state FAILED (log: {root / 'submitit'}/4242_{i}_0_log.err)" for i in range(5)}
    assert set(info.value.failures.values()) == logs
    status = runs.status(configs, root)  # the failure is visible in status, with its state and log
    assert status["status"].tolist() == ["partial"] * 5
    assert set(status["error"]) == logs


# ---------------------------------------------------------------------------------------------
# Job state from files and the queue
# ---------------------------------------------------------------------------------------------

def _write_result(path: Path, outcome) -> None:
    with open(path, "wb") as f:
        pickle.dump(outcome, f)


def _traceback(error: BaseException) -> str:
    try:
        raise error
    except BaseException:  # noqa: BLE001 - formatted as submitit and run_one do
        return traceback.format_exc()


def _chained() -> str:
    try:
        try:
            {}["x"]
        except KeyError as e:
            raise ValueError("no config\n  details on a second line") from e
    except ValueError:
        return traceback.format_exc()


@pytest.mark.parametrize("text, headline", [
    (_traceback(FileNotFoundError("dataset 'mnist' not found under data root /x. Expected files:\n  - /x/a")),
     "FileNotFoundError: dataset 'mnist' not found under data root /x. Expected files:"),
    (_traceback(runs.RunFailedError({"vae-1": "x.y: z"})), "RunFailedError: 1 run(s) failed:"),  # module path dropped
    ("Traceback (most recent call last):\n  File \"a.py\", line 1\nsubmitit.core.utils.UncompletedJobError\n",
     "UncompletedJobError"),
    (_chained(), "ValueError: no config"),
    (_traceback(KeyboardInterrupt()), "KeyboardInterrupt"),
    ("Slurm state FAILED (log: /x/1_0_0_log.err)\n", "Slurm state FAILED (log: /x/1_0_0_log.err)"),
    ("", "failed"),
])
def test_error_headline_is_the_exceptions_first_line(text, headline):
    assert error_headline(text) == headline


def test_job_state_from_files_and_queue(root, tmp_path):
    c = cfg()
    result = tmp_path / "4242_0_0_result.pkl"
    started = time.time() - 10
    assert job_state(c, root, result, "PENDING", started) == JobState("pending", "PENDING")
    assert job_state(c, root, result, "RUNNING", started) == JobState("running", "RUNNING")
    assert job_state(c, root, result, None, started).state == "lost"
    assert job_state(c, root, result, "COMPLETED", started).state == "lost"  # its result file may lag
    for ended in ("TIMEOUT", "CANCELLED", "FAILED", "OUT_OF_MEMORY"):  # squeue -t all: known at once
        assert job_state(c, root, result, ended, started) == JobState("failed", f"Slurm state {ended}")
    folder = runs.run_dir(c, root)
    folder.mkdir(parents=True)
    (folder / "error.txt").write_text(_traceback(ValueError("bad data root\nsecond line")))
    os.utime(folder / "error.txt", (started - 100, started - 100))  # from an earlier attempt: ignored
    assert job_state(c, root, result, None, started).state == "lost"
    os.utime(folder / "error.txt", None)
    assert job_state(c, root, result, "RUNNING", started).state == "running"  # requeued: still going
    assert job_state(c, root, result, None, started) == JobState("failed", "ValueError: bad data root")
    _write_result(result, ("error", _traceback(RuntimeError("diverged\nat epoch 3"))))
    assert job_state(c, root, result, None, started) == JobState("failed", "RuntimeError: diverged")
    run([c], root)
    assert job_state(c, root, result, None, started) == JobState("done")
    (folder / "final.json").write_text("{}")
    state = job_state(c, root, result, None, started)
    assert state.state == "failed" and "run folder corrupt" in state.detail


def test_squeue_parsing():
    def fake(cmd, **kw):
        assert cmd[:7] == ["squeue", "-h", "-r", "-t", "all", "-o", "%i %T"] and cmd[-1] == "17,42"
        return SimpleNamespace(returncode=0, stdout="42_0 RUNNING\n42_1 CANCELLED+\n17_3 COMPLETING\n\n")

    assert squeue_states(["42_0", "42_1", "17_3"], run=fake) == {"42_0": "RUNNING", "42_1": "CANCELLED",
                                                                 "17_3": "COMPLETING"}
    assert squeue_states(["42_0"], run=lambda cmd, **kw: SimpleNamespace(returncode=1, stdout="")) == {}
    assert squeue_states([]) == {}

    def missing(cmd, **kw):
        raise FileNotFoundError(cmd[0])

    with pytest.raises(OSError, match="squeue not found"):
        squeue_states(["1_0"], run=missing)


def test_wait_for_jobs_without_sacct(root, tmp_path):
    done, running, lost = cfg(seed=0), cfg(seed=1), cfg(seed=2)
    run([done], root)
    jobs = [SimpleNamespace(job_id=f"7_{i}", paths=SimpleNamespace(result_pickle=tmp_path / f"7_{i}_0_result.pkl",
                                                                   stderr=tmp_path / f"7_{i}_0_log.err"))
            for i in range(3)]
    polls = []

    def queue(ids):
        polls.append(sorted(ids))
        if len(polls) == 2:  # the running task finishes between two polls
            run([running], root)
        return {"7_1": "RUNNING"} if len(polls) < 2 else {}

    seen = []
    states = wait_for_jobs(jobs, [done, running, lost], root, submitted_at=time.time(), poll_s=0.01,
                           lost_after_s=0.0, queue=queue, on_finished=lambda j, s: seen.append(j))
    assert states["7_0"] == JobState("done") and states["7_1"] == JobState("done")
    assert states["7_2"].state == "failed" and str(tmp_path / "7_2_0_log.err") in states["7_2"].detail
    assert seen == ["7_0", "7_2", "7_1"] and polls[0] == ["7_0", "7_1", "7_2"]


def test_sacct_warnings_silenced(capsys):
    logger = logging.getLogger("submitit")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        with quiet_sacct():
            logger.warning("Call #3 - Bypassing sacct error Command 'sacct' returned 1, status may be inaccurate.")
            logger.warning("something else")
        logger.warning("Call #4 - Bypassing sacct error after the block")
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["something else", "Call #4 - Bypassing sacct error after the block"]


def test_submitit_accepts_the_parameters(tmp_path, clean_env):
    params = SlurmOptions(partition="gpu", account="lab", gpus_per_task=1, extra="--qos=high").to_submitit()
    submitit.AutoExecutor(folder=tmp_path, cluster="debug").update_parameters(**params)
    with pytest.raises(NameError, match="slurm_partitionn"):
        submitit.AutoExecutor(folder=tmp_path, cluster="debug").update_parameters(slurm_partitionn="gpu")
