"""The probabilistic context-free grammar of the paper's Appendix D.1 (Fig. 6).

Following Le et al. (2019, "Revisiting Reweighted Wake-Sleep", Section 4.1):
``p_theta(x, z) = l(x | z) p_theta(z)`` with ``z`` a parse tree of the Astronomers grammar.

* :mod:`~tvolib.models.pcfg.grammar`: :class:`Grammar`, :func:`load_grammar`.
* :mod:`~tvolib.models.pcfg.derivations`: trees as left-most derivations, :class:`Derivations`.
* :mod:`~tvolib.models.pcfg.sampling`: samplers under a :class:`DerivationCap`.
* :mod:`~tvolib.models.pcfg.likelihood`: the soft likelihood ``log l(x | z) = -Lev(yield z, x)**2``.
* :mod:`~tvolib.models.pcfg.networks`: :class:`PCFGModel` (``p_theta``) and
  :class:`PCFGInferenceNetwork` (``q_phi``).
* :mod:`~tvolib.models.pcfg.chart`: exact parse counts, inside probabilities and parse sets.
"""
from __future__ import annotations

from tvolib.models.pcfg.chart import MAX_PARSES, count_parses, enumerate_parses, inside_log_marginal
from tvolib.models.pcfg.derivations import Derivations, encode_sentences, replay_derivation
from tvolib.models.pcfg.grammar import Grammar, GrammarError, load_grammar
from tvolib.models.pcfg.likelihood import levenshtein, soft_log_likelihood
from tvolib.models.pcfg.networks import PCFGInferenceNetwork, PCFGModel
from tvolib.models.pcfg.sampling import (
    DEFAULT_DERIVATION_CAP,
    DerivationCap,
    Policy,
    resolve_cap,
    sample_from_table,
    sample_sentences,
    sample_with_policy,
)

__all__ = [
    "GrammarError",
    "Grammar",
    "load_grammar",
    "replay_derivation",
    "Derivations",
    "encode_sentences",
    "levenshtein",
    "soft_log_likelihood",
    "PCFGModel",
    "PCFGInferenceNetwork",
    "sample_sentences",
    "count_parses",
    "enumerate_parses",
    "inside_log_marginal",
    "sample_from_table",
    "sample_with_policy",
    "Policy",
    "DerivationCap",
    "DEFAULT_DERIVATION_CAP",
    "resolve_cap",
    "MAX_PARSES",
]
