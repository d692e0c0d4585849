"""The paper's Eqs. 1-5 (tvolib.tvo): schedules, SNIS integrand, Riemann sums, IWAE bound, log evidence."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tvolib.tvo import (
    EvidenceSpec,
    iwae_bound,
    linear,
    log_evidence,
    log_uniform,
    riemann_weights,
    snis_integrand,
    tvo_bound,
    validate_schedule,
)


def _log_w(model, x, S, seed=0):
    torch.manual_seed(seed)
    return model.log_weights(x, S).detach()


# ---- schedules (Eq. 5's left points) ---------------------------------------------------------


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
    # the paper's log schedule for d = 5: 0, .025, .0629, .1581, .3976 (then 1).
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


def test_evidence_spec_constructors():
    assert EvidenceSpec.paper(4) == EvidenceSpec(betas=(0.0, 0.25, 0.5, 0.75), rule="left")
    code = EvidenceSpec.authors_code(3)
    assert code.rule == "trapezoid" and code.betas == pytest.approx((1e-9, 10**-4.5, 1.0))



# ---- SNIS integrand (Eq. 4) and bounds (Eqs. 1, 5) -------------------------------------------


def test_snis_integrand_matches_per_beta_loop():
    log_w = torch.randn(7, 3) * 3
    betas = torch.tensor([0.0, 0.2, 0.5, 1.0])
    expected = torch.stack([(torch.softmax(b * log_w, 0) * log_w).sum(0) for b in betas])
    torch.testing.assert_close(snis_integrand(log_w, betas), expected)
    torch.testing.assert_close(snis_integrand(log_w, [0.0])[0], log_w.mean(0))


def test_snis_integrand_matches_analytic_derivative(toy, x):
    betas = torch.tensor([0.0, 0.1, 0.3, 0.7, 1.0], dtype=torch.float64)
    estimate = snis_integrand(_log_w(toy, x, 100_000), betas)
    exact = toy.dlogZ_dbeta(x, betas).detach()
    assert estimate.shape == (5, 4)
    torch.testing.assert_close(estimate, exact, atol=0.02, rtol=0)


def test_left_and_right_sums_bracket_log_px(toy, x):
    log_w = _log_w(toy, x, 100_000)
    log_px = toy.log_px(x).detach()
    for betas in (linear(5), log_uniform(5)):
        left, right = tvo_bound(log_w, betas, "left"), tvo_bound(log_w, betas, "right")
        trap = tvo_bound(log_w, betas, "trapezoid")
        assert (left < log_px).all() and (log_px < right).all()
        assert (left <= trap).all() and (trap <= right).all()
        torch.testing.assert_close(left, toy.exact_tvo(x, betas, "left").detach(), atol=0.02, rtol=0)
        torch.testing.assert_close(right, toy.exact_tvo(x, betas, "right").detach(), atol=0.02, rtol=0)


def test_elbo_is_the_d1_case_and_below_tvo(toy, x):
    log_w = _log_w(toy, x, 50_000)
    elbo = tvo_bound(log_w, [0.0])
    torch.testing.assert_close(elbo, log_w.mean(0))
    torch.testing.assert_close(elbo, toy.elbo(x).detach(), atol=0.02, rtol=0)
    assert (elbo < tvo_bound(log_w, linear(5))).all()


def test_tvo_left_sum_increases_towards_log_px_as_schedule_refines(toy, x):
    log_px = toy.log_px(x).detach()
    exact = torch.stack([toy.exact_tvo(x, linear(d)).detach() for d in (1, 2, 5, 20, 200)])
    assert (exact[1:] > exact[:-1]).all()
    assert (exact < log_px).all() and (log_px - exact[-1]).abs().max() < 0.02
    log_w = _log_w(toy, x, 20_000)
    estimates = torch.stack([tvo_bound(log_w, linear(d)) for d in (1, 2, 5, 20, 50)])
    assert (estimates[1:] > estimates[:-1]).all()
    torch.testing.assert_close(estimates[-1], log_px, atol=0.05, rtol=0)


finite_log_w = st.integers(1, 6).flatmap(
    lambda S: st.lists(st.lists(st.floats(-300, 0), min_size=S, max_size=S), min_size=1, max_size=4)
)


schedule_points = st.lists(st.floats(0.001, 0.999), max_size=6)


def _schedule(points: list[float]) -> torch.Tensor:
    return torch.tensor(sorted({0.0, *points}), dtype=torch.float64)


@settings(max_examples=60, deadline=None)
@given(finite_log_w, schedule_points, schedule_points)
def test_riemann_sums_are_ordered_and_monotone_under_refinement(rows, p1, p2):
    log_w = torch.tensor(rows, dtype=torch.float64).T  # (S, B)
    coarse, fine = _schedule(p1), _schedule(p1 + p2)
    tol = 1e-9 * (1 + log_w.abs().max())
    left, right = tvo_bound(log_w, coarse, "left"), tvo_bound(log_w, coarse, "right")
    assert (tvo_bound(log_w, [0.0]) <= left + tol).all()  # ELBO <= TVO
    assert (left <= tvo_bound(log_w, coarse, "trapezoid") + tol).all()
    assert (left <= right + tol).all()
    assert (left <= tvo_bound(log_w, fine, "left") + tol).all()  # refining raises the left sum
    assert (tvo_bound(log_w, fine, "right") <= right + tol).all()  # and lowers the right sum
    values = snis_integrand(log_w, torch.linspace(0, 1, 11, dtype=torch.float64))
    assert (values[1:] >= values[:-1] - tol).all()  # the SNIS integrand increases in beta


def test_riemann_weights():
    nodes, w = riemann_weights([0.0, 0.25, 0.5], "left")
    torch.testing.assert_close(nodes, torch.tensor([0.0, 0.25, 0.5, 1.0], dtype=torch.float64))
    torch.testing.assert_close(w, torch.tensor([0.25, 0.25, 0.5, 0.0], dtype=torch.float64))
    _, w = riemann_weights([0.0, 0.25, 0.5], "trapezoid")
    torch.testing.assert_close(w, torch.tensor([0.125, 0.25, 0.375, 0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match="rule must be one of"):
        riemann_weights([0.0], "simpson")
    with pytest.raises(ValueError, match="first point"):
        tvo_bound(torch.zeros(2, 1), [0.1, 0.5])


def test_iwae_bound():
    log_w = torch.randn(6, 3)
    torch.testing.assert_close(iwae_bound(log_w), log_w.exp().mean(0).log())
    with pytest.raises(ValueError, match=r"shape \(S, B\)"):
        iwae_bound(torch.zeros(3))


def test_log_evidence_specs(toy, x):
    log_w = _log_w(toy, x, 20_000)
    paper, code = EvidenceSpec.paper(), EvidenceSpec.authors_code()
    assert len(paper.betas) == 50 and paper.betas[1] == pytest.approx(0.02)
    assert code.rule == "trapezoid" and code.betas[0] == pytest.approx(1e-9) and code.betas[-1] == 1.0
    torch.testing.assert_close(log_evidence(log_w, paper), tvo_bound(log_w, linear(50)))
    log_px = toy.log_px(x).detach()
    assert (log_evidence(log_w, paper) < log_px).all()
    torch.testing.assert_close(log_evidence(log_w, paper), log_px, atol=0.05, rtol=0)
    torch.testing.assert_close(log_evidence(log_w, code), log_px, atol=0.02, rtol=0)
    with pytest.raises(ValueError, match="end"):
        log_evidence(log_w, EvidenceSpec(betas=(0.0, 0.5), rule="trapezoid"))



# ---- zero weights and bad log weights --------------------------------------------------------


def test_a_zero_weight_gives_minus_inf_not_nan():
    log_w = torch.tensor([[0.5, -1.0], [-math.inf, -2.0], [1.5, -0.5]], dtype=torch.float64)
    betas = [0.0, 0.3, 0.6]
    values = snis_integrand(log_w, betas + [1.0])
    assert not torch.isnan(values).any()
    assert values[0, 0] == -math.inf  # beta = 0: the ELBO sees log w = -inf
    # beta > 0: the zero-weight sample drops out of the SNIS average
    torch.testing.assert_close(values[1:, 0], snis_integrand(log_w[[0, 2], :1], [0.3, 0.6, 1.0])[:, 0])
    torch.testing.assert_close(values[:, 1], snis_integrand(log_w[:, 1:], betas + [1.0])[:, 0])
    left = tvo_bound(log_w, betas)
    assert left[0] == -math.inf and torch.isfinite(left[1])
    assert tvo_bound(log_w, betas, "trapezoid")[0] == -math.inf
    torch.testing.assert_close(tvo_bound(log_w, betas, "right")[:1], tvo_bound(log_w[[0, 2], :1], betas, "right"))
    torch.testing.assert_close(iwae_bound(log_w)[0], torch.logsumexp(log_w[[0, 2], 0], 0) - math.log(3))
    all_zero = torch.full((3, 1), -math.inf)
    for rule in ("left", "right", "trapezoid"):
        assert tvo_bound(all_zero, betas, rule).item() == -math.inf
    assert log_evidence(all_zero, EvidenceSpec.authors_code()).item() == -math.inf


@pytest.mark.parametrize(("log_w", "message"), [
    (torch.zeros(3, 2, dtype=torch.int64), r"log_w must be a floating-point tensor .*torch.int64"),
    (torch.tensor([[0.0, math.nan]]), r"log_w contains NaN or \+inf"),
    (torch.tensor([[0.0, math.inf]]), r"log_w contains NaN or \+inf"),
    (torch.zeros(4), r"log_w must be a tensor of shape \(S, B\)"),
])
@pytest.mark.parametrize("function", [
    lambda lw: tvo_bound(lw, [0.0, 0.5]), iwae_bound, lambda lw: snis_integrand(lw, [0.5]),
    lambda lw: log_evidence(lw, EvidenceSpec.paper()),
])
def test_bad_log_weights_raise_clear_errors(log_w, message, function):
    with pytest.raises(ValueError, match=message):
        function(log_w)


def test_evidence_spec_is_checked_when_built():
    with pytest.raises(ValueError, match="EvidenceSpec.rule must be 'left' or 'trapezoid'"):
        EvidenceSpec(betas=(0.0,), rule="simpson")
    with pytest.raises(ValueError, match="EvidenceSpec.betas must be .*first point"):
        EvidenceSpec(betas=(0.5,))
