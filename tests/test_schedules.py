"""Schedules: validation (property tests), documented points, moments, Schedule objects."""
from __future__ import annotations

import io
import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tvolib.models import LinearGaussian
from tvolib.schedules import FixedSchedule, MomentsSchedule, moments
from tvolib.tvo import EvidenceSpec, linear, log_uniform, snis_integrand, validate_schedule

interior = st.lists(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True), max_size=20, unique=True)


@settings(deadline=None)
@given(interior)
def test_validate_accepts_every_sorted_schedule_starting_at_zero(points):
    betas = [0.0, *sorted(points)]
    out = validate_schedule(betas)
    assert out.dtype == torch.float64 and out.tolist() == betas


@settings(deadline=None)
@given(interior.filter(lambda p: len(p) >= 1), st.data())
def test_validate_rejects_bad_schedules(points, data):
    good = [0.0, *sorted(points)]
    bad_kind = data.draw(st.sampled_from(["unsorted", "duplicate", "start", "one", "nan", "negative"]))
    bad = list(good)
    if bad_kind == "unsorted":
        bad = [0.0, *sorted(points, reverse=True)]
        assume(len(points) >= 2)
    elif bad_kind == "duplicate":
        bad.insert(1, bad[1])
    elif bad_kind == "start":
        bad = bad[1:]
    elif bad_kind == "one":
        bad.append(1.0)
    elif bad_kind == "nan":
        bad[-1] = math.nan
    else:
        bad[0] = -bad[1]
    with pytest.raises(ValueError, match="schedule must be"):
        validate_schedule(bad)


@pytest.mark.parametrize("bad", [[], [[0.0, 0.5]], torch.zeros(0)])
def test_validate_rejects_bad_shapes(bad):
    with pytest.raises(ValueError, match="shape"):
        validate_schedule(bad)


@settings(deadline=None)
@given(st.integers(1, 200))
def test_linear_points(d):
    betas = linear(d)
    torch.testing.assert_close(betas, torch.tensor([j / d for j in range(d)], dtype=torch.float64))
    validate_schedule(betas)


@settings(deadline=None)
@given(st.integers(1, 200), st.floats(1e-8, 0.999))
def test_log_uniform_points(d, beta1):
    betas = log_uniform(d, beta1)
    validate_schedule(betas)
    assert betas.numel() == d
    if d > 1:
        assert betas[1].item() == pytest.approx(beta1)
        ratios = betas[2:] / betas[1:-1]
        torch.testing.assert_close(ratios, torch.full_like(ratios, beta1 ** (-1 / (d - 1))))


def test_log_uniform_reference_values():
    # REFERENCE.md: K = 5 -> 0, .025, .0629, .1581, .3976 (then 1).
    expected = torch.tensor([0.0, 0.025, 0.0629, 0.1581, 0.3976], dtype=torch.float64)
    torch.testing.assert_close(log_uniform(5), expected, atol=5e-5, rtol=0)
    assert log_uniform(1).tolist() == [0.0]


@pytest.mark.parametrize("call", [lambda: linear(0), lambda: linear(2.5), lambda: log_uniform(True)])
def test_bad_d(call):
    with pytest.raises(ValueError, match="d \\(the number of left points"):
        call()


@pytest.mark.parametrize("beta1", [0.0, 1.0, -0.1, math.nan])
def test_bad_beta1(beta1):
    with pytest.raises(ValueError, match="beta1"):
        log_uniform(5, beta1)


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
    with pytest.raises(ValueError, match=r"shape \(S, N\)"):
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


def test_evidence_spec_constructors():
    assert EvidenceSpec.paper(4) == EvidenceSpec(betas=(0.0, 0.25, 0.5, 0.75), rule="left")
    code = EvidenceSpec.authors_code(3)
    assert code.rule == "trapezoid" and code.betas == pytest.approx((1e-9, 10**-4.5, 1.0))
