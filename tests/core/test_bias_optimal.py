"""The bias-optimal schedule (tvolib.bias_optimal): its points minimise the exact left-sum gap."""
from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize

from tvolib.bias_optimal import (BiasOptimalSchedule, bias_optimal_points, default_grid, left_sum_gap,
                                 mean_integrand)
from tvolib.tvo import linear, log_uniform, snis_integrand, validate_schedule

F64 = torch.float64


def _steep(k: float):
    """f = -exp(-k beta): rises steeply near 0 as real integrands do; int_0^1 f = (exp(-k) - 1) / k."""
    return (lambda b: -np.exp(-k * np.asarray(b, dtype=float))), (math.exp(-k) - 1) / k


def _exact_gap(f, integral: float, betas) -> float:
    b = np.asarray(betas, dtype=float)
    nodes = np.append(b, 1.0)
    return integral - float(np.sum(np.diff(nodes) * f(b)))


def _objective(grid, f, cost, index) -> float:
    """The quantity the dynamic programme maximises, for grid indices ``index`` (first 0)."""
    nodes = list(index) + [len(grid) - 1]
    return sum((grid[nodes[j + 1]] - grid[nodes[j]]) * f[nodes[j]] - cost[nodes[j]] for j in range(len(index)))


# ---- left_sum_gap --------------------------------------------------------------------------------


def test_gap_of_a_linear_integrand_is_half_the_sum_of_squared_steps():
    """f = a + c beta: gap = c / 2 sum_j delta_j^2, exact for points on or off the grid."""
    grid = torch.linspace(0, 1, 7, dtype=F64)
    f = 2.0 + 3.0 * grid
    for betas in ([0.0], [0.0, 0.5], [0.0, 0.1, 0.37, 0.8]):
        deltas = np.diff(np.append(betas, 1.0))
        assert float(left_sum_gap(betas, grid, f)) == pytest.approx(1.5 * np.sum(deltas**2), abs=1e-14)


def test_gap_converges_to_the_exact_gap_of_a_closed_form_integrand():
    f, integral = _steep(10.0)
    grid = torch.linspace(0, 1, 20001, dtype=F64)
    betas = log_uniform(5).tolist()
    assert float(left_sum_gap(betas, grid, torch.as_tensor(f(grid)))) == pytest.approx(
        _exact_gap(f, integral, betas), abs=1e-7)


def test_gap_is_zero_for_a_flat_integrand_and_positive_for_a_rising_one():
    grid = torch.linspace(0, 1, 5, dtype=F64)
    assert float(left_sum_gap([0.0, 0.3], grid, torch.full((5,), -4.0, dtype=F64))) == pytest.approx(0.0, abs=1e-15)
    assert float(left_sum_gap([0.0, 0.3], grid, grid**0.5)) > 0


# ---- bias_optimal_points: analytic cases -----------------------------------------------------------


def test_one_point_is_the_elbo():
    grid = torch.linspace(0, 1, 5, dtype=F64)
    assert bias_optimal_points(1, grid, grid**2).tolist() == [0.0]


@pytest.mark.parametrize("d", [2, 3, 4, 5, 10])
def test_a_linear_integrand_gives_equal_steps(d):
    """f = a + c beta, c > 0: the gap c / 2 sum delta_j^2 is smallest for equal steps, linear(d)."""
    grid = torch.linspace(0, 1, 6 * d + 1, dtype=F64)
    points = bias_optimal_points(d, grid, -3.0 + 0.7 * grid)
    assert torch.allclose(points, linear(d), atol=1e-12)


@pytest.mark.parametrize("k", [2.0, 10.0, 40.0])
def test_two_points_solve_the_first_order_condition(k):
    """d = 2: maximise b f(0) + (1 - b) f(b); the optimum solves f(0) - f(b) + (1 - b) f'(b) = 0,
    and the grid's answer is within one grid step of it."""
    f, _ = _steep(k)
    b_star = brentq(lambda b: f(0.0) - f(b) + (1 - b) * k * math.exp(-k * b), 1e-9, 1 - 1e-9)
    grid = torch.linspace(0, 1, 2001, dtype=F64)
    (zero, b1) = bias_optimal_points(2, grid, torch.as_tensor(f(grid))).tolist()
    assert zero == 0.0 and abs(b1 - b_star) <= 1 / 2000


