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


BANDIT_FAMILY = {"gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random", "gp_bandit_adaptive"}
#: Series added after the digests below were pinned (the bias-optimal schedule in Figs 4, 8 and 11): the
#: pinned hashes cover every other config, and :func:`test_new_series_digests_are_pinned` covers these.
NEW_SERIES = set(sweeps.FIXED_RULE_SERIES)
#: Protocols added after the digests below were pinned (the integrand bandit in Figs 4, 8, 10, 11 and 13).
NEW_PROTOCOLS = {"integrand"}


def is_new(config) -> bool:
    """A config of a series added after the pinned digests (by schedule, or by the bandit's protocol)."""
    options = dict(getattr(config, "schedule_options", None) or ())
    return getattr(config, "schedule", None) in NEW_SERIES or options.get("protocol") in NEW_PROTOCOLS


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
    fixed = [c for c in configs if c.kind == "tvo" and c.schedule not in BANDIT_FAMILY | NEW_SERIES and not is_new(c)]
    assert digest_hash(fixed) == expected


@pytest.mark.parametrize("name, expected", [("smoke", "5ea574966fe935f8"), ("quick", "b0fc80e85126e79c"),
                                            ("paper", "b58f7bfdb06d0657")])
def test_every_config_digest_is_pinned(name, expected):
    """Every config's digest, bandit runs included (their cache keys carry the bandit's revision, 5
    here, and name the code's protocol, no longer the schedule's default; the GP bandit under this
    package's protocol is a series of Figs 4, 8, 10 and 11). Quick's value includes the bandit
    budget's runs (Fig 11); every profile's, the adaptive-d bandit's runs (Fig 13), whose keys also
    carry that schedule's revision (6: the recommendation's candidates include the observed arms,
    its tolerance 0.75 sd; at 5, the noise bound of all the rewards' variance and the
    recommendation's best by its lower bound, the values were 431de16d41453348, 4364dd2699389446
    and 039dbdef634c11c3; at 4, every d searched on its own, 69e40228491ca854, 1dd04d9325308a81
    and aec819060427ea6c; at 3, the recorded recommendation,
    4f5fbaec2982d437, 11435dc35045feb7 and bd4ebcf24417703d; at 2, Thompson-sampled d,
    b804e9f152b86699, 2b6e7d5e6f1f3c7e and 0a253270acc45fd4), which renamed them and no other run."""
    configs = [c for c in sweeps.all_configs(name) if not is_new(c)]
    assert digest_hash(configs) == expected


@pytest.mark.parametrize("name, expected", [("smoke", "bbb17e3f677aeae9"), ("quick", "508161afe4ff6d5d"),
                                            ("paper", "b6fa38e7ec060969")])
def test_new_series_digests_are_pinned(name, expected):
    """The bias-optimal schedule's runs (Figs 4, 8 and 11, its default options): digests of the fixed
    schedules' kind (no bandit revision), pinned so that their cached results keep their names."""
    configs = [c for c in sweeps.all_configs(name) if getattr(c, "schedule", None) in NEW_SERIES]
    assert configs and all(c.schedule == "bias_optimal" and not c.schedule_options for c in configs)
    assert digest_hash(configs) == expected


