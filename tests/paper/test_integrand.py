"""Fig 1's curves and sums: exact answers, the bracket of Eq. 3-5, and Fig 1's pinned numbers."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.models import GaussianVAE
from tvolib.paper import integrand
from tvolib.tvo import iwae_bound


def test_riemann_sums_of_a_line_are_exact():
    beta = np.linspace(0, 1, 101)
    sums = integrand.riemann_sums(beta, -10 + 4 * beta, [0.0, 0.5])  # integral -8
    assert sums.left == pytest.approx(-10 * 0.5 + -8 * 0.5)
    assert sums.right == pytest.approx(-8 * 0.5 + -6 * 0.5)
    assert (sums.elbo, sums.area) == pytest.approx((-10, -8))
    assert sums.nodes.tolist() == [0.0, 0.5, 1.0] and sums.heights.tolist() == pytest.approx([-10, -8, -6])


@settings(max_examples=40)
@given(st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8, unique=True), st.floats(0.1, 5.0))
def test_riemann_sums_bracket_the_area_of_increasing_integrands(points, scale):
    beta = np.linspace(0, 1, 401)
    sums = integrand.riemann_sums(beta, -20 + scale * np.sqrt(beta), [0.0] + sorted(points))
    assert sums.elbo <= sums.left + 1e-9
    assert sums.left <= sums.area + 1e-6 <= sums.right + 2e-6


def test_riemann_sums_reject_bad_input():
    beta = np.linspace(0, 1, 11)
    with pytest.raises(ValueError, match="schedule"):
        integrand.riemann_sums(beta, beta, [0.2, 0.5])
    with pytest.raises(ValueError, match="cover"):
        integrand.riemann_sums(beta[2:], beta[2:], [0.0, 0.5])
    with pytest.raises(ValueError, match="equal length"):
        integrand.riemann_sums(beta, beta[1:], [0.0, 0.5])


def test_linear_gaussian_curve_area_is_log_px_and_snis_agrees():
    beta = np.linspace(0, 1, 4001)
    curve = integrand.linear_gaussian_curve(beta, S=2000)
    sums = integrand.riemann_sums(curve.beta, curve.values, [0.0, 0.1, 0.4])
    assert sums.area == pytest.approx(curve.log_px, abs=1e-3)  # Eq. 3: int_0^1 dlogZ = log p(x)
    assert sums.elbo < sums.left < curve.log_px < sums.right
    points, estimate = curve.estimate
    assert np.abs(estimate - np.interp(points, beta, curve.values)).max() < 0.5
    assert integrand.integrand_grid([0.0, 0.0125], 5).tolist() == [0.0, 0.0125, 0.25, 0.5, 0.75, 1.0]


def test_fig1_closed_form_numbers_are_unchanged():
    """Fig 1's closed-form panel on a fixed schedule, pinned to the last digit."""
    schedule = [0.0, 0.0125, 0.05, 0.2, 0.6]
    curve = integrand.linear_gaussian_curve(integrand.integrand_grid(schedule, 201))
    sums = integrand.riemann_sums(curve.beta, curve.values, schedule)
    assert (sums.left, sums.right, sums.elbo, sums.area) == (
        -2.8849745151014354, -1.5691914440880639, -10.73241846499424, -2.0492490827931147)


def test_model_curve_area_is_the_iwae_bound_of_the_same_samples():
    torch.manual_seed(0)
    model = GaussianVAE(data_dim=12, hidden=(8,), latent_dim=2)
    x = (torch.rand(9, 12, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    beta = np.linspace(0.0, 1.0, 2001)
    state = torch.random.get_rng_state()
    curve = integrand.model_curve(model, x, beta, S=30, batch_size=4, seed=3)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is untouched
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(3)
        iwae = [iwae_bound((lambda p, q: (p - q).double())(*model.log_joint_and_q(x[i:i + 4], 30, reparam=False)))
                for i in range(0, 9, 4)]
    assert curve.log_px == pytest.approx(float(torch.cat(iwae).mean()), rel=1e-12)
    # d/dbeta log mean_s w_s^beta is the SNIS integrand: the area under the curve is the IWAE bound.
    assert np.trapezoid(curve.values, beta) == pytest.approx(curve.log_px, abs=1e-3)
    assert np.all(np.diff(curve.values) >= -1e-9)  # its derivative is a variance: non-decreasing
