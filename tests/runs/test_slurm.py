"""The ``slurm`` executor against a real Slurm cluster (``scripts/slurm-local.sh start`` gives one).

Skipped, with the reason, where no cluster answers ``sinfo`` or where its nodes are other machines
(the tests' temporary folders are local). The one-node test cluster has no accounting storage, so
``sacct`` fails there: every state the runner reports (running, done, failed) must come without it.
Runs get one CPU each (``cpus_per_task=1``), so local references are computed with one torch
thread, as the local executor's pool workers and the Slurm jobs use.

The time-limit test needs one run that outlasts a Slurm warning signal (a minute's time limit), so
its sweep is started before the first test and checked by the last one, while the others run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
import pytest
import torch

from tvolib import checkpoint, experiments, sweeps
from tvolib.train import train

REPO = Path(__file__).resolve().parents[2]
USER = getpass.getuser()


def _cluster_problem() -> str | None:
    """Why no Slurm cluster can be used here, or None when ``sinfo`` answers with a node state."""
    if shutil.which("sinfo") is None:
        return "Slurm is not installed (no sinfo)"
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%n"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 20 s"
    if out.returncode != 0 or not out.stdout.strip():
        last = (out.stderr or out.stdout or "no output").strip().splitlines()[-1]
        return f"no Slurm cluster answers sinfo ({last})"
    here = {socket.gethostname().split(".")[0], "localhost"}
    others = sorted({name.split(".")[0] for name in out.stdout.split()} - here)
    if others:  # the tests' temporary folders would not be seen from other nodes
        return f"the Slurm cluster has nodes other than this machine ({', '.join(others[:3])})"
    return None


_PROBLEM = _cluster_problem()
pytestmark = pytest.mark.skipif(
    _PROBLEM is not None,
    reason=f"{_PROBLEM}; start a one-node cluster with `eval \"$(scripts/slurm-local.sh start)\"`",
)

#: Resources of every test job: the one-node cluster may have only 2 CPUs.
JOB = {"cpus_per_task": 1, "mem_gb": 1, "timeout_min": 10, "slurm_array_parallelism": 2}
#: The same for the command line, through its environment.
JOB_ENV = {"TVOLIB_SLURM_CPUS": "1", "TVOLIB_SLURM_MEM_GB": "1", "TVOLIB_SLURM_TIMEOUT_MIN": "10",
           "TVOLIB_SLURM_ARRAY_PARALLELISM": "2"}
#: Job name of the time-limited run (the other tests' queries leave it out).
TIME_LIMIT_JOB = "tvolib-test-timelimit"
#: Seconds of training the time-limited run needs: more than its first job gets. With a 1-minute limit
#: and ``slurm_signal_delay_s=5`` Slurm sends the warning signal 25-55 s after the start (it checks
#: every 30 s); submitit's default of 3 requeues leaves that run at least 4 jobs of 25 s.
TIME_LIMIT_WORK_S = 65.0
#: Run folder columns that measure time, not the run: they differ between any two runs.
TIMING = re.compile(r"seconds$")


def _slurm_options(name: str, **changes: Any) -> dict[str, Any]:
    """Executor options of one test sweep; ``name`` is its Slurm job name (to find and cancel it)."""
    return {**JOB, "name": name, **changes}


# --------------------------------------------------------------------------------------------
# Sweeps in a child process (a cancelled job must not hang the test) and Slurm queries
# --------------------------------------------------------------------------------------------

_DRIVER = """
import json, sys
from tvolib import experiments
spec = json.loads(open(sys.argv[1]).read())
configs = [experiments.config_from_dict(record) for record in spec["configs"]]
experiments.run_configs(configs, executor="slurm", results_root=spec["results_root"],
                        data_root=spec["data_root"], executor_options=spec["options"])
