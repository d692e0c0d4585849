"""The ``slurm`` executor against a real Slurm cluster (``scripts/slurm-local.sh start`` gives one).

Skipped, with the reason, where no cluster answers ``sinfo`` or where its nodes are other machines
(the tests' temporary folders are local). The one-node test cluster has no accounting storage, so
``sacct`` fails there: every state the runner reports (running, done, failed) must come without it.
Runs get one CPU each (``cpus_per_task=1``), so local references are computed with one torch
thread, as the local executor's pool workers and the Slurm jobs use.

The whole module is meant to take at most about 3 minutes on 2 cores. The time-limit test needs
one run that outlasts Slurm's warning signal (a minute's time limit), so its sweep is started before
the first test and checked by the last one, while the others run; the other tests compute their
local references while their sweeps run, and the runner polls every half second.
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
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
import pytest
import torch

from tvolib import checkpoint, runs
from tvolib.paper import sweeps
from tvolib.runs.store import CHECKPOINT_FILE, FINAL_FILE
from tvolib.training import RunConfig, train

from numerics import assert_runs_close, run_terms

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

#: Slurm options of every test sweep (SlurmOptions fields): the one-node cluster may have only 2 CPUs.
JOB = {"cpus_per_task": 1, "mem_gb": 1, "timeout_min": 10, "array_parallelism": 2, "poll_s": 0.5}
#: The same for the command line, through its environment.
JOB_ENV = {"TVOLIB_SLURM_CPUS": "1", "TVOLIB_SLURM_MEM_GB": "1", "TVOLIB_SLURM_TIMEOUT_MIN": "10",
           "TVOLIB_SLURM_ARRAY_PARALLELISM": "2", "TVOLIB_SLURM_POLL_S": "0.5"}
#: Job name of the time-limited run (the other tests' queries leave it out).
TIME_LIMIT_JOB = "tvolib-test-timelimit"
#: Job name of the failing run.
FAILING_JOB = "tvolib-test-fail"
#: Seconds of training (on a whole core) the time-limited run needs: more than its first job gets.
#: With a 1-minute limit and ``slurm_signal_delay_s=5`` Slurm sends the warning signal 25-55 s after
#: the start (it checks every 30 s), after a few seconds of start-up: 90 s leaves a margin for the
#: probe's error; 8 requeues leave room for a slower machine.
TIME_LIMIT_WORK_S = 90.0
#: Seconds the runner may take to notice a cancelled job: far less than ``wait_for_jobs``'s
#: ``lost_after_s`` (60 s), since ``squeue -t all`` shows the CANCELLED state at once.
NOTICE_S = 30.0
#: Run folder columns that measure time, not the run: they differ between any two runs.
TIMING = re.compile(r"seconds$")


def _sweep_options(name: str, **slurm: Any) -> dict[str, Any]:
    """Options of one test sweep: ``name`` is its Slurm job name (to find and cancel it); ``slurm``
    overrides :data:`JOB`."""
    return {"slurm": {**JOB, **slurm}, "executor_options": {"name": name}}


# --------------------------------------------------------------------------------------------
# Sweeps in a child process (a cancelled job must not hang the test) and Slurm queries
# --------------------------------------------------------------------------------------------

_DRIVER = """
import json, sys
from tvolib import runs
spec = json.loads(open(sys.argv[1]).read())
configs = [runs.config_from_dict(record) for record in spec["configs"]]
runs.run_configs(configs, executor="slurm", results_root=spec["results_root"], data_root=spec["data_root"],
                 **spec["options"])
