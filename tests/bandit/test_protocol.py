"""The bandit's protocol (the authors' code's, the default, and the text's): each item, and what the
system does with them on synthetic rewards (which arms it picks, how it compares with random arms)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule, arm_degeneracy, replay
from tvolib.bandit import scheduler as scheduler_module
from tvolib.bandit.fit import fit_ml
from tvolib.bandit.model import BanditGP, Hyperparameters, training_data
from tvolib.bandit.protocol import (
    ML_BOUNDS,
    PROTOCOLS,
    coordinate_scale,
    resolve_protocol,
    robust_standardize,
    staggered_upper,
)
from tvolib.tvo import log_uniform

FAST = dict(raw_samples=64, num_restarts=2, acq_maxiter=30, fit_maxiter=20)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny GPs gain nothing from threads


# ----- the items --------------------------------------------------------------------------------
def test_presets_name_every_item_and_overrides_are_checked():
    assert set(PROTOCOLS["code"]) == set(PROTOCOLS["paper-text"])
    assert resolve_protocol("paper-text", {"kappa": None})["kappa"] == "theorem1"
    with pytest.raises(ValueError, match="protocol must be one of"):
        resolve_protocol("text", {})
    with pytest.raises(ValueError, match="unknown bandit protocol item 'guards'"):
        resolve_protocol("code", {"guards": True})
    with pytest.raises(ValueError, match=r"arm_domain must be one of \['staggered', 'box'\]"):
        GPBanditSchedule(3, arm_domain="wide")
    with pytest.raises(ValueError, match="corner_guards must be one of"):
        GPBanditSchedule(3, corner_guards="yes")


def test_code_defaults_and_the_paper_text_preset():
    code, text = GPBanditSchedule(5, protocol="code"), GPBanditSchedule(5, protocol="paper-text")
    assert (code.n_init, code.max_observations, code.kappa, code.fit) == (15, 150, "log_n", "ml")
    assert (text.n_init, text.max_observations, text.kappa, text.fit) == (5, None, "theorem1", "map")
    assert code.evidence_spec.rule == "trapezoid" and text.evidence_spec.rule == "left"
    assert code.upper == pytest.approx((0.2375, 0.475, 0.7125, 0.95)) and text.upper == (0.95,) * 4
    assert code.current_kappa(3, 10) == pytest.approx(math.log(12))


def test_staggered_domain_follows_the_code():
    assert staggered_upper(2, 0.05, 0.95) == (0.7,)
    assert staggered_upper(3, 0.05, 0.95) == pytest.approx((0.475, 0.95))
    with pytest.raises(ValueError, match="arm_domain='box'"):
        staggered_upper(20, 0.05, 0.95)


@pytest.mark.parametrize("d", [4, 7, 10, 13])
def test_an_arm_on_the_staggered_upper_corner_survives_a_state_round_trip(d):
    """hi * n / n rounds below hi for these d (0.95 * 3 / 3 = 0.9499999999999998); the last bound is
    hi itself, so an arm on the upper corner, rounded to its recorded digits, still loads."""
    assert staggered_upper(d, 0.05, 0.95)[-1] == 0.95
    a = GPBanditSchedule(d, seed=0, device="cpu")
    a._arm = a._finalise_arm(torch.tensor(a.upper, dtype=torch.float64)).tolist()
    b = GPBanditSchedule(d, seed=0, device="cpu")
    b.load_state_dict(a.state_dict())
    assert b.current().tolist() == a.current().tolist()


@pytest.mark.parametrize("box", [(0.05, 0.99999), (0.05124, 0.95126), (0.00004, 0.5)])
def test_rounded_arms_stay_in_a_box_of_more_decimals_and_their_state_loads(box):
    """Arms are rounded to four decimals: on a box of more, a point on the box's edge would round
    out of it (0.99999 to 1, outside the TVO's interior), so they live on the box's four-decimal values."""
    a = GPBanditSchedule(5, box=box, seed=0, device="cpu")
    corner = torch.tensor([box[0], box[0], *a.upper[2:]], dtype=torch.float64)
    a._arm = a._finalise_arm(corner).tolist()
    assert box[0] <= min(a._arm) and max(a._arm) <= box[1] and len(set(a._arm)) == 4
    b = GPBanditSchedule(5, box=box, seed=0, device="cpu")
    b.load_state_dict(a.state_dict())
    assert b.current().tolist() == a.current().tolist()


@settings(max_examples=40, deadline=None)
@given(lo=st.floats(1e-4, 0.04), hi=st.floats(0.9, 0.9999), d=st.integers(2, 15), adaptive=st.booleans(),
       u=st.lists(st.floats(-0.2, 1.2), min_size=14, max_size=14))
def test_any_finalised_arm_lies_in_its_box_and_its_state_loads(lo, hi, d, adaptive, u):
    """Whatever the box's decimals, ``d`` and the raw proposal (outside the box too), the arm a
    schedule trains is strictly increasing in the box, and its state loads into a twin."""
    make = (lambda: AdaptiveDBanditSchedule(max(d, 3), box=(lo, hi), seed=0, device="cpu")) if adaptive else (
        lambda: GPBanditSchedule(d, box=(lo, hi), seed=0, device="cpu"))
    a = make()
    raw = torch.tensor(u[:len(a.current()) - 1], dtype=torch.float64)
    a._arm = a._finalise_arm(raw).tolist()
    assert lo <= a._arm[0] and a._arm[-1] <= hi and all(x < y for x, y in zip(a._arm, a._arm[1:]))
    b = make()
    b.load_state_dict(a.state_dict())
    assert b.current().tolist() == a.current().tolist()


def test_the_gp_sees_every_coordinate_of_the_staggered_domain_on_the_unit_range():
    """The code min-max scales each coordinate of a (sorted) arm to [0, 1] by its own range, then
    sorts: the GP's feature of an arm is ``sort((b_k - lo) / (u_k - lo))``. Its corners are the unit
    cube's; in a box the stretch is 1."""
    s = GPBanditSchedule(5, device="cpu")
    assert s.coordinate_scale == pytest.approx((4.8, 0.9 / 0.425, 0.9 / 0.6625, 1.0))
    assert GPBanditSchedule(5, arm_domain="box", device="cpu").coordinate_scale == (1.0,) * 4
    hp = Hyperparameters(0.5, 1.0, 0.1)
    gp = BanditGP(4, priors=False, coordinate_scale=s.coordinate_scale, hyperparameters=hp)
    upper = np.array(s.upper)
    feature = lambda arm: np.sort((np.sort(arm) - s.lo) / (upper - s.lo))  # noqa: E731
    norm = lambda arm: torch.tensor([[(b - s.lo) / (s.hi - s.lo) for b in arm] + [1.0]])  # noqa: E731
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = (np.sort(s.lo + (upper - s.lo) * rng.random(4)) for _ in range(2))  # arms in the domain
        expected = math.exp(-((feature(a) - feature(b)) ** 2).sum() / (2 * hp.lengthscale**2))
        with torch.no_grad():
            same, reversed_b = float(gp.covar(norm(a), norm(b))), float(gp.covar(norm(a), norm(b[::-1].copy())))
        assert same == pytest.approx(expected, rel=1e-12)
        assert reversed_b == pytest.approx(expected, rel=1e-12)  # invariant to the order of the points
    np.testing.assert_allclose(feature(upper), 1.0)
    np.testing.assert_allclose(feature(np.full(4, s.lo)), 0.0)
    with pytest.raises(ValueError, match="every upper bound must exceed lo"):
        coordinate_scale(0.3, (0.2, 0.95))


def test_random_arms_lean_towards_small_betas_like_the_log_schedule():
    """Drawn in the staggered box and sorted: means about .12, .22, .36, .59 at d = 5 (the code's)."""
    s = RandomSchedule(5, seed=0)
    arms = []
    for _ in range(800):
        arms.append(s.current_arm().tolist())
        s.observe(0.0)
    mean = np.mean(arms, axis=0)
    assert mean == pytest.approx([0.12, 0.22, 0.36, 0.59], abs=0.02)
    box = np.mean([RandomSchedule(5, seed=k, arm_domain="box").current_arm().tolist() for k in range(300)], axis=0)
    assert box == pytest.approx([0.05 + 0.9 * k / 5 for k in range(1, 5)], abs=0.03)  # order statistics: linear-like


def test_the_burn_in_trains_with_the_log_schedule_then_the_first_arm():
    s = GPBanditSchedule(5, burn_in=3, seed=0, **FAST)
    assert torch.equal(s.current(), log_uniform(5))  # exact: the same function on the same inputs
    for epoch in range(4):
        s.step(epoch, evidence=-100.0 + epoch)
    assert torch.equal(s.current()[1:], s.current_arm())  # exact: the recorded arm, sorted already


def test_rounded_proposals_keep_four_decimals_and_separate_ties():
    s = RandomSchedule(5, seed=0)
    arm = s._finalise_arm(torch.tensor([0.05, 0.05, 0.123456, 0.9]))
    assert arm.tolist() == [0.05, 0.0501, 0.1235, 0.9]
    spread = RandomSchedule(5, seed=0, projection="spread")._finalise_arm(torch.tensor([0.05, 0.05, 0.123456, 0.9]))
    assert spread.tolist() == pytest.approx([0.05, 0.051, 0.123456, 0.9])


def test_robust_standardisation_drops_outliers_then_standardises_the_rest():
    rewards = torch.tensor([0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 40.0], dtype=torch.float64)
    keep, mean, std = robust_standardize(rewards)
    assert keep.tolist() == [True] * 11 + [False]
    assert mean == pytest.approx(1.0) and std == pytest.approx(float(rewards[:11].std(unbiased=False)))
    data = training_data(torch.full((12, 1), 0.5, dtype=torch.float64), torch.arange(12.0), rewards, lo=0.05,
                         hi=0.95, t_pred=12, standardize="robust")
    assert data.n_dropped == 1 and data.y.shape == (11,)


def test_corner_guards_are_two_worst_observations_at_the_latest_time():
    arms = torch.tensor([[0.2, 0.5], [0.3, 0.6], [0.1, 0.4]], dtype=torch.float64)
    corners = GPBanditSchedule(3).corner_arms()
    assert corners.tolist() == [[0.05, 0.05], [0.95, 0.95]]  # the code's arms, in beta units
    data = training_data(arms, torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 3.0, 2.0]), lo=0.05, hi=0.95,
                         t_pred=3, standardize="robust", guards=corners)
    assert data.n_guards == 2 and data.X.shape == (5, 3)
    assert data.y[3:].tolist() == [data.y[:3].min().item()] * 2  # the worst reward seen
    assert data.X[3:, -1].tolist() == [data.X[2, -1].item()] * 2  # at the latest observation's time
    assert data.X[3, :2].tolist() == [0.0, 0.0] and data.X[4, :2].tolist() == [1.0, 1.0]


