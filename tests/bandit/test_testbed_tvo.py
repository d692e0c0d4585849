"""The test bed's cases of the TVO's form: their optimum is the best arm, their constants are what
the calibration gives, their integrands are what they claim (closed form, recorded, moving)."""
from __future__ import annotations

import itertools

import pytest
import torch

from tvolib.bandit import RandomSchedule
from tvolib.bandit.oracle import best_regrets
from tvolib.bandit.testbed import CASES, RANDOM_REGRET, run_case
from tvolib.bandit.testbed_tvo import (CALIBRATION, D_MAX, HIDDEN_REGRET, INTEGRANDS, STEP_CALIBRATION, TAU,
                                       TVO_CASES, TvoCase, _bias_only, best_of_d, calibrate, integrand_values,
                                       optimum)
from tvolib.models.linear_gaussian import LinearGaussian

pytestmark = pytest.mark.usefixtures("one_torch_thread")

POINTS = [name for name, case in TVO_CASES.items() if case.metric == "points"]
STEP = [name for name, case in TVO_CASES.items() if case.metric == "step"]


def test_the_cases_are_in_the_test_bed_and_cover_stationary_moving_d5_d10_and_step():
    assert set(TVO_CASES) <= set(CASES)
    kinds = {(case.d, case.moving) for case in TVO_CASES.values() if case.metric == "points"}
    assert kinds == {(5, False), (5, True), (10, False), (10, True)}
    assert {TVO_CASES[name].d for name in STEP} == {3, 5}
    assert {case.trend for case in TVO_CASES.values()} >= {"strong", "quick", "mild"}


def test_the_loss_is_the_left_sum_gap_plus_the_hidden_cost():
    """Against the linear-Gaussian model's own exact TVO: gap = log p(x) - left sum, per data point."""
    case = TvoCase("t", 3, "lg", lam=0.7, scale=1.0, kappa=0.1)
    lg = LinearGaussian(a=3.0, s=0.3)
    x = INTEGRANDS["lg"].x
    arm = [0.05, 0.3]
    with torch.no_grad():
        gap = float((lg.log_px(x) - lg.exact_tvo(x, [0.0] + arm)).mean())
    cost = sum(0.7 * torch.exp(torch.tensor(-b / TAU)).item() + 0.1 for b in arm)
    assert float(case.loss(arm, 0.5)) == pytest.approx(gap + cost, rel=1e-8)  # float64, two code paths
    assert float(case.loss(arm[::-1], 0.5)) == float(case.loss(arm, 0.5))  # an arm is a set of points


@pytest.mark.parametrize("name", ["lg", "lg-moving", "recorded", "recorded-end"])
def test_each_integrand_rises_in_beta_and_its_integral_is_its_area(name):
    integrand = INTEGRANDS[name]
    grid = torch.linspace(0, 1, 20001, dtype=torch.float64)
    for p in (0.0, 0.5, 1.0):
        f = integrand.values(grid, p)
        assert bool((f.diff() >= -1e-4).all())  # recorded values are rounded to 1e-4
        assert float(torch.trapezoid(f, grid)) == pytest.approx(integrand.integral(p), abs=2e-3)


def test_the_optimum_beats_every_arm_of_a_grid():
    """d = 3: every pair of points on a 0.01 grid (and near 0, a log grid) has regret >= 0."""
    case = TvoCase("t", 3, "recorded", lam=0.5, scale=1.0)
    values = sorted(set([i / 100 for i in range(1, 100)] + [10 ** (-3 + k / 10) for k in range(20)]))
    arms = torch.tensor(list(itertools.combinations(values, 2)), dtype=torch.float64)
    for p in (0.3, 0.9):
        regrets = case.loss(arms, p) - optimum(case, p).loss
        assert float(regrets.min()) >= -1e-9
        assert case.regret(optimum(case, p).points, p) == 0.0


@pytest.mark.parametrize("name", POINTS)
def test_random_arms_have_the_calibrated_regret_and_the_bias_only_schedule_the_hidden_regret(name):
    """Random arms drawn by RandomSchedule (not the calibration's draws) have mean regret 0.6 at
    mid-run; the points that minimise the gap alone have HIDDEN_REGRET there."""
    case = TVO_CASES[name]
    schedule = RandomSchedule(case.d, seed=321)
    arms = torch.stack([schedule._random_arm() for _ in range(3000)]).to(torch.float64)
    mean = float(case.loss(arms, 0.5).mean() - optimum(case, 0.5).loss) / case.scale
    assert mean == pytest.approx(RANDOM_REGRET, abs=0.03)
    assert case.regret(_bias_only(case, 0.5), 0.5) == pytest.approx(HIDDEN_REGRET, abs=2e-3)


