"""Tests of the PCFG model (paper Appendix D.1): grammar, samplers, soft likelihood, exact parsing."""
from __future__ import annotations

import copy
import json
import math
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tvolib.models.pcfg import (
    Derivations,
    GrammarError,
    PCFGInferenceNetwork,
    PCFGModel,
    _sample_lockstep,
    count_parses,
    encode_sentences,
    enumerate_parses,
    inside_log_marginal,
    levenshtein,
    load_grammar,
    replay_derivation,
    sample_from_table,
)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The PCFG's small sequential ops run fastest (and most reproducibly) on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def grammar():
    return load_grammar("astronomers")


def _true_table(grammar):
    return PCFGModel(grammar, init="true").log_prob_table().detach()


def _good_spec():
    return copy.deepcopy(load_grammar("astronomers").to_dict())


# --------------------------------------------------------------------------------------------
# Grammar loading and validation
# --------------------------------------------------------------------------------------------


def test_packaged_grammar_matches_the_published_one(grammar, data_root):
    published_path = data_root / "pcfgs" / "astronomers.json"
    with open(published_path) as f:
        published = json.load(f)
    assert grammar.to_dict() == published
    assert load_grammar(published_path).to_dict() == published
    assert (grammar.n_nonterminals, grammar.n_terminals, grammar.n_rules) == (6, 6, 12)
    # each non-terminal's rules are contiguous and sum to 1
    for a, rules in enumerate(grammar.rules_of):
        assert list(rules) == list(range(rules[0], rules[-1] + 1))
        assert math.isclose(sum(grammar.true_probs[r] for r in rules), 1.0)


def _bad(mutate):
    spec = _good_spec()
    mutate(spec)
    return spec


BAD_GRAMMARS = {
    "sum": (lambda s: s["rules"]["NP"].__setitem__(0, [["NP", "PP"], 0.5]), "sum to"),
    "undefined": (lambda s: s["rules"]["VP"].__setitem__(0, [["V", "ADJ"], 0.7]), "undefined symbols ['ADJ']"),
    "unreachable": (lambda s: s["rules"].__setitem__("ADJ", [[["stars"], 1.0]]), "unreachable"),
    "unused_terminal": (lambda s: s["terminals"].append("moons"), "appear in no rule"),
    "empty_rhs": (lambda s: s["rules"]["NP"].__setitem__(1, [[], 0.1]), "non-empty list"),
    "duplicate": (lambda s: s["rules"]["VP"].__setitem__(1, [["V", "NP"], 0.3]), "listed twice"),
    "bad_prob": (lambda s: s["rules"]["VP"].__setitem__(1, [["VP", "PP"], -0.3]), "(0, 1]"),
    "start": (lambda s: s.__setitem__("start", "ROOT"), "start symbol"),
    "unknown_key": (lambda s: s.__setitem__("productions", {}), "unknown ['productions']"),
    "clash": (lambda s: s["terminals"].append("NP"), "both terminals and non-terminals"),
    "supercritical": (lambda s: s["rules"].__setitem__(
        "NP", [[["NP", "PP"], 0.9], [["astronomers"], 0.02], [["ears"], 0.02], [["saw"], 0.02],
               [["stars"], 0.02], [["telescopes"], 0.02]]), "super-critical"),
    "unary_cycle": (lambda s: s["rules"].update(
        {"PP": [[["P", "NP"], 0.5], [["PP2"], 0.5]], "PP2": [[["PP"], 1.0]]}), "unary"),
    "barren": (lambda s: s["rules"].update(
        {"PP": [[["P", "NP"], 0.5], [["LOOP"], 0.5]], "LOOP": [[["LOOP", "P"], 1.0]]}), "no finite sentence"),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAMMARS))
def test_bad_grammars_are_rejected_clearly(case):
    mutate, message = BAD_GRAMMARS[case]
    with pytest.raises(GrammarError, match=None) as info:
        load_grammar(_bad(mutate))
    assert message in str(info.value), str(info.value)


def test_bad_files_are_rejected(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(GrammarError, match="not valid JSON"):
        load_grammar(broken)
    with pytest.raises(GrammarError, match="not a file and not a packaged grammar"):
        load_grammar("no_such_grammar")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_good_spec()))
    assert load_grammar(good).n_rules == 12


# --------------------------------------------------------------------------------------------
# Derivations and samplers
# --------------------------------------------------------------------------------------------


def test_replay_and_budget(grammar):
    # S -> NP VP, NP -> stars, VP -> V NP, V -> saw, NP -> ears
    r = {grammar.rule_str(i): i for i in range(grammar.n_rules)}
    rules = [r["S -> NP VP"], r["NP -> stars"], r["VP -> V NP"], r["V -> saw"], r["NP -> ears"]]
    words, pointers, complete = replay_derivation(grammar, rules)
    assert grammar.words(words) == ["stars", "saw", "ears"] and complete
    assert pointers == (0, 0, 1, 1, 2)
    words, _, complete = replay_derivation(grammar, rules[:3])  # truncated: V NP pending
    assert not complete and grammar.words(words) == ["stars", "<unk>", "<unk>"]
    with pytest.raises(ValueError, match="left-most pending"):
        replay_derivation(grammar, [r["S -> NP VP"], r["VP -> V NP"]])


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


def test_prior_tree_frequencies_match_true_probabilities(grammar):
    gen = torch.Generator().manual_seed(1234)
    trees = sample_from_table(grammar, _true_table(grammar), 4000, gen, max_productions=63).rules
    assert _chi_square_p(grammar, trees) > 1e-3


