"""Many image-model runs trained at once: runs of one shape stacked along a leading run dimension.

:func:`train_many` groups configs by :func:`stack_key` and trains each group as one batched
computation (:mod:`tvolib.stacked`); other configs go to their single-run trainer one by one.
Each run of a stack is a :class:`~tvolib.training.stack_runs.StackRun` (a
:class:`~tvolib.training.loop.Task` with the single run's streams) of a
:class:`~tvolib.training.stack_runs.Stack`, which does the batched work. The shared loop's pieces (``begin``,
``check_losses``, ``end_epoch``, ``finish``) run per run, so its folder, checkpoint (the
single-run format: either trainer resumes the other's), history and divergence are the single
run's. A stacked run equals ``train(config)`` to float32 rounding: the batched kernels may reduce
in another order than the single run's (CPU instruction set, BLAS, threads), so the two agree bit
for bit only where the kernels coincide (docs/stacking.md).
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import torch

from tvolib.config import resolve_device
from tvolib.models import MODELS as MODEL_CLASSES
from tvolib.stacked import ScheduleStepError, StepPool, step_schedules
from tvolib.stacked.models import STACKABLE
from tvolib.stacked.objectives import STACKED_OBJECTIVES
from tvolib.training.images import RunConfig
from tvolib.training.kinds import TRAINERS
from tvolib.training.loop import (RunResult, TrainingDivergedError, begin, check_losses, end_epoch, evaluates_after,
                                  progress_bar)
from tvolib.training.run_folder import RunFolder
from tvolib.training.stack_runs import Stack, StackRun

__all__ = ["PER_RUN_FIELDS", "StackRun", "TrainManyError", "stack_key", "train_many"]

#: Config fields that may differ between the runs of one stack (their streams and schedules).
PER_RUN_FIELDS: tuple[str, ...] = ("seed", "schedule", "schedule_options", "log_beta1")


class TrainManyError(RuntimeError):
    """Some runs of :func:`train_many` failed; every other run was trained to its end.

    ``outcomes[i]`` is run ``i``'s :class:`RunResult` or its exception (e.g. a
    :class:`~tvolib.training.loop.TrainingDivergedError`; its last good checkpoint is kept).
    """

    def __init__(self, outcomes: list[RunResult | BaseException], names: list[str]) -> None:
        self.outcomes = outcomes
        failed = [(n, o) for n, o in zip(names, outcomes) if isinstance(o, BaseException)]
        super().__init__(f"{len(failed)} of {len(outcomes)} runs failed: "
                         + "; ".join(f"{n}: {type(e).__name__}: {e}" for n, e in failed))


def stack_key(config: Any) -> str | None:
    """What runs must share to train in one stack (``None``: ``config`` trains alone).

    Everything but :data:`PER_RUN_FIELDS`: model and its options, dataset, subset sizes and data
    seed, objective, ``S``, the number of left points ``d`` (1 outside the TVO family), batch size,
    epochs, learning rate, evaluation settings. Stackable: :class:`RunConfig` with an objective of
    :data:`~tvolib.stacked.objectives.STACKED_OBJECTIVES` and a model :class:`StackedModel` batches,
    whose ``d`` is the config's: a run of :data:`~tvolib.training.schedule.VARIABLE_D_SCHEDULES`
    (its schedule's length changes between epochs, up to its config's ``d``) stacks with the runs
    of that ``d``, its shorter schedules padded with intervals of width zero
    (:func:`~tvolib.stacked.objectives.left_points`).
    """
    if not isinstance(config, RunConfig) or config.objective not in STACKED_OBJECTIVES \
            or MODEL_CLASSES.get(config.model) not in STACKABLE:
        return None
    fields = {k: v for k, v in config.to_dict().items() if k not in PER_RUN_FIELDS}
    fields["d"] = config.d if config.uses_schedule else 1
    return json.dumps(fields, sort_keys=True)


def _shared(runs: list[StackRun], key: str, fn: Any, *args: Any) -> None:
    """Run a batched step for ``runs``, adding an equal share of its time to each run's timer ``key``."""
    if not runs:
        return
    start = time.perf_counter()
    try:
        fn(*args)
    finally:
        share = (time.perf_counter() - start) / len(runs)
        for run in runs:
            run.timers[key] = run.timers.get(key, 0.0) + share


