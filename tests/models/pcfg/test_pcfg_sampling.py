"""Samplers and the derivation cap (productions or depth)."""
from __future__ import annotations

import hashlib
import math
from collections import Counter

import pytest
import torch
from scipy import stats

from tvolib.models.pcfg import (
    DEFAULT_DERIVATION_CAP,
    Derivations,
    DerivationCap,
    load_grammar,
    replay_derivation,
    resolve_cap,
    sample_from_table,
    sample_sentences,
    sample_with_policy,
)
from tvolib.models.pcfg.sampling import DEPTH_CAP_MAX_PRODUCTIONS

CPU = torch.device("cpu")


def _chi_square_p(grammar, derivations, n_min=10):
    """p-value of the sampled tree frequencies against the exact tree probabilities."""
    counts = Counter(derivations)
    built = Derivations.build(grammar, sorted(counts))
    probs = (built.counts.double() @ grammar.true_log_probs()).exp()
    n = len(derivations)
    obs, exp = [], []
    for tree, p in zip(built.rules, probs.tolist()):
        if n * p >= n_min:
            obs.append(counts[tree])
            exp.append(n * p)
    obs.append(n - sum(obs))
    exp.append(n - sum(exp))
    assert len(obs) >= 8
    return stats.chisquare(obs, exp).pvalue


def _table_policy(table):
    return lambda nt, prev, ptr: table[nt]


def test_prior_tree_frequencies_match_true_probabilities(grammar, true_table):
    gen = torch.Generator().manual_seed(1234)
    trees = sample_from_table(grammar, true_table, 4000, gen, max_productions=63).rules
    assert _chi_square_p(grammar, trees) > 1e-3


def test_lockstep_sampler_frequencies_match_true_probabilities(grammar, true_table):
    gen = torch.Generator().manual_seed(99)
    trees, log_p = sample_with_policy(grammar, 2000, _table_policy(true_table), gen, 25, CPU)
    assert _chi_square_p(grammar, trees) > 1e-3
    exact = Derivations.build(grammar, trees).counts.double() @ grammar.true_log_probs()
    torch.testing.assert_close(log_p, exact.float().double(), atol=1e-5, rtol=0)


def test_prior_is_normalised_over_capped_derivations(grammar, capped_derivations):
    built = Derivations.build(grammar, capped_derivations(grammar, 5))
    total = (built.counts.double() @ grammar.true_log_probs()).exp().sum().item()
    assert math.isclose(total, 1.0, rel_tol=1e-9)


def _digest(trees):
    return hashlib.sha256(repr(trees).encode()).hexdigest()


def test_default_cap_reproduces_the_samples_of_the_single_module_version(grammar, true_table):
    """Digests recorded with the implementation before the package split (productions=127)."""
    prior = sample_from_table(grammar, true_table, 500, torch.Generator().manual_seed(2024)).rules
    assert prior[2] == (0, 6, 7, 11, 6)
    assert _digest(prior) == "eb0d9957ba4470603ca88eaabcaaf9694d7bdacf37cb7f038daef11780b2588b"
    lock, _ = sample_with_policy(grammar, 200, _table_policy(true_table), torch.Generator().manual_seed(7),
                                 DEFAULT_DERIVATION_CAP, CPU)
    assert _digest(lock) == "33cc3e42c91d4e45262d2ab416f61da90a6867640300900c290fb1ef2723eba0"
    sents = sample_sentences(grammar, true_table, 30, torch.Generator().manual_seed(1), max_words=15,
                             max_productions=127)
    assert sents[:3] == [(0, 5, 3, 2, 1), (3, 2, 4, 5, 3), (3, 2, 3)]
    assert _digest(sents) == "bc583790c1f85597b93e0495e8854a5c21b2ea14a00199c984d72f07a8737149"


def test_cap_values_are_validated():
    assert DEFAULT_DERIVATION_CAP == DerivationCap() == resolve_cap() == resolve_cap(127)
    assert resolve_cap(derivation_cap=("depth", 50)) == DerivationCap("depth", 50)
    assert DerivationCap("depth", 50).max_productions == DEPTH_CAP_MAX_PRODUCTIONS
    assert (DerivationCap("depth", 50).max_depth, DerivationCap("productions", 9).max_depth) == (50, None)
    assert str(DerivationCap("depth", 50)) == "depth=50"
    with pytest.raises(ValueError, match="kind must be one of"):
        DerivationCap("height", 50)
    for bad in (0, -1, 2.5, True, "50"):
        with pytest.raises(ValueError, match="limit must be an int >= 1"):
            DerivationCap("depth", bad)
        with pytest.raises(ValueError, match="max_productions must be an int >= 1"):
            resolve_cap(bad)
    with pytest.raises(ValueError, match="not both"):
        resolve_cap(127, ("depth", 50))
    with pytest.raises(ValueError, match=r"\(kind, limit\) pair"):
        resolve_cap(derivation_cap=("depth",))
    with pytest.raises(ValueError, match=r"\(kind, limit\) pair"):
        resolve_cap(derivation_cap=50)


def _depths(grammar, rules):
    """Depth of the non-terminal each step expands, and of the left-most one still pending (or None)."""
    stack, out = [(grammar.start_id, 0)], []
    for r in rules:
        _, depth = stack.pop()
        out.append(depth)
        stack.extend((s, depth + 1) for s in reversed(grammar.rule_rhs[r]))
        while stack and stack[-1][0] >= grammar.n_nonterminals:
            stack.pop()
    return out, (stack[-1][1] if stack else None)


