"""The runs behind every figure and table of the paper, as functions of a profile.

Each ``fig*``/``table*`` function returns the list of configs its figure needs; its name is the
figure's stem, shared by its notebook (``notebooks/NN_<stem>.ipynb``) and its output files
(``figures/<stem>.png``/``.pdf``/``.csv``/``.md``). All of them build
their TVO runs through one constructor (:func:`tvo_config`), so wherever two figures need the same
run they get *equal* configs (same digest, same results folder) and the run is trained once:

- Fig 8's GP-bandit runs are Fig 4's; the permutation table's sorted-GP runs are Fig 4's MNIST
  GP-bandit runs (its budgets are intermediate evaluations of the same runs);
- Fig 9's curves are Fig 4/5/7 runs; Fig 2's run (d = 2) and Fig 3's (d = 5) are Fig 4 MNIST
  GP-bandit runs; Fig 1 loads the model of a Fig 4 MNIST run.

Fixed across figures (the paper's choices, Section 5): objective ``tvo`` (covariance/reparam
estimator chosen by the trainer), log/linear schedules with beta_1 = 0.025, data subset seed 0
(the subset does not change with the run's seed, so schedules are compared on the same data).
"""
from __future__ import annotations

from typing import Any, Callable

from tvolib.bandit.plan import schedule_plan
from tvolib.bandit.protocol import CONFIG_DEFAULT_PROTOCOL
from tvolib.paper.profiles import Profile, get_profile
from tvolib.training import PCFGConfig, RunConfig
from tvolib.training.schedule import VARIABLE_D_SCHEDULES, make_schedule

__all__ = [
    "COMPARED_SCHEDULES",
    "FIXED_RULE_SERIES",
    "VAE_DATASETS",
    "SBN_DATASETS",
    "FIGURES",
    "tvo_config",
    "WallclockConfigs",
    "FIGURE_ALIASES",
    "PCFG_METHODS",
    "fig1_tvo_integrand",
    "fig2_reward_surface",
    "fig3_beta_over_time",
    "fig4_vae_mnist_fashion",
    "fig5_sbn_binarized_mnist",
    "fig6_pcfg",
    "fig7_sbn_omniglot",
    "fig8_random_ablation",
    "fig9_training_curves",
    "table_wallclock",
    "table_permutation",
    "fig10_bandit_protocol",
    "fig11_bandit_budget",
    "fig12_bandit_testbed",
    "fig13_adaptive_d",
    "ADAPTIVE_D_FIXED",
    "adaptive_d_config",
    "PROTOCOL_VARIANTS",
    "PROTOCOL_SERIES",
    "BUDGET_SERIES",
    "bandit_options",
    "budget_series",
    "budget_bandits",
    "planned_rounds",
    "protocol_method",
    "pcfg_sweep",
    "tail_fraction",
    "resolve_figure",
    "figure_configs",
    "all_configs",
]

#: Schedules compared in Figs 4, 5, 7 and 9 (Section 5: linear, log, moments baselines).
COMPARED_SCHEDULES: tuple[str, ...] = ("linear", "log", "moments", "gp_bandit")
#: Fixed-rule schedules not in the paper, a series of Figs 4, 8 and 11 beside the paper's: the
#: bias-optimal schedule (:class:`~tvolib.bias_optimal.BiasOptimalSchedule`, its default options).
FIXED_RULE_SERIES: tuple[str, ...] = ("bias_optimal",)
#: Schedules that take the profile's bandit window and burn-in (``schedule_options``).
WINDOWED_SCHEDULES: tuple[str, ...] = ("gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random")
#: Of those, the ones with a GP (they also take the profile's number of random rounds).
GP_SCHEDULES: tuple[str, ...] = WINDOWED_SCHEDULES[:3]
#: Continuous VAE datasets (Fig 4, 8) and Sigmoid Belief Network datasets (Fig 5, 7).
VAE_DATASETS: tuple[str, ...] = ("mnist", "fashion_mnist")
SBN_DATASETS: tuple[str, ...] = ("binarized_mnist", "omniglot")
#: The paper's baseline beta_1 for the log schedule (Section 5, from Masrani et al. 2019's grid search).
LOG_BETA1 = 0.025
#: Subset seed shared by every run (the run's own seed drives initialisation and sampling).
DATA_SEED = 0