def _step_schedules(trained: list[tuple[StackRun, dict[str, Any]]], pool: StepPool | None
                    ) -> list[tuple[StackRun, dict[str, Any]]]:
    """Tell each run's schedule its epoch (as the loop does), GP rounds in ``pool``; drop runs whose step failed."""
    groups: dict[int, list[tuple[StackRun, dict[str, Any]]]] = {}
    for run, row in trained:
        groups.setdefault(row["epoch"], []).append((run, row))
    kept = []
    for epoch, group in groups.items():
        runs = [run for run, _ in group]
        evidences = [row["train_evidence"] if run.schedule.evidence_spec is not None else None for run, row in group]
        failures: dict[int, tuple[str, BaseException]] = {}

        def step() -> None:
            try:
                step_schedules([r.schedule for r in runs], epoch, evidences, pool=pool, names=[r.name for r in runs],
                               log_weights=[r.schedule_inputs()["log_weights"] for r in runs])
            except ScheduleStepError as err:
                failures.update(err.failures)

        _shared(runs, "bandit_seconds", step)
        for k, (run, row) in enumerate(group):
            if k in failures:
                run.outcome = failures[k][1]
            else:
                kept.append((run, row))
    return kept


def _epoch(stack: Stack, active: list[StackRun], pool: StepPool | None, checkpoint_every: int, model_out: bool
           ) -> list[StackRun]:
    """One epoch of every active run, then per run what the loop does after an epoch; returns the runs to go on."""
    stack.keep(active)
    start = time.perf_counter()
    try:
        stack.train_epoch()
    except Exception as exc:  # NaN parameters can make an epoch fail: diverged runs say so, the others fail with exc
        for run in active:
            try:
                check_losses(run, run.done + 1, run.history, run.where, cause=exc)
                run.outcome = exc
            except TrainingDivergedError as err:
                run.outcome = err
        return []
    seconds = (time.perf_counter() - start) / len(active)
    trained = []
    for run in active:
        row = run.run_epoch(run.done + 1, run.schedule.current())
        try:
            check_losses(run, row["epoch"], run.history, run.where)
        except TrainingDivergedError as err:
            run.outcome = err
            continue
        row["seconds"] = seconds
        trained.append((run, row))
    trained = _step_schedules(trained, pool)
    due = [run for run, row in trained if evaluates_after(run.config, row["epoch"])]
    _shared(due, "eval_seconds", stack.evaluate, due, [run.done + 1 for run in due])
    for run, row in trained:
        end_epoch(run, run.folder, row, run.history, run.timers, last=run.last, checkpoint_every=checkpoint_every)
        run.done = row["epoch"]
        if run.done == run.last:
            run.end(model_out)
    return [run for run, _ in trained if run.done < run.last]


