"""Exact PCFG reference levels: rule-KL directions, the uniform level and the length-cut ML floor."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.models.pcfg import Grammar, load_grammar
from tvolib.training.pcfg_levels import (
    length_cut_ml,
    length_cut_ml_floor,
    length_cut_sentences,
    length_cut_tree_ml,
    mean_rule_kl,
    rule_kl,
    uniform_level,
    uniform_log_probs,
)

ASTRONOMERS = load_grammar("astronomers")
TRUE_NP = [0.4, 0.1, 0.18, 0.04, 0.18, 0.1]  # NP -> NP PP, astronomers, ears, saw, stars, telescopes
TRUE_VP = [0.7, 0.3]  # VP -> V NP, VP PP


def _tiny(p_a: float = 0.25) -> Grammar:
    return Grammar({"start": "S", "terminals": ["a", "b"],
                    "rules": {"S": [[["A", "A"], 1.0]], "A": [[["a"], p_a], [["b"], 1 - p_a]]}})


def _binary_tree_grammar(p: float) -> Grammar:
    """``S -> S S (p) | a (1 - p)``: every parse of ``a^n`` uses ``n - 1`` and ``n`` rules."""
    return Grammar({"start": "S", "terminals": ["a"], "rules": {"S": [[["S", "S"], p], [["a"], 1 - p]]}})


# -- rule KL directions ------------------------------------------------------------------------


def test_rule_kl_directions_match_hand_computation() -> None:
    g = _tiny(0.25)
    theta = torch.tensor([1.0, 0.5, 0.5], dtype=torch.float64).log()  # S -> A A, A -> a, A -> b
    paper = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    le2019 = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert rule_kl(g, theta, g.true_log_probs()).tolist() == pytest.approx([0.0, paper], abs=1e-15)
    assert rule_kl(g, theta, g.true_log_probs(), "le2019").tolist() == pytest.approx([0.0, le2019], abs=1e-15)
    assert mean_rule_kl(g, theta, g.true_log_probs(), "le2019") == pytest.approx(le2019 / 2, abs=1e-15)


def test_uniform_level_of_astronomers_is_the_closed_form() -> None:
    np_paper = sum(math.log((1 / 6) / p) / 6 for p in TRUE_NP)
    vp_paper = sum(math.log(0.5 / p) / 2 for p in TRUE_VP)
    np_le = sum(p * math.log(6 * p) for p in TRUE_NP)
    vp_le = sum(p * math.log(2 * p) for p in TRUE_VP)
    assert uniform_level(ASTRONOMERS) == pytest.approx((np_paper + vp_paper) / 6, rel=1e-13)
    assert uniform_level(ASTRONOMERS, "le2019") == pytest.approx((np_le + vp_le) / 6, rel=1e-13)
    assert round(uniform_level(ASTRONOMERS), 4) == 0.0540


def test_zero_probability_rules_contribute_zero() -> None:
    g = _tiny(0.25)
    theta = torch.tensor([1.0, 1.0, 1e-300], dtype=torch.float64).log()
    assert rule_kl(g, theta, g.true_log_probs())[1] == pytest.approx(math.log(1 / 0.25))
    assert math.isinf(float(rule_kl(g, torch.tensor([1.0, 1.0, 0.0]).log(), g.true_log_probs(), "le2019")[1]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=ASTRONOMERS.n_rules, max_size=ASTRONOMERS.n_rules))
def test_directions_swap_and_are_nonnegative(logits: list[float]) -> None:
    mask = ASTRONOMERS.rule_mask
    theta = torch.tensor(logits, dtype=torch.float64).expand(mask.shape[0], -1).masked_fill(~mask, -math.inf)
    log_theta = theta.log_softmax(-1).gather(0, torch.tensor(ASTRONOMERS.rule_lhs)[None]).squeeze(0)
    true = ASTRONOMERS.true_log_probs()
    paper = rule_kl(ASTRONOMERS, log_theta, true)
    assert torch.allclose(paper, rule_kl(ASTRONOMERS, true, log_theta, "le2019"), atol=1e-14)
    assert (paper >= -1e-14).all() and (rule_kl(ASTRONOMERS, log_theta, true, "le2019") >= -1e-14).all()


def test_bad_direction_and_shape_are_named() -> None:
    with pytest.raises(ValueError, match="direction='forward'"):
        uniform_level(ASTRONOMERS, "forward")
    with pytest.raises(ValueError, match="log_p_theta must have shape"):
        rule_kl(ASTRONOMERS, torch.zeros(3), ASTRONOMERS.true_log_probs())


# -- length-cut floors -------------------------------------------------------------------------


def _brute_force_counts(grammar: Grammar, max_words: int) -> torch.Tensor:
    """Expected rule counts under p_true(tree | <= L words) by enumerating every such tree."""
    def trees(symbol: int, budget: int) -> list[tuple[float, int, list[int]]]:  # (prob, words, rules)
        if budget < 1:
            return []
        if symbol >= grammar.n_nonterminals:
            return [(1.0, 1, [])]
        out = []
        for r in grammar.rules_of[symbol]:
            partial = [(grammar.true_probs[r], 0, [r])]
            rhs = grammar.rule_rhs[r]
            for i, child in enumerate(rhs):
                rest = len(rhs) - i - 1  # every later sibling needs at least one word
                partial = [(p * q, n + m, rs + qs) for p, n, rs in partial for q, m, qs in trees(child, budget - n - rest)]
            out.extend(partial)
        return out

    counts = torch.zeros(grammar.n_rules, dtype=torch.float64)
    total = 0.0
    for p, _, rules in trees(grammar.start_id, max_words):
        total += p
        for r in rules:
            counts[r] += p
    return counts / total


@pytest.mark.parametrize("max_words", [3, 5, 7])
def test_tree_ml_is_the_normalised_count_of_enumerated_trees(max_words: int) -> None:
    counts = _brute_force_counts(ASTRONOMERS, max_words)
    lhs = torch.tensor(ASTRONOMERS.rule_lhs)
    totals = torch.zeros(ASTRONOMERS.n_nonterminals, dtype=torch.float64).index_add(0, lhs, counts)[lhs]
    expected = torch.where(totals > 0, counts / totals, torch.tensor(ASTRONOMERS.true_probs, dtype=torch.float64))
    assert torch.allclose(length_cut_tree_ml(ASTRONOMERS, max_words).exp(), expected, atol=1e-13)
    assert (totals == 0).any() == (max_words < 5)  # 3 words: PP never expanded, keeps its true rule


@pytest.mark.parametrize("max_words", [1, 2, 4, 9])
def test_both_ml_thetas_match_the_closed_form_of_an_all_same_count_grammar(max_words: int) -> None:
    """``S -> S S | a``: every parse of ``a^n`` has n - 1 binary rules, so theta* = (E n - 1) / (2 E n - 1)."""
    p = 0.3
    weights = [math.comb(2 * n - 2, n - 1) / n * p ** (n - 1) * (1 - p) ** n for n in range(1, max_words + 1)]
    mean_n = sum(n * w for n, w in enumerate(weights, 1)) / sum(weights)
    expected = (mean_n - 1) / (2 * mean_n - 1)
    g = _binary_tree_grammar(p)
    assert length_cut_tree_ml(g, max_words).exp()[0].item() == pytest.approx(expected, abs=1e-12)
    assert length_cut_ml(g, max_words).exp()[0].item() == pytest.approx(expected, abs=1e-8)


def test_length_cut_language_weights_are_the_true_sentence_probabilities() -> None:
    lumped, batches = length_cut_sentences(ASTRONOMERS, 5)
    # Lumped words: one token for {astronomers, ears, stars, telescopes} (NP only), 'saw', 'with'.
    assert [tuple(t.shape) for t, _ in batches] == [(4, 3), (16, 5)]
    assert sum(float(w.sum()) for _, w in batches) == pytest.approx(1.0, abs=1e-15)
    # Mass of the 3-word sentences: S -> NP VP, NP -> noun (0.6), VP -> V NP (0.7), NP -> noun (0.6).
    three, five = 0.6 * 0.7 * 0.6, float(batches[1][1].sum())
    assert float(batches[0][1].sum()) == pytest.approx(1 - five, abs=1e-15)
    p5 = 0.4 * 0.6 ** 3 * 0.7 + 0.7 * 0.6 * 0.4 * 0.6 * 0.6 + 0.3 * 0.7 * 0.6 * 0.6 * 0.6  # N with N saw N; 2 parses of N saw N with N
    assert five == pytest.approx(p5 / (three + p5), rel=1e-12)


def test_sentence_ml_is_an_em_fixed_point_and_differs_from_the_tree_ml() -> None:
    theta = length_cut_ml(ASTRONOMERS, 5, tol=1e-11).exp()
    lumped, batches = length_cut_sentences(ASTRONOMERS, 5)
    lumped_theta = torch.stack([theta[g].sum() for g in lumped.groups]).requires_grad_(True)
    objective = sum((w * lumped.log_inside(lumped_theta, tokens)).sum() for tokens, w in batches)
    (grad,) = torch.autograd.grad(objective, lumped_theta)
    assert torch.allclose(lumped.normalise(grad * lumped_theta.detach()), lumped_theta.detach(), atol=1e-9)
    # The objective is higher than at the complete-data theta (the sentence ML maximises it).
    tree = length_cut_tree_ml(ASTRONOMERS, 5).exp()
    at_tree = sum((w * lumped.log_inside(torch.stack([tree[g].sum() for g in lumped.groups]), t)).sum()
                  for t, w in batches)
    assert float(objective.detach()) > float(at_tree) + 1e-6


def test_astronomers_floors_reproduce_the_stated_levels() -> None:
    np_pp = ASTRONOMERS.rules.index(("NP", ("NP", "PP")))
    assert length_cut_tree_ml(ASTRONOMERS, 15).exp()[np_pp].item() == pytest.approx(0.28003, abs=1e-5)
    assert length_cut_ml_floor(ASTRONOMERS, 15) == pytest.approx(0.0070270, abs=1e-7)
    assert length_cut_ml_floor(ASTRONOMERS, 64) == pytest.approx(1.3962e-4, rel=1e-4)
    assert length_cut_ml_floor(ASTRONOMERS, 64, "le2019") == pytest.approx(1.4040e-4, rel=1e-4)
    floors = [length_cut_ml_floor(ASTRONOMERS, n) for n in (5, 9, 15, 25, 64, 200)]
    assert all(a > b for a, b in zip(floors, floors[1:])) and floors[-1] < 1e-6


def test_non_cnf_grammar_and_bad_arguments_raise() -> None:
    g = Grammar({"start": "S", "terminals": ["a"], "rules": {"S": [[["a", "a"], 1.0]]}})
    with pytest.raises(ValueError, match="Chomsky normal form"):
        length_cut_tree_ml(g, 3)
    with pytest.raises(ValueError, match="max_words=0"):
        length_cut_tree_ml(ASTRONOMERS, 0)
    with pytest.raises(ValueError, match="data='words'"):
        length_cut_ml_floor(ASTRONOMERS, 5, data="words")
    with pytest.raises(ValueError, match="max_sentences=10"):
        length_cut_sentences(ASTRONOMERS, 9, max_sentences=10)
