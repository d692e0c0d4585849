"""Evaluation: streaming over chunks is exact, closed-form agreement, KL >= 0, IWAE grows with S."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tvolib.training.evaluate import evaluate, log_weight_metrics
from tvolib.models import LinearGaussian, build_model
from tvolib.tvo import EvidenceSpec, iwae_bound, log_evidence


class TableModel(nn.Module):
    """Hands out the log weights of a fixed table in order, point by point, whatever the chunking.

    ``x[:, 0]`` holds each point's row index; each call returns the next ``S`` entries of its row.
    """

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(()))
        self.table = table
        self.used = [0] * table.shape[0]

    def log_joint_and_q(self, x, S, reparam):
        rows = x[:, 0].long().tolist()
        out = torch.stack([self.table[i, self.used[i] : self.used[i] + S] for i in rows], dim=1)
        for i in rows:
            self.used[i] += S
        assert out.shape == (S, len(rows))
        return out, torch.zeros_like(out)


@pytest.mark.parametrize("batch_size,sample_chunk", [(7, 13), (1, 1), (3, 50), (100, None)])
def test_streaming_over_chunks_is_exact(batch_size, sample_chunk):
    torch.manual_seed(0)
    table = torch.randn(10, 50, dtype=torch.float64) * 5 - 100
    x = torch.arange(10, dtype=torch.float64)[:, None]
    out = evaluate(TableModel(table), x, S=50, batch_size=batch_size, sample_chunk=sample_chunk)
    log_px = (torch.logsumexp(table, 1) - math.log(50)).mean().item()
    assert out["log_px"] == pytest.approx(log_px, abs=1e-10)
    assert out["elbo"] == pytest.approx(table.mean().item(), abs=1e-10)
    assert out["kl"] == pytest.approx(log_px - table.mean().item(), abs=1e-10)
    assert out["S"] == 50 and out["n_points"] == 10
    points = evaluate(TableModel(table), x, S=50, batch_size=batch_size, sample_chunk=sample_chunk, per_point=True)
    torch.testing.assert_close(points["log_px_points"], torch.logsumexp(table, 1) - math.log(50))
    torch.testing.assert_close(points["elbo_points"], table.mean(1))


def test_agrees_with_closed_forms_on_the_toy_model():
    toy = LinearGaussian(a=1.5, b=0.5, s=0.8, m=0.2, v=0.5, c=0.3)
    torch.manual_seed(0)
    _, x = toy.sample_joint(400)
    out = evaluate(toy, x.detach(), S=1000, batch_size=64, sample_chunk=300, seed=1)
    with torch.no_grad():
        log_px, elbo = toy.log_px(x).mean().item(), toy.elbo(x).mean().item()
    assert out["log_px"] == pytest.approx(log_px, abs=0.01)
    assert out["elbo"] == pytest.approx(elbo, abs=0.02)
    assert out["kl"] == pytest.approx(log_px - elbo, abs=0.02) and out["kl"] > 0


def test_iwae_bound_increases_with_S():
    toy = LinearGaussian(a=1.5, b=0.5, s=0.8, m=0.2, v=0.5, c=0.3)
    torch.manual_seed(0)
    _, x = toy.sample_joint(2000)
    values = [evaluate(toy, x.detach(), S=S, batch_size=500, seed=S)["log_px"] for S in (1, 3, 10, 100)]
    assert all(lo < hi for lo, hi in zip(values, values[1:]))
    assert values[-1] < toy.log_px(x).mean().item()
    assert evaluate(toy, x[:20].detach(), S=1)["kl"] == pytest.approx(0.0, abs=1e-12)


def test_real_model_kl_nonnegative_seed_reproducible_and_rng_untouched():
    torch.manual_seed(0)
    model = build_model("sbn", latent_dims=(6, 4), train_mean=torch.full((784,), 0.3))
    x = torch.bernoulli(torch.full((6, 784), 0.3))
    torch.manual_seed(5)
    first = evaluate(model, x, S=64, batch_size=4, sample_chunk=10, seed=3)
    after = torch.rand(3)
    torch.manual_seed(5)
    second = evaluate(model, x, S=64, batch_size=4, sample_chunk=10, seed=3)
    torch.testing.assert_close(torch.rand(3), after)  # the caller's RNG stream is not consumed
    assert first == second
    assert math.isfinite(first["log_px"]) and first["kl"] >= 0
    vae = build_model("vae", hidden=(8,), latent_dim=2)
    assert evaluate(vae, x, S=32, sample_chunk=5)["kl"] >= 0


def test_bad_arguments():
    vae = build_model("vae", hidden=(8,), latent_dim=2)
    x = torch.zeros(2, 784)
    with pytest.raises(ValueError, match="S must be"):
        evaluate(vae, x, S=0)
    with pytest.raises(ValueError, match="non-empty"):
        evaluate(vae, torch.zeros(0, 784))
    with pytest.raises(ValueError, match="batch_size and sample_chunk"):
        evaluate(vae, x, batch_size=0)


def test_log_weight_metrics_are_batch_sums():
    log_w = torch.randn(5, 3) - 10
    spec = EvidenceSpec.paper(10)
    metrics = log_weight_metrics(log_w, spec)
    torch.testing.assert_close(metrics["elbo"], log_w.mean(0).sum())
    torch.testing.assert_close(metrics["iwae"], iwae_bound(log_w).sum())
    torch.testing.assert_close(metrics["evidence"], log_evidence(log_w, spec).sum())
    assert set(log_weight_metrics(log_w)) == {"elbo", "iwae"}
