"""The generative model p_theta(z) and the inference network q_phi(z | x)."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from scipy import stats

from tvolib.models.pcfg import DerivationCap, Derivations, PCFGInferenceNetwork, PCFGModel, encode_sentences


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


def test_q_is_a_normalised_distribution_whose_sampler_matches_it(grammar, capped_derivations):
    """With a budget of 4 rules the derivation space is small: q sums to 1 over it, and q's sampler
    draws each derivation with frequency exp(log q) (chi-square at a fixed seed)."""
    torch.manual_seed(1)
    q = PCFGInferenceNetwork(grammar, hidden_dim=16)
    all_d = capped_derivations(grammar, 4)
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


def test_q_under_a_depth_cap_scores_its_truncated_samples(grammar):
    """Depth cap 3 truncates most trees; teacher forcing still gives the sampler's log q."""
    torch.manual_seed(2)
    q = PCFGInferenceNetwork(grammar, hidden_dim=16)
    tokens, lengths = encode_sentences([grammar.tokenize("stars saw ears with telescopes")], grammar)
    derivs, log_q_sampler = q.sample(tokens, lengths, 64, torch.Generator().manual_seed(1),
                                     derivation_cap=DerivationCap("depth", 3))
    assert 0 < derivs.complete.sum() < 64
    log_q = q.log_prob(derivs, tokens, lengths, torch.zeros(64, dtype=torch.long))
    torch.testing.assert_close(log_q.double(), log_q_sampler, atol=1e-4, rtol=0)


def test_model_initialisations_and_prior(grammar):
    true = PCFGModel(grammar, init="true")
    torch.testing.assert_close(true.log_probs().detach().double(), grammar.true_log_probs(), atol=1e-7, rtol=0)
    uniform = PCFGModel(grammar, init="uniform").log_probs().detach()
    expected = torch.tensor([-math.log(len(grammar.rules_of[a])) for a in grammar.rule_lhs])
    torch.testing.assert_close(uniform, expected)
    a = PCFGModel(grammar, generator=torch.Generator().manual_seed(5)).logits
    b = PCFGModel(grammar, generator=torch.Generator().manual_seed(5)).logits
    assert torch.equal(a, b)  # exact: the same seed draws the same initial logits
    table = true.log_prob_table().detach()
    assert torch.isinf(table[~grammar.rule_mask]).all()
    torch.testing.assert_close(table.exp().sum(1), torch.ones(grammar.n_nonterminals))
    d = true.sample(10, torch.Generator().manual_seed(0), derivation_cap=("depth", 50))
    torch.testing.assert_close(true.log_prior(d).double(), d.counts.double() @ grammar.true_log_probs(),
                               atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="init must be"):
        PCFGModel(grammar, init="zeros")
    with pytest.raises(ValueError, match="hidden_dim must be >= 2"):
        PCFGInferenceNetwork(grammar, hidden_dim=1)
