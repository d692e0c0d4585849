"""Exact PCFG metrics: rule KLs against the analytic value, posterior KLs at the true model."""
from __future__ import annotations

import math

import pytest
import torch

from tvolib.models.pcfg import Derivations, PCFGInferenceNetwork, PCFGModel, enumerate_parses, load_grammar
from tvolib.training.pcfg_levels import rule_kl
from tvolib.training.pcfg_metrics import build_test_set, exact_metrics


@pytest.fixture(scope="module")
def grammar():
    return load_grammar("astronomers")


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


def test_kl_direction_switches_the_rule_kls_and_the_tree_weights(grammar):
    """``le2019`` is KL(p_true || p_theta): the rule KLs swap arguments, the tree KL weighs by p_true."""
    from tvolib.training.pcfg_levels import uniform_level

    test = build_test_set(grammar, [grammar.tokenize("stars saw ears")])
    torch.manual_seed(0)
    q = PCFGInferenceNetwork(grammar, hidden_dim=8)
    model = PCFGModel(grammar, init="uniform")
    paper = exact_metrics(grammar, model, q, test)
    le2019 = exact_metrics(grammar, model, q, test, "le2019")
    assert paper["kl_p"] == pytest.approx(uniform_level(grammar, "paper"), rel=1e-6)  # theta in float32
    assert le2019["kl_p"] == pytest.approx(uniform_level(grammar, "le2019"), rel=1e-6)
    log_theta = model.log_probs().double()
    per_nt = rule_kl(grammar, log_theta, grammar.true_log_probs(), "le2019")
    expansions = torch.as_tensor(grammar.expected_expansions(grammar.true_log_probs().exp()), dtype=torch.float64)
    assert le2019["kl_p_tree"] == pytest.approx(float((expansions * per_nt).sum()), rel=1e-12)
    assert le2019["kl_q_true"] == paper["kl_q_true"]  # the posterior KLs do not depend on the direction


def test_new_pcfg_options_keep_old_digests_and_are_checked():
    from tvolib.training import PCFGConfig

    base = PCFGConfig()
    assert base.digest() == PCFGConfig(kl_direction="paper", derivation_cap="productions").digest()
    assert base.replace(kl_direction="le2019").digest() != base.digest()
    assert base.replace(derivation_cap="depth").cap.kind == "depth"
    with pytest.raises(ValueError, match="kl_direction"):
        base.replace(kl_direction="forward").validate()
    with pytest.raises(ValueError, match="derivation_cap"):
        base.replace(derivation_cap="width").validate()