"""


def _start_sweep(folder: Path, configs: list[Any], data_root: Path | str, options: dict[str, Any],
                 log_name: str) -> tuple[subprocess.Popen, Path]:
    """Run ``run_configs(configs, executor="slurm")`` in a child process; its console goes to a file."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / f"{log_name}.json"
    spec.write_text(json.dumps({
        "configs": [{"kind": experiments.config_kind(c), "config": c.to_dict()} for c in configs],
        "results_root": str(folder / "results"), "data_root": str(data_root), "options": options,
    }))
    log = folder / f"{log_name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(spec)], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "TVOLIB_DOWNLOAD": "0"})
    return proc, log


def _finish(proc: subprocess.Popen, log: Path, seconds: float, what: str, job_name: str) -> int:
    """The sweep's exit code; after ``seconds`` the sweep and its jobs are killed and the test fails."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(timeout=seconds)
    proc.kill()
    proc.wait()
    _scancel(job_name)
    pytest.fail(f"{what}: the sweep still ran after {seconds:.0f} s; its console ends with:\n{_tail(log)}",
                pytrace=False)


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _scancel(job_name: str) -> None:
    subprocess.run(["scancel", "-u", USER, "-n", job_name], check=False, capture_output=True, timeout=30)


def _queue(exclude: str) -> list[dict[str, str]]:
    """This user's queued jobs except those called ``exclude``, one row per array task (squeue)."""
    out = subprocess.run(["squeue", "-h", "-r", "-u", USER, "-o", "%F|%K|%T|%i|%j"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    keys = ("array_job", "task", "state", "job", "name")
    rows = [dict(zip(keys, line.split("|", 4))) for line in out.splitlines() if line.strip()]
    return [row for row in rows if row["name"] != exclude]


def _throttle(array_job: str) -> int | None:
    """The array's ``%N`` limit on tasks running at once, from ``scontrol`` (None when unset)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", array_job], capture_output=True, text=True,
                         timeout=30).stdout
    found = re.search(r"ArrayTaskThrottle=(\d+)", out)
    return int(found.group(1)) if found and int(found.group(1)) > 0 else None


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds:.0f} s for {what}", pytrace=False)
        time.sleep(0.5)


# --------------------------------------------------------------------------------------------
# Configs and comparisons
# --------------------------------------------------------------------------------------------

def _sbn_run(epochs: int) -> Any:
    """Fig 5's first smoke run (binarized MNIST SBN), lengthened to ``epochs`` (checkpoints every 10)."""
    config = sweeps.figure_configs("fig5", "smoke")[0]
    return dataclasses.replace(config, epochs=epochs).validate()


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _local_reference(configs: list[Any], root: Path, data_root: Path) -> None:
    with _one_torch_thread():
        experiments.run_configs(configs, executor="local", results_root=root, data_root=data_root,
                                max_workers=1, progress=False)


def _numbers(config: Any, root: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """A complete run's final metrics and history, without the wall-clock columns."""
    final = {k: v for k, v in experiments.load_final(config, root).items() if not TIMING.search(k)}
    history = experiments.load_history(config, root)
    return final, history.drop(columns=[c for c in history.columns if TIMING.search(c)])


def _assert_same_numbers(configs: list[Any], root: Path, reference: Path) -> None:
    for config in configs:
        final, history = _numbers(config, root)
        ref_final, ref_history = _numbers(config, reference)
        assert final == ref_final, f"{experiments.config_digest(config)}: final metrics differ from the local run"
        pd.testing.assert_frame_equal(history, ref_history, check_exact=True)


def _status_row(config: Any, root: Path) -> dict[str, Any]:
    return experiments.status([config], results_root=root).iloc[0].to_dict()


def _existing_paths(text: str) -> list[Path]:
    """The existing files whose absolute paths appear in ``text``."""
    return [Path(p) for p in re.findall(r"(/[^\s'\",;()]+)", text) if Path(p).is_file()]


# --------------------------------------------------------------------------------------------
# The long run of the time-limit test, started before the first test
# --------------------------------------------------------------------------------------------

def _epochs_lasting(seconds: float, data_root: Path) -> int:
    """Epochs of :func:`_sbn_run` that train for about ``seconds`` on one core of this machine
    (timed on a short run: training, evaluation and bandit time per epoch, without start-up)."""
    probe = _sbn_run(20)
    with _one_torch_thread():
        final = train(probe, None, data_root=data_root, progress=False).final
    per_epoch = sum(final[k] for k in ("train_seconds", "eval_seconds", "bandit_seconds")) / probe.epochs
    return max(10, int(seconds / per_epoch) // 10 * 10)


@pytest.fixture(scope="module", autouse=True)
def time_limited_sweep(tmp_path_factory: pytest.TempPathFactory,
                       data_root: Path) -> Iterator[tuple[Any, Path, subprocess.Popen, Path]]:
    """One run longer than its 1-minute time limit, started before the first test of this module."""
    folder = tmp_path_factory.mktemp("timelimit")
    config = _sbn_run(_epochs_lasting(TIME_LIMIT_WORK_S, data_root))
    options = _slurm_options(TIME_LIMIT_JOB, timeout_min=1, slurm_signal_delay_s=5)
    proc, log = _start_sweep(folder, [config], data_root, options, "sweep")
    yield config, folder / "results", proc, log
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    _scancel(TIME_LIMIT_JOB)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

def test_figure_sweep_on_slurm_matches_local_executor(tmp_path: Path, data_root: Path) -> None:
    """`python -m tvolib run fig6 --executor slurm`: one throttled job array, quiet console, the
    local executor's numbers."""
    assert subprocess.run(["sacct", "-n"], capture_output=True, timeout=30).returncode != 0, (
        "sacct answers on this cluster: these tests must run without accounting (scripts/slurm-local.sh)")
    configs = sweeps.figure_configs("fig6", "smoke")
    root, log = tmp_path / "slurm", tmp_path / "console.log"
    env = {**os.environ, **JOB_ENV, "TVOLIB_DOWNLOAD": "0"}
    command = [sys.executable, "-m", "tvolib", "run", "fig6", "--profile", "smoke", "--executor", "slurm",
               "--results-root", str(root), "--data-root", str(data_root)]
    seen: list[dict[str, str]] = []
    throttles: set[int | None] = set()
    most_running = 0
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
    while proc.poll() is None:
        rows = _queue(exclude=TIME_LIMIT_JOB)
        seen += rows
        most_running = max(most_running, sum(r["state"] == "RUNNING" for r in rows))
        throttles |= {_throttle(r["array_job"]) for r in rows if r["state"] == "PENDING"}
        time.sleep(0.5)
    console = log.read_text(errors="replace")
    assert proc.returncode == 0, console[-3000:]

    _local_reference(configs, tmp_path / "local", data_root)
    _assert_same_numbers(configs, root, tmp_path / "local")
    assert (experiments.status(configs, results_root=root)["status"] == "done").all()

    assert {r["array_job"] for r in seen} and len({r["array_job"] for r in seen}) == 1, (
        f"expected the sweep's {len(configs)} runs as one job array, squeue showed {sorted({r['job'] for r in seen})}")
    assert most_running <= JOB["slurm_array_parallelism"]
    assert throttles <= {JOB["slurm_array_parallelism"]}, f"array throttle (%N) seen: {throttles}"
    noise = [line for line in console.splitlines() if re.search(r"sacct|Bypassing|accounting storage", line)]
    assert not noise, f"the console shows {len(noise)} lines of submitit/sacct warnings, e.g. {noise[:2]}"


def test_cancelled_job_resumes_from_its_checkpoint(tmp_path: Path, data_root: Path) -> None:
    """``scancel`` mid-run: the sweep waits while its job runs and ends, the run not done, once the
    job is gone (no sacct to ask); the rerun resumes it, with the numbers of an uninterrupted run."""
    config, name = _sbn_run(60), "tvolib-test-cancel"
    root = tmp_path / "results"
    folder = experiments.run_dir(config, root)
    proc, log = _start_sweep(tmp_path, [config], data_root, _slurm_options(name), "first")
    _wait_for(lambda: (folder / "checkpoint.pt").exists() or proc.poll() is not None, 240, "a first checkpoint")
    assert not (folder / experiments.FINAL_FILE).exists(), "the run ended before it was cancelled; lengthen it"
    assert [r["state"] for r in _queue(exclude=TIME_LIMIT_JOB) if r["name"] == name] == ["RUNNING"]
    assert proc.poll() is None, f"the sweep ended while its job ran:\n{_tail(log)}"
    subprocess.run(["scancel", "-u", USER, "-n", name], check=True, timeout=30)
    epoch = checkpoint.load(folder / "checkpoint.pt")["epoch"]

    # The runner may give a job that left the queue without a result a minute to write one.
    code = _finish(proc, log, 120, "the runner did not notice that its job was cancelled", name)
    assert code != 0 and folder.name in log.read_text(), _tail(log)
    assert _status_row(config, root)["status"] == "partial"
    assert 0 < epoch < config.epochs

    proc, log = _start_sweep(tmp_path, [config], data_root, _slurm_options(name), "rerun")
    assert _finish(proc, log, 240, "the rerun", name) == 0, _tail(log)
    assert "1 partial (resume)" in log.read_text(), _tail(log)
    _local_reference([config], tmp_path / "local", data_root)
    _assert_same_numbers([config], root, tmp_path / "local")


def test_failed_job_shows_its_error_and_log(tmp_path: Path) -> None:
    """A run whose data root does not exist: the sweep's summary names the error and the job's log
    (which holds the traceback); ``status`` (Python and command line) shows the error."""
    config, name = sweeps.figure_configs("fig1", "smoke")[0], "tvolib-test-fail"
    bad_root = tmp_path / "no-data-here"
    proc, log = _start_sweep(tmp_path, [config], bad_root, _slurm_options(name), "sweep")
    assert _finish(proc, log, 180, "the failing sweep", name) != 0
    summary = log.read_text(errors="replace")
    run = experiments.config_digest(config)
    assert run in summary and "DatasetNotFoundError" in summary and str(bad_root) in summary, _tail(log)
    logs = [p for p in _existing_paths(summary) if p.suffix in (".err", ".out", ".log")]
    assert any("DatasetNotFoundError" in p.read_text(errors="replace") for p in logs), (
        f"the sweep's summary names no job log holding the traceback (files named: {logs})")

    row = _status_row(config, tmp_path / "results")
    assert row["status"] not in ("done", "missing"), row
    assert "DatasetNotFoundError" in row["error"] and str(bad_root) in row["error"], row["error"]
    cli = subprocess.run([sys.executable, "-m", "tvolib", "status", "fig1", "--profile", "smoke",
                          "--results-root", str(tmp_path / "results")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "DatasetNotFoundError" in cli.stdout, cli.stdout + cli.stderr


def test_time_limit_requeues_and_completes(time_limited_sweep: tuple[Any, Path, subprocess.Popen, Path]) -> None:
    """A run longer than its 1-minute time limit: Slurm's warning signal makes submitit checkpoint
    and requeue the job, which resumes from the run's checkpoint until the run is complete."""
    config, root, proc, log = time_limited_sweep
    assert _finish(proc, log, 420, "the time-limited sweep", TIME_LIMIT_JOB) == 0, _tail(log)
    final, history = _numbers(config, root)
    assert final["epochs"] == config.epochs
    assert history["epoch"].tolist() == list(range(config.epochs + 1))
    job_logs = "".join(p.read_text(errors="replace") for p in root.rglob("*_log.*"))  # submitit's
    assert "Requeued job" in job_logs, "the job was never requeued: the run fitted in its first minute"
    assert _status_row(config, root)["status"] == "done"
