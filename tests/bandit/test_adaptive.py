"""The bandit that chooses d: its embedding, kernel, schedules, history, state, and the test bed."""
from __future__ import annotations

import dataclasses
import io
import math

import numpy as np
import pytest
import torch

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule, replay, reward_posterior
from tvolib.bandit.acquisition import GPUCB, PaddedArms, arm_effect_posterior
from tvolib.bandit.embedding import pad_arm, step_embedding
from tvolib.bandit.kernels import StepFunctionKernel
from tvolib.bandit.model import BanditGP
from tvolib.bandit.oracle import best_regrets, oracle_z
from tvolib.bandit.recommendation import RECOMMENDATION_FIELDS, RECOMMENDATION_TOLERANCE
from tvolib.bandit.testbed import (CASES, QUIET_NOISE, RANDOM_REGRET, ScheduleFactory, arm_value, calibrated_width,
                                   run_case, run_cases, step_distance)
from tvolib.tvo import validate_schedule

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny GPs gain nothing from threads

# Small acquisition budgets keep the unit tests quick; the algorithm is unchanged.
FAST = dict(raw_samples=32, num_restarts=2, acq_maxiter=20, fit_maxiter=20, ml_starts=50, device="cpu")


def roundtrip(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def reward(betas: torch.Tensor) -> float:
    """A smooth synthetic reward of any schedule: its step function near that of [0, 0.2, 0.6]."""
    return 1.0 - 5.0 * float(step_distance(betas[1:], [0.2, 0.6])) ** 2


def drive(schedule, epochs: range, evidence: float = 0.0) -> float:
    """Train ``epochs`` as a loop would: the evidence grows by the schedule's reward each epoch."""
    for epoch in epochs:
        if epoch > 0:
            betas = schedule.current()
            validate_schedule(betas)
            assert betas[0] == 0 and len(betas) == schedule.d and float(betas[-1]) < 1
            assert schedule.d_min <= schedule.d <= schedule.d_max
            evidence += reward(betas)
        schedule.step(epoch, evidence=evidence)
    return evidence


# ----- the embedding and its kernel ------------------------------------------------------------
def test_the_embedding_sees_a_schedule_not_its_order_ties_or_padding():
    arm = torch.tensor([0.3, 0.1, 0.7], dtype=torch.float64)
    phi = step_embedding(arm)
    assert torch.allclose(step_embedding(arm.flip(0)), phi, atol=1e-15)  # only sorting differs
    assert torch.allclose(step_embedding(torch.tensor(pad_arm(arm, 6), dtype=torch.float64)), phi, atol=1e-15)
    tied = torch.tensor([0.1, 0.1001, 0.3, 0.7], dtype=torch.float64)
    assert float((step_embedding(tied) - phi).norm()) < 1e-3
    moved = torch.tensor([0.1, 0.4, 0.7], dtype=torch.float64)
    assert float((step_embedding(moved) - phi).norm()) > 0.02
    # the grid's distance is the L2 distance of the step functions (smoothed by half a grid cell)
    assert float((step_embedding(moved) - phi).norm()) == pytest.approx(
        float(step_distance(moved, arm)), rel=0.1)


def test_the_embedding_shrinks_small_shifts_as_its_docstring_says():
    """Moving the point 0.4 of [0.2, 0.4, 0.6] by delta changes the step function by 0.2 on
    ``[0.4, 0.4 + delta)`` and by delta on ``[0.4 + delta, 0.6)``: exactly
    ``D^2 = 0.2^2 delta + delta^2 (0.2 - delta)``. The smoothed grid keeps 0.16, 0.31, 0.53 and 0.73
    of it at 0.005, 0.01, 0.02 and 0.04 (module docstring of ``tvolib.bandit.embedding``)."""
    arm = torch.tensor([0.2, 0.4, 0.6], dtype=torch.float64)
    for delta, share in ((0.005, 0.16), (0.01, 0.31), (0.02, 0.53), (0.04, 0.73)):
        moved = torch.tensor([0.2, 0.4 + delta, 0.6], dtype=torch.float64)
        exact = 0.2**2 * delta + delta**2 * (0.2 - delta)
        grid = float((step_embedding(moved) - step_embedding(arm)).square().sum())
        assert grid / exact == pytest.approx(share, abs=0.01)
        assert float(step_distance(moved, arm)) ** 2 == pytest.approx(exact, rel=0.05)  # the test bed's grid of 1000


def test_the_embedding_has_gradients_for_the_acquisition():
    arm = torch.tensor([0.123, 0.456], dtype=torch.float64, requires_grad=True)
    step_embedding(arm).sum().backward()
    assert bool((arm.grad.abs() > 0).all())


def test_padding_is_checked():
    assert pad_arm(torch.tensor([0.5, 0.25]), 3) == [0.25, 0.5, 0.5]
    with pytest.raises(ValueError, match="1 to 2 points"):
        pad_arm([0.1, 0.2, 0.3], 2)
    with pytest.raises(ValueError, match="1 to 2 points"):
        pad_arm([], 2)


def test_the_step_function_kernel_is_a_kernel_over_arms_of_any_length():
    kernel = StepFunctionKernel(0.05, 0.95).double()
    g = torch.Generator().manual_seed(0)
    arms = [sorted(torch.rand(m, generator=g).tolist()) for m in (1, 2, 4, 6, 6)]
    X = (torch.tensor([pad_arm(a, 6) for a in arms], dtype=torch.float64) - 0.05) / 0.9
    K = kernel.forward(X, X)
    assert torch.allclose(K, K.T) and torch.allclose(K.diagonal(), torch.ones(5, dtype=torch.float64))
    assert float(torch.linalg.eigvalsh(K.detach()).min()) > -1e-12
    with pytest.raises(ValueError, match="lo < hi"):
        StepFunctionKernel(0.5, 0.2)


def test_padded_arms_view_is_the_gp_at_the_padded_arm():
    gp = BanditGP(4, spatial=StepFunctionKernel(0.05, 0.95), priors=False, dtype=torch.float64)
    X = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.5, 0.5, 0.9, 0.9, 1.0]], dtype=torch.float64)
    gp.set_train_data(X, torch.tensor([0.5, -0.5], dtype=torch.float64))
    view = PaddedArms(gp, 2)
    x = torch.tensor([[0.3, 0.1, 0.5]], dtype=torch.float64)
    assert view.pad(x).tolist() == [[0.3, 0.1, 0.3, 0.3, 0.5]]
    for a, b in zip(view.mean_and_variance(x), gp.mean_and_variance(view.pad(x))):
        assert torch.equal(a, b)  # exact: the same call on the same input
    with pytest.raises(ValueError, match="n_points"):
        PaddedArms(gp, 5)
    with pytest.raises(ValueError, match="replaces the sorted one"):
        BanditGP(4, spatial=StepFunctionKernel(0.05, 0.95), sort=False)


