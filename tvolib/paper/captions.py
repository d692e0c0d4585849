"""Captions that state each figure's scale, so a reduced-scale figure is never read as the paper's.

The one-line captions go above the figures and tables; the full text with the departures from
the paper is :meth:`tvolib.paper.profiles.Profile.describe`, shown under each figure.
"""
from __future__ import annotations

import pandas as pd

from tvolib.paper.analysis import require
from tvolib.paper.profiles import Profile, get_profile

__all__ = [
    "FIGURE_TITLES",
    "figure_title",
    "scale_caption",
    "pcfg_scale_caption",
    "pcfg_table_caption",
    "wallclock_caption",
    "permutation_caption",
    "budget_caption",
    "testbed_caption",
]

#: One line per figure, as a paper titles its figures; the scale and protocol go in the caption.
FIGURE_TITLES: dict[str, str] = {
    "fig1_tvo_integrand": "Fig 1. The TVO integrand and its left and right Riemann sums",
    "fig2_reward_surface": "Fig 2. The GP posterior of the reward over beta_1 (d = 2) at three stages",
    "fig3_beta_over_time": "Fig 3. The bandit's betas over training (MNIST, d = 5)",
    "fig4_vae_mnist_fashion": "Fig 4. VAE on MNIST and Fashion-MNIST: test log p(x) and KL against d",
    "fig5_sbn_binarized_mnist": "Fig 5. SBN on binarized MNIST: test log p(x) and KL against d",
    "fig6_pcfg": "Fig 6. PCFG: the model's and the inference network's KLs against S",
    "fig7_sbn_omniglot": "Fig 7. SBN on Omniglot: test log p(x) and KL against d",
    "fig8_random_ablation": "Fig 8. GP-bandit against random schedules",
    "fig9_training_curves": "Fig 9. Training curves",
    "table_wallclock": "Table D.3. The bandit against the grid-searched log schedule, with wall-clock time",
    "table_permutation": "Table D.4. Sorted (permutation-invariant) against unsorted GP",
    "fig10_bandit_protocol": "Fig 10 (not in the paper). The bandit's protocol, one item at a time",
    "fig11_bandit_budget": "Fig 11 (not in the paper). Schedules over a long budget (MNIST, d = 5)",
    "fig12_bandit_testbed": "Fig 12 (not in the paper). The bandit's test bed, where the best schedule is known",
    "fig13_adaptive_d": "Fig 13 (not in the paper). A bandit that chooses d",
}


def figure_title(stem: str, profile: Profile | str | None) -> str:
    """The figure's one-line title and its profile.

    Example:
        >>> figure_title("fig8_random_ablation", "quick")
        'Fig 8. GP-bandit against random schedules (profile quick)'
    """
    if stem not in FIGURE_TITLES:
        raise KeyError(f"no title for figure {stem!r}; figures: {', '.join(FIGURE_TITLES)}")
    return f"{FIGURE_TITLES[stem]} (profile {get_profile(profile).name})"


#: The PCFG's scale in the paper (Appendix D.1), quoted next to reduced scales.
PAPER_PCFG_SCALE = "paper: 2000 epochs, 20 seeds, S in {2, 5, 10, 20}"


def scale_caption(profile: Profile | str | None, *, epochs: int | None = None, extra: str = "") -> str:
    """One line stating a profile's scale: subset sizes, epochs (``epochs`` overrides the
    profile's, for the wall-clock table), batch, seeds and the test evaluation; ``extra`` is
    appended after a semicolon.

    Example:
        >>> scale_caption("paper")
        "profile 'paper': full datasets, 10000 epochs, batch 1000, 5 seeds, test log p(x) by IWAE-5000"
    """
    p = get_profile(profile)
    data = "full datasets" if p.n_train is None else f"{p.n_train} train / {p.n_test} test examples"
    seeds = f"{len(p.seeds)} seed{'s' if len(p.seeds) > 1 else ''}"
    line = (f"profile '{p.name}': {data}, {epochs or p.epochs} epochs, batch {p.batch_size}, {seeds}, "
            f"test log p(x) by IWAE-{p.eval_S}")
    if p.name != "paper":
        line += " (reduced scale, see notebook)"
    return line + (f"; {extra}" if extra else "")


def _values(frame: pd.DataFrame, column: str) -> str:
    vals = sorted(set(frame[column].dropna().tolist()))
    return f"{vals[0]:g}" if len(vals) == 1 else "{" + ", ".join(f"{v:g}" for v in vals) + "}"


