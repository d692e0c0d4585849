"""The PCFG experiment (paper Appendix D.1, Fig. 6): training with the TVO and baselines, exact metrics.

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
``d/dtheta E_pi[f] = E_pi[df] + beta Cov_pi(f, df)`` with ``f = log w``; both expectations are SNIS
estimates with weights ``softmax(beta log w)`` and the covariance carries the ``S / (S - 1)``
factor of :mod:`tvolib.objectives` (Masrani et al. 2019). :func:`tvo_theta_surrogate`'s value is
the TVO bound itself (:func:`tvolib.tvo.tvo_bound`).

Metrics (exact, no Monte Carlo), in every history row where they are evaluated:

* ``kl_p`` = ``(1/|N|) sum_A KL(p_theta(. | A) || p_true(. | A))``: the mean over the grammar's
  non-terminals of the KL between the learned and the true rule distributions (the direction of
  Fig. 6's label; the average over non-terminals follows Le et al.'s code). Non-terminals with a
  single rule contribute 0. Also ``kl_p_tree`` = the KL between the two *tree* distributions,
  ``sum_A E_theta[#expansions of A] KL_A`` (``inf`` when ``theta`` is super-critical).
* ``kl_q_true`` / ``kl_q_theta``: for each test sentence ``x``, ``T(x)`` is its (finite) set of
  parses, enumerated exactly (:func:`tvolib.models.pcfg.enumerate_parses`); the posterior
  ``p(z | x) = p(z) / sum_{T(x)} p`` is exact (the soft likelihood is 1 on every parse, so it is the
  posterior of the 0/1 likelihood). ``q_phi`` also puts mass on trees that do not yield ``x``
  (its support is every budgeted derivation), where the KL to the 0/1 posterior is infinite and
  the KL to the soft posterior is intractable. We therefore report the exact
  ``KL(q_phi(z | x, z in T(x)) || p(z | x))`` -- ``q`` renormalised on the parses of ``x`` -- averaged
  over the test sentences, together with ``q_parse_mass`` = mean ``q_phi(T(x) | x)``, the mass
  that the renormalisation removed (1 for a perfect ``q``). A sentence with a single parse
  contributes 0 to ``kl_q_*`` whatever ``q`` is, so the two must be read together. ``kl_true_q`` =
  mean exact ``KL(p_true(z | x) || q_phi(z | x))`` (the reverse direction, finite because the true
  posterior lives on ``T(x)``, and charging ``q`` for its off-parse mass: the quantity whose
  expectation over ``x`` Le et al.'s sleep-loss "q error" estimates up to a constant).
* ``test_log_px`` / ``test_log_px_true``: mean exact ``log p(x)`` (inside algorithm) of the test
  sentences under ``theta`` / the true grammar.

Test sentences are drawn from the true grammar conditioned on at most ``eval_max_words`` words so
that their parse sets stay small (the enumeration is bounded by ``max_parses`` and raises beyond).
The Fig. 6 summary (median over seeds of the average over the last 5% of epochs; the paper: 100 of
2000) is computed by the plotting layer from the per-epoch history; ``final`` carries each run's
last values and tail means.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from tvolib import checkpoint as ckpt
from tvolib.config import ExperimentConfig, resolve_device
from tvolib.models.pcfg import (
    Derivations,
    Grammar,
    PCFGInferenceNetwork,
    PCFGModel,
    encode_sentences,
    enumerate_parses,
    load_grammar,
    sample_sentences,
    soft_log_likelihood,
)
from tvolib.objectives import covariance_surrogate
from tvolib.tvo import iwae_bound, log_evidence, riemann_weights, tvo_bound
from tvolib.schedules import FixedSchedule, Schedule
from tvolib.tvo import EvidenceSpec, log_uniform

__all__ = [
    "OBJECTIVES",
    "SCHEDULES",
    "PCFGConfig",
    "PCFGRunResult",
    "PCFGModels",
    "PCFGTrainingDivergedError",
    "ExactTestSet",
    "build_test_set",
    "exact_metrics",
    "rule_kl",
    "tvo_theta_surrogate",
    "make_schedule",
    "train_pcfg",
    "load_model",
    "method_label",
    "pcfg_sweep",
    "summarise_pcfg",
]

OBJECTIVES: tuple[str, ...] = ("tvo", "reinforce", "wake-wake", "wake-sleep")
SCHEDULES: tuple[str, ...] = ("log", "gp_bandit")
THETA_INITS: tuple[str, ...] = ("normal", "uniform", "true")
METRICS: tuple[str, ...] = ("kl_p", "kl_q_true", "kl_q_theta")
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
_CHECKPOINT_FORMAT = 1
#: Fraction of the epochs averaged in ``final``'s ``*_tail`` values (paper: last 100 of 2000).
TAIL_FRACTION = 0.05


class PCFGTrainingDivergedError(RuntimeError):
    """A loss became NaN or infinite (the last checkpoint is left untouched)."""


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PCFGConfig(ExperimentConfig):
    """Everything that determines a PCFG run (and hence its results folder, :meth:`digest`).

    Baselines (objective other than ``"tvo"``) use no schedule: ``schedule`` is normalised to
    ``"none"`` and ``d`` to 1 (the ELBO point, unused), so equivalent configs share one digest.
    ``d`` counts the left points including ``beta_0 = 0`` (REFERENCE.md). ``seed`` drives the
    initialisation, sampling and shuffling (and the bandit); ``data_seed`` the train/test sentences,
    shared by all seeds so that every run is scored on the same test sentences.
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
    kind: ClassVar[str] = "pcfg"

    def __post_init__(self) -> None:
        for name in ("log_beta1", "lr", "likelihood_scale"):  # 1 and 1.0 must give one digest
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
        if self.objective in OBJECTIVES and self.objective != "tvo":
            object.__setattr__(self, "schedule", "none")
            object.__setattr__(self, "d", 1)

    def validate(self) -> "PCFGConfig":
        """Return ``self`` if every field is acceptable, else raise ``ValueError`` naming the field."""

        def bad(name: str, what: str) -> ValueError:
            return ValueError(f"PCFGConfig.{name}={getattr(self, name)!r} is not accepted; {what}")

        if self.objective not in OBJECTIVES:
            raise bad("objective", f"choose one of {list(OBJECTIVES)}")
        if self.objective == "tvo" and self.schedule not in SCHEDULES:
            raise bad("schedule", f"the TVO needs one of {list(SCHEDULES)}")
        if self.theta_init not in THETA_INITS:
            raise bad("theta_init", f"choose one of {list(THETA_INITS)}")
        lows = {"d": 2 if self.schedule == "gp_bandit" else 1, "S": 2 if self.objective == "tvo" else 1,
                "epochs": 0, "batch_size": 1, "n_train": 1, "n_test": 1, "data_seed": 0, "seed": 0,
                "hidden_dim": 2, "max_productions": 1, "train_max_words": 1, "eval_max_words": 1,
                "max_parses": 1, "eval_every": 1}
        for name, low in lows.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise bad(name, f"it must be an integer >= {low}")
        for name in ("lr", "likelihood_scale", "log_beta1"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise bad(name, "it must be a finite number > 0")
        if self.log_beta1 >= 1:
            raise bad("log_beta1", "it must lie in (0, 1)")
        if 2 * self.train_max_words - 1 > self.max_productions:
            raise bad("train_max_words", f"a sentence of that many words needs {2 * self.train_max_words - 1} "
                                         f"productions > max_productions={self.max_productions}")
        if not isinstance(self.grammar, str) or not self.grammar:
            raise bad("grammar", "give a packaged grammar name or a JSON path")
        return self


def method_label(config: Any) -> str:
    """``"tvo-log"``, ``"tvo-gp_bandit"``, ``"reinforce"``, ``"wake-wake"`` or ``"wake-sleep"`` (config or row)."""
    def get(key: str) -> Any:
        return getattr(config, key) if hasattr(config, "objective") else config[key]

    objective = get("objective")
    return f"tvo-{get('schedule')}" if objective == "tvo" else objective


def make_schedule(config: PCFGConfig, device: torch.device | str | None = None) -> Schedule:
    """``log_uniform(d, log_beta1)`` or the GP bandit (its defaults, seeded with ``config.seed``, GP on
    ``device``); baselines get the fixed ELBO point ``[0]`` (unused by their losses)."""
    if config.objective != "tvo":
        return FixedSchedule(torch.zeros(1, dtype=torch.float64))
    if config.schedule == "log":
        return FixedSchedule(log_uniform(config.d, beta1=config.log_beta1))
    from tvolib.bandit import GPBanditSchedule  # local: the bandit pulls in BoTorch

    return GPBanditSchedule(config.d, seed=config.seed, device=device)


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


def _train_step(config: PCFGConfig, model: PCFGModel, qnet: PCFGInferenceNetwork,
                tokens: Tensor, lengths: Tensor, betas: Tensor, generator: torch.Generator) -> _StepOutput:
    """One minibatch: the theta loss plus the phi loss (each depends only on its own parameters,
    except REINFORCE whose single surrogate trains both)."""
    B, S = tokens.shape[0], config.S
    derivs, log_q_sampled = qnet.sample(tokens, lengths, S, generator, config.max_productions)
    rows = torch.arange(B, device=tokens.device).repeat_interleave(S)
    wake_phi = config.objective in ("reinforce", "wake-wake")
    log_q = qnet.log_prob(derivs, tokens, lengths, rows) if wake_phi else log_q_sampled.to(tokens.device).float()
    log_lik = soft_log_likelihood(derivs.yields, derivs.yield_len, tokens[rows], lengths[rows], config.likelihood_scale)
    log_p = model.log_prior(derivs)
    log_w = (log_p + log_lik - log_q).view(B, S).T  # (S, B), rows are sentence-major
    log_w_theta = (log_p + log_lik - log_q.detach()).view(B, S).T
    if config.objective == "tvo":
        loss = -tvo_theta_surrogate(log_w_theta, betas).mean()
    elif config.objective == "reinforce":
        iwae = iwae_bound(log_w)
        loss = -(iwae + iwae.detach() * log_q.view(B, S).sum(dim=1)).mean()
    else:  # wake-theta: the IWAE-S gradient for theta
        snis = torch.softmax(log_w.detach(), dim=0)
        loss = -(snis * log_w_theta).sum(dim=0).mean()
    sleep_complete = None
    if config.objective == "wake-wake":
        snis = torch.softmax(log_w.detach(), dim=0)
        loss = loss - (snis * log_q.view(B, S).T).sum(dim=0).mean()
    elif config.objective in ("tvo", "wake-sleep"):
        # sleep-phi: (z, x = yield z) ~ p_theta, as many pairs as wake samples
        with torch.no_grad():
            sleep = model.sample(B * S, generator, config.max_productions)
        n = len(sleep)
        loss = loss - qnet.log_prob(sleep, sleep.yields, sleep.yield_len, torch.arange(n, device=tokens.device)).mean()
        sleep_complete = sleep.complete
    return _StepOutput(loss, log_w.detach(), derivs.complete, sleep_complete)


# --------------------------------------------------------------------------------------------
# Exact metrics
# --------------------------------------------------------------------------------------------


@dataclass
class ExactTestSet:
    """Test sentences with all their parses (concatenated, sentence-major) and the true posteriors."""

    sentences: list[tuple[int, ...]]
    tokens: Tensor
    lengths: Tensor
    parses: Derivations
    parse_rows: Tensor
    offsets: list[int]
    log_prior_true: Tensor  # (P,) float64: log p_true(z) of every parse

    @property
    def n_parses(self) -> list[int]:
        return [self.offsets[i + 1] - self.offsets[i] for i in range(len(self.sentences))]


def build_test_set(grammar: Grammar, sentences: list[tuple[int, ...]], device: torch.device | str | None = None,
                   max_parses: int = 10_000) -> ExactTestSet:
    """Enumerate the parses of every sentence (raises if one has none or more than ``max_parses``)."""
    all_parses: list[tuple[int, ...]] = []
    offsets, rows = [0], []
    for i, words in enumerate(sentences):
        parses = enumerate_parses(grammar, words, max_parses=max_parses)
        if not parses:
            raise ValueError(f"test sentence {' '.join(grammar.words(words))!r} has no parse")
        all_parses.extend(parses)
        rows.extend([i] * len(parses))
        offsets.append(len(all_parses))
    tokens, lengths = encode_sentences(sentences, grammar, device)
    parses = Derivations.build(grammar, all_parses, device)
    log_true = parses.counts.double().cpu() @ grammar.true_log_probs()
    return ExactTestSet(list(sentences), tokens, lengths, parses, torch.tensor(rows, device=device), offsets, log_true)


def rule_kl(grammar: Grammar, log_p: Tensor, log_q: Tensor) -> Tensor:
    """Per non-terminal ``KL(p(. | A) || q(. | A))`` from per-rule log-probabilities: ``(n_nonterminals,)`` float64."""
    lp, lq = log_p.detach().double().cpu(), log_q.detach().double().cpu()
    terms = lp.exp() * (lp - lq)
    return torch.zeros(grammar.n_nonterminals, dtype=torch.float64).index_add_(
        0, torch.tensor(grammar.rule_lhs), terms)


def _segment_kl(log_q: Tensor, log_p_post: Tensor) -> float:
    """KL between two normalised log-distributions on the same finite support (float64)."""
    return float((log_q.exp() * (log_q - log_p_post)).sum())


@torch.no_grad()
def exact_metrics(grammar: Grammar, model: PCFGModel, qnet: PCFGInferenceNetwork, test: ExactTestSet) -> dict[str, float]:
    """The Fig. 6 metrics (module docstring): ``kl_p``, ``kl_p_tree``, ``kl_q_true``, ``kl_q_theta``,
    ``q_parse_mass``, ``kl_true_q``, ``test_log_px``, ``test_log_px_true``, ``theta_spectral_radius``."""
    log_theta = model.log_probs().double().cpu()
    log_true = grammar.true_log_probs()
    per_nt = rule_kl(grammar, log_theta, log_true)
    probs = log_theta.exp()
    expansions = torch.as_tensor(grammar.expected_expansions(probs), dtype=torch.float64)
    kl_tree = float((expansions * per_nt).sum()) if torch.isfinite(expansions).all() else math.inf
    log_q = qnet.log_prob(test.parses, test.tokens, test.lengths, test.parse_rows).double().cpu()
    log_prior_theta = test.parses.counts.double().cpu() @ log_theta
    kl_true, kl_theta, kl_rev, mass, log_px, log_px_true = [], [], [], [], [], []
    for i in range(len(test.sentences)):
        sl = slice(test.offsets[i], test.offsets[i + 1])
        q_mass = torch.logsumexp(log_q[sl], 0)
        q_bar = log_q[sl] - q_mass
        z_theta = torch.logsumexp(log_prior_theta[sl], 0)
        z_true = torch.logsumexp(test.log_prior_true[sl], 0)
        kl_true.append(_segment_kl(q_bar, test.log_prior_true[sl] - z_true))
        kl_theta.append(_segment_kl(q_bar, log_prior_theta[sl] - z_theta))
        kl_rev.append(_segment_kl(test.log_prior_true[sl] - z_true, log_q[sl]))
        mass.append(float(q_mass.exp()))
        log_px.append(float(z_theta))
        log_px_true.append(float(z_true))

    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    return {
        "kl_p": float(per_nt.mean()),
        "kl_p_tree": kl_tree,
        "kl_q_true": mean(kl_true),
        "kl_q_theta": mean(kl_theta),
        "q_parse_mass": mean(mass),
        "kl_true_q": mean(kl_rev),
        "test_log_px": mean(log_px),
        "test_log_px_true": mean(log_px_true),
        "theta_spectral_radius": grammar.spectral_radius(probs),
    }


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass
class PCFGRunResult:
    """What :func:`train_pcfg` returns: per-epoch ``history`` (row 0: the untrained model), the
    bandit's ``schedule_history`` and ``final`` (last metrics, tail means, timings)."""

    config: PCFGConfig
    history: list[dict[str, Any]]
    schedule_history: list[dict[str, Any]]
    final: dict[str, Any] = field(default_factory=dict)


class PCFGModels(NamedTuple):
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
                             max_productions=config.max_productions)
    test = sample_sentences(grammar, table, config.n_test, gen, max_words=config.eval_max_words,
                            max_productions=config.max_productions)
    return train, test