def _fitted_gp() -> BanditGP:
    gp = BanditGP(4, spatial=StepFunctionKernel(0.05, 0.95), priors=False, dtype=torch.float64)
    X = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.5, 0.5, 0.9, 0.9, 0.5], [0.2, 0.6, 0.6, 0.6, 1.0]],
                     dtype=torch.float64)
    gp.set_train_data(X, torch.tensor([0.5, -0.5, 0.2], dtype=torch.float64))
    return gp


def test_the_joint_posterior_is_the_marginal_one_on_its_diagonal():
    gp = _fitted_gp()
    x = torch.tensor([[0.1, 0.2, 0.3, 0.3, 1.0], [0.3, 0.7, 0.7, 0.7, 1.0], [0.1, 0.2, 0.3, 0.4, 1.0]],
                     dtype=torch.float64)
    for component in ("total", "arm"):
        with torch.no_grad():
            mean, cov = gp.joint_posterior(x, component)
            m, v = gp.mean_and_variance(x, component)
        torch.testing.assert_close(mean, m, rtol=1e-12, atol=1e-12)  # float64, the same cached inverse
        torch.testing.assert_close(cov.diagonal(), v, rtol=1e-10, atol=1e-12)
        assert torch.equal(cov, cov.T) and float(torch.linalg.eigvalsh(cov).min()) > -1e-10
    with pytest.raises(ValueError, match="component"):
        gp.joint_posterior(x, "trend")