def _complete_within_depth(grammar, a, depth, max_depth):
    """P(the subtree of non-terminal ``a`` at ``depth`` expands no non-terminal deeper than ``max_depth``)."""
    if depth > max_depth:
        return 0.0
    total = 0.0
    for r in grammar.rules_of[a]:
        p = grammar.true_probs[r]
        for s in grammar.rule_rhs[r]:
            if s < grammar.n_nonterminals:
                p *= _complete_within_depth(grammar, s, depth + 1, max_depth)
        total += p
    return total


@pytest.mark.parametrize("sampler", ["prior", "policy"])
def test_depth_cap_truncates_exactly_the_trees_deeper_than_the_cap(grammar, true_table, sampler):
    """Under depth cap D no non-terminal deeper than D is expanded, a truncated derivation stops at
    a pending non-terminal of depth D + 1, and the truncated fraction is the exact probability of
    a tree deeper than D: ``1 - g_S(0)``, ``g_A(d) = sum_r p_r prod_{B in rhs(r)} g_B(d + 1)``,
    ``g_A(d) = 0`` for ``d > D``."""
    cap, n = DerivationCap("depth", 5), 3000
    gen = torch.Generator().manual_seed(31)
    if sampler == "prior":
        trees = sample_from_table(grammar, true_table, n, gen, derivation_cap=cap).rules
    else:
        trees, _ = sample_with_policy(grammar, n, _table_policy(true_table), gen, cap, CPU)
    truncated = 0
    for rules in trees:
        expanded, pending = _depths(grammar, rules)
        assert max(expanded) <= 5
        assert pending in (None, 6)
        assert replay_derivation(grammar, rules)[2] == (pending is None)
        truncated += pending is not None
    p_truncated = 1 - _complete_within_depth(grammar, grammar.start_id, 0, 5)
    assert p_truncated == pytest.approx(0.4335, abs=1e-4)
    assert stats.binomtest(truncated, n, p_truncated).pvalue > 1e-3


def test_depth_cap_cuts_an_endless_left_spine(grammar):
    """With NP -> NP PP certain, depth cap 5 stops at the NP of depth 6 (S, then NP at depths 1-5);
    a productions cap stops after its budget instead."""
    np_pp = grammar.rules_of[grammar.nt_index["NP"]][0]
    probs = [1.0 if r == np_pp else grammar.true_probs[r] for r in range(grammar.n_rules)]
    probs = [0.0 if grammar.rule_lhs[r] == grammar.nt_index["NP"] and r != np_pp else p for r, p in enumerate(probs)]
    table = torch.full((grammar.n_nonterminals, grammar.n_rules), float("-inf"))
    table[list(grammar.rule_lhs), list(range(grammar.n_rules))] = torch.tensor(probs).log()
    d = sample_from_table(grammar, table, 3, torch.Generator().manual_seed(0), derivation_cap=("depth", 5))
    assert d.rules == [(0,) + (np_pp,) * 5] * 3 and not d.complete.any()
    assert grammar.words(d.yields_list[0]) == ["<unk>"] * 7  # NP, five PPs, VP pending
    d = sample_from_table(grammar, table, 2, torch.Generator().manual_seed(0), max_productions=40)
    assert d.rules == [(0,) + (np_pp,) * 39] * 2
    trees, _ = sample_with_policy(grammar, 2, _table_policy(table), torch.Generator().manual_seed(0),
                                  DerivationCap("depth", 5), CPU)
    assert trees == [(0,) + (np_pp,) * 5] * 2


def test_depth_cap_draws_uniform_blocks_beyond_the_first(grammar):
    """A right-branching grammar S -> a S | a: depth cap 300 admits trees longer than one block of
    128 uniforms; both samplers read the same uniforms, so they draw the same trees."""
    chain = load_grammar({"start": "S", "terminals": ["a"], "rules": {"S": [[["a", "S"], 0.5], [["a"], 0.5]]}})
    table = torch.tensor([[math.log(0.99), math.log(0.01)]])
    cap = DerivationCap("depth", 300)
    prior = sample_from_table(chain, table, 20, torch.Generator().manual_seed(3), derivation_cap=cap)
    lock, _ = sample_with_policy(chain, 20, _table_policy(table), torch.Generator().manual_seed(3), cap, CPU)
    assert prior.rules == lock
    assert max(len(r) for r in lock) > 128
    assert all(len(r) <= 301 for r in lock)
    assert all(ok or len(r) == 301 for r, ok in zip(prior.rules, prior.complete.tolist()))


def test_sample_sentences_conditions_on_length_and_reports_failure(grammar, true_table):
    sents = sample_sentences(grammar, true_table, 50, torch.Generator().manual_seed(4), max_words=5,
                             derivation_cap=("depth", 50))
    assert len(sents) == 50 and all(3 <= len(s) <= 5 for s in sents)
    with pytest.raises(RuntimeError, match=r"accepted only 0 of 1 sentences with <= 2 words within the cap"):
        sample_sentences(grammar, true_table, 1, torch.Generator().manual_seed(4), max_words=2, batch=8, max_tries=2)


def test_inverse_cdf_never_draws_a_zero_mass_rule_at_u_zero():
    """``torch.rand`` can return exactly 0: the draw must still be a rule of positive mass."""
    from tvolib.models.pcfg.sampling import _inverse_cdf

    probs = torch.zeros(3, 12, dtype=torch.float64)
    probs[0, 9] = 1.0                      # all mass on rule 9
    probs[1, 4:7] = torch.tensor([0.0, 0.5, 0.5])
    probs[2, 0:2] = torch.tensor([0.25, 0.75])
    last = torch.tensor([9, 6, 1])
    assert _inverse_cdf(probs, torch.zeros(3, dtype=torch.float64), last).tolist() == [9, 5, 0]
    u = torch.tensor([0.3, 0.5, 0.26], dtype=torch.float64)
    assert _inverse_cdf(probs, u, last).tolist() == [9, 5, 1]
