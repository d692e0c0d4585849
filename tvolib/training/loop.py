"""The training loop every experiment shares, readable top to bottom: resume, schedule, evaluation, checkpoints.

An experiment is a :class:`Task`: it owns its modules, optimisers, random generators and schedule
and knows how to train one epoch (:meth:`Task.run_epoch`) and how to evaluate (:meth:`Task.evaluate`).
:func:`run` does everything else, the same way for the image models and the PCFG:

1. lock and check the run folder, load and check its checkpoint (if any), then build the task;
2. resume (modules, optimisers, schedule, every RNG state, history, timers) or evaluate the
   untrained model (history row 0) and tell an evidence-driven schedule ``L_0`` (``step(0, L_0)``);
3. per epoch: ``betas = schedule.current()``; ``row = task.run_epoch(epoch, betas)``; check the
   epoch's minibatch losses for NaN/inf once (no host synchronisation inside the minibatch loop);
   ``schedule.step(epoch, evidence=row["train_evidence"])``; evaluate on cadence; checkpoint on cadence;
4. final metrics, the trained model (``model.pt``) once complete, one :class:`RunResult`.

A non-finite loss raises :class:`TrainingDivergedError` at the end of its epoch (or as soon as
the bad parameters make the epoch fail), before that epoch is checkpointed: the last good
checkpoint is left as it was. Every random draw comes from a saved stream, so a killed and
resumed run ends bit-identical on CPU to an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import math
import sys
import time
from abc import ABC, abstractmethod
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from tvolib.schedules import Schedule
from tvolib.checkpoint import CorruptFileError, plain
from tvolib.training.run_folder import RunFolder

__all__ = ["RunResult", "Task", "TrainingDivergedError", "begin", "check_data_source", "check_losses",
           "check_optimiser_shapes", "check_parameters", "derived_seed", "end_epoch", "evaluates_after",
           "final_record", "finish", "progress_bar", "restore", "run", "save_checkpoint"]

_TIMERS = ("eval_seconds", "bandit_seconds")


@dataclass
class RunResult:
    """What a trainer returns: per-epoch ``history`` (row 0: evaluation of the untrained model),
    the schedule's per-update records, and ``final`` (last metrics, timings, device)."""

    config: Any
    history: list[dict[str, Any]]
    schedule_history: list[dict[str, Any]]
    final: dict[str, Any] = field(default_factory=dict)


class TrainingDivergedError(RuntimeError):
    """A loss became NaN or infinite; carries where it happened and the last finite metrics."""

    def __init__(self, message: str, *, epoch: int, minibatch: int, last_metrics: dict[str, Any] | None):
        super().__init__(message)
        self.epoch = epoch
        self.minibatch = minibatch
        self.last_metrics = last_metrics

    def __reduce__(self):  # picklable (e.g. across a process pool) with its fields
        return (_rebuild_diverged, (self.args[0], self.epoch, self.minibatch, self.last_metrics))


def _rebuild_diverged(message: str, epoch: int, minibatch: int, last_metrics: dict[str, Any] | None
                      ) -> TrainingDivergedError:
    return TrainingDivergedError(message, epoch=epoch, minibatch=minibatch, last_metrics=last_metrics)


