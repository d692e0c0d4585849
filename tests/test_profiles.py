"""Profiles, figure sweeps and the cost model (issue 5, "Profiles")."""
from __future__ import annotations

import dataclasses

import pytest

from tvolib import profiles
from tvolib.profiles import PROFILES, Profile, bandit_rounds, estimate_seconds, estimate_wall_seconds, get_profile

sweeps = pytest.importorskip("tvolib.sweeps")
pytest.importorskip("tvolib.train")


def digests(configs):
    return {(c.kind, c.digest()) for c in configs}


# ---------------------------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------------------------

def test_get_profile_names_and_errors():
    assert list(PROFILES) == ["smoke", "quick", "paper"]
    assert get_profile("Quick") is PROFILES["quick"]
    assert get_profile(PROFILES["smoke"]) is PROFILES["smoke"]
    with pytest.raises(ValueError, match="unknown profile 'huge'; accepted profiles: smoke, quick, paper"):
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
])
def test_bad_profile_fields_rejected(field, value, message):
    with pytest.raises(ValueError, match=message):
        PROFILES["quick"].replace(**{field: value})


def test_paper_profile_is_the_papers_setup():
    p = PROFILES["paper"]
    assert (p.n_train, p.n_test) == (None, None)
    assert (p.epochs, p.batch_size, p.lr, p.eval_S, p.eval_every) == (10_000, 1000, 1e-3, 5000, 200)
    assert p.S_values == (10, 50) and p.d_values == (2, 5, 10, 15) and len(p.seeds) == 5
    assert p.bandit_window is None and p.reward_surface_epochs == (2000, 3000, 10_000)
    grid = p.wallclock_beta1_grid
    assert len(grid) == 20 and grid[0] == pytest.approx(0.01) and grid[-1] == pytest.approx(0.9)
    wall = sweeps.table_wallclock(p)
    assert len(wall.bandit) == 5 and len(wall.grid) == 100 and {c.epochs for c in wall} == {5000}
    assert {c.dataset for c in wall} == {"omniglot"} and {c.model for c in wall} == {"vae"} and {c.S for c in wall} == {10}
    assert p.permutation_budgets == (1000, 2000, 5000, 10_000) and p.permutation_d_values == (5, 10, 15)
    assert len(sweeps.fig4_vae(p)) == 2 * 2 * 4 * 4 * 5


def test_quick_profile_meets_the_issue():
    p = PROFILES["quick"]
    assert len(p.seeds) >= 3 and {2, 5, 10} <= set(p.d_values)
    text = p.describe()
    assert "Departures from the paper" in text and f"{p.n_train} train / {p.n_test} test" in text and "3 seed(s)" in text
    assert "beta_1 grid" in text or "3 beta_1" in text


@pytest.mark.parametrize("name, minutes", [("smoke", 2.0), ("quick", 45.0)])
def test_profile_fits_its_budget_under_the_cost_model(name, minutes):
    """The whole figure set (every distinct run) on 2 workers, by the documented cost model."""
    configs = sweeps.all_configs(name, skip_unavailable=True)
    wall = estimate_wall_seconds([estimate_seconds(c) for c in configs], workers=2)
    assert wall <= minutes * 60, f"{name}: {wall / 60:.1f} min estimated"


# ---------------------------------------------------------------------------------------------
# Sweeps share runs
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PROFILES))
def test_figures_share_runs(name):
    fig4 = digests(sweeps.fig4_vae(name))
    fig8 = sweeps.fig8_random_ablation(name)
    assert digests(c for c in fig8 if c.schedule == "gp_bandit") <= fig4
    assert {c.schedule for c in fig8} == {"gp_bandit", "random"}
    assert digests(sweeps.fig1_integrand(name)) <= fig4
    assert digests(sweeps.fig3_beta_over_time(name)) <= fig4
    fig2 = sweeps.fig2_reward_surface(name)
    assert len(fig2) == 1 and fig2[0].d == 2 and fig2[0].schedule == "gp_bandit" and digests(fig2) <= fig4
    perm = sweeps.table_permutation(name)
    assert digests(c for c in perm if c.schedule == "gp_bandit") <= fig4
    assert {c.schedule for c in perm} == {"gp_bandit", "gp_bandit_unsorted"}
    union = fig4 | digests(sweeps.fig5_sbn_mnist(name)) | digests(sweeps.fig7_sbn_omniglot(name))
    curves = sweeps.fig9_training_curves(name)
    assert digests(curves) <= union and {c.dataset for c in curves} == {"mnist", "fashion_mnist", "binarized_mnist", "omniglot"}


