"""One training loop for every model, objective and schedule of the paper, resumable bit for bit.

The paper (Appendix A, "Training Procedure") trains with Adam (learning rate 1e-3) on minibatches
of 1000 for a fixed number of epochs; the schedule ``beta`` is held fixed within an epoch and the
adaptive schedules (moments, GP bandit, Section 3 / Algorithm 1) are told after every epoch.
:func:`train` does exactly that from a typed, hashable :class:`RunConfig`:

* determinism: the global torch RNG (parameter initialisation, latent samples) is seeded from
  ``config.seed``; the data RNGs (dynamic binarisation, shuffling) are explicit
  ``torch.Generator`` objects seeded from it too; test evaluation runs under a forked RNG so the
  evaluation frequency never changes the training trajectory;
* checkpoints (model, optimisers, schedule state, all RNG states, history) are written
  atomically every ``checkpoint_every`` epochs; a restarted run resumes from them and ends
  bit-identical on CPU to an uninterrupted run;
* a non-finite loss stops the run with :class:`TrainingDivergedError` before the optimiser step,
  leaving the last good checkpoint untouched.
"""
from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor, nn

from tvolib import checkpoint as ckpt
from tvolib.config import ExperimentConfig, freeze, resolve_device
from tvolib.data import DATASETS, load_dataset
from tvolib.evaluate import evaluate
from tvolib.models import MODELS as MODEL_CLASSES, build_model
from tvolib.objectives import OBJECTIVES, compute_loss
from tvolib.schedules import FixedSchedule, MomentsSchedule, Schedule
from tvolib.tvo import EvidenceSpec, linear, log_evidence, log_uniform

__all__ = [
    "MODELS",
    "REPARAM_OBJECTIVES",
    "SCHEDULES",
    "RunConfig",
    "RunResult",
    "TrainingDivergedError",
    "load_model",
    "make_schedule",
    "train",
]

