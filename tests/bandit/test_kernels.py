"""Kernels of the bandit GP (paper Section 4.1-4.2, Appendix B): analytic values and properties."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit.kernels import SortedRBFKernel, TimeDecayKernel, omega_to_rho, rho_to_omega
from tvolib.bandit.model import BanditGP, Hyperparameters

F64 = torch.float64
omegas = st.floats(min_value=1e-3, max_value=0.999)
times = st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=2, max_size=12, unique=True)


def time_kernel(omega: float) -> TimeDecayKernel:
    k = TimeDecayKernel().to(F64)
    k.omega = torch.tensor(omega, dtype=F64)
    return k


@settings(max_examples=40, deadline=None)
@given(omega=omegas, ts=times)
def test_time_kernel_is_the_papers_formula(omega: float, ts: list[float]) -> None:
    t = torch.tensor(ts, dtype=F64).unsqueeze(-1)
    K = time_kernel(omega).forward(t, t)
    dt = np.abs(np.subtract.outer(ts, ts))
    expected = (1.0 - omega) ** (dt / 2.0)  # (1 - omega)^{|t - t'| / 2}
    np.testing.assert_allclose(K.detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(torch.diagonal(K).detach().numpy(), 1.0)  # k(t, t) = 1


@settings(max_examples=40, deadline=None)
@given(omega=omegas, ts=times)
def test_time_kernel_gram_is_positive_definite(omega: float, ts: list[float]) -> None:
    t = torch.tensor(ts, dtype=F64).unsqueeze(-1)
    K = time_kernel(omega).forward(t, t).detach()
    assert torch.allclose(K, K.T)
    assert torch.linalg.eigvalsh(K).min() > -1e-10


def test_time_kernel_decays_monotonically_and_matches_exponential_form() -> None:
    k = time_kernel(0.3)
    t0 = torch.zeros(1, 1, dtype=F64)
    ts = torch.linspace(0, 5, 11, dtype=F64).unsqueeze(-1)
    vals = k.forward(t0, ts).detach().reshape(-1)
    assert torch.all(vals[1:] < vals[:-1])
    # (1 - omega)^{|dt|/2} = exp(-|dt| / l_t) with l_t = -2 / log(1 - omega)
    l_t = -2.0 / math.log(1 - 0.3)
    assert torch.allclose(vals, torch.exp(-ts.reshape(-1) / l_t))
    assert math.isclose(float(k.time_lengthscale.detach()), l_t, rel_tol=1e-12)


def test_omega_parameterisation_round_trips_and_rejects_bad_values() -> None:
    for omega in (1e-6, 0.1, 0.5, 0.9, 1 - 1e-9):
        k = time_kernel(omega)
        assert math.isclose(float(k.omega.detach()), omega, rel_tol=1e-9)
    # omega extremely close to 1 stays representable through rho
    assert float(rho_to_omega(torch.tensor(60.0, dtype=F64))) == 1.0
    assert math.isclose(float(omega_to_rho(0.5)), math.log(2.0))
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError):
            TimeDecayKernel().omega = bad
    with pytest.raises(ValueError):
        TimeDecayKernel().forward(torch.zeros(3, 2), torch.zeros(3, 2))


def test_sorted_rbf_is_the_se_kernel_of_sorted_inputs() -> None:
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(5, 3, generator=g, dtype=F64), torch.rand(4, 3, generator=g, dtype=F64)
    k = SortedRBFKernel(sort=True).to(F64)
    k.lengthscale = torch.tensor(0.37, dtype=F64)
    sa, sb = np.sort(a.numpy(), axis=1), np.sort(b.numpy(), axis=1)
    sq = ((sa[:, None, :] - sb[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(k.forward(a, b).detach().numpy(), np.exp(-sq / (2 * 0.37**2)), rtol=1e-10)


def test_coordinate_scale_stretches_the_sorted_arm_then_sorts_again() -> None:
    """``k = exp(-||sort(D sort(a)) - sort(D sort(b))||^2 / (2 l^2))``; unsorted: ``D a`` only."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.rand(5, 3, generator=g, dtype=F64), torch.rand(4, 3, generator=g, dtype=F64)
    scale = np.array([4.0, 2.0, 1.0])
    for sort in (True, False):
        k = SortedRBFKernel(sort=sort, coordinate_scale=scale.tolist()).to(F64)
        k.lengthscale = torch.tensor(0.6, dtype=F64)
        phi = (lambda x: np.sort(np.sort(x, axis=1) * scale, axis=1)) if sort else (lambda x: x * scale)
        sa, sb = phi(a.numpy()), phi(b.numpy())
        sq = ((sa[:, None, :] - sb[None, :, :]) ** 2).sum(-1)
        np.testing.assert_allclose(k.forward(a, b).detach().numpy(), np.exp(-sq / (2 * 0.6**2)), rtol=1e-10)
    for bad in ([1.0, 0.0, 1.0], [1.0, float("nan"), 1.0], [[1.0, 1.0, 1.0]]):
        with pytest.raises(ValueError, match="coordinate_scale must be a vector of finite numbers > 0"):
            SortedRBFKernel(coordinate_scale=bad)
    with pytest.raises(ValueError, match="coordinate_scale has 2 entries for arms of 3 coordinates"):
        SortedRBFKernel(coordinate_scale=[1.0, 2.0]).to(F64).forward(a, b)
    with pytest.raises(ValueError, match="one entry per arm coordinate"):
        BanditGP(3, coordinate_scale=[1.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_arm=st.integers(2, 6), stretch=st.booleans())
def test_sorted_kernel_is_permutation_invariant_and_unsorted_is_not(seed: int, n_arm: int, stretch: bool) -> None:
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(6, n_arm, generator=g, dtype=F64)
    b = torch.rand(5, n_arm, generator=g, dtype=F64)
    perm_a = torch.stack([row[torch.randperm(n_arm, generator=g)] for row in a])
    perm_b = torch.stack([row[torch.randperm(n_arm, generator=g)] for row in b])
    scale = (1.0 + 4.0 * torch.rand(n_arm, generator=g, dtype=F64)).tolist() if stretch else None
    sorted_k = SortedRBFKernel(sort=True, coordinate_scale=scale).to(F64)
    assert torch.allclose(sorted_k.forward(a, b), sorted_k.forward(perm_a, perm_b), atol=1e-14)
    # a reversed arm is a different point for the unsorted kernel
    plain = SortedRBFKernel(sort=False).to(F64)
    rev = a.flip(-1)
    assert not torch.allclose(plain.forward(a, b), plain.forward(rev, b))
    assert torch.allclose(sorted_k.forward(a, b), sorted_k.forward(rev, b), atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_arm=st.integers(1, 5),
    lengthscale=st.floats(0.05, 3.0),
    omega=st.floats(0.01, 0.99),
    sort=st.booleans(),
)
def test_product_kernel_gram_is_psd(seed: int, n_arm: int, lengthscale: float, omega: float, sort: bool) -> None:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(15, n_arm + 1, generator=g, dtype=F64)
    gp = BanditGP(n_arm, sort=sort, hyperparameters=Hyperparameters(lengthscale, float(omega_to_rho(omega)), 0.1))
    K = gp.covar(X, X).detach()
    assert torch.allclose(K, K.T, atol=1e-14)
    assert torch.allclose(torch.diagonal(K), torch.ones(15, dtype=F64))
    assert torch.linalg.eigvalsh(K).min() > -1e-9


def test_sorting_inside_the_kernel_passes_gradients() -> None:
    k = SortedRBFKernel(sort=True).to(F64)
    x = torch.tensor([[0.8, 0.2]], dtype=F64, requires_grad=True)
    y = torch.tensor([[0.1, 0.5]], dtype=F64)
    k.forward(x, y).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
