"""Schedules of a stack stepped through worker processes equal the same schedules stepped one by one."""
from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.schedules import FixedSchedule
from tvolib.stacked.bandits import ScheduleStepError, StepPool, closes_window, step_schedules

TIMING_KEYS = ("fit_seconds", "acq_seconds")


@pytest.fixture(scope="module")
def pool():
    with StepPool(workers=2, threads=1) as p:
        yield p


@pytest.fixture
def one_thread(one_torch_thread):
    """The workers run one thread: the in-process reference must too (GP rounds depend on it)."""


def _stack() -> list:
    """Bandits of every kind, small enough for a fast GP (d = 3, 2-epoch windows)."""
    opts = dict(window=2, window_growth=0, early_drop=0.5, device="cpu", raw_samples=64, num_restarts=2)
    return [
        GPBanditSchedule(3, seed=1, n_init=2, **opts),
        GPBanditSchedule(3, seed=2, n_init=2, sort=False, **opts),
        RandomSchedule(3, seed=3, window=2, early_drop=0.5),
        FixedSchedule([0.0, 0.2, 0.6]),
        GPBanditSchedule(3, seed=4, n_init=2, time_varying=False, burn_in=3, **opts),
    ]


def _evidence(k: int, epoch: int) -> float:
    """A rising training curve with a drop now and then (early updates) and one NaN (ignored)."""
    if (k, epoch) == (2, 5):
        return math.nan
    return -100.0 + 2.0 * math.log1p(epoch) * (1 + 0.1 * k) - (1.0 if epoch % 7 == 3 else 0.0)


def _strip(schedule) -> tuple:
    rows = [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in schedule.history()]
    return rows, schedule.current().tolist(), schedule.state_dict().get("generator", torch.zeros(0)).tolist()


def test_pool_steps_equal_single_steps_bitwise(pool, one_thread):
    alone, pooled = _stack(), _stack()
    closed_any = set()
    with pytest.warns(RuntimeWarning, match="non-finite evidence"):
        for epoch in range(13):
            evidences = [_evidence(k, epoch) for k in range(len(alone))]
            for k, s in enumerate(alone):
                s.step(epoch, evidence=evidences[k])
            closed_any.update(step_schedules(pooled, epoch, evidences, pool=pool))
    assert {0, 1, 2, 4} <= closed_any
    for a, b in zip(alone, pooled):
        assert _strip(a) == _strip(b)
    assert any(row["source"] == "gp" for row in pooled[0].history())  # the GP really ran in a worker


def test_without_pool_steps_inline(one_thread):
    alone, stepped = _stack(), _stack()
    with pytest.warns(RuntimeWarning):
        for epoch in range(9):
            evidences = [_evidence(k, epoch) for k in range(len(alone))]
            for k, s in enumerate(alone):
                s.step(epoch, evidence=evidences[k])
            step_schedules(stepped, epoch, evidences)
    assert [_strip(a) for a in alone] == [_strip(b) for b in stepped]


def test_a_failing_worker_names_its_run_and_the_others_go_on(pool):
    scheds = _stack()[:3]
    scheds[1].kappa = -1.0  # maximize_ucb rejects it, inside the worker
    for epoch in range(9):
        evidences = [_evidence(k, epoch) for k in range(3)]
        try:
            step_schedules(scheds, epoch, evidences, pool=pool, names=["a", "b", "c"])
        except ScheduleStepError as err:
            assert list(err.failures) == [1] and "b: ValueError: kappa must be finite" in str(err)
            assert isinstance(err.failures[1][1], ValueError)
            break
    else:
        pytest.fail("the bad run never reached its GP round")
    assert scheds[0].round == scheds[2].round > 0  # the others were stepped


def test_closes_window_for_non_bandits_and_bad_reports():
    fixed, bandit = FixedSchedule([0.0, 0.5]), RandomSchedule(3, window=1)
    assert not closes_window(fixed, 3, -1.0)
    assert not closes_window(bandit, 0, -1.0)  # no window open yet
    bandit.step(0, -2.0)
    assert closes_window(bandit, 1, -1.0)
    assert not closes_window(bandit, 1, math.nan) and not closes_window(bandit, 0, -1.0)
    assert closes_window(bandit, 1, torch.tensor(-1.0))


@settings(max_examples=40, deadline=None)
@given(
    window=st.integers(1, 4), early=st.sampled_from([None, 0.0, 0.3]), burn_in=st.integers(0, 3),
    reward=st.sampled_from(["paper", "code"]),
    values=st.lists(st.one_of(st.floats(-3, 3), st.just(math.nan)), min_size=1, max_size=25),
)
def test_closes_window_predicts_step(window, early, burn_in, reward, values):
    sched = RandomSchedule(3, window=window, window_growth=1, window_growth_every=2, early_drop=early,
                           burn_in=burn_in, reward=reward, seed=0)
    level = -50.0
    for epoch, v in enumerate(values):
        level += v if math.isfinite(v) else 0.0
        report = level if math.isfinite(v) else v
        predicted = closes_window(sched, epoch, report)
        before = sched.round
        with pytest.warns(RuntimeWarning) if not math.isfinite(report) and epoch >= burn_in else _nothing():
            sched.step(epoch, evidence=report)
        assert predicted == (sched.round == before + 1)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="workers must be an int"):
        StepPool(workers=0)
    with pytest.raises(ValueError, match="threads must be an int"):
        StepPool(workers=1, threads=0)
    with pytest.raises(ValueError, match="evidences must hold one entry per schedule"):
        step_schedules([FixedSchedule([0.0])], 1, [])
    with pytest.raises(ValueError, match="names must hold one name per schedule"):
        step_schedules([FixedSchedule([0.0])], 1, [None], names=["a", "b"])
    sched = copy.deepcopy(FixedSchedule([0.0]))
    assert step_schedules([sched], 1, [None]) == []