def tvo_config(
    profile: Profile | str,
    *,
    model: str,
    dataset: str,
    schedule: str,
    d: int,
    S: int,
    seed: int,
    epochs: int | None = None,
    log_beta1: float = LOG_BETA1,
    eval_every: int | None = None,
    bandit_options: dict[str, Any] | None = None,
) -> RunConfig:
    """The :class:`tvolib.train.RunConfig` of one TVO run at ``profile``'s scale (validated).

    Args:
        profile: a profile or its name; sets subset sizes, epochs, batch, lr, evaluation and the
            bandit's window and burn-in (for the windowed schedules).
        model, dataset, schedule, d, S, seed: the run's own fields.
        epochs: overrides the profile's epochs (the wall-clock table, the budget figure).
        log_beta1: beta_1 of the log schedule (the paper's 0.025 unless grid-searched).
        eval_every: overrides the profile's evaluation cadence.
        bandit_options: schedule options of a windowed schedule, over the profile's (window,
            burn-in, random rounds): a protocol variant, another window. The GP bandits run the
            authors' code's protocol (``protocol="code"``, what the paper ran) unless these name
            another: the schedule's own default is this package's protocol. The bandit that
            chooses ``d`` (:data:`~tvolib.training.schedule.VARIABLE_D_SCHEDULES`, not in the
            paper) takes the profile's windows and random rounds and keeps its own protocol.

    Returns:
        The validated config.

    Example:
        >>> tvo_config("smoke", model="vae", dataset="mnist", schedule="log", d=5, S=5, seed=0).epochs
        6
    """
    p = get_profile(profile)
    options: dict[str, Any] = {}
    if schedule in WINDOWED_SCHEDULES or schedule in VARIABLE_D_SCHEDULES:
        if p.bandit_window is not None:
            options["window"] = p.bandit_window
        if p.bandit_burn_in:
            options["burn_in"] = p.bandit_burn_in
        if p.bandit_n_init is not None and (schedule in GP_SCHEDULES or schedule in VARIABLE_D_SCHEDULES):
            options["n_init"] = p.bandit_n_init
        if schedule in WINDOWED_SCHEDULES:
            options["protocol"] = "code"
        options.update(bandit_options or {})
    elif bandit_options:
        raise ValueError(f"bandit_options apply to the schedules {WINDOWED_SCHEDULES + VARIABLE_D_SCHEDULES}; "
                         f"got schedule {schedule!r}")
    return RunConfig(
        model=model,
        dataset=dataset,
        n_train=p.n_train,
        n_test=p.n_test,
        data_seed=DATA_SEED,
        objective="tvo",
        schedule=schedule,
        d=d,
        S=S,
        epochs=p.epochs if epochs is None else epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        seed=seed,
        log_beta1=log_beta1,
        eval_every=p.eval_every if eval_every is None else eval_every,
        eval_S=p.eval_S,
        schedule_options=options,
    ).validate()


def _model_for(dataset: str) -> str:
    return "vae" if dataset in VAE_DATASETS else "sbn"


#: Series that are the GP bandit under another protocol than the code's: series name -> GP-bandit
#: options. A sweep lists them among its schedules; their runs are ``gp_bandit`` runs with these
#: options, and :func:`tvolib.paper.analysis.with_series` names them back in a run frame.
PROTOCOL_SERIES: dict[str, dict[str, Any]] = {"gp_bandit_tvolib": {"protocol": "tvolib"},
                                              "gp_bandit_integrand": {"protocol": "integrand"}}


def bandit_options(config: Any) -> dict[str, Any]:
    """A run's schedule options, with the protocol a bandit schedule follows when they name none
    (:data:`~tvolib.bandit.protocol.CONFIG_DEFAULT_PROTOCOL`: a config that names the default has it
    dropped from its options, so that one run has one digest).

    Example:
        >>> bandit_options(tvo_config("smoke", model="vae", dataset="mnist", schedule="gp_bandit", d=5, S=5,
        ...                           seed=0, bandit_options={"protocol": "tvolib"}))["protocol"]
        'tvolib'
    """
    options = dict(config.schedule_options)
    if config.schedule in WINDOWED_SCHEDULES:
        options.setdefault("protocol", CONFIG_DEFAULT_PROTOCOL)
    return options