MODELS: tuple[str, ...] = ("vae", "sbn")
#: Objectives that need reparameterised samples, hence a continuous model (tvolib.objectives).
REPARAM_OBJECTIVES: tuple[str, ...] = ("iwae", "tvo_reparam")
SCHEDULES: tuple[str, ...] = (
    "linear",
    "log",
    "moments",
    "gp_bandit",
    "gp_bandit_unsorted",
    "gp_bandit_time_invariant",
    "random",
)
#: Keyword arguments that :func:`make_schedule` sets itself from the schedule name and the config.
_RESERVED_SCHEDULE_OPTIONS: dict[str, tuple[str, ...]] = {
    "moments": ("d",),
    "gp_bandit": ("d", "sort", "time_varying", "seed"),
    "gp_bandit_unsorted": ("d", "sort", "time_varying", "seed"),
    "gp_bandit_time_invariant": ("d", "sort", "time_varying", "seed"),
    "random": ("d", "seed"),
}
#: Training examples handed to ``Schedule.step``'s ``log_weights`` callable (moments re-estimation).
SCHEDULE_LOG_WEIGHT_EXAMPLES = 1000
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
_CHECKPOINT_FORMAT = 1


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; carries where it happened and the last finite metrics."""

    def __init__(self, message: str, *, epoch: int, minibatch: int, last_metrics: dict[str, Any] | None):
        super().__init__(message)
        self.epoch = epoch
        self.minibatch = minibatch
        self.last_metrics = last_metrics

    def __reduce__(self):  # picklable (e.g. across a submitit/multiprocessing boundary) with its fields
        return (_rebuild_diverged, (self.args[0], self.epoch, self.minibatch, self.last_metrics))


def _rebuild_diverged(message: str, epoch: int, minibatch: int, last_metrics: dict[str, Any] | None) -> TrainingDivergedError:
    return TrainingDivergedError(message, epoch=epoch, minibatch=minibatch, last_metrics=last_metrics)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def _normalise_options(name: str, options: Any) -> tuple[tuple[str, Any], ...]:
    """Options given as a mapping or pairs -> a sorted tuple of ``(str, value)`` pairs."""
    if isinstance(options, dict):
        pairs = list(options.items())
    else:
        try:
            pairs = [tuple(p) for p in options]
        except TypeError:
            raise ValueError(f"{name} must be a dict or a sequence of (name, value) pairs; got {options!r}") from None
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"{name} must be a sequence of (name, value) pairs; got {options!r}")
    keys = [k for k, _ in pairs]
    if not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{name} keys must be strings; got {keys!r}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name} has repeated keys: {keys!r}")
    return tuple(sorted(((k, freeze(v)) for k, v in pairs), key=lambda kv: kv[0]))


def _json_safe(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, tuple):
        return all(_json_safe(v) for v in value)
    return False


@dataclass(frozen=True)
class RunConfig(ExperimentConfig):
    """Everything that determines a TVO training run (and hence its results folder, :meth:`digest`).

    ``d`` counts the left points including ``beta_0 = 0`` (REFERENCE.md); it is ignored unless the
    objective starts with ``"tvo"`` (other objectives get the ELBO point ``[0]``). ``schedule_options``
    / ``model_options`` are extra keyword arguments for the schedule's constructor / ``build_model``,
    stored as a sorted tuple of pairs (a dict is accepted and normalised) so the config stays hashable.
    """

    model: str = "vae"
    dataset: str = "mnist"
    n_train: int | None = None
    n_test: int | None = None
    data_seed: int = 0
    objective: str = "tvo"
    schedule: str = "log"
    d: int = 5
    S: int = 10
    epochs: int = 100
    batch_size: int = 1000
    lr: float = 1e-3
    seed: int = 1
    log_beta1: float = 0.025
    eval_every: int = 0
    eval_S: int = 5000
    schedule_options: tuple[tuple[str, Any], ...] = ()
    model_options: tuple[tuple[str, Any], ...] = ()
    kind: ClassVar[str] = "tvo"

    def __post_init__(self) -> None:
        object.__setattr__(self, "schedule_options", _normalise_options("schedule_options", self.schedule_options))
        object.__setattr__(self, "model_options", _normalise_options("model_options", self.model_options))

    # -- validation ---------------------------------------------------------------------------
    def validate(self) -> "RunConfig":
        """Return ``self`` if every field is acceptable, else raise ``ValueError`` naming the field."""

        def choice(name: str, accepted: tuple[str, ...]) -> None:
            value = getattr(self, name)
            if value not in accepted:
                raise ValueError(f"RunConfig.{name}={value!r} is not accepted; choose one of {list(accepted)}")

        def integer(name: str, low: int, optional: bool = False) -> None:
            value = getattr(self, name)
            if optional and value is None:
                return
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                what = f"an integer >= {low}" + (" or None" if optional else "")
                raise ValueError(f"RunConfig.{name}={value!r} is not accepted; it must be {what}")

        choice("model", MODELS)
        choice("dataset", tuple(DATASETS))
        choice("objective", tuple(OBJECTIVES))
        choice("schedule", SCHEDULES)
        if getattr(MODEL_CLASSES.get(self.model), "discrete", False) and self.objective in REPARAM_OBJECTIVES:
            usable = [o for o in OBJECTIVES if o not in REPARAM_OBJECTIVES]
            raise ValueError(
                f"RunConfig.objective={self.objective!r} needs reparameterised samples, which model "
                f"{self.model!r} (discrete latents) cannot give; choose one of {usable}"
            )
        integer("n_train", 1, optional=True)
        integer("n_test", 1, optional=True)
        integer("data_seed", 0)
        integer("d", 2 if self.uses_schedule and self.schedule not in ("linear", "log") else 1)
        integer("S", 2 if self.objective.startswith("tvo") or self.objective == "vimco" else 1)
        integer("epochs", 0)
        integer("batch_size", 1)
        integer("seed", 0)
        integer("eval_every", 0)
        integer("eval_S", 1)
        for name in ("lr", "log_beta1"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"RunConfig.{name}={value!r} is not accepted; it must be a finite number > 0")
        if self.log_beta1 >= 1:
            raise ValueError(f"RunConfig.log_beta1={self.log_beta1!r} is not accepted; it must lie in (0, 1)")
        for name in ("schedule_options", "model_options"):
            for key, value in getattr(self, name):
                if not _json_safe(value):
                    raise ValueError(
                        f"RunConfig.{name}[{key!r}]={value!r} is not accepted; values must be None, bool, int, "
                        "finite float, str or tuples of those"
                    )
        model_accepts = [p for p in inspect.signature(MODEL_CLASSES[self.model].__init__).parameters
                         if p not in ("self", "train_mean")]
        unknown_model = [k for k, _ in self.model_options if k not in model_accepts]
        if unknown_model:
            raise ValueError(
                f"RunConfig.model_options has unknown names {unknown_model} for model {self.model!r}; "
                f"accepted: {model_accepts}"
            )
        accepted = _schedule_option_names(self.schedule)
        if accepted is not None:
            unknown = [k for k, _ in self.schedule_options if k not in accepted]
            if unknown:
                raise ValueError(
                    f"RunConfig.schedule_options has unknown names {unknown} for schedule {self.schedule!r}; "
                    f"accepted: {sorted(accepted)}"
                )
        return self

    @property
    def uses_schedule(self) -> bool:
        """Whether the objective integrates over a schedule (TVO family) so that ``d``/``schedule`` matter."""
        return self.objective.startswith("tvo")


def _schedule_class(name: str) -> type[Schedule] | None:
    """The class behind an adaptive schedule name (``None`` for linear/log).

    The bandit is imported here, not at module level, so that fixed-schedule runs do not pay for
    importing BoTorch/GPyTorch.
    """
    if name in ("linear", "log"):
        return None
    if name == "moments":
        return MomentsSchedule
    from tvolib.bandit import GPBanditSchedule, RandomSchedule

    return {
        "gp_bandit": GPBanditSchedule,
        "gp_bandit_unsorted": GPBanditSchedule,
        "gp_bandit_time_invariant": GPBanditSchedule,
        "random": RandomSchedule,
    }.get(name)


def _schedule_option_names(name: str) -> set[str] | None:
    """Keyword arguments ``schedule_options`` may set for schedule ``name`` (None: anything).

    A constructor that forwards ``**kwargs`` to its base class accepts the base's names too.
    """
    cls = _schedule_class(name)
    if cls is None:  # linear / log take no options (log's beta_1 is RunConfig.log_beta1)
        return set()
    named: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        named |= {
            p.name for p in params.values()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        }
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            break
    else:
        return None
    return named - set(_RESERVED_SCHEDULE_OPTIONS.get(name, ())) - {"self"}


def make_schedule(config: RunConfig) -> Schedule:
    """The schedule object named by ``config.schedule`` (Section 3 for the bandits).

    Non-TVO objectives get the fixed ELBO point ``[0]``. Bandit and random schedules are seeded
    with ``config.seed``; ``config.schedule_options`` go to the constructor.
    """
    opts = dict(config.schedule_options)
    if not config.uses_schedule:
        return FixedSchedule(torch.zeros(1, dtype=torch.float64))
    name = config.schedule
    if name == "linear":
        return FixedSchedule(linear(config.d))
    if name == "log":
        return FixedSchedule(log_uniform(config.d, beta1=config.log_beta1))
    if name == "moments":
        return MomentsSchedule(config.d, **opts)
    cls = _schedule_class(name)
    if name in ("gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant"):
        return cls(
            config.d,
            sort=name != "gp_bandit_unsorted",
            time_varying=name != "gp_bandit_time_invariant",
            seed=config.seed,
            **opts,
        )
    if name == "random":
        return cls(config.d, seed=config.seed, **opts)
    raise ValueError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What :func:`train` returns: per-epoch ``history`` (row 0: evaluation of the untrained model),
    the schedule's per-update records, and ``final`` (last evaluation, timings, device)."""

    config: RunConfig
    history: list[dict[str, Any]]
    schedule_history: list[dict[str, Any]]
    final: dict[str, Any] = field(default_factory=dict)