def test_the_upper_guard_is_where_the_code_puts_it():
    """The code's upper guard is the arm [0.95] * (K - 1), min-max scaled per coordinate of the
    staggered box like every input: (0.95 - 0.05) / (u_k - 0.05), far outside the unit cube (about
    (4.8, 2.1, 1.36, 1) at K = 5), not the domain's upper corner (1, 1, 1, 1)."""
    for d in (3, 5, 10):
        s = GPBanditSchedule(d, device="cpu")
        gp = BanditGP(d - 1, coordinate_scale=s.coordinate_scale, device="cpu")
        x = (s.corner_arms() - s.lo) / (s.hi - s.lo)
        lower, upper = gp.spatial.features(x).tolist()
        code = sorted((0.95 - 0.05) / (u - 0.05) for u in staggered_upper(d, 0.05, 0.95))
        assert lower == [0.0] * (d - 1)
        assert upper == pytest.approx(code, rel=1e-12), (d, upper, code)
    assert sorted(upper)[-1] == pytest.approx(16.2)  # d = 10: 0.9 / (0.95 / 9 - 0.05)
    assert [round(v, 2) for v in sorted(GPBanditSchedule(5).coordinate_scale)] == [1.0, 1.36, 2.12, 4.8]


def test_a_proposal_at_the_all_lower_corner_is_replaced_by_a_random_arm(monkeypatch):
    monkeypatch.setattr(scheduler_module, "maximize_ucb", lambda gp, **kw: (torch.zeros(gp.n_arm), 0.0))
    s = GPBanditSchedule(4, n_init=2, seed=0, **FAST)
    for y in (1.0, 2.0, 0.5):
        s.observe(y)
    h = s.history()
    assert [r["source"] for r in h] == ["random", "corner", "corner"]
    assert not any(r["next_degenerate"] for r in h)  # the random replacements are spread out
    unguarded = GPBanditSchedule(4, n_init=2, seed=0, corner_guards=False, **FAST)
    for y in (1.0, 2.0):
        unguarded.observe(y)
    assert unguarded.history()[-1]["source"] == "gp" and unguarded.current_arm().tolist() == [0.05, 0.0501, 0.0502]


