"""Driving a schedule through a test-bed case, one run or many in worker processes.

:func:`run_case` plays a case's synthetic training run (:mod:`tvolib.bandit.testbed`,
:mod:`tvolib.bandit.testbed_tvo`) against a schedule through its public ``step()`` API, as a
training loop would; :func:`run_cases` runs many in spawned worker processes. Inputs are checked
before anything runs (a case name given for a case, a factory that builds no schedule or does not
pickle, a job without a seed). A worker that dies (killed by a signal, ``os._exit``) does not cost
the jobs that finished: :class:`TestbedJobError` names the job that died and carries every finished
job's result.

Example:
    >>> from tvolib.bandit import RandomSchedule
    >>> from tvolib.bandit.testbed import CASES
    >>> result = run_case(CASES["d2-log-none"], lambda seed: RandomSchedule(2, window=2, seed=seed), seed=0)
    >>> 0.0 <= result.regret <= 1.0
    True
"""
from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..checks import check_int
from ..schedules import Schedule
from .protocol import arm_degeneracy
from .testbed_common import Case, trend_gain
from .testbed_tvo import INTEGRANDS

__all__ = ["CaseResult", "ScheduleFactory", "TestbedJobError", "run_case", "run_cases"]


@dataclass
class CaseResult:
    """What one run of a case gives: second-half metrics and the arm trained at every epoch.

    ``regret`` is the mean regret of the arms of the run's second half (0 at the optimum);
    ``distance`` their mean RMS distance to the optimum in the case's metric (points or step
    functions); ``degenerate`` the share of them that are degenerate; ``d_mode`` the ``d`` trained
    most often in the second half (ties: the smaller). ``evidence`` is the run's evidence at its end,
    ``L_T``: what a user sees of a run, and compares runs by.
    """

    regret: float
    distance: float
    degenerate: float
    arms: list[list[float]] = field(repr=False)
    history: list[dict[str, Any]] = field(repr=False)
    seconds: float = 0.0
    evidence: float = 0.0

    @property
    def d_trained(self) -> list[int]:
        """The ``d`` trained at every epoch (``b_0 = 0`` included)."""
        return [len(arm) + 1 for arm in self.arms]

    @property
    def d_mode(self) -> int:
        """The ``d`` trained most often over the second half of the run (ties: the smaller)."""
        late = self.d_trained[len(self.arms) // 2:]
        return min(set(late), key=lambda d: (-late.count(d), d))


def _check_case(case: Any, name: str = "case") -> Case:
    if isinstance(case, str):
        raise ValueError(f"{name} must be a test-bed case (a TestbedCase or TvoCase); got the name {case!r}: "
                         f"look it up first, e.g. tvolib.bandit.testbed.CASES[{case!r}]")
    if not isinstance(case, Case):
        raise ValueError(f"{name} must be a test-bed case (a TestbedCase or TvoCase, e.g. from "
                         f"tvolib.bandit.testbed.CASES); got {type(case).__name__} {case!r:.80}")
    return case


def _make(case: Case, make_schedule: Any, seed: int) -> Schedule:
    """``make_schedule(seed)``, checked: a schedule whose ``d`` the case accepts."""
    if not callable(make_schedule):
        raise ValueError("make_schedule must be a callable seed -> Schedule (a ScheduleFactory or a function); "
                         f"got {type(make_schedule).__name__} {make_schedule!r:.80}")
    schedule = make_schedule(seed)
    if not all(callable(getattr(schedule, attr, None)) for attr in ("current", "step", "history")):
        raise ValueError(f"make_schedule({seed}) must return a Schedule (with current(), step() and history()); "
                         f"got {type(schedule).__name__} {schedule!r:.80}")
    if case.metric == "points" and schedule.d != case.d:
        raise ValueError(f"case {case.name!r} needs d = {case.d} (it compares arms of {case.d - 1} interior points); "
                         f"make_schedule({seed}) built a schedule of d = {schedule.d} (cases with metric='step' "
                         "take any d)")
    return schedule


def run_case(case: Case, make_schedule: Callable[[int], Schedule], seed: int) -> CaseResult:
    """Drive ``make_schedule(seed)`` through ``case``'s synthetic run as a training loop would.

    ``step(0, L_0)`` first, then for each epoch ``e = 1..T``: train with ``current()`` (its interior
    points are the arm), add the epoch's evidence gain

        L_e - L_{e-1} = trend(e) + effect(arm, p_e) + noise_e,    p_e = (e - 1) / (T - 1),

    and ``step(e, evidence=L_e)``, the arm's effect ``1/2 - regret`` (written ``f - 1/2`` for the bump
    cases, as it always was, so that their evidence is the same to the bit). The noise is seeded by
    ``seed``, so two schedules with one seed see the same noise draws.

    Args:
        case: a case of :data:`tvolib.bandit.testbed.CASES` (not its name).
        make_schedule: ``seed -> Schedule`` (of the case's ``d`` unless the case compares step functions).
        seed: an int >= 0 (Python, NumPy or a 0-d tensor).

    Returns:
        A :class:`CaseResult`: over the epochs after ``T / 2``, the mean regret, the mean distance to
        the optimum and the share of degenerate arms (in the box ``[0.05, 0.95]``); and ``L_T``.
    """
    case = _check_case(case)
    seed = check_int("seed", seed, 0)
    schedule = _make(case, make_schedule, seed)
    noise = torch.Generator().manual_seed(10_000 + seed)
    start = time.perf_counter()
    std, corr = case.noise_model
    evidence, wander = 0.0, 0.0
    schedule.step(0, evidence=evidence)
    arms: list[list[float]] = []
    for epoch in range(1, case.epochs + 1):
        arm = schedule.current()[1:].tolist()
        arms.append(arm)
        progress = (epoch - 1) / max(case.epochs - 1, 1)
        draw = float(torch.randn((), generator=noise, dtype=torch.float64))
        wander = corr * wander + math.sqrt(1 - corr**2) * draw if epoch > 1 else draw
        evidence += trend_gain(case, epoch) + case.effect(arm, progress) + std * wander
        schedule.step(epoch, evidence=evidence, **_integrand_input(case, schedule, epoch))
    seconds = time.perf_counter() - start
    half = case.epochs // 2
    late = [(arm, (e - 1) / max(case.epochs - 1, 1)) for e, arm in enumerate(arms, start=1) if e > half]
    regret = sum(case.regret(a, p) for a, p in late) / len(late)
    distance = sum(case.distance(a, p) for a, p in late) / len(late)
    degenerate = sum(arm_degeneracy(a, 0.05, 0.95)["degenerate"] for a, _ in late) / len(late)
    return CaseResult(regret, distance, degenerate, arms, schedule.history(), seconds, evidence)


def _integrand_input(case: Case, schedule: Schedule, epoch: int) -> dict[str, Any]:
    """``{"integrand": betas -> f(betas)}`` for a schedule that reads one (``reads_integrand``) on a case
    that has one: the case's own integrand after epoch ``epoch``, at the next epoch's progress (as the
    integrand rules of :mod:`tvolib.bandit.testbed_baselines` read it); else nothing."""
    name = getattr(case, "integrand", None)
    if name is None or not getattr(schedule, "reads_integrand", False):
        return {}
    progress = min(epoch / max(case.epochs - 1, 1), 1.0)
    return {"integrand": lambda betas: INTEGRANDS[name].values(torch.as_tensor(betas, dtype=torch.float64), progress)}


@dataclass(frozen=True)
class ScheduleFactory:
    """A picklable ``seed -> schedule`` for :func:`run_cases`: ``cls(d, seed=seed, **options)``.

    Example:
        >>> from tvolib.bandit import RandomSchedule
        >>> ScheduleFactory.of(RandomSchedule, 5, window=2)(seed=0).d
        5
    """
    cls: type
    d: int
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, schedule_class: type, d: int, **options: Any) -> ScheduleFactory:
        """The factory of ``schedule_class(d, seed=..., **options)`` (options kept sorted by name)."""
        return cls(schedule_class, d, tuple(sorted(options.items())))

    def __call__(self, seed: int) -> Schedule:
        return self.cls(self.d, seed=seed, **dict(self.options))


