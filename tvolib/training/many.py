"""Many image-model runs trained at once: runs of one shape stacked along a leading run dimension.

:func:`train_many` groups configs by :func:`stack_key` and trains each group as one batched
computation (:mod:`tvolib.stacked`); other configs go to their single-run trainer one by one.
Each run of a stack is a :class:`StackRun`, a :class:`~tvolib.training.loop.Task` whose
parameters and optimiser state are slot ``index`` of the stack's tensors, with the streams of
the single run (:class:`~tvolib.training.images.ImageTask`): initialisation under
``torch.manual_seed(seed)``, data and shuffle generators, and a Monte-Carlo noise generator in
the state the single run's global RNG would be in. The shared loop's pieces (``begin``,
``check_losses``, ``end_epoch``, ``finish``) run per run, so its folder, checkpoint (the
single-run format: either trainer resumes the other's), history and divergence are the single
run's. On the CPU a stacked run equals ``train(config)`` bit for bit when every per-run tensor
size is a multiple of the CPU vector width (see :mod:`tvolib.stacked.models`).
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor

from tvolib.checkpoint import plain
from tvolib.config import resolve_device
from tvolib.data import load_dataset
from tvolib.models import MODELS as MODEL_CLASSES, build_model
from tvolib.stacked import ScheduleStepError, StackedModel, StepPool, evaluate_stack, step_schedules
from tvolib.stacked.models import STACKABLE
from tvolib.stacked.epoch import initial_evidence, train_epoch
from tvolib.stacked.objectives import STACKED_OBJECTIVES, left_points
from tvolib.stacked.optim import StackedAdam
from tvolib.training.images import SCHEDULE_LOG_WEIGHT_EXAMPLES, ImageTask, RunConfig, build_schedule
from tvolib.training.kinds import TRAINERS
from tvolib.training.loop import (RunResult, Task, TrainingDivergedError, begin, check_losses, derived_seed,
                                  end_epoch, evaluates_after, finish, progress_bar)
from tvolib.training.run_folder import RunFolder
from tvolib.tvo import EvidenceSpec

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
    :data:`~tvolib.stacked.objectives.STACKED_OBJECTIVES` and a model :class:`StackedModel` batches.
    """
    if not isinstance(config, RunConfig) or config.objective not in STACKED_OBJECTIVES \
            or MODEL_CLASSES.get(config.model) not in STACKABLE:
        return None
    fields = {k: v for k, v in config.to_dict().items() if k not in PER_RUN_FIELDS}
    fields["d"] = config.d if config.uses_schedule else 1
    return json.dumps(fields, sort_keys=True)


@contextmanager
def _global_rng(generator: torch.Generator) -> Iterator[None]:
    """Run a block with torch's global RNG (of the generator's device) in ``generator``'s state, then
    carry the advanced state back to ``generator``; the caller's global RNG is left untouched."""
    dev = generator.device
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        if dev.type == "cuda":
            torch.cuda.set_rng_state(generator.get_state(), dev)
        else:
            torch.set_rng_state(generator.get_state())
        try:
            yield
        finally:
            generator.set_state(torch.cuda.get_rng_state(dev) if dev.type == "cuda" else torch.get_rng_state())


