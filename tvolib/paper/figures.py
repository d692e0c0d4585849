"""One call per figure: run (or read from the cache) its sweep, summarise, draw, save.

Each notebook is ``figure("<stem>", profile=..., ...)``; the stem is shared by the notebook
(``notebooks/NN_<stem>.ipynb``), the sweep (:data:`tvolib.paper.sweeps.FIGURES`) and the output
files (``figures/<stem>.png``, ``.pdf``; tables ``.csv``, ``.md``).

Example:
    >>> result = figure("fig4_vae_mnist_fashion", profile="smoke")   # doctest: +SKIP
    >>> result.table                                                 # doctest: +SKIP
"""
from __future__ import annotations

import os
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from matplotlib.figure import Figure

from tvolib import data, paths, runs
from tvolib.bandit.recommendation import RECOMMENDATION_TOLERANCE
from tvolib.models.pcfg import load_grammar
from tvolib.paper import (analysis, bandit_analysis, captions, claims, integrand, pcfg_analysis, results,
                          results_page, tables, testbed)
from tvolib.paper.names import MODEL_LABELS, PCFG_COLUMN_NAMES, TRAINING_PHASES, pcfg_method_label, schedule_label
from tvolib.paper.profiles import Profile, get_profile
from tvolib.paper.sweeps import (
    FIGURES,
    GP_SCHEDULES,
    PROTOCOL_SERIES,
    PROTOCOL_VARIANTS,
    budget_series,
    fig11_bandit_budget,
    planned_rounds,
    protocol_method,
    resolve_figure,
)
from tvolib.training.schedule import VARIABLE_D_SCHEDULES
from tvolib.training.pcfg_levels import length_cut_ml_floor, uniform_level
from tvolib.training.run_folder import check_writable
from tvolib.plotting import (
    IntegrandPanel,
    plot_adaptive_d,
    plot_bandit_budget,
    plot_betas_over_time,
    plot_integrand,
    plot_metric_vs_d,
    plot_pcfg,
    plot_protocol_ablation,
    plot_reward_surface,
    plot_testbed,
    plot_training_curves,
    save_figure,
    save_table,
)
from tvolib.plotting.style import message_figure

__all__ = ["FigureResult", "BUILDERS", "NOTEBOOK_PARAMETERS", "figure", "notebook_parameters", "pcfg_reference_levels"]

#: The names a notebook's parameters cell defines (papermill's ``-p NAME VALUE`` overrides them).
NOTEBOOK_PARAMETERS = ("profile", "executor", "data_root", "results_root", "figures_dir")
#: Names IPython puts in a notebook's namespace itself.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}

@dataclass
class _Inputs:
    """What every builder gets: the figure's stem, profile, configs, run frame and folders."""

    name: str
    profile: Profile
    configs: list[Any]
    frame: pd.DataFrame
    data_root: str | os.PathLike[str] | None
    results_root: str | os.PathLike[str] | None
    figures_dir: str | os.PathLike[str] | None


@dataclass
class FigureResult:
    """A figure as a notebook shows it: the ``figure`` (None for the tables), the ``table`` of the
    numbers drawn (or the paper's table), the ``caption``, a ``scale`` paragraph, the saved
    ``paths``, the run ``frame`` and figure-specific ``details``. Displays as Markdown in Jupyter."""

    name: str
    frame: pd.DataFrame
    figure: Figure | None
    table: pd.DataFrame | None
    caption: str
    scale: str
    paths: list[Path]
    details: dict[str, Any] = field(default_factory=dict)
    claims: list[claims.ClaimResult] = field(default_factory=list)

    def _repr_markdown_(self) -> str:
        table = "" if self.table is None else "\n\n" + analysis.markdown_table(self.table, floatfmt=".4f")
        return f"{self.caption}{table}\n\n**Scale.** {self.scale}"

    def verdict(self) -> MarkdownText:
        """The figure's claims, the numbers that test them and the verdicts, by the results page's rule
        (:mod:`tvolib.paper.verdict`), computed from the table the figure saved."""
        return MarkdownText(results_page.claims_markdown(self.claims))


