"""Running a sweep into the store: in this process, a local process pool, submitit or Slurm.

Executors (argument ``executor``, else ``$TVOLIB_EXECUTOR``, else ``"local"``):

- ``local``: a process pool (spawn context, one torch thread per worker) of ``max_workers``
  processes (default ``$TVOLIB_MAX_WORKERS`` or the CPU count); with one worker (or one run) the
  runs execute in this process, which is simpler to debug.
- ``slurm``: one submitit job array per sweep; every task is a :class:`SubmititRun`, which submitit
  requeues on preemption and on timeout (at most ``max_requeues`` times) and which then resumes from
  the run's checkpoint. Options: :class:`tvolib.runs.slurm.SlurmOptions`; job state is read
  without ``sacct``; a failed job's error (first line) and log path end the run's ``error.txt``.
- ``submitit-local`` / ``debug``: the same submitit path with submitit's local (subprocesses) or
  debug (in process) executors, to test it without a cluster.

Runs of one stack key can train together as one job (:mod:`tvolib.runs.stacks`; ``stack``, else
``$TVOLIB_STACK``: ``auto`` stacks on CUDA): locally the stacks train one after the other in this
process (the device is theirs) while the runs that cannot be stacked go to the process pool; with
Slurm every stack is one task of the array.

A failed run does not stop the others; :func:`run_configs` raises :class:`RunFailedError` at the
end, naming each failed run and its error.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import submitit
import torch
from tqdm.auto import tqdm

from tvolib import paths
from tvolib.checkpoint import atomic_write
from tvolib.runs.cost import estimate_seconds
from tvolib.runs.plan import default_workers, format_plan, plan
from tvolib.runs.readers import results_frame, unique_configs
from tvolib.runs.run import TrainArg, check_device, check_folders, run_one, run_stack
from tvolib.runs.stacks import resolve_stack, stack_jobs, stacking_active, sweep_max_stack
from tvolib.runs.slurm import SlurmOptions, quiet_sacct, wait_for_jobs
from tvolib.runs.store import ERROR_FILE, PROBLEMS, RunFolderError, config_digest, inspect_run, run_dir
from tvolib.stacked import StepPool
from tvolib.training.run_folder import check_writable
from tvolib.training.schedule import BANDIT_SCHEDULES

__all__ = ["EXECUTORS", "RunFailedError", "resolve_executor", "run_configs", "SubmititRun"]

#: Executor names accepted by :func:`run_configs` (and ``$TVOLIB_EXECUTOR``).
EXECUTORS: tuple[str, ...] = ("local", "slurm", "submitit-local", "debug")


class RunFailedError(RuntimeError):
    """One or more runs of a sweep failed; ``failures`` maps ``<kind>-<digest>`` to the error text."""

    def __init__(self, failures: Mapping[str, str], results_root: Path | None = None) -> None:
        self.failures = dict(failures)
        where = f" (tracebacks in {results_root}/<run>/{ERROR_FILE})" if results_root else ""
        lines = [f"{len(self.failures)} run(s) failed{where}:"]
        lines += [f"  {key}: {msg.strip().splitlines()[0] if msg.strip() else msg}" for key, msg in self.failures.items()]
        super().__init__("\n".join(lines))


def resolve_executor(executor: str | None = None) -> str:
    """``executor``, else ``$TVOLIB_EXECUTOR``, else ``"local"``; a clear ``ValueError`` if unknown."""
    name = executor or os.environ.get("TVOLIB_EXECUTOR") or "local"
    key = name.strip().lower().replace("_", "-")
    if key not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; accepted executors: {', '.join(EXECUTORS)} "
                         f"(argument 'executor' or $TVOLIB_EXECUTOR)")
    return key


# --------------------------------------------------------------------------------------------
# Local executors
# --------------------------------------------------------------------------------------------

def _run_job(config: Any, options: dict[str, Any]) -> tuple[str, str | None]:
    """Worker entry point: never raises (exceptions may not pickle); returns (run name, error or None)."""
    name = config_digest(config)
    try:
        run_one(config, **options)
        return name, None
    except Exception as e:  # noqa: BLE001 - reported by run_configs after the others finish
        return name, f"{type(e).__name__}: {e}"


def _bandit_pool(jobs: Sequence[Sequence[Any]], cpus: int) -> contextlib.AbstractContextManager[StepPool | None]:
    """A :class:`StepPool` (closed on exit) for the GP-bandit rounds of stacks when the host has cores
    to spare (at least 4: on 2 cores a pool measured no faster than stepping inline), else ``None``."""
    bandits = any(getattr(c, "schedule", "") in BANDIT_SCHEDULES for job in jobs if len(job) > 1 for c in job)
    return StepPool(workers=min(cpus - 1, 64)) if bandits and cpus >= 4 else contextlib.nullcontext()


def _run_stacks(stacks: Sequence[Sequence[Any]], options: dict[str, Any], cpus: int,
                on_run: Any = None) -> dict[str, str]:
    """Train each stack in this process (:func:`run_stack`), one after the other; ``{run: error}``."""
    failures: dict[str, str] = {}
    options = {k: v for k, v in options.items() if k != "train_fn"}  # stacks train with train_many
    with _bandit_pool(stacks, cpus) as pool:
        for job in stacks:
            try:
                outcomes: list[Any] = run_stack(job, pool=pool, **options)
            except Exception as e:  # noqa: BLE001 - e.g. a corrupt folder: every run of this stack fails with it
                outcomes = [e] * len(job)
            for config, outcome in zip(job, outcomes):
                if isinstance(outcome, BaseException):
                    failures[config_digest(config)] = f"{type(outcome).__name__}: {outcome}"
                if on_run is not None:
                    on_run()
    return failures


#: What to do when a script calls :func:`run_configs` at import time (its worker processes import it).
MAIN_GUARD_ADVICE = ('put the call under `if __name__ == "__main__":` in your script: worker processes '
                     "start by importing it (spawn), and must not start a sweep of their own")


def _check_not_bootstrapping() -> None:
    """Refuse to start a sweep from a worker process that is importing the user's script."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(f"run_configs was called while a worker process imported your script; "
                           f"{MAIN_GUARD_ADVICE}")