def test_thompson_draws_follow_the_joint_posterior():
    """Draws at three arms over 4000 seeds: their mean and covariance are the GP's joint posterior
    to Monte Carlo error (mean within 4 standard errors; covariance within 0.1 of its scale)."""
    gp = _fitted_gp()
    best = {2: (torch.tensor([0.3], dtype=torch.float64), 0.0),
            3: (torch.tensor([0.1, 0.2], dtype=torch.float64), 0.0),
            5: (torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64), 0.0)}
    draws = torch.tensor([list(AdaptiveDBanditSchedule._thompson_draws(gp, best, seed).values())
                          for seed in range(4000)], dtype=torch.float64)
    rows = torch.cat([PaddedArms(gp, d - 1).pad(torch.cat([x, x.new_ones(1)])[None]) for d, (x, _) in best.items()])
    with torch.no_grad():
        mean, cov = gp.joint_posterior(rows, "arm")
    assert (draws.mean(0) - mean).abs().max() < 4 * float(cov.diagonal().max().sqrt()) / math.sqrt(4000)
    assert (torch.cov(draws.T) - cov).abs().max() < 0.1 * float(cov.diagonal().max())


# ----- the schedule ----------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"d_max": 2}, r"d_max \(the most left points.*\) must be an integer >= 3"),
    ({"d_max": 5.0}, r"d_max .* must be an integer"),
    ({"d_max": True}, r"d_max .* must be an integer"),
    ({"d_max": 6, "d_min": 1}, r"d_min \(the fewest left points.*\) must be an integer >= 2"),
    ({"d_max": 4, "d_min": 4}, r"d_max must exceed d_min .* got d_min=4, d_max=4 .*GPBanditSchedule"),
    ({"d_max": 4, "d_min": 6}, r"d_max must exceed d_min"),
    ({"d_max": 25}, r"staggered.*hi / \(d - 1\) > lo.*d = 25"),
    ({"d_max": 5, "d": 3}, r"takes no 'd'"),
    ({"d_max": 5, "sort": False}, r"takes no 'sort'"),
    ({"d_max": 5, "d_tolerance": -1.0}, r"d_tolerance"),
    ({"d_max": 5, "d_choice": "ucb"}, r"d_choice must be one of 'thompson', 'margin'; got 'ucb'"),
])
def test_bad_ranges_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveDBanditSchedule(**kwargs)


@pytest.mark.parametrize("d_choice", ["thompson", "margin"])
def test_every_chosen_schedule_is_valid_and_the_history_records_its_d(d_choice):
    sched = AdaptiveDBanditSchedule(6, d_min=3, window=2, seed=1, n_init=4, d_choice=d_choice, **FAST)
    drive(sched, range(0, 31))
    history = sched.history()
    assert any(row["source"] == "gp" for row in history) and len(history) >= 10
    for row, following in zip(history, history[1:] + [None]):
        assert row["d"] == len(row["arm"]) + 1 and row["betas"] == [0.0] + sorted(row["arm"])
        assert row["next_d"] == len(row["next_arm"]) + 1 and 3 <= row["next_d"] <= 6
        assert (row["d_min"], row["d_max"]) == (3, 6)
        assert len(row["upper"]) == row["d"] - 1
        if row["source"] == "gp" and d_choice == "margin":  # parsimony gives up at most its margin
            margin = 0.2 * math.sqrt(row["kappa"] * (1 - row["trend_share"]))
            assert len(row["acq_by_d"]) == 4 and row["acq_value"] >= max(row["acq_by_d"]) - margin - 1e-12
            assert row["d_draws"] is None
        if row["source"] == "gp" and d_choice == "thompson":  # the largest draw's d, its maximiser as found
            draws = row["d_draws"]
            assert len(draws) == 4 and row["next_d"] == 3 + draws.index(max(draws))
            assert row["acq_value"] == row["acq_by_d"][row["next_d"] - 3] and row["points_dropped"] == 0
        if following is not None:
            assert following["arm"] == row["next_arm"]
        check_recommendation(row, sched)
    assert len({row["d"] for row in history}) > 1  # the random rounds draw d too
    last = [row for row in history if row["source"] != "random"][-1]
    assert sched.recommendation().tolist() == [0.0, *last["recommended_arm"]]


