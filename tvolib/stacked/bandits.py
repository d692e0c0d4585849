"""Step the K schedules of a stack after an epoch, the GP-bandit rounds in parallel worker processes.

A GP-bandit round (MAP fit of the GP, then GP-UCB maximised with BoTorch; Algorithm 1) costs a
few tenths of a second on one CPU core, so K rounds one after the other would stall the device
for ``K`` times that at the end of every window. :func:`step_schedules` ships the schedules whose
report closes a window (:func:`closes_window`) to a :class:`StepPool` of worker processes, where
each runs its own ``step`` (the single-run code path, on a pickled copy), and loads the state it
returns; every other report (fixed and moments schedules, reports inside a window, random search)
is stepped inline. A run's arms, history and generator state are therefore bit for bit those of
the same schedule stepped alone.

Example:
    >>> from tvolib.bandit import RandomSchedule
    >>> scheds = [RandomSchedule(3, window=2, seed=s) for s in (0, 1)]
    >>> with StepPool(workers=1) as pool:
    ...     closed = [step_schedules(scheds, epoch, [L, L - 1.0], pool=pool)
    ...               for epoch, L in enumerate([-100.0, -99.0, -98.5])]
    >>> closed                                   # the runs whose window closed at each report
    [[], [], [0, 1]]
    >>> [s.history()[0]["reward"] for s in scheds]   # the default protocol's rate, (L_2 - L_0) / 2
    [0.75, 0.75]
"""
from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Sequence

import torch
from threadpoolctl import threadpool_limits
from torch import Tensor

from tvolib.bandit import GPBanditSchedule
from tvolib.bandit.base import BanditScheduleBase
from tvolib.bandit.reward import early_update
from tvolib.schedules import Schedule

__all__ = ["ScheduleStepError", "StepPool", "closes_window", "step_schedules"]


class ScheduleStepError(RuntimeError):
    """One or more schedules failed to step; ``failures`` maps run index to ``(name, exception)``.

    Every other schedule of the call has been stepped (and its state loaded) before this is raised,
    so the caller can stop the failed runs and go on with the rest.
    """

    def __init__(self, failures: dict[int, tuple[str, BaseException]], epoch: int) -> None:
        self.failures = failures
        lines = [f"{name}: {type(exc).__name__}: {exc}" for name, exc in failures.values()]
        super().__init__(f"schedule step at epoch {epoch} failed for {len(failures)} run(s): " + "; ".join(lines))


def _init_worker(threads: int) -> None:
    """Limit a worker to ``threads`` threads (torch's intra-op pool, BLAS, OpenMP)."""
    torch.set_num_threads(threads)
    threadpool_limits(threads)


def _step_pickled(payload: bytes, epoch: int, evidence: float, log_w: Tensor | None = None
                  ) -> tuple[bytes, list[tuple[type, str]]]:
    """Worker side: unpickle a schedule, ``step`` it (with the log weights read for it, if any), return
    its pickled ``state_dict`` and warnings."""
    schedule = pickle.loads(payload)
    extra = {} if log_w is None else {"log_weights": lambda: log_w}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schedule.step(epoch, evidence=evidence, **extra)
    return pickle.dumps(schedule.state_dict()), [(w.category, str(w.message)) for w in caught]


