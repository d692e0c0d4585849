"""Schedule objects (tvolib.schedules): the moments schedule, fixed and moments schedules, their state."""
from __future__ import annotations

import io
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.models import LinearGaussian
from tvolib.schedules import FixedSchedule, MomentsSchedule, moments
from tvolib.tvo import linear, log_uniform, snis_integrand, validate_schedule



















# ---- moments -----------------------------------------------------------------------------------


def _integrand(log_w, betas):
    return snis_integrand(log_w.double(), betas).mean(dim=1)


def _assert_equally_spaced(log_w, betas, tol):
    d = betas.numel()
    ends = _integrand(log_w, torch.tensor([0.0, 1.0], dtype=torch.float64))
    targets = ends[0] + (ends[1] - ends[0]) * torch.arange(d, dtype=torch.float64) / d
    errors = (_integrand(log_w, betas) - targets).abs()
    assert errors.max() <= tol * (ends[1] - ends[0]) + 1e-12


def test_moments_on_the_toy_model():
    torch.manual_seed(0)
    toy = LinearGaussian(a=1.5, b=0.5, s=0.8, m=0.2, v=0.5, c=0.3)
    x = torch.linspace(-1, 2, 20, dtype=torch.float64)[:, None]
    log_w = toy.log_weights(x, 500).detach()
    for d in (2, 5, 10):
        betas = moments(d, log_w)
        validate_schedule(betas)
        assert betas.numel() == d
        _assert_equally_spaced(log_w, betas, 1e-3)
    coarse = moments(5, log_w, tol=0.05)
    _assert_equally_spaced(log_w, coarse, 0.05)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(2, 8).flatmap(
        lambda S: st.lists(st.lists(st.floats(-300, 0), min_size=S, max_size=S), min_size=1, max_size=5)
    ),
)
def test_moments_is_valid_and_equally_spaced(d, rows):
    log_w = torch.tensor(rows, dtype=torch.float32).T
    betas = moments(d, log_w)
    validate_schedule(betas)
    assert betas.numel() == d and betas.dtype == torch.float64
    ends = _integrand(log_w, torch.tensor([0.0, 1.0], dtype=torch.float64))
    if (ends[1] - ends[0]).item() > 1e-6 * max(1.0, abs(ends[0].item())):
        _assert_equally_spaced(log_w, betas, 1e-3)


def test_moments_flat_integrand_falls_back_to_linear():
    log_w = torch.full((10, 4), -3.0)
    torch.testing.assert_close(moments(6, log_w), linear(6))
    assert moments(1, torch.randn(3, 2)).tolist() == [0.0]


def test_moments_bad_input():
    with pytest.raises(ValueError, match=r"shape \(S, B\)"):
        moments(3, torch.zeros(5))
    with pytest.raises(ValueError, match="finite"):
        moments(3, torch.tensor([[0.0, math.inf], [1.0, 2.0]]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_moments_on_cuda_matches_cpu():
    log_w = torch.randn(10, 50) * 5
    torch.testing.assert_close(moments(5, log_w.cuda()), moments(5, log_w))


# ---- Schedule objects ------------------------------------------------------------------------


def _roundtrip(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_fixed_schedule():
    schedule = FixedSchedule(log_uniform(4))
    assert schedule.d == 4 and schedule.evidence_spec is None
    betas = schedule.current()
    betas[1] = 0.9  # current() returns a copy
    torch.testing.assert_close(schedule.current(), log_uniform(4))
    schedule.step(10, evidence=-90.0, log_weights=lambda: pytest.fail("fixed schedules ignore log_weights"))
    assert schedule.history() == []
    other = FixedSchedule([0.0])
    other.load_state_dict(_roundtrip(schedule.state_dict()))
    torch.testing.assert_close(other.current(), log_uniform(4))
    with pytest.raises(ValueError, match="schedule must be"):
        FixedSchedule([0.0, 0.5, 0.2])


def test_moments_schedule_updates_every_k_epochs():
    torch.manual_seed(0)
    log_w = torch.randn(10, 30) * 4 - 90
    calls = []

    def log_weights():
        calls.append(1)
        return log_w

    schedule = MomentsSchedule(5, update_every=3)
    torch.testing.assert_close(schedule.current(), log_uniform(5))
    for epoch in (1, 2):
        schedule.step(epoch, log_weights=log_weights)
    assert not calls and schedule.history() == []
    schedule.step(3, log_weights=log_weights)
    assert len(calls) == 1
    torch.testing.assert_close(schedule.current(), moments(5, log_w))
    assert schedule.history() == [{"epoch": 3, "betas": moments(5, log_w).tolist()}]

    restored = MomentsSchedule(5, update_every=3)
    restored.load_state_dict(_roundtrip(schedule.state_dict()))
    torch.testing.assert_close(restored.current(), schedule.current())
    assert restored.history() == schedule.history()
    with pytest.raises(ValueError, match="needs log_weights"):
        schedule.step(6)
    assert MomentsSchedule(3, initial="linear").current().tolist() == linear(3).tolist()
    with pytest.raises(ValueError, match="initial must be one of"):
        MomentsSchedule(3, initial="cosine")
    with pytest.raises(ValueError, match="update_every"):
        MomentsSchedule(3, update_every=0)




# ---- option values and state are checked ---------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(tol=-1.0), "tol must be a finite number > 0.0; got -1.0"),
    (dict(tol=math.nan), "tol must be a finite number"),
    (dict(max_iter=0), "max_iter must be an integer >= 1"),
    (dict(update_every=0), "update_every must be an integer >= 1"),
    (dict(d=0), r"d \(the number of left points, including b_0 = 0\) must be an integer >= 1"),
])
def test_moments_schedule_checks_options_when_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MomentsSchedule(**{"d": 3, **kwargs})


@pytest.mark.parametrize("make", [lambda: FixedSchedule(linear(3)), lambda: MomentsSchedule(3)])
@pytest.mark.parametrize(("state", "message"), [
    ([1, 2], "load_state_dict needs a dict"),
    ({}, "state has no key 'betas'"),
    ({"betas": [0.0, 0.5, 1.5]}, "'betas': schedule must be .*outside"),
    ({"betas": [0.0, math.nan, 0.5]}, "'betas': schedule must be .*non-finite"),
])
def test_schedule_state_is_checked(make, state, message):
    with pytest.raises(ValueError, match=message):
        make().load_state_dict(state)
    if isinstance(make(), MomentsSchedule):  # a fixed schedule may be replaced by any valid one
        with pytest.raises(ValueError, match="'betas' holds a schedule of d=2, this schedule has d=3"):
            make().load_state_dict({"betas": [0.0, 0.5], "history": []})


def test_moments_history_state_is_checked():
    s = MomentsSchedule(3)
    good = s.state_dict()
    with pytest.raises(ValueError, match="state has no key 'history'"):
        s.load_state_dict({"betas": good["betas"]})
    with pytest.raises(ValueError, match="'history' must be a list of"):
        s.load_state_dict({"betas": good["betas"], "history": [{"epoch": 6, "betas": [0.0]}]})


def test_every_schedule_accepts_a_report_at_epoch_zero():
    log_w = torch.randn(20, 5)
    for schedule in (FixedSchedule(linear(3)), MomentsSchedule(3, update_every=1)):
        before = schedule.current()
        schedule.step(0, evidence=-100.0, log_weights=lambda: log_w)  # the untrained model: no update
        assert torch.equal(schedule.current(), before) and schedule.history() == []
        assert schedule.REVISION == 1
    with pytest.raises(ValueError, match="epoch must be an integer >= 0"):
        MomentsSchedule(3).step(-1)
