"""Gradient estimators (tvolib.objectives) against closed forms of the linear-Gaussian model."""
from __future__ import annotations

import math

import pytest
import torch
from tvolib.models import build_model
from tvolib.objectives import OBJECTIVES, compute_loss
from tvolib.tvo import linear, log_uniform, riemann_weights

BETAS = torch.tensor([0.0, 0.1, 0.4, 0.7], dtype=torch.float64)


def _log_w(model, x, S, seed=0):
    torch.manual_seed(seed)
    return model.log_weights(x, S).detach()


# ---- SNIS integrand and bounds ---------------------------------------------------------------
























# ---- gradients ---------------------------------------------------------------------------------


def _grads(scalar, params):
    return torch.stack(torch.autograd.grad(scalar, params))


@pytest.mark.parametrize("objective", ["tvo", "tvo_reparam"])
def test_tvo_gradient_matches_exact_tvo_gradient(toy, x, objective):
    params = list(toy.parameters())  # a, b, log s, c, m, log v
    exact = _grads(toy.exact_tvo(x, BETAS).mean(), params)
    torch.manual_seed(1)
    estimate = _grads(-compute_loss(objective, toy, x, 100_000, BETAS).loss, params)
    torch.testing.assert_close(estimate, exact, atol=0.02, rtol=0)


def test_tvo_gradient_without_covariance_term_is_wrong(toy, x):
    """Negative control: E_pi[grad log w] alone (detached SNIS weights) misses the covariance term."""
    params = list(toy.parameters())
    exact = _grads(toy.exact_tvo(x, BETAS).mean(), params)
    torch.manual_seed(1)
    log_w = toy.log_weights(x, 100_000)
    nodes, w = riemann_weights(BETAS)
    weights = torch.softmax(nodes[:-1, None, None] * log_w.detach()[None], dim=1)
    naive = (w[:-1, None] * (weights * log_w[None]).sum(1)).sum(0).mean()
    assert (_grads(naive, params) - exact).abs().max() > 0.1


def test_tvo_with_beta0_is_the_elbo_gradient(toy, x):
    params = list(toy.parameters())
    exact = _grads(toy.elbo(x).mean(), params)
    for objective in ("tvo", "elbo"):
        torch.manual_seed(2)
        estimate = _grads(-compute_loss(objective, toy, x, 100_000, [0.0]).loss, params)
        torch.testing.assert_close(estimate, exact, atol=0.02, rtol=0)


def test_discrete_elbo_equals_tvo_at_beta0():
    """Score-function ELBO with leave-one-out baselines == covariance estimator at betas=[0] (S/(S-1))."""
    torch.manual_seed(0)
    model = build_model("sbn", train_mean=torch.rand(784) * 0.5 + 0.25)
    x = torch.bernoulli(torch.rand(3, 784))
    grads = {}
    for objective in ("elbo", "tvo"):
        torch.manual_seed(3)
        grads[objective] = _grads_flat(compute_loss(objective, model, x, 7, [0.0]).loss, model)
    torch.testing.assert_close(grads["elbo"], grads["tvo"], atol=1e-4, rtol=1e-4)


def _grads_flat(loss, model):
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(model.parameters()))])


def test_wake_wake_gradients_match_closed_forms(toy, x):
    """theta: grad log p(x) (Fisher identity); phi: grad of E_post[-log q] (wake-phi), at large S."""
    theta, phi = list(toy.generative_parameters()), list(toy.inference_parameters())
    torch.manual_seed(4)
    out = compute_loss("wake-wake", toy, x, 100_000)
    torch.testing.assert_close(_grads(out.loss, theta), _grads(-toy.log_px(x).mean(), theta), atol=0.02, rtol=0)
    mu_p, v_p = (t.detach() for t in toy.posterior(x))
    q = toy.q(x)
    cross_entropy = 0.5 * torch.log(2 * math.pi * q.variance) + ((mu_p - q.mean) ** 2 + v_p) / (2 * q.variance)
    torch.testing.assert_close(_grads(out.phi_loss, phi), _grads(cross_entropy.mean(), phi), atol=0.02, rtol=0)


