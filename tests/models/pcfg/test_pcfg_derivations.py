"""Trees as left-most derivations: replay, padding, the batch tensors."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tvolib.models.pcfg import Derivations, encode_sentences, replay_derivation


def _rules(grammar):
    return {grammar.rule_str(i): i for i in range(grammar.n_rules)}


def test_replay_and_budget(grammar):
    r = _rules(grammar)
    rules = [r["S -> NP VP"], r["NP -> stars"], r["VP -> V NP"], r["V -> saw"], r["NP -> ears"]]
    words, pointers, complete = replay_derivation(grammar, rules)
    assert grammar.words(words) == ["stars", "saw", "ears"] and complete
    assert pointers == (0, 0, 1, 1, 2)
    words, _, complete = replay_derivation(grammar, rules[:3])  # truncated: V NP pending
    assert not complete and grammar.words(words) == ["stars", "<unk>", "<unk>"]
    with pytest.raises(ValueError, match="left-most pending"):
        replay_derivation(grammar, [r["S -> NP VP"], r["VP -> V NP"]])
    with pytest.raises(ValueError, match="after the tree is complete"):
        replay_derivation(grammar, rules + [r["NP -> ears"]])


def test_batch_tensors_by_hand(grammar):
    r = _rules(grammar)
    full = (r["S -> NP VP"], r["NP -> stars"], r["VP -> V NP"], r["V -> saw"], r["NP -> ears"])
    cut = full[:2]
    d = Derivations.build(grammar, [full, cut])
    assert len(d) == 2 and d.rules == [full, cut] and d.complete.tolist() == [True, False]
    assert d.steps.tolist() == [list(full), list(cut) + [0, 0, 0]]
    assert d.step_mask.tolist() == [[True] * 5, [True, True, False, False, False]]
    assert d.prev.tolist() == [[0] + [x + 1 for x in full[:-1]], [0, full[0] + 1, 0, 0, 0]]
    assert d.lhs[0].tolist() == [grammar.rule_lhs[x] for x in full]
    assert d.pointer.tolist() == [[0, 0, 1, 1, 2], [0, 0, 0, 0, 0]]
    counts = torch.zeros(2, grammar.n_rules)
    for k, rules in enumerate([full, cut]):
        for x in rules:
            counts[k, x] += 1
    assert torch.equal(d.counts, counts)  # exact: integer counts held in floats
    assert grammar.words(d.yields_list[1]) == ["stars", "<unk>"]  # VP pending
    assert d.yield_len.tolist() == [3, 2] and d.yields[1, 2].item() == grammar.pad
    with pytest.raises(ValueError, match="at least one derivation"):
        Derivations.build(grammar, [])


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=40))
def test_any_prefix_of_a_leftmost_derivation_replays(grammar, choices):
    """Pick rules of the left-most pending non-terminal at random: every prefix replays, its
    pointers count the words emitted so far, and its yield length is words + pending symbols."""
    rules, stack, words = [], [grammar.start_id], 0
    for c in choices:
        if not stack:
            break
        options = grammar.rules_of[stack.pop()]
        r = options[c % len(options)]
        rules.append(r)
        stack.extend(reversed(grammar.rule_rhs[r]))
        while stack and stack[-1] >= grammar.n_nonterminals:
            stack.pop()
            words += 1
    yields, pointers, complete = replay_derivation(grammar, rules)
    assert complete == (not stack) and len(pointers) == len(rules)
    assert list(pointers) == sorted(pointers) and len(yields) == words + len(stack)
    assert all(t != grammar.unk for t in yields[:words])


def test_encode_sentences_pads_and_rejects_empty(grammar):
    tokens, lengths = encode_sentences([(1, 2, 3), (4,)], grammar)
    assert tokens.tolist() == [[1, 2, 3], [4, grammar.pad, grammar.pad]] and lengths.tolist() == [3, 1]
    for bad in ([], [(1,), ()]):
        with pytest.raises(ValueError, match="non-empty"):
            encode_sentences(bad, grammar)