def _final(history: list[dict[str, Any]], config: PCFGConfig, timers: dict[str, float], device: torch.device,
           epochs_done: int) -> dict[str, Any]:
    final: dict[str, Any] = {}
    evaluated = [r for r in history if "kl_p" in r]
    if evaluated:
        final.update({k: v for k, v in evaluated[-1].items() if k not in ("epoch", "betas", "seconds")})
        tail = max(1, round(TAIL_FRACTION * config.epochs))
        rows = [r for r in evaluated if r["epoch"] > epochs_done - tail] or evaluated[-1:]
        for key in METRICS + ("q_parse_mass", "kl_true_q"):
            final[f"{key}_tail"] = sum(r[key] for r in rows) / len(rows)
        final["tail_epochs"] = tail
    final.update(train_seconds=sum(r.get("seconds", 0.0) for r in history), eval_seconds=timers["eval_seconds"],
                 bandit_seconds=timers["bandit_seconds"], epochs=epochs_done,
                 completed=epochs_done >= config.epochs, device=str(device))
    return final


def train_pcfg(
    config: PCFGConfig,
    run_dir: str | Path | None = None,
    *,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    checkpoint_every: int = 50,
    stop_after: int | None = None,
) -> PCFGRunResult:
    """Train ``config`` (resuming from ``run_dir/checkpoint.pt`` if present) and return its :class:`PCFGRunResult`.

    Each epoch: a seeded shuffle of the training sentences, minibatches of ``batch_size`` with the
    schedule's betas fixed, then ``schedule.step`` (the bandit gets ``train_evidence``, its
    ``evidence_spec`` estimate averaged over the epoch's minibatches). Exact metrics at epoch 0,
    every ``eval_every`` epochs and at the end. Checkpoints (atomic) every ``checkpoint_every``
    epochs and at the last; a resumed run is bit-identical on CPU. ``stop_after=k`` stops after
    epoch ``k`` (to simulate a killed run). History keys: ``epoch``, ``loss``, ``train_elbo``,
    ``train_iwae``, ``train_evidence``, ``q_truncated`` / ``sleep_truncated`` (fractions of
    derivations cut by the budget), ``betas``, ``seconds`` and the metrics of :func:`exact_metrics`.
    """
    config.validate()
    if not (isinstance(checkpoint_every, int) and checkpoint_every >= 1):
        raise ValueError(f"checkpoint_every={checkpoint_every!r} must be an integer >= 1")
    if stop_after is not None and not (isinstance(stop_after, int) and stop_after >= 0):
        raise ValueError(f"stop_after={stop_after!r} must be None or an integer >= 0")
    dev = resolve_device(device)
    # The PCFG's tensors are tiny (at most a few hundred rows): intra-op threads only add overhead
    # (measured 5x slower with 2 threads on a busy 2-core machine), and one thread keeps CPU runs
    # bit-reproducible whatever the caller's setting. Restored on exit.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_pcfg(config, run_dir, dev, progress, checkpoint_every, stop_after)
    finally:
        torch.set_num_threads(threads)