def test_ml_fit_stays_within_the_codes_bounds():
    X = torch.rand(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.randn(20, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    gp = BanditGP(2, priors=False, hyperparameters=Hyperparameters(0.7, 1.0, 0.1), device="cpu")
    gp.set_train_data(X, y)
    fit = fit_ml(gp, n_starts=50, generator=torch.Generator().manual_seed(2))
    hp = fit.hyperparameters
    for name in ("lengthscale", "rho", "noise"):
        lo, hi = ML_BOUNDS[name]
        assert lo * (1 - 1e-9) <= getattr(hp, name) <= hi * (1 + 1e-9), (name, hp)
    assert fit.n_evals >= 51
    with pytest.raises(ValueError, match="priors=False"):
        fit_ml(BanditGP(2, device="cpu"), generator=torch.Generator())


def test_degeneracy_measure():
    assert arm_degeneracy([0.05, 0.0501, 0.0502, 0.95], 0.05, 0.95)["degenerate"]  # 3 on an edge
    assert arm_degeneracy([0.4, 0.405, 0.409], 0.05, 0.95)["degenerate"]  # bunched
    ok = arm_degeneracy([0.1, 0.17, 0.28, 0.45], 0.05, 0.95)
    assert not ok["degenerate"] and ok["min_gap"] == pytest.approx(0.07) and ok["on_edge"] == 0
    assert not arm_degeneracy([0.05], 0.05, 0.95)["degenerate"]  # one point never is


# ----- replay -----------------------------------------------------------------------------------
def test_replaying_a_recorded_history_reproduces_its_arms(tmp_path):
    s = GPBanditSchedule(4, n_init=3, seed=3, **FAST)
    for k in range(7):
        s.observe(math.sin(k) + sum(s.current_arm().tolist()))
    path = tmp_path / "schedule_history.csv"
    pd.DataFrame(s.history()).to_csv(path, index=False)  # the run folder's format, read back as text
    recorded = pd.read_csv(path)
    arms = replay(GPBanditSchedule(4, n_init=3, seed=3, **FAST), recorded)
    # exact: the same code path on the same inputs (rewards round-trip through CSV's repr)
    assert arms == [[float(v) for v in np.asarray(eval(a))] for a in recorded["next_arm"]]
    with pytest.raises(ValueError, match="configure and seed it like the recorded one"):
        replay(GPBanditSchedule(4, n_init=3, seed=4, **FAST), recorded)


@pytest.fixture(scope="module")
def recorded_rows():
    """Seven rounds of a d = 4 bandit (rounds 2..6 chosen by the GP), as the schedule records them."""
    s = GPBanditSchedule(4, n_init=3, seed=3, **FAST)
    for k in range(7):
        s.observe(math.sin(k) + sum(s.current_arm().tolist()))
    return s.history()


def _edit(rows, edit):
    rows = [dict(r) for r in rows]
    edit(rows)
    return rows


def _set(k, key, value):
    return lambda rows: rows[k].__setitem__(key, value)


def _swap(rows):
    rows[2], rows[3] = rows[3], rows[2]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda rows: rows[3].__setitem__("reward", rows[3]["reward"] + 5.0),
     r"round [3-6]: after its recorded reward .* the schedule chose \[.*\], but the history records next_arm "
     r"\[.*\]: a reward of rounds 0\.\.[3-6] was edited, or the schedule is not configured and seeded like"),
    (_swap, r"schedule_history row 2 holds round 3: the rows must be the rounds 0\.\.6 in order"),
    (_set(1, "reward", float("nan")), r"schedule_history round 1: reward nan with skipped=False: a round is skipped "
                                      r"exactly when its reward is not finite"),
    (_set(1, "reward", "nan"), r"row 1 \(round 1\) column 'reward' must be a number; got 'nan'"),
    (_set(2, "reward", None), r"schedule_history row 2 \(round 2\) column 'reward' must be a number; got None"),
    (_set(2, "arm", "[0.1, x"), r"row 2 \(round 2\) column 'arm' must be a list of finite numbers; got '\[0\.1, x'"),
    (lambda rows: rows[4].pop("reward"), r"schedule_history row 4 \(round 4\) has no column\(s\) \['reward'\]"),
    (_set(3, "arm", [0.06, 0.2, 0.3]), r"schedule_history round 3: its arm \[0\.06, 0\.2, 0\.3\] is not round 2's "
                                       r"next_arm"),
], ids=["reward edited", "rows swapped", "nan reward not skipped", "reward text", "reward None", "garbled arm",
        "missing column", "broken chain"])