def test_steep_integrands_put_points_near_zero():
    f, _ = _steep(40.0)
    grid = torch.linspace(0, 1, 1001, dtype=F64)
    points = bias_optimal_points(5, grid, torch.as_tensor(f(grid)))
    assert points[1] < 0.05 and points[-1] < 0.5


# ---- bias_optimal_points: exact on the grid (brute force) -------------------------------------------


@st.composite
def _problems(draw):
    G = draw(st.integers(3, 9))
    interior = draw(st.lists(st.floats(0.01, 0.99), min_size=G - 2, max_size=G - 2, unique=True))
    grid = [0.0, *sorted(interior), 1.0]
    if len(set(grid)) < G:
        grid = np.linspace(0, 1, G).tolist()
    values = draw(st.lists(st.floats(-50, 50), min_size=G, max_size=G))
    monotone = draw(st.booleans())
    f = sorted(values) if monotone else values
    cost = draw(st.one_of(st.none(), st.lists(st.floats(0, 5), min_size=G, max_size=G)))
    d = draw(st.integers(1, G - 1))
    return d, grid, f, cost


@settings(max_examples=150, deadline=None)
@given(_problems())
def test_the_dynamic_programme_matches_brute_force_over_all_subsets(problem):
    """Every arrangement of d - 1 grid points in (0, 1): none beats the dynamic programme's."""
    d, grid, f, cost = problem
    points = bias_optimal_points(d, torch.tensor(grid, dtype=F64), torch.tensor(f, dtype=F64),
                                 cost=None if cost is None else torch.tensor(cost, dtype=F64))
    validate_schedule(points)
    assert len(points) == d and set(points.tolist()) <= set(grid)
    c = [0.0] * len(grid) if cost is None else cost
    index = [grid.index(p) for p in points.tolist()]
    brute = max(_objective(grid, f, c, (0, *rest)) for rest in itertools.combinations(range(1, len(grid) - 1), d - 1))
    flat = cost is None and max(f) - min(f) <= 1e-9 * max(1.0, max(abs(v) for v in f))
    if not flat:  # a flat f without costs: every arrangement is optimal (tested below)
        assert _objective(grid, f, c, index) >= brute - 1e-9 * (1 + abs(brute))
    if cost is None:  # no cost: the largest left sum is the smallest gap
        gaps = [float(left_sum_gap([grid[i] for i in (0, *rest)], grid, f))
                for rest in itertools.combinations(range(1, len(grid) - 1), d - 1)]
        assert float(left_sum_gap(points, grid, f)) <= min(gaps) + 1e-9 * (1 + max(abs(v) for v in f))


def test_costs_move_points_away_from_expensive_values():
    """A cost on the small betas (e.g. their gradient variance) pushes the first point up."""
    f, _ = _steep(20.0)
    grid = torch.linspace(0, 1, 201, dtype=F64)
    values = torch.as_tensor(f(grid))
    free = bias_optimal_points(3, grid, values)
    costly = bias_optimal_points(3, grid, values, cost=torch.where(grid < 0.1, 1.0, 0.0).to(F64))
    assert free[1] < 0.1 <= costly[1]


# ---- bias_optimal_points: the continuous optimum -----------------------------------------------------


def _continuous_optimum(f, integral, d, start):
    """Minimise the exact gap over 0 < b_1 < ... < b_{d-1} < 1 (L-BFGS-B on the points in their box)."""
    result = minimize(lambda b: _exact_gap(f, integral, np.concatenate([[0.0], np.sort(b)])), start[1:],
                      method="L-BFGS-B", bounds=[(1e-9, 1 - 1e-9)] * (d - 1), options={"ftol": 1e-15, "gtol": 1e-12})
    return np.concatenate([[0.0], np.sort(result.x)])


def _linear_gaussian(toy, x):
    def f(b):
        return toy.dlogZ_dbeta(x, torch.as_tensor(np.atleast_1d(b), dtype=F64)).mean(dim=1).detach().numpy()
    return f, float(toy.log_px(x).mean().detach())