class StackRun(Task):
    """One run of a stack as the shared loop sees it (:class:`~tvolib.training.loop.Task`).

    It owns its config, schedule, run folder and random streams: ``data`` (binarisation) and
    ``shuffle`` as in :class:`~tvolib.training.images.ImageTask`, and ``noise``, which plays the
    single run's global RNG (on the CPU it starts in the global RNG's state after the model's
    initialisation; on CUDA it is the CUDA generator seeded with ``seed``). The batched work
    (epochs, evaluations, ``L_0``) is done by the stack for all its runs, which hands each run its
    results; :meth:`run_epoch`, :meth:`evaluate` and :meth:`initial_evidence` return them.
    """

    global_rng = False
    progress_keys = ImageTask.progress_keys

    def __init__(self, config: RunConfig, device: torch.device, init_rng_state: Tensor, name: str) -> None:
        self.config, self.device, self.name = config, device, name
        self.schedule = build_schedule(config)
        self.spec = self.schedule.evidence_spec or EvidenceSpec.paper()
        self.generators = {"data": torch.Generator(device=device).manual_seed(config.seed),
                           "shuffle": torch.Generator(device="cpu").manual_seed(config.seed + 1)}
        self.noise = torch.Generator(device=device)
        self._cpu_rng = init_rng_state  # the single run's CPU RNG after initialisation
        if device.type == "cuda":
            self.noise.manual_seed(config.seed)
        else:
            self.noise.set_state(init_rng_state)
        self.modules, self.optimisers = {}, []
        self.label = f"{config.model}/{config.objective}/{config.schedule}"
        self.stack: _Stack | None = None
        self.index = -1
        self.results: dict[Any, Any] = {}
        self.folder: RunFolder | None = None
        self.history: list[dict[str, Any]] = []
        self.timers: dict[str, float] = {}
        self.done, self.last = 0, config.epochs
        self.outcome: RunResult | BaseException | None = None  # set when the run ends

    @property
    def where(self) -> str:
        return str(self.folder.path) if self.folder is not None else "no run_dir"

    # -- the batched results ------------------------------------------------------------------
    def run_epoch(self, epoch: int, betas: Tensor) -> dict[str, Any]:
        """The row the stack trained for this run (its minibatch losses in ``loss_log``)."""
        row, self.loss_log = self.results.pop(("epoch", epoch))
        return row

    def evaluate(self, epoch: int) -> dict[str, float]:
        return self.results.pop(("evaluate", epoch))

    def initial_evidence(self) -> float:
        return self.results.pop("L_0")

    def schedule_inputs(self) -> dict[str, Any]:
        """``log_weights``: as the single run's, drawing from this run's noise stream."""
        stack, index = self.stack, self.index

        def log_weights() -> Tensor:
            x = stack.x_epoch[index, :SCHEDULE_LOG_WEIGHT_EXAMPLES].to(stack.data.train.dtype)
            model = stack.model.unstack(index)
            with torch.no_grad(), _global_rng(self.noise):
                log_p, log_q = model.log_joint_and_q(x, self.config.S, reparam=False)
            return log_p - log_q

        return {"log_weights": log_weights}

    @property
    def data(self) -> Any:
        """The stack's dataset (this run's: runs of a stack share dataset, subset and data seed)."""
        return self.stack.data

    def final_metrics(self, history: list[dict[str, Any]], epochs_done: int) -> dict[str, Any]:
        """The single run's final metrics (computed from the history and the dataset only)."""
        return ImageTask.final_metrics(self, history, epochs_done)

    def trained_state(self) -> Any:
        return self.stack.model.state_dict(self.index)

    def end(self, model_out: bool) -> None:
        """The run reached its last epoch: its :class:`RunResult` (and ``model.pt``), while it is in the stack."""
        self.outcome = finish(self, self.folder, self.history, self.timers, self.done, model_out)

    # -- state in the single run's checkpoint format ----------------------------------------------
    def rng_state(self) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        state: dict[str, Any] = {"torch": self._cpu_rng if cuda else self.noise.get_state(), "cuda": None}
        if cuda:
            index = self.device.index or 0
            state["cuda"] = [self.noise.get_state() if i == index else torch.cuda.get_rng_state(i)
                             for i in range(torch.cuda.device_count())]
        state.update({name: gen.get_state() for name, gen in self.generators.items()})
        return state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        if self.device.type == "cuda":
            self._cpu_rng = state["torch"]
            if state.get("cuda") is not None:
                self.noise.set_state(state["cuda"][self.device.index or 0])
        else:
            self.noise.set_state(state["torch"])
        for name, gen in self.generators.items():
            gen.set_state(state[name])

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.stack.model.state_dict(self.index),
                "optimizers": [self.stack.optimiser.run_state_dict(self.index)],
                "schedule": self.schedule.state_dict(), "schedule_history": plain(self.schedule.history()),
                "rng": self.rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stack.model.load_state_dict(self.index, state["model"])
        optimisers = state["optimizers"]
        if len(optimisers) == 1:
            self.stack.optimiser.load_run_state_dict(self.index, optimisers[0])
        else:  # checkpoint format 1: one Adam for theta, one for phi
            self.stack.optimiser.load_run_state_dicts(self.index, optimisers)
        self.schedule.load_state_dict(state["schedule"])
        self.set_rng_state(state["rng"])


