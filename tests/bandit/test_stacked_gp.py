"""The stacked bandit GP equals K single-run BanditGPs: posterior, MAP objective, fit, independence."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from tvolib.bandit.model import BanditGP, Hyperparameters, fit_map
from tvolib.bandit.stacked import StackedBanditGP, fit_map_stacked, pad_observations

N_ARM = 3
HPS = [Hyperparameters(0.3, 1.0, 0.2), Hyperparameters(0.7, 3.0, 0.05), Hyperparameters(1.2, 0.5, 0.01)]
SORT, TIME = [True, False, True], [True, True, False]


def _sets(sizes, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, N_ARM + 1, generator=g, dtype=torch.float64),
             torch.randn(n, generator=g, dtype=torch.float64)) for n in sizes]


def _single(k, X, y, hp=None):
    gp = BanditGP(N_ARM, sort=SORT[k], time_varying=TIME[k], hyperparameters=hp or HPS[k])
    gp.set_train_data(X, y)
    return gp


@settings(max_examples=10)
@given(st.lists(st.integers(1, 25), min_size=3, max_size=3), st.integers(0, 2**31 - 1))
def test_posterior_and_map_objective_equal_the_single_gps(sizes, seed):
    sets = _sets(sizes, seed)
    data = pad_observations(sets)
    gp = StackedBanditGP(N_ARM, 3, hyperparameters=HPS, sort=SORT, time_varying=TIME)
    x = torch.rand(3, 11, N_ARM + 1, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    mean, var = gp.mean_and_variance(data, x)
    objective, prior = gp.negative_log_posterior(data), gp.log_prior(gp.raw)
    for k, (X, y) in enumerate(sets):
        single = _single(k, X, y)
        m, v = single.mean_and_variance(x[k])
        torch.testing.assert_close(mean[k], m, rtol=0, atol=1e-6)
        torch.testing.assert_close(var[k], v, rtol=0, atol=1e-6)
        with torch.no_grad():
            torch.testing.assert_close(objective[k], single.negative_log_posterior(), rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(prior[k], single.log_prior(), rtol=1e-6, atol=1e-6)


def test_marginal_likelihood_of_one_point_is_analytic():
    """N = 1, y = 2: log N(2 | 0, 1 + s^2) whatever the padding of the other run."""
    sets = [(torch.rand(1, N_ARM + 1, dtype=torch.float64), torch.tensor([2.0], dtype=torch.float64)),
            (torch.rand(6, N_ARM + 1, dtype=torch.float64), torch.randn(6, dtype=torch.float64))]
    gp = StackedBanditGP(N_ARM, 2, hyperparameters=HPS[:2])
    lml = gp.log_marginal_likelihood(pad_observations(sets))
    f64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    expected = torch.distributions.Normal(f64(0.0), f64(1.2).sqrt()).log_prob(f64(2.0))
    torch.testing.assert_close(lml[0], expected, rtol=1e-12, atol=1e-12)


def test_fit_reaches_the_single_fit_objective():
    sets = _sets([8, 15, 30], seed=3)
    data = pad_observations(sets)
    gp = StackedBanditGP(N_ARM, 3, hyperparameters=HPS, sort=SORT, time_varying=TIME)
    results = fit_map_stacked(gp, data)
    assert all(r.ok for r in results)
    stacked = gp.negative_log_posterior(data)
    for k, (X, y) in enumerate(sets):
        single = _single(k, X, y)
        fit_map(single)
        with torch.no_grad():
            reference = float(single.negative_log_posterior())
        assert float(stacked[k]) <= reference + 1e-3, k
        assert results[k].hyperparameters.rho == 0.0 or TIME[k]


def test_a_runs_fit_ignores_the_other_runs_data():
    a, b, c = _sets([10, 20, 20], seed=5)
    fits = []
    for other in (b, c):
        gp = StackedBanditGP(N_ARM, 2, hyperparameters=HPS[:2], sort=SORT[:2], time_varying=TIME[:2])
        fits.append(fit_map_stacked(gp, pad_observations([a, other]))[0].hyperparameters)
    assert fits[0] == fits[1]


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least one"):
        pad_observations([])
    with pytest.raises(ValueError, match="one n_arm for all"):
        pad_observations([(torch.rand(2, 3), torch.rand(2)), (torch.rand(2, 4), torch.rand(2))])
    with pytest.raises(ValueError, match="K=2 bools"):
        StackedBanditGP(N_ARM, 2, sort=[True])
    with pytest.raises(ValueError, match="K=2 entries"):
        StackedBanditGP(N_ARM, 2, hyperparameters=HPS)