def _matches(config: Any, schedule: str, wanted: dict[str, Any]) -> bool:
    options = bandit_options(config)
    return config.schedule == schedule and all(options.get(k) == v for k, v in wanted.items())


def _series_config(p: Profile, series: str, **fields: Any) -> RunConfig:
    """``tvo_config`` of a schedule or of a :data:`PROTOCOL_SERIES` (a ``gp_bandit`` run with its options)."""
    if series in PROTOCOL_SERIES:
        return tvo_config(p, schedule="gp_bandit", bandit_options=PROTOCOL_SERIES[series], **fields)
    return tvo_config(p, schedule=series, **fields)


def _grid(p: Profile, datasets: tuple[str, ...], schedules: tuple[str, ...], *, S_values: tuple[int, ...] | None = None,
          d_values: tuple[int, ...] | None = None, seeds: tuple[int, ...] | None = None) -> list[Any]:
    return [
        _series_config(p, sch, model=_model_for(ds), dataset=ds, d=d, S=S, seed=seed)
        for ds in datasets
        for S in (S_values or p.S_values)
        for d in (d_values or p.d_values)
        for sch in schedules
        for seed in (seeds or p.seeds)
    ]


def _showcase_d(p: Profile, wanted: int) -> int:
    """``wanted`` if the profile trains it, else the closest d it does train (so the run is shared)."""
    return min(p.d_values, key=lambda d: (abs(d - wanted), d))


def fig1_tvo_integrand(profile: Profile | str) -> list[Any]:
    """Fig 1: the one run whose trained VAE draws the integrand E_{pi_beta}[log w] versus beta
    (MNIST, log schedule, d = 5, first S and seed: a Fig 4 run)."""
    p = get_profile(profile)
    return [tvo_config(p, model="vae", dataset="mnist", schedule="log", d=_showcase_d(p, 5), S=p.S_values[0],
                       seed=p.seeds[0])]


def fig2_reward_surface(profile: Profile | str) -> list[Any]:
    """Fig 2: one GP-bandit run with d = 2 (MNIST, first S and seed); the notebook rebuilds the GP
    posterior at the epochs ``profile.reward_surface_epochs`` from its schedule history."""
    p = get_profile(profile)
    return [tvo_config(p, model="vae", dataset="mnist", schedule="gp_bandit", d=2, S=p.S_values[0], seed=p.seeds[0])]


def fig3_beta_over_time(profile: Profile | str) -> list[Any]:
    """Fig 3: the bandit's chosen betas over training, d = 5 on MNIST (first S, every seed), then
    the same over the bandit budget (Fig 11's GP-bandit runs, :func:`budget_bandits`)."""
    p = get_profile(profile)
    return [tvo_config(p, model="vae", dataset="mnist", schedule="gp_bandit", d=_showcase_d(p, 5), S=p.S_values[0],
                       seed=seed) for seed in p.seeds] + budget_bandits(p)


def fig4_vae_mnist_fashion(profile: Profile | str) -> list[Any]:
    """Fig 4: VAE on MNIST and Fashion-MNIST; every S, d, compared schedule and seed of the profile,
    the GP bandit under this package's protocol (:data:`PROTOCOL_SERIES`) beside the code's, and the
    bias-optimal schedule (:data:`FIXED_RULE_SERIES`)."""
    return _grid(get_profile(profile), VAE_DATASETS, COMPARED_SCHEDULES + tuple(PROTOCOL_SERIES) + FIXED_RULE_SERIES)


def fig5_sbn_binarized_mnist(profile: Profile | str) -> list[Any]:
    """Fig 5: Sigmoid Belief Network on binarized MNIST; every S, d, compared schedule and seed."""
    return _grid(get_profile(profile), ("binarized_mnist",), COMPARED_SCHEDULES)


