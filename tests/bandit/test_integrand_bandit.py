"""The integrand bandit (protocol "integrand"): its known part, its GP over points, and the schedule
with everything the other protocols work with (resume, replay, reward_posterior, stacks, rules)."""
from __future__ import annotations

import io
import math
import pickle

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit import GPBanditSchedule, IntegrandBanditSchedule, replay, reward_posterior
from tvolib.bandit.known import integrand_grid, left_sums, predicted_gain, read_integrand
from tvolib.bandit.model import Hyperparameters
from tvolib.bandit.pointwise import PointwiseGP, interpolation_weights, logit_unit, pointwise_data
from tvolib.bandit.state import check_history
from tvolib.bias_optimal import bias_optimal_points, left_sum_gap

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def steep(betas: torch.Tensor) -> torch.Tensor:
    """An integrand that rises steeply near beta = 0, as real ones do."""
    return -5.0 * torch.exp(-torch.as_tensor(betas, dtype=torch.float64) / 0.05)


def _run(schedule, epochs: int, *, integrand=steep, first: int = 1, evidence: float = -100.0, cost: float = 1.0):
    """Step ``schedule`` over epochs ``first..epochs`` of a small synthetic run (reports ``L_0`` first when
    ``first == 1``) whose gain is minus the TVO's bias of ``integrand`` and a cost of points below 0.05,
    with noise seeded by the epoch; returns the schedule and the last evidence."""
    grid = integrand_grid(0.001, 0.95)
    if first == 1:
        schedule.step(0, evidence=evidence)
    for epoch in range(first, epochs + 1):
        arm = schedule.current()[1:]
        gain = float(left_sums(arm[None], grid, steep(grid))[0]) - cost * float(torch.exp(-arm / 0.02).sum())
        noise = float(torch.randn((), generator=torch.Generator().manual_seed(epoch), dtype=torch.float64))
        evidence += 1.0 + gain + 0.05 * noise
        schedule.step(epoch, evidence=evidence, **({} if integrand is None else {"integrand": integrand}))
    return schedule, evidence


# ----- the known part -----------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(points=st.lists(st.floats(0.002, 0.94), min_size=1, max_size=6, unique=True))
def test_left_sums_are_the_integral_less_the_left_sum_gap(points):
    grid = integrand_grid(0.001, 0.95)
    f = steep(grid)
    betas = [0.0] + sorted(points)
    gap = float(left_sum_gap(betas, grid, f))
    total = float(left_sums(torch.tensor([sorted(points)], dtype=torch.float64), grid, f)[0])
    assert total == pytest.approx(float(torch.trapezoid(f, grid)) - gap, abs=1e-12)


def test_the_predicted_gain_is_zero_at_the_bias_optimum_and_negative_elsewhere():
    grid = integrand_grid(0.001, 0.95)
    f = steep(grid)
    best = bias_optimal_points(5, grid, f)[1:]
    others = torch.sort(torch.rand(50, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64), 1).values
    gain = predicted_gain(torch.cat([best[None], 0.001 + 0.949 * others]), grid, f)
    assert gain[0] == 0.0 and bool((gain[1:] < 0).all())


def test_the_integrand_is_read_from_a_callable_or_from_log_weights_and_checked():
    grid = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    log_w = torch.tensor([[0.0, -2.0], [-2.0, 0.0]], dtype=torch.float64)
    assert read_integrand(grid, log_weights=lambda: log_w)[0].item() == pytest.approx(-1.0)
    assert read_integrand(grid) is None
    with pytest.raises(ValueError, match="3 finite numbers"):
        read_integrand(grid, integrand=lambda b: torch.tensor([0.0, float("nan"), 1.0]))


# ----- the GP over points -------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(u=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_interpolation_weights_are_a_mean_of_hat_functions(u):
    w = interpolation_weights(torch.tensor([u], dtype=torch.float64))
    assert w.shape == (1, 41) and float(w.sum()) == pytest.approx(1.0) and bool((w >= 0).all())
    nodes = torch.linspace(0, 1, 41, dtype=torch.float64)
    assert float(w[0] @ nodes) == pytest.approx(sum(u) / len(u), abs=1e-12)  # linear functions are exact


