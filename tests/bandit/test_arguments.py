"""The bandits' constructor arguments: flags take booleans (or 0 and 1) and never strings, and NumPy
and torch scalars are accepted wherever a number or a flag is, stored as Python values."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tvolib.bandit import AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule


def gp(**options):
    return GPBanditSchedule(3, device="cpu", **options)


def adaptive(**options):
    return AdaptiveDBanditSchedule(4, device="cpu", **options)


@pytest.mark.parametrize("make", [gp, adaptive], ids=["gp_bandit", "adaptive"])
@pytest.mark.parametrize("flag", ["time_varying", "corner_guards", "trend"])
@pytest.mark.parametrize("value", ["false", "False", "0", "no", 2, 0.0, 1.0])
def test_a_flag_given_as_a_string_or_another_number_is_refused(make, flag, value) -> None:
    """``bool("false")`` is True: a string never becomes a flag, whatever it says."""
    with pytest.raises(ValueError, match=rf"{flag} must be (True or False|one of \[True, False\]) \(or 0 or 1\); got"):
        make(**{flag: value})


def test_sort_given_as_a_string_is_refused() -> None:
    with pytest.raises(ValueError, match=r"sort must be True or False \(or 0 or 1\); got 'false' \(a str\)"):
        gp(sort="false")


@pytest.mark.parametrize("make", [gp, adaptive], ids=["gp_bandit", "adaptive"])
@pytest.mark.parametrize("flag", ["time_varying", "corner_guards", "trend"])
def test_a_flag_given_as_0_1_numpy_or_torch_is_that_bool(make, flag) -> None:
    for value, expected in ((0, False), (1, True), (np.bool_(False), False), (torch.tensor(True), True),
                            (np.int64(0), False), (torch.tensor(1), True)):
        s = make(**{flag: value})
        assert getattr(s, flag) is expected, (flag, value)
        assert s._config() == make(**{flag: expected})._config()
        assert all(type(v) is not np.bool_ for v in s._config().values())


def test_sort_as_0_is_the_unsorted_ablation() -> None:
    assert gp(sort=0).sort_arms is False and gp(sort=np.bool_(True)).sort_arms is True


def test_direct_numpy_and_torch_scalars_are_python_values() -> None:
    s = GPBanditSchedule(torch.tensor(4), n_init=torch.tensor(5), max_observations=torch.tensor(50),
                         seed=torch.tensor(3), window=np.int16(2), trend=np.bool_(False), kappa=torch.tensor(2.0),
                         protocol=np.str_("code"), device="cpu")
    assert (s.d, s.n_init, s.max_observations, s.seed, s.window) == (4, 5, 50, 3, 2)
    assert s.trend is False and s.kappa == 2.0 and s.protocol == "code" and type(s.protocol) is str
    assert all(type(v) in (int, float, str, bool, list, type(None)) for v in s._config().values()), s._config()
    a = AdaptiveDBanditSchedule(torch.tensor(5), d_min=np.int64(3), d_choice=np.str_("margin"),
                                d_tolerance=torch.tensor(0.5), n_init=torch.tensor(4), trend=torch.tensor(True),
                                device="cpu")
    assert (a.d_max, a.d_min, a.d_choice, a.d_tolerance, a.n_init, a.trend) == (5, 3, "margin", 0.5, 4, True)
    assert type(a.d_choice) is str and type(a.d_max) is int
    r = RandomSchedule(np.int64(3), window=torch.tensor(2), burn_in=np.int32(1), seed=torch.tensor(7))
    assert (r.d, r.window, r.burn_in, r.seed) == (3, 2, 1, 7)


@pytest.mark.parametrize("value", [torch.tensor(5.0), torch.tensor(True), torch.tensor([5]), "5", 5.0])
def test_a_size_that_is_not_an_integer_is_named(value) -> None:
    with pytest.raises(ValueError, match=r"d_max .* must be an integer >= 3; got"):
        AdaptiveDBanditSchedule(value, device="cpu")
    with pytest.raises(ValueError, match=r"n_init must be an integer >= 1; got"):
        gp(n_init=value)


def test_kappa_minus_zero_is_zero() -> None:
    s = gp(kappa=-0.0)
    assert s.kappa == 0.0 and math.copysign(1.0, s.kappa) == 1.0 and s._config() == gp(kappa=0)._config()


def test_a_d_choice_that_is_not_a_name_is_refused() -> None:
    for bad in (["thompson"], 1, None):
        with pytest.raises(ValueError, match=r"d_choice must be one of 'thompson', 'margin'; got"):
            adaptive(d_choice=bad)
