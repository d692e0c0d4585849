"""The scales: names, validation, the paper's setup, the PCFG's scale and the Makefile's check."""
from __future__ import annotations

import dataclasses
import math

import pytest

from tvolib.paper.profiles import DEFAULT_PROFILE, PROFILES, BudgetScale, PCFGScale, get_profile, main
from tvolib.paper.sweeps import all_configs
from tvolib.runs.cost import estimate_gpu_seconds
from tvolib.runs.stacks import MAX_STACK, stack_jobs


def test_get_profile_names_none_and_errors(monkeypatch):
    assert list(PROFILES) == ["smoke", "quick", "gpu", "paper"]
    assert get_profile("Quick") is PROFILES["quick"]
    assert get_profile(PROFILES["smoke"]) is PROFILES["smoke"]
    monkeypatch.delenv("TVOLIB_PROFILE", raising=False)
    assert get_profile(None) is PROFILES[DEFAULT_PROFILE] is PROFILES["quick"]
    monkeypatch.setenv("TVOLIB_PROFILE", "smoke")
    assert get_profile() is PROFILES["smoke"]
    with pytest.raises(ValueError, match="unknown profile 'huge'; accepted profiles: smoke, quick, gpu, paper"):
        get_profile("huge")
    with pytest.raises(TypeError, match="profile must be a name"):
        get_profile(3)


@pytest.mark.parametrize("field, value, message", [
    ("n_train", 0, "n_train=0"),
    ("epochs", -1, "epochs=-1"),
    ("d_values", (1, 5), r"d_values=\(1, 5\).*ints >= 2"),
    ("seeds", (), "seeds"),
    ("wallclock_beta1_range", (0.5, 0.1), "0 < lo < hi < 1"),
    ("permutation_budgets", (7,), "multiples of eval_every"),
    ("reward_surface_epochs", (10_000_000,), "epochs in 1.."),
    ("bandit_window", 0, "bandit_window=0"),
    ("lr", float("nan"), "lr=nan"),
    ("pcfg", {"epochs": 2}, "pcfg=.*a PCFGScale"),
    ("budget", {"epochs": 475}, "budget=.*a BudgetScale or None"),
])
def test_bad_profile_fields_rejected(field, value, message):
    with pytest.raises(ValueError, match=message):
        PROFILES["quick"].replace(**{field: value})


@pytest.mark.parametrize("field, value", [
    ("epochs", 0), ("n_train", 2.5), ("S_values", (1, 5)), ("S_values", ()), ("seeds", (-1,)), ("lr", 0.0),
    ("lr", 1), ("tail_fraction", 0.0), ("tail_fraction", 1.5), ("tail_fraction", True), ("tail_fraction", math.nan),
])
def test_bad_pcfg_scale_fields_name_the_field(field, value):
    good = PROFILES["smoke"].pcfg
    with pytest.raises(ValueError, match=f"PCFGScale.{field}="):
        PCFGScale(**{**good.config_fields(), "S_values": good.S_values, "seeds": good.seeds,
                     "tail_fraction": good.tail_fraction, field: value})


def test_paper_profile_is_the_papers_setup():
    p = PROFILES["paper"]
    assert (p.n_train, p.n_test) == (None, None)
    assert (p.epochs, p.batch_size, p.lr, p.eval_S, p.eval_every) == (10_000, 1000, 1e-3, 5000, 200)
    assert p.S_values == (10, 50) and p.d_values == (2, 5, 10, 15) and len(p.seeds) == 5
    assert p.bandit_window is None and p.reward_surface_epochs == (2000, 3000, 10_000)
    grid = p.wallclock_beta1_grid
    assert len(grid) == 20 and grid[0] == pytest.approx(0.01) and grid[-1] == pytest.approx(0.9)
    assert p.permutation_budgets == (1000, 2000, 5000, 10_000) and p.permutation_d_values == (5, 10, 15)
    # Appendix D.1: 2000 epochs, 20 seeds, S in {2, 5, 10, 20}, the last 100 of 2000 epochs averaged.
    assert (p.pcfg.epochs, len(p.pcfg.seeds), p.pcfg.S_values, p.pcfg.tail_fraction) == (2000, 20, (2, 5, 10, 20), 0.05)


def test_gpu_profile_has_the_papers_grids_and_fits_three_hours_on_one_gpu():
    p, paper = PROFILES["gpu"], PROFILES["paper"]
    assert (p.n_train, p.n_test, p.batch_size) == (None, None, 1000)
    assert (p.S_values, p.d_values, p.seeds) == (paper.S_values, paper.d_values, paper.seeds)
    assert p.permutation_d_values == paper.permutation_d_values and p.wallclock_d_values == paper.wallclock_d_values
    jobs = stack_jobs(all_configs(p), MAX_STACK)
    hours = estimate_gpu_seconds(jobs)["wall_seconds"] / 3600
    assert 1.0 < hours <= 3.0  # sized to the budget: "as many epochs as fit"
    assert estimate_gpu_seconds(stack_jobs(all_configs(paper), MAX_STACK))["wall_seconds"] / 3600 > 20 * hours
    assert "Departures from the paper" in p.describe() and "100 epochs instead of 10,000" in p.describe()


def test_quick_profile_states_its_departures():
    p = PROFILES["quick"]
    assert len(p.seeds) >= 3 and {2, 5, 10} <= set(p.d_values)
    text = p.describe()
    assert "Departures from the paper" in text and f"{p.n_train} train / {p.n_test} test" in text and "3 seed(s)" in text
    assert "3 beta_1" in text
    assert "PCFG: 200 training sentences (<= 25 words) / 10 test sentences, 16 epochs of batch 25" in text and "last 25% of the epochs" in text


def test_main_prints_the_profile_or_an_error(capsys):
    assert main(["smoke"]) == 0
    assert capsys.readouterr().out.startswith("profile 'smoke'")
    assert main(["bogus"]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown profile 'bogus'; accepted profiles: smoke, quick, gpu, paper"
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


@pytest.mark.parametrize("field, value", [
    ("epochs", 0), ("n_train", 0), ("n_test", 2.5), ("batch_size", None), ("window", 0), ("burn_in", -1),
    ("n_init", 0), ("eval_every", True),
])
def test_bad_budget_scale_fields_name_the_field(field, value):
    good = dataclasses.asdict(PROFILES["quick"].budget)
    with pytest.raises(ValueError, match=f"BudgetScale.{field}="):
        BudgetScale(**{**good, field: value})


def test_the_bandit_budget_of_each_profile():
    """gpu and paper: the paper's T = 1000 epochs with w = 10 on full MNIST; quick: the code's windows on
    a CPU, its measured choice of data stated in the departures; smoke: a plumbing check."""
    for name in ("gpu", "paper"):
        b = PROFILES[name].budget
        assert (b.epochs, b.window, b.burn_in, b.n_init, b.n_train, b.batch_size) == (1000, 10, 20, None, None, 1000)
    b, text = PROFILES["quick"].budget, PROFILES["quick"].describe()
    assert (b.epochs, b.window, b.burn_in, b.n_init, b.eval_every) == (475, 6, 20, None, 25)
    assert "bandit budget (Fig 11" in text and "w = 6 epochs (+1 every 10 rounds)" in text
    assert "still improves at the last epoch (measured" in text
    assert PROFILES["smoke"].budget.epochs == PROFILES["smoke"].epochs