def test_the_weight_of_the_known_part_is_its_least_squares_estimate():
    """Rewards y = 2 g + a small cost per point + noise: the profiled c is near 2, within its sd."""
    gen = torch.Generator().manual_seed(0)
    u = torch.rand(60, 4, generator=gen, dtype=torch.float64)
    g = -torch.rand(60, generator=gen, dtype=torch.float64)
    y = 2.0 * g + 0.1 * torch.sin(6 * u).mean(1) + 0.02 * torch.randn(60, generator=gen, dtype=torch.float64)
    gp = PointwiseGP(u, torch.linspace(0, 0.98, 60, dtype=torch.float64), g, y)
    gp.fit(torch.Generator().manual_seed(1))
    assert abs(gp.coefficient - 2.0) < 3 * math.sqrt(gp.coefficient_variance) + 0.02


def test_the_gp_learns_a_cost_per_point():
    """Rewards the mean over points of psi(u) = sin(2 pi u): the node posterior's mean follows psi."""
    gen = torch.Generator().manual_seed(2)
    u = torch.rand(80, 3, generator=gen, dtype=torch.float64)
    psi = lambda x: torch.sin(2 * math.pi * x)  # noqa: E731
    y = psi(u).mean(1) + 0.01 * torch.randn(80, generator=gen, dtype=torch.float64)
    gp = PointwiseGP(u, torch.linspace(0, 0.99, 80, dtype=torch.float64), torch.zeros(80, dtype=torch.float64), y)
    gp.fit(torch.Generator().manual_seed(3))
    mean, cov = gp.node_posterior()
    nodes = torch.linspace(0, 1, 41, dtype=torch.float64)
    centred = mean - mean.mean()  # a constant per point is the trend's to explain
    assert float(((centred - (psi(nodes) - psi(nodes).mean())) ** 2).mean().sqrt()) < 0.15
    assert bool((cov.diagonal() >= -1e-12).all())


# ----- the schedule -------------------------------------------------------------------------------
def test_the_integrand_preset_builds_its_own_schedule_and_checks_its_options():
    schedule = GPBanditSchedule(3, protocol="integrand", device="cpu")
    assert type(schedule) is IntegrandBanditSchedule and schedule.box == (0.05, 0.95)
    assert type(pickle.loads(pickle.dumps(schedule))) is IntegrandBanditSchedule
    assert type(GPBanditSchedule(3, protocol="tvolib", device="cpu")) is GPBanditSchedule
    with pytest.raises(ValueError, match="acquisition must be one of"):
        GPBanditSchedule(3, protocol="integrand", acquisition="ei", device="cpu")
    with pytest.raises(ValueError, match="'integrand' protocol's bandit"):
        IntegrandBanditSchedule(3, protocol="tvolib", device="cpu")
    with pytest.raises(ValueError, match="n_init_integrand"):
        IntegrandBanditSchedule(3, n_init_integrand=1, device="cpu")


def test_without_an_integrand_it_is_the_tvolib_protocol():
    """Reports of the evidence alone: every arm is the one tvolib's GP-UCB chooses on the same box."""
    ours, _ = _run(IntegrandBanditSchedule(3, window=1, seed=4, device="cpu"), 14, integrand=None)
    theirs, _ = _run(GPBanditSchedule(3, protocol="tvolib", window=1, seed=4, device="cpu"), 14, integrand=None)
    assert [r["next_arm"] for r in ours.history()] == [r["next_arm"] for r in theirs.history()]
    assert {r["source"] for r in ours.history()} == {"random", "gp"} and all(r["known"] is None for r in ours.history())


def test_with_an_integrand_it_starts_at_the_bias_optimum_and_learns_the_weight_of_the_bias():
    schedule, _ = _run(IntegrandBanditSchedule(3, window=1, seed=0, device="cpu"), 30)
    rows = schedule.history()
    best = bias_optimal_points(3, schedule.grid, steep(schedule.grid))[1:].tolist()
    assert rows[0]["next_arm"] == pytest.approx(best, abs=5e-5)  # the first round with an integrand
    assert [r["source"] for r in rows[:3]] == ["random", "random", "gp"]
    assert rows[-1]["coefficient"] == pytest.approx(1.0, abs=0.5)  # the reward is 1 x the left sum
    assert all(r["known"] <= 1e-9 for r in rows)
    check_history(rows, schedule=schedule)


