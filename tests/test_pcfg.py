"""Tests of the PCFG experiment (paper Appendix D.1): grammar, samplers, exact parsing, metrics, training."""
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
from tvolib.pcfg import (
    PCFGConfig,
    build_test_set,
    exact_metrics,
    load_model,
    method_label,
    pcfg_sweep,
    summarise_pcfg,
    rule_kl,
    train_pcfg,
    tvo_theta_surrogate,
)

SHARED_GRAMMAR = "/work/shared/data/pcfgs/astronomers.json"


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


def test_packaged_grammar_matches_the_published_one(grammar):
    with open(SHARED_GRAMMAR) as f:
        published = json.load(f)
    assert grammar.to_dict() == published
    assert load_grammar(SHARED_GRAMMAR).to_dict() == published
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


# --------------------------------------------------------------------------------------------
# Metrics and losses
# --------------------------------------------------------------------------------------------


def test_rule_kl_analytic(grammar):
    uniform = PCFGModel(grammar, init="uniform").log_probs().detach()
    kl = rule_kl(grammar, uniform, grammar.true_log_probs())
    np_rules = [grammar.true_probs[r] for r in grammar.rules_of[grammar.nt_index["NP"]]]
    expected_np = sum(math.log((1 / 6) / p) / 6 for p in np_rules)
    assert kl[grammar.nt_index["NP"]].item() == pytest.approx(expected_np)
    assert kl[grammar.nt_index["S"]].item() == 0.0


def test_exact_metrics_at_the_true_model(grammar):
    sentences = [grammar.tokenize(s) for s in ("astronomers saw stars with ears", "stars saw ears",
                                               "ears saw stars with telescopes with ears")]
    test = build_test_set(grammar, sentences)
    torch.manual_seed(0)
    q = PCFGInferenceNetwork(grammar, hidden_dim=16)
    m = exact_metrics(grammar, PCFGModel(grammar, init="true"), q, test)
    assert m["kl_p"] == pytest.approx(0.0, abs=1e-7) and m["kl_p_tree"] == pytest.approx(0.0, abs=1e-6)
    assert m["kl_q_true"] == pytest.approx(m["kl_q_theta"], abs=1e-6)
    assert m["test_log_px"] == pytest.approx(m["test_log_px_true"], abs=1e-5)
    # kl_q against a direct computation on the first sentence
    built = Derivations.build(grammar, enumerate_parses(grammar, sentences[0]))
    with torch.no_grad():
        log_q = q.log_prob(built, test.tokens[:1], test.lengths[:1], torch.zeros(len(built), dtype=torch.long)).double()
    log_p = built.counts.double() @ grammar.true_log_probs()
    qb, pb = (log_q - torch.logsumexp(log_q, 0)).exp(), (log_p - torch.logsumexp(log_p, 0)).exp()
    direct = (qb * (qb / pb).log()).sum().item()
    m1 = exact_metrics(grammar, PCFGModel(grammar, init="true"), q, build_test_set(grammar, sentences[:1]))
    assert m1["kl_q_true"] == pytest.approx(direct, rel=1e-5)
    assert m1["q_parse_mass"] == pytest.approx(log_q.exp().sum().item(), rel=1e-5)
    assert m1["kl_true_q"] == pytest.approx((pb * (pb.log() - log_q)).sum().item(), rel=1e-5)
    assert m1["kl_true_q"] >= -math.log(m1["q_parse_mass"]) - 1e-6  # log-sum inequality