def check_recommendation(row: dict, sched: AdaptiveDBanditSchedule) -> None:
    """A GP round's recommendation follows its rule from the recorded means and standard deviations
    (the smallest d whose lower bound ``mean - sd`` is not ``RECOMMENDATION_TOLERANCE`` sd of the
    difference below the highest), and its arm is a valid schedule of that d in the box; a random
    round recommends nothing."""
    fields = RECOMMENDATION_FIELDS
    if row["source"] == "random":
        assert all(row[k] is None for k in fields)
        return
    means, sds, gaps = row["mean_by_d"], row["sd_by_d"], row["gap_sd_by_d"]
    assert len(means) == len(sds) == len(gaps) == sched.d_max - sched.d_min + 1
    lower = [m - s for m, s in zip(means, sds)]
    top = lower.index(max(lower))
    assert gaps[top] == 0.0
    within = [k for k, (low, g) in enumerate(zip(lower, gaps)) if low >= max(lower) - RECOMMENDATION_TOLERANCE * g]
    assert row["recommended_d"] == sched.d_min + within[0]
    arm = row["recommended_arm"]
    assert len(arm) == row["recommended_d"] - 1
    assert sched.lo <= arm[0] and arm[-1] <= sched.hi and all(a < b for a, b in zip(arm, arm[1:]))
    validate_schedule(torch.tensor([0.0, *arm], dtype=torch.float64))


def test_recommending_leaves_the_arms_trained_as_they_are(monkeypatch):
    """The recommendation's search draws nothing from the schedule's generator: with it replaced by
    an empty one, the schedule trains the same arms, bit for bit (the same code on the same inputs)."""
    def run() -> list:
        sched = AdaptiveDBanditSchedule(5, window=2, seed=2, n_init=4, **FAST)
        drive(sched, range(0, 25))
        assert any(row["source"] == "gp" for row in sched.history())
        return [row["next_arm"] for row in sched.history()]

    recommending = run()
    monkeypatch.setattr(AdaptiveDBanditSchedule, "_recommend", lambda self, gp, seed: {})
    assert run() == recommending


class KeepsTheGP(AdaptiveDBanditSchedule):
    """The schedule, keeping the GP and the posterior-mean maximisers of its last recommendation."""

    def _recommend(self, gp, seed: int) -> dict:
        self.last_gp = gp
        return super()._recommend(gp, seed)

    def _maximise_each(self, gp, kappa: float, seed: int) -> dict:
        self.last_maximisers = super()._maximise_each(gp, kappa, seed)
        return self.last_maximisers


def test_every_d_of_the_recommendation_is_searched():
    """The rule compares each ``d``'s posterior-mean maximiser, so each is searched on its own: every
    ``d``'s maximiser's mean is at least the best of 512 random arms of its domain (a shared budget
    left the ``d``'s whose samples started no L-BFGS-B restart at the best of their raw samples)."""
    sched = KeepsTheGP(6, window=2, seed=2, n_init=4, **FAST)
    drive(sched, range(0, 25))
    generator = torch.Generator().manual_seed(0)
    for d in range(sched.d_min, sched.d_max + 1):
        arms = torch.rand(512, d - 1, generator=generator, dtype=torch.float64) * sched._normalised_upper(d)
        with torch.no_grad():
            means = GPUCB(PaddedArms(sched.last_gp, d - 1), 0.0)(
                torch.cat([arms, torch.ones_like(arms[:, :1])], -1).unsqueeze(-2))
        found = sched.last_maximisers[d][1]
        assert found >= float(means.max()) - 1e-9, (d, found, float(means.max()))