def _optimisers(model: nn.Module, lr: float) -> tuple[list[nn.Parameter], list[nn.Parameter], list[torch.optim.Adam]]:
    """Adam on the generative parameters theta and Adam on the inference parameters phi.

    Adam acts elementwise, so two optimisers over a partition of the parameters are the same as one
    over all of them; keeping two always lets the wake-sleep family give each set its own loss.
    """
    theta = list(model.generative_parameters())
    phi = list(model.inference_parameters())
    ids_theta, ids_phi = {id(p) for p in theta}, {id(p) for p in phi}
    all_ids = {id(p) for p in model.parameters()}
    if ids_theta & ids_phi or (ids_theta | ids_phi) != all_ids:
        raise ValueError(
            "model.generative_parameters() and model.inference_parameters() must partition model.parameters()"
        )
    return theta, phi, [torch.optim.Adam(theta, lr=lr), torch.optim.Adam(phi, lr=lr)]


def _rng_state(generators: dict[str, torch.Generator], device: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    state["cuda"] = torch.cuda.get_rng_state_all() if device.type == "cuda" else None
    for name, gen in generators.items():
        state[name] = gen.get_state()
    return state


def _set_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, gen in generators.items():
        gen.set_state(state[name])


def _on_device(data: Any, device: torch.device) -> Any:
    """The dataset with its tensors moved to ``device`` once (binarisation then happens there)."""
    if data.train.device == device and data.test.device == device:
        return data
    return data.to(device)


def _eval_metrics(model: nn.Module, test: Tensor, config: RunConfig, epoch: int) -> dict[str, float]:
    """Test log p(x) (IWAE bound with ``eval_S`` samples), ELBO and KL, under an epoch-seeded forked RNG.

    Forking (``evaluate(seed=...)``) keeps the training trajectory independent of how often we evaluate.
    """
    metrics = evaluate(model, test, S=config.eval_S, seed=config.seed * 1_000_003 + epoch)
    return {f"test_{k}": float(metrics[k]) for k in ("log_px", "elbo", "kl")}


def _final(history: list[dict[str, Any]], timers: dict[str, float], device: torch.device, epochs_done: int,
           completed: bool) -> dict[str, Any]:
    final: dict[str, Any] = {}
    for row in reversed(history):
        if "test_log_px" in row:
            final.update({k: v for k, v in row.items() if k.startswith("test_")})
            break
    for row in reversed(history):
        if "train_elbo" in row:
            final.update({k: row[k] for k in ("train_elbo", "train_iwae", "train_evidence") if k in row})
            break
    final.update(
        train_seconds=sum(r.get("seconds", 0.0) for r in history),
        eval_seconds=timers["eval_seconds"],
        bandit_seconds=timers["bandit_seconds"],
        epochs=epochs_done,
        completed=completed,
        device=str(device),
    )
    return final


def train(
    config: RunConfig,
    run_dir: str | Path | None = None,
    *,
    data_root: str | Path | None = None,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    checkpoint_every: int = 10,
    stop_after: int | None = None,
    model_out: bool = True,
    compile: bool = False,
) -> RunResult:
    """Train ``config`` (resuming from ``run_dir/checkpoint.pt`` if present) and return its :class:`RunResult`.

    Each epoch: a fresh dynamic binarisation of the training set, a seeded shuffle, minibatches of
    ``batch_size`` with the schedule's betas held fixed; then ``schedule.step``. The per-epoch training
    metrics (``train_elbo``, ``train_iwae`` = IWAE-S bound, ``train_evidence`` = the schedule's
    ``evidence_spec`` or the paper's linear-50 left Riemann sum, Appendix A) are computed from the
    minibatches' detached ``log w`` that the loss computed anyway, so they cost no extra network
    passes; they are averages over parameters that change within the epoch, as in the paper's code.
    Test evaluation runs at epoch 0, every ``eval_every`` epochs, and at the end.

    ``stop_after=k`` stops after epoch ``k`` (after writing a checkpoint), to simulate a killed run.
    ``compile=True`` runs the model's ``log_joint_and_q`` through ``torch.compile`` for the training
    minibatches only (evaluation stays eager): it pays only for long runs with large minibatches
    (benchmarks/README.md, "Training throughput"). Compiled runs are deterministic and resume exactly
    too (checked by hand, not in the tests: compiling takes 15-30 s), but their numbers differ from
    eager runs (Inductor draws its own random numbers), so do not mix the two within one sweep.
    ``device`` defaults to CUDA when available. Raises :class:`TrainingDivergedError` on a non-finite
    loss (the last checkpoint is left as it was) and ``ValueError`` if ``run_dir`` holds a checkpoint
    of another config.
    """
    config.validate()
    if not (isinstance(checkpoint_every, int) and checkpoint_every >= 1):
        raise ValueError(f"checkpoint_every={checkpoint_every!r} must be an integer >= 1")
    if stop_after is not None and not (isinstance(stop_after, int) and stop_after >= 0):
        raise ValueError(f"stop_after={stop_after!r} must be None or an integer >= 0")
    dev = resolve_device(device)
    run_path = Path(run_dir) if run_dir is not None else None
    ckpt_path = run_path / CHECKPOINT_NAME if run_path is not None else None
    digest = config.digest()

    state = None
    if ckpt_path is not None and ckpt_path.exists():
        state = ckpt.load(ckpt_path)
        if state.get("digest") != digest:
            raise ValueError(
                f"{ckpt_path} belongs to config {state.get('digest')!r}, not to this config {digest!r}; "
                "use another run_dir or delete the checkpoint"
            )

    torch.manual_seed(config.seed)
    data = _on_device(
        load_dataset(config.dataset, data_root, n_train=config.n_train, n_test=config.n_test, seed=config.data_seed), dev
    )
    model = build_model(config.model, train_mean=data.train_mean, **dict(config.model_options)).to(dev)
    theta, phi, optimisers = _optimisers(model, config.lr)
    schedule = make_schedule(config)
    spec = schedule.evidence_spec or EvidenceSpec.paper()
    generators = {
        "data": torch.Generator(device=dev).manual_seed(config.seed),
        "shuffle": torch.Generator(device="cpu").manual_seed(config.seed + 1),
    }
    history: list[dict[str, Any]] = []
    timers = {"eval_seconds": 0.0, "bandit_seconds": 0.0}
    start = 0

    if state is not None:
        model.load_state_dict(state["model"])
        for opt, s in zip(optimisers, state["optimizers"]):
            opt.load_state_dict(s)
        schedule.load_state_dict(state["schedule"])
        _set_rng_state(state["rng"], generators, dev)
        history = list(state["history"])
        timers = dict(state["timers"])
        start = int(state["epoch"])
    else:
        t0 = time.perf_counter()
        row = {"epoch": 0, **_eval_metrics(model, data.test, config, 0)}
        timers["eval_seconds"] += time.perf_counter() - t0
        history.append(row)

    def save_checkpoint(epoch: int) -> None:
        if ckpt_path is None:
            return
        ckpt.atomic_save(
            {
                "format": _CHECKPOINT_FORMAT,
                "digest": digest,
                "config": config.to_dict(),
                "epoch": epoch,
                "model": model.state_dict(),
                "optimizers": [opt.state_dict() for opt in optimisers],
                "schedule": schedule.state_dict(),
                "schedule_history": ckpt.plain(schedule.history()),
                "rng": _rng_state(generators, dev),
                "history": ckpt.plain(history),
                "timers": dict(timers),
            },
            ckpt_path,
        )

    compiled = torch.compile(model.log_joint_and_q) if compile else None
    n = data.train.shape[0]
    n_batches = math.ceil(n / config.batch_size)
    log_s = math.log(config.S)
    last = config.epochs if stop_after is None else min(config.epochs, stop_after)
    bar = ckpt.progress_bar(progress if last > start else False, total=config.epochs, initial=start, unit="epoch",
                            desc=f"{config.model}/{config.objective}/{config.schedule}")

    try:
        for epoch in range(start + 1, last + 1):
            t0 = time.perf_counter()
            betas = schedule.current()
            betas_dev = betas.to(dev)
            x_epoch = data.train_epoch(generators["data"])
            perm = torch.randperm(n, generator=generators["shuffle"]).to(dev)
            sums = torch.zeros(5, dtype=torch.float64, device=dev)  # loss, phi_loss, elbo, iwae, evidence
            two_losses = False
            for b in range(n_batches):
                xb = x_epoch[perm[b * config.batch_size:(b + 1) * config.batch_size]]
                if compiled is not None:  # instance attribute shadows the method for this call only
                    model.log_joint_and_q = compiled
                try:
                    out = compute_loss(config.objective, model, xb, config.S, betas_dev)
                finally:
                    if compiled is not None:
                        del model.log_joint_and_q
                losses = [out.loss] if out.phi_loss is None else [out.loss, out.phi_loss]
                two_losses = out.phi_loss is not None
                if not all(bool(torch.isfinite(l.detach()).all()) for l in losses):
                    previous = next((r for r in reversed(history) if "loss" in r), history[-1] if history else None)
                    where = f"{run_path}" if run_path is not None else "no run_dir"
                    raise TrainingDivergedError(
                        f"training diverged at epoch {epoch}, minibatch {b + 1}/{n_batches}: "
                        f"non-finite loss {[float(l.detach()) for l in losses]}; last finite metrics: {previous}; "
                        f"last checkpoint ({where}) left untouched",
                        epoch=epoch,
                        minibatch=b + 1,
                        last_metrics=previous,
                    )
                if out.phi_loss is None:
                    params = theta + phi
                    grads = torch.autograd.grad(out.loss, params, allow_unused=True)
                else:  # wake-sleep family: each loss trains only its own parameter set
                    params = theta + phi
                    grads = torch.autograd.grad(out.loss, theta, allow_unused=True, retain_graph=True) + \
                        torch.autograd.grad(out.phi_loss, phi, allow_unused=True)
                for p, g in zip(params, grads):
                    p.grad = g
                for opt in optimisers:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                with torch.no_grad():
                    log_w = out.log_w.detach()
                    bsz = xb.shape[0]
                    sums += torch.stack([
                        out.loss.detach().double() * bsz,
                        (out.phi_loss.detach().double() * bsz) if out.phi_loss is not None else sums.new_zeros(()),
                        log_w.mean(0).double().sum(),
                        (torch.logsumexp(log_w, 0) - log_s).double().sum(),
                        log_evidence(log_w, spec).double().sum(),
                    ])
            means = (sums / n).tolist()
            row = {"epoch": epoch, "loss": means[0]}
            if two_losses:
                row["phi_loss"] = means[1]
            row.update(train_elbo=means[2], train_iwae=means[3], train_evidence=means[4],
                       betas=[float(v) for v in betas.tolist()])
            row["seconds"] = time.perf_counter() - t0

            def log_weights(x: Tensor = x_epoch[:SCHEDULE_LOG_WEIGHT_EXAMPLES]) -> Tensor:
                """log w (S, N) on up to 1000 training examples of this epoch's binarisation, no grad."""
                with torch.no_grad():
                    log_p, log_q = model.log_joint_and_q(x, config.S, reparam=False)
                    return log_p - log_q

            t1 = time.perf_counter()
            schedule.step(epoch, evidence=row["train_evidence"] if schedule.evidence_spec is not None else None,
                          log_weights=log_weights)
            timers["bandit_seconds"] += time.perf_counter() - t1

            if epoch == config.epochs or (config.eval_every and epoch % config.eval_every == 0):
                t2 = time.perf_counter()
                row.update(_eval_metrics(model, data.test, config, epoch))
                timers["eval_seconds"] += time.perf_counter() - t2
            history.append(row)

            if epoch % checkpoint_every == 0 or epoch == last:
                save_checkpoint(epoch)
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k: round(row[k], 2) for k in ("loss", "train_elbo", "test_log_px") if k in row})
            start = epoch
    finally:
        if bar is not None:
            bar.close()

    if state is None and last == 0:  # epochs=0 (or stop_after=0): still record the epoch-0 evaluation
        save_checkpoint(0)
    completed = start >= config.epochs
    if completed and model_out and run_path is not None:
        ckpt.atomic_save(model.state_dict(), run_path / MODEL_NAME)
    return RunResult(
        config=config,
        history=history,
        schedule_history=schedule.history(),
        final=_final(history, timers, dev, start, completed),
    )


def load_model(config: RunConfig, run_dir: str | Path, *, device: str | torch.device | None = "cpu") -> nn.Module:
    """Rebuild the model of ``config`` and load the final weights that :func:`train` saved in ``run_dir``.

    No data are read: models that depend on the training mean keep it in their state dict (the
    SBN's ``train_mean`` buffer), so the saved state restores it.
    """
    path = Path(run_dir) / MODEL_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: train the run to completion first (train(..., model_out=True))")
    dev = resolve_device(device)
    model = build_model(config.model, **dict(config.model_options))
    model.load_state_dict(ckpt.load(path))
    return model.to(dev).eval()
