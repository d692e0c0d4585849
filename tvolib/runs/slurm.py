"""Slurm through submitit: the job parameters users set, and job state read without ``sacct``.

One sweep is one job array (``slurm_array_parallelism`` tasks at a time). A job's state is read
from the run folder (a verified ``final.json``: done; a fresh ``error.txt``: failed), from
submitit's result file (success or the traceback), and from ``squeue -t all`` (pending, running, or
ended as CANCELLED/TIMEOUT/FAILED/...), never from ``sacct``, which answers ``UNKNOWN`` on clusters
without accounting.
"""
from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shlex
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from tvolib.runs.store import ERROR_FILE, PROBLEMS, error_headline, inspect_run, run_dir

__all__ = [
    "SlurmOptions", "SLURM_ENV", "parse_sbatch_flags", "slurm_parameters",
    "JobState", "error_headline", "job_state", "squeue_states", "wait_for_jobs", "quiet_sacct",
]

#: SlurmOptions field -> environment variable that sets it.
SLURM_ENV: dict[str, str] = {
    "partition": "TVOLIB_SLURM_PARTITION",
    "timeout_min": "TVOLIB_SLURM_TIMEOUT_MIN",
    "mem_gb": "TVOLIB_SLURM_MEM_GB",
    "cpus_per_task": "TVOLIB_SLURM_CPUS",
    "gpus_per_task": "TVOLIB_SLURM_GPUS",
    "array_parallelism": "TVOLIB_SLURM_ARRAY_PARALLELISM",
    "account": "TVOLIB_SLURM_ACCOUNT",
    "extra": "TVOLIB_SLURM_EXTRA",
    "log_folder": "TVOLIB_SLURM_LOGS",
    "max_requeues": "TVOLIB_SLURM_MAX_REQUEUES",
    "poll_s": "TVOLIB_SLURM_POLL_S",
}

_CASTS: dict[str, type] = {"timeout_min": int, "mem_gb": float, "cpus_per_task": int, "gpus_per_task": int,
                           "array_parallelism": int, "max_requeues": int, "poll_s": float}
_RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "RESIZING"}
_PENDING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "PREEMPTED", "RESV_DEL_HOLD"}
#: Ended without an error of its own: the result file should follow (shared file systems may lag).
_COMPLETED = {"COMPLETED"}


def parse_sbatch_flags(text: str) -> dict[str, Any]:
    """``"--qos=high --exclusive"`` -> ``{"qos": "high", "exclusive": True}`` (submitit's
    ``slurm_additional_parameters``; it writes each back as ``#SBATCH --key=value``)."""
    flags: dict[str, Any] = {}
    for token in shlex.split(text):
        if not token.startswith("--") or len(token) < 3:
            raise ValueError(f"extra sbatch flags must look like '--key=value' or '--flag', got {token!r} in {text!r}")
        key, eq, value = token[2:].partition("=")
        flags[key.replace("-", "_")] = value if eq else True
    return flags