def fig7_sbn_omniglot(profile: Profile | str) -> list[Any]:
    """Fig 7 (Appendix D.2): Sigmoid Belief Network on binarized Omniglot; every S, d, schedule and seed."""
    return _grid(get_profile(profile), ("omniglot",), COMPARED_SCHEDULES)


#: The methods of Fig 6 as (objective, schedule): the TVO with the log and GP-bandit schedules,
#: and the baselines REINFORCE, wake-wake and wake-sleep (Appendix D.1).
PCFG_METHODS: tuple[tuple[str, str], ...] = (("tvo", "log"), ("tvo", "gp_bandit"), ("reinforce", "none"),
                                             ("wake-wake", "none"), ("wake-sleep", "none"))


def pcfg_sweep(profile: Profile | str) -> list[PCFGConfig]:
    """The Fig 6 runs: every method x S x seed at the profile's :class:`~tvolib.paper.profiles.PCFGScale`
    (the paper: S in {2, 5, 10, 20}, 2000 epochs, 20 seeds, d = 5 and the other
    :class:`tvolib.pcfg.PCFGConfig` defaults)."""
    scale = get_profile(profile).pcfg
    return [PCFGConfig(objective=objective, schedule=schedule, S=S, seed=seed, **scale.config_fields()).validate()
            for S in scale.S_values for objective, schedule in PCFG_METHODS for seed in scale.seeds]


def tail_fraction(profile: Profile | str) -> float:
    """Fraction of the last epochs Fig 6 averages: the paper's 100 of 2000 (0.05) at paper scale,
    a quarter for the short smoke/quick runs (:attr:`PCFGScale.tail_fraction`)."""
    return get_profile(profile).pcfg.tail_fraction


def fig6_pcfg(profile: Profile | str) -> list[Any]:
    """Fig 6 (Appendix D.1): the PCFG sweep, :func:`pcfg_sweep`."""
    return pcfg_sweep(profile)


class WallclockConfigs(list):
    """The wall-clock table's runs (a list, bandit runs first) with ``.bandit`` and ``.grid`` views."""

    @property
    def bandit(self) -> list[Any]:
        """One GP-bandit run per d."""
        return [c for c in self if c.schedule == "gp_bandit"]

    @property
    def grid(self) -> list[Any]:
        """The log-schedule grid: every beta_1 of the grid for every d."""
        return [c for c in self if c.schedule == "log"]


def table_wallclock(profile: Profile | str) -> WallclockConfigs:
    """Appendix D.3: VAE on Omniglot (first S; the paper: S = 10), ``wallclock_epochs`` epochs, one
    seed. The bandit runs once per d in ``wallclock_d_values``; the log schedule runs for every d and
    every beta_1 of ``profile.wallclock_beta1_grid`` (the paper: 20 values in [0.01, 0.9], d = 2..6)."""
    p = get_profile(profile)
    common = dict(model="vae", dataset="omniglot", S=p.S_values[0], seed=p.seeds[0], epochs=p.wallclock_epochs)
    bandit = [tvo_config(p, schedule="gp_bandit", d=d, **common) for d in p.wallclock_d_values]
    grid = [tvo_config(p, schedule="log", d=d, log_beta1=b1, **common)
            for d in p.wallclock_d_values for b1 in p.wallclock_beta1_grid]
    return WallclockConfigs(bandit + grid)


def fig8_random_ablation(profile: Profile | str) -> list[Any]:
    """Fig 8 (Appendix D.4): GP-bandit (Fig 4's runs) versus uniformly random schedules, MNIST and
    Fashion-MNIST, every d and seed, at the first S of the profile (S = 10), and the bias-optimal
    schedule (Fig 4's runs), the schedule that needs no search."""
    p = get_profile(profile)
    return _grid(p, VAE_DATASETS, ("gp_bandit", *PROTOCOL_SERIES, "random", *FIXED_RULE_SERIES),
                 S_values=p.S_values[:1])


def table_permutation(profile: Profile | str) -> list[Any]:
    """Appendix D.4 table: sorted (permutation-invariant, Fig 4's runs) versus unsorted GP on MNIST,
    for ``permutation_S_values`` x ``permutation_d_values`` and every seed; the budgets
    ``profile.permutation_budgets`` are intermediate evaluations of these same runs."""
    p = get_profile(profile)
    return _grid(p, ("mnist",), ("gp_bandit", "gp_bandit_unsorted"), S_values=p.permutation_S_values,
                 d_values=p.permutation_d_values)