@pytest.mark.parametrize("d", [3, 5, 10])
@pytest.mark.parametrize("integrand", ["steep", "linear_gaussian"])
def test_grid_optimum_is_within_the_grid_resolution_of_the_continuous_optimum(integrand, d, toy, x):
    """The dynamic programme's gap is no larger than that of the continuous optimum's points rounded to
    the grid (it is the best on the grid), and no smaller than the continuous optimum's (up to the
    optimiser's tolerance); its points lie within two grid steps of the continuous optimum's."""
    f, integral = _steep(15.0) if integrand == "steep" else _linear_gaussian(toy, x)
    if integrand == "linear_gaussian":  # int_0^1 f = log p(x) - log Z_0 = log p(x)
        assert integral == pytest.approx(float(torch.trapezoid(torch.as_tensor(f(np.linspace(0, 1, 20001))),
                                                               dx=1 / 20000)), abs=1e-8)
    grid = torch.linspace(0, 1, 1001, dtype=F64)
    points = bias_optimal_points(d, grid, torch.as_tensor(f(grid.numpy())))
    best = _continuous_optimum(f, integral, d, log_uniform(d, beta1=0.05).numpy())
    rounded = np.round(best * 1000) / 1000
    gap, continuous = _exact_gap(f, integral, points.numpy()), _exact_gap(f, integral, best)
    assert continuous - 1e-10 <= gap <= _exact_gap(f, integral, rounded) + 1e-12
    assert np.abs(points.numpy() - best).max() <= 2 / 1000


# ---- ties and bad input -----------------------------------------------------------------------------


def test_a_flat_integrand_gives_the_grid_points_nearest_linear():
    grid = torch.linspace(0, 1, 11, dtype=F64)
    points = bias_optimal_points(5, grid, torch.full((11,), -7.5, dtype=F64))
    assert points.tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    again = bias_optimal_points(5, grid, torch.full((11,), -7.5, dtype=F64))
    assert torch.equal(points, again)


def test_flat_stretches_give_a_valid_deterministic_schedule():
    """f flat on [0.3, 1]: many arrangements tie; the answer is strictly increasing and repeatable."""
    grid = torch.linspace(0, 1, 21, dtype=F64)
    f = torch.clamp(grid, max=0.3)
    points = bias_optimal_points(6, grid, f)
    validate_schedule(points)
    assert torch.equal(points, bias_optimal_points(6, grid, f.clone()))


def test_as_many_points_as_the_grid_holds():
    grid = torch.tensor([0.0, 0.2, 0.7, 1.0], dtype=F64)
    assert bias_optimal_points(3, grid, grid).tolist() == [0.0, 0.2, 0.7]


@pytest.mark.parametrize("kwargs, match", [
    ({"d": 0}, "d .the number of left points"),
    ({"d": 4}, "at most the 3 points"),
    ({"d": 2.0}, "d .the number of left points"),
    ({"beta_grid": [0.1, 0.5, 1.0]}, "beta_grid must be"),
    ({"beta_grid": [0.0, 0.5, 0.9]}, "beta_grid must be"),
    ({"beta_grid": [0.0, 0.6, 0.5, 1.0]}, "beta_grid must be"),
    ({"f_values": [0.0, 1.0]}, "f_values must hold 4 finite numbers"),
    ({"f_values": [0.0, float("nan"), 1.0, 2.0]}, "f_values must hold 4 finite numbers"),
    ({"cost": [0.0, 1.0, 2.0]}, "cost must hold 4 finite numbers"),
])
def test_bad_input_is_named(kwargs, match):
    args = {"d": 2, "beta_grid": [0.0, 0.2, 0.7, 1.0], "f_values": [0.0, 1.0, 2.0, 3.0], **kwargs}
    cost = args.pop("cost", None)
    with pytest.raises(ValueError, match=match):
        bias_optimal_points(args["d"], args["beta_grid"], args["f_values"], cost=cost)


def test_gap_rejects_a_bad_schedule():
    with pytest.raises(ValueError, match="betas must be"):
        left_sum_gap([0.0, 1.0], [0.0, 1.0], [0.0, 1.0])


# ---- default_grid and mean_integrand ------------------------------------------------------------------


def test_default_grid_is_log_spaced_near_zero_and_fine_near_one():
    grid = default_grid()
    assert grid[0] == 0 and grid[-1] == 1 and bool((grid.diff() > 0).all())
    assert grid[1].item() == pytest.approx(1e-4) and float(grid.diff().max()) <= 0.01 + 1e-12
    small = grid[(grid > 0) & (grid < 0.01)]
    assert float((small[1:] / small[:-1]).max()) <= 10 ** (1 / 40) * (1 + 1e-6)  # 40 points a decade
    with pytest.raises(ValueError, match="beta_min must lie in"):
        default_grid(beta_min=1.5)