@dataclass(frozen=True)
class SlurmOptions:
    """The Slurm options of a sweep (defaults sized for the ``paper`` profile's largest runs).

    Each field can be set by its environment variable (:data:`SLURM_ENV`), by the CLI
    (``--slurm-partition`` ...), or by :meth:`from_env` overrides, in increasing priority.

    Attributes:
        partition: ``--partition`` (default: the cluster's default partition).
        timeout_min: time limit per job in minutes; a job reaching it is requeued and resumes.
        mem_gb: memory per job.
        cpus_per_task: CPUs per job (the run's torch threads).
        gpus_per_task: GPUs per job.
        array_parallelism: at most this many tasks of the sweep's array run at once.
        account: ``--account``.
        extra: further ``sbatch`` flags, e.g. ``"--qos=high --constraint=v100"``.
        log_folder: submitit's folder (job scripts, logs, results); default ``<results>/submitit``.
        max_requeues: how often submitit requeues a job that reaches its time limit (preemptions do
            not count); a run can thus span ``max_requeues + 1`` time limits.
        poll_s: seconds between two looks at ``squeue`` and the run folders while waiting.
    """

    partition: str | None = None
    timeout_min: int = 720
    mem_gb: float = 16.0
    cpus_per_task: int = 4
    gpus_per_task: int = 0
    array_parallelism: int = 64
    account: str | None = None
    extra: str = ""
    log_folder: str | None = None
    max_requeues: int = 10
    poll_s: float = 15.0

    def __post_init__(self) -> None:
        for name, low in (("timeout_min", 1), ("cpus_per_task", 1), ("gpus_per_task", 0), ("array_parallelism", 1),
                          ("max_requeues", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"Slurm option {name} must be an int >= {low}, got {value!r}")
        for name in ("mem_gb", "poll_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Slurm option {name} must be a positive number, got {value!r}")
        parse_sbatch_flags(self.extra)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "SlurmOptions":
        """Defaults, then the environment (:data:`SLURM_ENV`), then ``overrides`` (``None`` values ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, var in SLURM_ENV.items():
            raw = env.get(var)
            if raw:
                cast = _CASTS.get(name, str)
                try:
                    values[name] = cast(raw)
                except ValueError:
                    raise ValueError(f"${var} must be a {cast.__name__}, got {raw!r}") from None
        unknown = sorted(set(overrides) - set(SLURM_ENV))
        if unknown:
            raise ValueError(f"unknown Slurm options {unknown}; accepted: {sorted(SLURM_ENV)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)

    def to_submitit(self) -> dict[str, Any]:
        """The parameters of ``submitit.AutoExecutor.update_parameters`` (``max_requeues`` is not one:
        it goes to the executor's constructor as ``slurm_max_num_timeout``)."""
        params: dict[str, Any] = {
            "name": "tvolib", "timeout_min": self.timeout_min, "mem_gb": self.mem_gb,
            "cpus_per_task": self.cpus_per_task, "gpus_per_node": self.gpus_per_task,
            "slurm_array_parallelism": self.array_parallelism,
        }
        if self.partition:
            params["slurm_partition"] = self.partition
        if self.account:
            params["slurm_account"] = self.account
        extra = parse_sbatch_flags(self.extra)
        if extra:
            params["slurm_additional_parameters"] = extra
        return params


def slurm_parameters(**overrides: Any) -> dict[str, Any]:
    """submitit parameters from the environment (:meth:`SlurmOptions.from_env`), then ``overrides``
    in submitit's names (e.g. ``slurm_partition="gpu"``, ``timeout_min=60``)."""
    return {**SlurmOptions.from_env().to_submitit(), **overrides}


# --------------------------------------------------------------------------------------------
# Job state without sacct
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobState:
    """``state``: ``"done"``, ``"failed"``, ``"running"``, ``"pending"`` or ``"lost"`` (not in the
    queue and no result yet: failed once it stays so); ``detail``: the error or the queue state."""

    state: str
    detail: str = ""


def _read_result(path: Path) -> tuple[str, Any] | None:
    try:
        with open(path, "rb") as f:
            outcome = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None  # absent, or still being written
    return outcome if isinstance(outcome, tuple) and len(outcome) == 2 else None


def job_state(config: Any | list[Any], results_root: str | os.PathLike[str], result_file: Path, queue_state: str | None,
              submitted_at: float) -> JobState:
    """The state of one array task, from files and the queue only.

    Args:
        config: the task's run config, or the list of configs of a stack task (done when all are).
        results_root: the results folder.
        result_file: submitit's result pickle of the task (``("success", x)`` or ``("error", tb)``).
        queue_state: the task's ``squeue -t all`` state, ``None`` when it is not in the queue.
        submitted_at: submission time (``time.time()``); older ``error.txt`` files are ignored.

    Returns:
        A :class:`JobState`; a failure's detail is the exception's first line (:func:`error_headline`)
        or the Slurm state it ended in (e.g. ``"Slurm state CANCELLED"``). A task that ``COMPLETED``
        without a result yet, or left the queue, is ``"lost"``.
    """
    configs = config if isinstance(config, list) else [config]
    states = [inspect_run(c, results_root) for c in configs]
    if all(run.status == "done" for run in states):
        return JobState("done")
    for run in states:
        if run.status in PROBLEMS:
            return JobState("failed", f"run folder {run.status}: {run.reason}")
    run = next(run for run in states if run.status != "done")
    outcome = _read_result(result_file)
    if outcome is not None and outcome[0] == "error":
        return JobState("failed", error_headline(str(outcome[1])))
    if outcome is not None:
        return JobState("failed", f"the job returned but its run folder is {run.status}")
    for error in (run_dir(c, results_root) / ERROR_FILE for c in configs):
        with contextlib.suppress(OSError):
            if error.stat().st_mtime >= submitted_at and queue_state not in _RUNNING | _PENDING:
                return JobState("failed", error_headline(error.read_text(errors="replace")))
    if queue_state in _RUNNING:
        return JobState("running", queue_state)
    if queue_state in _PENDING:
        return JobState("pending", queue_state)
    if queue_state is not None and queue_state not in _COMPLETED:  # CANCELLED, TIMEOUT, FAILED, OUT_OF_MEMORY...
        return JobState("failed", f"Slurm state {queue_state}")
    return JobState("lost", "ended without a result" if queue_state else "not in the queue and no result")


def squeue_states(job_ids: Sequence[str], run: Callable[..., Any] = subprocess.run) -> dict[str, str]:
    """``{task id: state}`` of the given array tasks (ids like ``"123_4"``) that Slurm still lists.

    ``squeue -t all -r``: also tasks that ended (``COMPLETED``, ``CANCELLED``, ``TIMEOUT``,
    ``FAILED`` ...), which Slurm keeps listing for ``MinJobAge`` seconds (default 300).
    """
    arrays = sorted({str(j).split("_")[0] for j in job_ids})
    if not arrays:
        return {}
    try:
        out = run(["squeue", "-h", "-r", "-t", "all", "-o", "%i %T", "-j", ",".join(arrays)],
                  capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise OSError("squeue not found: the slurm executor needs the Slurm client commands on PATH") from None
    if out.returncode != 0:  # e.g. "Invalid job id specified" once every task has left the queue
        return {}
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            states[parts[0]] = parts[1].upper().rstrip("+")
    return states


class _SacctFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Bypassing sacct error" not in record.getMessage()


@contextlib.contextmanager
def quiet_sacct() -> Iterator[None]:
    """Silence submitit's per-poll ``Bypassing sacct error`` warnings (accounting off) inside the block."""
    logger, flt = logging.getLogger("submitit"), _SacctFilter()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


def wait_for_jobs(jobs: Sequence[Any], configs: Sequence[Any], results_root: str | os.PathLike[str], *,
                  submitted_at: float, poll_s: float = 10.0, lost_after_s: float = 60.0,
                  on_finished: Callable[[str, JobState], None] | None = None,
                  queue: Callable[[Sequence[str]], dict[str, str]] = squeue_states) -> dict[str, JobState]:
    """Poll until every job is done or failed; return ``{job_id: final JobState}``.

    ``jobs`` are submitit jobs (``job_id``, ``paths.result_pickle``, ``paths.stderr``) in the order
    of ``configs`` (a config, or a stack's list of configs, per job). A task that stays ``lost`` for ``lost_after_s`` seconds counts as failed (killed,
    cancelled or out of memory before writing anything). A failed task's detail names its log file.
    """
    pending = {job.job_id: (job, config) for job, config in zip(jobs, configs)}
    lost_since: dict[str, float] = {}
    final: dict[str, JobState] = {}
    while pending:
        states = queue(list(pending))
        now = time.time()
        for job_id, (job, config) in list(pending.items()):
            state = job_state(config, results_root, Path(job.paths.result_pickle), states.get(job_id), submitted_at)
            if state.state == "lost":
                if now - lost_since.setdefault(job_id, now) < lost_after_s:
                    continue
                state = JobState("failed", "ended without a result (killed, cancelled or out of memory?)")
            lost_since.pop(job_id, None)
            if state.state == "failed":
                state = JobState("failed", f"{state.detail} (log: {job.paths.stderr})")
            if state.state in ("done", "failed"):
                final[job_id] = state
                del pending[job_id]
                if on_finished is not None:
                    on_finished(job_id, state)
        if pending:
            time.sleep(poll_s)
    return final