def test_resume_replay_and_the_posterior_work_from_the_records(tmp_path):
    """A state saved mid-run resumes bit for bit; replay re-derives every arm from the rows (also read
    back from CSV); reward_posterior rebuilds a GP round's fit (its coefficient as recorded)."""
    whole, _ = _run(IntegrandBanditSchedule(4, window=1, seed=5, device="cpu"), 24)
    first, evidence = _run(IntegrandBanditSchedule(4, window=1, seed=5, device="cpu"), 12)
    torch.save(first.state_dict(), tmp_path / "bandit.pt")
    resumed = IntegrandBanditSchedule(4, window=1, seed=5, device="cpu")
    resumed.load_state_dict(torch.load(tmp_path / "bandit.pt", weights_only=True))
    resumed, _ = _run(resumed, 24, first=13, evidence=evidence)
    rows = whole.history()
    timing = ("fit_seconds", "acq_seconds")
    strip = lambda history: [{k: v for k, v in r.items() if k not in timing} for r in history]  # noqa: E731
    assert strip(resumed.history()) == strip(rows)
    csv = io.StringIO()
    pd.DataFrame(rows).to_csv(csv, index=False)
    csv.seek(0)
    back = pd.read_csv(csv)
    for history in (rows, back):
        assert replay(IntegrandBanditSchedule(4, window=1, seed=5, device="cpu"), history) == [r["next_arm"] for r in rows]
    gp_round = [r for r in rows if r["source"] == "gp"][-1]
    arms = torch.tensor([gp_round["next_arm"], [0.01, 0.2, 0.6]], dtype=torch.float64)
    mean, sd = reward_posterior(rows, gp_round["round"], arms, component="arm")
    mean_csv, sd_csv = reward_posterior(back, gp_round["round"], arms, component="arm")
    assert torch.allclose(mean, mean_csv, rtol=1e-9) and torch.allclose(sd, sd_csv, rtol=1e-9)
    assert bool((sd > 0).all()) and float(mean[0]) > float(mean[1])
    data = pointwise_data([r for r in rows if r["round"] <= gp_round["round"]], 0.05, 0.95, gp_round["t_pred"])
    gp = PointwiseGP(data["u"], data["t"], data["g"], data["y"])
    gp.condition(Hyperparameters(gp_round["lengthscale"], gp_round["rho"], gp_round["noise"],
                                 gp_round["trend_share"], gp_round["trend_lengthscale"]))
    assert gp.coefficient == gp_round["coefficient"]


def test_a_stack_steps_it_as_a_single_run_would():
    """Through step_schedules with a worker pool (the stacked trainer's path) the window's log weights
    are read in the caller and handed over: the rounds equal those of the schedule stepped alone."""
    from tvolib.stacked.bandits import StepPool, step_schedules

    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(10, 30, generator=gen, dtype=torch.float64) * (1 + e / 4) for e in range(9)]
    alone = IntegrandBanditSchedule(3, window=2, seed=1, device="cpu")
    stacked = IntegrandBanditSchedule(3, window=2, seed=1, device="cpu")
    with StepPool(workers=1) as pool:
        for epoch in range(9):
            evidence = -100.0 + epoch + 0.1 * math.sin(epoch)
            alone.step(epoch, evidence=evidence, log_weights=lambda e=epoch: weights[e])
            step_schedules([stacked], epoch, [evidence], log_weights=[lambda e=epoch: weights[e]], pool=pool)
    strip = lambda history: [{k: v for k, v in r.items() if k not in ("fit_seconds", "acq_seconds")}  # noqa: E731
                             for r in history]
    assert strip(stacked.history()) == strip(alone.history())
    assert any(r["source"] == "gp" for r in alone.history()) and alone.history()[0]["integrand"] is not None