def test_each_d_s_candidate_is_the_highest_lower_bound_of_its_maximiser_and_observed_arms():
    """Each ``d``'s candidate is, of its posterior-mean maximiser and the arms of ``d`` points the GP
    has observed, the one of the highest lower bound ``m - s``: its recorded lower bound is theirs
    (to float64 rounding: the same GP at other batches), and the recommended arm is one of them."""
    sched = KeepsTheGP(6, window=2, seed=2, n_init=4, **FAST)
    drive(sched, range(0, 25))
    row = [r for r in sched.history() if r["recommended_d"] is not None][-1]
    observed = sched._observed_arms(sched.last_maximisers[sched.d_min][0])
    trained = {tuple(r["arm"]) for r in sched.history()}
    as_tuples = [tuple((sched.lo + (sched.hi - sched.lo) * x).tolist()) for xs in observed.values() for x in xs]
    assert len(as_tuples) == len(set(as_tuples)) >= 4
    assert all(min(max(abs(a - b) for a, b in zip(arm, t)) for t in trained if len(t) == len(arm)) < 1e-12
               for arm in as_tuples)
    for k, d in enumerate(range(sched.d_min, sched.d_max + 1)):
        pool = [*observed.get(d, []), sched.last_maximisers[d][0]]
        mean, cov = arm_effect_posterior(sched.last_gp, pool)
        lower = mean - cov.diagonal().clamp_min(0.0).sqrt()
        assert row["mean_by_d"][k] - row["sd_by_d"][k] == pytest.approx(float(lower.max()), abs=1e-9), d
        if d == row["recommended_d"]:
            as_betas = [(sched.lo + (sched.hi - sched.lo) * x).tolist() for x in pool]
            assert any(arm == pytest.approx(row["recommended_arm"], abs=1e-12) for arm in as_betas)


def test_the_last_round_only_schedule_recommends_as_the_schedule_does():
    """:class:`LastRecommendationOnly` (the system tests' schedule) trains the same arms and records
    the same last recommendation as the schedule it stands for, bit for bit (the same search on the
    same GP and seed); its earlier GP rounds record none."""
    def run(cls) -> list[dict]:
        sched = cls(5, window=2, seed=2, n_init=4, **FAST)
        drive(sched, range(0, 25))
        return sched.history()

    full, last_only = run(AdaptiveDBanditSchedule), run(LastRecommendationOnly)
    assert [r["next_arm"] for r in last_only] == [r["next_arm"] for r in full]
    gp_rounds = [k for k, r in enumerate(full) if r["source"] != "random"]
    assert len(gp_rounds) >= 3
    for k in gp_rounds:
        for field in RECOMMENDATION_FIELDS:
            assert last_only[k][field] == (full[k][field] if k == gp_rounds[-1] else None), (k, field)


def test_d_is_the_schedules_length_and_the_burn_in_uses_it():
    sched = AdaptiveDBanditSchedule(8, window=2, burn_in=3, seed=4, **FAST)
    assert sched.in_burn_in and sched.current().tolist() == pytest.approx(
        __import__("tvolib.tvo", fromlist=["log_uniform"]).log_uniform(sched.d).tolist())
    assert sched.n_arm == 7 and sched.d == len(sched.current())


