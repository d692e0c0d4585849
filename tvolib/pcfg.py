"""TEMPORARY shim, removed at integration: the PCFG trainer lives in :mod:`tvolib.training.pcfg`.

``method_label``, ``pcfg_sweep`` and ``tail_fraction`` are kept here, unchanged, only until the
paper package (profiles and names) provides them.
"""
from __future__ import annotations

from typing import Any

from tvolib.training.kinds import load_model
from tvolib.training.loop import RunResult as PCFGRunResult
from tvolib.training.loop import TrainingDivergedError as PCFGTrainingDivergedError
from tvolib.training.pcfg import *  # noqa: F401,F403
from tvolib.training.pcfg import (
    OBJECTIVES,
    SCHEDULES,
    TAIL_FRACTION,
    PCFGConfig,
    PCFGModels,
    build_pcfg_schedule as make_schedule,
    pcfg_final_metrics,
    train_pcfg,
    tvo_theta_surrogate,
)
from tvolib.training.pcfg_metrics import METRICS, ExactTestSet, build_test_set, exact_metrics, rule_kl

__all__ = [
    "METRICS", "OBJECTIVES", "SCHEDULES", "TAIL_FRACTION", "ExactTestSet", "PCFGConfig", "PCFGModels",
    "PCFGRunResult", "PCFGTrainingDivergedError", "build_test_set", "exact_metrics", "load_model",
    "make_schedule", "method_label", "pcfg_sweep", "rule_kl", "tail_fraction", "train_pcfg",
    "tvo_theta_surrogate",
]


def _final(history: list[dict[str, Any]], config: PCFGConfig, timers: dict[str, float], device: Any,
           epochs_done: int) -> dict[str, Any]:
    """The old signature of the PCFG's final metrics (tests of the plotting layer use it)."""
    final = pcfg_final_metrics(history, config.epochs, epochs_done)
    final.update(train_seconds=sum(r.get("seconds", 0.0) for r in history), eval_seconds=timers["eval_seconds"],
                 bandit_seconds=timers["bandit_seconds"], epochs=epochs_done,
                 completed=epochs_done >= config.epochs, device=str(device))
    return final


def method_label(config: Any) -> str:
    """``"tvo-log"``, ``"tvo-gp_bandit"``, ``"reinforce"``, ``"wake-wake"`` or ``"wake-sleep"`` (config or row)."""
    def get(key: str) -> Any:
        return getattr(config, key) if hasattr(config, "objective") else config[key]

    objective = get("objective")
    return f"tvo-{get('schedule')}" if objective == "tvo" else objective


_METHODS: tuple[tuple[str, str], ...] = (("tvo", "log"), ("tvo", "gp_bandit"), ("reinforce", "none"),
                                         ("wake-wake", "none"), ("wake-sleep", "none"))


def pcfg_sweep(profile: Any) -> list[PCFGConfig]:
    """The Fig. 6 runs for a profile (a name or an object with ``.name``): every method x S x seed.

    * ``smoke``: S = 2, 2 epochs, tiny data and network, one seed (the whole sweep in seconds);
    * ``quick``: S in {2, 5, 10, 20}, 40 epochs of 10 sentences (<= 15 words), 3 seeds, a 32-unit network
      and learning rate 3e-3 (instead of Adam's default 1e-3) so that 200 steps show the trends;
    * ``paper``: S in {2, 5, 10, 20}, 2000 epochs, 20 seeds, d = 5, the defaults of :class:`PCFGConfig`.
    """
    name = profile if isinstance(profile, str) else getattr(profile, "name", None)
    if name == "smoke":
        base = dict(epochs=2, n_train=4, n_test=3, hidden_dim=16, train_max_words=7, eval_max_words=7,
                    max_productions=31)
        S_values, seeds = (2,), (0,)
    elif name == "quick":
        base = dict(epochs=40, n_train=10, n_test=10, hidden_dim=32, train_max_words=15, eval_max_words=9,
                    max_productions=63, lr=3e-3)
        S_values, seeds = (2, 5, 10, 20), (0, 1, 2)
    elif name == "paper":
        base = {}
        S_values, seeds = (2, 5, 10, 20), tuple(range(20))
    else:
        raise ValueError(f"unknown profile {profile!r}; choose 'smoke', 'quick' or 'paper'")
    return [PCFGConfig(objective=objective, schedule=schedule, S=S, seed=seed, **base).validate()
            for S in S_values for objective, schedule in _METHODS for seed in seeds]


def tail_fraction(profile: Any) -> float:
    """Fraction of the last epochs averaged for Fig 6: the paper's 100 of 2000 (0.05) at paper scale,
    a quarter of the epochs for the short smoke/quick runs (5% of 40 epochs would be 2 noisy epochs)."""
    name = profile if isinstance(profile, str) else getattr(profile, "name", None)
    return TAIL_FRACTION if name == "paper" else 0.25
