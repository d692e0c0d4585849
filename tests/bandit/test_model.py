"""The bandit GP against direct NumPy computations (Section 4.1, Appendix B) and Theorem 1's kappa."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import torch
from botorch.acquisition import UpperConfidenceBound
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit.acquisition import GPUCB, maximize_ucb, project_arm, theorem1_kappa
from tvolib.bandit.kernels import omega_to_rho
from tvolib.bandit.fit import fit_map
from tvolib.bandit.model import BanditGP, Hyperparameters, training_data

F64 = torch.float64


def numpy_kernel(A: np.ndarray, B: np.ndarray, n_arm: int, ls: float, omega: float, sort: bool, tv: bool) -> np.ndarray:
    """k([b, t], [b', t']) = exp(-||Phi b - Phi b'||^2 / (2 ls^2)) (1 - omega)^{|t - t'| / 2} (Appendix B)."""
    a, b = A[:, :n_arm], B[:, :n_arm]
    if sort:
        a, b = np.sort(a, axis=1), np.sort(b, axis=1)
    sq = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    K = np.exp(-sq / (2 * ls**2))
    if tv:
        K = K * (1 - omega) ** (np.abs(A[:, None, n_arm] - B[None, :, n_arm]) / 2)
    return K


def problem(seed: int = 0, n: int = 9, n_arm: int = 3, m: int = 6):
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.random((n, n_arm)), np.linspace(0, 0.9, n)[:, None]], axis=1)
    y = rng.standard_normal(n)
    Xs = np.concatenate([rng.random((m, n_arm)), np.ones((m, 1))], axis=1)
    return X, y, Xs


@pytest.mark.parametrize("sort,tv", [(True, True), (False, True), (True, False)])
def test_posterior_matches_numpy_eqs_6_7(sort: bool, tv: bool) -> None:
    n_arm, ls, omega, noise = 3, 0.35, 0.4, 0.05
    X, y, Xs = problem(n_arm=n_arm)
    gp = BanditGP(n_arm, sort=sort, time_varying=tv, hyperparameters=Hyperparameters(ls, float(omega_to_rho(omega)), noise))
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    mean, var = gp.mean_and_variance(torch.tensor(Xs))
    # Eq. GP_mean: mu = k_*^T (K + s^2 I)^{-1} y
    # Eq. GP_var: sigma^2 = k(x*, x*) - k_*^T (K + s^2 I)^{-1} k_*
    K = numpy_kernel(X, X, n_arm, ls, omega, sort, tv) + noise * np.eye(len(y))
    ks = numpy_kernel(X, Xs, n_arm, ls, omega, sort, tv)
    mu = ks.T @ np.linalg.solve(K, y)
    s2 = 1.0 - np.einsum("ij,ij->j", ks, np.linalg.solve(K, ks))
    np.testing.assert_allclose(mean.detach().numpy(), mu, atol=1e-6)
    np.testing.assert_allclose(var.detach().numpy(), s2, atol=1e-6)
    # the BoTorch posterior carries the same numbers, shaped (batch, q, 1)
    post = gp.posterior(torch.tensor(Xs).unsqueeze(1))
    np.testing.assert_allclose(post.mean.reshape(-1).detach().numpy(), mu, atol=1e-6)
    np.testing.assert_allclose(post.variance.reshape(-1).detach().numpy(), s2, atol=1e-6)


def test_training_features_are_reused_only_for_the_same_unchanged_data() -> None:
    """The training arms' kernel features are computed once per training data: the posterior equals
    a fresh GP's (exact: the same kernels on the same inputs) when read again, after new data, and
    after the data is edited in place (the posterior's own cache is dropped by hand there, as
    every caller that edits data does with set_train_data)."""
    X, y, Xs = (torch.tensor(a) for a in problem(n_arm=3))
    hp = Hyperparameters(0.35, 0.5, 0.05)

    def same_as_fresh(gp: BanditGP) -> bool:
        fresh = BanditGP(3, hyperparameters=hp)
        fresh.set_train_data(gp._X.clone(), gp._y)
        return all(torch.equal(a, b) for a, b in zip(gp.mean_and_variance(Xs), fresh.mean_and_variance(Xs)))

    gp = BanditGP(3, hyperparameters=hp)
    gp.set_train_data(X, y)
    assert same_as_fresh(gp) and same_as_fresh(gp)  # the second reads the cached features
    gp.set_train_data(X[:5], y[:5])
    assert same_as_fresh(gp)
    with torch.no_grad():
        X[:5, 0] = 1 - X[:5, 0]  # the training data itself (a view of X) edited in place
    gp._cache = {}
    assert same_as_fresh(gp)


def test_a_spatial_kernel_without_features_is_refused() -> None:
    from gpytorch.kernels import MaternKernel, RBFKernel

    for kernel in (MaternKernel(), RBFKernel()):
        with pytest.raises(ValueError, match="RBFKernel with a features"):
            BanditGP(3, spatial=kernel)


def test_posterior_is_permutation_invariant_only_with_sorting() -> None:
    n_arm = 4
    X, y, Xs = problem(seed=3, n_arm=n_arm)
    rng = np.random.default_rng(7)
    Xp, Xsp = X.copy(), Xs.copy()
    for row in Xp:
        row[:n_arm] = rng.permutation(row[:n_arm])
    for row in Xsp:
        row[:n_arm] = rng.permutation(row[:n_arm])
    results = {}
    for sort in (True, False):
        out = []
        for A, B in ((X, Xs), (Xp, Xsp)):
            gp = BanditGP(n_arm, sort=sort, hyperparameters=Hyperparameters(0.4, 1.0, 0.05))
            gp.set_train_data(torch.tensor(A), torch.tensor(y))
            out.append([t.detach().numpy() for t in gp.mean_and_variance(torch.tensor(B))])
        results[sort] = out
    (m1, v1), (m2, v2) = results[True]
    np.testing.assert_allclose(m1, m2, atol=1e-10)
    np.testing.assert_allclose(v1, v2, atol=1e-10)
    (u1, _), (u2, _) = results[False]
    assert np.abs(u1 - u2).max() > 1e-3


def test_map_objective_is_minus_log_marginal_likelihood_minus_log_prior() -> None:
    n_arm, ls, omega, noise = 2, 0.3, 0.6, 0.2
    X, y, _ = problem(seed=1, n=12, n_arm=n_arm)
    rho = float(omega_to_rho(omega))
    gp = BanditGP(n_arm, hyperparameters=Hyperparameters(ls, rho, noise))
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    C = numpy_kernel(X, X, n_arm, ls, omega, True, True) + noise * np.eye(len(y))
    # standard sign: log N(y | 0, C) = -y^T C^{-1} y / 2 - log|C| / 2 - n log(2 pi) / 2 (the paper prints +)
    mll = scipy.stats.multivariate_normal(np.zeros(len(y)), C).logpdf(y)
    log_prior = (
        scipy.stats.lognorm(s=math.sqrt(3), scale=math.exp(math.sqrt(2) + 0.5 * math.log(n_arm))).logpdf(ls)
        + scipy.stats.lognorm(s=1.5, scale=2.0).logpdf(rho)
        + scipy.stats.gamma(a=1.1, scale=1 / 0.05).logpdf(noise)
    )
    got = float(gp.negative_log_posterior().detach())
    # GPyTorch forms squared distances as |a|^2 + |b|^2 - 2 a.b, good to ~1e-9 relative
    assert math.isclose(got, -(mll + log_prior) / len(y), rel_tol=1e-7)


def test_map_gradient_matches_finite_differences() -> None:
    X, y, _ = problem(seed=2, n=10, n_arm=2)
    gp = BanditGP(2, hyperparameters=Hyperparameters(0.3, 1.5, 0.1))
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    params = gp._raw_parameters()
    grads = torch.autograd.grad(gp.negative_log_posterior(), params)
    eps = 1e-6
    for p, g in zip(params, grads):
        base = float(p.detach())
        with torch.no_grad():
            p.fill_(base + eps)
            up = float(gp.negative_log_posterior().detach())
            p.fill_(base - eps)
            down = float(gp.negative_log_posterior().detach())
            p.fill_(base)
        assert math.isclose(float(g), (up - down) / (2 * eps), rel_tol=1e-5, abs_tol=1e-8)


def test_fit_recovers_hyperparameters_of_a_gp_sample() -> None:
    """Data drawn from the model itself: MAP lands near the truth and lowers the objective."""
    n_arm, n = 2, 150
    truth = Hyperparameters(lengthscale=0.25, rho=float(omega_to_rho(0.7)), noise=0.05)
    gen = torch.Generator().manual_seed(0)
    X = torch.cat([torch.rand(n, n_arm, generator=gen, dtype=F64), torch.linspace(0, 1, n, dtype=F64)[:, None]], 1)
    sampler = BanditGP(n_arm, hyperparameters=truth)
    K = sampler.covar(X, X).detach() + truth.noise * torch.eye(n, dtype=F64)
    y = torch.linalg.cholesky(K) @ torch.randn(n, generator=gen, dtype=F64)
    gp = BanditGP(n_arm, hyperparameters=Hyperparameters(1.0, 0.2, 0.5))
    gp.set_train_data(X, y)
    before = float(gp.negative_log_posterior().detach())
    fit = fit_map(gp, maxiter=100)
    assert fit.ok and float(gp.negative_log_posterior().detach()) < before
    hp = fit.hyperparameters
    assert 0.5 * truth.lengthscale < hp.lengthscale < 2 * truth.lengthscale
    assert 0.01 < hp.noise < 0.2
    assert 0.3 < hp.omega < 0.95


def test_time_invariant_model_ignores_time() -> None:
    X, y, Xs = problem(seed=4)
    gp = BanditGP(3, time_varying=False, hyperparameters=Hyperparameters(0.3, 0.0, 0.1))
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    Xs2 = Xs.copy()
    Xs2[:, -1] = 0.0
    a = gp.mean_and_variance(torch.tensor(Xs))[0]
    b = gp.mean_and_variance(torch.tensor(Xs2))[0]
    assert torch.allclose(a, b)
    assert gp.get_hyperparameters().rho == 0.0 and gp.get_hyperparameters().omega == 0.0
    fit = fit_map(gp)
    assert fit.hyperparameters.rho == 0.0


def test_failed_fit_keeps_previous_values_and_warns(monkeypatch) -> None:
    X, y, _ = problem(seed=5)
    start = Hyperparameters(0.4, 1.2, 0.07)
    gp = BanditGP(3, hyperparameters=start)
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    before = gp.get_hyperparameters()

    def broken(self):
        return (self.spatial.lengthscale.sum() * float("nan")).reshape(())

    monkeypatch.setattr(BanditGP, "negative_log_posterior", broken)
    with pytest.warns(RuntimeWarning, match="fit failed"):
        fit = fit_map(gp)
    assert not fit.ok
    assert fit.hyperparameters == before


def test_training_data_normalises_consistently() -> None:
    arms = torch.tensor([[0.05, 0.95], [0.5, 0.2], [0.3, 0.3]], dtype=F64)
    rounds = torch.tensor([2.0, 4.0, 6.0], dtype=F64)
    rewards = torch.tensor([1.0, 2.0, 6.0], dtype=F64)
    data = training_data(arms, rounds, rewards, lo=0.05, hi=0.95, t_pred=10)
    assert torch.allclose(data.X[:, :2], (arms - 0.05) / 0.9)
    assert torch.allclose(data.X[:, 2], torch.tensor([0.0, 0.25, 0.5], dtype=F64))  # (t - 2) / (10 - 2)
    assert math.isclose(float(data.y.mean()), 0.0, abs_tol=1e-12)
    assert math.isclose(float(data.y.std(unbiased=False)), 1.0, rel_tol=1e-12)
    assert torch.allclose(data.y * data.y_std + data.y_mean, rewards)
    with pytest.raises(ValueError):
        training_data(arms, rounds, torch.tensor([1.0, float("nan"), 2.0], dtype=F64), lo=0.05, hi=0.95, t_pred=10)
    with pytest.raises(ValueError):
        training_data(arms, rounds, rewards, lo=0.05, hi=0.95, t_pred=2)


@pytest.mark.parametrize("n,dim,delta,a,b", [(1, 1, 0.1, 1.0, 1.0), (40, 2, 0.1, 1.0, 1.0), (1000, 14, 0.05, 2.0, 0.5)])
def test_kappa_matches_theorem_1(n: int, dim: int, delta: float, a: float, b: float) -> None:
    # Theorem 1 with T/w = n rounds:
    # 2 log(pi^2 n^2 / (2 delta)) + 2 d log(d b n^2 sqrt(log(d a pi^2 n^2 / (2 delta))))
    expected = 2 * np.log(np.pi**2 * n**2 / (2 * delta)) + 2 * dim * np.log(
        dim * b * n**2 * np.sqrt(np.log(dim * a * np.pi**2 * n**2 / (2 * delta)))
    )
    assert math.isclose(theorem1_kappa(n, dim, delta=delta, a=a, b=b), expected, rel_tol=1e-12)


def test_kappa_grows_with_rounds_and_dimension_and_rejects_bad_constants() -> None:
    ks = [theorem1_kappa(n, 3) for n in (1, 10, 100, 1000)]
    assert all(x < y for x, y in zip(ks, ks[1:]))
    assert theorem1_kappa(50, 2) < theorem1_kappa(50, 8)
    assert theorem1_kappa(50, 4, delta=0.5) < theorem1_kappa(50, 4, delta=0.01)
    for kwargs in ({"delta": 0.0}, {"delta": 1.0}, {"a": 0.0}, {"b": -1.0}):
        with pytest.raises(ValueError):
            theorem1_kappa(10, 2, **kwargs)
    with pytest.raises(ValueError):
        theorem1_kappa(0, 2)


@settings(max_examples=60, deadline=None)
@given(arm=st.lists(st.floats(-0.5, 1.5), min_size=1, max_size=14))
def test_projection_gives_a_sorted_separated_arm_in_the_box(arm: list[float]) -> None:
    out = project_arm(torch.tensor(arm, dtype=F64), 0.05, 0.95, 1e-3)
    assert out.shape == (len(arm),)
    assert torch.all(out >= 0.05 - 1e-12) and torch.all(out <= 0.95 + 1e-12)
    assert torch.all(out[1:] - out[:-1] >= 1e-3 - 1e-12)
    assert torch.equal(project_arm(out, 0.05, 0.95, 1e-3), out)  # idempotent on feasible arms


def test_ucb_maximiser_finds_the_mean_peak_with_time_fixed() -> None:
    """kappa = 0: GP-UCB is the posterior mean; its argmax is the data's peak at 0.7."""
    xs = torch.linspace(0, 1, 25, dtype=F64)
    X = torch.stack([xs, torch.full_like(xs, 0.5)], dim=-1)
    y = -((xs - 0.7) ** 2) * 20
    gp = BanditGP(1, hyperparameters=Hyperparameters(0.2, 0.1, 1e-4))
    gp.set_train_data(X, (y - y.mean()) / y.std())
    arm, value = maximize_ucb(gp, t_norm=1.0, kappa=0.0, seed=0)
    assert arm.shape == (1,)
    assert abs(float(arm) - 0.7) < 0.02
    expected = float(gp.mean_and_variance(torch.tensor([[float(arm), 1.0]], dtype=F64))[0])
    assert math.isclose(value, expected, rel_tol=1e-6)
    # with a large kappa the bonus moves the choice away from the densely observed peak? no:
    # variance is flat over the sampled range, so the argmax stays put
    arm_k, _ = maximize_ucb(gp, t_norm=1.0, kappa=4.0, seed=0)
    assert abs(float(arm_k) - 0.7) < 0.05
    with pytest.raises(ValueError):
        maximize_ucb(gp, t_norm=1.0, kappa=float("nan"), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no BoTorch warnings leak out of a normal call
        maximize_ucb(gp, t_norm=1.0, kappa=1.0, seed=1)


def test_gpucb_equals_botorch_ucb_and_eq_8() -> None:
    X, y, Xs = problem(seed=6)
    gp = BanditGP(3, hyperparameters=Hyperparameters(0.3, 1.0, 0.05))
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    q = torch.tensor(Xs).unsqueeze(1)  # (batch, q=1, d)
    mine = GPUCB(gp, 7.5)(q)
    theirs = UpperConfidenceBound(gp, beta=7.5)(q)  # BoTorch: mu + sqrt(beta) sigma
    mean, var = gp.mean_and_variance(torch.tensor(Xs))
    assert torch.allclose(mine, theirs, atol=1e-10)
    assert torch.allclose(mine, mean + math.sqrt(7.5) * var.sqrt(), atol=1e-10)


def test_trend_term_is_added_to_the_arm_kernel_and_left_out_of_the_arm_posterior() -> None:
    """k = (1 - phi) k_b k_T + phi exp(-dt^2 / (2 l_t^2)); the arm's posterior uses only the first
    part in k_* and k(x, x) (the trend's share of the prediction is the same for every arm)."""
    n_arm, ls, omega, noise, phi, lt = 3, 0.35, 0.4, 0.05, 0.7, 0.3
    X, y, Xs = problem(n_arm=n_arm)
    hp = Hyperparameters(ls, float(omega_to_rho(omega)), noise, trend_share=phi, trend_lengthscale=lt)
    gp = BanditGP(n_arm, hyperparameters=hp, trend=True)
    gp.set_train_data(torch.tensor(X), torch.tensor(y))
    assert gp.get_hyperparameters().trend_share == pytest.approx(phi, rel=1e-12)
    assert gp.get_hyperparameters().trend_lengthscale == pytest.approx(lt, rel=1e-12)

    def trend(A, B):
        return np.exp(-((A[:, None, n_arm] - B[None, :, n_arm]) ** 2) / (2 * lt**2))

    arm = lambda A, B: (1 - phi) * numpy_kernel(A, B, n_arm, ls, omega, True, True)  # noqa: E731
    K = arm(X, X) + phi * trend(X, X) + noise * np.eye(len(y))
    for component, ks, prior in (("total", arm(X, Xs) + phi * trend(X, Xs), 1.0), ("arm", arm(X, Xs), 1 - phi)):
        mean, var = gp.mean_and_variance(torch.tensor(Xs), component=component)
        np.testing.assert_allclose(mean.detach().numpy(), ks.T @ np.linalg.solve(K, y), atol=1e-9)
        np.testing.assert_allclose(var.detach().numpy(), prior - np.einsum("ij,ij->j", ks, np.linalg.solve(K, ks)),
                                   atol=1e-9)
    # all arms at one time: the total and arm means differ by one number, the trend's prediction
    same_t = torch.tensor(Xs)
    diff = gp.mean_and_variance(same_t)[0] - gp.mean_and_variance(same_t, component="arm")[0]
    assert torch.allclose(diff, diff[:1].expand_as(diff), atol=1e-12)
    with pytest.raises(ValueError, match="component"):
        gp.mean_and_variance(same_t, component="trend")
    # without a trend both components are the whole posterior
    plain = BanditGP(n_arm, hyperparameters=hp)
    plain.set_train_data(torch.tensor(X), torch.tensor(y))
    for a, b in zip(plain.mean_and_variance(same_t), plain.mean_and_variance(same_t, component="arm")):
        assert torch.equal(a, b)


def test_batched_start_screening_equals_the_objective_with_scaling_and_trend() -> None:
    """The ML fit screens its random starts with a batched copy of the kernel: it must be the model's
    objective, coordinate scaling and trend included."""
    from tvolib.bandit.fit import _batched_objective

    X, y, _ = problem(n_arm=3)
    hps = [Hyperparameters(0.4, 1.0, 0.05, 0.3, 0.5), Hyperparameters(1.1, 0.2, 0.2, 0.9, 0.2)]
    for trend in (False, True):
        gp = BanditGP(3, priors=False, coordinate_scale=[3.0, 1.5, 1.0], trend=trend)
        gp.set_train_data(torch.tensor(X), torch.tensor(y))
        batched = _batched_objective(gp, hps)
        for value, hp in zip(batched, hps):
            gp.set_hyperparameters(hp)
            assert float(value) == pytest.approx(float(gp.negative_log_posterior().detach()), rel=1e-9)


def test_trend_hyperparameters_are_checked() -> None:
    with pytest.raises(ValueError, match="trend_share"):
        Hyperparameters(trend_share=1.0).validate()
    with pytest.raises(ValueError, match="trend_lengthscale"):
        Hyperparameters(trend_lengthscale=0.0).validate()