def test_lockstep_sampler_frequencies_match_true_probabilities(grammar):
    table = _true_table(grammar)
    gen = torch.Generator().manual_seed(99)
    trees, log_p = _sample_lockstep(grammar, 2000, lambda nt, prev, ptr: table[nt], gen, 25, torch.device("cpu"))
    assert _chi_square_p(grammar, trees) > 1e-3
    exact = Derivations.build(grammar, trees).counts.double() @ grammar.true_log_probs()
    torch.testing.assert_close(log_p, exact.float().double(), atol=1e-5, rtol=0)


def test_log_q_of_sampled_trees_is_the_sum_of_chosen_rule_log_probs(grammar):
    torch.manual_seed(0)
    q = PCFGInferenceNetwork(grammar, hidden_dim=24)
    model = PCFGModel(grammar, init="normal", generator=torch.Generator().manual_seed(3))
    tokens, lengths = encode_sentences([grammar.tokenize("astronomers saw stars with ears"),
                                        grammar.tokenize("stars saw telescopes")], grammar)
    derivs, log_q_sampler = q.sample(tokens, lengths, 16, torch.Generator().manual_seed(5), 31)
    rows = torch.arange(2).repeat_interleave(16)
    log_q = q.log_prob(derivs, tokens, lengths, rows)
    torch.testing.assert_close(log_q.double(), log_q_sampler, atol=1e-4, rtol=0)
    # and p_theta(z) is the product of its rules' probabilities
    lp = model.log_probs().detach()
    manual = torch.tensor([sum(lp[r].item() for r in rules) for rules in derivs.rules])
    torch.testing.assert_close(model.log_prior(derivs).detach(), manual, atol=1e-5, rtol=0)


def _budgeted_derivations(grammar, budget):
    """Every derivation that is complete within ``budget`` rules or has exactly ``budget`` rules."""
    out, frontier = [], [((), [grammar.start_id])]
    while frontier:
        rules, stack = frontier.pop()
        for r in grammar.rules_of[stack[-1]]:
            new = stack[:-1] + list(reversed(grammar.rule_rhs[r]))
            while new and new[-1] >= grammar.n_nonterminals:
                new.pop()
            if not new or len(rules) + 1 == budget:
                out.append(rules + (r,))
            else:
                frontier.append((rules + (r,), new))
    return out


def test_q_is_a_normalised_distribution_whose_sampler_matches_it(grammar):
    """With a budget of 4 rules the derivation space is small: q sums to 1 over it, and q's sampler
    draws each derivation with frequency exp(log q) (chi-square at a fixed seed)."""
    torch.manual_seed(1)
    q = PCFGInferenceNetwork(grammar, hidden_dim=16)
    all_d = _budgeted_derivations(grammar, 4)
    tokens, lengths = encode_sentences([grammar.tokenize("ears saw stars")], grammar)
    built = Derivations.build(grammar, all_d)
    with torch.no_grad():
        log_q = q.log_prob(built, tokens, lengths, torch.zeros(len(all_d), dtype=torch.long)).double()
    assert math.isclose(log_q.exp().sum().item(), 1.0, rel_tol=1e-5)
    n = 4000
    derivs, _ = q.sample(tokens, lengths, n, torch.Generator().manual_seed(7), 4)
    counts = Counter(derivs.rules)
    assert set(counts) <= set(all_d)
    exp = (n * log_q.exp()).tolist()
    big = [i for i, e in enumerate(exp) if e >= 10]
    obs = [counts[all_d[i]] for i in big] + [n - sum(counts[all_d[i]] for i in big)]
    expected = [exp[i] for i in big] + [n - sum(exp[i] for i in big)]
    assert stats.chisquare(obs, expected).pvalue > 1e-3


def test_prior_is_normalised_over_budgeted_derivations(grammar):
    built = Derivations.build(grammar, _budgeted_derivations(grammar, 5))
    total = (built.counts.double() @ grammar.true_log_probs()).exp().sum().item()
    assert math.isclose(total, 1.0, rel_tol=1e-9)


# --------------------------------------------------------------------------------------------
# Soft likelihood
# --------------------------------------------------------------------------------------------


def _lev_reference(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=9),
                          st.lists(st.integers(0, 3), min_size=1, max_size=9)), min_size=1, max_size=5))
def test_levenshtein_matches_reference(pairs):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    pad = lambda rows: torch.tensor([r + [7] * (9 - len(r)) for r in rows])  # noqa: E731
    got = levenshtein(pad(a), torch.tensor([len(r) for r in a]), pad(b), torch.tensor([len(r) for r in b]))
    assert got.tolist() == [float(_lev_reference(x, y)) for x, y in zip(a, b)]


# --------------------------------------------------------------------------------------------
# Exact parsing
# --------------------------------------------------------------------------------------------


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
        posterior = (log_p - torch.logsumexp(log_p, 0)).exp()
        assert math.isclose(posterior.sum().item(), 1.0, rel_tol=1e-12)
    assert enumerate_parses(grammar, grammar.tokenize("stars ears with stars")) == []


def test_classic_astronomers_example(grammar):
    """Manning & Schuetze's example: two parses, probabilities 0.0009072 and 0.0006804."""
    words = grammar.tokenize("astronomers saw stars with ears")
    parses = enumerate_parses(grammar, words)
    probs = sorted((Derivations.build(grammar, parses).counts.double() @ grammar.true_log_probs()).exp().tolist())
    assert probs == pytest.approx([0.0006804, 0.0009072], rel=1e-9)
    assert inside_log_marginal(grammar, grammar.true_log_probs(), words) == pytest.approx(math.log(0.0015876))
    with pytest.raises(ValueError, match="max_parses"):
        enumerate_parses(grammar, grammar.tokenize("stars saw stars with ears with ears with ears"), max_parses=3)
