"""The runs of one stack: :class:`StackRun`, one run as the shared loop sees it, and :class:`Stack`,
the batched work (data, stacked model and Adam, epochs, evaluations) of all its runs.

Each :class:`StackRun` is a :class:`~tvolib.training.loop.Task` whose parameters and optimiser
state are slot ``index`` of the stack's tensors, with the streams of the single run
(:class:`~tvolib.training.images.ImageTask`): initialisation under ``torch.manual_seed(seed)``,
data and shuffle generators, and a Monte-Carlo noise generator in the state the single run's
global RNG would be in. :func:`tvolib.training.many.train_many` drives them.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor

from tvolib.checkpoint import plain
from tvolib.data import load_dataset
from tvolib.models import build_model
from tvolib.precision import precision_scope
from tvolib.stacked import StackedModel, evaluate_stack
from tvolib.stacked.epoch import compiled_loss, initial_evidence, train_epoch
from tvolib.stacked.evaluate import DEFAULT_MAX_ELEMENTS, max_elements_for
from tvolib.stacked.objectives import left_points, stacked_loss
from tvolib.stacked.optim import StackedAdam
from tvolib.training.images import SCHEDULE_LOG_WEIGHT_EXAMPLES, ImageTask, RunConfig, build_schedule
from tvolib.training.loop import RunResult, Task, derived_seed, finish
from tvolib.training.run_folder import RunFolder
from tvolib.tvo import EvidenceSpec

__all__ = ["Stack", "StackRun"]


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
        self.stack: Stack | None = None
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
            with torch.no_grad(), _global_rng(self.noise), precision_scope(self.config.precision, self.device):
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

    def data_source(self) -> str | None:
        """As the single run's (the stack's dataset)."""
        return ImageTask.data_source(self)

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


class Stack:
    """The runs of one stack key: the data, the stacked model and optimiser, the batched work."""

    def __init__(self, configs: Sequence[RunConfig], names: Sequence[str], device: torch.device,
                 data_root: str | Path | None, compile: bool = False) -> None:
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
        self.loss_fn = compiled_loss() if compile else stacked_loss  # training minibatches only
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
                                     points=left_points(betas, d=config.d, device=dev) if config.uses_schedule else None,
                                     precision=config.precision, loss_fn=self.loss_fn)
        self.x_epoch = x
        loss_log = loss_log.cpu()  # once for all runs: their divergence checks then read nothing back
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
                                  specs=[r.spec for r in runs], precision=self.config.precision)
        for run, value in zip(runs, values):
            run.results["L_0"] = value

    def evaluate(self, runs: list[StackRun], epochs: list[int]) -> None:
        """Test metrics of each run after its epoch (ImageTask.evaluate, batched: :func:`evaluate_stack`).

        On CUDA the runs go through one batched IWAE pass when the free memory allows it
        (:func:`~tvolib.stacked.evaluate.max_elements_for`); if the device runs out of memory the
        evaluation starts again in groups a quarter of the size (the numbers do not depend on the
        grouping: each run draws from its own generator).
        """
        seeds = [r.config.seed * 1_000_003 + e for r, e in zip(runs, epochs)]
        stack, max_elements = self._sub(runs), max_elements_for(self.device)
        while True:
            try:
                with precision_scope("fp32", self.device):  # evaluation is fp32 whatever the runs' precision
                    metrics = evaluate_stack(stack, self.data.test, seeds=seeds, S=self.config.eval_S,
                                             max_elements=max_elements)
                break
            except torch.OutOfMemoryError:
                if max_elements <= DEFAULT_MAX_ELEMENTS:
                    raise
                torch.cuda.empty_cache()
                max_elements = max(DEFAULT_MAX_ELEMENTS, max_elements // 4)
        for run, epoch, m in zip(runs, epochs, metrics):
            run.results[("evaluate", epoch)] = {f"test_{k}": float(m[k]) for k in ("log_px", "elbo", "kl")}
