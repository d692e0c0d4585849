"""The value rules of the bandit's history rows (tvolib.bandit.rules, tvolib.bandit.state.HISTORY_FIELDS).

Two sides: every history the schedules really record passes every rule (GPBanditSchedule under
each protocol, unsorted and time-invariant, at d = 2 and 5, with a burn-in, random search, and
AdaptiveDBanditSchedule under both d choices and both domains, on short test-bed runs; skipped and
ignored rounds, rounds closed by observe(), corner rounds), as recorded, from a saved state and read
back from the run folder's CSV; and every edited value the rules exist for is refused, naming the
row, the column, the value and the rule, wherever records are read (load_state_dict, the CSV, replay,
reward_posterior).
"""
from __future__ import annotations

import dataclasses
import io
import math
import warnings
from pathlib import Path

import pytest
import torch

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule, replay, reward_posterior
from tvolib.bandit import adaptive as adaptive_module
from tvolib.bandit import scheduler as scheduler_module
from tvolib.bandit.base import BanditScheduleBase
from tvolib.bandit.rules import Rule
from tvolib.bandit.state import FIELD_KINDS, HISTORY_FIELDS, check_history, parse_history
from tvolib.bandit.testbed import CASES, run_case
from tvolib.runs.store import read_records_csv, write_records_csv

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: Small GP budgets and windows of one epoch growing every 4 rounds: 8 to 9 rounds in 12 epochs.
FAST = dict(ml_starts=4, raw_samples=16, num_restarts=1, acq_maxiter=5, fit_maxiter=5, device="cpu", window=1,
            window_growth_every=4, n_init=3)
D5 = dataclasses.replace(CASES["d5-log-strong"], epochs=12)
D2 = dataclasses.replace(CASES["d2-log-strong"], epochs=12)
STEP = dataclasses.replace(CASES["d3-step-mild"], epochs=12)

SCHEDULES = {
    "gp-code": (D5, lambda s: GPBanditSchedule(5, protocol="code", seed=s, **FAST)),
    "gp-tvolib": (D5, lambda s: GPBanditSchedule(5, protocol="tvolib", seed=s, **FAST)),
    "gp-paper-text": (D5, lambda s: GPBanditSchedule(5, protocol="paper-text", seed=s, **FAST)),
    "gp-unsorted-time-invariant": (D5, lambda s: GPBanditSchedule(5, sort=False, time_varying=False, seed=s,
                                                                  **FAST)),
    "gp-d2-burn-in": (D2, lambda s: GPBanditSchedule(2, protocol="code", burn_in=2, seed=s, **FAST)),
    "gp-box-map-theorem1": (D5, lambda s: GPBanditSchedule(5, arm_domain="box", fit="map", kappa="theorem1",
                                                           standardize="global", seed=s, **FAST)),
    "random": (D5, lambda s: RandomSchedule(5, seed=s, window=1)),
    "adaptive-thompson": (STEP, lambda s: AdaptiveDBanditSchedule(5, seed=s, **FAST)),
    "adaptive-margin-code": (STEP, lambda s: AdaptiveDBanditSchedule(5, d_choice="margin", protocol="code", seed=s,
                                                                     **FAST)),
    "adaptive-box-paper-text": (STEP, lambda s: AdaptiveDBanditSchedule(4, d_min=3, arm_domain="box",
                                                                        protocol="paper-text", seed=s, **FAST)),
}