def test_wake_sleep_phi_gradient_matches_closed_form(toy, x):
    """sleep-phi: grad of E_{p(z,x)}[-log q(z|x)], with z - c x - m = (1 - c a) z - c s eps - (c b + m)."""
    phi = list(toy.inference_parameters())
    torch.manual_seed(5)
    out = compute_loss("wake-sleep", toy, x, 50_000)  # 200k dreams
    a, b, s = toy.a.detach(), toy.b.detach(), toy.log_s.exp().detach()
    c, m, v = toy.c, toy.m, toy.log_v.exp()
    second_moment = (1 - c * a) ** 2 + (c * s) ** 2 + (c * b + m) ** 2
    expected = 0.5 * torch.log(2 * math.pi * v) + second_moment / (2 * v)
    torch.testing.assert_close(_grads(out.phi_loss, phi), _grads(expected, phi), atol=0.02, rtol=0)


@pytest.mark.parametrize("objective", ["vimco", "reinforce"])
def test_score_function_iwae_gradients_are_unbiased(toy, objective):
    """vimco and reinforce estimate the same gradient as reparameterised IWAE (B replicates of one x)."""
    x = torch.full((40_000, 1), 1.2, dtype=torch.float64)
    params = list(toy.parameters())
    torch.manual_seed(6)
    reference = _grads(compute_loss("iwae", toy, x, 5).loss, params)
    torch.manual_seed(7)
    estimate = _grads(compute_loss(objective, toy, x, 5).loss, params)
    # reinforce has no baseline: much noisier. Another objective's gradient is ~1 away (control).
    torch.testing.assert_close(estimate, reference, atol=0.05 if objective == "vimco" else 0.25, rtol=0)
    torch.manual_seed(7)
    assert (_grads(compute_loss("elbo", toy, x, 5).loss, params) - reference).abs().max() > 0.5


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_objective_runs_with_the_right_gradient_paths(objective):
    torch.manual_seed(0)
    model = build_model("vae", hidden=(16,), latent_dim=3)
    x = torch.bernoulli(torch.rand(5, 784))
    out = compute_loss(objective, model, x, 4, log_uniform(3))
    assert out.log_w.shape == (4, 5) and not out.log_w.requires_grad
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    theta, phi = list(model.generative_parameters()), list(model.inference_parameters())
    loss_grads = torch.autograd.grad(out.loss, theta + phi, allow_unused=True, retain_graph=True)
    if out.phi_loss is None:
        assert all(g is not None and torch.isfinite(g).all() for g in loss_grads)
        assert objective not in ("wake-wake", "wake-sleep")
    else:
        assert objective in ("wake-wake", "wake-sleep")
        assert all(g is not None for g in loss_grads[: len(theta)])
        assert all(g is None or not g.any() for g in loss_grads[len(theta) :])
        phi_grads = torch.autograd.grad(out.phi_loss, theta + phi, allow_unused=True)
        assert all(g is None or not g.any() for g in phi_grads[: len(theta)])
        assert all(g is not None for g in phi_grads[len(theta) :])


@pytest.mark.parametrize("objective", ["elbo", "reinforce", "vimco", "wake-wake", "wake-sleep", "tvo"])
def test_discrete_objectives_run(objective):
    torch.manual_seed(0)
    model = build_model("sbn", latent_dims=(4, 3))
    x = torch.bernoulli(torch.rand(5, 784))
    out = compute_loss(objective, model, x, 3, linear(4))
    total = out.loss if out.phi_loss is None else out.loss + out.phi_loss
    total.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_bad_requests_raise_clear_errors():
    sbn, vae = build_model("sbn", latent_dims=(3,)), build_model("vae", hidden=(8,), latent_dim=2)
    x = torch.bernoulli(torch.rand(2, 784))
    with pytest.raises(ValueError, match="unknown objective 'tvo2'; accepted"):
        compute_loss("tvo2", vae, x, 2, [0.0])
    for objective in ("iwae", "tvo_reparam"):
        with pytest.raises(ValueError, match="reparameterised"):
            compute_loss(objective, sbn, x, 2, [0.0])
    with pytest.raises(ValueError, match="need betas"):
        compute_loss("tvo", vae, x, 2)
    with pytest.raises(ValueError, match="S >= 2"):
        compute_loss("vimco", vae, x, 1)
    with pytest.raises(ValueError, match="int >= 1"):
        compute_loss("elbo", vae, x, 0)
    with pytest.raises(ValueError, match="strictly increasing|non-increasing"):
        compute_loss("tvo", vae, x, 2, [0.0, 0.5, 0.3])


