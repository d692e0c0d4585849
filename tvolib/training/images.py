"""Training the image models (VAE, SBN) with the TVO or a baseline: the config and the epoch body.

The paper (Appendix A, "Training Procedure") trains with Adam (learning rate 1e-3) on minibatches
of 1000 for a fixed number of epochs; the schedule ``beta`` is held fixed within an epoch and the
adaptive schedules (moments, GP bandit, Section 3 / Algorithm 1) are told after every epoch.
:func:`train` does exactly that from a typed, hashable :class:`RunConfig` through the shared
loop (:mod:`tvolib.training.loop`). Determinism: torch's global RNG (initialisation, latent
samples) is seeded from ``config.seed``; the data streams (dynamic binarisation, shuffling) are
explicit generators seeded from it too; test evaluation runs under a forked RNG, so the evaluation
frequency never changes the training trajectory.
"""
from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from tvolib.checks import plain_value
from tvolib.config import ExperimentConfig, freeze, normalise_numbers, resolve_device
from tvolib.data import DATASETS, load_dataset
from tvolib.models import MODELS as MODEL_CLASSES, build_model
from tvolib.objectives import OBJECTIVES, LossOutput, compute_loss
from tvolib.precision import PRECISIONS, autocast_scope, matmul_scope, precision_scope
from tvolib.schedules import Schedule
from tvolib.training.run_folder import MODEL_ADVICE, load_model_state
from tvolib.training.evaluate import evaluate
from tvolib.training.fields import bad_field, check_integers, check_positive_numbers, check_seeds
from tvolib.training.loop import RunResult, Task, derived_seed, run
from tvolib.training.schedule import (
    BANDIT_SCHEDULES, SCHEDULES, VARIABLE_D_SCHEDULES, canonical_options, config_digest, make_schedule,
    schedule_option_names,
)
from tvolib.tvo import EvidenceSpec, log_evidence

__all__ = ["MODELS", "REPARAM_OBJECTIVES", "SCHEDULES", "ImageTask", "RunConfig", "load_image_model", "train"]