class StepPool:
    """Worker processes (``spawn``) that run bandit ``step`` calls concurrently.

    Args:
        workers: number of processes (default: the host's CPU count, at most 64). Start-up takes
            seconds (each worker imports torch and BoTorch); keep one pool for a whole training
            and close it at the end (or use it as a context manager).
        threads: torch/BLAS threads per worker (default 1, so that K workers share the cores).
            A GP round's last bits depend on the thread count (float64 reductions and BLAS
            calls split across threads; the arms then drift apart), so a round stepped here
            equals, bit for bit, the same round stepped in a process running ``threads`` threads.

    A script that creates a pool must guard its entry point with ``if __name__ == "__main__":``
    (the ``spawn`` start method re-imports the main module in every worker). A schedule whose GP
    runs on CUDA gets a CUDA context in each worker that steps it; ``device="cpu"`` avoids that.
    """

    def __init__(self, workers: int | None = None, *, threads: int = 1) -> None:
        if workers is None:
            workers = min(os.cpu_count() or 1, 64)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1 (or None for the CPU count); got {workers!r}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1; got {threads!r}")
        self.workers, self.threads = workers, threads
        self._executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(threads,),
        )

    def submit(self, schedule: Schedule, epoch: int, evidence: float, log_w: Tensor | None = None) -> Future:
        """Start ``schedule.step(epoch, evidence)`` on a copy in a worker (``log_w``: the log weights its
        ``log_weights`` callable returned here); the future's result is ``(pickled state_dict,
        warnings)``. The schedule itself is not changed."""
        return self._executor.submit(_step_pickled, pickle.dumps(schedule), epoch, evidence, log_w)

    def close(self) -> None:
        """Stop the workers (waits for running steps)."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "StepPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _finite(value: float | Tensor | None) -> float | None:
    if value is None:
        return None
    if torch.is_tensor(value):
        value = value.detach().cpu().item() if value.numel() == 1 else math.nan
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def closes_window(schedule: Schedule, epoch: int, evidence: float | Tensor | None) -> bool:
    """Whether ``schedule.step(epoch, evidence)`` will close a bandit window (and choose an arm).

    True only for :class:`~tvolib.bandit.base.BanditScheduleBase` schedules, when the report is
    at or after ``burn_in``, finite, a window is open, and the window reaches its planned length
    ``w_k`` or the report triggers an early update (:func:`tvolib.bandit.reward.early_update`):
    the rule of ``BanditScheduleBase.step``. Invalid reports give False (``step`` raises on them).
    """
    if not isinstance(schedule, BanditScheduleBase):
        return False
    value = _finite(evidence)
    start, start_value = schedule._start_epoch, schedule._start_evidence
    last = schedule._last_epoch
    if value is None or start is None or start_value is None or epoch < schedule.burn_in:
        return False
    if isinstance(epoch, bool) or not isinstance(epoch, int) or (last is not None and epoch <= last):
        return False
    if epoch - start >= schedule.window_length():
        return True
    return early_update(schedule.reward, start=start_value, current=value,
                        previous_mean=schedule._prev_window_mean, threshold=schedule.early_drop)


def _names(names: Sequence[str] | None, K: int) -> list[str]:
    if names is None:
        return [f"run {k}" for k in range(K)]
    if len(names) != K:
        raise ValueError(f"names must hold one name per schedule ({K}); got {len(names)}")
    return [str(n) for n in names]


def step_schedules(
    schedules: Sequence[Schedule],
    epoch: int,
    evidences: Sequence[float | Tensor | None],
    *,
    log_weights: Sequence[Callable[[], Tensor] | None] | None = None,
    pool: StepPool | None = None,
    names: Sequence[str] | None = None,
) -> list[int]:
    """``schedules[k].step(epoch, evidence=evidences[k], log_weights=log_weights[k])`` for every run.

    GP-bandit schedules whose report closes a window run their round in ``pool`` concurrently
    (without a pool: one after the other, as a single run would); all other reports are stepped
    inline first. The result is the same as stepping each schedule alone, bit for bit: the worker
    runs the schedule's own ``step`` on a pickled copy and the caller's schedule loads the
    returned ``state_dict`` (warnings raised in a worker are re-issued here, prefixed with the run's
    name).

    Args:
        schedules: the K runs' schedules (any :class:`~tvolib.schedules.Schedule`).
        epoch: completed epochs (as for ``Schedule.step``).
        evidences: per-run training log-evidence (``None`` for runs whose schedule needs none).
        log_weights: per-run lazy ``log w`` callables for moments schedules (default: none).
        pool: a :class:`StepPool`, or None to step every schedule in this process.
        names: per-run names for errors and warnings (default ``"run k"``).

    Returns:
        The indices of the runs whose schedule closed a bandit window (their betas may have changed).

    Raises:
        ValueError: if ``evidences`` or ``log_weights`` does not hold one entry per schedule.
        ScheduleStepError: naming every run whose step failed; all other runs have been stepped.
    """
    K = len(schedules)
    if len(evidences) != K:
        raise ValueError(f"evidences must hold one entry per schedule ({K}); got {len(evidences)}")
    log_weights = [None] * K if log_weights is None else list(log_weights)
    if len(log_weights) != K:
        raise ValueError(f"log_weights must hold one entry per schedule ({K}); got {len(log_weights)}")
    labels = _names(names, K)
    closing = [k for k in range(K) if closes_window(schedules[k], epoch, evidences[k])]
    remote = {k for k in closing if pool is not None and isinstance(schedules[k], GPBanditSchedule)}
    failures: dict[int, tuple[str, BaseException]] = {}
    futures = {}
    for k in sorted(remote):  # a schedule that reads log weights at a window's close gets them computed here
        try:
            wanted = getattr(schedules[k], "reads_log_weights", False) and log_weights[k] is not None
            futures[k] = pool.submit(schedules[k], epoch, _finite(evidences[k]),
                                     log_weights[k]().detach().cpu() if wanted else None)
        except Exception as exc:  # noqa: BLE001 -- reported per run below
            failures[k] = (labels[k], exc)
    for k in range(K):
        if k in remote or k in failures:
            continue
        try:
            schedules[k].step(epoch, evidence=evidences[k], log_weights=log_weights[k])
        except Exception as exc:  # noqa: BLE001 -- reported per run below
            failures[k] = (labels[k], exc)
    for k, future in futures.items():
        try:
            state, caught = future.result()
            schedules[k].load_state_dict(pickle.loads(state))
        except Exception as exc:  # noqa: BLE001 -- a worker's error, or a broken pool
            failures[k] = (labels[k], exc)
            continue
        for category, message in caught:
            warnings.warn(f"{labels[k]}: {message}", category, stacklevel=2)
    if failures:
        raise ScheduleStepError(dict(sorted(failures.items())), epoch)
    return closing
