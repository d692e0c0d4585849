"""When the bandit's GP starts: the window rule's plan, checked against schedules stepped as a loop
steps them, and the warning a schedule built for a short run gives."""
from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule
from tvolib.bandit.plan import ShortRunWarning, round_plan, schedule_plan, short_run_message


def _stepped(schedule, epochs: int):
    """``schedule`` stepped over ``epochs`` epochs of rising evidence (no early update)."""
    schedule.step(0, evidence=-100.0)
    for epoch in range(1, epochs + 1):
        schedule.step(epoch, evidence=-100.0 + epoch)
    return schedule.history()


def test_the_tvolib_gp_first_trains_at_epoch_96_and_the_default_at_19_given_the_integrand():
    """d = 5, tvolib: 15 random rounds, ten of 6 epochs and five of 7, then the GP's first arm; the
    default (the integrand protocol) handed the integrand: 3 rounds of 6 epochs, else as tvolib."""
    plan = schedule_plan(GPBanditSchedule(5, protocol="tvolib", device="cpu"), 100)
    assert (plan.first_gp_epoch, plan.gp_epochs, plan.n_init) == (10 * 6 + 5 * 7 + 1, 5, 15)
    assert plan.rounds == 15 and plan.gp_rounds == 0  # the GP's first window is still open at epoch 100
    default = GPBanditSchedule(5, device="cpu")
    assert schedule_plan(default, 100).first_gp_epoch == 3 * 6 + 1
    assert schedule_plan(default, 100, integrand=False) == plan


@settings(max_examples=40, deadline=None)
@given(epochs=st.integers(0, 60), window=st.integers(1, 4), every=st.integers(1, 5), growth=st.integers(0, 2),
       burn_in=st.integers(0, 6), n_init=st.integers(1, 8))
def test_the_plan_is_what_a_stepped_schedule_does(epochs, window, every, growth, burn_in, n_init):
    """Rounds closed and the first epoch trained after n_init rounds, by the rule and by stepping."""
    options = dict(window=window, window_growth_every=every, window_growth=growth, burn_in=burn_in)
    history = _stepped(RandomSchedule(3, seed=0, **options), epochs)
    plan = round_plan(epochs, n_init=n_init, **options)
    assert plan.rounds == len(history)
    assert plan.gp_rounds == max(0, len(history) - n_init)
    if len(history) >= n_init:  # round n_init starts where round n_init - 1 closed
        assert plan.first_gp_epoch == (history[n_init - 1]["epoch"] + 1 if history[n_init - 1]["epoch"] < epochs
                                       else None)
    else:
        assert plan.first_gp_epoch is None and plan.gp_epochs == 0


def test_the_first_gp_arm_trains_at_the_planned_epoch():
    """A GP bandit stepped past its plan's first GP epoch: the arm trained there came from the GP."""
    schedule = GPBanditSchedule(3, protocol="tvolib", window=2, seed=0, device="cpu")
    plan = schedule_plan(schedule, 20)
    schedule.step(0, evidence=-100.0)
    sources = {}
    for epoch in range(1, plan.first_gp_epoch + 1):
        sources[epoch] = schedule.history()[-1]["source"] if schedule.history() else "random"
        schedule.step(epoch, evidence=-100.0 + epoch)
    assert sources[plan.first_gp_epoch] == "gp" and sources[plan.first_gp_epoch - 1] == "random"


def test_a_schedule_built_for_a_short_run_says_when_its_gp_starts():
    tvolib = {"protocol": "tvolib", "device": "cpu"}
    with pytest.warns(ShortRunWarning, match=r"d=5\).*epoch 96, after 15 random rounds.*40 epochs trains random arms "
                                             r"only.*window=1 would"):
        GPBanditSchedule(5, epochs=40, **tvolib)
    # window=5: 10 * 5 + 5 * 6 = 80 random epochs leave 70 < 75; window=4: 65 leave 85
    with pytest.warns(ShortRunWarning, match=r"train 55 of 150 epochs \(7 full windows\).*window=4 would"):
        GPBanditSchedule(5, epochs=150, **tvolib)
    with pytest.warns(ShortRunWarning, match=r"no window does with n_init=15"):
        GPBanditSchedule(5, epochs=20, **tvolib)
    with pytest.warns(ShortRunWarning, match=r"AdaptiveDBanditSchedule\(d_max=10\)"):
        AdaptiveDBanditSchedule(10, epochs=60, device="cpu")
    with pytest.warns(ShortRunWarning, match=r"IntegrandBanditSchedule\(d=5\).*epoch 19, after 3 random rounds.*"
                                             r"handed the integrand.*without it, from epoch 96"):
        GPBanditSchedule(5, epochs=30, device="cpu")  # 12 of 30 epochs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GPBanditSchedule(5, epochs=200, **tvolib)  # 105 of 200 epochs: no warning
        GPBanditSchedule(5, **tvolib)  # no length given
        GPBanditSchedule(5, epochs=40, window=1, n_init=5, **tvolib)
        GPBanditSchedule(5, epochs=40, device="cpu")  # the default given the integrand: 22 of 40 epochs


def test_the_run_length_changes_no_decision_and_bad_lengths_are_refused():
    with pytest.warns(ShortRunWarning):
        told = GPBanditSchedule(3, epochs=10, window=2, seed=1, device="cpu")
    plain = GPBanditSchedule(3, window=2, seed=1, device="cpu")
    assert told.state_dict()["config"] == plain.state_dict()["config"]
    assert told.current().tolist() == plain.current().tolist()
    with pytest.raises(ValueError, match="epochs"):
        GPBanditSchedule(3, epochs=0, device="cpu")
    with pytest.raises(ValueError, match="epochs"):
        round_plan(-1, burn_in=0, window=1, window_growth_every=1, window_growth=0, n_init=1)
    assert short_run_message(RandomSchedule(3), 10) is None  # no GP, nothing to say