def _train_pcfg(config: PCFGConfig, run_dir: str | Path | None, dev: torch.device, progress: bool | None,
                checkpoint_every: int, stop_after: int | None) -> PCFGRunResult:
    run_path = Path(run_dir) if run_dir is not None else None
    ckpt_path = run_path / CHECKPOINT_NAME if run_path is not None else None
    digest = config.digest()
    state = None
    if ckpt_path is not None and ckpt_path.exists():
        state = ckpt.load(ckpt_path)
        if state.get("digest") != digest:
            raise ValueError(f"{ckpt_path} belongs to config {state.get('digest')!r}, not to this config "
                             f"{digest!r}; use another run_dir or delete the checkpoint")

    grammar, model, qnet = _build(config, dev)
    train_sentences, test_sentences = _datasets(config, grammar)
    test = build_test_set(grammar, test_sentences, dev, config.max_parses)
    optimisers = [torch.optim.Adam(model.parameters(), lr=config.lr), torch.optim.Adam(qnet.parameters(), lr=config.lr)]
    schedule = make_schedule(config, dev)
    spec = schedule.evidence_spec or EvidenceSpec.paper()
    generators = {"sample": torch.Generator(device=dev).manual_seed(config.seed + 1),
                  "shuffle": torch.Generator().manual_seed(config.seed + 2)}
    history: list[dict[str, Any]] = []
    timers = {"eval_seconds": 0.0, "bandit_seconds": 0.0}
    start = 0

    def evaluate() -> dict[str, float]:
        t = time.perf_counter()
        out = exact_metrics(grammar, model, qnet, test)
        timers["eval_seconds"] += time.perf_counter() - t
        return out

    if state is not None:
        model.load_state_dict(state["model"])
        qnet.load_state_dict(state["inference_network"])
        for opt, s in zip(optimisers, state["optimizers"]):
            opt.load_state_dict(s)
        schedule.load_state_dict(state["schedule"])
        for name, gen in generators.items():
            gen.set_state(state["rng"][name])
        history, timers, start = list(state["history"]), dict(state["timers"]), int(state["epoch"])
    else:
        history.append({"epoch": 0, **evaluate()})

    def save_checkpoint(epoch: int) -> None:
        if ckpt_path is None:
            return
        ckpt.atomic_save({
            "format": _CHECKPOINT_FORMAT, "digest": digest, "config": config.to_dict(), "epoch": epoch,
            "model": model.state_dict(), "inference_network": qnet.state_dict(),
            "optimizers": [opt.state_dict() for opt in optimisers], "schedule": schedule.state_dict(),
            "rng": {name: gen.get_state() for name, gen in generators.items()},
            "history": ckpt.plain(history), "timers": dict(timers),
        }, ckpt_path)

    n = len(train_sentences)
    last = config.epochs if stop_after is None else min(config.epochs, stop_after)
    bar = ckpt.progress_bar(progress if last > start else False, total=config.epochs, initial=start, unit="epoch",
                            desc=f"pcfg/{method_label(config)}/S={config.S}")
    try:
        for epoch in range(start + 1, last + 1):
            t0 = time.perf_counter()
            betas = schedule.current()
            betas_dev = betas.to(dev)
            perm = torch.randperm(n, generator=generators["shuffle"]).tolist()
            sums = torch.zeros(4, dtype=torch.float64)  # loss, elbo, iwae, evidence (per sentence)
            q_cut = sleep_cut = sleep_total = q_total = 0
            for b0 in range(0, n, config.batch_size):
                batch = [train_sentences[i] for i in perm[b0: b0 + config.batch_size]]
                tokens, lengths = encode_sentences(batch, grammar, dev)
                out = _train_step(config, model, qnet, tokens, lengths, betas_dev, generators["sample"])
                if not torch.isfinite(out.loss.detach()):
                    raise PCFGTrainingDivergedError(
                        f"non-finite loss at epoch {epoch}, sentences {batch}; last checkpoint left untouched")
                for opt in optimisers:
                    opt.zero_grad(set_to_none=True)
                out.loss.backward()
                for opt in optimisers:
                    opt.step()
                log_w = out.log_w.double()
                sums += torch.stack([out.loss.detach().double().cpu() * len(batch), log_w.mean(0).sum().cpu(),
                                     iwae_bound(log_w).sum().cpu(), log_evidence(log_w, spec).sum().cpu()])
                q_cut += int((~out.q_complete).sum())
                q_total += out.q_complete.numel()
                if out.sleep_complete is not None:
                    sleep_cut += int((~out.sleep_complete).sum())
                    sleep_total += out.sleep_complete.numel()
            means = (sums / n).tolist()
            row: dict[str, Any] = {"epoch": epoch, "loss": means[0], "train_elbo": means[1], "train_iwae": means[2],
                                   "train_evidence": means[3], "q_truncated": q_cut / q_total}
            if sleep_total:
                row["sleep_truncated"] = sleep_cut / sleep_total
            row["betas"] = [float(v) for v in betas.tolist()]
            row["seconds"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            schedule.step(epoch, evidence=row["train_evidence"] if schedule.evidence_spec is not None else None)
            timers["bandit_seconds"] += time.perf_counter() - t1
            if epoch == config.epochs or epoch % config.eval_every == 0:
                row.update(evaluate())
            history.append(row)
            if epoch % checkpoint_every == 0 or epoch == last:
                save_checkpoint(epoch)
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k: round(row[k], 3) for k in ("train_elbo", "kl_p", "kl_q_true") if k in row})
            start = epoch
    finally:
        if bar is not None:
            bar.close()
    if state is None and last == 0:
        save_checkpoint(0)
    final = _final(history, config, timers, dev, start)
    if final["completed"] and run_path is not None:
        ckpt.atomic_save({"config": config.to_dict(), "model": model.state_dict(),
                          "inference_network": qnet.state_dict()}, run_path / MODEL_NAME)
    return PCFGRunResult(config=config, history=history, schedule_history=ckpt.plain(schedule.history()), final=final)


