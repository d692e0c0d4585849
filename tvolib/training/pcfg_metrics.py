"""Exact PCFG metrics (Fig. 6): rule KLs and posterior KLs over exactly enumerated parses.

Metrics (exact, no Monte Carlo), in every training-history row where they are evaluated:

* ``kl_p`` = ``(1/|N|) sum_A KL(p_theta(. | A) || p_true(. | A))``: the mean over the grammar's
  non-terminals of the KL between the learned and the true rule distributions (the direction of
  Fig. 6's label; the average over non-terminals follows Le et al.'s code, which measures the
  other direction, ``KL(p_true || p_theta)``: ``kl_direction="le2019"``). Non-terminals with a
  single rule contribute 0. Also ``kl_p_tree`` = the KL between the two *tree* distributions,
  ``sum_A E_first[#expansions of A] KL_A`` with ``first`` the KL's first argument (``inf`` when
  ``theta`` is super-critical).
* ``kl_q_true`` / ``kl_q_theta``: for each test sentence ``x``, ``T(x)`` is its (finite) set of
  parses, enumerated exactly (:func:`tvolib.models.pcfg.enumerate_parses`); the posterior
  ``p(z | x) = p(z) / sum_{T(x)} p`` is exact (the soft likelihood is 1 on every parse, so it is the
  posterior of the 0/1 likelihood). ``q_phi`` also puts mass on trees that do not yield ``x``
  (its support is every budgeted derivation), where the KL to the 0/1 posterior is infinite and
  the KL to the soft posterior is intractable. We therefore report the exact
  ``KL(q_phi(z | x, z in T(x)) || p(z | x))`` -- ``q`` renormalised on the parses of ``x`` -- averaged
  over the test sentences, together with ``q_parse_mass`` = mean ``q_phi(T(x) | x)``, the mass
  that ``q`` puts on the parses, i.e. what the renormalisation keeps (1 for a perfect ``q``). A sentence with a single parse
  contributes 0 to ``kl_q_*`` whatever ``q`` is, so the two must be read together. ``kl_true_q`` =
  mean exact ``KL(p_true(z | x) || q_phi(z | x))`` (the reverse direction, finite because the true
  posterior lives on ``T(x)``, and charging ``q`` for its off-parse mass: the quantity whose
  expectation over ``x`` Le et al.'s sleep-loss "q error" estimates up to a constant).
* ``test_log_px`` / ``test_log_px_true``: mean exact ``log p(x)`` (inside algorithm) of the test
  sentences under ``theta`` / the true grammar.

Test sentences are drawn from the true grammar conditioned on at most ``eval_max_words`` words so
that their parse sets stay small (the enumeration is bounded by ``max_parses`` and raises beyond).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from tvolib.training.pcfg_levels import rule_kl
from tvolib.models.pcfg import (
    Derivations,
    Grammar,
    PCFGInferenceNetwork,
    PCFGModel,
    encode_sentences,
    enumerate_parses,
)

__all__ = ["METRICS", "ExactTestSet", "build_test_set", "exact_metrics"]

#: The Fig. 6 panels' metrics.
METRICS: tuple[str, ...] = ("kl_p", "kl_q_true", "kl_q_theta")


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
    """Enumerate the parses of every test sentence, with their log-probabilities under the true grammar.

    Args:
        grammar: the grammar (its true rule probabilities define ``p_true``).
        sentences: token ids of each sentence.
        device: where the parse tensors live.
        max_parses: the most parses one sentence may have.

    Returns:
        An :class:`ExactTestSet`. Raises ``ValueError`` if a sentence has no parse or more than ``max_parses``.
    """
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


def _segment_kl(log_q: Tensor, log_p_post: Tensor) -> float:
    """KL between two normalised log-distributions on the same finite support (float64)."""
    return float((log_q.exp() * (log_q - log_p_post)).sum())


@torch.no_grad()
def exact_metrics(grammar: Grammar, model: PCFGModel, qnet: PCFGInferenceNetwork, test: ExactTestSet,
                  kl_direction: str = "paper") -> dict[str, float]:
    """The Fig. 6 metrics of the module docstring, exactly (no sampling).

    Args:
        grammar: the grammar with the true rule probabilities.
        model: the learned ``p_theta``. qnet: the inference network ``q_phi``.
        test: the test sentences with their parses (:func:`build_test_set`).
        kl_direction: ``"paper"`` (``kl_p`` = KL(p_theta || p_true), Fig. 6's label) or ``"le2019"``
            (KL(p_true || p_theta), as Le et al.'s code measures it); see
            :func:`~tvolib.training.pcfg_levels.rule_kl`.

    Returns:
        ``{"kl_p", "kl_p_tree", "kl_q_true", "kl_q_theta", "q_parse_mass", "kl_true_q", "test_log_px",
        "test_log_px_true", "theta_spectral_radius"}`` as floats.

    Example:
        >>> exact_metrics(grammar, PCFGModel(grammar, init="true"), qnet, test)["kl_p"]  # doctest: +SKIP
        0.0
    """
    log_theta = model.log_probs().double().cpu()
    log_true = grammar.true_log_probs()
    per_nt = rule_kl(grammar, log_theta, log_true, kl_direction)
    # KL between tree distributions: sum_A E_first[#expansions of A] KL_A, "first" the KL's first argument.
    probs = (log_theta if kl_direction == "paper" else log_true).exp()
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