MODELS: tuple[str, ...] = tuple(MODEL_CLASSES)
#: Objectives that need reparameterised samples, hence a continuous model (tvolib.objectives).
REPARAM_OBJECTIVES: tuple[str, ...] = ("iwae", "tvo_reparam")
#: Training examples handed to ``Schedule.step``'s ``log_weights`` callable (moments re-estimation).
SCHEDULE_LOG_WEIGHT_EXAMPLES = 1000


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
    return tuple(sorted(((k, freeze(plain_value(v))) for k, v in pairs), key=lambda kv: kv[0]))


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

    ``d`` counts the left points including ``beta_0 = 0`` (as the authors' code); it is ignored
    unless the objective starts with ``"tvo"`` (other objectives get the ELBO point ``[0]``). For
    ``schedule="gp_bandit_adaptive"``, which chooses the number of points every round, ``d`` is the
    most it may choose (its ``d_max``; ``d_min`` and the rest are ``schedule_options``), and the run
    stacks with the runs of that ``d`` (:func:`~tvolib.training.many.stack_key`).
    ``log_beta1`` is ``beta_1``, the first non-zero point of the ``log`` schedule (its name is kept
    so that results folders keep their names). ``schedule_options`` / ``model_options`` are extra
    keyword arguments for the schedule's constructor / ``build_model``, stored as a sorted tuple of
    pairs (a dict is accepted and normalised) so the config stays hashable; NumPy and torch scalars
    are stored as Python values, and schedule options in one spelling per meaning
    (:func:`~tvolib.training.schedule.canonical_options`: ``kappa=2`` is ``2.0``, ``time_varying=0``
    is ``False``, ``kappa=None``, a preset's own value or a size the schedule derives from ``d``
    (``n_init=12`` at ``d = 4``) is no option), so one run has one digest. ``precision`` is the
    training arithmetic (:mod:`tvolib.precision`: ``"fp32"``, ``"tf32"`` or ``"bf16"``; evaluation is
    always fp32); it is part of :meth:`to_dict` and the digest only when it is not ``"fp32"``, so
    every fp32 config keeps the name it had before the setting existed.

    Example:
        >>> RunConfig(dataset="mnist", schedule="gp_bandit", d=5, S=10).validate().digest()  # doctest: +SKIP
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
    precision: str = "fp32"
    kind: ClassVar[str] = "tvo"

    def __post_init__(self) -> None:
        normalise_numbers(self)  # NumPy integers accepted; lr=1 and lr=1.0 are one config
        options = _normalise_options("schedule_options", self.schedule_options)
        object.__setattr__(self, "schedule_options", canonical_options(self.schedule, options, self.d))
        object.__setattr__(self, "model_options", _normalise_options("model_options", self.model_options))

    @property
    def uses_schedule(self) -> bool:
        """Whether the objective integrates over a schedule (TVO family) so that ``d``/``schedule`` matter."""
        return self.objective.startswith("tvo")

    def to_dict(self) -> dict[str, Any]:
        """Field values as JSON-ready objects; ``precision`` only when it is not the default ``"fp32"``."""
        fields = super().to_dict()
        if fields["precision"] == "fp32":
            del fields["precision"]
        return fields

    def digest(self) -> str:
        """The results folder's name (:func:`~tvolib.training.schedule.config_digest`)."""
        return config_digest(self.kind, self.to_dict(), self.uses_schedule and self.schedule in BANDIT_SCHEDULES)

    def validate(self) -> "RunConfig":
        """Return ``self`` if every field is acceptable, else raise ``ValueError`` naming the field.

        Option values are checked by building the model and the schedule (cheap, no data read,
        the global RNG untouched), so a bad config fails here and not during training.
        """
        self._validate_names()
        self._validate_numbers()
        self._validate_options()
        return self

    def _bad(self, name: str, what: str) -> ValueError:
        return bad_field(self, name, what)

    def _validate_names(self) -> None:
        for name, accepted in (("model", MODELS), ("dataset", tuple(DATASETS)), ("objective", tuple(OBJECTIVES)),
                               ("schedule", SCHEDULES), ("precision", PRECISIONS)):
            if getattr(self, name) not in accepted:
                raise self._bad(name, f"choose one of {list(accepted)}")
        if getattr(MODEL_CLASSES[self.model], "discrete", False) and self.objective in REPARAM_OBJECTIVES:
            usable = [o for o in OBJECTIVES if o not in REPARAM_OBJECTIVES]
            raise self._bad("objective", f"it needs reparameterised samples, which model {self.model!r} "
                                         f"(discrete latents) cannot give; choose one of {usable}")

    def _validate_numbers(self) -> None:
        needs_two = self.objective.startswith("tvo") or self.objective == "vimco"
        adaptive = self.uses_schedule and self.schedule not in ("linear", "log")
        check_integers(self, {"n_train": 1, "n_test": 1, "S": 2 if needs_two else 1, "epochs": 0, "batch_size": 1,
                              "eval_every": 0, "eval_S": 1, "d": 2 if adaptive else 1}, optional=("n_train", "n_test"))
        check_seeds(self, ("data_seed", "seed"))
        check_positive_numbers(self, ("lr", "log_beta1"))
        if self.log_beta1 >= 1:
            raise self._bad("log_beta1", "it must lie in (0, 1)")

    def _validate_options(self) -> None:
        for name in ("schedule_options", "model_options"):
            for key, value in getattr(self, name):
                if not _json_safe(value):
                    raise ValueError(f"RunConfig.{name}[{key!r}]={value!r} is not accepted; values must be None, "
                                     "bool, int, finite float, str or tuples of those")
        model_accepts = [p for p in _init_parameters(MODEL_CLASSES[self.model]) if p != "train_mean"]
        unknown = [k for k, _ in self.model_options if k not in model_accepts]
        if unknown:
            raise ValueError(f"RunConfig.model_options has unknown names {unknown} for model {self.model!r}; "
                             f"accepted: {model_accepts}")
        if self.schedule in VARIABLE_D_SCHEDULES and "d_max" in dict(self.schedule_options):
            raise ValueError(f"RunConfig.schedule_options['d_max'] is not accepted for schedule {self.schedule!r}: "
                             f"its d_max is RunConfig.d (now {self.d}); set d={dict(self.schedule_options)['d_max']} "
                             "instead, so that one run has one config")
        accepted = schedule_option_names(self.schedule)
        unknown = [k for k, _ in self.schedule_options if accepted is not None and k not in accepted]
        if unknown:
            raise ValueError(f"RunConfig.schedule_options has unknown names {unknown} for schedule "
                             f"{self.schedule!r}; accepted: {sorted(accepted or ())}")
        try:
            _check_model_options(self.model, self.model_options)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise self._bad("model_options", f"building model {self.model!r} failed: {exc}") from exc
        try:
            build_schedule(self)
        except (TypeError, ValueError) as exc:
            raise self._bad(self._schedule_culprit(), f"building schedule {self.schedule!r} failed: {exc}") from exc

    def _schedule_culprit(self) -> str:
        """The field a failed schedule build is blamed on: ``d`` if the schedule fails without options too."""
        if not self.schedule_options:
            return "d"
        try:
            build_schedule(self.replace(schedule_options=()))
        except (TypeError, ValueError):
            return "d"
        return "schedule_options"


@functools.lru_cache(maxsize=64)
def _check_model_options(model: str, model_options: tuple) -> None:
    """Build ``model`` with ``model_options`` (global RNG untouched); raises what the build raises.

    Cached: a profile's sweeps hold over a thousand configs but a few distinct models, and building
    one (its full-size parameters initialised) takes milliseconds. A failed build is not cached."""
    with torch.random.fork_rng(devices=[]):
        build_model(model, **dict(model_options))


def _init_parameters(cls: type) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def build_schedule(config: RunConfig, device: str | torch.device | None = None) -> Schedule:
    """The schedule of ``config`` (:func:`~tvolib.training.schedule.make_schedule`)."""
    return make_schedule(config.schedule, config.d, beta_1=config.log_beta1, seed=config.seed,
                         options=dict(config.schedule_options), device=device, uses_schedule=config.uses_schedule)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


def _split_parameters(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """The generative parameters theta and inference parameters phi, checked to partition the model's."""
    theta, phi = list(model.generative_parameters()), list(model.inference_parameters())
    ids_theta, ids_phi = {id(p) for p in theta}, {id(p) for p in phi}
    if ids_theta & ids_phi or (ids_theta | ids_phi) != {id(p) for p in model.parameters()}:
        raise ValueError("model.generative_parameters() and model.inference_parameters() must partition "
                         "model.parameters()")
    return theta, phi


def merge_adam_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """One Adam state dict over the concatenated parameters of several single-group Adam state dicts.

    Adam acts elementwise, so this is exactly the optimiser the parts were (checkpoint format 1
    kept one Adam for theta and one for phi).
    """
    merged: dict[str, Any] = {"state": {}, "param_groups": [dict(states[0]["param_groups"][0], params=[])]}
    offset = 0
    for state in states:
        (group,) = state["param_groups"]
        for index in group["params"]:
            if index in state["state"]:
                merged["state"][offset + index] = state["state"][index]
        merged["param_groups"][0]["params"] += [offset + i for i in group["params"]]
        offset += len(group["params"])
    return merged


class ImageTask(Task):
    """A VAE or SBN trained on a binary image dataset (:class:`Task` of the shared loop)."""

    global_rng = True
    progress_keys = ("loss", "train_elbo", "test_log_px")

    def __init__(self, config: RunConfig, device: torch.device, data_root: str | Path | None = None,
                 compile: bool = False) -> None:
        self.config, self.device = config, device
        torch.manual_seed(config.seed)
        data = load_dataset(config.dataset, data_root, n_train=config.n_train, n_test=config.n_test,
                            seed=config.data_seed)
        self.data = data if data.train.device == device and data.test.device == device else data.to(device)
        self.model = build_model(config.model, train_mean=self.data.train_mean,
                                 **dict(config.model_options)).to(device)
        self.theta, self.phi = _split_parameters(self.model)
        self.modules = {"model": self.model}
        self.optimisers = [torch.optim.Adam(self.theta + self.phi, lr=config.lr)]
        self.schedule = build_schedule(config)
        self.spec = self.schedule.evidence_spec or EvidenceSpec.paper()
        self.generators = {"data": torch.Generator(device=device).manual_seed(config.seed),
                           "shuffle": torch.Generator(device="cpu").manual_seed(config.seed + 1)}
        self.compiled = torch.compile(self.model.log_joint_and_q) if compile else None
        self.label = f"{config.model}/{config.objective}/{config.schedule}"
        self._x_epoch: Tensor | None = None

    def load_optimiser_states(self, states: list[dict[str, Any]]) -> None:
        super().load_optimiser_states([merge_adam_states(states)] if len(states) == 2 else states)

    def _loss(self, x: Tensor, betas: Tensor | list[float]) -> LossOutput:
        with autocast_scope(self.config.precision, self.device):  # bf16: the networks; densities in fp32
            if self.compiled is None:
                return compute_loss(self.config.objective, self.model, x, self.config.S, betas)
            self.model.log_joint_and_q = self.compiled  # the instance attribute shadows the method for this call
            try:
                return compute_loss(self.config.objective, self.model, x, self.config.S, betas)
            finally:
                del self.model.log_joint_and_q

    def _step(self, out: LossOutput) -> None:
        """One Adam step; with two losses (wake-sleep family) each trains only its own parameter set."""
        if out.phi_loss is None:
            out.loss.backward()
        else:
            torch.autograd.backward(out.loss, inputs=self.theta, retain_graph=True)
            torch.autograd.backward(out.phi_loss, inputs=self.phi)
        (optimiser,) = self.optimisers
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)

    def run_epoch(self, epoch: int, betas: Tensor) -> dict[str, Any]:
        """A fresh binarisation, a seeded shuffle, minibatches with ``betas`` fixed.

        The training metrics (``train_elbo``, ``train_iwae`` = IWAE-S bound, ``train_evidence`` = the
        schedule's ``evidence_spec`` or the paper's linear-50 left sum, Appendix A) come from the
        minibatches' detached ``log w``: no extra network passes, averaged over parameters that
        change within the epoch, as in the paper's code.
        """
        config, dev = self.config, self.device
        x_epoch = self.data.train_epoch(self.generators["data"])
        n = x_epoch.shape[0]
        perm = torch.randperm(n, generator=self.generators["shuffle"]).to(dev)
        schedule = [float(v) for v in betas.tolist()]
        outputs = self.minibatch_steps(x_epoch, perm, schedule)
        sums, two_losses = self._epoch_sums(outputs, dev), outputs[-1].phi_loss is not None
        means = (sums / n).tolist()
        row: dict[str, Any] = {"epoch": epoch, "loss": means[0], **({"phi_loss": means[1]} if two_losses else {})}
        row.update(train_elbo=means[2], train_iwae=means[3], train_evidence=means[4], betas=schedule)
        self._x_epoch = x_epoch
        return row

    def minibatch_steps(self, x_epoch: Tensor, perm: Tensor, betas: list[float]) -> list[LossOutput]:
        """One Adam step per minibatch of ``x_epoch[perm]``; returns the detached outputs.

        Nothing is read back from the device: the schedule is a list of host floats, which the
        objective moves to the device once (the first minibatch) and reuses; losses go to
        ``self.loss_log`` on the device.
        """
        config, dev = self.config, self.device
        n_batches = math.ceil(x_epoch.shape[0] / config.batch_size)
        self.loss_log = torch.zeros(n_batches, 2, device=dev)
        outputs = []
        with matmul_scope(config.precision, dev):  # tf32: TF32 matmuls forward and backward (CUDA)
            for b in range(n_batches):
                xb = x_epoch[perm[b * config.batch_size:(b + 1) * config.batch_size]]
                out = self._loss(xb, betas)
                self.loss_log[b, 0] = out.loss.detach()
                if out.phi_loss is not None:
                    self.loss_log[b, 1] = out.phi_loss.detach()
                self._step(out)
                outputs.append(out._replace(loss=out.loss.detach(), log_w=out.log_w.detach(),
                                            phi_loss=None if out.phi_loss is None else out.phi_loss.detach()))
        return outputs

    def _epoch_sums(self, outputs: list[LossOutput], dev: torch.device) -> Tensor:
        """Sums over the epoch's points of loss, phi_loss, ELBO, IWAE-S and evidence, float64 ``(5,)``.

        Computed after the minibatch loop (the evidence's quadrature weights go to the device, a
        host synchronisation), minibatch by minibatch in training order.
        """
        sums = torch.zeros(5, dtype=torch.float64, device=dev)
        log_s = math.log(self.config.S)
        with torch.no_grad():
            for out in outputs:
                log_w, bsz = out.log_w, out.log_w.shape[1]
                sums += torch.stack([
                    out.loss.double() * bsz,
                    (out.phi_loss.double() * bsz) if out.phi_loss is not None else sums.new_zeros(()),
                    log_w.mean(0).double().sum(),
                    (torch.logsumexp(log_w, 0) - log_s).double().sum(),
                    log_evidence(log_w, self.spec).double().sum(),
                ])
        return sums

    def schedule_inputs(self) -> dict[str, Any]:
        x = self._x_epoch[:SCHEDULE_LOG_WEIGHT_EXAMPLES]

        def log_weights() -> Tensor:
            """log w (S, N) on up to 1000 training examples of this epoch's binarisation, no grad
            (in the run's precision, as the training minibatches' log w)."""
            with torch.no_grad(), precision_scope(self.config.precision, self.device):
                log_p, log_q = self.model.log_joint_and_q(x, self.config.S, reparam=False)
                return log_p - log_q

        return {"log_weights": log_weights}

    @torch.no_grad()
    def initial_evidence(self) -> float:
        """``L_0`` over a binarisation of the training set, from streams seeded for this purpose only
        (in the run's precision: the bandit compares it with the training minibatches' evidence)."""
        config, dev = self.config, self.device
        devices = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), precision_scope(config.precision, dev):
            torch.manual_seed(derived_seed(config.seed, "initial_evidence"))
            x = self.data.train_epoch(torch.Generator(device=dev).manual_seed(derived_seed(config.seed, "L_0 data")))
            total = torch.zeros((), dtype=torch.float64, device=dev)
            for xb in x.split(config.batch_size):
                log_p, log_q = self.model.log_joint_and_q(xb, config.S, reparam=False)
                total += log_evidence(log_p - log_q, self.spec).double().sum()
        return float(total) / x.shape[0]

    def evaluate(self, epoch: int) -> dict[str, float]:
        """Test log p(x) (IWAE bound with ``eval_S`` samples), ELBO and KL under an epoch-seeded forked RNG
        (always in fp32, whatever the run's precision)."""
        with precision_scope("fp32", self.device):
            metrics = evaluate(self.model, self.data.test, S=self.config.eval_S,
                               seed=self.config.seed * 1_000_003 + epoch)
        return {f"test_{k}": float(metrics[k]) for k in ("log_px", "elbo", "kl")}

    def final_metrics(self, history: list[dict[str, Any]], epochs_done: int) -> dict[str, Any]:
        final: dict[str, Any] = {"dataset_label": self.data.label}  # read by the figures, not recomputed
        tested = next((row for row in reversed(history) if "test_log_px" in row), {})
        final.update({k: v for k, v in tested.items() if k.startswith("test_")})
        trained = next((row for row in reversed(history) if "train_elbo" in row), {})
        final.update({k: trained[k] for k in ("train_elbo", "train_iwae", "train_evidence") if k in trained})
        return final

    def trained_state(self) -> Any:
        return self.model.state_dict()

    def data_source(self) -> str | None:
        """The dataset's :attr:`~tvolib.data.BinaryImageData.source` (Omniglot: variant and file hashes)."""
        return self.data.source


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

    Args:
        config: the run (validated here).
        run_dir: results folder for the checkpoint and ``model.pt``; ``None`` saves nothing.
        data_root: dataset root (default: ``TVOLIB_DATA`` or the package's default).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available).
        progress: progress bar (``None``: only on a terminal).
        checkpoint_every: epochs between checkpoints. stop_after: stop after this epoch (a killed run).
        model_out: write ``model.pt`` once complete.
        compile: ``torch.compile`` the model's ``log_joint_and_q`` for the training minibatches
            (evaluation stays eager). Deterministic and resumable, but its numbers differ from
            eager runs (Inductor draws its own random numbers): do not mix the two in one sweep.

    Returns:
        The :class:`~tvolib.training.loop.RunResult`: history rows (``loss``, ``train_elbo``,
        ``train_iwae``, ``train_evidence``, ``betas``, ``seconds``, test metrics when evaluated at
        epoch 0, every ``eval_every`` epochs and at the end), the schedule's records, ``final``.

    Raises :class:`~tvolib.training.loop.TrainingDivergedError` on a non-finite loss (the last
    checkpoint is kept) and ``ValueError`` for a bad config or a checkpoint of another config.

    Example:
        >>> result = train(RunConfig(n_train=200, epochs=2), "results/demo")  # doctest: +SKIP
        >>> result.final["test_log_px"]  # doctest: +SKIP
    """
    config.validate()
    dev = resolve_device(device)
    return run(config, lambda: ImageTask(config, dev, data_root, compile), run_dir, progress=progress,
               checkpoint_every=checkpoint_every, stop_after=stop_after, model_out=model_out)


def load_image_model(config: RunConfig, path: str | Path, device: torch.device) -> nn.Module:
    """The model of ``config`` with the weights of ``path`` (a complete run's ``model.pt``), in eval mode.

    No data are read: models that depend on the training mean keep it in their state dict (the
    SBN's ``train_mean`` buffer).
    """
    model = build_model(config.model, **dict(config.model_options))
    model.load_state_dict(load_model_state(path, config.digest(), advice=MODEL_ADVICE.format(path=path)))
    return model.to(device).eval()