def test_a_host_schedule_is_moved_once_and_gives_the_same_loss():
    """The left points of a schedule on the host are validated and moved once (a training loop
    passes the same schedule every minibatch); the loss equals the one from a fresh copy."""
    from tvolib.objectives import _left_points, _left_points_on

    vae = build_model("vae", hidden=(8,), latent_dim=2)
    x = torch.bernoulli(torch.rand(3, 784, generator=torch.Generator().manual_seed(0)))
    betas = log_uniform(4, 0.025)
    ref = torch.zeros(1, dtype=torch.float32)
    first = _left_points(betas, ref)
    assert all(a is b for a, b in zip(first, _left_points(betas.clone(), ref)))  # a cache hit
    assert all(a is b for a, b in zip(first, _left_points(betas.tolist(), ref)))  # list or tensor alike
    assert first[0].dtype == torch.float32 and _left_points(betas, ref.double())[0].dtype == torch.float64
    nodes, weights = riemann_weights(betas, "left")
    # exact: the same float64 values converted to float32 by the same operation
    torch.testing.assert_close(first, (nodes[:-1].float(), weights[:-1].float()), rtol=0, atol=0)
    losses = []
    for _ in range(2):
        _left_points_on.cache_clear()
        torch.manual_seed(1)
        losses.append(compute_loss("tvo", vae, x, 4, betas).loss)
    torch.manual_seed(1)
    assert compute_loss("tvo", vae, x, 4, betas).loss == losses[0] == losses[1]  # same path, same inputs
    with pytest.raises(ValueError, match="strictly increasing|non-increasing"):
        _left_points(torch.tensor([0.0, 0.5, 0.3]), ref)
    with pytest.raises(ValueError, match="1-D sequence"):
        _left_points(torch.tensor([[0.0, 0.5]]), ref)  # not a flat schedule: riemann_weights says why


@pytest.mark.parametrize("objective", ["tvo", "tvo_reparam"])
def test_tvo_family_refuses_a_single_sample(objective):
    vae = build_model("vae", hidden=(8,), latent_dim=2)
    with pytest.raises(ValueError, match=rf"objective '{objective}' needs S >= 2 .* got S=1"):
        compute_loss(objective, vae, torch.bernoulli(torch.rand(2, 784)), 1, [0.0, 0.5])
    compute_loss(objective, vae, torch.bernoulli(torch.rand(2, 784)), 2, [0.0, 0.5])  # S = 2 is fine


@pytest.mark.parametrize(("name", "x", "message"), [
    ("vae", torch.bernoulli(torch.rand(2, 784)).double(), "x has dtype torch.float64 but the model computes in torch.float32"),
    ("vae", torch.full((2, 784), math.nan), "x has entries that are not finite numbers"),
    ("sbn", torch.full((2, 784), 2.0), r"x has entries that are not 0 or 1 \(binary data\)"),
    ("sbn", torch.zeros(2, 783), r"x must be a tensor of shape \(B, 784\)"),
])
def test_bad_batches_raise_clear_errors(name, x, message):
    model = build_model(name, **({"hidden": (8,), "latent_dim": 2} if name == "vae" else {"latent_dims": (3,)}))
    with pytest.raises(ValueError, match=message):
        compute_loss("tvo", model, x, 2, [0.0, 0.5])
    compute_loss("tvo", model, torch.bernoulli(torch.rand(2, 784)).to(torch.uint8), 2, [0.0, 0.5])  # ints converted