def test_tvo_theta_surrogate_value_and_gradient():
    from tvolib.tvo import tvo_bound

    torch.manual_seed(0)
    theta = torch.randn(6, 3, requires_grad=True)
    log_w = 3 * theta.tanh() - 2.0
    betas = torch.tensor([0.0, 0.1, 0.4], dtype=torch.float64)
    value = tvo_theta_surrogate(log_w, betas)
    torch.testing.assert_close(value.detach(), tvo_bound(log_w.detach(), betas))
    (g,) = torch.autograd.grad(value.sum(), theta, retain_graph=True)
    # derivative of the SNIS TVO estimate = mean term + covariance term; the surrogate scales the
    # covariance term by S / (S - 1)
    (g_full,) = torch.autograd.grad(tvo_bound(log_w, betas).sum(), theta, retain_graph=True)
    nodes = torch.cat([betas, torch.ones(1, dtype=torch.float64)]).float()
    weights = torch.softmax(nodes[:-1, None, None] * log_w.detach()[None], dim=1)
    mean_only = ((nodes[1:] - nodes[:-1])[:, None] * (weights * log_w[None]).sum(1)).sum(0)
    (g_mean,) = torch.autograd.grad(mean_only.sum(), theta)
    torch.testing.assert_close(g, g_mean + 6 / 5 * (g_full - g_mean), atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------------------------
# Configuration, sweep, training
# --------------------------------------------------------------------------------------------


def test_config_roundtrip_and_validation():
    c = PCFGConfig(objective="tvo", schedule="gp_bandit", S=5)
    assert PCFGConfig.from_dict(json.loads(json.dumps({"kind": "pcfg", **c.to_dict()}))) == c
    assert c.digest() == PCFGConfig(objective="tvo", schedule="gp_bandit", S=5).digest() != PCFGConfig().digest()
    assert hash(c) == hash(PCFGConfig(objective="tvo", schedule="gp_bandit", S=5))
    ws = PCFGConfig(objective="wake-sleep", schedule="gp_bandit", d=10)
    assert (ws.schedule, ws.d) == ("none", 1) and ws.digest() == PCFGConfig(objective="wake-sleep").digest()
    for bad, field in [({"objective": "vimco"}, "objective"), ({"S": 1}, "S"), ({"schedule": "linear"}, "schedule"),
                       ({"lr": 0.0}, "lr"), ({"train_max_words": 70}, "train_max_words"), ({"epochs": -1}, "epochs")]:
        with pytest.raises(ValueError, match=f"PCFGConfig.{field}"):
            PCFGConfig(**bad).validate()
    with pytest.raises(ValueError, match="unknown PCFGConfig fields"):
        PCFGConfig.from_dict({"objectiv": "tvo"})


def test_sweeps():
    smoke, quick, paper = pcfg_sweep("smoke"), pcfg_sweep("quick"), pcfg_sweep("paper")
    assert len(smoke) == 5 and len(quick) == 60 and len(paper) == 400
    assert {(c.objective, c.schedule) for c in paper} == {("tvo", "log"), ("tvo", "gp_bandit"), ("reinforce", "none"),
                                                          ("wake-wake", "none"), ("wake-sleep", "none")}
    assert {c.S for c in paper} == {2, 5, 10, 20} and {c.epochs for c in paper} == {2000}
    assert len({c.digest() for c in paper}) == 400 and {c.batch_size for c in paper} == {2}
    with pytest.raises(ValueError, match="unknown profile"):
        pcfg_sweep("huge")


SMALL = dict(n_train=20, n_test=4, hidden_dim=16, train_max_words=9, eval_max_words=7, max_productions=31)


@pytest.mark.slow
def test_short_tvo_run_lowers_kl_to_the_true_grammar():
    # Long enough training sentences (<= 21 words) that the data's rule frequencies are close to the
    # true ones; a larger learning rate than Adam's default so that 50 steps move theta visibly.
    config = PCFGConfig(objective="tvo", S=5, epochs=5, lr=0.03, seed=0, data_seed=0,
                        **{**SMALL, "train_max_words": 21, "max_productions": 63})
    result = train_pcfg(config, device="cpu", progress=False)
    kl = [row["kl_p"] for row in result.history]
    assert len(result.history) == 6 and result.final["completed"]
    assert kl[-1] < 0.6 * kl[0], kl
    for key in ("kl_q_true", "kl_q_theta", "q_parse_mass", "train_elbo", "train_evidence", "q_truncated"):
        assert math.isfinite(result.history[-1][key]), key


@pytest.mark.parametrize("objective", ["reinforce", "wake-wake", "wake-sleep"])
def test_baselines_run(objective):
    config = PCFGConfig(objective=objective, S=3, epochs=1, **{**SMALL, "n_train": 4})
    result = train_pcfg(config, device="cpu", progress=False)
    assert result.final["completed"] and math.isfinite(result.final["kl_q_true"])
    assert result.history[1]["betas"] == [0.0]


@pytest.mark.parametrize("schedule", ["log", "gp_bandit"])
def test_resume_from_checkpoint_equals_uninterrupted(tmp_path, schedule):
    # gp_bandit: 9 epochs cover a bandit round before (epoch 6) and after the interruption
    epochs, stop = (4, 2) if schedule == "log" else (13, 7)
    config = PCFGConfig(objective="tvo", schedule=schedule, S=3, epochs=epochs, **{**SMALL, "n_train": 4})
    full = train_pcfg(config, tmp_path / "a", device="cpu", progress=False, checkpoint_every=1)
    part = train_pcfg(config, tmp_path / "b", device="cpu", progress=False, checkpoint_every=3, stop_after=stop)
    assert not part.final["completed"] and len(part.history) == stop + 1
    resumed = train_pcfg(config, tmp_path / "b", device="cpu", progress=False, checkpoint_every=3)
    assert resumed.schedule_history == full.schedule_history
    if schedule == "gp_bandit":
        assert len(full.schedule_history) >= 2 and len({tuple(r["betas"]) for r in full.history[1:]}) >= 2

    def strip(history):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in history]

    assert strip(resumed.history) == strip(full.history)
    a = torch.load(tmp_path / "a" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "model.pt", weights_only=True)
    for part_name in ("model", "inference_network"):
        for key in a[part_name]:
            assert torch.equal(a[part_name][key], b[part_name][key]), key
    with pytest.raises(ValueError, match="belongs to config"):
        train_pcfg(config.replace(seed=5), tmp_path / "b", device="cpu", progress=False)
    models = load_model(config, tmp_path / "a")
    assert torch.equal(models.model.logits.detach(), a["model"]["logits"])


def test_summarise_and_labels():
    import pandas as pd

    rows = [{"objective": "tvo", "schedule": "log", "S": 2, "seed": s, "kl_p_tail": v, "kl_q_true_tail": 2 * v,
             "kl_q_theta_tail": v, "q_parse_mass_tail": 0.5} for s, v in enumerate([1.0, 2.0, 10.0])]
    rows.append({"objective": "wake-sleep", "schedule": "none", "S": 2, "seed": 0, "kl_p_tail": 4.0,
                 "kl_q_true_tail": 1.0, "kl_q_theta_tail": 1.0, "q_parse_mass_tail": 0.1})
    out = summarise_pcfg(pd.DataFrame(rows)).set_index("method")
    assert out.loc["tvo-log", "kl_p_tail"] == 2.0 and out.loc["tvo-log", "n_seeds"] == 3
    assert out.loc["wake-sleep", "kl_q_true_tail"] == 1.0
    assert method_label(PCFGConfig(schedule="gp_bandit")) == "tvo-gp_bandit"
    assert method_label({"objective": "reinforce", "schedule": "none"}) == "reinforce"