def _roundtrip(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _csv_rows(rows, tmp_path: Path) -> list[dict]:
    """The rows as a run folder's schedule_history.csv holds them, read back and parsed."""
    path = tmp_path / "schedule_history.csv"
    write_records_csv(path, rows)
    return parse_history(read_records_csv(path).to_dict("records"), source="schedule_history.csv")


@pytest.fixture(scope="module")
def recorded() -> dict[str, tuple[BanditScheduleBase, list[dict]]]:
    """Each schedule of :data:`SCHEDULES` after its short test-bed run (seed 0), and its history."""
    out, threads = {}, torch.get_num_threads()
    torch.set_num_threads(1)  # as the one_torch_thread fixture, which a module's fixture runs before
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, (case, make) in SCHEDULES.items():
                made = []
                run_case(case, lambda seed, make=make: made.append(make(seed)) or made[-1], 0)
                out[name] = (made[0], made[0].history())
    finally:
        torch.set_num_threads(threads)
    return out


def _odd_run(make_schedule) -> BanditScheduleBase:
    """A run with what the test bed never does: NaN evidence (ignored epochs), rounds closed by
    observe() and a skipped (NaN) reward."""
    schedule = make_schedule()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        schedule.step(0, evidence=float("nan"))
        for epoch, value in enumerate([-100.0, -99.0, float("nan"), -98.0, -98.5, -97.0, -96.0, -95.5], start=1):
            schedule.step(epoch, evidence=value)
    return schedule


def test_every_column_has_a_kind_and_a_rule():
    assert all(field.kind in FIELD_KINDS and isinstance(field.rule, Rule) and field.rule.text
               for field in HISTORY_FIELDS.values())


def test_every_recorded_column_is_in_the_table(recorded):
    columns = {key for _, rows in recorded.values() for row in rows for key in row}
    assert columns <= set(HISTORY_FIELDS), sorted(columns - set(HISTORY_FIELDS))


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_rules_accept_every_history_the_schedules_record(name, recorded, tmp_path):
    """As recorded, with and without the schedule, from a saved state and read back from CSV."""
    schedule, rows = recorded[name]
    assert {row["source"] for row in rows} >= ({"random"} if name == "random" else {"random", "gp"})
    check_history(rows, SCHEDULES[name][1](0), source=name)
    check_history(rows, source=name)
    SCHEDULES[name][1](0).load_state_dict(_roundtrip(schedule.state_dict()))
    check_history(_csv_rows(rows, tmp_path), SCHEDULES[name][1](0), source=name)


@pytest.mark.parametrize("name", ["gp-code", "adaptive-thompson", "random"])
def test_the_rules_accept_ignored_epochs_observed_and_skipped_rounds(name, tmp_path):
    make = lambda: SCHEDULES[name][1](0)  # noqa: E731
    schedule = _odd_run(make)
    assert any(row["ignored_epochs"] for row in schedule.history())
    for reward in (0.5, float("nan"), 0.25, 0.75, 0.1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            schedule.observe(reward)
    rows = schedule.history()
    assert any(row["skipped"] for row in rows) and any(row["epoch"] is None for row in rows)
    check_history(rows, make())
    make().load_state_dict(_roundtrip(schedule.state_dict()))
    check_history(_csv_rows(rows, tmp_path), make())


def test_the_rules_accept_corner_rounds(monkeypatch, tmp_path):
    """A GP proposal at the all-lower corner is replaced by a random arm (source "corner")."""
    monkeypatch.setattr(scheduler_module, "maximize_ucb", lambda gp, **kw: (torch.zeros(4, dtype=torch.float64), 0.5))
    monkeypatch.setattr(adaptive_module.AdaptiveDBanditSchedule, "_maximise",
                        lambda self, gp, kappa, seed: {d: (torch.zeros(d - 1, dtype=torch.float64), 0.1 * d)
                                                       for d in range(self.d_min, self.d_max + 1)})
    for make in (lambda: GPBanditSchedule(5, protocol="code", seed=0, **FAST),
                 lambda: AdaptiveDBanditSchedule(5, d_choice="margin", d_tolerance=0.0, seed=0, **FAST)):
        schedule = make()
        for k in range(6):
            schedule.observe(math.sin(k))
        rows = schedule.history()
        assert [row["source"] for row in rows].count("corner") >= 2
        check_history(rows, make())
        make().load_state_dict(_roundtrip(schedule.state_dict()))
        check_history(_csv_rows(rows, tmp_path), make())


# ----- edited values are refused wherever records are read ---------------------------------------
def _gp_row(rows) -> int:
    return next(k for k, row in enumerate(rows) if row["source"] == "gp")


def _set(column, value, row=_gp_row):
    """Set ``column`` of one row (default: the first GP round) to ``value`` (a function of the row)."""
    def edit(rows):
        k = row(rows)
        rows[k][column] = value(rows[k]) if callable(value) else value
        return k
    return edit


def _set_all(column, value):
    def edit(rows):
        for row in rows:
            row[column] = value
        return 0
    return edit


#: (history, edit, column blamed): the values issue-free histories never hold.
EDITS = {
    "source alien": ("gp-code", _set("source", "alien"), "source"),
    "source random after GP": ("gp-code", _set("source", "random", row=lambda rows: _gp_row(rows) + 1), "source"),
    "t_pred shifted by 100": ("gp-code", _set("t_pred", lambda row: row["t_pred"] + 100), "t_pred"),
    "lo above hi": ("gp-code", _set("lo", 0.96), "lo"),
    "n_obs off by one": ("gp-code", _set("n_obs", lambda row: row["n_obs"] + 1), "n_obs"),
    "omega not 1 - exp(-rho)": ("gp-code", _set("omega", 0.5), "omega"),
    "GP field on a random round": ("gp-code", _set("lengthscale", 0.3, row=lambda rows: 0), "lengthscale"),
    "reward not the evidence's": ("gp-tvolib", _set("reward", lambda row: row["reward"] + 1.0), "reward"),
    "betas not the arm's": ("gp-code", _set("betas", lambda row: [0.0, *row["betas"][2:], 0.9]), "betas"),
    "degeneracy edited": ("gp-code", _set("next_spread", 0.001), "next_spread"),
    "d 99": ("adaptive-thompson", _set("d", 99), "d"),
    "d 0": ("adaptive-thompson", _set("d", 0), "d"),
    "d contradicts the arm": ("adaptive-thompson", _set("d", lambda row: 2 if len(row["arm"]) > 1 else 3), "d"),
    "next_d above d_max": ("adaptive-thompson", _set("next_d", 9), "next_d"),
    "recommended_d 42": ("adaptive-thompson", _set("recommended_d", 42), "recommended_d"),
    "recommended_d below d_min": ("adaptive-thompson", _set("recommended_d", 1), "recommended_d"),
    "recommended_arm outside the box": ("adaptive-thompson", _set("recommended_arm", lambda row: [
        *row["recommended_arm"][:-1], 5.0]), "recommended_arm"),
    "recommended_arm of the wrong length": ("adaptive-thompson", _set("recommended_arm", lambda row: [
        *row["recommended_arm"], 0.94] if len(row["recommended_arm"]) < 4 else [0.3]), "recommended_arm"),
    "recommended_arm empty": ("adaptive-thompson", _set("recommended_arm", []), "recommended_arm"),
    "recommended_arm unsorted": ("adaptive-thompson", _set("recommended_arm", lambda row: [0.6, 0.2]),
                                 "recommended_arm"),
    "mean_by_d of the wrong length": ("adaptive-thompson", _set("mean_by_d", [0.1, 0.2]), "mean_by_d"),
    "upper of the wrong length": ("adaptive-thompson", _set("upper", lambda row: row["upper"] + [0.95]), "upper"),
    "recommendation on a random round": ("adaptive-thompson", _set("recommended_d", 3, row=lambda rows: 0),
                                         "recommended_d"),
    "d_min against the config": ("adaptive-thompson", _set_all("d_min", 3), "d_min"),
    "d_max against the config": ("adaptive-thompson", _set_all("d_max", 6), "d_max"),
}


def _edited(recorded, case):
    name, edit, column = EDITS[case]
    rows = [dict(row) for row in recorded[name][1]]
    return name, rows, edit(rows), column


@pytest.mark.parametrize("case", list(EDITS))
def test_an_edited_value_is_refused_by_load_state_dict(case, recorded):
    name, rows, k, column = _edited(recorded, case)
    state = _roundtrip(recorded[name][0].state_dict())
    state["history"] = rows
    with pytest.raises(ValueError, match=rf"state key 'history' row {k} \(round {k}\) column '{column}' is .*, "
                                         r"against its rule: ."):
        SCHEDULES[name][1](0).load_state_dict(state)


@pytest.mark.parametrize("case", list(EDITS))
def test_an_edited_value_is_refused_when_read_back_from_csv(case, recorded, tmp_path):
    name, rows, k, column = _edited(recorded, case)
    with pytest.raises(ValueError, match=rf"schedule_history\.csv row {k} \(round {k}\) column '{column}' is "):
        check_history(_csv_rows(rows, tmp_path), SCHEDULES[name][1](0), source="schedule_history.csv")


@pytest.mark.parametrize("case", [case for case in EDITS if "config" not in case])
def test_an_edited_value_is_refused_by_replay_and_reward_posterior(case, recorded):
    """Also without the schedule (reward_posterior has none): only a config's own value needs one.
    reward_posterior reads fixed-d histories only (an adaptive one is refused as such first)."""
    name, rows, k, column = _edited(recorded, case)
    message = rf"schedule_history row {k} \(round {k}\) column '{column}' is "
    with pytest.raises(ValueError, match=message):
        replay(SCHEDULES[name][1](0), rows)
    adaptive = name.startswith("adaptive")
    with pytest.raises(ValueError, match="AdaptiveDBanditSchedule's" if adaptive else message):
        reward_posterior(rows, _gp_row(rows), torch.full((1, len(rows[0]["arm"])), 0.5))


def test_the_message_names_the_row_column_value_and_rule(recorded):
    rows = [dict(row) for row in recorded["adaptive-thompson"][1]]
    k = _gp_row(rows)
    rows[k]["recommended_d"] = 42
    with pytest.raises(ValueError) as err:
        check_history(rows, source="schedule_history.csv")
    assert str(err.value) == (f"schedule_history.csv row {k} (round {k}) column 'recommended_d' is 42, against its "
                              "rule: in [d_min, d_max], set exactly on GP rounds (source gp or corner)")


def test_recommendation_never_returns_an_arm_outside_the_box(recorded):
    """The issue's path: an edited recommended_arm in a checkpoint is refused before recommendation() sees it."""
    schedule, rows = recorded["adaptive-thompson"]
    state = _roundtrip(schedule.state_dict())
    state["history"][-1]["recommended_arm"] = [5.0] * len(state["history"][-1]["recommended_arm"])
    fresh = SCHEDULES["adaptive-thompson"][1](0)
    with pytest.raises(ValueError, match="column 'recommended_arm' is \\[5.0"):
        fresh.load_state_dict(state)
    assert fresh.recommendation() is None