@pytest.mark.parametrize("name", list(PROFILES))
def test_permutation_budgets_are_evaluated_epochs(name):
    p = get_profile(name)
    for c in sweeps.table_permutation(p):
        for budget in p.permutation_budgets:
            assert budget <= c.epochs and (budget % c.eval_every == 0 or budget == c.epochs)


def test_sweep_grids_follow_the_profile():
    p = PROFILES["quick"]
    fig4 = sweeps.fig4_vae(p)
    assert len(fig4) == len(sweeps.VAE_DATASETS) * len(p.S_values) * len(p.d_values) * 4 * len(p.seeds)
    assert {(c.model, c.dataset) for c in fig4} == {("vae", "mnist"), ("vae", "fashion_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig5_sbn_mnist(p)} == {("sbn", "binarized_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig7_sbn_omniglot(p)} == {("sbn", "omniglot")}
    assert all((c.n_train, c.n_test, c.epochs, c.batch_size, c.eval_S, c.eval_every) == (p.n_train, p.n_test, p.epochs, p.batch_size, p.eval_S, p.eval_every)
               for c in fig4)
    for c in fig4:  # window and burn-in go to the windowed schedules only; log uses beta_1 = 0.025
        expected = {"window": p.bandit_window, "burn_in": p.bandit_burn_in}
        assert dict(c.schedule_options) == (expected if c.schedule == "gp_bandit" else {})
        assert c.log_beta1 == 0.025
    assert all(dict(c.schedule_options) == ({"burn_in": 20} if c.schedule == "gp_bandit" else {})
               for c in sweeps.fig4_vae("paper"))
    wall = sweeps.table_wallclock(p)
    assert isinstance(wall, list) and len(wall) == len(wall.bandit) + len(wall.grid) == 3 + 9
    assert sorted({c.log_beta1 for c in wall.grid}) == pytest.approx([0.01, 0.455, 0.9])


def test_fig6_delegates_to_pcfg_sweep():
    pcfg = pytest.importorskip("tvolib.pcfg")
    configs = sweeps.fig6_pcfg("smoke")
    assert configs == list(pcfg.pcfg_sweep(PROFILES["smoke"])) and {c.kind for c in configs} == {"pcfg"}


def test_resolve_figure_names():
    assert sweeps.resolve_figure("fig4") == "fig4_vae"
    assert sweeps.resolve_figure("FIG9") == "fig9_training_curves"
    assert sweeps.resolve_figure("table-wall") == "table_wallclock"
    with pytest.raises(ValueError, match="ambiguous: table_wallclock, table_permutation"):
        sweeps.resolve_figure("table")
    with pytest.raises(ValueError, match="unknown figure 'fig10'"):
        sweeps.resolve_figure("fig10")
    everything = sweeps.figure_configs("all", "smoke")
    assert len(everything) == len(digests(everything))
    assert digests(everything) == set().union(*(digests(fn("smoke")) for fn in sweeps.FIGURES.values()))


# ---------------------------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------------------------

def test_cost_model_monotone_and_schedule_aware():
    base = sweeps.tvo_config("quick", model="vae", dataset="mnist", schedule="log", d=5, S=10, seed=0)
    t = estimate_seconds(base)
    assert estimate_seconds(base.replace(epochs=120)) > t
    assert estimate_seconds(base.replace(S=50)) > t
    assert estimate_seconds(base.replace(n_train=None)) > t  # the full dataset
    assert estimate_seconds(base.replace(eval_S=5000)) > t
    assert estimate_seconds(base.replace(schedule="moments")) > t
    assert estimate_seconds(base.replace(schedule="gp_bandit")) > t
    assert estimate_seconds(base.replace(model="sbn", dataset="binarized_mnist")) < t
    wide = base.replace(schedule="gp_bandit", schedule_options={"window": 1})
    assert estimate_seconds(wide) > estimate_seconds(base.replace(schedule="gp_bandit"))


def test_bandit_rounds_and_makespan():
    assert bandit_rounds(60, 6) == 10  # ten windows of 6 before the first growth
    assert bandit_rounds(80, 2) == 28  # 10 x 2 + 10 x 3 + 8 x 4 >= 80
    assert bandit_rounds(10_000, 6) > 300
    assert estimate_wall_seconds([3, 3, 2, 2, 2], workers=2) == 7  # LPT greedy
    assert estimate_wall_seconds([3, 3, 2, 2, 2], workers=1) == 12
    assert estimate_wall_seconds([5, 1], workers=8) == 5


def test_cost_constants_documented():
    doc = profiles.__dict__["COST_CONSTANTS"]
    assert {"startup_s", "train_s_per_sample", "eval_s_per_sample", "bandit_round_s", "pcfg_epoch_s"} <= set(doc)
    assert dataclasses.is_dataclass(Profile)