@pytest.mark.parametrize("name", list(PROFILES))
def test_figures_share_runs(name):
    fig4 = digests(sweeps.fig4_vae_mnist_fashion(name))
    fig8 = sweeps.fig8_random_ablation(name)
    assert digests(c for c in fig8 if c.schedule == "gp_bandit") <= fig4
    assert {c.schedule for c in fig8} == {"gp_bandit", "random", "bias_optimal"}
    assert digests(c for c in fig8 if c.schedule == "bias_optimal") <= fig4
    assert digests(sweeps.fig1_tvo_integrand(name)) <= fig4
    fig11 = digests(sweeps.fig11_bandit_budget(name))
    assert digests(sweeps.fig3_beta_over_time(name)) <= fig4 | fig11  # the profile's runs, then the budget's
    assert digests(sweeps.budget_bandits(name)) <= digests(sweeps.fig3_beta_over_time(name))
    assert fig11 <= digests(sweeps.fig10_bandit_protocol(name))  # Fig 10's second row
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
    # the GP bandit under two protocols, and the bias-optimal schedule
    series = len(sweeps.COMPARED_SCHEDULES) + len(sweeps.PROTOCOL_SERIES) + len(sweeps.FIXED_RULE_SERIES)
    assert len(fig4) == len(sweeps.VAE_DATASETS) * len(p.S_values) * len(p.d_values) * series * len(p.seeds)
    assert {(c.model, c.dataset) for c in fig4} == {("vae", "mnist"), ("vae", "fashion_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig5_sbn_binarized_mnist(p)} == {("sbn", "binarized_mnist")}
    assert {(c.model, c.dataset) for c in sweeps.fig7_sbn_omniglot(p)} == {("sbn", "omniglot")}
    assert all((c.n_train, c.n_test, c.epochs, c.batch_size, c.eval_S, c.eval_every)
               == (p.n_train, p.n_test, p.epochs, p.batch_size, p.eval_S, p.eval_every) for c in fig4)
    for c in fig4:  # window and burn-in go to the windowed schedules only; log uses beta_1 = 0.025
        expected = {"window": p.bandit_window, "burn_in": p.bandit_burn_in, "n_init": p.bandit_n_init}
        # the GP bandit under the code's protocol (named) and under this package's (the default)
        protocols = tuple({**expected, "protocol": name} for name in ("code", "tvolib", "integrand"))
        assert (sweeps.bandit_options(c) in protocols) if c.schedule == "gp_bandit" else not c.schedule_options
        assert c.log_beta1 == 0.025
    assert all(sweeps.bandit_options(c) in tuple({"burn_in": 20, "protocol": n} for n in ("code", "tvolib", "integrand"))
               if c.schedule == "gp_bandit" else not c.schedule_options for c in sweeps.fig4_vae_mnist_fashion("paper"))
    wall = sweeps.table_wallclock(p)
    assert isinstance(wall, list) and len(wall) == len(wall.bandit) + len(wall.grid) == 3 + 9
    assert sorted({c.log_beta1 for c in wall.grid}) == pytest.approx([0.01, 0.455, 0.9])


@pytest.mark.parametrize("name", list(PROFILES))
def test_the_adaptive_d_figure_adds_one_run_per_dataset_and_seed_to_fig4s(name):
    p = get_profile(name)
    configs = sweeps.fig13_adaptive_d(name)
    adaptive = [c for c in configs if c.schedule == "gp_bandit_adaptive"]
    assert len(adaptive) == len(sweeps.VAE_DATASETS) * len(p.seeds) == len(digests(adaptive))
    assert digests(c for c in configs if c.schedule != "gp_bandit_adaptive") <= digests(sweeps.fig4_vae_mnist_fashion(name))
    assert {c.schedule for c in configs} == {"log", "moments", "gp_bandit", "gp_bandit_adaptive"}
    for c in adaptive:  # the most points the grid trains, its first S, the windows of the other bandits
        assert (c.d, c.S, c.model) == (max(p.d_values), p.S_values[0], "vae")
        options = dict(c.schedule_options)
        assert "protocol" not in options and options.get("window") == p.bandit_window
        assert options.get("n_init") == p.bandit_n_init and options.get("burn_in", 0) == p.bandit_burn_in


def test_paper_scale_runs():
    p = PROFILES["paper"]
    wall = sweeps.table_wallclock(p)
    assert len(wall.bandit) == 5 and len(wall.grid) == 100 and {c.epochs for c in wall} == {5000}
    assert {c.dataset for c in wall} == {"omniglot"} and {c.model for c in wall} == {"vae"} and {c.S for c in wall} == {10}
    series = len(sweeps.COMPARED_SCHEDULES) + len(sweeps.PROTOCOL_SERIES) + len(sweeps.FIXED_RULE_SERIES)
    assert len(sweeps.fig4_vae_mnist_fashion(p)) == 2 * 2 * 4 * series * 5


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
    assert sweeps.resolve_figure("fig12") == "fig12_bandit_testbed"
    assert sweeps.resolve_figure("fig13") == "fig13_adaptive_d"
    with pytest.raises(ValueError, match="unknown figure 'fig14'"):
        sweeps.resolve_figure("fig14")
    everything = sweeps.figure_configs("all", "smoke")
    assert len(everything) == len(digests(everything))
    assert digests(everything) == set().union(*(digests(fn("smoke")) for fn in sweeps.FIGURES.values()))


@pytest.mark.parametrize("name, minutes, budget", [("smoke", 2.0, True), ("quick", 60.0, False)])
def test_profile_fits_its_budget_under_the_cost_model(name, minutes, budget):
    """The whole figure set (every distinct run; at quick without the bandit budget's runs, which
    have their own hour) on 2 workers, by the runner's cost model (quick: 47 min with the GP bandit
    under this package's protocol in Figs 4, 8 and 10; 53 min with the bias-optimal schedule in Figs
    4 and 8, which re-estimates itself every epoch; 56 min with the integrand bandit in Figs 4, 8 and 13)."""
    skipped = set() if budget else digests(sweeps.fig11_bandit_budget(name))
    configs = [c for c in sweeps.all_configs(name) if (c.kind, c.digest()) not in skipped]
    wall = estimate_wall_seconds([estimate_seconds(c) for c in configs], workers=2)
    assert wall <= minutes * 60, f"{name}: {wall / 60:.1f} min estimated"


def test_the_quick_bandit_budget_fits_seventy_minutes_on_two_workers():
    """Fig 11 at quick trains in about an hour on 2 cores with 2 workers, by the cost model: 59.5 min
    with seven series (the bias-optimal schedule the seventh), 65.7 min with the eighth, the GP bandit
    under the integrand protocol (priced as the GP bandit's)."""
    configs = sweeps.fig11_bandit_budget("quick")
    bandit = [c for c in configs if c.schedule == "gp_bandit"][:3]
    extra = bandit * max(0, 6 - len(sweeps.BUDGET_SERIES))
    wall = estimate_wall_seconds([estimate_seconds(c) for c in configs + extra], workers=2)
    assert len(configs + extra) >= 18 and wall <= 70 * 60, f"{wall / 60:.1f} min estimated"


def test_quick_bandit_budget_gives_every_bandit_run_40_gp_rounds():
    """The quick Fig 11: MNIST, d = 5, S = 10, 3 seeds of every series; the code's windows (w = 6,
    +1 every 10 rounds, after a 20-epoch burn-in) and its 3 d = 15 random rounds; every GP-bandit run
    trains at least 40 windows with an arm its GP chose, by the window rule (not by running), and
    475 epochs are the fewest that do (the integrand bandit's GP starts after 3 rounds: 52 windows)."""
    p = get_profile("quick")
    configs = sweeps.fig11_bandit_budget(p)
    assert len(configs) == 3 * len(sweeps.BUDGET_SERIES)
    assert [sweeps.budget_series(c) for c in configs[::3]] == list(sweeps.BUDGET_SERIES)
    assert {(c.model, c.dataset, c.d, c.S) for c in configs} == {("vae", "mnist", 5, 10)}
    assert {c.seed for c in configs} == {0, 1, 2}
    b = p.budget
    assert all((c.epochs, c.n_train, c.n_test, c.batch_size, c.eval_every, c.eval_S)
               == (b.epochs, b.n_train, b.n_test, b.batch_size, b.eval_every, p.eval_S) for c in configs)
    bandits = [c for c in configs if c.schedule in sweeps.GP_SCHEDULES]
    assert bandits and all(sweeps.bandit_options(c) in tuple({"window": 6, "burn_in": 20, "protocol": n}
                                                             for n in ("code", "tvolib", "integrand"))
                           for c in bandits)
    gp_ucb = [c for c in bandits if sweeps.bandit_options(c)["protocol"] != "integrand"]
    assert all(sweeps.planned_rounds(c) == (55, 40) for c in gp_ucb)
    assert all(sweeps.planned_rounds(c.replace(epochs=474))[1] == 39 for c in gp_ucb)
    assert all(sweeps.planned_rounds(c) == (55, 52) for c in bandits if c not in gp_ucb)
    random = [c for c in configs if c.schedule == "random"]
    assert random and all(dict(c.schedule_options) == {"window": 6, "burn_in": 20, "protocol": "code"} for c in random)


def test_planned_rounds_follow_the_window_rule():
    """w_k = w + floor(k / 10) epochs from the burn-in; GP rounds are those after n_init."""
    config = sweeps.tvo_config("smoke", model="vae", dataset="mnist", schedule="gp_bandit", d=5, S=5, seed=0,
                               epochs=20 + 10 * 2 + 3 * 3, bandit_options={"window": 2, "burn_in": 20, "n_init": 4})
    assert sweeps.planned_rounds(config) == (13, 9)
    assert sweeps.planned_rounds(config.replace(epochs=config.epochs - 1)) == (12, 8)
    assert sweeps.planned_rounds(config.replace(schedule="log", schedule_options={})) == (0, 0)


def test_one_more_bandit_series_is_one_more_entry(monkeypatch):
    """Adding a series to BUDGET_SERIES adds its three runs to Fig 11 (and Figs 3 and 10), named back
    by budget_series; a run of no series is refused by name."""
    series = {**sweeps.BUDGET_SERIES, "GP-bandit (box domain)": ("gp_bandit", {"protocol": "code", "arm_domain": "box"})}
    monkeypatch.setattr(sweeps, "BUDGET_SERIES", series)
    configs = sweeps.fig11_bandit_budget("quick")
    assert len(configs) == 3 * len(series) and [sweeps.budget_series(c) for c in configs].count(
        "GP-bandit (box domain)") == 3
    assert [sweeps.budget_series(c) for c in configs].count("bias_optimal") == 3
    assert [sweeps.budget_series(c) for c in configs].count("gp_bandit") == 3
    assert [sweeps.budget_series(c) for c in configs].count("gp_bandit_tvolib") == 3
    assert len(sweeps.budget_bandits("quick")) == 3 * (1 + len(sweeps.PROTOCOL_SERIES)) + 3
    assert digests(configs) <= digests(sweeps.fig10_bandit_protocol("quick"))
    with pytest.raises(ValueError, match="no bandit-budget series trains schedule 'gp_bandit_unsorted'"):
        sweeps.budget_series(configs[-1].replace(schedule="gp_bandit_unsorted"))


def test_profiles_without_a_budget_have_no_budget_runs():
    p = get_profile("smoke").replace(budget=None)
    assert sweeps.fig11_bandit_budget(p) == [] and sweeps.budget_bandits(p) == []
    assert digests(sweeps.fig3_beta_over_time(p)) <= digests(sweeps.fig4_vae_mnist_fashion(p))
