"""The test bed's baselines: fixed schedules, and the moments and bias-optimal rules on a case's own
integrand; the grid-searched log finds a log-like optimum exactly; the user's grid search keeps the
run of the highest final evidence."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tvolib.bandit.testbed import CASES
from tvolib.bandit.testbed_baselines import (LOG_BETA1_GRID, USER_GRID, USER_GRID_SEED, FixedFactory, IntegrandRule,
                                             baseline_results, user_grid_results)
from tvolib.bandit.testbed_run import run_case
from tvolib.bandit.testbed_tvo import INTEGRANDS
from tvolib.bias_optimal import bias_optimal_points
from tvolib.tvo import log_uniform

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(case, progress):
    integrand = INTEGRANDS[case.integrand]
    grid = integrand.grid()
    return grid, integrand.values(grid, progress)


@pytest.mark.parametrize("name", ["d5-tvo-recorded-strong", "d10-tvo-lg-moving-strong"])
def test_the_rules_start_at_log_and_read_the_integrand_every_six_epochs(name):
    case = CASES[name]
    moments, bias = IntegrandRule(case, "moments"), IntegrandRule(case, "bias-optimal")
    for rule in (moments, bias):
        assert torch.equal(rule.current(), log_uniform(case.d))
        rule.step(5)
        assert torch.equal(rule.current(), log_uniform(case.d))  # not yet
        rule.step(12)
    grid, f = _f(case, 12 / (case.epochs - 1))  # the integrand after epoch 12
    assert torch.equal(bias.current(), bias_optimal_points(case.d, grid, f))
    b = moments.current()[1:]
    values = INTEGRANDS[case.integrand].values(b, 12 / (case.epochs - 1))
    steps = f[0] + (f[-1] - f[0]) * torch.arange(1, case.d, dtype=torch.float64) / case.d
    # equal steps in f, within moments()'s own tolerance (1e-3 of the rise; interpolating on the grid gives 1e-4)
    assert values.tolist() == pytest.approx(steps.tolist(), abs=1e-3 * float(f[-1] - f[0]))
    assert [row["epoch"] for row in bias.history()] == [12]


def test_the_rules_need_an_integrand_and_a_known_rule():
    with pytest.raises(ValueError, match="case must be a TvoCase"):
        IntegrandRule(CASES["d5-log-strong"], "moments")
    with pytest.raises(ValueError, match="rule must be one of"):
        IntegrandRule(CASES["d5-tvo-lg-strong"], "median")


def test_the_grid_searched_log_finds_a_log_like_optimum_and_costs_seven_runs():
    """d5-log-strong's optimum is log_uniform(5, beta_1 = 0.05): the grid's 0.05 has regret 0."""
    case = dataclasses.replace(CASES["d5-log-strong"], epochs=10)
    records = {r["protocol"]: r for r in baseline_results([case], max_workers=1)}
    assert set(records) == {"log", "log (best beta_1)", "linear"}
    best = records["log (best beta_1)"]
    assert best["beta1"] == 0.05 and best["runs"] == len(LOG_BETA1_GRID) == 7 and best["result"].regret < 1e-6  # the optimum is rounded to 1e-4
    assert records["log"]["beta1"] == 0.025 and records["log"]["result"].regret > 0.1
    assert FixedFactory((0.0, 0.5))(seed=9).current().tolist() == [0.0, 0.5]


def test_the_users_grid_search_keeps_the_run_of_the_highest_final_evidence_with_its_own_noise():
    case = dataclasses.replace(CASES["d5-log-strong"], epochs=10)
    records = user_grid_results([case], [0, 3], max_workers=1)
    assert [(r["protocol"], r["seed"], r["runs"]) for r in records] == [(USER_GRID, 0, 7), (USER_GRID, 3, 7)]
    for record in records:
        runs = [run_case(case, FixedFactory(tuple(log_uniform(5, beta1=b).tolist())),
                         USER_GRID_SEED + 7 * record["seed"] + k) for k, b in enumerate(LOG_BETA1_GRID)]
        evidence = [r.evidence for r in runs]
        assert len(set(evidence)) == 7  # each run has its own noise
        kept = evidence.index(max(evidence))
        assert record["beta1"] == LOG_BETA1_GRID[kept] and record["result"].evidence == evidence[kept]
        assert record["result"].regret == runs[kept].regret
