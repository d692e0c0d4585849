"""Exact parsing: parse counts, inside probabilities and parse sets from the span chart."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.models.pcfg import (
    MAX_PARSES,
    Derivations,
    count_parses,
    enumerate_parses,
    inside_log_marginal,
    load_grammar,
    replay_derivation,
    sample_sentences,
)


def _brute_force_parses(grammar, max_words):
    """Every complete tree with at most ``max_words`` words, grouped by yield (exhaustive search)."""
    by_yield: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    frontier = [((), [grammar.start_id], 0)]
    while frontier:
        rules, stack, n_words = frontier.pop()
        for r in grammar.rules_of[stack[-1]]:
            new = stack[:-1] + list(reversed(grammar.rule_rhs[r]))
            words = n_words
            while new and new[-1] >= grammar.n_nonterminals:
                new.pop()
                words += 1
            if words + len(new) > max_words:  # every pending symbol yields at least one word
                continue
            if new:
                frontier.append((rules + (r,), new, words))
            else:
                tree = rules + (r,)
                by_yield.setdefault(replay_derivation(grammar, tree)[0], []).append(tree)
    return by_yield


def test_exact_parses_match_brute_force(grammar):
    by_yield = _brute_force_parses(grammar, 5)
    assert len(by_yield) > 200 and max(len(t) for t in by_yield.values()) == 2
    log_true = grammar.true_log_probs()
    for words, trees in by_yield.items():
        parses = enumerate_parses(grammar, words)
        assert sorted(parses) == sorted(trees)
        assert count_parses(grammar, words) == len(trees)
        log_p = Derivations.build(grammar, parses).counts.double() @ log_true
        assert math.isclose(torch.logsumexp(log_p, 0).item(), inside_log_marginal(grammar, log_true, words),
                            rel_tol=1e-12)
    assert enumerate_parses(grammar, grammar.tokenize("stars ears with stars")) == []
    assert inside_log_marginal(grammar, log_true, grammar.tokenize("stars ears")) == float("-inf")


def test_classic_astronomers_example(grammar):
    """Manning & Schuetze's example: two parses, probabilities 0.0009072 and 0.0006804."""
    words = grammar.tokenize("astronomers saw stars with ears")
    parses = enumerate_parses(grammar, words)
    probs = sorted((Derivations.build(grammar, parses).counts.double() @ grammar.true_log_probs()).exp().tolist())
    assert probs == pytest.approx([0.0006804, 0.0009072], rel=1e-9)
    assert inside_log_marginal(grammar, grammar.true_log_probs(), words) == pytest.approx(math.log(0.0015876))
    with pytest.raises(ValueError, match="max_parses"):
        enumerate_parses(grammar, grammar.tokenize("stars saw stars with ears with ears with ears"), max_parses=3)
    with pytest.raises(ValueError, match="at least one word"):
        count_parses(grammar, ())


def test_pp_attachments_count_as_catalan_numbers(grammar):
    """"stars saw stars" + k x "with ears": each PP attaches to the VP or to any NP to its left,
    which gives the Catalan number C_{k+1} of parses; above MAX_PARSES the default enumeration stops."""
    for k in range(1, 10):
        words = grammar.tokenize("stars saw stars" + " with ears" * k)
        assert count_parses(grammar, words) == math.comb(2 * k + 2, k + 1) // (k + 2)
    assert MAX_PARSES == 10_000
    assert len(enumerate_parses(grammar, grammar.tokenize("stars saw stars" + " with ears" * 8))) == 4862
    with pytest.raises(ValueError, match="16796 parses > max_parses=10000"):
        enumerate_parses(grammar, grammar.tokenize("stars saw stars" + " with ears" * 9))


@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1))
def test_chart_values_agree_on_sampled_sentences(grammar, seed):
    """On sentences of the grammar: |T(x)| = len(enumerate), log p(x) = logsumexp over T(x) of log p(z),
    and every enumerated parse yields x."""
    table = torch.zeros(grammar.n_nonterminals, grammar.n_rules).masked_fill(~grammar.rule_mask, float("-inf"))
    table = table.log_softmax(1)
    words = sample_sentences(grammar, table, 1, torch.Generator().manual_seed(seed), max_words=13,
                             max_productions=25)[0]
    log_p = torch.randn(grammar.n_rules, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    parses = enumerate_parses(grammar, words)
    assert len(parses) == count_parses(grammar, words) >= 1
    assert all(replay_derivation(grammar, z)[0] == words for z in parses)
    direct = torch.logsumexp(Derivations.build(grammar, parses).counts.double() @ log_p, 0).item()
    assert inside_log_marginal(grammar, log_p, words) == pytest.approx(direct, rel=1e-12, abs=1e-12)


def test_500_word_sentences_go_through_the_chart_without_recursion_limits(grammar):
    """The chart runs on an explicit stack: a 500-word chain (one parse, 500 nested cells) and a
    500-word sentence without parse whose search nests VP and NP cells 500 deep."""
    chain = load_grammar({"start": "S", "terminals": ["a"], "rules": {"S": [[["a", "S"], 0.5], [["a"], 0.5]]}})
    words = (0,) * 500
    assert count_parses(chain, words) == 1
    assert inside_log_marginal(chain, chain.true_log_probs(), words) == pytest.approx(500 * math.log(0.5))
    assert enumerate_parses(chain, words) == [(0,) * 499 + (1,)]
    stars = grammar.tokenize(" ".join(["stars"] * 500))
    assert count_parses(grammar, stars) == 0 and enumerate_parses(grammar, stars) == []
    assert inside_log_marginal(grammar, grammar.true_log_probs(), stars) == float("-inf")
