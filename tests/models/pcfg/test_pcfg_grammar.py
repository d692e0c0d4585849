"""Grammar loading and validation."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvolib.models.pcfg import Grammar, GrammarError, load_grammar


def _good_spec():
    return copy.deepcopy(load_grammar("astronomers").to_dict())


def test_packaged_grammar_matches_the_published_one(grammar, data_root):
    published_file = data_root / "pcfgs" / "astronomers.json"
    published = json.loads(published_file.read_text())
    assert grammar.to_dict() == published
    assert load_grammar(published_file).to_dict() == published
    assert (grammar.n_nonterminals, grammar.n_terminals, grammar.n_rules) == (6, 6, 12)
    for rules in grammar.rules_of:  # each non-terminal's rules are contiguous and sum to 1
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
    "empty_spec": (lambda s: s.clear(), "missing ['start', 'terminals', 'rules']"),
    "name": (lambda s: s.__setitem__("name", 3), "'name' must be a string"),
    "terminal_type": (lambda s: s.__setitem__("terminals", ["stars", ""]), "non-empty strings"),
    "rule_shape": (lambda s: s["rules"]["PP"].__setitem__(0, [["P", "NP"]]), "must be [rhs, prob]"),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAMMARS))
def test_bad_grammars_are_rejected_clearly(case):
    mutate, message = BAD_GRAMMARS[case]
    with pytest.raises(GrammarError) as info:
        load_grammar(_bad(mutate))
    assert message in str(info.value), str(info.value)


def test_bad_files_are_rejected(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(GrammarError, match="not valid JSON"):
        load_grammar(broken)
    with pytest.raises(GrammarError, match="not a file and not a packaged grammar"):
        load_grammar("no_such_grammar")
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    with pytest.raises(GrammarError, match="expected a JSON object"):
        load_grammar(listed)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_good_spec()))
    assert load_grammar(good).n_rules == 12


def test_expected_expansions_solve_the_branching_equation(grammar):
    """``c = e_start + M^T c``; for the Astronomers grammar by hand: the S row of M is NP + VP,
    c_VP = 1 + 0.3 c_VP, c_PP = 0.4 c_NP + 0.3 c_VP, c_NP = 1 + 0.7 c_VP + 0.4 c_NP + c_PP."""
    c = grammar.expected_expansions(grammar.true_probs)
    m = grammar.mean_matrix(grammar.true_probs)
    e = np.eye(grammar.n_nonterminals)[grammar.start_id]
    np.testing.assert_allclose(c, e + m.T @ c, rtol=1e-12)
    c_vp = 1 / 0.7
    c_np = (1 + 0.7 * c_vp + 0.3 * c_vp) / (1 - 0.8)
    idx = grammar.nt_index
    assert c[idx["VP"]] == pytest.approx(c_vp) and c[idx["NP"]] == pytest.approx(c_np)
    assert c[idx["PP"]] == pytest.approx(0.4 * c_np + 0.3 * c_vp)
    assert grammar.spectral_radius(grammar.true_probs) < 1
    supercritical = list(grammar.true_probs)
    supercritical[1] = 0.55  # NP -> NP PP: 0.55 NP children directly + 0.55 through PP -> P NP
    assert np.isinf(grammar.expected_expansions(supercritical)).all()


@given(st.lists(st.floats(0.05, 1.0), min_size=12, max_size=12))
def test_any_valid_probabilities_round_trip_through_the_file_format(weights):
    spec = _good_spec()
    grammar = load_grammar("astronomers")
    for a, rules in enumerate(grammar.rules_of):
        total = sum(weights[r] for r in rules)
        lhs = grammar.nonterminals[a]
        for k, r in enumerate(rules):
            spec["rules"][lhs][k][1] = weights[r] / total
    try:
        loaded = Grammar(spec)
    except GrammarError as err:  # only super-criticality may reject normalised weights
        assert "super-critical" in str(err)
        return
    assert Grammar(loaded.to_dict()).to_dict() == loaded.to_dict() == spec


def test_tokenize_and_words(grammar):
    tokens = grammar.tokenize("astronomers saw stars")
    assert grammar.words(tokens + (grammar.unk,)) == ["astronomers", "saw", "stars", "<unk>"]
    assert grammar.tokenize(["ears"]) == (grammar.term_index["ears"],)
    with pytest.raises(ValueError, match=r"unknown \['planets'\]"):
        grammar.tokenize("planets saw stars")
    with pytest.raises(ValueError, match="non-empty"):
        grammar.tokenize("")