class _Stack:
    """The runs of one stack key: the data, the stacked model and optimiser, the batched work."""

    def __init__(self, configs: Sequence[RunConfig], names: Sequence[str], device: torch.device,
                 data_root: str | Path | None) -> None:
        first = configs[0]
        data = load_dataset(first.dataset, data_root, n_train=first.n_train, n_test=first.n_test,
                            seed=first.data_seed)
        self.data = data if data.train.device == device and data.test.device == device else data.to(device)
        self.config, self.device = first, device
        models, self.runs = [], []
        with torch.random.fork_rng(devices=[]):
            for config, name in zip(configs, names):  # initialised as ImageTask does
                torch.manual_seed(config.seed)
                models.append(build_model(config.model, train_mean=self.data.train_mean,
                                          **dict(config.model_options)).to(device))
                self.runs.append(StackRun(config, device, torch.get_rng_state(), name))
        self.model = StackedModel(models)
        self.optimiser = StackedAdam(self.model, lr=first.lr)
        self.x_epoch: Tensor | None = None
        for k, run in enumerate(self.runs):
            run.stack, run.index = self, k

    def keep(self, runs: list[StackRun]) -> None:
        """Go on with ``runs`` only (the others finished or failed)."""
        if [r.index for r in runs] == list(range(self.model.K)):
            return
        index = [r.index for r in runs]
        self.model = self.model.select(index)
        self.optimiser = self.optimiser.select(index, self.model)
        for k, run in enumerate(runs):
            run.index = k
        self.runs = runs

    def _sub(self, runs: Sequence[StackRun]) -> StackedModel:
        index = [r.index for r in runs]
        return self.model if index == list(range(self.model.K)) else self.model.select(index)

    def _binarised(self, generators: Sequence[torch.Generator]) -> Tensor:
        """One binarisation of the training set per run, ``(K, N, D)`` (uint8 when drawn: exact, 4x smaller)."""
        if not self.data.dynamic_binarization:
            return self.data.train.expand(len(generators), *self.data.train.shape)
        return torch.stack([self.data.train_epoch(g).to(torch.uint8) for g in generators])

    def train_epoch(self) -> None:
        """One epoch of every run (:func:`tvolib.stacked.epoch.train_epoch`); each run gets its history row."""
        config, dev, runs = self.config, self.device, self.runs
        n = self.data.train.shape[0]
        betas = [r.schedule.current() for r in runs]
        x = self._binarised([r.generators["data"] for r in runs])
        perm = torch.stack([torch.randperm(n, generator=r.generators["shuffle"]) for r in runs]).to(dev)
        loss_log, sums = train_epoch(self.model, self.optimiser, config.objective, x, perm, [r.noise for r in runs],
                                     S=config.S, batch_size=config.batch_size, specs=[r.spec for r in runs],
                                     points=left_points(betas, device=dev) if config.uses_schedule else None)
        self.x_epoch = x
        for k, (run, m) in enumerate(zip(runs, (sums / n).tolist())):
            row = {"epoch": run.done + 1, "loss": m[0], "train_elbo": m[2], "train_iwae": m[3],
                   "train_evidence": m[4], "betas": [float(v) for v in betas[k].tolist()]}
            run.results[("epoch", run.done + 1)] = (row, loss_log[:, k])

    def initial_evidence(self, runs: list[StackRun]) -> None:
        """``L_0`` of each run (ImageTask.initial_evidence, batched): streams seeded for this purpose only."""
        dev, seeds = self.device, [r.config.seed for r in runs]
        noise = [torch.Generator(device=dev).manual_seed(derived_seed(s, "initial_evidence")) for s in seeds]
        x = self._binarised([torch.Generator(device=dev).manual_seed(derived_seed(s, "L_0 data")) for s in seeds])
        values = initial_evidence(self._sub(runs), x, noise, S=self.config.S, batch_size=self.config.batch_size,
                                  specs=[r.spec for r in runs])
        for run, value in zip(runs, values):
            run.results["L_0"] = value

    def evaluate(self, runs: list[StackRun], epochs: list[int]) -> None:
        """Test metrics of each run after its epoch (ImageTask.evaluate, batched: :func:`evaluate_stack`)."""
        seeds = [r.config.seed * 1_000_003 + e for r, e in zip(runs, epochs)]
        metrics = evaluate_stack(self._sub(runs), self.data.test, seeds=seeds, S=self.config.eval_S)
        for run, epoch, m in zip(runs, epochs, metrics):
            run.results[("evaluate", epoch)] = {f"test_{k}": float(m[k]) for k in ("log_px", "elbo", "kl")}


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


def _epoch(stack: _Stack, active: list[StackRun], pool: StepPool | None, checkpoint_every: int, model_out: bool
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


def _train_stack(stack: _Stack, states: list[dict[str, Any] | None], *, checkpoint_every: int, pool: StepPool | None,
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
    kwargs = {k: v for k, v in options.items() if v is not None and k not in ("model_out", "pool", "progress")}
    kwargs["progress"] = options["progress"]
    if isinstance(config, RunConfig):
        kwargs["model_out"] = options["model_out"]
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
                   stop_after=stop_after, model_out=model_out)
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
            stack = _Stack([configs[i] for i in index], [names[i] for i in index], options["device"],
                           options["data_root"])
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