"""


def _start_sweep(folder: Path, configs: list[Any], data_root: Path | str, options: dict[str, Any],
                 log_name: str) -> tuple[subprocess.Popen, Path]:
    """Run ``run_configs(configs, executor="slurm", **options)`` in a child process; its console goes
    to a file."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / f"{log_name}.json"
    spec.write_text(json.dumps({
        "configs": [{"kind": runs.config_kind(c), "config": c.to_dict()} for c in configs],
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
        time.sleep(0.2)


def _while_running(proc: subprocess.Popen, sample: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Call ``sample()`` every half second in a thread until ``proc`` ends; the samples in a list."""
    samples: list[Any] = []

    def loop() -> None:
        while proc.poll() is None:
            samples.append(sample())
            time.sleep(0.5)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread, samples


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
        runs.run_configs(configs, executor="local", results_root=root, data_root=data_root, max_workers=1,
                         progress=False)


def _numbers(config: Any, root: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """A complete run's final metrics and history, without the wall-clock columns."""
    final = {k: v for k, v in runs.load_final(config, root).items() if not TIMING.search(k)}
    history = runs.load_history(config, root)
    return final, history.drop(columns=[c for c in history.columns if TIMING.search(c)])


def _assert_same_numbers(configs: list[Any], root: Path, reference: Path) -> None:
    """Exact: the job trained each run as the local reference did (``train``, one thread, this machine)."""
    for config in configs:
        final, history = _numbers(config, root)
        ref_final, ref_history = _numbers(config, reference)
        assert final == ref_final, f"{runs.config_digest(config)}: final metrics differ from the local run"
        pd.testing.assert_frame_equal(history, ref_history, check_exact=True)


def _assert_close_numbers(configs: list[Any], root: Path, reference: Path) -> None:
    """To float32 rounding (tests/README.md): stacked runs against the local unstacked ones (other kernels)."""
    for config in configs:
        name, terms = runs.config_digest(config), run_terms(config)
        final, ref_final = (runs.load_final(config, folder) for folder in (root, reference))
        assert_runs_close(final, ref_final, terms=terms, path=f"{name}/final.json")
        history, ref_history = (runs.load_history(config, folder, as_records=True) for folder in (root, reference))
        assert_runs_close(history, ref_history, terms=terms, path=f"{name}/history.csv")


def _status_row(config: Any, root: Path) -> dict[str, Any]:
    return runs.status([config], results_root=root).iloc[0].to_dict()


def _existing_paths(text: str) -> list[Path]:
    """The existing files whose absolute paths appear in ``text``."""
    return [Path(p) for p in re.findall(r"(/[^\s'\",;()]+)", text) if Path(p).is_file()]


# --------------------------------------------------------------------------------------------
# The long run of the time-limit test, started before the first test
# --------------------------------------------------------------------------------------------

def _epochs_lasting(seconds: float, data_root: Path) -> int:
    """Epochs of :func:`_sbn_run` that train for about ``seconds`` on a whole core of this machine
    (timed on a short run: training, evaluation and bandit time per epoch, without start-up).

    The probe runs while the other test workers load the CPUs, so its wall time is scaled by the
    share of a core it got (its CPU time over its wall time): unscaled, a probe that got a third of
    a core sized a run that ended before its time limit did."""
    probe = _sbn_run(20)
    wall, cpu = time.perf_counter(), time.process_time()
    with _one_torch_thread():
        final = train(probe, None, data_root=data_root, progress=False).final
    share = min(1.0, (time.process_time() - cpu) / (time.perf_counter() - wall))
    per_epoch = share * sum(final[k] for k in ("train_seconds", "eval_seconds", "bandit_seconds")) / probe.epochs
    return max(10, int(seconds / per_epoch) // 10 * 10)


def _checkpoint_epoch(folder: Path) -> int | None:
    """The epoch of the run's checkpoint, None while there is none."""
    with contextlib.suppress(OSError, checkpoint.CorruptFileError):
        return int(checkpoint.load(folder / CHECKPOINT_FILE)["epoch"])
    return None


@pytest.fixture(scope="module", autouse=True)
def time_limited_sweep(tmp_path_factory: pytest.TempPathFactory,
                       data_root: Path) -> Iterator[tuple[Any, Path, subprocess.Popen, Path, list[int | None]]]:
    """One run longer than its 1-minute time limit, started before the first test of this module,
    with the epochs of its checkpoint sampled every half second."""
    folder = tmp_path_factory.mktemp("timelimit")
    config = _sbn_run(_epochs_lasting(TIME_LIMIT_WORK_S, data_root))
    options = _sweep_options(TIME_LIMIT_JOB, timeout_min=1, max_requeues=8)
    options["executor_options"]["slurm_signal_delay_s"] = 5
    proc, log = _start_sweep(folder, [config], data_root, options, "sweep")
    thread, epochs = _while_running(proc, lambda: _checkpoint_epoch(runs.run_dir(config, folder / "results")))
    # Running before the other tests submit anything, so that it does not wait behind their jobs.
    _wait_for(lambda: proc.poll() is not None or any(
        row["name"] == TIME_LIMIT_JOB and row["state"] == "RUNNING" for row in _queue(exclude="")),
        120, "the time-limited job to start")
    yield config, folder / "results", proc, log, epochs
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    _scancel(TIME_LIMIT_JOB)
    thread.join()


@pytest.fixture(scope="module", autouse=True)
def failing_sweep(time_limited_sweep: Any, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[Any, Path, subprocess.Popen, Path, Path]]:
    """A run whose data root does not exist, started after the time-limited one (a short job)."""
    folder = tmp_path_factory.mktemp("failing")
    config, bad_root = sweeps.figure_configs("fig1", "smoke")[0], folder / "no-data-here"
    proc, log = _start_sweep(folder, [config], bad_root, _sweep_options(FAILING_JOB), "sweep")
    yield config, folder / "results", proc, log, bad_root
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    _scancel(FAILING_JOB)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

def test_table_sweep_on_slurm_matches_local_executor(tmp_path: Path, data_root: Path) -> None:
    """`python -m tvolib run table_permutation --executor slurm`: one job array throttled to one task
    at a time, a quiet console (the plan, one line per array, its progress bar), the local
    executor's numbers, and ``sacct`` never called (a stand-in on ``PATH`` records any call)."""
    assert subprocess.run(["sacct", "-n"], capture_output=True, timeout=30).returncode != 0, (
        "sacct answers on this cluster: these tests must run without accounting (scripts/slurm-local.sh)")
    configs = sweeps.figure_configs("table_permutation", "smoke")
    root, log, sacct_calls = tmp_path / "slurm", tmp_path / "console.log", tmp_path / "sacct_calls"
    spy = tmp_path / "bin" / "sacct"
    spy.parent.mkdir()
    spy.write_text(f'#!/bin/sh\necho "$@" >> {sacct_calls}\nexit 1\n')
    spy.chmod(0o755)
    env = {**os.environ, **JOB_ENV, "TVOLIB_SLURM_ARRAY_PARALLELISM": "1", "TVOLIB_DOWNLOAD": "0",
           "PATH": f"{spy.parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "tvolib", "run", "table_permutation", "--profile", "smoke",
               "--executor", "slurm", "--results-root", str(root), "--data-root", str(data_root)]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
    thread, polls = _while_running(proc, lambda: [
        {**row, "throttle": _throttle(row["array_job"]) if row["state"] == "PENDING" else None}
        for row in _queue(exclude=TIME_LIMIT_JOB) if row["name"] == "tvolib"])
    _local_reference(configs, tmp_path / "local", data_root)  # while the sweep runs
    code = _finish(proc, log, 240, "the table_permutation sweep", "tvolib")
    thread.join()
    console = log.read_text(errors="replace")
    assert code == 0, console[-3000:]
    _assert_same_numbers(configs, root, tmp_path / "local")
    assert (runs.status(configs, results_root=root)["status"] == "done").all()

    seen = [row for rows in polls for row in rows]
    arrays = {row["array_job"] for row in seen}
    assert len(arrays) == 1, f"expected the sweep's {len(configs)} runs as one job array, squeue showed {arrays}"
    assert max(sum(row["state"] == "RUNNING" for row in rows) for rows in polls) <= 1
    throttles = {row["throttle"] for row in seen if row["state"] == "PENDING"}
    assert throttles == {1}, f"array throttle (%N) seen while a task waited: {throttles}"
    lines = [line for line in console.replace("\r", "\n").splitlines() if line.strip()]
    noise = [line for line in lines if re.search(r"sacct|Bypassing|accounting storage|WARNING", line)]
    assert not noise, f"the console shows {len(noise)} lines of submitit/sacct warnings, e.g. {noise[:2]}"
    assert sum(f"submitted {len(configs)} run(s) as Slurm array" in line for line in lines) == 1, console
    assert not sacct_calls.exists(), f"sacct was called: {sacct_calls.read_text()}"


def test_stacks_are_one_job_each_with_the_numbers_of_single_runs(tmp_path: Path, data_root: Path) -> None:
    """``stack="on"``: six runs of one shape as two stack jobs (``max_stack=3``) of one array; each run
    gets the numbers of the same run trained alone, to float32 rounding (stacked kernels)."""
    base = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=2, d=3, eval_every=2)
    configs = [base.replace(seed=seed, schedule=schedule) for seed in (1, 2) for schedule in ("log", "linear", "moments")]
    options = {**_sweep_options("tvolib-test-stack"), "stack": "on", "max_stack": 3}
    proc, log = _start_sweep(tmp_path, configs, data_root, options, "stack")
    _local_reference(configs, tmp_path / "local", data_root)  # while the sweep runs
    code = _finish(proc, log, 240, "the stacked sweep", "tvolib-test-stack")
    console = log.read_text(errors="replace")
    assert code == 0, console[-3000:]
    assert "submitted 2 job(s) (6 runs in 2 stack(s)) as Slurm array" in console, console[-3000:]
    _assert_close_numbers(configs, tmp_path / "results", tmp_path / "local")


def test_cancelled_job_resumes_from_its_checkpoint(tmp_path: Path, data_root: Path) -> None:
    """``scancel`` mid-run: the sweep notices at once (``squeue -t all`` shows CANCELLED; no sacct to
    ask) and ends, the run not done; the rerun resumes it, with the numbers of an uninterrupted run."""
    config, name = _sbn_run(400), "tvolib-test-cancel"  # ~20 s left after its first checkpoint on an idle machine
    root = tmp_path / "results"
    folder = runs.run_dir(config, root)
    proc, log = _start_sweep(tmp_path, [config], data_root, _sweep_options(name), "first")
    _wait_for(lambda: (folder / CHECKPOINT_FILE).exists() or proc.poll() is not None, 180, "a first checkpoint")
    assert not (folder / FINAL_FILE).exists(), "the run ended before it was cancelled; lengthen it"
    assert [r["state"] for r in _queue(exclude=TIME_LIMIT_JOB) if r["name"] == name] == ["RUNNING"]
    assert proc.poll() is None, f"the sweep ended while its job ran:\n{_tail(log)}"
    subprocess.run(["scancel", "-u", USER, "-n", name], check=True, timeout=30)
    cancelled = time.monotonic()
    epoch = _checkpoint_epoch(folder)

    code = _finish(proc, log, 120, "the runner did not notice that its job was cancelled", name)
    noticed = time.monotonic() - cancelled
    assert code != 0 and f"{folder.name}: Slurm state CANCELLED (log: " in log.read_text(), _tail(log)
    assert noticed < NOTICE_S, f"the runner took {noticed:.0f} s to notice the cancellation"
    assert _status_row(config, root)["status"] == "partial"
    assert epoch is not None and 0 < epoch < config.epochs

    proc, log = _start_sweep(tmp_path, [config], data_root, _sweep_options(name), "rerun")
    _local_reference([config], tmp_path / "local", data_root)  # while the rerun runs
    assert _finish(proc, log, 180, "the rerun", name) == 0, _tail(log)
    assert "1 partial (resume)" in log.read_text(), _tail(log)
    _assert_same_numbers([config], root, tmp_path / "local")


def test_failed_job_shows_its_error_and_log(failing_sweep: tuple[Any, Path, subprocess.Popen, Path, Path]) -> None:
    """A run whose data root does not exist: the sweep's summary gives the exception's first line and
    the job's log (which holds the traceback); ``status`` (Python and command line) shows that line."""
    config, root, proc, log, bad_root = failing_sweep
    assert _finish(proc, log, 180, "the failing sweep", FAILING_JOB) != 0
    summary = log.read_text(errors="replace")
    headline = f"DatasetNotFoundError: dataset 'mnist' not found under data root {bad_root}"
    found = re.search(rf"{runs.config_digest(config)}: {re.escape(headline)}.* \(log: (\S+)\)$", summary, re.M)
    assert found, f"the summary lacks '<run>: {headline}... (log: <path>)':\n{_tail(log)}"
    assert "DatasetNotFoundError" in Path(found.group(1)).read_text(errors="replace"), found.group(1)

    row = _status_row(config, root)
    assert row["status"] not in ("done", "missing"), row
    assert row["error"].startswith(headline), row["error"]
    cli = subprocess.run([sys.executable, "-m", "tvolib", "status", "fig1", "--profile", "smoke",
                          "--results-root", str(root)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert headline in cli.stdout, cli.stdout + cli.stderr


def test_time_limit_requeues_and_resumes(
        time_limited_sweep: tuple[Any, Path, subprocess.Popen, Path, list[int | None]]) -> None:
    """A run longer than its 1-minute time limit: Slurm's warning signal makes submitit checkpoint
    and requeue the job, which resumes from the run's checkpoint (its epoch never goes back) until
    the run is complete."""
    config, root, proc, log, epochs = time_limited_sweep
    assert _finish(proc, log, 300, "the time-limited sweep", TIME_LIMIT_JOB) == 0, _tail(log)
    final, history = _numbers(config, root)
    assert final["epochs"] == config.epochs
    assert history["epoch"].tolist() == list(range(config.epochs + 1))
    job_logs = "".join(p.read_text(errors="replace") for p in root.rglob("*_log.*"))  # submitit's
    assert "Requeued job" in job_logs, "the job was never requeued: the run fitted in its first minute"
    seen = [e for e in epochs if e is not None]
    assert seen and seen == sorted(seen), f"the checkpoint's epoch went back (restarted, not resumed): {seen}"
    assert _status_row(config, root)["status"] == "done"