@pytest.mark.parametrize("split", [9, 23])
def test_resume_continues_bit_for_bit(split):
    """Stopped after ``split`` epochs (in the random rounds, then mid-window in the GP rounds) and
    resumed from a saved state, the schedule makes the same choices as the uninterrupted one."""
    make = lambda: AdaptiveDBanditSchedule(5, window=2, seed=7, n_init=4, **FAST)  # noqa: E731
    a = make()
    evidence = drive(a, range(0, split))
    b = make()
    b.load_state_dict(roundtrip(a.state_dict()))
    assert torch.equal(a.current(), b.current())  # exact: the state holds the arm as it was
    for epoch in range(split, split + 14):
        evidence += reward(a.current())
        a.step(epoch, evidence=evidence)
        b.step(epoch, evidence=evidence)
        assert torch.equal(a.current(), b.current())  # exact: a resumed copy runs the same code on the same inputs
    strip = lambda h: [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in h]  # noqa: E731
    assert strip(a.history()) == strip(b.history())
    assert any(r["source"] == "gp" for r in a.history()[split // 2:])


def test_reward_posterior_refuses_an_adaptive_history_and_replay_reproduces_it():
    a = AdaptiveDBanditSchedule(5, window=2, seed=3, n_init=4, **FAST)
    drive(a, range(0, 16))
    gp_round = next(r["round"] for r in a.history() if r["source"] == "gp")
    with pytest.raises(ValueError, match="AdaptiveDBanditSchedule's"):
        reward_posterior(a.history(), gp_round, [[0.2, 0.4, 0.6, 0.8]])
    arms = replay(AdaptiveDBanditSchedule(5, window=2, seed=3, n_init=4, **FAST), a.history())
    assert arms == [r["next_arm"] for r in a.history()]


def test_a_state_of_another_schedule_or_range_is_refused():
    a = AdaptiveDBanditSchedule(5, window=2, seed=7, n_init=4, **FAST)
    drive(a, range(0, 12))
    state = roundtrip(a.state_dict())
    with pytest.raises(ValueError, match="differently configured"):
        AdaptiveDBanditSchedule(6, window=2, seed=7, n_init=4, **FAST).load_state_dict(state)
    with pytest.raises(ValueError, match="differently configured"):
        GPBanditSchedule(5, window=2, seed=7, n_init=4, **FAST).load_state_dict(state)
    bad = roundtrip(a.state_dict())
    bad["arm"] = [0.1, 0.2, 0.3, 0.4, 0.5]  # five points: d = 6 > d_max
    with pytest.raises(ValueError, match=r"state key 'arm' must be a list of 1 to 4 distinct"):
        a.load_state_dict(bad)
    # a fixed-d schedule still takes arms of its own length only
    fixed = GPBanditSchedule(4, seed=1, **FAST)
    state = fixed.state_dict()
    state["arm"] = [0.1, 0.2]
    with pytest.raises(ValueError, match=r"state key 'arm' must be a list of 3 distinct"):
        fixed.load_state_dict(state)


# ----- the test bed's schedules of any length --------------------------------------------------
def test_step_cases_value_schedules_of_any_length_and_points_cases_only_theirs():
    case = CASES["d3-step-strong"]
    assert arm_value(case, case.optimum, 0.5) == 1.0
    assert arm_value(case, [0.3, 0.3001, 0.65, 0.6501, 0.6502], 0.5) > 0.99  # tied points: the same schedule
    assert arm_value(case, [0.3, 0.5, 0.65], 0.5) < 0.9
    assert max(arm_value(case, [b], 0.5) for b in np.linspace(0.05, 0.95, 181)) < 0.4  # one point is far
    with pytest.raises(ValueError, match="arms of 4 points"):
        arm_value(CASES["d5-log-strong"], [0.1, 0.2], 0.5)
    many = CASES["d10-step-strong"]
    assert len(many.optimum) == 9 and arm_value(many, many.optimum, 0.0) == 1.0
    best_of_fewer = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]  # eight points spread like the nine
    assert 0.8 < arm_value(many, best_of_fewer, 0.5) < 0.95


@pytest.mark.parametrize("name", ["d3-step-strong", "d5-step-mild", "d10-step-mild"])
def test_step_cases_give_random_arms_of_their_d_the_usual_regret(name):
    case = CASES[name]
    schedule = RandomSchedule(case.d, seed=321)
    regrets = [1 - arm_value(case, schedule._random_arm(), 0.5) for _ in range(2000)]
    assert np.mean(regrets) == pytest.approx(RANDOM_REGRET, abs=0.02)
    assert calibrated_width(case.d, case.optimum, metric="step") == case.width


def test_quiet_cases_differ_from_the_mild_ones_in_the_noise_only():
    for d in (3, 5, 10):
        mild, quiet = CASES[f"d{d}-step-mild"], CASES[f"d{d}-step-mild-quiet"]
        assert quiet.noise_model == (QUIET_NOISE, 0.0) and mild.noise_model == (0.5, 0.0)
        assert dataclasses.replace(quiet, name=mild.name, noise=mild.noise) == mild


def test_the_quiet_noise_lets_an_oracle_tell_every_step_cases_d_from_one_point_fewer():
    """The principle that sets QUIET_NOISE (tvolib.bandit.oracle): an oracle training the optimum
    and the best arm of one point fewer, half of the system tests' 160 epochs each, separates them
    by three standard errors in every step case; at the default noise not the ten-point case."""
    z = {}
    for d in (3, 5, 10):
        case = CASES[f"d{d}-step-mild-quiet"]
        deltas = best_regrets(case, range(d - 1, d + 1))
        assert deltas[d] == 0.0 and deltas[d - 1] > 0.04  # the optimum's d; one point fewer costs
        z[d] = (oracle_z(deltas[d - 1], case.noise, 160), oracle_z(deltas[d - 1], CASES[f"d{d}-step-mild"].noise, 160))
    assert min(quiet for quiet, _ in z.values()) >= 3.0, z
    assert z[10][1] < 1.0, z  # the default noise: nine points are as good as ten at this budget


def test_best_regrets_takes_step_cases_and_ranges_of_d_only():
    with pytest.raises(ValueError, match="needs a step case"):
        best_regrets(CASES["d5-log-strong"])
    with pytest.raises(ValueError, match="d >= 2 in steps of 1"):
        best_regrets(CASES["d3-step-mild"], range(1, 4))
    with pytest.raises(ValueError, match="d >= 2 in steps of 1"):
        best_regrets(CASES["d3-step-mild"], range(2, 10, 2))
    assert best_regrets(CASES["d3-step-mild"], range(4, 6)) == {4: 0.0, 5: 0.0}  # more points tie


def test_run_case_takes_any_d_on_step_cases_and_reports_it():
    case = CASES["d3-step-mild"]
    short = dataclasses.replace(case, epochs=12)
    result = run_case(short, lambda seed: RandomSchedule(7, window=2, seed=seed), 0)
    assert result.d_trained == [7] * 12 and result.d_mode == 7
    with pytest.raises(ValueError, match="needs d = 5"):
        run_case(CASES["d5-log-mild"], lambda seed: RandomSchedule(3, window=2, seed=seed), 0)


# ----- on the test bed: the system tests ---------------------------------------------------------
class LastRecommendationOnly(AdaptiveDBanditSchedule):
    """The adaptive bandit, its recommendation searched for the last GP round only.

    Each GP round keeps its GP and the recommendation's seed instead of searching; :meth:`history`
    fills in the last GP round's fields by the schedule's own search on that GP and seed. The
    system tests read no other round's recommendation, and its search is one per ``d``. The arms
    are the schedule's (the search draws nothing from its generator).
    """

    _last_search: tuple | None = None

    def _recommend(self, gp, seed: int) -> dict:
        self._last_search = (self._round, gp, seed)
        return dict.fromkeys(RECOMMENDATION_FIELDS)

    def history(self) -> list[dict]:
        if self._last_search is not None:
            round_, gp, seed = self._last_search
            next(row for row in self._history if row["round"] == round_).update(super()._recommend(gp, seed))
            self._last_search = None
        return super().history()


#: The acquisition budget of the system tests (a quarter of the default restarts); the claims were
#: checked at the defaults too.
BUDGET = dict(raw_samples=128, num_restarts=4, device="cpu")


def _results(case_name: str, factories: dict, seeds) -> dict:
    """label -> the case's results per seed, every (label, seed) run in one pool of two workers."""
    case = CASES[case_name]
    jobs = [(case, factory, seed) for factory in factories.values() for seed in seeds]
    results = run_cases(jobs, max_workers=2)
    n = len(seeds)
    return {label: results[i * n:(i + 1) * n] for i, label in enumerate(factories)}


def final_recommendation(result) -> int:
    """The ``d`` the adaptive bandit recommended at its last GP round."""
    return [row for row in result.history if row.get("recommended_d") is not None][-1]["recommended_d"]


def _factory(cls, d: int, case_name: str, **options) -> ScheduleFactory:
    return ScheduleFactory.of(cls, d, window=CASES[case_name].window, **BUDGET, **options)


@pytest.mark.slow
def test_where_two_interior_points_are_best_it_beats_the_ten_point_bandit_and_the_margin_rule_trains_three():
    """``d3-step-mild``: the best schedule is [0, 0.3, 0.65]; more points can copy it only by tying
    points. Over the second half of the run, on 4 seeds (same noise): the adaptive bandit (d in
    [2, 10], Thompson-sampled d) has a lower mean regret than the bandit fixed at d = 10; the
    margin rule (``d_choice="margin"``), whose parsimony is its point, trains d = 3 most often on
    at least 3 of them. (Thompson sampling does not prefer fewer points: it trains 2 to 10 here.)"""
    case = "d3-step-mild"
    runs = _results(case, {"adaptive": _factory(LastRecommendationOnly, 10, case),
                           "margin": _factory(LastRecommendationOnly, 10, case, d_choice="margin"),
                           "fixed": _factory(GPBanditSchedule, 10, case)}, range(4))
    adaptive, fixed = runs["adaptive"], runs["fixed"]
    assert np.mean([r.regret for r in adaptive]) < np.mean([r.regret for r in fixed]), (
        [r.regret for r in adaptive], [r.regret for r in fixed])
    assert sum(r.d_mode == 3 for r in runs["margin"]) >= 3, [r.d_mode for r in runs["margin"]]
    # Thompson sampling trains any d that ties; its recommendation prefers the fewest points (d = 3,
    # 7, 4, 3 on seeds 0 to 3 at this budget; benchmarks/adaptive_candidates.py 0:4 160 d3-step-mild).
    recommended = [final_recommendation(r) for r in adaptive]
    assert sum(d == 3 for d in recommended) >= 2, recommended


@pytest.mark.slow
def test_where_nine_points_are_best_it_trains_eight_or_more_and_beats_the_three_point_bandit():
    """``d10-step-mild``: nine spread interior points are best. On at least 3 of 4 seeds the
    adaptive bandit trains d >= 8 most often in the second half, and its regret is below the
    bandit fixed at d = 3 on every seed (same noise); that bandit cannot come near the optimum."""
    case = "d10-step-mild"
    runs = _results(case, {"adaptive": _factory(LastRecommendationOnly, 10, case),
                           "fixed": _factory(GPBanditSchedule, 3, case)}, range(4))
    adaptive, fixed = runs["adaptive"], runs["fixed"]
    assert sum(r.d_mode >= 8 for r in adaptive) >= 3, [r.d_mode for r in adaptive]
    # Its recommendation, more cautious, still asks for more points than where three are best: d >= 5
    # on at least 3 of 4 seeds (7, 8, 7, 7 on seeds 0 to 3 at this budget; at 80 rounds 6 to 9,
    # docs/adaptive-d.md: even an oracle barely tells 9 points from 10 at this noise).
    recommended = [final_recommendation(r) for r in adaptive]
    assert sum(d >= 5 for d in recommended) >= 3, recommended
    assert all(a.regret < f.regret for a, f in zip(adaptive, fixed)), (
        [r.regret for r in adaptive], [r.regret for r in fixed])
    # Most of the rewards' variance is noise here; the fit's noise bound (all of it) does not bind,
    # where the protocol's 0.5 held the fits on the bound in most late rounds (docs/adaptive-d.md).
    upper = AdaptiveDBanditSchedule(10, device="cpu").fit_bounds()["noise"][1]
    noise = [[row["noise"] for row in r.history if row.get("noise") is not None][-1] for r in adaptive]
    assert all(n < upper - 1e-3 for n in noise), (noise, upper)


@pytest.mark.slow
def test_where_the_rewards_can_tell_d_it_recommends_the_right_d():
    """The quiet step cases (the mild ones at ``QUIET_NOISE``, where an oracle tells each case's d
    from one point fewer by three standard errors at this budget): where two interior points are
    best the recommendation is d = 3 on at least 3 of 4 seeds, where four are best 5 on at least 2
    of 4, and never fewer points than the right d; on every seed the adaptive bandit's regret is
    below the bandit fixed at the wrong d (10 where d = 3 is best, 3 where d = 5 is). Observed at this
    budget, seeds 0 to 11 (``benchmarks/adaptive_candidates.py 0:12 160
    d3-step-mild-quiet,d5-step-mild-quiet``): d = 3 on 10 of 12, 4 on the rest; 5 on 7 of 12, 6 to 8
    on the rest (revision 5: 12 and 9 of 12). At 480 epochs, on seeds 36 to 71, it is right on most
    seeds where nine points are best too (21 of 36; a benchmark, too slow for the suite); at the default noise not where two or nine are
    (docs/adaptive-d.md, *Revision 6*)."""
    for case, right, at_least, wrong in (("d3-step-mild-quiet", 3, 3, 10), ("d5-step-mild-quiet", 5, 2, 3)):
        runs = _results(case, {"adaptive": _factory(LastRecommendationOnly, 10, case),
                               "fixed": _factory(GPBanditSchedule, wrong, case)}, range(4))
        recommended = [final_recommendation(r) for r in runs["adaptive"]]
        assert min(recommended) >= right and sum(d == right for d in recommended) >= at_least, (case, recommended)
        adaptive, fixed = [r.regret for r in runs["adaptive"]], [r.regret for r in runs["fixed"]]
        assert all(a < f for a, f in zip(adaptive, fixed)), (case, adaptive, fixed)
