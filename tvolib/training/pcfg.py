"""Training the PCFG (paper Appendix D.1, Fig. 6) with the TVO and its baselines: the config and the epoch body.

Setup (Le et al. 2019, Section 4.1; the paper's Appendix D.1): learn the rule probabilities
``theta`` of the Astronomers grammar and an inference network ``q_phi(z | x)`` from sentences of
the true grammar, with minibatches of 2 and Adam (default parameters), for ``epochs`` passes over
a fixed training set of ``n_train`` sentences drawn from the true grammar with ``data_seed``.

Objectives (``PCFGConfig.objective``), each step with ``S`` samples ``z_s ~ q_phi(z | x)`` and
``log w_s = log p_theta(z_s) + log l(x | z_s) - log q_phi(z_s | x)``:

============ ===================================================== ===========================================
objective    theta                                                  phi
============ ===================================================== ===========================================
tvo          TVO (Eq. 5; left Riemann sum over the schedule),       sleep-phi: maximise log q(z | x) on
             covariance gradient estimator (below)                  (z, x = yield z) ~ p_theta (as the paper)
reinforce    IWAE-S bound, exact theta gradient (SNIS weights)      score function of the IWAE-S bound
                                                                    (no control variate)
wake-wake    wake-theta = the IWAE-S theta gradient                 wake-phi: SNIS-weighted log q on the data
wake-sleep   wake-theta                                             sleep-phi
============ ===================================================== ===========================================

The TVO theta gradient: ``q`` does not depend on ``theta``, so ``pi_beta ∝ q w^beta`` gives
``d/dtheta E_pi[f] = E_pi[df] + beta Cov_pi(f, df)`` with ``f = log w``, estimated by
:func:`tvolib.objectives.covariance_surrogate`. Metrics: :mod:`tvolib.training.pcfg_metrics`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from tvolib.config import ExperimentConfig, normalise_numbers, resolve_device
from tvolib.models.pcfg import (
    DerivationCap,
    Grammar,
    GrammarError,
    PCFGInferenceNetwork,
    PCFGModel,
    encode_sentences,
    load_grammar,
    sample_sentences,
    soft_log_likelihood,
)
from tvolib.objectives import covariance_surrogate
from tvolib.schedules import Schedule
from tvolib.checkpoint import CorruptFileError
from tvolib.training.run_folder import MODEL_ADVICE, load_model_state
from tvolib.training.fields import bad_field, check_integers, check_positive_numbers, check_seeds
from tvolib.training.loop import RunResult, Task, derived_seed, run
from tvolib.training.pcfg_levels import KL_DIRECTIONS
from tvolib.training.pcfg_metrics import METRICS, build_test_set, exact_metrics
from tvolib.training.schedule import BANDIT_SCHEDULES, config_digest, make_schedule
from tvolib.tvo import EvidenceSpec, iwae_bound, log_evidence, riemann_weights, tvo_bound

__all__ = [
    "OBJECTIVES",
    "SCHEDULES",
    "TAIL_FRACTION",
    "PCFGConfig",
    "PCFGModels",
    "PCFGTask",
    "load_pcfg_models",
    "train_pcfg",
    "tvo_theta_surrogate",
]

OBJECTIVES: tuple[str, ...] = ("tvo", "reinforce", "wake-wake", "wake-sleep")
SCHEDULES: tuple[str, ...] = ("log", "gp_bandit")
THETA_INITS: tuple[str, ...] = ("normal", "uniform", "true")
#: ``derivation_cap`` values: at most ``max_productions`` rules, or depth at most :data:`DEPTH_CAP`.
DERIVATION_CAPS: tuple[str, ...] = ("productions", "depth")
#: The depth cap of Le et al.'s released code.
DEPTH_CAP = 50
#: Fields added after results existed, with their defaults: left out of the digest at the default.
_LATER_FIELDS: dict[str, Any] = {"kl_direction": "paper", "derivation_cap": "productions"}
#: Fraction of the epochs averaged in ``final``'s ``*_tail`` values (paper: last 100 of 2000).
TAIL_FRACTION = 0.05


@dataclass(frozen=True)
class PCFGConfig(ExperimentConfig):
    """Everything that determines a PCFG run (and hence its results folder, :meth:`digest`).

    Baselines (objective other than ``"tvo"``) use no schedule: ``schedule`` is normalised to
    ``"none"`` and ``d`` to 1 (the ELBO point, unused), so equivalent configs share one digest.
    ``d`` counts the left points including ``beta_0 = 0``; ``log_beta1`` is ``beta_1`` of the log
    schedule. ``seed`` drives the initialisation, sampling and shuffling (and the bandit);
    ``data_seed`` the train/test sentences, shared by all seeds so that every run is scored on the
    same test sentences.
    """

    objective: str = "tvo"
    schedule: str = "log"
    d: int = 5
    log_beta1: float = 0.025
    S: int = 20
    epochs: int = 2000
    batch_size: int = 2
    n_train: int = 20
    n_test: int = 20
    data_seed: int = 0
    seed: int = 0
    lr: float = 1e-3
    hidden_dim: int = 100
    theta_init: str = "normal"
    likelihood_scale: float = 1.0
    max_productions: int = 127
    train_max_words: int = 64
    eval_max_words: int = 15
    max_parses: int = 10_000
    eval_every: int = 1
    grammar: str = "astronomers"
    kl_direction: str = "paper"
    derivation_cap: str = "productions"
    kind: ClassVar[str] = "pcfg"

    def __post_init__(self) -> None:
        normalise_numbers(self)  # NumPy integers accepted; 1 and 1.0 must give one digest
        if self.objective in OBJECTIVES and self.objective != "tvo":
            object.__setattr__(self, "schedule", "none")
            object.__setattr__(self, "d", 1)

    def digest(self) -> str:
        """The results folder's name (:func:`~tvolib.training.schedule.config_digest`).

        Fields added after results existed (:data:`_LATER_FIELDS`) enter the digest only when they
        differ from their default, so earlier results keep their names.
        """
        fields = {k: v for k, v in self.to_dict().items() if _LATER_FIELDS.get(k, object()) != v}
        return config_digest(self.kind, fields, self.uses_schedule and self.schedule in BANDIT_SCHEDULES)

    @property
    def uses_schedule(self) -> bool:
        """Whether the objective integrates over a schedule (the TVO), so that ``d``/``schedule`` matter."""
        return self.objective == "tvo"

    @property
    def cap(self) -> DerivationCap:
        """The samplers' :class:`~tvolib.models.pcfg.DerivationCap`: ``max_productions`` rules, or
        depth :data:`DEPTH_CAP` (the cap of Le et al.'s released code) for ``derivation_cap="depth"``."""
        if self.derivation_cap == "depth":
            return DerivationCap("depth", DEPTH_CAP)
        return DerivationCap("productions", self.max_productions)

    def validate(self) -> "PCFGConfig":
        """Return ``self`` if every field is acceptable, else raise ``ValueError`` naming the field."""

        def bad(name: str, what: str) -> ValueError:
            return bad_field(self, name, what)

        if self.objective not in OBJECTIVES:
            raise bad("objective", f"choose one of {list(OBJECTIVES)}")
        if self.objective == "tvo" and self.schedule not in SCHEDULES:
            raise bad("schedule", f"the TVO needs one of {list(SCHEDULES)}")
        if self.theta_init not in THETA_INITS:
            raise bad("theta_init", f"choose one of {list(THETA_INITS)}")
        check_integers(self, {"d": 2 if self.schedule == "gp_bandit" else 1, "S": 2 if self.objective == "tvo" else 1,
                              "epochs": 0, "batch_size": 1, "n_train": 1, "n_test": 1, "hidden_dim": 2,
                              "max_productions": 1, "train_max_words": 1, "eval_max_words": 1, "max_parses": 1,
                              "eval_every": 1})
        check_seeds(self, ("data_seed", "seed"))
        check_positive_numbers(self, ("lr", "likelihood_scale", "log_beta1"))
        if self.log_beta1 >= 1:
            raise bad("log_beta1", "it must lie in (0, 1)")
        if self.derivation_cap == "productions" and 2 * self.train_max_words - 1 > self.max_productions:
            raise bad("train_max_words", f"a sentence of that many words needs {2 * self.train_max_words - 1} "
                                         f"productions > max_productions={self.max_productions}")
        if self.kl_direction not in KL_DIRECTIONS:
            raise bad("kl_direction", f"choose one of {list(KL_DIRECTIONS)} (paper: KL(p_theta || p_true); "
                                      "le2019: KL(p_true || p_theta))")
        if self.derivation_cap not in DERIVATION_CAPS:
            raise bad("derivation_cap", f"choose one of {list(DERIVATION_CAPS)} (productions: at most "
                                        f"max_productions rules; depth: at most depth {DEPTH_CAP})")
        if not isinstance(self.grammar, str) or not self.grammar:
            raise bad("grammar", "give a packaged grammar name or a JSON path")
        try:
            load_grammar(self.grammar)
        except GrammarError as exc:
            raise bad("grammar", str(exc)) from exc
        return self


def build_pcfg_schedule(config: PCFGConfig, device: torch.device | str | None = None) -> Schedule:
    """``log_uniform(d, log_beta1)`` or the GP bandit (seeded with ``config.seed``, GP on ``device``)
    under the authors' code's protocol, what the paper's PCFG experiment ran (a ``PCFGConfig`` has no
    schedule options); baselines get the fixed ELBO point ``[0]`` (unused by their losses)."""
    options = {"protocol": "code"} if config.schedule in BANDIT_SCHEDULES else None
    return make_schedule(config.schedule, config.d, beta_1=config.log_beta1, seed=config.seed, device=device,
                         uses_schedule=config.uses_schedule, options=options)


# --------------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------------


def tvo_theta_surrogate(log_w: Tensor, betas: Tensor) -> Tensor:
    """Per-example surrogate ``(B,)``: value = TVO left Riemann sum (Eq. 5), gradient = covariance estimator.

    ``log_w`` ``(S, B)`` must depend on ``theta`` only through ``log p_theta`` (``log q`` detached);
    then ``d/dtheta E_{pi_beta}[f] = E_pi[df] + beta Cov_pi(f, df)``, with SNIS weights
    ``softmax(beta f)`` (detached) and the ``S / (S - 1)`` covariance factor
    (:func:`tvolib.objectives.covariance_surrogate`).
    """
    nodes, weights = riemann_weights(betas, "left")
    b, deltas = nodes[:-1].to(log_w), weights[:-1].to(log_w)
    # With log q detached, log pi~_beta = beta log p + (1 - beta) log q has gradient beta d log w.
    surrogate = covariance_surrogate(log_w, b[:, None, None] * log_w[None], b, deltas)
    return surrogate - surrogate.detach() + tvo_bound(log_w.detach(), nodes[:-1])


class _StepOutput(NamedTuple):
    loss: Tensor
    log_w: Tensor
    q_complete: Tensor
    sleep_complete: Tensor | None


class PCFGModels(NamedTuple):
    """A PCFG run's grammar, generative model ``p_theta`` and inference network ``q_phi``."""

    grammar: Grammar
    model: PCFGModel
    inference_network: PCFGInferenceNetwork


def _build(config: PCFGConfig, device: torch.device) -> PCFGModels:
    """Grammar and freshly initialised models (initialisation seeded by ``config.seed``, global RNG untouched)."""
    grammar = load_grammar(config.grammar)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = PCFGModel(grammar, init=config.theta_init, generator=torch.Generator().manual_seed(config.seed))
        qnet = PCFGInferenceNetwork(grammar, hidden_dim=config.hidden_dim)
    return PCFGModels(grammar, model.to(device), qnet.to(device))


def _datasets(config: PCFGConfig, grammar: Grammar) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Train and test sentences from the true grammar, regenerated from ``data_seed``."""
    gen = torch.Generator().manual_seed(config.data_seed)
    table = PCFGModel(grammar, init="true").log_prob_table().detach()
    train = sample_sentences(grammar, table, config.n_train, gen, max_words=config.train_max_words,
                             derivation_cap=config.cap)
    test = sample_sentences(grammar, table, config.n_test, gen, max_words=config.eval_max_words,
                            derivation_cap=config.cap)
    return train, test


class PCFGTask(Task):
    """The PCFG experiment as a :class:`~tvolib.training.loop.Task` of the shared loop."""

    progress_keys = ("train_elbo", "kl_p", "kl_q_true")

    def __init__(self, config: PCFGConfig, device: torch.device) -> None:
        self.config, self.device = config, device
        self.grammar, self.model, self.qnet = _build(config, device)
        self.train_sentences, test_sentences = _datasets(config, self.grammar)
        self.test = build_test_set(self.grammar, test_sentences, device, config.max_parses)
        self.modules = {"model": self.model, "inference_network": self.qnet}
        self.optimisers = [torch.optim.Adam(self.model.parameters(), lr=config.lr),
                           torch.optim.Adam(self.qnet.parameters(), lr=config.lr)]
        self.schedule = build_pcfg_schedule(config, device)
        self.spec = self.schedule.evidence_spec or EvidenceSpec.paper()
        self.generators = {"sample": torch.Generator(device=device).manual_seed(config.seed + 1),
                           "shuffle": torch.Generator().manual_seed(config.seed + 2)}
        method = f"tvo-{config.schedule}" if config.objective == "tvo" else config.objective
        self.label = f"pcfg/{method}/S={config.S}"

    def _log_weights(self, tokens: Tensor, lengths: Tensor, generator: torch.Generator, wake_phi: bool
                     ) -> tuple[Tensor, Tensor, Tensor, Any]:
        """Samples ``z ~ q(z | x)``; ``log w`` and ``log w`` with ``log q`` detached, ``(S, B)``; ``log q``; derivations."""
        B, S = tokens.shape[0], self.config.S
        derivs, log_q_sampled = self.qnet.sample(tokens, lengths, S, generator, derivation_cap=self.config.cap)
        rows = torch.arange(B, device=tokens.device).repeat_interleave(S)
        log_q = (self.qnet.log_prob(derivs, tokens, lengths, rows) if wake_phi
                 else log_q_sampled.to(tokens.device).float())
        log_lik = soft_log_likelihood(derivs.yields, derivs.yield_len, tokens[rows], lengths[rows],
                                      self.config.likelihood_scale)
        log_p = self.model.log_prior(derivs)
        log_w = (log_p + log_lik - log_q).view(B, S).T  # (S, B), rows are sentence-major
        log_w_theta = (log_p + log_lik - log_q.detach()).view(B, S).T
        return log_w, log_w_theta, log_q, derivs

    def _train_step(self, tokens: Tensor, lengths: Tensor, betas: Tensor) -> _StepOutput:
        """One minibatch: the theta loss plus the phi loss (each depends only on its own parameters,
        except REINFORCE whose single surrogate trains both)."""
        objective, (B, S) = self.config.objective, (tokens.shape[0], self.config.S)
        generator = self.generators["sample"]
        log_w, log_w_theta, log_q, derivs = self._log_weights(tokens, lengths, generator,
                                                              objective in ("reinforce", "wake-wake"))
        if objective == "tvo":
            loss = -tvo_theta_surrogate(log_w_theta, betas).mean()
        elif objective == "reinforce":
            iwae = iwae_bound(log_w)
            loss = -(iwae + iwae.detach() * log_q.view(B, S).sum(dim=1)).mean()
        else:  # wake-theta: the IWAE-S gradient for theta
            snis = torch.softmax(log_w.detach(), dim=0)
            loss = -(snis * log_w_theta).sum(dim=0).mean()
        sleep_complete = None
        if objective == "wake-wake":
            snis = torch.softmax(log_w.detach(), dim=0)
            loss = loss - (snis * log_q.view(B, S).T).sum(dim=0).mean()
        elif objective in ("tvo", "wake-sleep"):  # sleep-phi: (z, x = yield z) ~ p_theta, B * S pairs
            with torch.no_grad():
                sleep = self.model.sample(B * S, generator, derivation_cap=self.config.cap)
            rows = torch.arange(len(sleep), device=tokens.device)
            loss = loss - self.qnet.log_prob(sleep, sleep.yields, sleep.yield_len, rows).mean()
            sleep_complete = sleep.complete
        return _StepOutput(loss, log_w.detach(), derivs.complete, sleep_complete)

    def run_epoch(self, epoch: int, betas: Tensor) -> dict[str, Any]:
        """A seeded shuffle, minibatches with ``betas`` fixed; ``train_evidence`` is the schedule's
        ``evidence_spec`` estimate averaged over the epoch's minibatches."""
        config, dev = self.config, self.device
        betas_dev = betas.to(dev)
        n = len(self.train_sentences)
        perm = torch.randperm(n, generator=self.generators["shuffle"]).tolist()
        sums = torch.zeros(4, dtype=torch.float64, device=dev)  # loss, elbo, iwae, evidence (per sentence)
        cut = torch.zeros(2, dtype=torch.long, device=dev)  # derivations cut by the budget: q, sleep
        q_total = sleep_total = 0
        self.loss_log = torch.zeros(math.ceil(n / config.batch_size), 1, device=dev)
        for b, b0 in enumerate(range(0, n, config.batch_size)):
            batch = [self.train_sentences[i] for i in perm[b0: b0 + config.batch_size]]
            tokens, lengths = encode_sentences(batch, self.grammar, dev)
            out = self._train_step(tokens, lengths, betas_dev)
            self.loss_log[b, 0] = out.loss.detach()
            for opt in self.optimisers:
                opt.zero_grad(set_to_none=True)
            out.loss.backward()
            for opt in self.optimisers:
                opt.step()
            log_w = out.log_w.double()
            sums += torch.stack([out.loss.detach().double() * len(batch), log_w.mean(0).sum(),
                                 iwae_bound(log_w).sum(), log_evidence(log_w, self.spec).sum()])
            cut[0] += (~out.q_complete).sum()
            q_total += out.q_complete.numel()
            if out.sleep_complete is not None:
                cut[1] += (~out.sleep_complete).sum()
                sleep_total += out.sleep_complete.numel()
        means, (q_cut, sleep_cut) = (sums / n).tolist(), cut.tolist()
        row: dict[str, Any] = {"epoch": epoch, "loss": means[0], "train_elbo": means[1], "train_iwae": means[2],
                               "train_evidence": means[3], "q_truncated": q_cut / q_total}
        if sleep_total:
            row["sleep_truncated"] = sleep_cut / sleep_total
        row["betas"] = [float(v) for v in betas.tolist()]
        return row

    @torch.no_grad()
    def initial_evidence(self) -> float:
        """``L_0`` of the untrained model over the training sentences, from a generator of its own."""
        generator = torch.Generator(device=self.device).manual_seed(derived_seed(self.config.seed, "initial_evidence"))
        total = 0.0
        for b0 in range(0, len(self.train_sentences), self.config.batch_size):
            batch = self.train_sentences[b0: b0 + self.config.batch_size]
            tokens, lengths = encode_sentences(batch, self.grammar, self.device)
            log_w = self._log_weights(tokens, lengths, generator, False)[0].double()
            total += float(log_evidence(log_w, self.spec).sum())
        return total / len(self.train_sentences)

    def evaluate(self, epoch: int) -> dict[str, float]:
        """The exact metrics of :func:`~tvolib.training.pcfg_metrics.exact_metrics` (no randomness)."""
        return exact_metrics(self.grammar, self.model, self.qnet, self.test, self.config.kl_direction)

    def final_metrics(self, history: list[dict[str, Any]], epochs_done: int) -> dict[str, Any]:
        return pcfg_final_metrics(history, self.config.epochs, epochs_done)

    def trained_state(self) -> Any:
        return {"config": self.config.to_dict(), "model": self.model.state_dict(),
                "inference_network": self.qnet.state_dict()}


def pcfg_final_metrics(history: list[dict[str, Any]], epochs: int, epochs_done: int) -> dict[str, Any]:
    """The last evaluated metrics and their ``*_tail`` means over the last ``TAIL_FRACTION`` of ``epochs``."""
    final: dict[str, Any] = {}
    evaluated = [r for r in history if "kl_p" in r]
    if evaluated:
        final.update({k: v for k, v in evaluated[-1].items() if k not in ("epoch", "betas", "seconds")})
        tail = max(1, round(TAIL_FRACTION * epochs))
        rows = [r for r in evaluated if r["epoch"] > epochs_done - tail] or evaluated[-1:]
        for key in METRICS + ("q_parse_mass", "kl_true_q"):
            final[f"{key}_tail"] = sum(r[key] for r in rows) / len(rows)
        final["tail_epochs"] = tail
    return final


def train_pcfg(
    config: PCFGConfig,
    run_dir: str | Path | None = None,
    *,
    data_root: str | Path | None = None,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    checkpoint_every: int = 50,
    stop_after: int | None = None,
) -> RunResult:
    """Train ``config`` (resuming from ``run_dir/checkpoint.pt`` if present) and return its :class:`RunResult`.

    Args:
        config: the run (validated here).
        run_dir: results folder for the checkpoint and ``model.pt``; ``None`` saves nothing.
        data_root: accepted for a signature shared with :func:`tvolib.training.images.train`; unused
            (the sentences are sampled from the grammar).
        device: ``"cpu"`` or ``"cuda"`` (default: CUDA when available).
        progress: progress bar (``None``: only on a terminal).
        checkpoint_every: epochs between checkpoints. stop_after: stop after this epoch (a killed run).

    Returns:
        The :class:`~tvolib.training.loop.RunResult`. History keys: ``epoch``, ``loss``,
        ``train_elbo``, ``train_iwae``, ``train_evidence``, ``q_truncated`` / ``sleep_truncated``
        (fractions of derivations cut by the budget), ``betas``, ``seconds`` and the metrics of
        :func:`~tvolib.training.pcfg_metrics.exact_metrics` (epoch 0, every ``eval_every``, the end).

    Example:
        >>> train_pcfg(PCFGConfig(S=5, epochs=2, n_train=4, n_test=3), device="cpu").final["kl_p"]  # doctest: +SKIP
    """
    config.validate()
    dev = resolve_device(device)
    # The PCFG's tensors are tiny: intra-op threads only add overhead, and one thread keeps CPU
    # runs bit-reproducible whatever the caller's setting. Restored on exit.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run(config, lambda: PCFGTask(config, dev), run_dir, progress=progress,
                   checkpoint_every=checkpoint_every, stop_after=stop_after)
    finally:
        torch.set_num_threads(threads)


def load_pcfg_models(config: PCFGConfig, path: str | Path, device: torch.device) -> PCFGModels:
    """The trained grammar model and inference network stored in ``path`` (a complete run's ``model.pt``)."""
    state = load_model_state(path, config.digest(), advice=MODEL_ADVICE.format(path=path))
    if not isinstance(state, dict) or state.get("config") != config.to_dict():
        held = state.get("config") if isinstance(state, dict) else type(state).__name__
        raise CorruptFileError(f"{path} holds another config ({held}), not {config.to_dict()}")
    grammar, model, qnet = _build(config, device)
    model.load_state_dict(state["model"])
    qnet.load_state_dict(state["inference_network"])
    return PCFGModels(grammar, model.eval(), qnet.eval())
