"""GP-bandit and random schedules: windows, rewards, state, posterior rebuild, and bandit behaviour."""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule, reward_posterior
from tvolib.bandit.scheduler import evidence_spec_for
from tvolib.schedules import Schedule
from tvolib.tvo import log_uniform, validate_schedule

# Small acquisition budgets keep the tests quick; the algorithm is unchanged.
FAST = dict(raw_samples=64, num_restarts=2, acq_maxiter=30, fit_maxiter=20)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny GPs gain nothing from threads, and extra threads slow them down on a shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def roundtrip(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


# ----- bad inputs and the Schedule interface ---------------------------------------------------
@pytest.mark.parametrize("d", [0, 1, -3, 2.5, True, "5"])
def test_rejects_bad_d(d) -> None:
    with pytest.raises(ValueError, match=r"d \(b_0 = 0 .*\) must be an integer >= 2"):
        GPBanditSchedule(d)
    with pytest.raises(ValueError):
        RandomSchedule(d)


@pytest.mark.parametrize("box", [(0.0, 0.9), (0.1, 1.0), (-0.1, 0.5), (0.5, 0.5), (0.7, 0.2), (0.1, 1.3), (0.1,), "ab"])
def test_rejects_bad_box(box) -> None:
    with pytest.raises(ValueError, match="box"):
        GPBanditSchedule(3, box=box)


def test_rejects_other_bad_options() -> None:
    for kwargs in (
        {"reward": "mean"}, {"window": 0}, {"burn_in": -1}, {"early_drop": -0.1}, {"kappa": -1.0},
        {"kappa": "big"}, {"kappa_delta": 1.5}, {"n_init": 0}, {"max_observations": 0}, {"seed": -1},
    ):
        with pytest.raises(ValueError):
            GPBanditSchedule(3, **kwargs)
    s = GPBanditSchedule(3)
    with pytest.raises(ValueError, match="evidence"):
        s.step(1)
    s.step(1, evidence=-100.0)
    with pytest.raises(ValueError, match="increase"):
        s.step(1, evidence=-99.0)
    with pytest.raises(ValueError):
        s.step(2, evidence="high")


@pytest.mark.parametrize("cls", [GPBanditSchedule, RandomSchedule])
@pytest.mark.parametrize("d", [2, 5, 15])
def test_current_is_a_valid_schedule_in_the_box(cls, d: int) -> None:
    s = cls(d, seed=3)
    assert isinstance(s, Schedule) and s.d == d
    betas = s.current()
    assert betas.shape == (d,) and betas.dtype == torch.float64
    validate_schedule(betas)
    assert betas[0] == 0 and torch.all(betas[1:] >= 0.05) and torch.all(betas[1:] <= 0.95)


def test_evidence_specs() -> None:
    paper = GPBanditSchedule(3, protocol="paper-text").evidence_spec
    assert paper.rule == "left" and len(paper.betas) == 50
    assert np.allclose(paper.betas, np.arange(50) / 50)
    code = GPBanditSchedule(3).evidence_spec  # the default protocol is the authors' code's
    assert code.rule == "trapezoid" and len(code.betas) == 50
    assert np.allclose(code.betas, 10 ** np.linspace(-9, 0, 50)) and code.betas[-1] == 1.0
    assert evidence_spec_for("paper") == paper


# ----- windows and rewards ----------------------------------------------------------------------
def test_window_growth() -> None:
    s = RandomSchedule(3, seed=0, reward="paper")
    for epoch in range(0, 400):
        s.step(epoch, evidence=float(epoch))  # steadily improving: no early updates
    h = s.history()
    lengths = [r["length"] for r in h]
    expected = [6 + k // 10 for k in range(len(h))]
    assert lengths == expected and all(not r["early"] for r in h)
    assert [r["window"] for r in h] == expected
    # windows tile the epochs: each starts where the previous ended, starting at epoch 0
    assert h[0]["start_epoch"] == 0
    assert all(a["epoch"] == b["start_epoch"] for a, b in zip(h, h[1:]))
    assert all(r["reward"] == r["length"] for r in h)  # L = epoch, so L_end - L_start = length


def test_reward_attribution_with_early_update() -> None:
    s = RandomSchedule(4, seed=1, window=6, early_drop=0.05, reward="paper")
    evid = {0: -100.0, 1: -99.0, 2: -98.0, 3: -97.0, 4: -96.0, 5: -95.0, 6: -94.0,  # round 0: +6
            7: -93.9, 8: -94.2,  # round 1: drops 0.2 below its start (-94.0) at epoch 8 -> early
            9: -94.1, 10: -94.0, 11: -93.0, 12: -92.0, 13: -91.5, 14: -91.0}  # round 2: full window
    arms = {}
    for epoch in range(15):
        arms[epoch] = s.current_arm().tolist()  # the arm that trained epoch `epoch` (before its report)
        s.step(epoch, evidence=evid[epoch])
    h = s.history()
    assert len(h) == 3
    assert h[0]["reward"] == pytest.approx(6.0) and not h[0]["early"] and h[0]["length"] == 6
    assert h[1]["early"] and h[1]["length"] == 2 and h[1]["epoch"] == 8
    assert h[1]["reward"] == pytest.approx(-94.2 - -94.0)
    assert h[2]["start_epoch"] == 8 and h[2]["epoch"] == 14 and not h[2]["early"]
    assert h[2]["reward"] == pytest.approx(-91.0 - -94.2)
    # each reward belongs to the arm used for its whole window, never a mix
    assert h[0]["arm"] == arms[1] == arms[6]  # epochs 1-6
    assert h[1]["arm"] == arms[7] == arms[8]  # epochs 7-8 (early update at the report of epoch 8)
    assert h[2]["arm"] == arms[9] == arms[14]  # epochs 9-14
    assert h[0]["arm"] != h[1]["arm"] != h[2]["arm"]
    assert h[0]["next_arm"] == h[1]["arm"] and h[1]["next_arm"] == h[2]["arm"]


def test_small_dips_do_not_trigger_early_updates_and_none_disables_them() -> None:
    for early_drop, n_rounds in ((0.05, 1), (None, 1)):
        s = RandomSchedule(3, early_drop=early_drop)
        for epoch, L in enumerate([-10.0, -10.04, -10.03, -10.2 if early_drop is None else -10.01, -9.0, -9.0, -8.0]):
            s.step(epoch, evidence=L)
        assert len(s.history()) == n_rounds and not s.history()[0]["early"]


def test_code_reward_uses_window_means() -> None:
    s = RandomSchedule(3, window=3, reward="code")
    L = [-50.0, -49.0, -48.0, -47.0, -46.0, -45.5, -45.0, -44.9, -44.8, -44.7]
    for epoch, value in enumerate(L):
        s.step(epoch, evidence=value)
    h = s.history()
    m1 = np.mean(L[1:4])
    m2 = np.mean(L[4:7])
    m3 = np.mean(L[7:10])
    assert [r["reward"] for r in h] == pytest.approx([m1 - L[0], m2 - m1, m3 - m2])


@pytest.mark.parametrize("burn_in_schedule", ["log", "arm"])
def test_burn_in_delays_the_first_window(burn_in_schedule) -> None:
    """The burn-in trains with the log schedule (the code) or the first arm; the first arm then
    trains the first window, which starts at the burn-in's last epoch."""
    s = RandomSchedule(3, burn_in=20, burn_in_schedule=burn_in_schedule)
    arm = torch.cat([torch.zeros(1, dtype=torch.float64), s.current_arm()])
    during = log_uniform(3) if burn_in_schedule == "log" else arm
    for epoch in range(0, 20):
        assert torch.equal(s.current(), during)  # exact: the same values built the same way
        s.step(epoch, evidence=float(epoch))
    s.step(20, evidence=20.0)
    for epoch in range(21, 26):
        assert torch.equal(s.current(), arm)  # exact: the recorded arm itself
        s.step(epoch, evidence=float(epoch))
    s.step(26, evidence=26.0)
    h = s.history()
    assert len(h) == 1 and h[0]["start_epoch"] == 20 and h[0]["epoch"] == 26


def test_nan_rewards_are_skipped_and_never_reach_the_gp() -> None:
    s = GPBanditSchedule(3, seed=0, n_init=3, **FAST)
    rewards = [0.1, float("nan"), 0.3, float("inf"), 0.2, 0.5, 0.4]
    for k, y in enumerate(rewards):
        if math.isfinite(y):
            s.observe(y)
        else:
            with pytest.warns(RuntimeWarning, match="non-finite reward"):
                s.observe(y)
    h = s.history()
    assert [r["skipped"] for r in h] == [not math.isfinite(y) for y in rewards]
    gp_rows = [r for r in h if r["source"] == "gp"]
    assert gp_rows, "the GP should have taken over after 3 finite rewards"
    for r in gp_rows:
        assert r["n_obs"] == sum(math.isfinite(y) for y in rewards[: r["round"] + 1])
        assert math.isfinite(r["lengthscale"]) and math.isfinite(r["acq_value"])


def test_nan_evidence_is_ignored_and_never_starts_a_window() -> None:
    s = RandomSchedule(3, window=2, reward="paper")
    with pytest.warns(RuntimeWarning, match="epoch 2: non-finite evidence nan ignored"):
        for epoch, L in enumerate([0.0, 1.0, float("nan"), 2.0, 3.0, 4.0, 5.0]):
            s.step(epoch, evidence=L)
    h = s.history()
    # round 0 is due at epoch 2 but its report is NaN: it goes on to epoch 3 (same arm), reward L_3 - L_0
    assert [(r["start_epoch"], r["epoch"], r["reward"], r["skipped"]) for r in h] == [
        (0, 3, 2.0, False), (3, 5, 2.0, False)]
    assert h[0]["ignored_epochs"] == [2] and h[1]["ignored_epochs"] == []
    # a NaN at the very first report does not become the first window's start either
    s = RandomSchedule(3, window=2, reward="paper")
    with pytest.warns(RuntimeWarning):
        s.step(0, evidence=float("nan"))
    for epoch in (1, 2, 3):
        s.step(epoch, evidence=float(epoch))
    assert [(r["start_epoch"], r["epoch"], r["reward"], r["ignored_epochs"]) for r in s.history()] == [(1, 3, 2.0, [0])]


def test_gp_bandit_driven_by_step_with_synthetic_evidence() -> None:
    """The trainer's path: per-epoch evidence whose increments depend on the arm in use."""
    s = GPBanditSchedule(3, seed=4, window=2, n_init=3, reward="paper", **FAST)
    L, used = -200.0, {}
    s.step(0, evidence=L)
    for epoch in range(1, 27):
        arm = s.current_arm()
        used[epoch] = arm.tolist()
        L += 2.0 * drifting_bump(arm, epoch, 0.0)
        s.step(epoch, evidence=L)
    h = s.history()
    assert len(h) == 12 and [r["length"] for r in h] == [2] * 10 + [3] * 2
    for r in h:
        epochs = range(r["start_epoch"] + 1, r["epoch"] + 1)
        assert all(used[e] == r["arm"] for e in epochs)  # one arm per window
        assert r["reward"] == pytest.approx(r["evidence_end"] - r["evidence_start"])
    sources = [r["source"] for r in h]
    assert sources[:2] == ["random"] * 2 and set(sources[2:]) <= {"gp", "corner"} and "gp" in sources


# ----- state and reproducibility ------------------------------------------------------------------
@pytest.mark.parametrize("split", [2, 7])  # resume in the random phase and in the GP phase
def test_resume_gives_the_same_subsequent_arms(split: int) -> None:
    def reward(arm: torch.Tensor, k: int) -> float:
        return float(torch.exp(-((torch.sort(arm).values - torch.tensor([0.3, 0.6])) ** 2).sum() / 0.1)) + 0.01 * k

    a = GPBanditSchedule(3, seed=5, n_init=3, **FAST)
    for k in range(split):
        a.observe(reward(a.current_arm(), k))
    state = roundtrip(a.state_dict())
    b = GPBanditSchedule(3, seed=5, n_init=3, **FAST)
    b.load_state_dict(state)
    for k in range(split, split + 3):
        assert torch.equal(a.current(), b.current())  # exact: a resumed copy runs the same code on the same inputs
        y = reward(a.current_arm(), k)
        a.observe(y)
        b.observe(y)
    ha, hb = a.history(), b.history()
    strip = lambda h: [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in h]  # noqa: E731
    assert strip(ha) == strip(hb)
    assert any(r["source"] == "gp" for r in ha[split:])
    with pytest.raises(ValueError, match="differently configured"):
        GPBanditSchedule(3, seed=6, n_init=3, **FAST).load_state_dict(state)


def test_resume_mid_window_through_step() -> None:
    a = RandomSchedule(3, seed=2, window=4)
    for epoch in range(7):
        a.step(epoch, evidence=float(epoch))
    b = RandomSchedule(3, seed=2, window=4)
    b.load_state_dict(roundtrip(a.state_dict()))
    for epoch in range(7, 20):
        a.step(epoch, evidence=float(epoch) ** 0.5)
        b.step(epoch, evidence=float(epoch) ** 0.5)
        assert torch.equal(a.current(), b.current())  # exact: a resumed copy runs the same code on the same inputs
    assert a.history() == b.history()


def test_same_seed_same_arms_and_global_rng_untouched() -> None:
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    runs = []
    for _ in range(2):
        s = GPBanditSchedule(2, seed=11, n_init=3, **FAST)
        for k in range(6):
            s.observe(math.sin(5 * float(s.current_arm()[0])))
        runs.append([r["arm"] for r in s.history()])
    assert runs[0] == runs[1]
    assert torch.equal(torch.random.get_rng_state(), before)  # exact: a generator state is bytes
    other = RandomSchedule(2, seed=12)
    assert not torch.equal(other.current(), RandomSchedule(2, seed=11).current())


# ----- the GP rounds, posterior rebuild, ablations -------------------------------------------------
def test_history_records_every_round_and_rebuilds_the_posterior() -> None:
    s = GPBanditSchedule(2, seed=0, n_init=3, **FAST)
    for k in range(8):
        b = float(s.current_arm()[0])
        s.observe(-((b - 0.4) ** 2) * 10 + 0.05 * k)
    h = s.history()
    keys = {"round", "epoch", "window", "arm", "betas", "reward", "early", "lengthscale", "omega", "noise",
            "acq_value", "kappa", "fit_seconds", "acq_seconds", "next_arm", "source", "t_pred", "n_obs"}
    assert all(keys <= set(r) for r in h)
    gp_rows = [r for r in h if r["source"] == "gp"]
    assert [r["round"] for r in gp_rows] == list(range(2, 8))
    for r in gp_rows:
        assert 0 < r["omega"] < 1 and r["lengthscale"] > 0 and r["noise"] > 0 and r["kappa"] > 0
        # the rebuilt GP reproduces the acquisition value the bandit recorded at its choice
        mean, std = reward_posterior(h, r["round"], torch.tensor([r["next_arm"]]), component="arm")
        ucb = float(mean) / r["y_std"] + math.sqrt(r["kappa"]) * float(std) / r["y_std"]
        assert ucb == pytest.approx(r["acq_value"], rel=1e-6, abs=1e-6)
    # a DataFrame of the rows works the same; random rounds have no posterior
    grid = torch.linspace(0.05, 0.95, 7)
    m1, s1 = reward_posterior(h, 5, grid)
    m2, s2 = reward_posterior(pd.DataFrame(h), 5, grid)
    assert torch.allclose(m1, m2) and torch.allclose(s1, s2) and torch.all(s1 > 0)
    with pytest.raises(ValueError, match="no GP"):
        reward_posterior(h, 0, grid)
    with pytest.raises(ValueError, match="not in the history"):
        reward_posterior(h, 99, grid)
    with pytest.raises(ValueError, match="grid"):
        reward_posterior(h, 5, torch.zeros(3, 2))


def test_reward_posterior_checks_its_grid_its_round_and_every_cell() -> None:
    """A NaN arm or one outside [0, 1] is refused (not a NaN or an ordinary number back); a round given as
    text and bad history cells are named by row and column instead of failing deep inside."""
    s = GPBanditSchedule(3, seed=0, n_init=3, **FAST)
    for k in range(6):
        s.observe(float(s.current_arm().sum()) + 0.1 * k)
    h = s.history()
    grid = torch.tensor([[0.1, 0.5]], dtype=torch.float64)
    reward_posterior(h, 4, grid)
    with pytest.raises(ValueError, match=r"grid must hold arms in beta units, finite and in \[0, 1\] .*; got nan in row 1"):
        reward_posterior(h, 4, torch.tensor([[0.1, 0.5], [float("nan"), 0.5]]))
    with pytest.raises(ValueError, match=r"grid must hold arms .*; got -3\.0 in row 0"):
        reward_posterior(h, 4, torch.tensor([[-3.0, 5.0]]))
    with pytest.raises(ValueError, match=r"round_index \(a recorded round\) must be an integer >= 0; got '3'"):
        reward_posterior(h, "3", grid)
    bad = [dict(r) for r in h]
    bad[1]["reward"] = None
    with pytest.raises(ValueError, match=r"schedule_history row 1 \(round 1\) column 'reward' must be a number; got None"):
        reward_posterior(bad, 4, grid)
    frame = pd.DataFrame(h).astype({"arm": object})
    frame.at[2, "arm"] = "[0.1, x"
    with pytest.raises(ValueError, match=r"row 2 \(round 2\) column 'arm' must be a list of finite numbers; got '\[0\.1, x'"):
        reward_posterior(frame, 4, grid)
    bad = [dict(r) for r in h]
    bad[4]["lengthscale"] = "abc"
    with pytest.raises(ValueError, match=r"row 4 \(round 4\) column 'lengthscale' must be None or a finite number; got 'abc'"):
        reward_posterior(bad, 4, grid)
    del bad[4]["lengthscale"]
    with pytest.raises(ValueError, match=r"round 4 was a GP round but has no \['lengthscale'\]"):
        reward_posterior(bad, 4, grid)
    del bad[3]["reward"]
    with pytest.raises(ValueError, match=r"row 3 \(round 3\) has no column\(s\) \['reward'\]"):
        reward_posterior(bad, 4, grid)


def test_reward_posterior_names_an_adaptive_history_without_its_d_max_column(tmp_path) -> None:
    """The adaptive-d bandit's rows, read back from a CSV whose d_max column (or every d column)
    was dropped: named as that bandit's, not a ragged-tensor error deep inside."""
    s = AdaptiveDBanditSchedule(4, seed=1, n_init=3, window=1, **FAST)
    for k in range(5):
        s.observe(0.1 * len(s.current_arm()) + 0.01 * k)
    path = tmp_path / "schedule_history.csv"
    pd.DataFrame(s.history()).drop(columns=["d_max"]).to_csv(path, index=False)
    frame = pd.read_csv(path)
    grid = torch.tensor([[0.1, 0.5]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"this schedule_history has columns \['d_min', 'next_d'\]: an "
                                         r"AdaptiveDBanditSchedule's \(its d_max column is missing\)"):
        reward_posterior(frame, 4, grid)
    with pytest.raises(ValueError, match=r"has columns \['d_max', 'd_min', 'next_d'\]: an AdaptiveDBanditSchedule's, whose"):
        reward_posterior(s.history(), 4, grid)
    lengths = sorted({len(r["arm"]) for r in s.history()})
    assert len(lengths) > 1  # seed 1 draws arms of more than one length
    with pytest.raises(ValueError, match=re.escape(f"this schedule_history has arms of {lengths} points: an "
                                                   "AdaptiveDBanditSchedule's (its d_max column is missing)")):
        reward_posterior(frame.drop(columns=["d_min", "next_d"]), 4, grid)


def test_posterior_rebuild_is_permutation_invariant_only_for_the_sorted_gp() -> None:
    out = {}
    for sort in (True, False):
        s = GPBanditSchedule(4, sort=sort, seed=1, n_init=4, **FAST)
        for k in range(6):
            arm = torch.sort(s.current_arm()).values
            s.observe(float(torch.exp(-((arm - torch.tensor([0.2, 0.5, 0.8])) ** 2).sum() / 0.2)))
        h = s.history()
        if not sort:  # the unsorted ablation records arms as proposed, trains with the sorted schedule
            assert all(r["betas"] == [0.0] + sorted(r["arm"]) for r in h)
        grid = torch.tensor([[0.2, 0.5, 0.8], [0.8, 0.2, 0.5]], dtype=torch.float64)
        out[sort] = reward_posterior(h, 5, grid)
    mean, std = out[True]
    assert mean[0] == pytest.approx(float(mean[1]), abs=1e-10) and std[0] == pytest.approx(float(std[1]), abs=1e-10)
    mean_u, std_u = out[False]
    assert abs(float(mean_u[0] - mean_u[1])) > 1e-4 or abs(float(std_u[0] - std_u[1])) > 1e-4


def test_time_invariant_ablation_records_omega_zero() -> None:
    s = GPBanditSchedule(3, time_varying=False, seed=0, n_init=3, **FAST)
    for k in range(5):
        s.observe(float(s.current_arm().sum()))
    gp_rows = [r for r in s.history() if r["source"] == "gp"]
    assert gp_rows and all(r["omega"] == 0.0 and r["rho"] == 0.0 for r in gp_rows)


def test_observation_cap_limits_the_gp_data() -> None:
    s = GPBanditSchedule(2, seed=0, n_init=3, max_observations=4, **FAST)
    for k in range(8):
        s.observe(float(s.current_arm()[0]))
    rows = [r for r in s.history() if r["source"] == "gp"]
    assert [r["n_obs"] for r in rows][-3:] == [4, 4, 4]
    assert rows[-1]["t_origin"] == 4  # rounds 4..7 kept
    reward_posterior(s.history(), 7, torch.tensor([0.5]))  # rebuild honours the cap


def test_kappa_options() -> None:
    th = GPBanditSchedule(3, kappa="theorem1")
    code = GPBanditSchedule(3)  # the code's log(N + 2)
    assert th.current_kappa(10, 10) > code.current_kappa(10, 10) == pytest.approx(math.log(12))
    assert GPBanditSchedule(3, kappa=2.5).current_kappa(10, 10) == 2.5


# ----- bandit behaviour on synthetic rewards -------------------------------------------------------
def drifting_bump(arm: torch.Tensor, k: int, drift: float) -> float:
    """Gaussian bump over the sorted 2-d arm, centre moving slowly with the round; max 1."""
    b = torch.sort(arm).values
    centre = torch.tensor([0.3, 0.65], dtype=torch.float64) + drift * math.sin(2 * math.pi * k / 60)
    return float(torch.exp(-((b - centre) ** 2).sum() / (2 * 0.2**2)))


def average_regret(cls, seed: int, rounds: int, drift: float, **kwargs) -> tuple[float, list[list[float]]]:
    s = cls(3, seed=seed, **kwargs)
    noise = torch.Generator().manual_seed(1000 + seed)
    regret = []
    for k in range(rounds):
        f = drifting_bump(s.current_arm(), k, drift)
        regret.append(1.0 - f)
        s.observe(f + 0.05 * float(torch.randn(1, generator=noise)))
    return float(np.mean(regret)), [r["arm"] for r in s.history()]


def test_gp_bandit_beats_random_search_on_a_drifting_bump() -> None:
    """The GP-UCB step itself (paper-text protocol, kappa = log(N + 2)) tracks a moving optimum."""
    gp = [average_regret(GPBanditSchedule, seed, 30, 0.1, protocol="paper-text", kappa="log_n", **FAST)[0]
          for seed in range(3)]
    rnd = [average_regret(RandomSchedule, seed, 30, 0.1, protocol="paper-text")[0] for seed in range(3)]
    assert np.mean(gp) < 0.7 * np.mean(rnd), (gp, rnd)
    assert all(g < r for g, r in zip(gp, rnd)), (gp, rnd)


def test_default_gp_bandit_concentrates_near_a_static_optimum() -> None:
    """Paper-text protocol (Theorem 1's kappa): more exploratory, still well below random search, and converging."""
    gp, rnd = [], []
    for seed in range(3):
        regret, arms = average_regret(GPBanditSchedule, seed, 30, 0.0, protocol="paper-text", **FAST)
        gp.append(regret)
        rnd.append(average_regret(RandomSchedule, seed, 30, 0.0, protocol="paper-text")[0])
        late = np.sort(np.array(arms[-8:]), axis=1)
        dist = np.linalg.norm(late - np.array([0.3, 0.65]), axis=1)
        assert np.median(dist) < 0.15, late
    assert np.mean(gp) < 0.8 * np.mean(rnd), (gp, rnd)


# ---- round 0 starts at L_0; early updates at the threshold ----------------------------------------


@pytest.mark.parametrize("cls", [RandomSchedule, GPBanditSchedule])
def test_round_zero_starts_at_the_untrained_model(cls) -> None:
    """With step(0, L_0): round 0 trains epochs 1..w and earns L_w - L_0 (the paper's reward)."""
    s = cls(3, window=6, seed=0, reward="paper", **(FAST if cls is GPBanditSchedule else {}))
    L = {e: -100.0 + e * e for e in range(20)}
    arms = {}
    for epoch in range(13):
        if epoch:
            arms[epoch] = s.current_arm().tolist()  # the arm that trains epoch `epoch`
        s.step(epoch, evidence=L[epoch])
    h = s.history()
    assert [(r["start_epoch"], r["epoch"], r["length"]) for r in h] == [(0, 6, 6), (6, 12, 6)]
    assert h[0]["reward"] == L[6] - L[0] and h[1]["reward"] == L[12] - L[6]
    assert h[0]["arm"] == arms[1] == arms[6] and h[1]["arm"] == arms[7] == arms[12]
    assert cls.REVISION == 5


def test_without_step_zero_the_first_report_starts_the_window() -> None:
    s = RandomSchedule(3, window=6, seed=0, reward="paper")
    for epoch in range(1, 14):
        s.step(epoch, evidence=float(epoch) ** 2)
    assert [(r["start_epoch"], r["epoch"], r["reward"]) for r in s.history()] == [(1, 7, 48.0), (7, 13, 120.0)]


@pytest.mark.parametrize("reward", ["paper", "code"])
@pytest.mark.parametrize(("start", "current", "fires"), [
    (-200.0, -200.05, False),  # exactly 0.05: 0.05000000000001137 in float arithmetic, used to fire
    (-100.0, -100.05, False),
    (-200.0, -200.0501, True),
    (-100.0, -100.0501, True),
])
def test_early_update_fires_only_above_the_threshold(reward, start, current, fires) -> None:
    s = RandomSchedule(3, window=6, early_drop=0.05, reward=reward)
    s.step(0, evidence=start)
    s.step(1, evidence=current)
    assert len(s.history()) == int(fires)
    if fires:
        assert s.history()[0]["early"] and s.history()[0]["length"] == 1


# ---- load_state_dict checks everything ------------------------------------------------------------


def _corrupt(state: dict, key: str, value) -> dict:
    out = dict(state)
    out[key] = value
    return out


@pytest.mark.parametrize(("key", "value", "message"), [
    ("arm", [0.5], "'arm' must be a list of 2 distinct finite numbers in \\[0.05, 0.95\\]"),
    ("arm", [0.5, 1.5], "'arm' must be"),
    ("arm", [0.5, float("nan")], "'arm' must be"),
    ("arm", [0.5, 0.5], "'arm' must be"),
    ("round", -1, "'round' must be an int"),
    ("history", [], "'history' must be a list of 2 round records"),
    ("start_evidence", float("nan"), "'start_evidence' must be a finite number"),
    ("start_epoch", 99, "'start_epoch' must be None or an int in \\[0, last_epoch=6\\]"),
    ("window_evidence", [float("inf")], "'window_evidence' must be a list of finite numbers"),
    ("ignored_epochs", ["x"], "'ignored_epochs' must be a list of ints"),
    ("generator", torch.zeros(3, dtype=torch.uint8), "'generator' must be a torch.Generator state"),
    ("version", 1, "'version' is 1, this code reads format 3"),
])
def test_load_state_dict_rejects_bad_entries(key, value, message) -> None:
    s = RandomSchedule(3, window=3, seed=0)
    for epoch in range(7):
        s.step(epoch, evidence=float(epoch))
    state = roundtrip(s.state_dict())
    fresh = RandomSchedule(3, window=3, seed=0)
    with pytest.raises(ValueError, match=message):
        fresh.load_state_dict(_corrupt(state, key, value))
    fresh.load_state_dict(state)  # the intact state still loads, and nothing was half-loaded before
    assert fresh.history() == s.history()


@pytest.mark.parametrize("state", [{}, {"betas": [0.0, 0.5]}, {"version": 2}, [1, 2]])
def test_load_state_dict_rejects_foreign_dicts(state) -> None:
    with pytest.raises(ValueError, match="RandomSchedule"):
        RandomSchedule(3).load_state_dict(state)


def test_gp_state_checks_hyperparameters() -> None:
    s = GPBanditSchedule(3, seed=0, **FAST)
    state = roundtrip(s.state_dict())
    with pytest.raises(ValueError, match="'hyperparameters'"):
        GPBanditSchedule(3, seed=0, **FAST).load_state_dict(_corrupt(state, "hyperparameters", {"lengthscale": -1.0}))
    with pytest.raises(ValueError, match="no key 'hyperparameters'"):
        GPBanditSchedule(3, seed=0, **FAST).load_state_dict({k: v for k, v in state.items() if k != "hyperparameters"})


@pytest.mark.parametrize(("field", "value", "message"), [
    ("arm", [5.0, -3.0], r"history\[1\]\.arm' must be a list of 2 distinct finite numbers in \[0.05, 0.95\]"),
    ("arm", [float("nan"), 0.5], r"history\[1\]\.arm' must be a list of 2 distinct finite numbers"),
    ("arm", [0.6, 0.3], r"history\[1\]\.arm' must be sorted"),
    ("reward", 1e300, r"history\[1\]\.reward' must be a finite number within \+-1e\+06 nats"),
    ("reward", "1.5", r"history\[1\]\.reward' must be a number"),
    ("skipped", "no", r"history\[1\]\.skipped' must be True or False"),
    ("next_arm", [0.5, 0.5], r"history\[1\]\.next_arm' must be a list of 2 distinct finite numbers"),
])
def test_load_state_dict_checks_every_history_row(field, value, message) -> None:
    """A history row with an arm outside the box, unsorted or NaN, a huge or non-numeric reward is
    refused, naming the row and field, instead of reaching the GP later."""
    s = RandomSchedule(3, window=2, box=(0.05, 0.95), arm_domain="box", seed=0)
    for epoch in range(7):
        s.step(epoch, evidence=float(epoch))
    state = roundtrip(s.state_dict())
    state["history"][1][field] = value
    with pytest.raises(ValueError, match=message):
        RandomSchedule(3, window=2, arm_domain="box", seed=0).load_state_dict(state)
    del state["history"][1][field if field != "skipped" else "reward"]
    with pytest.raises(ValueError, match=r"history\[1\]' must be a round record with keys"):
        RandomSchedule(3, window=2, arm_domain="box", seed=0).load_state_dict(state)


# ---- the rounds of a saved state follow one another; every history field is checked -----------------


def _stepped(**kwargs) -> tuple[RandomSchedule, dict]:
    """A random schedule after 7 epochs of windows of 2 (rounds 0..2 closed, round 3 open) and its saved state."""
    s = RandomSchedule(3, window=2, seed=0, **kwargs)
    for epoch in range(7):
        s.step(epoch, evidence=float(epoch))
    return s, roundtrip(s.state_dict())


def test_load_state_dict_refuses_a_broken_arm_chain() -> None:
    """The arm trained now is the last round's next_arm, and each round's arm is the previous round's
    next_arm: otherwise the run would train an arm the bandit never chose."""
    _, state = _stepped()
    other = [0.1, 0.2] if state["arm"] != [0.1, 0.2] else [0.1, 0.3]
    with pytest.raises(ValueError, match=r"'arm' is \[0\.1, 0\.[23]\], but round 2 chose next_arm .*never chose"):
        RandomSchedule(3, window=2, seed=0).load_state_dict({**state, "arm": other})
    state["history"][0]["next_arm"] = other
    with pytest.raises(ValueError, match=r"'history\[1\]\.arm' is .*, but round 0 chose next_arm \[0\.1, 0\.[23]\]"):
        RandomSchedule(3, window=2, seed=0).load_state_dict(state)


def test_load_state_dict_refuses_a_cut_history_with_its_round_counter_lowered() -> None:
    """Cutting the last round and lowering ``round`` to match (and even mending the arm chain) leaves
    the open window starting where no recorded round ended: refused, so no round goes missing."""
    _, state = _stepped()
    state["history"] = state["history"][:-1]
    state["round"] -= 1
    state["arm"] = state["history"][-1]["next_arm"]
    with pytest.raises(ValueError, match=r"'start_epoch' is 6, but the last recorded round \(1\) ended at epoch 4"):
        RandomSchedule(3, window=2, seed=0).load_state_dict(state)
    _, state = _stepped()
    state["history"][1]["start_epoch"] = 3
    with pytest.raises(ValueError, match=r"'history\[1\]\.start_epoch' is 3, but round 0 ended at epoch 2"):
        RandomSchedule(3, window=2, seed=0).load_state_dict(state)
    _, state = _stepped()
    state["history"][1]["window"] = 5
    with pytest.raises(ValueError, match=r"'history\[1\]\.window' is 5, but this schedule plans 2 epochs"):
        RandomSchedule(3, window=2, seed=0).load_state_dict(state)


BAD_FIELDS = [
    ("n_obs", -5, r"'history\[1\]\.n_obs' must be None or an int >= 0; got -5"),
    ("lengthscale", "x", r"'history\[1\]\.lengthscale' must be None or a finite number; got 'x'"),
    ("epoch", "4", r"'history\[1\]\.epoch' must be None or an int >= 0; got '4'"),
    ("fit_ok", "maybe", r"'history\[1\]\.fit_ok' must be None, True or False; got 'maybe'"),
    ("next_degenerate", 2, r"'history\[1\]\.next_degenerate' must be True or False; got 2"),
    ("ignored_epochs", [-1], r"'history\[1\]\.ignored_epochs' must be a list of ints >= 0; got \[-1\]"),
    ("betas", "x", r"'history\[1\]\.betas' must be a list of finite numbers; got 'x'"),
    ("source", 3, r"'history\[1\]\.source' must be a string; got 3"),
    ("evidence_end", 1e300, r"'history\[1\]\.evidence_end' must be None or a finite number within \+-5e\+05"),
    ("reward", 10**400, r"'history\[1\]\.reward' must be a finite number within \+-1e\+06 nats"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_FIELDS, ids=[case[0] for case in BAD_FIELDS])
def test_load_state_dict_checks_every_history_field(field, value, message) -> None:
    _, state = _stepped()
    state["history"][1][field] = value
    with pytest.raises(ValueError, match=message):
        RandomSchedule(3, window=2, seed=0).load_state_dict(state)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("window_evidence", [1e300], r"'window_evidence' must be a list of finite numbers within \+-5e\+05 nats"),
    ("window_evidence", [10**400], r"'window_evidence' must be a list of finite numbers"),
    ("start_evidence", -1e300, r"'start_evidence' must be a finite number within \+-5e\+05 nats"),
    ("prev_window_mean", 10**400, r"'prev_window_mean' must be None or a finite number within \+-5e\+05 nats"),
], ids=["window_evidence-1e300", "window_evidence-10**400", "start_evidence", "prev_window_mean"])
def test_load_state_dict_refuses_huge_evidence(key, value, message) -> None:
    _, state = _stepped(reward="paper")
    with pytest.raises(ValueError, match=message):
        RandomSchedule(3, window=2, seed=0, reward="paper").load_state_dict({**state, key: value})


def test_step_and_observe_refuse_huge_values_at_the_door() -> None:
    """Evidence beyond +-5e5 nats (or a reward beyond +-1e6) would make a state that load_state_dict refuses."""
    s = RandomSchedule(3, window=2, seed=0)
    s.step(0, evidence=-100.0)
    with pytest.raises(ValueError, match=r"evidence at epoch 1 must be .* within \+-5e\+05 nats .*; got 1e\+300"):
        s.step(1, evidence=1e300)
    s.step(1, evidence=-99.0)  # nothing was recorded by the refused report
    with pytest.raises(ValueError, match=r"reward must be .* within \+-1e\+06 nats; got -1e\+300"):
        s.observe(-1e300)
    s.step(2, evidence=-98.0)
    assert [r["epoch"] for r in s.history()] == [2]
    RandomSchedule(3, window=2, seed=0).load_state_dict(roundtrip(s.state_dict()))


# ---- constructor arguments: combinations, sizes, NumPy and torch scalars --------------------------


def test_max_observations_below_n_init_is_refused() -> None:
    """The GP needs n_init observations but keeps only the last max_observations: every round would be random."""
    with pytest.raises(ValueError, match=r"max_observations=2 is below n_init=5: .* every round would draw a random"):
        GPBanditSchedule(d=3, n_init=5, max_observations=2)
    with pytest.raises(ValueError, match=r"max_observations=4 is below n_init=9"):  # the code's n_init = 3 d
        GPBanditSchedule(3, max_observations=4)
    assert GPBanditSchedule(3, n_init=4, max_observations=4).max_observations == 4


@pytest.mark.parametrize(("option", "value", "message"), [
    ("ml_starts", 10**9, r"ml_starts .*must be an integer in \[1, 2000\]; got 1000000000"),
    ("raw_samples", 10**9, r"raw_samples .*must be an integer in \[1, 16384\]; got 1000000000"),
    ("num_restarts", 10**6, r"num_restarts .*must be an integer in \[1, 100\]; got 1000000"),
    ("num_restarts", 50, r"num_restarts \(50\) must not exceed raw_samples \(32\)"),
], ids=["ml_starts", "raw_samples", "num_restarts", "restarts_beyond_samples"])
def test_absurd_gp_budgets_are_refused_at_construction(option, value, message) -> None:
    """Not at the first GP round, with a raw allocation error or BoTorch's own message."""
    options = {"raw_samples": 32, option: value} if option == "num_restarts" else {option: value}
    with pytest.raises(ValueError, match=message):
        GPBanditSchedule(3, **options)


@pytest.mark.parametrize("kappa", [np.int64(2), np.float32(2.0), torch.tensor(2), torch.tensor(2.0)],
                         ids=["np.int64", "np.float32", "torch-int", "torch-float"])
def test_numpy_and_torch_scalars_are_accepted_as_python_numbers(kappa) -> None:
    s = GPBanditSchedule(3, kappa=kappa, corner_guards=np.bool_(False), n_init=np.int64(5),
                         standardize=np.str_("global"), window=np.int32(2))
    assert s.kappa == 2.0 and type(s.kappa) is float
    assert s.corner_guards is False and s.n_init == 5 and s.window == 2 and s.standardize == "global"
    assert s._config() == GPBanditSchedule(3, kappa=2.0, corner_guards=False, n_init=5, standardize="global",
                                           window=2)._config()


def test_a_protocol_that_is_not_a_name_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match=r"protocol must be one of \[.*'code'.*\]; got \['code'\]"):
        GPBanditSchedule(3, protocol=["code"])
    with pytest.raises(ValueError, match=r"protocol must be one of .*; got \['code'\]"):
        RandomSchedule(3, protocol=["code"])
