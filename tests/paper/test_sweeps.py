"""Every figure's configs: unchanged digests, runs shared across figures, the PCFG sweep, names."""
from __future__ import annotations

import hashlib

import pytest

from tvolib.paper import sweeps
from tvolib.paper.profiles import PROFILES, get_profile
from tvolib.training import PCFGConfig
from tvolib.runs.cost import estimate_seconds, estimate_wall_seconds


def digests(configs):
    return {(c.kind, c.digest()) for c in configs}


BANDIT_FAMILY = {"gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random"}


def digest_hash(configs) -> str:
    return hashlib.sha256("".join(sorted(kind + digest for kind, digest in digests(configs))).encode()).hexdigest()[:16]


#: Figures added with the bandit's revision 3 (their fixed-schedule runs are new configs).
NEW_FIGURES = ("fig10_bandit_protocol", "fig11_bandit_budget")


@pytest.mark.parametrize("name, expected", [("smoke", "1f438d245c884534"), ("quick", "f047bc0c266e9c72"),
                                            ("paper", "3661015cbf7a912a")])
def test_fixed_schedule_digests_are_unchanged(name, expected):
    """Cached image runs of fixed schedules still resolve: their digests are those of the configs
    before the bandit's revisions 2 to 4 (a hash of every distinct config's kind and digest)."""
    configs = [c for stem, fn in sweeps.FIGURES.items() if stem not in NEW_FIGURES for c in fn(name)]
    fixed = [c for c in configs if c.kind == "tvo" and c.schedule not in BANDIT_FAMILY]
    assert digest_hash(fixed) == expected


@pytest.mark.parametrize("name, expected", [("smoke", "e3cf0e8255800ef8"), ("quick", "5f2eab4428039a4f"),
                                            ("paper", "fe5ace98c1670627")])
def test_every_config_digest_is_pinned(name, expected):
    """Every config's digest, bandit runs included (their cache keys carry the bandit's revision).
    The smoke and paper values are also those before the PCFG's new options (left out of the digest
    at their defaults); the quick PCFG sweep has its own, larger scale."""
    assert digest_hash(sweeps.all_configs(name)) == expected


@pytest.mark.parametrize("name", list(PROFILES))
def test_figures_share_runs(name):
    fig4 = digests(sweeps.fig4_vae_mnist_fashion(name))
    fig8 = sweeps.fig8_random_ablation(name)
    assert digests(c for c in fig8 if c.schedule == "gp_bandit") <= fig4
    assert {c.schedule for c in fig8} == {"gp_bandit", "random"}
    assert digests(sweeps.fig1_tvo_integrand(name)) <= fig4
    assert digests(sweeps.fig3_beta_over_time(name)) <= fig4
    fig2 = sweeps.fig2_reward_surface(name)
    assert len(fig2) == 1 and fig2[0].d == 2 and fig2[0].schedule == "gp_bandit" and digests(fig2) <= fig4
    perm = sweeps.table_permutation(name)
    assert digests(c for c in perm if c.schedule == "gp_bandit") <= fig4
    assert {c.schedule for c in perm} == {"gp_bandit", "gp_bandit_unsorted"}
    union = fig4 | digests(sweeps.fig5_sbn_binarized_mnist(name)) | digests(sweeps.fig7_sbn_omniglot(name))
    curves = sweeps.fig9_training_curves(name)
    assert digests(curves) <= union
    assert {c.dataset for c in curves} == {"mnist", "fashion_mnist", "binarized_mnist", "omniglot"}


@pytest.mark.parametrize("name", list(PROFILES))
def test_permutation_budgets_are_evaluated_epochs(name):
    p = get_profile(name)
    for c in sweeps.table_permutation(p):
        for budget in p.permutation_budgets:
            assert budget <= c.epochs and (budget % c.eval_every == 0 or budget == c.epochs)