def load_model(config: PCFGConfig, run_dir: str | Path, *, device: str | torch.device | None = "cpu") -> PCFGModels:
    """The trained grammar model and inference network of a complete run (``run_dir/model.pt``)."""
    path = Path(run_dir) / MODEL_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run is not complete")
    state = ckpt.load(path)
    if state.get("config") != config.to_dict():
        raise ValueError(f"{path} holds another config ({state.get('config')}), not {config.to_dict()}")
    dev = resolve_device(device)
    grammar, model, qnet = _build(config, dev)
    model.load_state_dict(state["model"])
    qnet.load_state_dict(state["inference_network"])
    return PCFGModels(grammar, model.eval(), qnet.eval())


# --------------------------------------------------------------------------------------------
# Sweeps and summaries
# --------------------------------------------------------------------------------------------

_METHODS: tuple[tuple[str, str], ...] = (("tvo", "log"), ("tvo", "gp_bandit"), ("reinforce", "none"),
                                         ("wake-wake", "none"), ("wake-sleep", "none"))


def pcfg_sweep(profile: Any) -> list[PCFGConfig]:
    """The Fig. 6 runs for a profile (a name or an object with ``.name``): every method x S x seed.

    * ``smoke``: S = 2, 2 epochs, tiny data and network, one seed (the whole sweep in seconds);
    * ``quick``: S in {2, 5, 10, 20}, 40 epochs of 10 sentences (<= 15 words), 3 seeds, a 32-unit network
      and learning rate 3e-3 (instead of Adam's default 1e-3) so that 200 steps show the trends;
    * ``paper``: S in {2, 5, 10, 20}, 2000 epochs, 20 seeds, d = 5, the defaults of :class:`PCFGConfig`.
    """
    name = profile if isinstance(profile, str) else getattr(profile, "name", None)
    if name == "smoke":
        base = dict(epochs=2, n_train=4, n_test=3, hidden_dim=16, train_max_words=7, eval_max_words=7,
                    max_productions=31)
        S_values, seeds = (2,), (0,)
    elif name == "quick":
        base = dict(epochs=40, n_train=10, n_test=10, hidden_dim=32, train_max_words=15, eval_max_words=9,
                    max_productions=63, lr=3e-3)
        S_values, seeds = (2, 5, 10, 20), (0, 1, 2)
    elif name == "paper":
        base = {}
        S_values, seeds = (2, 5, 10, 20), tuple(range(20))
    else:
        raise ValueError(f"unknown profile {profile!r}; choose 'smoke', 'quick' or 'paper'")
    return [PCFGConfig(objective=objective, schedule=schedule, S=S, seed=seed, **base).validate()
            for S in S_values for objective, schedule in _METHODS for seed in seeds]