class Task(ABC):
    """One experiment as :func:`run` sees it.

    Attributes a task sets in its constructor:

    * ``config``: the frozen config (its ``digest()``, ``epochs``, ``eval_every``);
    * ``device``; ``schedule`` (a :class:`~tvolib.schedules.Schedule`);
    * ``modules``: ``{name: nn.Module}``, saved in the checkpoint under their names;
    * ``optimisers``: a list of optimisers; ``generators``: ``{name: torch.Generator}`` for every
      explicit random stream;
    * ``global_rng``: whether training also draws from torch's global RNG (then it is saved too);
    * ``label`` (progress-bar title) and ``progress_keys`` (row values shown on the bar).

    :meth:`run_epoch` must put the minibatch losses into ``self.loss_log``, a device tensor of
    shape ``(minibatches, losses)`` (allocated with zeros at the start of the epoch, written without
    reading it back), which the loop checks once per epoch.
    """

    config: Any
    device: torch.device
    schedule: Schedule
    modules: dict[str, nn.Module]
    optimisers: list[torch.optim.Optimizer]
    generators: dict[str, torch.Generator]
    global_rng: bool = False
    label: str = ""
    progress_keys: tuple[str, ...] = ()
    loss_log: Tensor | None = None

    @abstractmethod
    def run_epoch(self, epoch: int, betas: Tensor) -> dict[str, Any]:
        """Train one epoch with the left points ``betas``; return its history row (Python values)
        with at least ``train_evidence`` when the schedule has an ``evidence_spec``."""

    @abstractmethod
    def evaluate(self, epoch: int) -> dict[str, float]:
        """Test metrics after ``epoch`` epochs; must not draw from the training streams."""

    @abstractmethod
    def initial_evidence(self) -> float:
        """``L_0``: the schedule's ``evidence_spec`` estimate for the untrained model over the training
        set, as in :meth:`run_epoch`'s ``train_evidence``, from streams of its own (not the training ones)."""

    @abstractmethod
    def final_metrics(self, history: list[dict[str, Any]], epochs_done: int) -> dict[str, Any]:
        """The task's part of ``RunResult.final`` (last metrics, tail means, ...)."""

    @abstractmethod
    def trained_state(self) -> Any:
        """What ``model.pt`` holds once the run is complete."""

    def schedule_inputs(self) -> dict[str, Any]:
        """Extra keyword arguments for ``schedule.step`` after an epoch (e.g. ``log_weights``)."""
        return {}

    def data_source(self) -> str | None:
        """Which data files the run trains on (recorded in the checkpoint, checked on resume);
        ``None`` when the config alone fixes the data."""
        return None

    def load_optimiser_states(self, states: list[dict[str, Any]]) -> None:
        """Restore the optimisers from a checkpoint's list of state dicts."""
        if len(states) != len(self.optimisers):
            raise ValueError(f"checkpoint holds {len(states)} optimiser states, this run has {len(self.optimisers)}")
        for k, (optimiser, state) in enumerate(zip(self.optimisers, states)):
            check_optimiser_shapes(optimiser, state, f"optimiser {k}")
            optimiser.load_state_dict(state)

    # -- state ---------------------------------------------------------------------------------
    def rng_state(self) -> dict[str, Any]:
        """Every random stream's state (torch's global RNG too when ``global_rng``)."""
        state: dict[str, Any] = {}
        if self.global_rng:
            state["torch"] = torch.get_rng_state()
            state["cuda"] = torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None
        state.update({name: gen.get_state() for name, gen in self.generators.items()})
        return state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`rng_state`."""
        if self.global_rng:
            torch.set_rng_state(state["torch"])
            if self.device.type == "cuda" and state.get("cuda") is not None:
                torch.cuda.set_rng_state_all(state["cuda"])
        for name, gen in self.generators.items():
            gen.set_state(state[name])

    def state_dict(self) -> dict[str, Any]:
        """Modules, optimisers, schedule and RNG states, for the checkpoint."""
        return {**{name: module.state_dict() for name, module in self.modules.items()},
                "optimizers": [opt.state_dict() for opt in self.optimisers],
                "schedule": self.schedule.state_dict(),
                "schedule_history": plain(self.schedule.history()),
                "rng": self.rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        for name, module in self.modules.items():
            module.load_state_dict(state[name])
        self.load_optimiser_states(state["optimizers"])
        self.schedule.load_state_dict(state["schedule"])
        self.set_rng_state(state["rng"])


def check_optimiser_shapes(optimiser: torch.optim.Optimizer, state: Any, name: str) -> None:
    """Raise a ``ValueError`` if a saved per-parameter tensor (e.g. Adam's ``exp_avg``) of ``state``
    does not have its parameter's shape (the first step would fail deep inside torch otherwise).

    Parameters are matched in order, as ``optimiser.load_state_dict`` matches them; a ``state`` of
    another layout is left to ``load_state_dict`` to refuse.
    """
    groups = state.get("param_groups") if isinstance(state, dict) else None
    saved = state.get("state") if isinstance(state, dict) else None
    if not isinstance(groups, list) or not isinstance(saved, dict):
        return
    ids = [i for group in groups if isinstance(group, dict) for i in group.get("params", ())]
    params = [p for group in optimiser.param_groups for p in group["params"]]
    for i, param in zip(ids, params):
        entry = saved.get(i)
        for key, value in (entry.items() if isinstance(entry, dict) else ()):
            if isinstance(value, Tensor) and value.ndim > 0 and value.shape != param.shape:
                raise ValueError(f"{name}'s state of parameter {i}: {key!r} has shape {tuple(value.shape)}, the "
                                 f"parameter {tuple(param.shape)} (a checkpoint of another model?)")


def progress_bar(progress: bool | None, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on stderr, or ``None`` when ``progress`` is False (``None``: only on a terminal)."""
    if progress is None:
        try:
            progress = sys.stderr.isatty()
        except (AttributeError, ValueError):
            progress = False
    if not progress:
        return None
    return tqdm(file=sys.stderr, **tqdm_kwargs)


def derived_seed(seed: int, purpose: str) -> int:
    """A seed in [0, 2**63) for a random stream of its own, named by ``purpose``, derived from ``seed``.

    Streams drawn from derived seeds never disturb (or overlap by construction with) the training streams.
    """
    digest = hashlib.sha256(f"{purpose}:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % 2**63


def _check_int(name: str, value: Any, low: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r} must be {'None or ' if optional else ''}an integer >= {low}")


def _timed(timers: dict[str, float], key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        timers[key] += time.perf_counter() - start


def check_losses(task: Task, epoch: int, history: list[dict[str, Any]], where: str,
                 cause: BaseException | None = None) -> None:
    """Raise :class:`TrainingDivergedError` if a minibatch loss of this epoch was NaN or infinite."""
    log = task.loss_log
    if log is None:
        return
    bad = ~torch.isfinite(log).all(dim=1)
    if not bool(bad.any()):  # the epoch's one host synchronisation for divergence
        return
    b = int(bad.nonzero()[0, 0])
    previous = next((r for r in reversed(history) if "loss" in r), history[-1] if history else None)
    raise TrainingDivergedError(
        f"training diverged at epoch {epoch}, minibatch {b + 1}/{log.shape[0]}: non-finite loss "
        f"{log[b].tolist()}; last finite metrics: {previous}; last checkpoint ({where}) left untouched",
        epoch=epoch, minibatch=b + 1, last_metrics=previous,
    ) from cause


def check_parameters(task: Task, epoch: int, history: list[dict[str, Any]], where: str,
                     cause: BaseException | None = None) -> None:
    """Raise :class:`TrainingDivergedError` if a parameter is NaN, naming it and the checkpoint: after
    epoch ``epoch`` failed with ``cause``, or (``cause=None``) on resuming before epoch ``epoch``
    from a checkpoint that holds NaN weights."""
    nan = next((found for name, module in task.modules.items()
                if (found := _nan_at(module.state_dict(), name)) is not None), None)
    if nan is None:
        return
    previous = next((r for r in reversed(history) if "loss" in r), history[-1] if history else None)
    if cause is None:
        why, whose = "restored", "the"
    else:
        detail = str(cause).splitlines()[0] if str(cause) else "no detail"
        why, whose = f"{type(cause).__name__}: {detail}", "if the run had just resumed, the"
    raise TrainingDivergedError(
        f"training diverged at epoch {epoch}: the parameter {nan} holds NaN ({why}); {whose} "
        f"checkpoint in {where} holds them: delete it to restart the run",
        epoch=epoch, minibatch=0, last_metrics=previous,
    ) from cause


def _train_epoch(task: Task, epoch: int, betas: Tensor, history: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """``task.run_epoch`` timed, its losses checked; ``seconds`` added to the row."""
    start = time.perf_counter()
    task.loss_log = None
    try:
        row = task.run_epoch(epoch, betas)
    except Exception as exc:  # NaN parameters can make a sampler fail before the epoch ends
        check_losses(task, epoch, history, where, cause=exc)
        check_parameters(task, epoch, history, where, cause=exc)
        raise
    check_losses(task, epoch, history, where)
    row["seconds"] = time.perf_counter() - start
    return row


def final_record(task: Task, history: list[dict[str, Any]], timers: dict[str, float], epochs_done: int
                 ) -> dict[str, Any]:
    """``RunResult.final``: the task's metrics, then timings (``train_seconds``, ``eval_seconds``,
    ``bandit_seconds``), ``epochs``, ``completed`` and ``device``."""
    final = task.final_metrics(history, epochs_done)
    final.update(
        train_seconds=sum(r.get("seconds", 0.0) for r in history),
        eval_seconds=timers["eval_seconds"],
        bandit_seconds=timers["bandit_seconds"],
        epochs=epochs_done,
        completed=epochs_done >= task.config.epochs,
        device=str(task.device),
    )
    return final


def run(
    config: Any,
    make_task: Callable[[], Task],
    run_dir: str | Path | None = None,
    *,
    progress: bool | None = None,
    checkpoint_every: int = 10,
    stop_after: int | None = None,
    model_out: bool = True,
) -> RunResult:
    """Train the task ``make_task()`` builds for ``config``, resuming from ``run_dir`` (see module docstring).

    Args:
        config: a validated config with ``digest()``, ``epochs`` and ``eval_every``.
        make_task: builds the :class:`Task` (called once the run folder and checkpoint are checked).
        run_dir: results folder (checkpoint, model); ``None`` trains without saving anything.
        progress: show a progress bar (``None``: only on a terminal).
        checkpoint_every: write the checkpoint every so many epochs (and after the last one).
        stop_after: stop after this epoch (a checkpoint is written), to simulate a killed run.
        model_out: write ``model.pt`` once the run is complete.

    Returns:
        The :class:`RunResult` (history of the whole run, also across resumes).
    """
    _check_int("checkpoint_every", checkpoint_every, 1)
    _check_int("stop_after", stop_after, 0, optional=True)
    folder = RunFolder(run_dir) if run_dir is not None else None
    with folder if folder is not None else nullcontext():
        state = folder.load_checkpoint(config.digest(), config.epochs) if folder is not None else None
        task = make_task()
        return _run(task, folder, state, progress, checkpoint_every, stop_after, model_out)


def _where(folder: RunFolder | None) -> str:
    return str(folder.path) if folder is not None else "no run_dir"


def save_checkpoint(task: Task, folder: RunFolder | None, history: list[dict[str, Any]], timers: dict[str, float],
                    epoch: int) -> None:
    """Write the run's checkpoint after ``epoch`` epochs (nothing without a folder)."""
    if folder is not None:
        config = task.config
        source = task.data_source()
        folder.save_checkpoint({"digest": config.digest(), "config": config.to_dict(), "epoch": epoch,
                                **task.state_dict(), "history": plain(history), "timers": dict(timers),
                                **({"data": source} if source is not None else {})})


def _nan_at(value: Any, where: str) -> str | None:
    """The first place in a nested state where a floating tensor holds NaN, else ``None``."""
    if isinstance(value, Tensor):
        return where if value.is_floating_point() and bool(torch.isnan(value).any()) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((found for key, item in items if (found := _nan_at(item, f"{where}[{key!r}]")) is not None), None)


def restore(task: Task, folder: RunFolder | None, state: dict[str, Any]) -> None:
    """``task.load_state_dict(state)``; a state the task cannot take (damaged optimiser, model or RNG
    state, an invalid schedule state) raises a :class:`~tvolib.checkpoint.CorruptFileError` naming
    the checkpoint and the way out. (NaN weights are restored: :func:`begin` then reports them as a
    divergence, see :func:`check_parameters`.)"""
    path = folder.checkpoint_path if folder is not None else "the checkpoint"
    advice = f"delete {path} to restart the run"
    try:
        task.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "no detail"
        raise CorruptFileError(f"{path} cannot be restored ({type(exc).__name__}: {detail}); {advice}") from exc


def check_data_source(task: Task, folder: RunFolder | None, state: dict[str, Any]) -> None:
    """Refuse to resume a checkpoint that was trained on other data files than the task reads now
    (e.g. Omniglot's ``chardata.mat`` against the derived set); checkpoints without a record pass."""
    recorded, now = state.get("data"), task.data_source()
    if recorded is None or recorded == now:
        return
    path = folder.checkpoint_path if folder is not None else "the checkpoint"
    raise CorruptFileError(f"{path} was trained on other data files ({recorded}) than those found now ({now}); "
                           f"put back the files the run started with, or delete {path} to restart the run")


def begin(task: Task, folder: RunFolder | None, state: dict[str, Any] | None, last: int,
          timers: dict[str, float] | None = None) -> tuple[list[dict[str, Any]], dict[str, float], int]:
    """Resume from a checkpoint's ``state``, or evaluate the untrained model (history row 0) and tell an
    evidence-driven schedule ``L_0``; returns ``(history, timers, epochs done)``.

    ``timers`` starts a fresh run's timers (e.g. its share of a batched evaluation). A fresh run
    that trains no epoch (``last == 0``) still records its epoch-0 evaluation in a checkpoint.
    """
    timers = {**dict.fromkeys(_TIMERS, 0.0), **(timers or {})}
    if state is not None:
        check_data_source(task, folder, state)
        restore(task, folder, state)
        history, done = list(state["history"]), int(state["epoch"])
        if done < last:  # one host read at resume: NaN weights would only show as a NaN loss later
            check_parameters(task, done + 1, history, _where(folder))
        return history, dict(state["timers"]), done
    history = [{"epoch": 0, **_timed(timers, "eval_seconds", task.evaluate, 0)}]
    if task.schedule.evidence_spec is not None:
        _timed(timers, "bandit_seconds", lambda: task.schedule.step(0, evidence=task.initial_evidence()))
    if last == 0:
        save_checkpoint(task, folder, history, timers, 0)
    return history, timers, 0


def evaluates_after(config: Any, epoch: int) -> bool:
    """Whether the test metrics are computed after ``epoch``: every ``eval_every`` epochs and after the last."""
    return epoch == config.epochs or bool(config.eval_every and epoch % config.eval_every == 0)


def end_epoch(task: Task, folder: RunFolder | None, row: dict[str, Any], history: list[dict[str, Any]],
              timers: dict[str, float], *, last: int, checkpoint_every: int) -> None:
    """After epoch ``row["epoch"]`` is trained and the schedule told: evaluate on cadence (every
    ``eval_every`` epochs and after the last), append the row, checkpoint on cadence (and after ``last``)."""
    epoch = row["epoch"]
    if evaluates_after(task.config, epoch):
        row.update(_timed(timers, "eval_seconds", task.evaluate, epoch))
    history.append(row)
    if epoch % checkpoint_every == 0 or epoch == last:
        save_checkpoint(task, folder, history, timers, epoch)


def finish(task: Task, folder: RunFolder | None, history: list[dict[str, Any]], timers: dict[str, float],
           epochs_done: int, model_out: bool) -> RunResult:
    """The :class:`RunResult`; ``model.pt`` written once the run is complete."""
    final = final_record(task, history, timers, epochs_done)
    if final["completed"] and model_out and folder is not None:
        folder.save_model(task.trained_state(), task.config.digest())
    return RunResult(config=task.config, history=history, schedule_history=plain(task.schedule.history()),
                     final=final)


def _run(task: Task, folder: RunFolder | None, state: dict[str, Any] | None, progress: bool | None,
         checkpoint_every: int, stop_after: int | None, model_out: bool) -> RunResult:
    config, schedule = task.config, task.schedule
    last = config.epochs if stop_after is None else min(config.epochs, stop_after)
    history, timers, start = begin(task, folder, state, last)
    bar = progress_bar(progress if last > start else False, total=config.epochs, initial=start, unit="epoch",
                       desc=task.label)
    try:
        for epoch in range(start + 1, last + 1):
            betas = schedule.current()
            row = _train_epoch(task, epoch, betas, history, _where(folder))
            evidence = row["train_evidence"] if schedule.evidence_spec is not None else None
            _timed(timers, "bandit_seconds", schedule.step, epoch, evidence=evidence, **task.schedule_inputs())
            end_epoch(task, folder, row, history, timers, last=last, checkpoint_every=checkpoint_every)
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k: round(row[k], 3) for k in task.progress_keys
                                 if k in row and math.isfinite(row[k])})
            start = epoch
    finally:
        if bar is not None:
            bar.close()
    return finish(task, folder, history, timers, start, model_out)