def test_mean_integrand_is_the_snis_integrand_averaged_over_data_points():
    log_w = torch.randn(7, 5, dtype=F64) * 3
    betas = torch.tensor([0.0, 0.3, 1.0], dtype=F64)
    assert torch.allclose(mean_integrand(log_w, betas), snis_integrand(log_w, betas).mean(dim=1))
    assert mean_integrand(log_w, betas)[0].item() == pytest.approx(log_w.mean().item())  # beta = 0: the ELBO
    with pytest.raises(ValueError, match="log_w must be finite"):
        mean_integrand(torch.tensor([[0.0], [-math.inf]]), betas)


# ---- BiasOptimalSchedule ------------------------------------------------------------------------------


def _toy_log_weights(toy, x, S, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        log_p, log_q = toy.log_joint_and_q(x, S, reparam=False)
    return log_p - log_q


def test_the_schedule_trains_the_exact_optimum_when_the_estimate_is_good(toy, x):
    """Linear-Gaussian toy: with S = 10000 samples the SNIS integrand is nearly exact, and the schedule is
    the exact integrand's grid optimum; with S = 100 its exact gap is within 0.1% of the optimum's."""
    grid = default_grid()
    with torch.no_grad():
        exact = bias_optimal_points(5, grid, toy.dlogZ_dbeta(x, grid).mean(dim=1))

        def gap(betas):
            return float((toy.log_px(x).mean() - toy.exact_tvo(x, betas).mean()).detach())

    for S, rel in ((10_000, 0.0), (100, 1e-3)):
        schedule = BiasOptimalSchedule(5)
        log_w = _toy_log_weights(toy, x, S)
        schedule.step(1, log_weights=lambda: log_w)
        assert gap(schedule.current()) <= gap(exact) * (1 + rel) + 1e-12
        assert gap(schedule.current()) < 0.6 * gap(log_uniform(5))  # the default log schedule's bias is larger


def test_the_schedule_updates_on_its_cadence_and_records_its_gaps(toy, x):
    schedule = BiasOptimalSchedule(4, update_every=2, initial="linear")
    assert schedule.current().tolist() == linear(4).tolist() and schedule.d == 4
    calls = []

    def log_weights():
        calls.append(1)
        return _toy_log_weights(toy, x, 200, seed=len(calls))

    for epoch in range(0, 5):
        schedule.step(epoch, log_weights=log_weights)
    records = schedule.history()
    assert [r["epoch"] for r in records] == [2, 4] and len(calls) == 2
    grid = schedule.grid
    for r in records:
        validate_schedule(r["betas"])
        assert set(r["betas"]) <= set(grid.tolist()) and r["gap"] >= 0 and isinstance(r["gap_before"], float)
    f = mean_integrand(_toy_log_weights(toy, x, 200, seed=2), grid)
    assert records[1]["gap_before"] == pytest.approx(float(left_sum_gap(records[0]["betas"], grid, f)))
    with pytest.raises(ValueError, match="needs log_weights"):
        schedule.step(6)
    schedule.step(5)  # not an update epoch: nothing asked


def test_state_round_trips_and_bad_states_are_named(toy, x):
    schedule = BiasOptimalSchedule(3)
    log_w = _toy_log_weights(toy, x, 100)
    schedule.step(1, log_weights=lambda: log_w)
    buffer = io.BytesIO()
    torch.save(schedule.state_dict(), buffer)
    buffer.seek(0)
    restored = BiasOptimalSchedule(3)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(restored.current(), schedule.current()) and restored.history() == schedule.history()
    state = schedule.state_dict()
    with pytest.raises(ValueError, match="has no key 'history'"):
        BiasOptimalSchedule(3).load_state_dict({"betas": state["betas"]})
    with pytest.raises(ValueError, match="holds a schedule of d=3, this schedule has d=4"):
        BiasOptimalSchedule(4).load_state_dict(state)
    with pytest.raises(ValueError, match="state key 'betas'"):
        BiasOptimalSchedule(3).load_state_dict({**state, "betas": [0.0, 0.5, 0.4]})
    with pytest.raises(ValueError, match="state key 'history' must be a list"):
        BiasOptimalSchedule(3).load_state_dict({**state, "history": [{"epoch": 1, "betas": [0.0, 0.5, 0.7]}]})


@pytest.mark.parametrize("kwargs, match", [({"d": 0}, "d .the number"), ({"d": 259}, "at most 258"),
                                           ({"d": 3, "update_every": 0}, "update_every"),
                                           ({"d": 3, "initial": "moments"}, "initial must be one of")])
def test_bad_schedule_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BiasOptimalSchedule(**kwargs)