def fig9_training_curves(profile: Profile | str) -> list[Any]:
    """Fig 9 (Appendix D.5): training log p(x) curves, S = first S, d in ``curves_d_values``, the
    compared schedules, all four datasets (the runs of Figs 4, 5 and 7)."""
    p = get_profile(profile)
    return _grid(p, VAE_DATASETS + SBN_DATASETS, COMPARED_SCHEDULES, S_values=p.S_values[:1],
                 d_values=p.curves_d_values)


#: The bandit-protocol ablation's variants: label -> GP-bandit options over the profile's. "code"
#: is the authors' code's protocol (Fig 4's runs); "tvolib" this package's (the schedule's default,
#: with the profile's random rounds like the code's); "paper-text" the preset of the text alone (with
#: its own number of random rounds, max(3, d)); the others change one item of the code's protocol.
PROTOCOL_VARIANTS: dict[str, dict[str, Any]] = {
    "code": {},
    "tvolib": {"protocol": "tvolib"},
    "integrand": {"protocol": "integrand"},
    "paper-text": {"protocol": "paper-text", "n_init": None},
    "kappa: Theorem 1": {"kappa": "theorem1"},
    "domain: box": {"arm_domain": "box"},
    "no corner guards": {"corner_guards": False},
    "standardise: global": {"standardize": "global"},
    "burn-in: random arm": {"burn_in_schedule": "arm"},
}


def fig10_bandit_protocol(profile: Profile | str) -> list[Any]:
    """The bandit-protocol ablation: every :data:`PROTOCOL_VARIANTS` on MNIST at the profile's
    showcase d (5) and first S, every seed, beside Fig 4's log, linear, moments and Fig 8's random
    runs (shared configs); then every run of the bandit budget (:func:`fig11_bandit_budget`)."""
    p = get_profile(profile)
    d, S = _showcase_d(p, 5), p.S_values[0]
    fixed = [tvo_config(p, model="vae", dataset="mnist", schedule=sch, d=d, S=S, seed=seed)
             for sch in ("linear", "log", "moments", "random") for seed in p.seeds]
    bandits = []
    for options in PROTOCOL_VARIANTS.values():
        chosen = {k: v for k, v in options.items() if v is not None}
        for seed in p.seeds:
            config = tvo_config(p, model="vae", dataset="mnist", schedule="gp_bandit", d=d, S=S, seed=seed,
                                bandit_options=chosen)
            if options.get("n_init", 0) is None:  # the preset's own number of random rounds
                config = config.replace(schedule_options={k: v for k, v in config.schedule_options if k != "n_init"})
            bandits.append(config)
    return fixed + bandits + fig11_bandit_budget(p)


def protocol_method(config: Any) -> str:
    """The ablation's name for a run: its schedule, or for a GP-bandit run its protocol variant
    (:data:`PROTOCOL_VARIANTS`, matched by its schedule options)."""
    if config.schedule != "gp_bandit":
        return config.schedule
    for label, variant in PROTOCOL_VARIANTS.items():
        chosen = {k: v for k, v in variant.items() if v is not None}
        if chosen and _matches(config, "gp_bandit", chosen):
            return label
    return "code"


#: The bandit-budget figure's series: name -> (schedule, schedule options over the budget's
#: windows). The name is the series' legend entry (:func:`~tvolib.paper.names.schedule_label`);
#: ``gp_bandit`` is the GP bandit under the authors' code's protocol (``protocol="code"``, the
#: schedule's default). One more bandit series is one more line (the options are the schedule's
#: keyword arguments, e.g. ``{"protocol": <preset>}`` for another preset of
#: :mod:`tvolib.bandit.protocol`).
BUDGET_SERIES: dict[str, tuple[str, dict[str, Any]]] = {
    "log": ("log", {}),
    "linear": ("linear", {}),
    "moments": ("moments", {}),
    "random": ("random", {}),
    "gp_bandit": ("gp_bandit", {"protocol": "code"}),
    "gp_bandit_tvolib": ("gp_bandit", {"protocol": "tvolib"}),
    "gp_bandit_integrand": ("gp_bandit", {"protocol": "integrand"}),
    "bias_optimal": ("bias_optimal", {}),
}