class MarkdownText(str):
    """Text that Jupyter shows as Markdown (without importing IPython, not a dependency of the package)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def _result(inputs: _Inputs, fig: Figure | None, table: pd.DataFrame | None, caption: str,
            scale: str | None = None, floatfmt: str = ".3f", **details: Any) -> FigureResult:
    """Save the figure (if any) and its numbers under the stem: ``<stem>.png|pdf``, ``<stem>.csv`` and
    ``<stem>.md`` (the one-line title, the caption, the table)."""
    title = captions.figure_title(inputs.name, inputs.profile)
    saved = [] if fig is None else save_figure(fig, inputs.name, inputs.figures_dir)
    if table is not None:
        saved += save_table(table, inputs.name, inputs.figures_dir, caption=f"**{title}.** {caption}",
                            floatfmt=floatfmt)
    return FigureResult(inputs.name, inputs.frame, fig, table, caption, scale or inputs.profile.describe(), saved,
                        details)


def _title(inputs: _Inputs) -> str:
    return captions.figure_title(inputs.name, inputs.profile)


def _fig1(inputs: _Inputs) -> FigureResult:
    config = inputs.configs[0]
    schedule = results.last_schedule(config, inputs.results_root)
    model, x, data_label = results.trained_model_and_test_data(config, 100, data_root=inputs.data_root,
                                                               results_root=inputs.results_root)
    grid = integrand.integrand_grid(schedule, 201)
    label = (f"{MODEL_LABELS.get(config.model, config.model)} on {data_label} after {config.epochs} epochs\n"
             f"({schedule_label(config.schedule)} schedule, d={config.d}, S={config.S}; SNIS with "
             f"{config.eval_S} samples, {x.shape[0]} test points)")
    curves = [integrand.linear_gaussian_curve(grid), integrand.model_curve(model, x, grid, S=config.eval_S, label=label)]
    panels = []
    for curve in curves:
        sums = integrand.riemann_sums(curve.beta, curve.values, schedule)
        panels.append(IntegrandPanel(curve.label, curve.beta, curve.values, sums.nodes, sums.heights, sums.left,
                                     sums.right, sums.elbo, sums.area if curve.log_px is None else curve.log_px,
                                     curve.area_label, curve.estimate))
    caption = captions.scale_caption(inputs.profile)
    fig = plot_integrand(panels, title=_title(inputs))
    table = pd.DataFrame([{"panel": p.label.split("\n")[0], "exact": curve.log_px is not None, "ELBO": p.elbo,
                           "left sum (TVO)": p.left, "area": p.area, "right sum": p.right}
                          for p, curve in zip(panels, curves)])
    return _result(inputs, fig, table, caption, floatfmt=".4f", schedule=schedule)


def _fig2(inputs: _Inputs) -> FigureResult:
    rounds_log = runs.load_schedule_history(inputs.configs[0], inputs.results_root)
    positions = analysis.stage_rounds(rounds_log, inputs.profile.reward_surface_epochs) if len(rounds_log) else []
    caption = captions.scale_caption(inputs.profile, extra="one run (the first seed); the posterior after the "
                                     "rounds that end nearest the profile's stage epochs")
    panels = results.reward_panels(rounds_log, positions)
    fig = plot_reward_surface(analysis.reward_observations(rounds_log), panels, title=_title(inputs))
    return _result(inputs, fig, tables.reward_stage_table(panels), caption)


def _budgets(inputs: _Inputs) -> dict[str, tuple[bool, list[Any]]]:
    """The figure's configs by budget: label -> (whether these are the bandit budget's runs, the
    configs); the profile's runs first, then Fig 11's."""
    long = {c.digest() for c in fig11_bandit_budget(inputs.profile)}
    groups: dict[str, tuple[bool, list[Any]]] = {}
    for config in inputs.configs:
        is_long = config.digest() in long
        label = f"{config.epochs} epochs" + (" (bandit budget)" if is_long else "")
        groups.setdefault(label, (is_long, []))[1].append(config)
    return groups


def _fig3(inputs: _Inputs) -> FigureResult:
    """Fig 3: every seed's arms over training (crosses: random rounds); its numbers, the GP arms' mean
    interior point per seed and third; one column per budget (the profile's runs, then the bandit
    budget's, a column per bandit series)."""
    config = inputs.configs[0]
    extra = f"MNIST, d = {config.d}, S = {config.S}, seeds pooled"
    columns: dict[str, list[Any]] = {}  # a column per budget, and per bandit series of the bandit budget
    for budget, (long, configs) in _budgets(inputs).items():
        for config in configs:
            series = budget_series(config) if long else "gp_bandit"
            columns.setdefault(budget if series == "gp_bandit" else f"{budget}: {schedule_label(series)}",
                               []).append(config)
    points, phases, summaries = [], [], []
    for budget, configs in columns.items():
        rounds = results.collect_schedule_histories(configs, inputs.results_root)
        if rounds.empty:
            continue
        rounds = bandit_analysis.with_chooser(rounds, ["seed"])
        points.append(analysis.betas_by_phase(rounds, "arm", keep=("seed", "chosen_by")).assign(budget=budget))
        epochs = rounds["epoch"].to_numpy(dtype=float)
        phases.append(tables.phase_beta_table(rounds.assign(budget=budget,
                                                            phase=analysis.training_phase(epochs, epochs.max()))))
        summary = bandit_analysis.arm_summary(rounds, ["seed"])
        if "test_log_px" in inputs.frame:
            finals = inputs.frame.set_index("digest")["test_log_px"]
            summary["test_log_px"] = summary["seed"].map({c.seed: finals.get(c.digest()) for c in configs})
        summaries.append(summary.assign(budget=budget))
        gp, total = int(summary["gp_rounds"].sum()), int(summary["rounds"].sum())
        extra += (f"; {budget}: {gp} of {total} rounds' arms chosen by the GP, "
                  f"{bandit_analysis.degenerate_share(rounds):.0%} of them degenerate")
    extra += (" (crosses: random rounds; degenerate: all interior points within 0.01 of each other, or two or "
              "more on a box edge)")
    if len(columns) > 1 and inputs.profile.budget is not None:
        extra += f"; the {inputs.profile.budget.describe()}"
    points = pd.concat(points, ignore_index=True) if points else analysis.betas_by_phase(pd.DataFrame(), "arm")
    table = pd.concat(phases, ignore_index=True) if phases else tables.phase_beta_table(
        pd.DataFrame(columns=["budget", "seed", "phase", "source", "next_arm"]))
    caption = captions.scale_caption(inputs.profile, extra=extra)
    fig = plot_betas_over_time(points, title=_title(inputs))
    arms = pd.concat(summaries, ignore_index=True) if summaries else None
    return _result(inputs, fig, table, caption, arm_summary=arms)


def _metric_vs_d(inputs: _Inputs, schedules: list[str] | None = None) -> FigureResult:
    """Figs 4, 5, 7 and 8: test log p(x) and KL versus d per schedule (and protocol series)."""
    summary = analysis.summarise_by_schedule(analysis.with_series(inputs.frame))
    labels = results.dataset_labels(inputs.frame, inputs.data_root)
    caption = captions.scale_caption(inputs.profile)
    fig = plot_metric_vs_d(summary, schedules=schedules, dataset_labels=labels, title=_title(inputs))
    return _result(inputs, fig, summary, caption)


def _fig8(inputs: _Inputs) -> FigureResult:
    """Fig 8: GP-bandit versus random schedules (the random ones drawn first, as the paper)."""
    return _metric_vs_d(inputs, schedules=["random", "gp_bandit", *PROTOCOL_SERIES, "bias_optimal"])


def pcfg_reference_levels(config: Any) -> list[tuple[str, float]]:
    """Fig 6's reference levels of ``kl_p`` for a PCFG config, computed exactly: the uniform theta's
    KL (the value at initialisation with ``theta_init="uniform"``) and the floor, the KL of the
    maximum-likelihood theta of the true grammar's trees cut at ``train_max_words`` words
    (:mod:`tvolib.training.pcfg_levels`), both in the config's ``kl_direction``."""
    grammar = load_grammar(config.grammar)
    uniform = uniform_level(grammar, config.kl_direction)
    floor = length_cut_ml_floor(grammar, config.train_max_words, config.kl_direction)
    return [(f"uniform theta ({uniform:.4f})", uniform),
            (f"floor: ML theta of trees <= {config.train_max_words} words ({floor:.2g})", floor)]


def _fig6(inputs: _Inputs) -> FigureResult:
    histories = results.collect_histories(inputs.configs, inputs.results_root)
    levels = pcfg_reference_levels(inputs.configs[0])
    scale = inputs.profile.pcfg
    summary = pcfg_analysis.pcfg_summary(histories, tail_fraction=scale.tail_fraction)
    curves = pcfg_analysis.pcfg_curves(histories, max(int(s) for s in summary["S"]))
    table = pcfg_analysis.pcfg_table(histories, tail_fraction=scale.tail_fraction)
    caption = captions.pcfg_scale_caption(results.config_frame(inputs.configs), inputs.profile.name)
    caption += (f"; dotted: KL(p_theta || p_true) of a uniform theta, {levels[0][1]:.4f}; dash-dotted: the floor "
                f"that the length cut leaves, {levels[1][1]:.2g} (exact)")
    fig = plot_pcfg(summary, curves, tail_fraction=scale.tail_fraction, title=_title(inputs),
                    reference_levels={"kl_p": levels})
    table = _with_seed_errors(table, histories, scale.tail_fraction)
    scale_text = (f"{caption}. The sweep (methods x S x seeds) is `tvolib.paper.sweeps.pcfg_sweep`; "
                  f"{len(inputs.configs)} runs.")
    return _result(inputs, fig, table, captions.pcfg_table_caption(caption), scale=scale_text, floatfmt=".4f")


def _with_seed_errors(table: pd.DataFrame, histories: pd.DataFrame, tail_fraction: float) -> pd.DataFrame:
    """Fig 6's table with KL(p_theta || p_true)'s mean and standard error over seeds (each seed's tail
    mean), the numbers its claim is checked on."""
    histories = pcfg_analysis.with_method(histories)
    tail = max(1, round(tail_fraction * int(histories["epoch"].max())))
    seeds = tables.seed_tail_table(histories, "kl_p", tail)
    seeds["method"] = [pcfg_method_label(m) for m in seeds["method"]]
    seeds = seeds.set_index(["S", "method"])
    name = PCFG_COLUMN_NAMES["kl_p"]
    return table.assign(**{f"{name} seed mean": seeds["seed_mean"], f"{name} seed s.e.": seeds["seed_sem"]})


def _fig9(inputs: _Inputs) -> FigureResult:
    histories = results.collect_histories(inputs.configs, inputs.results_root)
    curves = analysis.training_curves(histories)
    burn_in = inputs.profile.bandit_burn_in
    caption = captions.scale_caption(inputs.profile, extra=(
        f"curves: the first seed's training IWAE; table: epochs after the {burn_in}-epoch burn-in whose training "
        "IWAE fell below the epoch before (drops), per run, mean ± s.e. over seeds"))
    fig = plot_training_curves(curves, dataset_labels=results.dataset_labels(histories, inputs.data_root),
                               title=_title(inputs))
    return _result(inputs, fig, tables.drop_table(histories, burn_in), caption)


def _table_wallclock(inputs: _Inputs) -> FigureResult:
    table = analysis.wallclock_table(inputs.frame)
    label = results.dataset_labels(inputs.frame, inputs.data_root)["omniglot"]
    caption = captions.wallclock_caption(inputs.profile, label, inputs.configs[0].S)
    return _result(inputs, None, table, caption)


def _table_permutation(inputs: _Inputs) -> FigureResult:
    histories = results.collect_histories(inputs.configs, inputs.results_root)
    rounds_log = results.collect_schedule_histories(inputs.configs, inputs.results_root)
    table = analysis.permutation_table(histories, inputs.profile.permutation_budgets, rounds=rounds_log, sem=True)
    caption = captions.permutation_caption(inputs.profile)
    return _result(inputs, None, table, caption)


def _run_rows(configs: list[Any], method: Callable[[Any], str],
              results_root: str | os.PathLike[str] | None) -> pd.DataFrame:
    """One row per run: its ``method``, seed, final test log p(x) and KL, the arms its GP chose and
    how many of them were degenerate (:func:`~tvolib.paper.bandit_analysis.protocol_ablation_table`'s input)."""
    rows = []
    for config in configs:
        final = runs.load_final(config, results_root)
        rounds = runs.load_schedule_history(config, results_root)
        bandit = len(rounds) > 0 and "source" in rounds  # fixed schedules log no rounds
        chosen = rounds[rounds["source"].isin(bandit_analysis.GP_SOURCES)] if bandit else rounds.iloc[:0]
        share = bandit_analysis.degenerate_share(rounds) if len(chosen) else 0.0
        rows.append({"method": method(config), "seed": config.seed, "test_log_px": final["test_log_px"],
                     "test_kl": final["test_kl"], "gp_rounds": len(chosen), "degenerate_gp_rounds": share * len(chosen)})
    return pd.DataFrame(rows)


def _ablation_method(config: Any, long: bool) -> str:
    """Fig 10's name for a run: its protocol variant or schedule; a bandit budget run its series
    (the code's and this package's protocols named as in the profile's rows)."""
    series = budget_series(config) if long else "gp_bandit"
    return protocol_method(config) if series in ("gp_bandit", *PROTOCOL_SERIES) else series


def _fig10(inputs: _Inputs) -> FigureResult:
    """The bandit-protocol ablation: each protocol variant beside the fixed schedules and random arms,
    one row per budget (the profile's runs, then the bandit budget's)."""
    tables = []
    for budget, (long, configs) in _budgets(inputs).items():
        frame = _run_rows(configs, lambda c: _ablation_method(c, long), inputs.results_root)
        order = ["log", "linear", "moments", "random", "bias_optimal", *PROTOCOL_VARIANTS]
        order += [m for m in dict.fromkeys(frame["method"]) if m not in order]
        tables.append(bandit_analysis.protocol_ablation_table(frame, order).assign(budget=budget))
    table = pd.concat(tables, ignore_index=True)
    fixed = ("log", "linear", "moments", "random", "bias_optimal")
    table["method"] = [f"{schedule_label(m)} (schedule)" if m in fixed else m for m in table["method"]]
    table = table[["budget", *(c for c in table.columns if c != "budget")]]
    config = inputs.configs[0]
    caption = captions.scale_caption(inputs.profile, extra=(
        f"MNIST, d = {config.d}, S = {config.S}; GP bandit under the authors' code's protocol ('code'), the "
        "paper's text alone ('paper-text') and one item of the code's protocol changed at a time"
        + (f"; below, the {inputs.profile.budget.describe()}" if len(tables) > 1 else "")))
    fig = plot_protocol_ablation(table, title=_title(inputs))
    return _result(inputs, fig, table, caption)


def _fig11(inputs: _Inputs) -> FigureResult:
    """The bandit's budget: test log p(x) against epochs over a run long enough for the GP to matter,
    the bandit's arms and the share of its degenerate arms per third of training."""
    p = inputs.profile
    if not inputs.configs:
        caption = (f"Not run at profile '{p.name}': the bandit-budget figure trains d = 5, S = 10 on MNIST, 3 seeds "
                   "per schedule, for many bandit rounds; this profile sets no budget for it.")
        fig = message_figure(caption, _title(inputs))
        return _result(inputs, fig, None, caption)
    root = inputs.results_root
    series: dict[str, list[Any]] = {}
    for config in inputs.configs:
        series.setdefault(budget_series(config), []).append(config)
    histories = pd.concat([results.collect_histories(configs, root).assign(schedule=name)
                           for name, configs in series.items()], ignore_index=True)
    curves = analysis.training_curves(histories, "test_log_px", facets=(), seed=None)
    bandits = {name: configs for name, configs in series.items() if configs[0].schedule in GP_SCHEDULES}
    rounds = pd.concat([bandit_analysis.with_chooser(results.collect_schedule_histories(configs, root), ["seed"])
                        .assign(schedule=name) for name, configs in bandits.items()], ignore_index=True)
    arms = analysis.betas_by_phase(rounds, "arm", keep=("seed", "chosen_by", "schedule"))
    degenerate = bandit_analysis.degenerate_by_phase(rounds, ["schedule"])
    table = bandit_analysis.protocol_ablation_table(_run_rows(inputs.configs, budget_series, root), list(series))
    shares = degenerate.pivot(index="schedule", columns="phase", values="degenerate_share")
    for phase in TRAINING_PHASES:
        table[f"degenerate_share_{phase}"] = table["method"].map(shares[phase])
    gp_rounds = min(planned_rounds(configs[0])[1] for configs in bandits.values()) if bandits else 0
    caption = captions.budget_caption(p, extra=(
        f"GP-bandit: the authors' code's protocol; at least {gp_rounds} rounds per run train an arm chosen by the "
        "GP (window rule, before early updates); crosses: random rounds; the paper's permutation table gives the "
        "bandit -91.49 at 1000 epochs (full MNIST, d = 5, S = 10)"))
    fig = plot_bandit_budget(curves, arms, degenerate, title=_title(inputs))
    return _result(inputs, fig, table, caption)


def _fig12(inputs: _Inputs) -> FigureResult:
    """The bandit's test bed: each protocol's regret and degenerate arms on synthetic runs with known
    optima (:mod:`tvolib.bandit.testbed`), beside random arms of the same domain."""
    frame = testbed.testbed_frame(inputs.profile, inputs.results_root)
    summary = bandit_analysis.testbed_summary(frame)
    caption = captions.testbed_caption(inputs.profile)
    fig = plot_testbed(summary, title=_title(inputs))
    return _result(inputs, fig, summary, caption, runs=frame)


def _fig13(inputs: _Inputs) -> FigureResult:
    """The bandit that chooses d: test log p(x) and KL beside the fixed-d schedules at every d, the
    d it chose over training, and a table with each method's best d in hindsight and its compute."""
    frame = analysis.with_series(inputs.frame)
    is_adaptive = frame["schedule"].isin(VARIABLE_D_SCHEDULES)
    summary = analysis.summarise_by_schedule(frame[~is_adaptive], by=("dataset", "S", "d", "schedule"))
    band = analysis.summarise_by_schedule(frame[is_adaptive], by=("dataset", "S", "schedule"))
    adaptive = [c for c in inputs.configs if c.schedule in VARIABLE_D_SCHEDULES]
    rounds = bandit_analysis.d_over_training(results.collect_schedule_histories(adaptive, inputs.results_root))
    table = bandit_analysis.adaptive_d_table(frame)
    table["schedule"] = table["schedule"].map(schedule_label)
    config = adaptive[0]
    caption = captions.scale_caption(inputs.profile, extra=(
        f"VAE, S = {config.S}; GP-bandit (adaptive d) chooses d in [2, {config.d}] every window by Thompson "
        "sampling (this package's protocol; one run per seed; dashed: the d it recommends, the smallest whose "
        f"lower bound, mean - sd, is not {RECOMMENDATION_TOLERANCE:g} posterior sd below the best), the others "
        "train at each fixed d (one run per d and seed); GP-bandit: the "
        "authors' code's protocol; the table gives each schedule's best d in hindsight and the minutes its grid "
        "over d costs per seed"))
    fig = plot_adaptive_d(summary, band, rounds, dataset_labels=results.dataset_labels(inputs.frame, inputs.data_root),
                          title=_title(inputs))
    return _result(inputs, fig, table, caption, rounds=rounds)


#: How each figure stem becomes its outputs.
BUILDERS: dict[str, Callable[[_Inputs], FigureResult]] = {
    "fig1_tvo_integrand": _fig1,
    "fig2_reward_surface": _fig2,
    "fig3_beta_over_time": _fig3,
    "fig4_vae_mnist_fashion": _metric_vs_d,
    "fig5_sbn_binarized_mnist": _metric_vs_d,
    "fig6_pcfg": _fig6,
    "fig7_sbn_omniglot": _metric_vs_d,
    "fig8_random_ablation": _fig8,
    "fig9_training_curves": _fig9,
    "table_wallclock": _table_wallclock,
    "table_permutation": _table_permutation,
    "fig10_bandit_protocol": _fig10,
    "fig11_bandit_budget": _fig11,
    "fig12_bandit_testbed": _fig12,
    "fig13_adaptive_d": _fig13,
}


def notebook_parameters(namespace: dict[str, Any]) -> dict[str, Any]:
    """The notebook parameters in ``namespace`` (a notebook's ``globals()``), checked.

    papermill only warns about a parameter that the parameters cell does not define and injects
    it anyway, so ``-p profil smoke`` would silently run the default profile: any other plain value
    (not a module, function or class, not IPython's own) is refused here, naming it.

    Returns:
        ``{name: value}`` for :data:`NOTEBOOK_PARAMETERS`, for ``figure(stem, **parameters)``.

    Raises:
        ValueError: an unknown parameter name, with the accepted ones, or an empty value.
    """
    unknown = sorted(
        name for name, value in namespace.items()
        if not name.startswith("_") and name not in NOTEBOOK_PARAMETERS and name not in _IPYTHON_NAMES
        and not callable(value) and not isinstance(value, types.ModuleType)
    )
    if unknown:
        raise ValueError(f"unknown notebook parameter(s) {unknown}; accepted: {', '.join(NOTEBOOK_PARAMETERS)} "
                         "(e.g. papermill -p profile smoke)")
    empty = [name for name in NOTEBOOK_PARAMETERS if namespace.get(name) == ""]
    if empty:
        raise ValueError(f"notebook parameter {empty[0]} is '': give a folder, or None for the environment's "
                         "setting (an empty value is never the default)")
    return {name: namespace.get(name) for name in NOTEBOOK_PARAMETERS}


def figure(
    name: str,
    *,
    profile: Profile | str | None = None,
    executor: str | None = None,
    data_root: str | os.PathLike[str] | None = None,
    results_root: str | os.PathLike[str] | None = None,
    figures_dir: str | os.PathLike[str] | None = None,
) -> FigureResult:
    """Run figure ``name``'s sweep (cached runs are read, the plan is printed), then summarise,
    draw and save it under its stem.

    Args:
        name: a figure stem (:data:`tvolib.paper.sweeps.FIGURES`), a former name or a unique prefix.
        profile: the scale; None: ``$TVOLIB_PROFILE``, else ``quick``.
        executor: ``local``, ``slurm``, ``submitit-local`` or ``debug``; None: ``$TVOLIB_EXECUTOR``,
            else ``local``.
        data_root: datasets; None: ``$TVOLIB_DATA``, else the user cache.
        results_root: run folders; None: ``$TVOLIB_RESULTS``, else ``<repo>/results``.
        figures_dir: outputs; None: ``$TVOLIB_FIGURES``, else ``<repo>/figures`` -- at profile
            ``smoke`` ``<repo>/.cache/figures-smoke`` (a smoke run never writes into the committed
            figures unless they are named). ``""`` for any folder is an error, never the default.

    Returns:
        A :class:`FigureResult`.
    """
    stem = resolve_figure(name)
    p = get_profile(profile)
    paths.results_root(results_root)  # an empty path is refused before anything runs
    if data_root is not None:
        data.data_root(data_root)
    folder = paths.figures_path(figures_dir, scratch=p.name == "smoke")  # smoke: never the committed figures/
    check_writable(folder, what="figures folder",
                   advice="choose another (figures_dir or $TVOLIB_FIGURES)")  # before the sweep runs
    configs = list(FIGURES[stem](p))
    frame = (runs.run_configs(configs, executor=executor, data_root=data_root, results_root=results_root)
             if configs else pd.DataFrame())  # a figure this profile does not run
    result = BUILDERS[stem](_Inputs(stem, p, configs, frame, data_root, results_root, folder))
    result.claims = results_page.figure_claims(stem, folder)
    results_page.write_results_page(folder)
    return result