@pytest.mark.parametrize("name", POINTS + STEP)
def test_the_scale_is_what_the_calibration_gives(name):
    case = TVO_CASES[name]
    expected = calibrate(case.integrand, case.d, metric=case.metric, lam=case.lam,
                         kappa=case.kappa if case.metric == "step" else None)
    assert expected == {"lam": case.lam, "kappa": case.kappa, "scale": case.scale}


def test_the_hidden_cost_is_what_the_calibration_gives():
    """The bisection on lam, for one integrand and d (the others: same code, minutes on 2 cores)."""
    lam, scale = CALIBRATION["recorded-end"][5]
    assert calibrate("recorded-end", 5) == {"lam": lam, "kappa": 0.0, "scale": scale}


@pytest.mark.parametrize("name", STEP)
def test_a_step_case_is_best_at_its_d(name):
    case = TVO_CASES[name]
    deltas = best_regrets(case, range(2, D_MAX + 1))
    assert deltas[case.d] == 0.0 and min(v for d, v in deltas.items() if d != case.d) > 0.005
    assert len(optimum(case, 0.5).points) == case.d - 1
    # the cost per point sets d: equal margins over one point fewer and one more
    assert deltas[case.d - 1] == pytest.approx(deltas[case.d + 1], abs=1e-3)
    assert STEP_CALIBRATION[case.d][1] == case.kappa


def test_moving_integrands_move_the_optimum_towards_one_and_stationary_ones_do_not():
    for name in ("d5-tvo-lg-moving-strong", "d5-tvo-recorded-strong", "d10-tvo-recorded-strong"):
        case = TVO_CASES[name]
        start, end = optimum(case, 0.5).points, optimum(case, 1.0).points
        assert float(end[0] - start[0]) > 0.01, (name, start, end)  # the first point rises over the second half
    case = TVO_CASES["d5-tvo-lg-strong"]
    assert torch.equal(optimum(case, 0.1).points, optimum(case, 0.9).points)
    # the recorded run's bias-only first point moves as q improves (the module docstring's numbers)
    recorded = TvoCase("t", 5, "recorded", lam=0.0, scale=1.0)
    firsts = [round(float(_bias_only(recorded, e / 60)[0]), 3) for e in (5, 30, 60)]
    assert firsts == [0.015, 0.038, 0.061]


def test_a_tvo_case_runs_through_run_case_with_a_regret_in_its_units():
    case = TVO_CASES["d5-tvo-lg-strong"]
    still = run_case(case, lambda seed: _Fixed(optimum(case, 0.5).points.tolist()), 0)
    assert still.regret == pytest.approx(0.0, abs=1e-12) and still.distance == pytest.approx(0.0, abs=1e-12)
    random = [run_case(case, lambda seed: RandomSchedule(5, window=2, seed=seed), s).regret for s in range(3)]
    assert 0.2 < sum(random) / 3 < 1.0


def test_bad_cases_and_arms_are_refused():
    with pytest.raises(ValueError, match="integrand must be one of"):
        TvoCase("t", 5, "bogus", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"d must be an int >= 2"):
        TvoCase("t", 1, "lg", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"d must be an int in \[2, 12\]"):
        TvoCase("t", 13, "lg", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"epochs must be an int >= 2"):
        TvoCase("t", 5, "lg", 1.0, 1.0, epochs=0)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        TvoCase("t", 5, "lg", 1.0, 0.0)
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        TvoCase("t", 5, "lg", float("nan"), 1.0)
    with pytest.raises(ValueError, match="compares arms of 4 interior points"):
        TVO_CASES["d5-tvo-lg-strong"].regret([0.1, 0.2], 0.5)
    with pytest.raises(ValueError, match=r"interior point in \[0, 1\]"):
        TVO_CASES["d5-tvo-lg-strong"].regret([0.1, 0.2, 0.3, 1.5], 0.5)
    with pytest.raises(ValueError, match="integrand must be one of"):
        integrand_values("bogus", [0.5], 0.5)
    with pytest.raises(ValueError, match=r"d must be an integer in \[2, 12\]"):
        best_of_d(TVO_CASES["d5-tvo-lg-step-mild"], 13, 0.5)


class _Fixed(RandomSchedule):
    """Always the same arm (a stand-in schedule driven through the public API)."""

    def __init__(self, arm):
        super().__init__(len(arm) + 1, window=2)
        self._arm = list(arm)

    def _choose_next(self):
        return self._empty_decision("random")
