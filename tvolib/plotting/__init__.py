"""Drawing the paper's figures: one style, one ``plot_*`` function per figure type, saving.

Draws only: every function takes frames or small records already summarised by
:mod:`tvolib.paper` (no torch, no aggregation here).

================  ==========================================================================
module            figures
================  ==========================================================================
``style``         the seaborn style, fixed colours/markers, shared legend, empty-figure message
``integrand``     Fig 1 (:func:`plot_integrand`)
``bandit``        Figs 2, 3, 10, 11 (:func:`plot_reward_surface`, :func:`plot_betas_over_time`,
                  :func:`plot_protocol_ablation`, :func:`plot_bandit_budget`)
``metrics``       Figs 4, 5, 7, 8 (:func:`plot_metric_vs_d`) and Fig 9 (:func:`plot_training_curves`)
``pcfg_kl``       Fig 6 (:func:`plot_pcfg`)
``testbed``       Fig 12, the bandit's test bed (:func:`plot_testbed`)
``adaptive``      Fig 13, the bandit that chooses d (:func:`plot_adaptive_d`)
``save``          :func:`save_figure` (PDF + PNG) and :func:`save_table` (CSV + Markdown)
================  ==========================================================================
"""
from tvolib.plotting.adaptive import plot_adaptive_d
from tvolib.plotting.bandit import (
    RewardPanel,
    plot_bandit_budget,
    plot_betas_over_time,
    plot_protocol_ablation,
    plot_reward_surface,
)
from tvolib.plotting.integrand import IntegrandPanel, plot_integrand
from tvolib.plotting.metrics import plot_metric_vs_d, plot_training_curves
from tvolib.plotting.pcfg_kl import plot_pcfg
from tvolib.plotting.save import save_figure, save_table
from tvolib.plotting.testbed import plot_testbed
from tvolib.plotting.style import pcfg_palette, schedule_markers, schedule_palette, set_style

__all__ = [
    "IntegrandPanel",
    "RewardPanel",
    "pcfg_palette",
    "plot_adaptive_d",
    "plot_bandit_budget",
    "plot_betas_over_time",
    "plot_integrand",
    "plot_metric_vs_d",
    "plot_pcfg",
    "plot_protocol_ablation",
    "plot_reward_surface",
    "plot_testbed",
    "plot_training_curves",
    "save_figure",
    "save_table",
    "schedule_markers",
    "schedule_palette",
    "set_style",
]