def test_sweep_grids_follow_the_profile():
    p = PROFILES["quick"]
    fig4 = sweeps.fig4_vae_mnist_fashion(p)
    assert len(fig4) == len(sweeps.VAE_DATASETS) * len(p.S_values) * len(p.d_values) * 4 * len(p.seeds)
    assert {(c.model, c.dataset) for c in fig4} == {("vae", "mnist"), ("vae", "fashion_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig5_sbn_binarized_mnist(p)} == {("sbn", "binarized_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig7_sbn_omniglot(p)} == {("sbn", "omniglot")}
    assert all((c.n_train, c.n_test, c.epochs, c.batch_size, c.eval_S, c.eval_every)
               == (p.n_train, p.n_test, p.epochs, p.batch_size, p.eval_S, p.eval_every) for c in fig4)
    for c in fig4:  # window and burn-in go to the windowed schedules only; log uses beta_1 = 0.025
        expected = {"window": p.bandit_window, "burn_in": p.bandit_burn_in, "n_init": p.bandit_n_init}
        assert dict(c.schedule_options) == (expected if c.schedule == "gp_bandit" else {})
        assert c.log_beta1 == 0.025
    assert all(dict(c.schedule_options) == ({"burn_in": 20} if c.schedule == "gp_bandit" else {})
               for c in sweeps.fig4_vae_mnist_fashion("paper"))
    wall = sweeps.table_wallclock(p)
    assert isinstance(wall, list) and len(wall) == len(wall.bandit) + len(wall.grid) == 3 + 9
    assert sorted({c.log_beta1 for c in wall.grid}) == pytest.approx([0.01, 0.455, 0.9])


def test_paper_scale_runs():
    p = PROFILES["paper"]
    wall = sweeps.table_wallclock(p)
    assert len(wall.bandit) == 5 and len(wall.grid) == 100 and {c.epochs for c in wall} == {5000}
    assert {c.dataset for c in wall} == {"omniglot"} and {c.model for c in wall} == {"vae"} and {c.S for c in wall} == {10}
    assert len(sweeps.fig4_vae_mnist_fashion(p)) == 2 * 2 * 4 * 4 * 5


@pytest.mark.parametrize("name, runs", [("smoke", 5 * 1 * 1), ("quick", 5 * 4 * 2), ("paper", 5 * 4 * 20)])
def test_pcfg_sweep_is_methods_by_S_by_seeds(name, runs):
    configs = sweeps.pcfg_sweep(name)
    scale = get_profile(name).pcfg
    assert len(configs) == len(digests(configs)) == runs and configs == sweeps.fig6_pcfg(name)
    assert {(c.objective, c.schedule) for c in configs} == set(sweeps.PCFG_METHODS)
    assert {c.S for c in configs} == set(scale.S_values) and {c.seed for c in configs} == set(scale.seeds)
    assert all(getattr(c, k) == v for c in configs for k, v in scale.config_fields().items())
    assert sweeps.tail_fraction(name) == scale.tail_fraction


def test_paper_pcfg_sweep_uses_the_config_defaults():
    """The paper's scale is PCFGConfig's defaults (Appendix D.1), d = 5 for the TVO."""
    for c in sweeps.pcfg_sweep("paper"):
        default = PCFGConfig(objective=c.objective, schedule=c.schedule, S=c.S, seed=c.seed)
        assert c.digest() == default.digest()
    assert sweeps.tail_fraction("paper") == 0.05 and sweeps.tail_fraction("quick") == 0.25


def test_resolve_figure_stems_aliases_and_prefixes():
    assert sweeps.resolve_figure("fig4") == "fig4_vae_mnist_fashion"
    assert sweeps.resolve_figure("FIG9") == "fig9_training_curves"
    assert sweeps.resolve_figure("table-wall") == "table_wallclock"
    for old, new in sweeps.FIGURE_ALIASES.items():
        assert sweeps.resolve_figure(old) == new and new in sweeps.FIGURES
        assert digests(sweeps.figure_configs(old, "smoke")) == digests(sweeps.FIGURES[new]("smoke"))
    with pytest.raises(ValueError, match="ambiguous: table_wallclock, table_permutation"):
        sweeps.resolve_figure("table")
    assert sweeps.resolve_figure("fig10") == "fig10_bandit_protocol"
    with pytest.raises(ValueError, match="unknown figure 'fig12'"):
        sweeps.resolve_figure("fig12")
    everything = sweeps.figure_configs("all", "smoke")
    assert len(everything) == len(digests(everything))
    assert digests(everything) == set().union(*(digests(fn("smoke")) for fn in sweeps.FIGURES.values()))


@pytest.mark.parametrize("name, minutes", [("smoke", 2.0), ("quick", 45.0)])
def test_profile_fits_its_budget_under_the_cost_model(name, minutes):
    """The whole figure set (every distinct run) on 2 workers, by the runner's cost model."""
    configs = sweeps.all_configs(name)
    wall = estimate_wall_seconds([estimate_seconds(c) for c in configs], workers=2)
    assert wall <= minutes * 60, f"{name}: {wall / 60:.1f} min estimated"