def _init_worker() -> None:
    """Pool initializer: one torch thread per worker so that workers do not oversubscribe the cores."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def _progress_bar(total: int, enabled: bool, desc: str) -> Any:
    return tqdm(total=total, disable=not enabled, desc=desc, unit="run", file=sys.stdout)


def _run_in_process(todo: Sequence[Any], options: dict[str, Any], progress: bool,
                    stacks: Sequence[Sequence[Any]] = ()) -> dict[str, str]:
    failures: dict[str, str] = {}
    with _progress_bar(len(todo) + sum(len(job) for job in stacks), progress, "runs") as bar:
        failures.update(_run_stacks(stacks, options, os.cpu_count() or 1, on_run=lambda: bar.update(1)))
        for config in todo:
            name, error = _run_job(config, options)
            if error is not None:
                failures[name] = error
            bar.update(1)
    return failures


def _run_pool(todo: Sequence[Any], options: dict[str, Any], workers: int, progress: bool,
              stacks: Sequence[Sequence[Any]] = ()) -> dict[str, str]:
    """``todo`` (single runs) in a process pool; meanwhile ``stacks`` train in this process."""
    failures: dict[str, str] = {}
    ctx = multiprocessing.get_context("spawn")
    total = len(todo) + sum(len(job) for job in stacks)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) if todo else None
    try:
        with _progress_bar(total, progress, "runs") as bar:
            futures = {pool.submit(_run_job, config, options): config_digest(config) for config in todo} if pool else {}
            for future in futures:
                future.add_done_callback(lambda _: bar.update(1))
            if stacks:
                failures.update(_run_stacks(stacks, {**options, "progress": False}, os.cpu_count() or 1,
                                            on_run=lambda: bar.update(1)))
            for future in as_completed(futures):
                try:
                    name, error = future.result()
                except Exception as e:  # noqa: BLE001 - a worker died (e.g. out of memory)
                    name, error = futures[future], (f"{type(e).__name__}: {e} (worker process died: out of "
                                                    f"memory, killed, or, from a script, {MAIN_GUARD_ADVICE})")
                if error is not None:
                    failures[name] = error
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
    return failures


# --------------------------------------------------------------------------------------------
# submitit and Slurm
# --------------------------------------------------------------------------------------------

class SubmititRun(submitit.helpers.Checkpointable):
    """A submitit job: ``run_one`` of a config, or ``run_stack`` of a list of configs (a stack), with
    fixed options.

    On timeout or preemption submitit calls :meth:`checkpoint`, which requeues this same call; the
    trainer then resumes from the runs' checkpoints, so a long run spans several jobs. A stack job
    whose runs did not all finish raises :class:`RunFailedError`.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)

    def __call__(self, job: Any) -> Any:
        cpus = os.environ.get("SLURM_CPUS_PER_TASK", "")
        if cpus.isdigit():
            torch.set_num_threads(int(cpus))
        if not isinstance(job, list):
            return run_one(job, **self.options)
        options = {k: v for k, v in self.options.items() if k != "train_fn"}
        with _bandit_pool([job], int(cpus) if cpus.isdigit() else 1) as pool:
            outcomes = run_stack(job, pool=pool, **options)
        failed = {config_digest(c): f"{type(o).__name__}: {o}" for c, o in zip(job, outcomes)
                  if isinstance(o, BaseException)}
        if failed:
            raise RunFailedError(failed)
        return outcomes

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Requeue this same call (``Checkpointable``'s), ignoring SIGTERM from now on.

        submitit next runs ``scontrol requeue``, and the requeue makes Slurm send SIGTERM to every
        process of the job, ``scontrol`` included: on a loaded node it died of it before exiting, and
        submitit took that for a failed requeue (the run was marked failed). An ignored signal stays
        ignored in child processes, so ``scontrol`` finishes; Slurm's SIGKILL still ends the job
        ``KillWait`` seconds later. (submitit's own SIGTERM handler only logged the signal.)
        """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return super().checkpoint(*args, **kwargs)


def _record_failure(config: Any, root: Path, detail: str) -> None:
    """End the run's ``error.txt`` with ``detail`` (the error's first line and the job's log), after the
    traceback the job wrote there, or alone for a job that died without one, so that ``status`` shows it."""
    error = run_dir(config, root) / ERROR_FILE
    if error.parent.is_file():
        return
    with contextlib.suppress(OSError):
        previous = error.read_text(errors="replace") if error.is_file() else ""
        text = f"{previous.rstrip()}\n{detail}\n" if previous.strip() else f"{detail}\n"
        atomic_write(error, lambda f: f.write(text), "w")


def _runs_of(task: Any) -> list[Any]:
    """The configs of a job: a stack's list, or the one config."""
    return list(task) if isinstance(task, list) else [task]


def _wait_slurm(jobs: Sequence[Any], tasks: Sequence[Any], root: Path, submitted_at: float,
                progress: bool, poll_s: float) -> dict[str, str]:
    """Wait for a Slurm array, reading state from files and squeue (never sacct)."""
    by_job = {job.job_id: task for job, task in zip(jobs, tasks)}
    failures: dict[str, str] = {}
    array_id = str(jobs[0].job_id).split("_")[0] if jobs else "?"
    with _progress_bar(sum(len(_runs_of(t)) for t in tasks), progress, f"slurm array {array_id}") as bar:
        def finished(job_id: str, state: Any) -> None:
            runs = _runs_of(by_job[job_id])
            if state.state == "failed":
                for config in runs:  # in a failed stack, the runs that did not finish
                    if inspect_run(config, root).status != "done":
                        failures[config_digest(config)] = state.detail
                        _record_failure(config, root, state.detail)
            bar.update(len(runs))

        wait_for_jobs(jobs, tasks, root, submitted_at=submitted_at, poll_s=poll_s, on_finished=finished)
    return failures


def _wait_submitit(jobs: Sequence[Any], tasks: Sequence[Any], executor: str, progress: bool) -> dict[str, str]:
    failures: dict[str, str] = {}
    with _progress_bar(sum(len(_runs_of(t)) for t in tasks), progress, f"runs ({executor})") as bar:
        for job, task in zip(jobs, tasks):
            runs = _runs_of(task)
            try:
                job.result()
            except RunFailedError as e:  # a stack: the runs that failed
                failures.update(e.failures)
            except Exception as e:  # noqa: BLE001 - collected and raised after all jobs
                failures.update({config_digest(c): f"{type(e).__name__}: {e}" for c in runs})
            bar.update(len(runs))
    return failures


def _run_submitit(tasks: Sequence[Any], options: dict[str, Any], executor: str, root: Path, progress: bool,
                  slurm: SlurmOptions, executor_options: Mapping[str, Any]) -> dict[str, str]:
    """Submit ``tasks`` (configs, or lists of configs trained as one stack) as one job array and wait."""
    cluster = {"slurm": "slurm", "submitit-local": "local", "debug": "debug"}[executor]
    folder = Path(slurm.log_folder) if slurm.log_folder else root / "submitit"
    with quiet_sacct():
        requeues = {"slurm_max_num_timeout": slurm.max_requeues} if cluster == "slurm" else {}
        ex = submitit.AutoExecutor(folder=folder, cluster=cluster, **requeues)
        base = slurm.to_submitit() if cluster == "slurm" else {"name": "tvolib", "timeout_min": 60}
        ex.update_parameters(**{**base, **executor_options})
        submitted_at = time.time() - 1.0
        jobs = ex.map_array(SubmititRun(options), list(tasks))
        if cluster != "slurm":
            return _wait_submitit(jobs, tasks, executor, progress)
        if progress:
            stacks = [t for t in tasks if isinstance(t, list)]
            what = f"{len(jobs)} run(s)" if not stacks else \
                f"{len(jobs)} job(s) ({sum(len(t) for t in stacks)} runs in {len(stacks)} stack(s))"
            print(f"[tvolib] submitted {what} as Slurm array {jobs[0].job_id.split('_')[0]} "
                  f"(at most {slurm.array_parallelism} at once); logs in {folder}", flush=True)
        return _wait_slurm(jobs, tasks, root, submitted_at, progress, slurm.poll_s)


# --------------------------------------------------------------------------------------------
# A sweep
# --------------------------------------------------------------------------------------------

def _refuse_problems(frame: pd.DataFrame, root: Path) -> None:
    if not len(frame):
        return
    bad = frame[frame["status"].isin(PROBLEMS)]
    if len(bad):
        raise RunFolderError([(root / r["run"], r["status"], r["error"]) for _, r in bad.iterrows()])


def _slurm_options(slurm: SlurmOptions | Mapping[str, Any] | None, executor: str) -> SlurmOptions:
    """``slurm`` over the environment's ``$TVOLIB_SLURM_*`` (not read by the local executor, so that a
    bad Slurm setting never stops a local sweep)."""
    if isinstance(slurm, SlurmOptions):
        return slurm
    return SlurmOptions.from_env({} if executor == "local" else None, **dict(slurm or {}))


def _still_failed(failures: dict[str, str], configs: Sequence[Any], root: Path) -> dict[str, str]:
    """``failures`` without the runs that are done now (e.g. a run locked by a second process on the
    same sweep, which finished it)."""
    by_name = {config_digest(c): c for c in configs}
    return {name: error for name, error in failures.items()
            if name not in by_name or inspect_run(by_name[name], root).status != "done"}


def run_configs(
    configs: Iterable[Any],
    *,
    executor: str | None = None,
    results_root: str | os.PathLike[str] | None = None,
    data_root: str | os.PathLike[str] | None = None,
    max_workers: int | None = None,
    progress: bool = True,
    device: str | None = None,
    dry_run: bool = False,
    repair: bool = False,
    train_fn: TrainArg = None,
    slurm: SlurmOptions | Mapping[str, Any] | None = None,
    executor_options: Mapping[str, Any] | None = None,
    stack: str | None = None,
    max_stack: int | None = None,
    compile: bool = False,
) -> pd.DataFrame:
    """Make sure every config has a complete run, then return one row per distinct config.

    Identical configs run once; complete runs are read, never recomputed; partial ones resume.
    The plan (runs total/cached/partial/new, estimated wall time) is printed first when
    ``progress`` (or ``dry_run``). Corrupt or foreign folders stop the sweep before anything runs
    (:class:`RunFolderError` naming them) unless ``repair``.

    Args:
        configs: run configs (e.g. ``tvolib.sweeps.fig4_vae("quick")``).
        executor: one of :data:`EXECUTORS` (default ``$TVOLIB_EXECUTOR`` or ``"local"``).
        results_root: the results folder (default ``$TVOLIB_RESULTS`` or ``<repo>/results``).
        data_root: the dataset folder (default ``$TVOLIB_DATA``).
        max_workers: local executor's processes (default ``$TVOLIB_MAX_WORKERS`` or the CPU count).
        progress: print the plan and a progress bar.
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        dry_run: print the plan and return the :func:`tvolib.runs.status` frame; run nothing.
        repair: recompute corrupt or foreign folders.
        train_fn: a trainer replacing the kinds' (or ``{kind: trainer}``; picklable for process
            executors), for tests.
        slurm: :class:`~tvolib.runs.slurm.SlurmOptions` or a mapping of its fields (over the
            environment's), for ``executor="slurm"``.
        executor_options: submitit parameters applied last (submitit's names).
        stack: ``"auto"`` (stack on CUDA), ``"on"`` or ``"off"`` (default ``$TVOLIB_STACK`` or
            ``"auto"``), see :mod:`tvolib.runs.stacks`; stacked runs equal unstacked ones (bit for
            bit on the CPU when per-run sizes are multiples of 16, see ``docs/stacking.md``).
        max_stack: most runs per stack (default: what fits in the device's free memory, at most
            :data:`~tvolib.runs.stacks.MAX_STACK`; for Slurm an 80 GB GPU is assumed).
        compile: ``torch.compile`` the training minibatches (stacks: ``train_many(..., compile=True)``;
            image runs alone: ``train(..., compile=True)``). Not part of the configs' digests: a
            compiled run equals the eager one only to float32 rounding, so do not mix the two
            within one sweep.

    Returns:
        :func:`tvolib.runs.results_frame`: ``run``, ``kind``, ``digest``, the config's fields and
        the final metrics.

    Raises:
        RunFailedError: after all runs finished, if any failed.

    Example:
        >>> frame = run_configs(sweeps.fig4_vae("smoke"), max_workers=2)  # doctest: +SKIP
    """
    _check_not_bootstrapping()
    name = resolve_executor(executor)
    check_folders(results_root, data_root)
    root = paths.results_root(results_root)
    unique = unique_configs(configs)
    if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1):
        raise ValueError(f"max_workers must be a positive int or None, got {max_workers!r}")
    here = name in ("local", "debug")
    check_device(device, here=here)
    slurm_options = _slurm_options(slurm, name)
    workers = max_workers or default_workers()
    size, gpu = _stacking(unique, stack, max_stack, device, here)
    p = plan(unique, results_root=root, workers=workers, max_stack=size, gpu=gpu)
    if progress or dry_run:
        print(format_plan(p, name), flush=True)
    if dry_run:
        return p["status"]
    if not repair:
        _refuse_problems(p["status"], root)
    frame = p["status"]
    todo = [c for c, s in zip(unique, frame["status"] if len(frame) else []) if s != "done"]
    if todo:
        check_writable(root, what="results root", advice="choose another (--results-root / $TVOLIB_RESULTS)")
        todo.sort(key=estimate_seconds, reverse=True)  # largest first: near the best makespan (LPT)
        options = {"results_root": str(root), "data_root": None if data_root is None else str(data_root),
                   "device": device, "train_fn": train_fn, "repair": repair, "compile": compile}
        jobs = stack_jobs(todo, size) if size else [[c] for c in todo]
        if any(len(job) > 1 for job in jobs) and train_fn is not None:
            raise ValueError("train_fn replaces the single-run trainer and cannot be stacked; pass stack='off'")
        failures = _run_jobs(jobs, options, name, root, workers, progress, slurm_options, executor_options)
        failures = _still_failed(failures, todo, root)
        if failures:
            raise RunFailedError(failures, root)
    return results_frame(unique, results_root=root)


def _stacking(configs: Sequence[Any], stack: str | None, max_stack: int | None, device: str | None,
              here: bool) -> tuple[int | None, bool]:
    """``(stack size or None when runs are not stacked, whether the stacks train on CUDA)``."""
    if not stacking_active(resolve_stack(stack), device, here=here):
        return None, False
    cuda = torch.cuda.is_available() if device is None else torch.device(device).type == "cuda"
    return sweep_max_stack(configs, max_stack, device, here=here), cuda and (here or device is not None)


def _run_jobs(jobs: list[list[Any]], options: dict[str, Any], executor: str, root: Path, workers: int,
              progress: bool, slurm: SlurmOptions, executor_options: Mapping[str, Any] | None) -> dict[str, str]:
    """Run the jobs (stacks and single runs) on ``executor``; ``{run: error}`` of the failed runs."""
    singles = [job[0] for job in jobs if len(job) == 1]
    stacks = [job for job in jobs if len(job) > 1]
    if executor == "local" and min(workers, len(singles)) <= 1:
        return _run_in_process(singles, {**options, "progress": None}, progress, stacks)
    if executor == "local":
        return _run_pool(singles, {**options, "progress": False}, min(workers, len(singles)), progress, stacks)
    tasks = [job if len(job) > 1 else job[0] for job in jobs]
    return _run_submitit(tasks, {**options, "progress": False}, executor, root, progress, slurm,
                         dict(executor_options or {}))