class TestbedJobError(RuntimeError):
    """A job of :func:`run_cases` did not finish: its worker died, or it raised.

    Attributes:
        job: the index of the job in ``jobs``.
        results: one entry per job, its :class:`CaseResult` where it finished, else ``None``.
    """

    __test__ = False  # not a pytest class

    def __init__(self, message: str, job: int, results: list[CaseResult | None]) -> None:
        super().__init__(message)
        self.job, self.results = job, results


Job = tuple[Case, Callable[[int], Schedule], int]


def _check_jobs(jobs: Sequence[Any], max_workers: Any) -> tuple[list[Job], int]:
    """The jobs as ``(case, make_schedule, seed)`` and ``max_workers`` as an int, checked up front."""
    workers = check_int("max_workers", max_workers, 1)
    checked: list[Job] = []
    for k, job in enumerate(jobs):
        if not isinstance(job, (tuple, list)) or len(job) != 3:
            raise ValueError(f"jobs[{k}] must be a (case, make_schedule, seed) triple; got {job!r:.120}"
                             + (" (no seed: give each job its seed, an int >= 0)" if isinstance(job, (tuple, list))
                                and len(job) == 2 else ""))
        case = _check_case(job[0], f"jobs[{k}][0] (the case)")
        checked.append((case, job[1], check_int(f"jobs[{k}][2] (the seed)", job[2], 0)))
    seen: set[int] = set()
    for case, make, seed in checked:  # one schedule of each factory, built here before any worker starts
        if id(make) not in seen:
            seen.add(id(make))
            _make(case, make, seed)
    if workers > 1 and len(checked) > 1:
        for case, make, _ in checked:
            try:
                pickle.dumps((case, make))
            except Exception as exc:  # noqa: BLE001 - any pickling failure means the same thing here
                raise ValueError(f"make_schedule {make!r:.80} cannot be sent to a worker process (max_workers="
                                 f"{workers}): {exc}. Use ScheduleFactory.of(cls, d, **options) or a module-level "
                                 "function, or max_workers=1") from None
    return checked, workers


