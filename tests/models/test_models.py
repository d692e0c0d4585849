"""Models: shapes, densities against torch.distributions, gradient paths, closed forms of the toy."""
from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Bernoulli, Normal

from tvolib.models import MODELS, LinearGaussian, SigmoidBeliefNetwork, build_model


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.bernoulli(torch.rand(4, 784))


def _small(name):
    return build_model(name, hidden=(16, 12), latent_dim=3) if name == "vae" else build_model(
        "sbn", latent_dims=(5, 4, 3), train_mean=torch.rand(784)
    )


def test_registry_and_defaults():
    assert set(MODELS) == {"vae", "sbn"}
    vae, sbn = build_model("vae"), build_model("sbn")
    assert [m.in_features for m in vae.encoder if isinstance(m, torch.nn.Linear)] == [784, 100, 100]
    assert vae.encoder[-1].out_features == 50 and vae.latent_dim == 25
    assert isinstance(vae.encoder[1], torch.nn.Tanh)
    assert sbn.latent_dims == (25, 25, 25) and sbn.discrete and not vae.discrete
    assert all(p.dtype == torch.float32 for p in [*vae.parameters(), *sbn.parameters()])
    with pytest.raises(ValueError, match="unknown model 'gmm'; accepted"):
        build_model("gmm")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['width'\].*accepted"):
        build_model("vae", width=3)
    with pytest.raises(ValueError, match="latent_dim must be an integer >= 1"):
        build_model("vae", latent_dim=0)


@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_shapes_finite_and_parameter_split(name, x):
    model = _small(name)
    log_p, log_q = model.log_joint_and_q(x, 6, reparam=False)
    assert log_p.shape == log_q.shape == (6, 4)
    assert log_p.dtype == torch.float32 and torch.isfinite(log_p).all() and torch.isfinite(log_q).all()
    assert (log_p < 0).all()
    z, xs = model.sample_joint(7)
    assert xs.shape == (7, 784) and set(xs.unique().tolist()) <= {0.0, 1.0}
    assert model.log_q_given(z, xs).shape == (7,)
    assert model.log_weights(x, 2).shape == (2, 4)
    theta = {id(p) for p in model.generative_parameters()}
    phi = {id(p) for p in model.inference_parameters()}
    assert theta and phi and not theta & phi and theta | phi == {id(p) for p in model.parameters()}
    with pytest.raises(ValueError, match=r"shape \(B, 784\)"):
        model.log_joint_and_q(x[:, :10], 2, reparam=False)


def _vae_q(model, x: torch.Tensor) -> Normal:
    """q(z | x) of the VAE built by hand from its encoder (factorised over dimensions)."""
    mean, log_std = model.encoder(x).chunk(2, dim=-1)
    return Normal(mean, log_std.exp())


def test_vae_densities_match_torch_distributions(x):
    model = _small("vae")
    torch.manual_seed(1)
    log_p, log_q = model.log_joint_and_q(x, 5, reparam=True)
    torch.manual_seed(1)
    q = _vae_q(model, x)
    z = q.rsample((5,))
    torch.testing.assert_close(log_q, q.log_prob(z).sum(-1))
    expected = Normal(0.0, 1.0).log_prob(z).sum(-1) + Bernoulli(logits=model.decoder(z)).log_prob(x).sum(-1)
    torch.testing.assert_close(log_p, expected)
    z2, xs = model.sample_joint(3)
    torch.testing.assert_close(model.log_q_given(z2, xs), _vae_q(model, xs).log_prob(z2).sum(-1))


def test_vae_score_function_draws_are_normal_samples_without_gradient(x):
    """The non-reparameterised draw (taken with ``rsample`` under ``no_grad``, which on CUDA avoids
    ``Normal.sample``'s host check of the scale) is the draw ``Normal.sample`` makes from the same
    generator state, and carries no gradient to the encoder through ``z``."""
    model = _small("vae")
    torch.manual_seed(3)
    _, log_q = model.log_joint_and_q(x, 4, reparam=False)
    torch.manual_seed(3)
    q = _vae_q(model, x)
    z = q.sample((4,))
    torch.testing.assert_close(log_q, q.log_prob(z).sum(-1))  # float32 tolerances: another code path
    (grad,) = torch.autograd.grad(log_q.sum(), model.encoder[0].weight)
    (expected,) = torch.autograd.grad(q.log_prob(z).sum(), model.encoder[0].weight)
    torch.testing.assert_close(grad, expected)  # the pathwise gradient would differ by far more


def test_sbn_densities_and_initialisation_follow_the_authors_setup(x):
    mean = torch.rand(784)
    mean[:3] = torch.tensor([0.0, 1.0, 0.5])
    model = build_model("sbn", latent_dims=(5, 4), train_mean=mean)
    torch.testing.assert_close(model.decoder[-1].bias, torch.logit(mean.clamp(1e-4, 1 - 1e-4)))
    torch.manual_seed(2)
    log_p, log_q = model.log_joint_and_q(x, 3, reparam=False)
    torch.manual_seed(2)
    q1 = Bernoulli(logits=model.encoder[0]((x - mean + 1) / 2))
    z1 = q1.sample((3,))
    q2 = Bernoulli(logits=model.encoder[1](2 * z1 - 1))
    z2 = q2.sample()
    torch.testing.assert_close(log_q, q1.log_prob(z1).sum(-1) + q2.log_prob(z2).sum(-1))
    expected = (
        Bernoulli(logits=model.prior_logits).log_prob(z2).sum(-1)
        + Bernoulli(logits=model.decoder[0](2 * z2 - 1)).log_prob(z1).sum(-1)
        + Bernoulli(logits=model.decoder[1](2 * z1 - 1)).log_prob(x).sum(-1)
    )
    torch.testing.assert_close(log_p, expected)
    z = torch.cat([z1[0], z2[0]], dim=-1)
    torch.testing.assert_close(model.log_q_given(z, x), log_q[0])
    default = SigmoidBeliefNetwork(latent_dims=(2,))
    assert default.decoder[-1].bias.abs().max() < 1e-6 and (default.train_mean == 0.5).all()