def fig11_bandit_budget(profile: Profile | str) -> list[Any]:
    """A budget long enough for the bandit to matter (:class:`~tvolib.paper.profiles.BudgetScale`):
    every :data:`BUDGET_SERIES` on MNIST at d = 5 and the first S, three seeds, the budget's data,
    epochs and evaluation, and for the windowed schedules its window, burn-in and random rounds;
    none when the profile does not run it."""
    p = get_profile(profile)
    b = p.budget
    if b is None:
        return []
    d, S = _showcase_d(p, 5), p.S_values[0]
    windows = {"window": b.window, "burn_in": b.burn_in, "n_init": b.n_init}
    configs = []
    for schedule, extra in BUDGET_SERIES.values():
        for seed in p.seeds[:3]:
            config = tvo_config(p, model="vae", dataset="mnist", schedule=schedule, d=d, S=S, seed=seed,
                                epochs=b.epochs, eval_every=b.eval_every)
            changes: dict[str, Any] = {"n_train": b.n_train, "n_test": b.n_test, "batch_size": b.batch_size}
            if schedule in WINDOWED_SCHEDULES:
                chosen = {k: v for k, v in windows.items()
                          if v is not None and (k != "n_init" or schedule in GP_SCHEDULES)}
                changes["schedule_options"] = {**chosen, "protocol": "code", **extra}  # what the paper ran
            configs.append(config.replace(**changes).validate())
    return configs


def budget_series(config: Any) -> str:
    """The :data:`BUDGET_SERIES` name of a Fig 11 run: the series of its schedule whose options it
    carries (the one with the most options when several match).

    Raises:
        ValueError: no series has this schedule and options.
    """
    options = bandit_options(config)
    matches = [(len(extra), name) for name, (schedule, extra) in BUDGET_SERIES.items()
               if _matches(config, schedule, extra)]
    if not matches:
        raise ValueError(f"no bandit-budget series trains schedule {config.schedule!r} with options {options}; "
                         f"the series: {list(BUDGET_SERIES)}")
    return max(matches)[1]


def budget_bandits(profile: Profile | str) -> list[Any]:
    """The Fig 11 runs of the GP bandit, every bandit series (the long runs Fig 3 adds)."""
    return [c for c in fig11_bandit_budget(profile) if c.schedule in GP_SCHEDULES]


def planned_rounds(config: Any) -> tuple[int, int]:
    """Rounds of a windowed run that close by its last epoch without an early update, and how many
    of them trained an arm chosen by the GP: computed from the schedule's own window rule
    (:meth:`~tvolib.bandit.base.BanditScheduleBase.window_length` from its burn-in) and its
    random rounds, nothing trained (:func:`tvolib.bandit.plan.schedule_plan`). Early updates shorten
    windows, so a run has at least these.

    Returns:
        ``(rounds, gp_rounds)``; ``(0, 0)`` for a schedule without windows.
    """
    if config.schedule not in WINDOWED_SCHEDULES:
        return 0, 0
    schedule = make_schedule(config.schedule, config.d, seed=config.seed, options=dict(config.schedule_options))
    plan = schedule_plan(schedule, config.epochs)
    return plan.rounds, plan.gp_rounds


def fig12_bandit_testbed(profile: Profile | str) -> list[Any]:
    """The bandit's test bed (not in the paper): no training run. Synthetic runs with known optima,
    :func:`tvolib.paper.testbed.testbed_frame` at the profile's :class:`TestbedScale`."""
    get_profile(profile)  # checks the name
    return []


#: The fixed-d series of the adaptive-d figure, every d of the profile (Fig 4's runs, shared).
ADAPTIVE_D_FIXED: tuple[str, ...] = ("log", "moments", "gp_bandit", *PROTOCOL_SERIES)