def _worker(conn: Any) -> None:
    """Run the jobs the parent sends on ``conn`` until ``None``, answering each on ``conn`` (a pipe:
    each answer is sent before the next line runs, so a result sent is a result kept, whatever
    ends the process next)."""
    torch.set_num_threads(1)  # a tiny GP: threads only contend with the other worker
    while (item := conn.recv()) is not None:
        index, case, make, seed = item
        try:
            conn.send(("done", index, run_case(case, make, seed)))
        except BaseException:  # noqa: BLE001 - reported to the parent, which raises
            conn.send(("error", index, traceback.format_exc()))


def _describe(job: Job) -> str:
    case, make, seed = job
    return f"case {case.name!r}, schedule {make!r:.160}, seed {seed}"


def _death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def run_cases(jobs: Sequence[tuple[Case, Callable[[int], Schedule], int]], max_workers: int = 2
              ) -> list[CaseResult]:
    """:func:`run_case` on every ``(case, make_schedule, seed)``, in ``max_workers`` processes.

    Each run is independent (its noise seeded by its seed), so the results are those of
    :func:`run_case` in one process with one torch thread, in the order of ``jobs``. The workers
    are spawned, so ``make_schedule`` must pickle: a :class:`ScheduleFactory` or a module-level
    function (checked before any worker starts). ``max_workers=1`` runs them here, one after the
    other (with this process's threads).

    Raises:
        ValueError: a bad job, before anything runs.
        TestbedJobError: a worker died (a signal, ``os._exit``) or a job raised: the message names
            the job, ``results`` holds every finished job's result (``None`` for the others), and
            the other workers are stopped.
    """
    checked, workers = _check_jobs(jobs, max_workers)
    if workers == 1 or len(checked) <= 1:
        return [run_case(*job) for job in checked]
    ctx = multiprocessing.get_context("spawn")
    pipes = [ctx.Pipe() for _ in range(min(workers, len(checked)))]
    procs = [ctx.Process(target=_worker, args=(child,), daemon=True) for _, child in pipes]
    for proc in procs:
        proc.start()
    for _, child in pipes:
        child.close()  # the worker holds the only other end: its death closes the pipe
    results: list[CaseResult | None] = [None] * len(checked)
    try:
        _collect(procs, [parent for parent, _ in pipes], checked, results)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        for parent, _ in pipes:
            parent.close()
    return results  # type: ignore[return-value]


def _collect(procs: list[Any], pipes: list[Any], jobs: list[Job], results: list[CaseResult | None]) -> None:
    """Hand each idle worker the next job and read its answer, until every job is done; raise on a
    dead worker or a failed job."""
    todo = iter(range(len(jobs)))
    running: dict[int, int | None] = {}
    open_pipes = dict(enumerate(pipes))

    def hand_out(wid: int) -> None:
        index = next(todo, None)
        running[wid] = index
        try:
            open_pipes[wid].send(None if index is None else (index, *jobs[index]))
        except (BrokenPipeError, OSError):
            pass  # the worker is gone: its pipe's end says so below

    for wid in open_pipes:
        hand_out(wid)
    while open_pipes:
        for pipe in multiprocessing.connection.wait(list(open_pipes.values())):
            wid = next(w for w, p in open_pipes.items() if p is pipe)
            try:
                kind, index, payload = pipe.recv()
            except (EOFError, OSError):  # the worker ended: everything it sent has been read
                del open_pipes[wid]
                procs[wid].join()
                if running[wid] is not None or procs[wid].exitcode:
                    _dead(procs[wid], running[wid], jobs, results)
                continue
            if kind == "error":
                raise TestbedJobError(f"job {index} ({_describe(jobs[index])}) raised in its worker:\n{payload}",
                                      index, results)
            results[index] = payload
            hand_out(wid)


def _dead(proc: Any, index: int | None, jobs: list[Job], results: list[CaseResult | None]) -> None:
    what = f"while running job {index} ({_describe(jobs[index])})" if index is not None else "between jobs"
    done = sum(r is not None for r in results)
    raise TestbedJobError(f"a test-bed worker process (pid {proc.pid}) {_death(proc.exitcode)} {what}; {done} of "
                          f"{len(jobs)} jobs finished: their results are in this error's results (None for the "
                          "others)", -1 if index is None else index, results)
