"""The PCFG trainer: the TVO theta surrogate, the config, baselines and a short run that learns."""
from __future__ import annotations

import json
import math

import pytest
import torch

from tvolib.training.pcfg import PCFGConfig, train_pcfg, tvo_theta_surrogate
from tvolib.tvo import tvo_bound


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The PCFG's small sequential ops run fastest (and most reproducibly) on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_tvo_theta_surrogate_value_and_gradient():
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




def test_an_unknown_grammar_is_rejected_by_validate(tmp_path):
    with pytest.raises(ValueError, match=r"PCFGConfig\.grammar='no_such_grammar'.*not a packaged grammar"):
        PCFGConfig(grammar="no_such_grammar").validate()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"PCFGConfig\.grammar=.*broken\.json.*not valid JSON"):
        PCFGConfig(grammar=str(broken)).validate()