def tail_fraction(profile: Any) -> float:
    """Fraction of the last epochs averaged for Fig 6: the paper's 100 of 2000 (0.05) at paper scale,
    a quarter of the epochs for the short smoke/quick runs (5% of 40 epochs would be 2 noisy epochs)."""
    name = profile if isinstance(profile, str) else getattr(profile, "name", None)
    return TAIL_FRACTION if name == "paper" else 0.25


def summarise_pcfg(results_frame: Any) -> Any:
    """Median over seeds of each run's tail means, per method and S (a pandas DataFrame).

    ``results_frame`` is :func:`tvolib.experiments.results_frame` of PCFG configs (one row per run:
    config fields + ``final``). Note the order: mean over the tail epochs, then median over seeds;
    the figure computes the paper's median-per-epoch-then-mean from the histories.
    """
    import pandas as pd

    frame = pd.DataFrame(results_frame).copy()
    frame["method"] = [f"tvo-{s}" if o == "tvo" else o for o, s in zip(frame["objective"], frame["schedule"])]
    cols = [f"{m}_tail" for m in METRICS + ("q_parse_mass", "kl_true_q") if f"{m}_tail" in frame]
    out = frame.groupby(["method", "S"])[cols].median()
    out["n_seeds"] = frame.groupby(["method", "S"]).size()
    return out.reset_index()