def test_gradient_paths(x):
    vae = _small("vae")
    enc = list(vae.inference_parameters())
    log_p, _ = vae.log_joint_and_q(x, 3, reparam=True)
    assert all(g is not None and g.abs().sum() > 0 for g in torch.autograd.grad(log_p.sum(), enc))
    log_p, log_q = vae.log_joint_and_q(x, 3, reparam=False)
    assert all(g is None for g in torch.autograd.grad(log_p.sum(), enc, allow_unused=True))
    assert all(g is not None for g in torch.autograd.grad(log_q.sum(), enc))  # through the density
    dec = list(vae.generative_parameters())
    assert all(g is None for g in torch.autograd.grad(log_q.sum(), dec, allow_unused=True))
    sbn = _small("sbn")
    with pytest.raises(ValueError, match="no reparameterisation"):
        sbn.log_joint_and_q(x, 2, reparam=True)
    log_p, log_q = sbn.log_joint_and_q(x, 3, reparam=False)
    assert all(
        g is None for g in torch.autograd.grad(log_p.sum(), list(sbn.inference_parameters()), allow_unused=True)
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_models_follow_cuda(name, x):
    model = _small(name).cuda()
    log_p, log_q = model.log_joint_and_q(x.cuda(), 3, reparam=False)
    assert log_p.is_cuda and log_q.is_cuda and log_p.dtype == torch.float32
    z, xs = model.sample_joint(2)
    assert z.is_cuda and xs.is_cuda


# ---- linear-Gaussian toy ---------------------------------------------------------------------


@pytest.fixture
def toy() -> LinearGaussian:
    return LinearGaussian(a=1.5, b=0.5, s=0.8, m=0.2, v=0.5, c=0.3)


def _log_Z_by_quadrature(toy, x, beta):
    z = torch.linspace(-12, 12, 200_001, dtype=torch.float64)
    log_q = toy.q(x).log_prob(z[:, None])
    log_p = toy.log_joint(z[:, None], x)
    return torch.logsumexp((1 - beta) * log_q + beta * log_p, dim=0) + math.log(z[1] - z[0])


def test_toy_closed_forms_against_quadrature(toy):
    x = torch.tensor([[-0.5], [1.2], [2.5]], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(toy.log_Z(x, 0.0), torch.zeros(3, dtype=torch.float64))
        torch.testing.assert_close(toy.log_Z(x, 1.0), toy.log_px(x))
        for beta in (0.0, 0.3, 0.8, 1.0):
            torch.testing.assert_close(toy.log_Z(x, beta), _log_Z_by_quadrature(toy, x, beta), atol=1e-8, rtol=0)
        betas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
        assert toy.log_Z(x, betas).shape == (3, 3)
    beta = torch.tensor([0.2, 0.6, 0.95], dtype=torch.float64, requires_grad=True)
    autograd_derivative = torch.autograd.grad(toy.log_Z(x, beta).sum(), beta)[0]
    torch.testing.assert_close(toy.dlogZ_dbeta(x, beta).detach().sum(1), autograd_derivative)
    torch.testing.assert_close(toy.exact_tvo(x, [0.0]), toy.elbo(x))
    assert (toy.elbo(x) < toy.log_px(x)).all()


def test_toy_sampling_interface(toy):
    torch.manual_seed(0)
    x = torch.tensor([[0.3], [1.0]], dtype=torch.float64)
    log_p, log_q = toy.log_joint_and_q(x, 4, reparam=True)
    assert log_p.shape == log_q.shape == (4, 2)
    z, xs = toy.sample_joint(50_000)
    assert z.shape == xs.shape == (50_000, 1)
    assert xs.mean().item() == pytest.approx(0.5, abs=0.03)  # E[x] = b
    assert xs.var().item() == pytest.approx(1.5**2 + 0.8**2, rel=0.03)  # a^2 + s^2
    torch.testing.assert_close(toy.log_q_given(z[:3], xs[:3]), toy.q(xs[:3]).log_prob(z[:3, 0]))


@pytest.mark.parametrize(("name", "options", "message"), [
    ("vae", {"hidden": 7}, r"hidden must be a sequence of positive ints, e.g. \(100, 100\); got 7"),
    ("vae", {"hidden": (100, 0)}, "hidden must be a sequence of positive ints"),
    ("vae", {"latent_dim": 0}, "latent_dim must be an integer >= 1"),
    ("vae", {"activation": "gelu"}, "activation must be one of"),
    ("sbn", {"latent_dims": 25}, "latent_dims must be a sequence of positive ints"),
    ("sbn", {"latent_dims": ()}, "latent_dims must be a sequence of positive ints"),
    ("sbn", {"data_dim": "784"}, "data_dim must be an integer >= 1"),
])
def test_option_values_are_checked_when_built(name, options, message):
    with pytest.raises(ValueError, match=message):
        build_model(name, **options)


def test_linear_gaussian_checks_its_parameters():
    with pytest.raises(ValueError, match="s must be a finite number > 0.0"):
        LinearGaussian(s=0.0)
    with pytest.raises(ValueError, match="a must be a finite number"):
        LinearGaussian(a=math.nan)