def test_replay_names_the_row_that_disagrees_and_how(recorded_rows, edit, message):
    """An edited history is not blamed on the schedule's configuration: the row, the column and what
    disagrees are named."""
    with pytest.raises(ValueError, match=message):
        replay(GPBanditSchedule(4, n_init=3, seed=3, **FAST), _edit(recorded_rows, edit))
    # the same from a frame (as read back from CSV), where a None or absent reward is an empty cell
    empty = "None" in message or "no column" in message
    with pytest.raises(ValueError, match=r"round [24]: reward nan with skipped=False" if empty else message):
        replay(GPBanditSchedule(4, n_init=3, seed=3, **FAST), pd.DataFrame(_edit(recorded_rows, edit)))


# ----- what the system does on synthetic rewards ------------------------------------------------
CENTRE = torch.tensor([0.15, 0.4], dtype=torch.float64)  # an interior, log-like optimum (d = 3)


def run_synthetic(schedule, seed: int, *, rounds: int = 60, rebound: float = 0.0,
                  drift: torch.Tensor | None = None) -> tuple[float, float]:
    """Rewards = a slowly falling trend (the evidence improves less and less) + a broad bump over
    the sorted arm (max 1, at :data:`CENTRE`, or moving linearly from there to ``drift``) + noise;
    ``rebound`` adds a jump every 7th round (the rebound after an early update). Returns the mean
    regret over the last two thirds of the rounds and the share of the GP's arms that are degenerate."""
    noise = torch.Generator().manual_seed(1000 + seed)
    regret = []
    for k in range(rounds):
        b = torch.sort(schedule.current_arm()).values
        centre = CENTRE if drift is None else CENTRE + (drift - CENTRE) * k / (rounds - 1)
        f = float(torch.exp(-((b - centre) ** 2).sum() / (2 * 0.25**2)))
        regret.append(1.0 - f)
        y = 2.0 * math.exp(-k / 30) + f + 0.1 * float(torch.randn(1, generator=noise))
        schedule.observe(y + (rebound if k % 7 == 3 else 0.0))
    chosen = [r["next_degenerate"] for r in schedule.history() if r["source"] in ("gp", "corner")]
    return float(np.mean(regret[rounds // 3:])), float(np.mean(chosen)) if chosen else 0.0


def test_code_protocol_beats_random_arms_and_keeps_off_the_corners():
    """With the code's number of random rounds (3 d) and an interior optimum under a falling trend,
    the GP's later arms are better than random arms (which already lean log-like) on every seed,
    and few of its arms are degenerate."""
    gp = [run_synthetic(GPBanditSchedule(3, seed=s, protocol="code", **FAST), s) for s in range(3)]
    rnd = [run_synthetic(RandomSchedule(3, seed=s), s) for s in range(3)]
    assert all(g[0] < r[0] for g, r in zip(gp, rnd)), (gp, rnd)
    assert np.mean([g[0] for g in gp]) < 0.75 * np.mean([r[0] for r in rnd]), (gp, rnd)
    assert np.mean([g[1] for g in gp]) <= 0.25, gp


def test_code_protocol_follows_a_drifting_optimum():
    """The optimum moves from small betas towards 1 over the run (the paper's Fig 3 story): the GP's
    arms follow it better than random arms on every seed, and few of them are degenerate. The
    text-only protocol (with as many random rounds) does worse than random arms here."""
    late = torch.tensor([0.35, 0.75], dtype=torch.float64)
    gp = [run_synthetic(GPBanditSchedule(3, seed=s, protocol="code", **FAST), s, drift=late) for s in range(3)]
    rnd = [run_synthetic(RandomSchedule(3, seed=s), s, drift=late) for s in range(3)]
    text = [run_synthetic(GPBanditSchedule(3, seed=s, protocol="paper-text", n_init=6, **FAST), s, drift=late)
            for s in range(3)]
    assert all(g[0] < r[0] for g, r in zip(gp, rnd)), (gp, rnd)
    assert np.mean([g[0] for g in gp]) < 0.75 * np.mean([r[0] for r in rnd]), (gp, rnd)
    assert np.mean([g[1] for g in gp]) <= 0.25, gp
    assert np.mean([t[0] for t in text]) > np.mean([r[0] for r in rnd]) and np.mean([t[1] for t in text]) > 0.4, text


def test_corner_guards_and_robust_standardisation_keep_the_search_off_the_corners():
    """Rebound rewards (a jump every 7th round) pull an unguarded GP with globally standardised
    rewards onto degenerate corner schedules; the code's guards and standardisation keep it off."""
    code = [run_synthetic(GPBanditSchedule(3, seed=s, protocol="code", **FAST), s, rebound=4.0) for s in range(3)]
    bare = [run_synthetic(GPBanditSchedule(3, seed=s, protocol="code", corner_guards=False, standardize="global", **FAST), s,
                          rebound=4.0) for s in range(3)]
    assert np.mean([c[1] for c in code]) < 0.4 < 0.6 < np.mean([b[1] for b in bare]), (code, bare)
    assert np.mean([c[0] for c in code]) < np.mean([b[0] for b in bare]), (code, bare)
