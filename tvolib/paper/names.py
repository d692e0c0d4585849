"""The one registry of the names the figures and tables show: schedules, PCFG methods, datasets,
metrics, their legend order, labels, colours and markers.

Pure Python (no torch, no pandas): :mod:`tvolib.plotting` and :mod:`tvolib.paper.analysis` both
read it. Colours are indices into seaborn's ``"deep"`` palette (index 10: black, for the one series
beyond its ten colours), so a schedule keeps its colour in every figure (linear blue, log orange,
moments green, GP-bandit red, bias-optimal black).

Example:
    >>> schedule_label("gp_bandit"), pcfg_method("tvo", "log"), dataset_label("omniglot", derived=True)
    ('GP-bandit', 'tvo-log', 'omniglot (derived 28x28)')
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "SCHEDULE_ORDER",
    "SCHEDULE_LABELS",
    "SCHEDULE_COLOURS",
    "SCHEDULE_MARKERS",
    "SPARE_COLOURS",
    "SPARE_MARKERS",
    "PCFG_METHOD_ORDER",
    "PCFG_METHOD_LABELS",
    "PCFG_METHOD_COLOURS",
    "PCFG_METHOD_MARKERS",
    "PCFG_SPARE_COLOURS",
    "PCFG_METRICS",
    "PCFG_METRIC_LABELS",
    "PCFG_COLUMN_NAMES",
    "DATASET_ORDER",
    "DATASET_LABELS",
    "DERIVED_OMNIGLOT_LABEL",
    "METRIC_LABELS",
    "GP_VARIANT_LABELS",
    "TRAINING_PHASES",
    "MODEL_LABELS",
    "ordered",
    "schedule_label",
    "pcfg_method",
    "pcfg_method_label",
    "dataset_label",
]

# --------------------------------------------------------------------------------------------
# Schedules (Figs 1-5, 7-9 and both appendix tables)
# --------------------------------------------------------------------------------------------

#: Legend order of schedules; names not listed follow alphabetically.
SCHEDULE_ORDER: tuple[str, ...] = ("linear", "log", "moments", "bias_optimal", "gp_bandit", "gp_bandit_tvolib",
                                   "gp_bandit_integrand",
                                   "gp_bandit_adaptive", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random")

SCHEDULE_LABELS: dict[str, str] = {
    "linear": "linear",
    "log": "log",
    "log_uniform": "log",
    "moments": "moments",
    "bias_optimal": "bias-optimal",
    "gp_bandit": "GP-bandit",
    "gp_bandit_tvolib": "GP-bandit (tvolib)",
    "gp_bandit_integrand": "GP-bandit (integrand)",
    "bandit": "GP-bandit",
    "gp_bandit_unsorted": "GP-bandit (unsorted)",
    "gp_bandit_time_invariant": "GP-bandit (time-invariant)",
    "gp_bandit_adaptive": "GP-bandit (adaptive d)",
    "random": "random",
}

#: Index into seaborn's "deep" palette per schedule (10: black, 11: navy, :func:`tvolib.plotting.style.schedule_palette`).
SCHEDULE_COLOURS: dict[str, int] = {"linear": 0, "log": 1, "log_uniform": 1, "moments": 2, "gp_bandit": 3,
                                    "bandit": 3, "gp_bandit_unsorted": 4, "gp_bandit_time_invariant": 6, "random": 7,
                                    "gp_bandit_tvolib": 5, "gp_bandit_adaptive": 9, "bias_optimal": 10,
                                    "gp_bandit_integrand": 8}
#: Colours no named schedule uses, handed out in legend order to unnamed ones.
SPARE_COLOURS: tuple[int, ...] = (11,)

SCHEDULE_MARKERS: dict[str, str] = {"linear": "o", "log": "s", "log_uniform": "s", "moments": "^",
                                    "gp_bandit": "D", "bandit": "D", "gp_bandit_unsorted": "v", "gp_bandit_time_invariant": "<",
                                    "random": "X", "gp_bandit_tvolib": "P", "gp_bandit_adaptive": "*",
                                    "bias_optimal": "p", "gp_bandit_integrand": "h"}
SPARE_MARKERS: tuple[str, ...] = (">", "d")

#: Rows of the permutation table (Appendix D.4): the schedule name or a bool "sorted".
GP_VARIANT_LABELS: dict[Any, str] = {
    True: "sorted (perm. invariant)",
    False: "unsorted",
    "gp_bandit": "sorted (perm. invariant)",
    "gp_bandit_unsorted": "unsorted",
}

#: Fig 3's thirds of training, in order.
TRAINING_PHASES: tuple[str, ...] = ("early", "middle", "late")

# --------------------------------------------------------------------------------------------
# PCFG methods and metrics (Fig 6)
# --------------------------------------------------------------------------------------------

#: Legend order of the PCFG methods (:func:`pcfg_method` names).
PCFG_METHOD_ORDER: tuple[str, ...] = ("tvo-log", "tvo-gp_bandit", "reinforce", "wake-wake", "wake-sleep")

PCFG_METHOD_LABELS: dict[str, str] = {
    "tvo-log": "TVO-log",
    "tvo-gp_bandit": "TVO-GP-bandit",
    "reinforce": "REINFORCE",
    "wake-wake": "wake-wake",
    "wake-sleep": "wake-sleep",
}

#: The TVO runs take their schedule's colour; the baselines colours no schedule uses
#: (REINFORCE brown, wake-wake cyan, wake-sleep olive).
PCFG_METHOD_COLOURS: dict[str, int] = {"tvo-log": SCHEDULE_COLOURS["log"], "tvo-gp_bandit": SCHEDULE_COLOURS["gp_bandit"],
                                       "reinforce": 5, "wake-wake": 9, "wake-sleep": 8}
PCFG_SPARE_COLOURS: tuple[int, ...] = (6, 4, 7)
PCFG_METHOD_MARKERS: dict[str, str] = {"tvo-log": "s", "tvo-gp_bandit": "D", "reinforce": "P", "wake-wake": "*",
                                       "wake-sleep": "h"}

#: Fig 6's rows: the KL of the learned grammar to the true one and the two posterior KLs.
PCFG_METRICS: tuple[str, ...] = ("kl_p", "kl_q_true", "kl_q_theta")

#: Axis labels of the PCFG metrics (figure).
PCFG_METRIC_LABELS: dict[str, str] = {
    "kl_p": r"KL$(p_\theta\,\|\,p_{\theta_{true}})$",
    "kl_q_true": r"KL$(q_\phi(z|x)\,\|\,p_{\theta_{true}}(z|x))$",
    "kl_q_theta": r"KL$(q_\phi(z|x)\,\|\,p_\theta(z|x))$",
    "kl_true_q": r"KL$(p_{\theta_{true}}(z|x)\,\|\,q_\phi(z|x))$",
    "q_parse_mass": r"$q_\phi$ mass on the parses of $x$",
    "kl_p_tree": r"tree KL$(p_\theta\,\|\,p_{\theta_{true}})$",
}
#: Plain-text column names of the PCFG metrics (tables).
PCFG_COLUMN_NAMES: dict[str, str] = {
    "kl_p": "KL(p_theta || p_true)",
    "kl_q_true": "KL(q(z|x) || p_true(z|x))",
    "kl_q_theta": "KL(q(z|x) || p_theta(z|x))",
    "kl_true_q": "KL(p_true(z|x) || q(z|x))",
    "q_parse_mass": "q mass on parses",
    "kl_p_tree": "tree KL(p_theta || p_true)",
}

# --------------------------------------------------------------------------------------------
# Datasets, models and metrics
# --------------------------------------------------------------------------------------------

#: Panel order of datasets (the paper's: VAE datasets, then SBN datasets).
DATASET_ORDER: tuple[str, ...] = ("mnist", "fashion_mnist", "binarized_mnist", "omniglot")

DATASET_LABELS: dict[str, str] = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion MNIST",
    "binarized_mnist": "binarized MNIST",
    "omniglot": "omniglot",
}
#: Omniglot derived from the original 105x105 images, used when Burda et al.'s 28x28
#: ``chardata.mat`` is absent (the data loader states which one it read).
DERIVED_OMNIGLOT_LABEL = "omniglot (derived 28x28)"

MODEL_LABELS: dict[str, str] = {"vae": "VAE", "sbn": "SBN"}

#: Axis labels of the metrics the trainers record.
METRIC_LABELS: dict[str, str] = {
    "test_log_px": r"test $\log p(x)$ (nats)",
    "test_kl": r"test $D_{KL}[q\,\|\,p]$ (nats)",
    "test_elbo": "test ELBO (nats)",
    "train_iwae": r"train $\log p(x)$ (IWAE, nats)",
    "train_elbo": "train ELBO (nats)",
    "train_evidence": r"train TVO evidence $\mathcal{L}$ (nats)",
    "loss": "training loss",
}


def ordered(names: Iterable[Any], order: Sequence[Any] = SCHEDULE_ORDER) -> list[Any]:
    """The distinct ``names``, those in ``order`` first (in that order), the rest alphabetically."""
    rank = {n: i for i, n in enumerate(order)}
    return sorted(dict.fromkeys(names), key=lambda n: (rank.get(n, len(rank)), str(n)))


def schedule_label(name: str) -> str:
    """Legend label of a schedule (``"gp_bandit"`` -> ``"GP-bandit"``); unknown names unchanged."""
    return SCHEDULE_LABELS.get(str(name), str(name))


def pcfg_method(objective: str, schedule: str) -> str:
    """The PCFG method key of a run: ``"tvo-<schedule>"`` for the TVO, else the objective
    (``"reinforce"``, ``"wake-wake"``, ``"wake-sleep"``)."""
    return f"tvo-{schedule}" if objective == "tvo" else str(objective)


def pcfg_method_label(method: str) -> str:
    """Legend label of a PCFG method (``"tvo-gp_bandit"`` -> ``"TVO-GP-bandit"``); unknown names unchanged."""
    return PCFG_METHOD_LABELS.get(str(method), str(method))


def dataset_label(name: str, *, derived: bool = False, labels: Mapping[str, str] | None = None) -> str:
    """Title of a dataset: ``labels[name]`` if given (e.g. read from the results), else the
    registry's; ``derived=True`` names Omniglot derived from the 105x105 images."""
    if labels and name in labels:
        return str(labels[name])
    if derived and name == "omniglot":
        return DERIVED_OMNIGLOT_LABEL
    return DATASET_LABELS.get(str(name), str(name))