def pcfg_scale_caption(configs: pd.DataFrame, profile: str | None = None) -> str:
    """One line stating the scale of PCFG runs from a frame of their config fields: sentences,
    epochs, batch, learning rate, network, d, seeds and S values; with ``profile`` other than
    ``"paper"``, the paper's scale for comparison."""
    need = ["epochs", "n_train", "n_test", "batch_size", "lr", "hidden_dim", "S", "seed"]
    require(configs, need, "pcfg_scale_caption")
    if configs.empty:
        raise ValueError("pcfg_scale_caption: no runs")
    tvo = configs[configs["objective"] == "tvo"] if "objective" in configs.columns else configs
    d = f", TVO d = {_values(tvo, 'd')}" if "d" in configs.columns and len(tvo) else ""
    words = (f" (test sentences <= {_values(configs, 'eval_max_words')} words)"
             if "eval_max_words" in configs.columns else "")
    seeds = configs["seed"].nunique()
    S = ", ".join(str(int(s)) for s in sorted(configs["S"].unique()))
    text = (f"{_values(configs, 'n_train')} training / {_values(configs, 'n_test')} test sentences{words}, "
            f"{_values(configs, 'epochs')} epochs, batch {_values(configs, 'batch_size')}, Adam lr "
            f"{_values(configs, 'lr')}, GRU {_values(configs, 'hidden_dim')} units{d}, {seeds} "
            f"seed{'s' if seeds > 1 else ''}, S in {{{S}}}")
    if profile is not None:
        text = f"profile '{profile}': {text}"
        if profile != "paper":
            text += f" (reduced scale; {PAPER_PCFG_SCALE})"
    return text


def pcfg_table_caption(scale: str) -> str:
    """The caption of Fig 6's table, ``scale`` from :func:`pcfg_scale_caption`."""
    return ("Fig 6 numbers (PCFG, Appendix D.1): median over seeds at each epoch, then the mean over the "
            f"tail epochs shown; lower KL is better, q mass on parses: higher is better. {scale}")


def wallclock_caption(profile: Profile | str | None, dataset_label: str, S: int) -> str:
    """The caption of the wall-clock table (Appendix D.3)."""
    p = get_profile(profile)
    return (f"Wall-clock table (Appendix D.3), VAE on {dataset_label}, S = {S}, {p.wallclock_epochs} epochs; "
            f"bandit for d in {list(p.wallclock_d_values)}, log schedule over {p.wallclock_grid_size} beta_1 in "
            f"{list(p.wallclock_beta1_range)} per d. " + scale_caption(p, epochs=p.wallclock_epochs))


def permutation_caption(profile: Profile | str | None) -> str:
    """The caption of the permutation table (Appendix D.4); its column names state the budgets."""
    p = get_profile(profile)
    return ("Permutation-invariance table (Appendix D.4): test log p(x) (nats, mean over "
            f"{len(p.seeds)} seed(s)) after T epochs, VAE on MNIST. " + scale_caption(p))


def budget_caption(profile: Profile | str | None, *, extra: str = "") -> str:
    """One line stating the bandit budget's scale (Fig 11, :meth:`~tvolib.paper.profiles.BudgetScale.describe`),
    its seeds and test evaluation; ``extra`` is appended after a semicolon.

    Example:
        >>> budget_caption("gpu").split(":")[0]
        "profile 'gpu', bandit budget (Fig 11, and the long runs of Figs 3 and 10)"
    """
    p = get_profile(profile)
    if p.budget is None:
        raise ValueError(f"profile {p.name!r} sets no bandit budget (Profile.budget is None)")
    seeds = min(len(p.seeds), 3)
    line = (f"profile '{p.name}', {p.budget.describe()}; {seeds} seed{'s' if seeds > 1 else ''}, test log p(x) by "
            f"IWAE-{p.eval_S}")
    if p.name != "paper":
        line += " (reduced scale, see notebook)"
    return line + (f"; {extra}" if extra else "")


def testbed_caption(profile: Profile | str | None) -> str:
    """One line stating the test bed's scale (:class:`~tvolib.paper.profiles.TestbedScale`).

    Example:
        >>> testbed_caption("smoke").split(";")[0]
        "profile 'smoke', the bandit's test bed (synthetic runs, known optima): 3 cases"
    """
    scale = get_profile(profile).testbed
    epochs = "each case's 160 epochs" if scale.epochs is None else f"{scale.epochs} epochs"
    return (f"profile '{get_profile(profile).name}', the bandit's test bed (synthetic runs, known optima): "
            f"{len(scale.cases)} cases; {scale.seeds} seed{'s' if scale.seeds > 1 else ''} each, {epochs}, "
            "first window 2 epochs (+1 every 10 rounds); metrics over the second half's arms")