def _train_stack(stack: Stack, states: list[dict[str, Any] | None], *, checkpoint_every: int, pool: StepPool | None,
                 progress: bool | None, model_out: bool) -> None:
    """Resume or start every run of ``stack`` (the loop's ``begin``), then train them together to their ends."""
    runs = stack.runs
    fresh = [run for run, state in zip(runs, states) if state is None]
    _shared(fresh, "eval_seconds", stack.evaluate, fresh, [0] * len(fresh))
    bandits = [run for run in fresh if run.schedule.evidence_spec is not None]
    _shared(bandits, "bandit_seconds", stack.initial_evidence, bandits)
    for run, state in zip(runs, states):
        try:
            run.history, run.timers, run.done = begin(run, run.folder, state, run.last, run.timers)
        except Exception as exc:  # e.g. a checkpoint of another architecture
            run.outcome = exc
            continue
        if run.done == run.last:
            run.end(model_out)
    active = [run for run in runs if run.outcome is None]
    total = max((run.last - run.done for run in active), default=0)
    bar = progress_bar(progress if total else False, total=total, unit="epoch",
                       desc=f"{len(runs)} x {runs[0].label}")
    try:
        while active:
            active = _epoch(stack, active, pool, checkpoint_every, model_out)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _train_alone(config: Any, run_dir: str | Path | None, options: dict[str, Any]) -> RunResult | BaseException:
    """``config`` by its single-run trainer (``TRAINERS[config.kind]``); its exception instead of raising it."""
    kwargs = {k: v for k, v in options.items()
              if v is not None and k not in ("model_out", "pool", "progress", "compile")}
    kwargs["progress"] = options["progress"]
    if isinstance(config, RunConfig):
        kwargs["model_out"] = options["model_out"]
        if options["compile"]:
            kwargs["compile"] = True
    try:
        return TRAINERS[config.kind](config, run_dir, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- reported with the others by train_many
        return exc


def _open(configs: list[Any], run_dirs: list[Any], index: list[int], guard: ExitStack, outcomes: list[Any]
          ) -> tuple[list[int], list[RunFolder | None], list[Any]]:
    """Lock each run folder and read its checked checkpoint; a run whose folder fails gets its error."""
    ok, folders, states = [], [], []
    for i in index:
        config = configs[i]
        try:
            folder = guard.enter_context(RunFolder(run_dirs[i])) if run_dirs[i] is not None else None
            state = folder.load_checkpoint(config.digest(), config.epochs) if folder is not None else None
        except Exception as exc:  # noqa: BLE001 -- a locked folder or a corrupt checkpoint stops this run only
            outcomes[i] = exc
            continue
        ok.append(i)
        folders.append(folder)
        states.append(state)
    return ok, folders, states


def _check_arguments(configs: list[Any], run_dirs: list[Any], max_stack: int | None,
                     checkpoint_every: int | None, stop_after: int | None) -> None:
    if len(configs) != len(run_dirs):
        raise ValueError(f"run_dirs must hold one folder (or None) per config: {len(configs)} configs, "
                         f"{len(run_dirs)} run_dirs")
    for name, value, low in (("max_stack", max_stack, 1), ("checkpoint_every", checkpoint_every, 1),
                             ("stop_after", stop_after, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"{name}={value!r} must be None or an integer >= {low}")
    for i, config in enumerate(configs):
        if getattr(config, "kind", None) not in TRAINERS:
            raise ValueError(f"configs[{i}] is a {type(config).__name__}; accepted: configs of the kinds "
                             f"{sorted(TRAINERS)} (RunConfig, PCFGConfig)")
        config.validate()
    seen: dict[Path, int] = {}
    for i, run_dir in enumerate(run_dirs):
        if run_dir is None:
            continue
        key = Path(run_dir).resolve()
        if key in seen:
            raise ValueError(f"run_dirs[{seen[key]}] and run_dirs[{i}] are the same folder {run_dir}; "
                             "each run needs its own")
        seen[key] = i


def train_many(
    configs: Sequence[Any],
    run_dirs: Sequence[str | Path | None],
    *,
    device: str | torch.device | None = None,
    max_stack: int | None = None,
    progress: bool | None = None,
    data_root: str | Path | None = None,
    checkpoint_every: int | None = None,
    stop_after: int | None = None,
    model_out: bool = True,
    pool: StepPool | None = None,
    compile: bool = False,
) -> list[RunResult]:
    """Train every config, stacking the runs that share a :func:`stack_key`; results in config order.

    Each run is the run ``train(config, run_dir)`` would train (own initialisation, data order,
    binarisation, Monte-Carlo noise, Adam state, schedule; results folder, checkpoint and
    ``model.pt`` in its format: either trainer resumes the other's run), trained in a stack of
    up to ``max_stack`` runs; configs that cannot be stacked (other objectives, the PCFG) are
    trained one by one by their trainer. Runs of one stack may resume from different epochs.
    A run that diverges or fails stops (its last good checkpoint is kept); the others go on.

    Args:
        configs: :class:`RunConfig` (and :class:`~tvolib.training.pcfg.PCFGConfig`) instances.
        run_dirs: one results folder per config (distinct), or ``None`` to save nothing for it.
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available).
        max_stack: most runs per stack (default: all runs of a stack key).
        progress: a progress bar per stack (``None``: only on a terminal).
        data_root: dataset root (default: ``TVOLIB_DATA`` or the package's default).
        checkpoint_every: epochs between checkpoints (default: each trainer's).
        stop_after: stop every run after this epoch (a checkpoint is written), a killed run.
        model_out: write ``model.pt`` once a run is complete.
        pool: a :class:`~tvolib.stacked.StepPool` for the GP-bandit rounds (default: inline, one
            after the other; the pool's workers run one thread, see ``StepPool``).
        compile: ``torch.compile`` each stack's forward pass and loss for the training minibatches
            (:func:`tvolib.stacked.epoch.compiled_loss`; evaluation stays eager), and runs trained
            alone with ``train(..., compile=True)``. Off by default: a compiled run's numbers equal
            the eager run's only to float32 rounding, and compiling costs tens of seconds per stack.

    Returns:
        One :class:`~tvolib.training.loop.RunResult` per config, as ``train`` returns it.

    Raises:
        TrainManyError: after every other run has finished, if any run failed (``outcomes``).
        ValueError: for bad arguments or configs, before anything is trained.

    Example:
        >>> configs = [RunConfig(n_train=1000, epochs=10, seed=s, schedule=sch)
        ...            for s in (1, 2, 3) for sch in ("log", "gp_bandit")]
        >>> results = train_many(configs, [f"results/demo-{i}" for i in range(6)])  # doctest: +SKIP
        >>> [r.final["test_log_px"] for r in results]  # doctest: +SKIP
    """
    configs, run_dirs = list(configs), list(run_dirs)
    _check_arguments(configs, run_dirs, max_stack, checkpoint_every, stop_after)
    dev = resolve_device(device)
    names = [str(d) if d is not None else f"configs[{i}] ({c.digest()})" for i, (c, d) in enumerate(zip(configs, run_dirs))]
    options = dict(data_root=data_root, device=dev, progress=progress, checkpoint_every=checkpoint_every,
                   stop_after=stop_after, model_out=model_out, compile=compile)
    outcomes: list[Any] = [None] * len(configs)
    groups: dict[str | None, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(stack_key(config), []).append(i)
    for key, index in groups.items():
        if key is None:
            for i in index:
                outcomes[i] = _train_alone(configs[i], run_dirs[i], options)
            continue
        size = max_stack or len(index)
        for first in range(0, len(index), size):
            _train_chunk(configs, run_dirs, index[first:first + size], names, outcomes, options, pool)
    if any(isinstance(o, BaseException) for o in outcomes):
        raise TrainManyError(outcomes, names)
    return outcomes


def _train_chunk(configs: list[Any], run_dirs: list[Any], index: list[int], names: list[str], outcomes: list[Any],
                 options: dict[str, Any], pool: StepPool | None) -> None:
    """Train the runs ``index`` of one stack key as one stack; put each run's result or error in ``outcomes``."""
    stop_after = options["stop_after"]
    with ExitStack() as guard:
        index, folders, states = _open(configs, run_dirs, index, guard, outcomes)
        if not index:
            return
        try:
            stack = Stack([configs[i] for i in index], [names[i] for i in index], options["device"],
                           options["data_root"], compile=options["compile"])
        except Exception as exc:  # noqa: BLE001 -- e.g. missing data: every run of the stack fails with it
            for i in index:
                outcomes[i] = exc
            return
        for run, folder in zip(stack.runs, folders):
            run.folder = folder
            run.last = run.config.epochs if stop_after is None else min(run.config.epochs, stop_after)
        runs = list(stack.runs)
        _train_stack(stack, states, checkpoint_every=options["checkpoint_every"] or 10, pool=pool,
                     progress=options["progress"], model_out=options["model_out"])
        for i, run in zip(index, runs):
            outcomes[i] = run.outcome