def adaptive_d_config(profile: Profile | str, dataset: str, seed: int) -> RunConfig:
    """The adaptive-d bandit's run on ``dataset`` (VAE, the profile's first S): ``d`` up to the
    profile's largest, its windows and random rounds, this package's protocol."""
    p = get_profile(profile)
    return tvo_config(p, model="vae", dataset=dataset, schedule="gp_bandit_adaptive", d=max(p.d_values),
                      S=p.S_values[0], seed=seed)


def fig13_adaptive_d(profile: Profile | str) -> list[Any]:
    """The bandit that chooses d (not in the paper; its conclusion names it as future work): one
    run per dataset and seed of :func:`adaptive_d_config` on MNIST and Fashion-MNIST, beside Fig 4's
    runs of :data:`ADAPTIVE_D_FIXED` at every d of the profile and its first S (shared configs)."""
    p = get_profile(profile)
    fixed = _grid(p, VAE_DATASETS, ADAPTIVE_D_FIXED, S_values=p.S_values[:1])
    return fixed + [adaptive_d_config(p, dataset, seed) for dataset in VAE_DATASETS for seed in p.seeds]


#: Every figure/table in notebook order, by stem.
FIGURES: dict[str, Callable[[Profile | str], list[Any]]] = {
    "fig1_tvo_integrand": fig1_tvo_integrand,
    "fig2_reward_surface": fig2_reward_surface,
    "fig3_beta_over_time": fig3_beta_over_time,
    "fig4_vae_mnist_fashion": fig4_vae_mnist_fashion,
    "fig5_sbn_binarized_mnist": fig5_sbn_binarized_mnist,
    "fig6_pcfg": fig6_pcfg,
    "fig7_sbn_omniglot": fig7_sbn_omniglot,
    "fig8_random_ablation": fig8_random_ablation,
    "fig9_training_curves": fig9_training_curves,
    "table_wallclock": table_wallclock,
    "table_permutation": table_permutation,
    "fig10_bandit_protocol": fig10_bandit_protocol,
    "fig11_bandit_budget": fig11_bandit_budget,
    "fig12_bandit_testbed": fig12_bandit_testbed,
    "fig13_adaptive_d": fig13_adaptive_d,
}

#: Former names still accepted by :func:`resolve_figure` (and so by ``python -m tvolib run``).
FIGURE_ALIASES: dict[str, str] = {
    "fig1_integrand": "fig1_tvo_integrand",
    "fig4_vae": "fig4_vae_mnist_fashion",
    "fig5_sbn_mnist": "fig5_sbn_binarized_mnist",
    "fig8_ablation_random": "fig8_random_ablation",
}


def resolve_figure(name: str) -> str:
    """The figure stem for ``name``: a stem, a former name (:data:`FIGURE_ALIASES`) or a unique
    prefix such as ``fig4`` or ``table_wall``; raises ``ValueError`` listing the stems otherwise."""
    key = name.strip().lower().replace("-", "_")
    key = FIGURE_ALIASES.get(key, key)
    if key in FIGURES:
        return key
    matches = [f for f in FIGURES if f.startswith(key) and (len(f) == len(key) or not f[len(key)].isdigit())]
    if len(matches) == 1:
        return matches[0]
    hint = f" (ambiguous: {', '.join(matches)})" if matches else ""
    raise ValueError(f"unknown figure {name!r}{hint}; accepted: all, {', '.join(FIGURES)} (or a unique prefix such as fig4)")


def figure_configs(name: str, profile: Profile | str) -> list[Any]:
    """The configs of figure ``name`` (see :func:`resolve_figure`; ``"all"`` = every figure, deduplicated)."""
    if name.strip().lower() == "all":
        return all_configs(profile)
    return list(FIGURES[resolve_figure(name)](get_profile(profile)))


def all_configs(profile: Profile | str, *, skip_unavailable: bool = False) -> list[Any]:
    """Every figure's configs in notebook order, each distinct config once.

    ``skip_unavailable`` drops figures whose configs raise ``ImportError`` instead of raising.
    """
    seen: dict[tuple[str, str], Any] = {}
    for fn in FIGURES.values():
        try:
            configs = fn(get_profile(profile))
        except ImportError:
            if skip_unavailable:
                continue
            raise
        for c in configs:
            seen.setdefault((c.kind, c.digest()), c)
    return list(seen.values())
