"""The shared input checker (tvolib.checks): accepted values pass, each bad value names the argument."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tvolib.checks import (
    check_batch,
    check_betas,
    check_bool,
    check_finite_float,
    check_int,
    check_log_w,
    check_positive_ints,
    check_samples,
    check_state,
)


def test_check_int() -> None:
    assert check_int("window", 3, 1) == 3 and check_int("seed", np.int64(4), 0) == 4
    for bad in (0, True, 2.0, "3", None):
        with pytest.raises(ValueError, match=r"window must be an integer >= 1; got"):
            check_int("window", bad, 1)


def test_check_int_takes_numpy_and_torch_integers_not_floats_or_bools() -> None:
    assert check_int("d_max", torch.tensor(5), 3) == 5 and type(check_int("d_max", torch.tensor(5), 3)) is int
    assert check_int("n_init", torch.tensor(4, dtype=torch.int32), 1) == 4
    for bad in (torch.tensor(5.0), torch.tensor(True), torch.tensor([5]), np.float64(5.0), np.bool_(True)):
        with pytest.raises(ValueError, match=r"d_max must be an integer >= 3; got"):
            check_int("d_max", bad, 3)


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), (np.bool_(True), True), (np.bool_(False), False),
    (torch.tensor(True), True), (torch.tensor(False), False),
    (0, False), (1, True), (np.int64(0), False), (np.int8(1), True), (torch.tensor(1), True), (torch.tensor(0), False),
])
def test_check_bool_takes_bools_and_the_ints_0_and_1(value, expected) -> None:
    out = check_bool("time_varying", value)
    assert out is expected


@pytest.mark.parametrize("value", ["false", "False", "true", "0", "", 2, -1, 0.0, 1.0, np.float64(1.0), None,
                                   torch.tensor([True]), torch.tensor(2), [True], np.array(True)[None]])
def test_check_bool_refuses_strings_other_numbers_and_containers(value) -> None:
    with pytest.raises(ValueError, match=r"time_varying must be True or False \(or 0 or 1\); got .* \(a "):
        check_bool("time_varying", value)


def test_check_finite_float() -> None:
    assert check_finite_float("tol", 1e-3, minimum=0.0, strict=True) == 1e-3
    assert check_finite_float("x", torch.tensor(2.5)) == 2.5
    for bad in (-1.0, 0.0, math.nan, math.inf, "1", True):
        with pytest.raises(ValueError, match="tol must be"):
            check_finite_float("tol", bad, minimum=0.0, strict=True)


def test_check_positive_ints() -> None:
    assert check_positive_ints("hidden", [100, 100]) == (100, 100)
    assert check_positive_ints("hidden", (), allow_empty=True) == ()
    for bad in (7, "77", (), (100, 0), (1.5,), (True,)):
        with pytest.raises(ValueError, match=r"hidden must be a sequence of positive ints, e.g. \(100, 100\)"):
            check_positive_ints("hidden", bad)


def test_check_samples() -> None:
    assert check_samples(2, minimum=2) == 2
    with pytest.raises(ValueError, match=r"S \(samples per data point\) must be an int >= 2; got 1"):
        check_samples(1, minimum=2)


def test_check_log_w() -> None:
    ok = torch.tensor([[0.0, -math.inf], [1.0, -2.0]])
    assert check_log_w(ok) is ok
    cases = [
        (torch.zeros(3), r"my_log_w must be a tensor of shape \(S, B\) with S, B >= 1; got shape \(3,\)"),
        (torch.zeros(0, 2), r"my_log_w must be a tensor of shape \(S, B\)"),
        ([[0.0]], r"my_log_w must be a tensor of shape \(S, B\), samples first; got list"),
        (torch.zeros(2, 2, dtype=torch.int64), r"my_log_w must be a floating-point tensor .*got torch.int64"),
        (torch.tensor([[0.0, math.nan]]), r"my_log_w contains NaN or \+inf"),
        (torch.tensor([[0.0, math.inf]]), r"my_log_w contains NaN or \+inf"),
    ]
    for value, message in cases:
        with pytest.raises(ValueError, match=message):
            check_log_w(value, name="my_log_w")


def test_check_batch() -> None:
    like = torch.zeros(1, dtype=torch.float64)
    out = check_batch(torch.ones(2, 3, dtype=torch.uint8), data_dim=3, like=like)
    assert out.dtype == torch.float64  # integer data take the model's dtype
    assert check_batch(torch.rand(2, 3), data_dim=3).dtype == torch.float32
    cases = [
        (dict(x=torch.zeros(2, 4), data_dim=3), r"x must be a tensor of shape \(B, 3\)"),
        (dict(x=torch.zeros(2, 3, dtype=torch.float32), data_dim=3, like=like), "x has dtype torch.float32 but the model computes in torch.float64"),
        (dict(x=torch.tensor([[0.0, math.nan, 1.0]]), data_dim=3), "not finite numbers"),
        (dict(x=torch.tensor([[0.0, 2.0, 1.0]]), data_dim=3, binary=True), r"not 0 or 1 \(binary data\)"),
        (dict(x=torch.tensor([[0.0, 0.5, 1.0]]), data_dim=3, binary=True), "binary"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            check_batch(**kwargs)


def test_check_betas_and_state() -> None:
    assert check_betas([0.0, 0.5]).dtype == torch.float64
    with pytest.raises(ValueError, match="my_betas must be .*first point is 0.1"):
        check_betas([0.1, 0.5], name="my_betas")
    with pytest.raises(ValueError, match="my_betas must be a 1-D sequence of numbers"):
        check_betas("abc", name="my_betas")
    assert check_state({"a": 1}, ["a"], "Thing") == {"a": 1}
    with pytest.raises(ValueError, match="Thing state has no key 'b'"):
        check_state({"a": 1}, ["a", "b"], "Thing")
    with pytest.raises(ValueError, match=r"Thing.load_state_dict needs a dict"):
        check_state([1], ["a"], "Thing")
