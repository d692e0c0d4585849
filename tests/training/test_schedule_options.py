"""Schedule options in one spelling per meaning: one run, one digest (``canonical_options``).

Flags given as 0 or 1 are booleans, ``-0.0`` is ``0.0``, and an option at the value the schedule
would pick anyway (its constructor's default, or a size derived from ``d``) is no option, so the
config that spells it is the config that leaves it out. A string is never a flag. The digests of
the sweeps' configs are pinned in tests/paper/test_sweeps.py.
"""
from __future__ import annotations

import pytest
import torch

from tvolib.bandit.acquisition import acquisition_budget
from tvolib.training import RunConfig
from tvolib.training.schedule import BANDIT_SCHEDULES, SPELLED_DEFAULTS, canonical_options, make_schedule


def config(schedule="gp_bandit", d=4, **options):
    return RunConfig(schedule=schedule, d=d, schedule_options=options)


@pytest.mark.parametrize("spelled, plain", [
    ({"time_varying": 0}, {"time_varying": False}),
    ({"time_varying": 1}, {}),
    ({"time_varying": True}, {}),
    ({"time_varying": torch.tensor(0)}, {"time_varying": False}),
    ({"trend": 0}, {"trend": False}),
    ({"corner_guards": 1, "protocol": "code"}, {"protocol": "code"}),
    ({"kappa": -0.0}, {"kappa": 0}),
    ({"kappa": 0.0}, {"kappa": 0}),
    ({"n_init": 15}, {}),
    ({"d_min": 2}, {}),
    ({"max_observations": 120}, {}),
    ({"max_observations": 120, "n_init": 15, "d_choice": "thompson", "d_tolerance": 0.2, "ml_starts": 200}, {}),
    ({"n_init": 18, "d_min": 3}, {"d_min": 3}),  # n_init is the protocol's at d = d_min + 3
], ids=lambda v: repr(v))
def test_adaptive_spellings_of_one_run_share_a_digest(spelled, plain) -> None:
    """At d_max = 4 the adaptive bandit's n_init is 3 (d_min + 3) = 15, its cap 30 d_max = 120."""
    a, b = config("gp_bandit_adaptive", **spelled), config("gp_bandit_adaptive", **plain)
    assert a == b and a.digest() == b.digest(), (a.schedule_options, b.schedule_options)
    assert a.validate().schedule_options == b.schedule_options


@pytest.mark.parametrize("spelled", [
    {"max_observations": 120}, {"n_init": 12}, {"n_init": 12, "max_observations": 120, "protocol": "tvolib"},
    {"raw_samples": 384, "num_restarts": 7}, {"ml_starts": 200, "acq_maxiter": 100, "fit_maxiter": 30},
    {"kappa_delta": 0.1, "kappa_a": 1, "kappa_b": 1.0}, {"box": (0.05, 0.95)}, {"box": [0.05, 0.95]},
    {"min_gap": 0.001}, {"early_drop": 0.05}, {"window_growth": 1, "window_growth_every": 10},
    {"epochs": None, "device": None, "initial_hyperparameters": None},
], ids=lambda v: repr(v))
def test_gp_bandit_options_at_the_schedules_own_values_are_no_options(spelled) -> None:
    """At d = 4 the default protocol's n_init is 3 d = 12, its cap 30 d = 120, the acquisition's
    budget 128 (d - 1) raw samples and 4 + (d - 1) restarts."""
    assert config(**spelled) == config() and config(**spelled).digest() == config().digest()


def test_paper_text_sizes_follow_its_preset() -> None:
    text = config(protocol="paper-text")
    assert config(protocol="paper-text", n_init=4, max_observations=None) == text  # max(3, d), all rewards
    assert config(protocol="paper-text", n_init=12) != text and config(protocol="paper-text", max_observations=120) != text


PROTOCOL_TREND = {"tvolib": True, "code": False, "paper-text": False}


@pytest.mark.parametrize("name", BANDIT_SCHEDULES)
@pytest.mark.parametrize("d", [3, 4, 6])
@pytest.mark.parametrize("protocol", ["tvolib", "code", "paper-text"])
def test_a_dropped_option_builds_the_same_schedule(name, d, protocol) -> None:
    """Every option the canonical form drops, spelled at the value it is dropped for, builds the
    schedule that leaving it out builds (its saved configuration and its acquisition budget)."""
    plain = make_schedule(name, d, options={"protocol": protocol}, device="cpu")
    candidates = {"n_init": getattr(plain, "n_init", None), "max_observations": getattr(plain, "max_observations", 0),
                  "raw_samples": acquisition_budget(d - 1)[0], "num_restarts": acquisition_budget(d - 1)[1],
                  "kappa": None, "ml_starts": 200, "time_varying": True, "trend": PROTOCOL_TREND[protocol],
                  "corner_guards": protocol != "paper-text", "d_min": 2, "box": (0.05, 0.95), "early_drop": 0.05}
    dropped = set()
    for key, value in candidates.items():
        given = (("protocol", protocol), (key, value))
        if canonical_options(name, given, d) != canonical_options(name, (("protocol", protocol),), d):
            continue  # kept: another run, or a name this schedule does not take
        dropped.add(key)
        spelled = make_schedule(name, d, options={"protocol": protocol, key: value}, device="cpu")
        assert spelled.state_dict()["config"] == plain.state_dict()["config"], (key, value)
        for budget, index in (("raw_samples", 0), ("num_restarts", 1)):
            if hasattr(plain, budget) and name != "gp_bandit_adaptive":
                assert (getattr(spelled, budget) or acquisition_budget(d - 1)[index]) == \
                       (getattr(plain, budget) or acquisition_budget(d - 1)[index])
    assert {"box", "early_drop"} <= dropped
    if name != "random":  # the GP bandits derive their sizes from d: spelled, they are no options
        assert {"n_init", "max_observations", "kappa", "ml_starts"} <= dropped, dropped
    assert ("time_varying" in dropped) == (name == "gp_bandit_adaptive")  # the others' builders set it


def test_what_is_kept_as_given() -> None:
    """Existing runs are named with these spelled at their defaults; other values are other runs;
    a name the builder sets itself stays for validate() to refuse; a string flag is refused."""
    assert set(SPELLED_DEFAULTS) == {"burn_in", "window"}
    assert config(burn_in=0).schedule_options == (("burn_in", 0),) and config(window=6).digest() != config().digest()
    assert config(d=2, n_init=6).digest() != config(d=2).digest()  # the budget sweep's runs at d = 2
    assert config(n_init=13).digest() != config().digest() and config(max_observations=121) != config()
    assert config("gp_bandit_adaptive", raw_samples=384) != config("gp_bandit_adaptive")  # its budget is per d
    unsorted = config("gp_bandit_unsorted", sort=True)
    assert unsorted.schedule_options == (("sort", True),)
    with pytest.raises(ValueError, match=r"unknown names \['sort'\]"):
        unsorted.validate()
    with pytest.raises(ValueError, match=r"RunConfig.schedule_options=.*time_varying must be True or False"):
        config("gp_bandit_adaptive", time_varying="false").validate()
    assert config("gp_bandit_adaptive", time_varying="false").schedule_options == (("time_varying", "false"),)


def test_a_copy_with_another_d_takes_that_ds_sizes() -> None:
    """n_init=12 at d = 4 is the config without n_init, so its copy at d = 5 has d = 5's n_init."""
    moved = config(n_init=12).replace(d=5)
    assert moved == config(d=5) and make_schedule("gp_bandit", 5, options=dict(moved.schedule_options)).n_init == 15
    assert config(n_init=13).replace(d=5).schedule_options == (("n_init", 13),)
