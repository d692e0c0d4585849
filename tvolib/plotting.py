"""Figures and tables of the paper from run results: one seaborn style, pure table builders.

Notebooks only choose configs, call :func:`tvolib.experiments.run_configs` and then one function
of this module, so that every figure shares the same style, labels and colours, and the logic
(aggregation over seeds, table layout) is unit tested here rather than hidden in notebooks.

Conventions
-----------
* A *run frame* is the DataFrame returned by ``run_configs``: one row per run, with the config
  fields (``dataset``, ``S``, ``d``, ``schedule``, ``seed``, ...) and final metrics
  (``test_log_px``, ``test_kl``, ``train_seconds``, ...).
* A *history frame* is a concatenation of per-epoch histories (``load_history``), each row
  carrying its run's config fields (see :func:`collect_histories`).
* List-valued cells (``betas``, ``arm``) may be Python lists, tuples, arrays or their string form
  (as read back from CSV); :func:`as_float_list` accepts all of them.
* Error bars are mean +- standard error over seeds (``ddof=1``; absent with a single seed).
"""
from __future__ import annotations

import ast
import math
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    # Headless runs (papermill, nbval, CI) must not need a display; inline Jupyter overrides this.
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = [
    "METRIC_LABELS",
    "SCHEDULE_ORDER",
    "FIG1_LINEAR_GAUSSIAN",
    "IntegrandCurve",
    "as_float_list",
    "betas_long",
    "collect_histories",
    "collect_schedule_histories",
    "dataset_display",
    "dataset_labels",
    "fig1_curves",
    "integrand_grid",
    "linear_gaussian_curve",
    "model_curve",
    "markdown_table",
    "mean_sem",
    "permutation_table",
    "plot_betas_over_time",
    "plot_integrand",
    "plot_metric_vs_d",
    "plot_reward_surface",
    "plot_training_curves",
    "riemann_sums",
    "save_figure",
    "save_table",
    "scale_caption",
    "schedule_label",
    "schedule_markers",
    "schedule_palette",
    "set_style",
    "stage_rounds",
    "summarise_by_schedule",
    "wallclock_table",
]

# --------------------------------------------------------------------------------------------
# Style, names and colours
# --------------------------------------------------------------------------------------------

#: Legend order of schedules; names not listed here follow in alphabetical order.
SCHEDULE_ORDER: tuple[str, ...] = (
    "linear",
    "log",
    "moments",
    "gp_bandit",
    "gp_bandit_unsorted",
    "random",
)

_SCHEDULE_LABELS: dict[str, str] = {
    "linear": "linear",
    "log": "log",
    "log_uniform": "log",
    "moments": "moments",
    "gp_bandit": "GP-bandit",
    "bandit": "GP-bandit",
    "gp_bandit_unsorted": "GP-bandit (unsorted)",
    "random": "random",
}

_DATASET_LABELS: dict[str, str] = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion MNIST",
    "binarized_mnist": "binarized MNIST",
    "omniglot": "omniglot",
}

#: Axis labels of the metrics the runner records.
METRIC_LABELS: dict[str, str] = {
    "test_log_px": r"test $\log p(x)$ (nats)",
    "test_kl": r"test $D_{KL}[q\,\|\,p]$ (nats)",
    "test_elbo": "test ELBO (nats)",
    "train_iwae": r"train $\log p(x)$ (IWAE, nats)",
    "train_elbo": "train ELBO (nats)",
    "train_evidence": r"train TVO evidence $\mathcal{L}$ (nats)",
    "loss": "training loss",
}


def set_style() -> None:
    """Apply the package's single figure style (seaborn ``whitegrid``, paper context)."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.15)
    plt.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 160,
            "savefig.bbox": "tight",
            "legend.frameon": False,
            "axes.titlesize": "medium",
            "figure.titlesize": "medium",
            "pdf.fonttype": 42,  # embed TrueType fonts: editable text in the PDFs
        }
    )


def _suptitle(fig: Figure, title: str) -> None:
    """A figure title wrapped to the figure's width (captions state the scale and can be long)."""
    chars = max(40, int(fig.get_figwidth() * 13))
    fig.suptitle("\n".join(textwrap.wrap(title, chars)))


def _finish(fig: Figure, axes: Any, legend_title: str, title: str | None, ncol: int | None = None) -> Figure:
    """One legend below the panels (each label once, from all ``axes``) and the wrapped title."""
    handles, labels = [], []
    for ax in np.atleast_1d(axes).flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol or max(len(labels), 1), title=legend_title)
    if title:
        _suptitle(fig, title)
    return fig


def schedule_label(name: str) -> str:
    """Legend label of a schedule name (``"gp_bandit"`` -> ``"GP-bandit"``); unknown names unchanged."""
    return _SCHEDULE_LABELS.get(str(name), str(name))


def dataset_display(name: str, labels: Mapping[str, str] | None = None) -> str:
    """Title of a dataset: ``labels[name]`` if given (e.g. ``BinaryImageData.label``), else a default."""
    if labels and name in labels:
        return labels[name]
    return _DATASET_LABELS.get(str(name), str(name))


_DATASET_ORDER: tuple[str, ...] = ("mnist", "fashion_mnist", "binarized_mnist", "omniglot")


def dataset_labels(names: Iterable[str], data_root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Figure labels of datasets as the loaded data state them (``BinaryImageData.label``), so that
    Omniglot derived from the 105x105 images reads "omniglot (derived 28x28)"."""
    from tvolib.data import load_dataset  # lazy: reads (cached) data files

    return {name: load_dataset(name, data_root, n_train=1, n_test=1).label for name in dict.fromkeys(names)}


def _panels(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """Groups of ``frame`` by ``keys`` as (key tuple, part), datasets in the paper's order."""
    if not keys:
        return [((), frame)]
    groups = [(k if isinstance(k, tuple) else (k,), part) for k, part in frame.groupby(list(keys), sort=True)]
    if "dataset" in keys:
        at = list(keys).index("dataset")
        rank = {n: i for i, n in enumerate(_DATASET_ORDER)}
        groups.sort(key=lambda g: (rank.get(g[0][at], len(rank)), str(g[0][at])))
    return groups


def _ordered(names: Iterable[Any], order: Sequence[str] = SCHEDULE_ORDER) -> list[Any]:
    """Unique ``names`` sorted by ``order`` first, the rest alphabetically."""
    unique = list(dict.fromkeys(names))
    rank = {n: i for i, n in enumerate(order)}
    return sorted(unique, key=lambda n: (rank.get(n, len(rank)), str(n)))


def schedule_palette(names: Iterable[str]) -> dict[str, Any]:
    """A colour per schedule, fixed by its place in :data:`SCHEDULE_ORDER` so that colours agree
    across figures (linear is always blue, GP-bandit always red, ...)."""
    base = sns.color_palette("deep", 10)
    fixed = {"linear": 0, "log": 1, "log_uniform": 1, "moments": 2, "gp_bandit": 3,
             "bandit": 3, "gp_bandit_unsorted": 4, "random": 7}
    palette: dict[str, Any] = {}
    spare = [5, 6, 8, 9]  # colours no fixed schedule uses
    extra = 0
    for name in _ordered(names):
        if name in fixed:
            palette[name] = base[fixed[name]]
        else:
            palette[name] = base[spare[extra % len(spare)]]
            extra += 1
    return palette


def schedule_markers(names: Iterable[str]) -> dict[str, str]:
    """A marker per schedule, fixed like :func:`schedule_palette` (GP-bandit is always a diamond)."""
    fixed = {"linear": "o", "log": "s", "log_uniform": "s", "moments": "^", "gp_bandit": "D", "bandit": "D",
             "gp_bandit_unsorted": "v", "random": "X"}
    spare = ["P", "*", "h", "<", ">"]
    out: dict[str, str] = {}
    for i, name in enumerate(n for n in _ordered(names) if n not in fixed):
        out[name] = spare[i % len(spare)]
    return {name: fixed.get(name, out.get(name, "o")) for name in _ordered(names)}


def scale_caption(profile: Any, *, epochs: int | None = None, extra: str = "") -> str:
    """A one-line figure caption stating a profile's scale (subset sizes, epochs, batch, seeds,
    evaluation); the full text with the departures from the paper is ``Profile.describe()``,
    which the notebooks print under each figure. ``epochs`` overrides the profile's (wall-clock
    table)."""
    from tvolib.profiles import get_profile  # lazy: plotting must import without the runner

    p = get_profile(profile)
    data = "full datasets" if p.n_train is None else f"{p.n_train} train / {p.n_test} test examples"
    seeds = f"{len(p.seeds)} seed{'s' if len(p.seeds) > 1 else ''}"
    line = (f"profile '{p.name}': {data}, {epochs or p.epochs} epochs, batch {p.batch_size}, {seeds}, "
            f"test log p(x) by IWAE-{p.eval_S}")
    if p.name != "paper":
        line += " (reduced scale, see notebook)"
    return line + (f"; {extra}" if extra else "")


# --------------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------------


def as_float_list(value: Any) -> list[float]:
    """A list-valued cell as a list of floats: accepts lists, tuples, arrays, tensors and their
    string form ``"[0.0, 0.3]"`` (CSV round trip); a scalar becomes a one-element list."""
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            # numpy's repr without commas: "[0.  0.3]"
            parsed = [float(t) for t in text.strip("[]()").replace(",", " ").split()]
        return as_float_list(parsed)
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [float(value)]


def mean_sem(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, standard error (``std(ddof=1)/sqrt(n)``; NaN when n < 2) and n of the finite values."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    sem = float(arr.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return float(arr.mean()), sem, n


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{what} needs columns {sorted(set(columns))}; missing {missing}. "
            f"Got columns {list(frame.columns)}"
        )


# --------------------------------------------------------------------------------------------
# Aggregation and tables
# --------------------------------------------------------------------------------------------


def summarise_by_schedule(
    frame: pd.DataFrame,
    metrics: Sequence[str] = ("test_log_px", "test_kl"),
    by: Sequence[str] = ("dataset", "S", "d", "schedule"),
) -> pd.DataFrame:
    """Mean and standard error over seeds of each metric, per group of ``by``.

    Returns one row per group with columns ``*by``, ``n_seeds`` and, per metric,
    ``<metric>_mean`` and ``<metric>_sem`` (NaN for a single seed). Grouping columns absent from
    ``frame`` are skipped, so a frame of one dataset needs no ``dataset`` column.
    """
    if frame.empty:
        raise ValueError("summarise_by_schedule got an empty frame (no runs)")
    _require(frame, metrics, "summarise_by_schedule")
    keys = [k for k in by if k in frame.columns]
    if not keys:
        raise ValueError(f"none of the grouping columns {list(by)} is in the frame")
    rows = []
    for group, part in frame.groupby(keys, sort=True, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        row: dict[str, Any] = dict(zip(keys, group))
        row["n_seeds"] = int(len(part))
        for metric in metrics:
            mean, sem, _ = mean_sem(part[metric])
            row[f"{metric}_mean"] = mean
            row[f"{metric}_sem"] = sem
        rows.append(row)
    out = pd.DataFrame(rows)
    if "schedule" in out.columns:
        rank = {n: i for i, n in enumerate(_ordered(out["schedule"]))}
        out = out.assign(_rank=out["schedule"].map(rank))
        out = out.sort_values([k for k in keys if k != "schedule"] + ["_rank"]).drop(columns="_rank")
    return out.reset_index(drop=True)


def wallclock_table(
    frame: pd.DataFrame,
    *,
    time_columns: Sequence[str] = ("train_seconds", "eval_seconds", "bandit_seconds"),
    time_unit: str = "min",
    beta1_column: str = "log_beta1",
) -> pd.DataFrame:
    """The wall-clock table (Appendix D.3): per schedule, the best run's test log p(x), the KL of
    that same run, the number of runs, and the cumulative run time of all its runs.

    ``frame`` is a run frame holding the bandit runs (one per d) and the grid-searched log runs
    (every beta_1 of the grid for every d). The "best" run is the one with the highest
    ``test_log_px`` (the paper: "we take the best log p(x) and corresponding KL"). Run time is the
    sum of the ``time_columns`` present (training epochs, test evaluation, and the schedule's own
    time: GP fits and acquisition for the bandit); the first one is required. ``time_unit`` is ``"s"``, ``"min"`` or ``"h"``.
    Rows: GP-bandit first, as in the paper, then the other schedules ("log" is labelled
    "grid-searched log").
    """
    divisors = {"s": 1.0, "min": 60.0, "h": 3600.0}
    if time_unit not in divisors:
        raise ValueError(f"time_unit must be one of {sorted(divisors)}; got {time_unit!r}")
    if not time_columns:
        raise ValueError("time_columns must name at least one column of seconds")
    _require(frame, ["schedule", "test_log_px", "test_kl", time_columns[0]], "wallclock_table")
    if frame.empty:
        raise ValueError("wallclock_table got an empty frame (no runs)")
    present = [c for c in time_columns if c in frame.columns]
    names = _ordered(frame["schedule"], order=("gp_bandit", "log"))
    rows = []
    for name in names:
        part = frame[frame["schedule"] == name]
        best = part.loc[part["test_log_px"].idxmax()]
        seconds = float(part[present].fillna(0.0).to_numpy(dtype=float).sum())
        rows.append({
            "schedule": "grid-searched log" if name == "log" else schedule_label(name),
            "best log p(x)": float(best["test_log_px"]),
            "KL at best": float(best["test_kl"]),
            "d at best": int(best["d"]) if "d" in part.columns else None,
            "beta_1 at best": (float(best[beta1_column]) if name == "log" and beta1_column in part.columns
                               else float("nan")),
            "number of runs": int(len(part)),
            f"cumulative run time ({time_unit})": seconds / divisors[time_unit],
        })
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def permutation_table(
    histories: pd.DataFrame,
    budgets: Sequence[int] | None = None,
    *,
    variant: str = "schedule",
    metric: str = "test_log_px",
    rounds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The permutation-invariance table (Appendix D.4): test log p(x) of sorted (permutation
    invariant) versus unsorted GP-bandit runs after ``T`` epochs, per S and d.

    ``histories`` is a history frame (see :func:`collect_histories`) with columns ``epoch``,
    ``metric``, ``seed``, ``variant`` (the schedule name ``gp_bandit`` / ``gp_bandit_unsorted``, or
    a bool, True = sorted) and optionally ``S``/``d``. For each
    budget T (default: every epoch at which ``metric`` was evaluated, except 0) a run contributes
    its last evaluation at or before T; cells are means over seeds. ``rounds`` (a schedule-history
    frame with ``epoch`` and the same config columns) adds the mean number of bandit rounds
    completed by T to the column names, as in the paper's "T / bandit iterations" header.

    Returns a frame indexed by (S, d, GP) with one column per budget, named ``"T=<T>"`` or
    ``"T=<T> / <rounds> rounds"``.
    """
    _require(histories, ["epoch", metric, "seed", variant], "permutation_table")
    evaluated = histories[histories[metric].notna()]
    if evaluated.empty:
        raise ValueError(f"permutation_table: no evaluated {metric!r} values in the histories")
    if budgets is None:
        budgets = sorted(int(e) for e in evaluated["epoch"].unique() if e > 0)
    keys = [k for k in ("S", "d") if k in evaluated.columns]
    run_keys = keys + [variant, "seed"]
    columns: dict[str, pd.Series] = {}
    for budget in budgets:
        upto = evaluated[evaluated["epoch"] <= budget].sort_values("epoch")
        last = upto.groupby(run_keys, sort=True).tail(1)
        cell = last.groupby(keys + [variant], sort=True)[metric].mean()
        name = f"T={int(budget)}"
        if rounds is not None:
            _require(rounds, ["epoch", "seed", variant], "permutation_table(rounds=...)")
            done = rounds[rounds["epoch"] <= budget].groupby(run_keys).size()
            name += f" / {done.mean():.0f} rounds" if len(done) else " / 0 rounds"
        columns[name] = cell
    table = pd.DataFrame(columns)
    table.index = table.index.set_names(keys + ["GP"])
    # Sorted (permutation-invariant) rows first, as in the paper's table.
    rank = {True: 0, "gp_bandit": 0, False: 1, "gp_bandit_unsorted": 1}
    order = sorted(range(len(table)), key=lambda i: (table.index[i][:-1], rank.get(table.index[i][-1], 2)))
    table = table.iloc[order]
    return table.rename(index=lambda v: _GP_VARIANTS.get(v, v) if isinstance(v, (bool, np.bool_, str)) else v,
                        level="GP")


_GP_VARIANTS: dict[Any, str] = {
    True: "sorted (perm. invariant)",
    False: "unsorted",
    "gp_bandit": "sorted (perm. invariant)",
    "gp_bandit_unsorted": "unsorted",
}


def markdown_table(frame: pd.DataFrame, *, floatfmt: str = ".3f", index: bool | None = None) -> str:
    """A GitHub-flavoured Markdown table of ``frame``.

    Written by hand because pandas' ``to_markdown`` needs the optional ``tabulate`` package.
    ``index`` defaults to True unless the index is a plain RangeIndex. NaN prints as empty.
    """
    if index is None:
        index = not isinstance(frame.index, pd.RangeIndex)
    data = frame.reset_index() if index else frame

    def fmt(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, (float, np.floating)):
            return format(float(value), floatfmt)
        return str(value).replace("|", r"\|").replace("\n", " ")

    header = [fmt(c) for c in data.columns]
    body = [[fmt(v) for v in row] for row in data.itertuples(index=False, name=None)]
    numeric = [pd.api.types.is_numeric_dtype(data[c]) and not pd.api.types.is_bool_dtype(data[c])
               for c in data.columns]
    align = ["---:" if num else ":---" for num in numeric]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Loading helpers (thin wrappers over tvolib.experiments, kept here so notebooks stay thin)
# --------------------------------------------------------------------------------------------


def _config_fields(config: Any) -> dict[str, Any]:
    fields = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    # Keep scalar fields only: list/dict-valued ones would break groupby.
    return {k: v for k, v in fields.items() if not isinstance(v, (list, tuple, dict, set))}


def collect_histories(
    configs: Sequence[Any],
    loader: Callable[[Any], pd.DataFrame] | None = None,
    *,
    results_root: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Concatenate the per-epoch histories of ``configs``, each row tagged with its config's
    scalar fields (``schedule``, ``d``, ``S``, ``seed``, ...). ``loader`` defaults to
    ``tvolib.experiments.load_history``."""
    return _collect(configs, loader, "load_history", results_root)


def collect_schedule_histories(
    configs: Sequence[Any],
    loader: Callable[[Any], pd.DataFrame] | None = None,
    *,
    results_root: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """As :func:`collect_histories` for the bandit logs (``load_schedule_history``)."""
    return _collect(configs, loader, "load_schedule_history", results_root)


def _collect(configs, loader, name, results_root) -> pd.DataFrame:
    if loader is None:
        from tvolib import experiments  # lazy: the runner imports much more than plotting needs

        base = getattr(experiments, name)

        def loader(config):  # noqa: E306 - pass results_root only when given
            return base(config) if results_root is None else base(config, results_root=results_root)

    parts = []
    for config in configs:
        part = loader(config)
        if part is None or len(part) == 0:
            continue
        part = part.copy()
        for key, value in _config_fields(config).items():
            if key not in part.columns:
                part[key] = value
        parts.append(part)
    if not parts:
        raise ValueError(f"{name}: none of the {len(configs)} configs has a recorded history")
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Figure 1: the TVO integrand and its Riemann sums
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntegrandCurve:
    """One panel of Fig. 1: the integrand ``E_{pi_beta}[log w]`` on a grid of beta.

    ``values`` are averaged over data points (nats); ``log_px`` is the exact area if known
    (the closed-form model), else None; ``estimate`` optionally overlays SNIS estimates
    ``(beta, values)`` on an analytic curve.
    """

    label: str
    beta: np.ndarray
    values: np.ndarray
    log_px: float | None = None
    estimate: tuple[np.ndarray, np.ndarray] | None = None
    area_label: str = r"$\log p(x)$"


def riemann_sums(beta: np.ndarray, values: np.ndarray, schedule: Sequence[float]) -> dict[str, float]:
    """Left and right Riemann sums of the integrand over ``schedule`` (left points, 1 appended),
    the ELBO (the d = 1 left sum, ``f(0)``), and the trapezoid area of the curve (Eq. 4-5).

    The integrand is read at the schedule points by linear interpolation of ``(beta, values)``,
    so include the schedule points in ``beta`` for exact heights.
    """
    beta = np.asarray(beta, dtype=float)
    values = np.asarray(values, dtype=float)
    if beta.ndim != 1 or beta.shape != values.shape or beta.size < 2:
        raise ValueError(f"beta and values must be 1-D of equal length >= 2; got {beta.shape}, {values.shape}")
    if not np.all(np.diff(beta) > 0) or beta[0] > 0 or beta[-1] < 1:
        raise ValueError("beta must increase strictly and cover [0, 1]")
    points = np.append(np.asarray(schedule, dtype=float), 1.0)
    if points[0] != 0 or not np.all(np.diff(points) > 0) or points[-2] >= 1:
        raise ValueError(f"schedule must be 0 = b_0 < ... < b_(d-1) < 1; got {list(schedule)}")
    heights = np.interp(points, beta, values)
    widths = np.diff(points)
    return {
        "left": float(np.sum(widths * heights[:-1])),
        "right": float(np.sum(widths * heights[1:])),
        "elbo": float(np.interp(0.0, beta, values)),
        "area": float(np.trapezoid(values, beta)),
    }


#: Fig. 1's closed-form panel: z ~ N(0, 1), x | z ~ N(2 z, 0.6^2) with q(z|x) = N(0, 1) (the prior,
#: ignoring x), a deliberately poor q so the integrand rises steeply near beta = 0 as in the paper.
FIG1_LINEAR_GAUSSIAN: dict[str, float] = {"a": 2.0, "b": 0.0, "s": 0.6, "c": 0.0, "m": 0.0, "v": 1.0}


def integrand_grid(schedule: Sequence[float], n: int = 201) -> np.ndarray:
    """A grid on [0, 1] of ``n`` points plus the schedule's points (exact rectangle heights)."""
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, n), np.asarray(schedule, dtype=float)]))


def linear_gaussian_curve(
    beta: np.ndarray,
    *,
    n_points: int = 41,
    S: int = 100,
    n_estimate: int = 21,
    seed: int = 0,
    params: Mapping[str, float] | None = None,
    label: str = "linear Gaussian (closed form)",
) -> IntegrandCurve:
    """Fig. 1's closed-form panel: the exact integrand ``d log Z_beta / d beta`` (Eq. 3) of
    :class:`tvolib.models.LinearGaussian` averaged over ``n_points`` fixed data points
    (evenly spaced in +-1.5 marginal standard deviations), its exact ``log p(x)``, and SNIS
    estimates (Eq. 4) from ``S`` samples of q at ``n_estimate`` betas."""
    import torch

    from tvolib.models import LinearGaussian
    from tvolib.tvo import snis_integrand

    model = LinearGaussian(**dict(params or FIG1_LINEAR_GAUSSIAN))
    with torch.no_grad():
        sd = float(torch.sqrt(model.a**2 + (2 * model.log_s).exp()))
        x = float(model.b) + sd * torch.linspace(-1.5, 1.5, n_points, dtype=torch.float64)
        grid = torch.as_tensor(beta, dtype=torch.float64)
        values = model.dlogZ_dbeta(x, grid).mean(dim=1).numpy()
        log_px = float(model.log_px(x).mean())
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
        points = torch.linspace(0.0, 1.0, n_estimate, dtype=torch.float64)
        estimate = snis_integrand(log_p - log_q, points).mean(dim=1).numpy()
    return IntegrandCurve(label, np.asarray(beta, dtype=float), values, log_px, (points.numpy(), estimate))


def model_curve(
    model: Any,
    x: Any,
    beta: np.ndarray,
    *,
    S: int = 1000,
    batch_size: int = 100,
    seed: int = 0,
    label: str = "VAE",
) -> IntegrandCurve:
    """Fig. 1's learned-model panel: SNIS estimates (Eq. 4) of ``E_{pi_beta}[log w]`` for a
    trained model from ``S`` samples of q per data point, averaged over the rows of ``x``.

    The area under the SNIS curve is exactly the IWAE-S estimate ``log mean_s w_s`` (its
    derivative in beta is the SNIS integrand), which is returned as ``log_px``.
    """
    import torch

    from tvolib.tvo import snis_integrand

    grid = torch.as_tensor(beta, dtype=torch.float64)
    total = torch.zeros(len(grid), dtype=torch.float64)
    iwae = 0.0
    n = int(x.shape[0])
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(seed)
        for start in range(0, n, batch_size):
            xb = x[start:start + batch_size]
            log_p, log_q = model.log_joint_and_q(xb, S, reparam=False)
            log_w = (log_p - log_q).double()
            total += snis_integrand(log_w, grid).sum(dim=1).cpu()
            iwae += float((torch.logsumexp(log_w, dim=0) - math.log(S)).sum())
    return IntegrandCurve(label, np.asarray(beta, dtype=float), (total / n).numpy(), iwae / n,
                          area_label=f"IWAE-{S}")


def fig1_curves(
    config: Any,
    *,
    data_root: str | os.PathLike[str] | None = None,
    results_root: str | os.PathLike[str] | None = None,
    n_data: int = 100,
    S: int | None = None,
    n_grid: int = 201,
) -> tuple[list[IntegrandCurve], list[float]]:
    """Fig. 1's two panels for a completed run ``config``: the closed-form linear-Gaussian
    integrand and the trained model's SNIS integrand on the first ``n_data`` test examples of the
    run's own data subset, with ``S`` samples (default: the run's ``eval_S``); returns the curves
    and the schedule of the run's last epoch (whose Riemann sums are drawn)."""
    from tvolib.data import load_dataset
    from tvolib.experiments import load_history, load_model

    history = load_history(config, results_root)
    schedule = as_float_list(history["betas"].dropna().iloc[-1])
    model = load_model(config, results_root)
    data = load_dataset(config.dataset, data_root, n_train=config.n_train, n_test=config.n_test,
                        seed=config.data_seed)
    x = data.test[:n_data].to(next(model.parameters()).device)
    grid = integrand_grid(schedule, n_grid)
    name = {"vae": "VAE", "sbn": "SBN"}.get(config.model, config.model)
    label = (f"{name} on {data.label} after {config.epochs} epochs\n"
             f"({schedule_label(config.schedule)} schedule, d={config.d}, S={config.S}; SNIS with "
             f"{S or config.eval_S} samples, {x.shape[0]} test points)")
    curves = [linear_gaussian_curve(grid), model_curve(model, x, grid, S=S or config.eval_S, label=label)]
    return curves, schedule


def plot_integrand(
    curves: Sequence[IntegrandCurve],
    schedule: Sequence[float],
    *,
    title: str | None = None,
) -> Figure:
    """Fig. 1: per curve, the integrand versus beta with the left Riemann sum (the TVO lower bound,
    shaded), the right Riemann sum (an upper bound, outlined) and the ELBO rectangle (dotted).

    The integrand is non-decreasing in beta (its derivative is a variance), so the left sum is a
    lower bound and the right sum an upper bound of log p(x) (paper Section 2).
    """
    if not curves:
        raise ValueError("plot_integrand needs at least one IntegrandCurve")
    set_style()
    colours = sns.color_palette("deep")
    fig, axes = plt.subplots(1, len(curves), figsize=(5.6 * len(curves), 4.8), squeeze=False,
                             layout="constrained")
    points = np.append(np.asarray(schedule, dtype=float), 1.0)
    for ax, curve in zip(axes[0], curves):
        sums = riemann_sums(curve.beta, curve.values, schedule)
        heights = np.interp(points, curve.beta, curve.values)
        lo = min(float(np.min(curve.values)), sums["elbo"])
        hi = float(np.max(curve.values))
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        floor = lo - pad  # rectangles are drawn from the bottom of the axes: areas are relative
        for i in range(len(points) - 1):
            ax.bar(points[i], heights[i] - floor, width=points[i + 1] - points[i], bottom=floor,
                   align="edge", color=colours[0], alpha=0.3, edgecolor=colours[0], linewidth=0.8,
                   label=f"left Riemann sum (TVO) = {sums['left']:.2f}" if i == 0 else None)
            ax.bar(points[i], heights[i + 1] - floor, width=points[i + 1] - points[i], bottom=floor,
                   align="edge", fill=False, edgecolor=colours[1], linewidth=1.2, linestyle="--",
                   label=f"right Riemann sum = {sums['right']:.2f}" if i == 0 else None)
        ax.plot([0, 0, 1, 1], [floor, sums["elbo"], sums["elbo"], floor], color="black", linestyle=":",
                linewidth=1.5, label=f"ELBO = {sums['elbo']:.2f}")
        area = curve.log_px if curve.log_px is not None else sums["area"]
        ax.plot(curve.beta, curve.values, color=colours[3], linewidth=2.0,
                label=rf"$E_{{\pi_\beta}}[\log w]$ (area = {curve.area_label} = {area:.2f})")
        if curve.estimate is not None:
            ax.plot(curve.estimate[0], curve.estimate[1], "o", color=colours[3], markersize=3.5,
                    markerfacecolor="white", label="SNIS estimate")
        ax.set_xlim(0, 1)
        ax.set_ylim(floor, hi + pad)
        ax.set_xlabel(r"$\beta$")
        ax.set_ylabel(r"$E_{\pi_\beta}[\log p(x,z) - \log q(z|x)]$ (nats)")
        ax.set_title(curve.label)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small")
    if title:
        _suptitle(fig, title)
    return fig


# --------------------------------------------------------------------------------------------
# Figure 2: the GP reward surface at three stages (d = 2)
# --------------------------------------------------------------------------------------------


def _interior(arm: Any) -> list[float]:
    """Interior points of an arm: drop a leading beta_0 = 0 if the arm stores it."""
    values = as_float_list(arm)
    return values[1:] if len(values) > 1 and values[0] == 0.0 else values


def _has_gp(frame: pd.DataFrame) -> np.ndarray:
    """Rows whose round fitted a GP (``source == "gp"``; every row if the column is absent)."""
    if "source" not in frame.columns:
        return np.ones(len(frame), dtype=bool)
    return (frame["source"] == "gp").to_numpy()


def stage_rounds(
    schedule_history: pd.DataFrame,
    epochs: Sequence[int] | None = None,
    *,
    fractions: Sequence[float] = (0.2, 0.3, 1.0),
) -> list[int]:
    """Row positions of the bandit rounds to draw: for each epoch of ``epochs`` (e.g. a profile's
    ``reward_surface_epochs``), the last round recorded at or before it (the GP as it stood then);
    without ``epochs``, the given ``fractions`` of the last round's epoch (the paper shows 2k, 3k and
    10k of 10k epochs: 0.2, 0.3, 1.0). Only rounds that fitted a GP count (``source == "gp"``,
    when recorded); a target before the first such round gets the first one. Duplicates are dropped;
    an empty list means no round fitted a GP."""
    _require(schedule_history, ["epoch"], "stage_rounds")
    if schedule_history.empty:
        return []
    recorded = schedule_history["epoch"].to_numpy(dtype=float)
    candidates = np.flatnonzero(_has_gp(schedule_history))
    if candidates.size == 0:
        return []
    targets = list(epochs) if epochs is not None else [f * recorded.max() for f in fractions]
    chosen: list[int] = []
    for target in targets:
        before = candidates[recorded[candidates] <= target]
        pos = int(before[-1]) if before.size else int(candidates[0])
        if pos not in chosen:
            chosen.append(pos)
    return chosen


def _message_figure(message: str, title: str | None) -> Figure:
    """A figure that says why there is nothing to draw (e.g. a smoke run shorter than the burn-in)."""
    set_style()
    fig, ax = plt.subplots(figsize=(6.4, 2.4), layout="constrained")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    if title:
        _suptitle(fig, title)
    return fig


def plot_reward_surface(
    schedule_history: pd.DataFrame,
    rounds: Sequence[int] | None = None,
    *,
    posterior: Callable[[pd.DataFrame, int, np.ndarray], tuple[Any, Any]] | None = None,
    grid_size: int = 200,
    bounds: tuple[float, float] = (0.0, 1.0),
    title: str | None = None,
) -> Figure:
    """Fig. 2: for a d = 2 bandit run, the GP posterior mean +- one std of the reward over
    beta_1 after each round of ``rounds`` (row positions of ``schedule_history``; default
    :func:`stage_rounds`), with the observed (beta_1, reward) pairs up to that round coloured by round.

    ``posterior(history, round, grid)`` (``round`` is the history's ``round`` value) defaults to
    ``tvolib.bandit.reward_posterior``; ``grid`` is ``(grid_size, 1)`` in beta units. A history with
    no GP round (a run shorter than burn-in plus the random initial rounds) gives a figure saying so.
    """
    _require(schedule_history, ["epoch", "arm", "reward"], "plot_reward_surface")
    hist = schedule_history.reset_index(drop=True)
    if rounds is None:
        rounds = stage_rounds(hist)
    if hist.empty or not rounds:
        what = "no bandit rounds" if hist.empty else f"{len(hist)} bandit rounds, all before the first GP fit"
        return _message_figure(f"Nothing to draw: {what}\n(the run is shorter than the bandit's burn-in and "
                               "random initial rounds).", title)
    if posterior is None:
        from tvolib.bandit import reward_posterior as posterior  # lazy import
    if np.any([len(_interior(a)) > 1 for a in hist["arm"]]):
        raise ValueError("plot_reward_surface shows d = 2 runs only (one interior beta per arm)")
    beta1 = np.array([(_interior(a) or [np.nan])[0] for a in hist["arm"]], dtype=float)
    reward = pd.to_numeric(hist["reward"], errors="coerce").to_numpy(dtype=float)
    order = hist["round"].to_numpy() if "round" in hist.columns else np.arange(len(hist))
    grid = np.linspace(bounds[0], bounds[1], grid_size).reshape(-1, 1)
    set_style()
    cmap = plt.get_cmap("viridis")
    norm = matplotlib.colors.Normalize(vmin=float(np.min(order)), vmax=float(max(np.max(order), 1)))
    fig, axes = plt.subplots(1, len(rounds), figsize=(4.6 * len(rounds) + 0.8, 3.9), squeeze=False,
                             layout="constrained")
    colour = sns.color_palette("deep")[0]
    sc = None
    for ax, index in zip(axes[0], rounds):
        index = int(index)
        mean, std = posterior(hist, int(order[index]), grid)
        mean = np.asarray(mean, dtype=float).reshape(-1)
        std = np.asarray(std, dtype=float).reshape(-1)
        ax.plot(grid[:, 0], mean, color=colour, linewidth=2, label="GP mean")
        ax.fill_between(grid[:, 0], mean - std, mean + std, color=colour, alpha=0.2, label=r"$\pm$ 1 std")
        seen = np.arange(len(hist)) <= index
        ok = seen & np.isfinite(reward) & np.isfinite(beta1)
        sc = ax.scatter(beta1[ok], reward[ok], c=order[ok], cmap=cmap, norm=norm, s=22,
                        edgecolors="black", linewidths=0.3, zorder=3, label="chosen $\\beta_1$")
        ax.set_xlim(*bounds)
        ax.set_xlabel(r"$\beta_1$")
        ax.set_ylabel(r"reward: change in train $\mathcal{L}$ (nats)")
        ax.set_title(f"after epoch {int(hist['epoch'].iloc[index])} (round {int(order[index])})")
    axes[0][0].legend(loc="best", fontsize="small")
    if sc is not None:
        bar = fig.colorbar(sc, ax=list(axes[0]), label="bandit round", fraction=0.03, pad=0.01)
        bar.locator = matplotlib.ticker.MaxNLocator(integer=True)
        bar.update_ticks()
    if title:
        _suptitle(fig, title)
    return fig


# --------------------------------------------------------------------------------------------
# Figure 3: chosen betas over training
# --------------------------------------------------------------------------------------------


def betas_long(frame: pd.DataFrame, column: str = "betas") -> pd.DataFrame:
    """Long format of a list-valued schedule column: one row per (epoch, j, beta_j) for the interior
    points j >= 1 (a leading beta_0 = 0 is dropped)."""
    _require(frame, ["epoch", column], "betas_long")
    rows = []
    for epoch, value in zip(frame["epoch"], frame[column]):
        for j, beta in enumerate(_interior(value), start=1):
            rows.append({"epoch": epoch, "j": j, "beta": beta})
    if not rows:
        raise ValueError(f"betas_long: column {column!r} holds no interior betas")
    return pd.DataFrame(rows)


_PHASES = ("early", "middle", "late")


def plot_betas_over_time(
    frame: pd.DataFrame,
    *,
    column: str = "betas",
    title: str | None = None,
) -> Figure:
    """Fig. 3: the bandit's chosen interior betas versus epoch, coloured by training phase (first,
    middle and last third of the epochs, as the paper's blue/orange/green), with a second panel
    showing the distribution of the betas chosen in each phase. ``column`` is ``"arm"`` for a
    bandit's schedule history (one row per round) or ``"betas"`` for a per-epoch history. An empty
    frame (a run shorter than the bandit's burn-in) gives a figure saying so."""
    if frame.empty:
        return _message_figure("Nothing to draw: no bandit rounds\n(the run is shorter than the bandit's burn-in).",
                               title)
    long = betas_long(frame, column)
    epochs = long["epoch"].to_numpy(dtype=float)
    edges = np.linspace(0.0, epochs.max(), 4)  # thirds of training, from epoch 0
    phase = np.digitize(epochs, edges[1:-1], right=True)  # an epoch ending a third belongs to it
    long = long.assign(phase=[_PHASES[p] for p in phase])
    set_style()
    palette = dict(zip(_PHASES, sns.color_palette("deep", 3)))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.4), height_ratios=[3, 2], layout="constrained")
    sns.scatterplot(data=long, x="epoch", y="beta", hue="phase", hue_order=list(_PHASES),
                    palette=palette, s=14, linewidth=0, alpha=0.8, ax=top)
    top.set_ylim(0, 1)
    top.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    top.set_xlabel("epoch")
    top.set_ylabel(r"chosen $\beta_j$ ($j \geq 1$)")
    top.get_legend().remove()
    bins = np.linspace(0, 1, 21)
    for name in _PHASES:
        values = long.loc[long["phase"] == name, "beta"]
        if len(values):
            bottom.hist(values, bins=bins, density=True, histtype="step", linewidth=1.8,
                        color=palette[name], label=name)
    bottom.set_xlim(0, 1)
    bottom.set_xlabel(r"$\beta$")
    bottom.set_ylabel("density of chosen betas")
    return _finish(fig, bottom, "training phase (thirds of the epochs)", title, ncol=3)


# --------------------------------------------------------------------------------------------
# Figures 4, 5, 7, 8: final metrics versus d
# --------------------------------------------------------------------------------------------


def plot_metric_vs_d(
    frame: pd.DataFrame,
    metrics: Sequence[str] = ("test_log_px", "test_kl"),
    *,
    facets: Sequence[str] = ("dataset", "S"),
    schedules: Sequence[str] | None = None,
    dataset_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Figs. 4, 5, 7 and 8: each metric (rows) versus d, one column per combination of ``facets``
    (e.g. dataset and S), hue = schedule, points at the mean over seeds with standard-error bars.

    ``schedules`` restricts and orders the schedules shown (default: all, in
    :data:`SCHEDULE_ORDER`). Schedules are dodged slightly along d so error bars stay readable.
    """
    _require(frame, ["d", "schedule", *metrics], "plot_metric_vs_d")
    if schedules is not None:
        frame = frame[frame["schedule"].isin(schedules)]
    if frame.empty:
        raise ValueError("plot_metric_vs_d: no runs to plot (after filtering schedules)")
    facet_keys = [f for f in facets if f in frame.columns]
    summary = summarise_by_schedule(frame, metrics, by=(*facet_keys, "d", "schedule"))
    panels = _panels(summary, facet_keys)
    names = list(schedules) if schedules is not None else _ordered(summary["schedule"])
    names = [n for n in names if n in set(summary["schedule"])]
    palette = schedule_palette(names)
    markers = schedule_markers(names)
    set_style()
    fig, axes = plt.subplots(len(metrics), len(panels), figsize=(max(6.0, 3.9 * len(panels) + 0.6), 3.1 * len(metrics) + 0.8),
                             squeeze=False, sharex="col", layout="constrained")
    d_values = np.sort(summary["d"].unique())
    step = float(np.min(np.diff(d_values))) if len(d_values) > 1 else 1.0
    offsets = {n: (i - (len(names) - 1) / 2) * 0.08 * step for i, n in enumerate(names)}
    for col, (key, part) in enumerate(panels):
        header = []
        for facet, value in zip(facet_keys, key):
            header.append(dataset_display(value, dataset_labels) if facet == "dataset" else f"{facet}={value}")
        for row, metric in enumerate(metrics):
            ax = axes[row][col]
            for name in names:
                line = part[part["schedule"] == name].sort_values("d")
                if line.empty:
                    continue
                sem = line[f"{metric}_sem"].fillna(0.0).to_numpy()
                ax.errorbar(line["d"].to_numpy(dtype=float) + offsets[name],
                            line[f"{metric}_mean"].to_numpy(dtype=float), yerr=sem,
                            color=palette[name], marker=markers[name], markersize=5, capsize=3,
                            linewidth=1.5, label=schedule_label(name))
            ax.set_xticks(d_values)
            ax.set_ylabel(METRIC_LABELS.get(metric, metric))
            if row == len(metrics) - 1:
                ax.set_xlabel("d (number of partitions)")
            if row == 0:
                ax.set_title(", ".join(header))
    seeds = summary["n_seeds"]
    if seeds.max() <= 1:
        note = "one seed: no error bars"
    else:
        span = f"{int(seeds.min())}-{int(seeds.max())}" if seeds.min() != seeds.max() else f"{int(seeds.min())}"
        note = f"mean $\\pm$ standard error over {span} seeds"
    return _finish(fig, axes[0][0], f"schedule ({note})", title)


# --------------------------------------------------------------------------------------------
# Figure 9: training curves
# --------------------------------------------------------------------------------------------


def plot_training_curves(
    histories: pd.DataFrame,
    *,
    metric: str = "train_iwae",
    row: str | None = "dataset",
    col: str | None = "d",
    seed: int | str | None = "first",
    dataset_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Fig. 9: ``metric`` versus epoch per schedule, a grid of panels with rows by ``row`` and
    columns by ``col`` (either may be None or absent from the frame).

    ``seed="first"`` (default) draws the smallest seed only, as the paper's example curves, so the
    bandit's exploration dips are not averaged away; ``seed=None`` draws the mean over seeds with
    a standard-error band; an int selects that seed. Each panel's y range ignores the first tenth
    of the epochs (the steep start would otherwise flatten the curves).
    """
    _require(histories, ["epoch", "schedule", metric], "plot_training_curves")
    data = histories[histories[metric].notna()]
    if data.empty:
        raise ValueError(f"plot_training_curves: no values of {metric!r}")
    if seed is not None and "seed" in data.columns:
        chosen = data["seed"].min() if seed == "first" else seed
        data = data[data["seed"] == chosen]
        if data.empty:
            raise ValueError(f"plot_training_curves: no run with seed {seed!r}")
    row = row if row in data.columns else None
    col = col if col in data.columns else None
    rows = [k[0] for k, _ in _panels(data, [row])] if row else [None]
    cols = [k[0] for k, _ in _panels(data, [col])] if col else [None]
    names = _ordered(data["schedule"])
    palette = schedule_palette(names)
    set_style()
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.6 * len(cols) + 0.4, 3.0 * len(rows) + 0.9),
                             squeeze=False, layout="constrained")

    def header(facet: str | None, value: Any) -> str:
        if facet is None:
            return ""
        return dataset_display(value, dataset_labels) if facet == "dataset" else f"{facet}={value}"

    for i, rv in enumerate(rows):
        for j, cv in enumerate(cols):
            ax = axes[i][j]
            part = data
            if row:
                part = part[part[row] == rv]
            if col:
                part = part[part[col] == cv]
            ax.set_title(", ".join(t for t in (header(row, rv), header(col, cv)) if t))
            if part.empty:
                ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
                continue
            for name in names:
                line = part[part["schedule"] == name]
                if line.empty:
                    continue
                stats = line.groupby("epoch")[metric].agg(["mean", "std", "count"]).reset_index()
                ax.plot(stats["epoch"], stats["mean"], color=palette[name], linewidth=1.3,
                        label=schedule_label(name))
                if seed is None and (stats["count"] > 1).any():
                    err = (stats["std"] / np.sqrt(stats["count"])).fillna(0.0)
                    ax.fill_between(stats["epoch"], stats["mean"] - err, stats["mean"] + err,
                                    color=palette[name], alpha=0.2, linewidth=0)
            first, last = part["epoch"].min(), part["epoch"].max()
            late = part[part["epoch"] >= first + 0.1 * (last - first)]
            if len(late) > 1:
                lo, hi = float(late[metric].quantile(0.01)), float(late[metric].max())
                pad = 0.08 * (hi - lo if hi > lo else 1.0)
                ax.set_ylim(lo - pad, hi + pad)
            if i == len(rows) - 1:
                ax.set_xlabel("epoch")
            if j == 0:
                ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    which = ("mean $\\pm$ s.e. over seeds" if seed is None
             else f"seed {data['seed'].iloc[0]}" if "seed" in data.columns else "")
    return _finish(fig, axes, f"schedule ({which})" if which else "schedule", title)


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def _output_dir(figures_dir: str | os.PathLike[str] | None) -> Path:
    from tvolib.paths import figures_dir as default_dir

    return default_dir(figures_dir)


def save_figure(fig: Figure, name: str, figures_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png`` in ``figures_dir`` (default
    ``tvolib.paths.figures_dir()``); returns the two paths. PDF metadata carry no creation date,
    so re-running an unchanged figure gives an unchanged file."""
    if not name or Path(name).name != name or Path(name).suffix:
        raise ValueError(f"figure name must be a bare file stem such as 'fig4_vae_mnist_fashion'; got {name!r}")
    out = _output_dir(figures_dir)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    fig.savefig(paths[0], metadata={"CreationDate": None})
    fig.savefig(paths[1], metadata={"Software": None})
    return paths


def save_table(
    frame: pd.DataFrame,
    name: str,
    figures_dir: str | os.PathLike[str] | None = None,
    *,
    caption: str | None = None,
    floatfmt: str = ".3f",
) -> list[Path]:
    """Save ``frame`` as ``<name>.csv`` and ``<name>.md`` (Markdown via :func:`markdown_table`,
    preceded by ``caption`` if given); returns the two paths."""
    if not name or Path(name).name != name or Path(name).suffix:
        raise ValueError(f"table name must be a bare file stem such as 'table_wallclock'; got {name!r}")
    out = _output_dir(figures_dir)
    index = not isinstance(frame.index, pd.RangeIndex)
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    frame.to_csv(csv_path, index=index)
    text = markdown_table(frame, floatfmt=floatfmt, index=index)
    if caption:
        text = f"{caption}\n\n{text}"
    md_path.write_text(text)
    return [csv_path, md_path]


# --------------------------------------------------------------------------------------------
# Figure 6: the PCFG (Appendix D.1)
# --------------------------------------------------------------------------------------------

#: The Fig. 6 metrics (rows), as recorded by :func:`tvolib.pcfg.exact_metrics` (see its module
#: docstring for the exact definitions: ``kl_p`` averages the per-non-terminal rule KLs, and the
#: two posterior KLs renormalise ``q`` on the parses of each test sentence).
PCFG_METRICS: tuple[str, ...] = ("kl_p", "kl_q_true", "kl_q_theta")

#: Fraction of the epochs averaged after the median over seeds: the paper's last 100 of 2000.
#: Equal to ``tvolib.pcfg.TAIL_FRACTION`` (not imported: plotting must not pull in torch).
PCFG_TAIL_FRACTION: float = 0.05

#: Legend order of the PCFG methods (``tvolib.pcfg.method_label`` names).
PCFG_METHOD_ORDER: tuple[str, ...] = ("tvo-log", "tvo-gp_bandit", "reinforce", "wake-wake", "wake-sleep")

_PCFG_METHOD_LABELS: dict[str, str] = {
    "tvo-log": "TVO-log",
    "tvo-gp_bandit": "TVO-GP-bandit",
    "reinforce": "REINFORCE",
    "wake-wake": "wake-wake",
    "wake-sleep": "wake-sleep",
}

#: Axis labels of the PCFG metrics (figure) and their plain-text column names (tables).
PCFG_METRIC_LABELS: dict[str, str] = {
    "kl_p": r"KL$(p_\theta\,\|\,p_{\theta_{true}})$",
    "kl_q_true": r"KL$(q_\phi(z|x)\,\|\,p_{\theta_{true}}(z|x))$",
    "kl_q_theta": r"KL$(q_\phi(z|x)\,\|\,p_\theta(z|x))$",
    "kl_true_q": r"KL$(p_{\theta_{true}}(z|x)\,\|\,q_\phi(z|x))$",
    "q_parse_mass": r"$q_\phi$ mass on the parses of $x$",
    "kl_p_tree": r"tree KL$(p_\theta\,\|\,p_{\theta_{true}})$",
}
_PCFG_COLUMN_NAMES: dict[str, str] = {
    "kl_p": "KL(p_theta || p_true)",
    "kl_q_true": "KL(q(z|x) || p_true(z|x))",
    "kl_q_theta": "KL(q(z|x) || p_theta(z|x))",
    "kl_true_q": "KL(p_true(z|x) || q(z|x))",
    "q_parse_mass": "q mass on parses",
    "kl_p_tree": "tree KL(p_theta || p_true)",
}


def pcfg_method_label(method: str) -> str:
    """Legend label of a PCFG method (``"tvo-gp_bandit"`` -> ``"TVO-GP-bandit"``); unknown names unchanged."""
    return _PCFG_METHOD_LABELS.get(str(method), str(method))


def pcfg_palette(methods: Iterable[str]) -> dict[str, Any]:
    """A colour per PCFG method: the TVO runs take their schedule's colour from
    :func:`schedule_palette` (log orange, GP-bandit red, as in every other figure); the baselines
    take fixed colours that no schedule uses (REINFORCE brown, wake-wake cyan, wake-sleep olive)."""
    base = sns.color_palette("deep", 10)
    schedules = schedule_palette(["log", "gp_bandit"])
    fixed = {"tvo-log": schedules["log"], "tvo-gp_bandit": schedules["gp_bandit"],
             "reinforce": base[5], "wake-wake": base[9], "wake-sleep": base[8]}
    spare = [base[6], base[4], base[7]]
    palette: dict[str, Any] = {}
    extra = 0
    for name in _ordered(methods, PCFG_METHOD_ORDER):
        if name in fixed:
            palette[name] = fixed[name]
        else:
            palette[name] = spare[extra % len(spare)]
            extra += 1
    return palette


_PCFG_MARKERS: dict[str, str] = {"tvo-log": "s", "tvo-gp_bandit": "D", "reinforce": "P", "wake-wake": "*",
                                 "wake-sleep": "h"}


def _pcfg_with_method(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """``frame`` with a ``method`` column (kept if present, else from ``objective`` and ``schedule``
    by :func:`tvolib.pcfg.method_label`, the single definition of the method names)."""
    if "method" in frame.columns:
        return frame
    _require(frame, ["objective", "schedule"], what)
    from tvolib.pcfg import method_label  # lazy: pulls in torch

    methods = [method_label({"objective": o, "schedule": s}) for o, s in zip(frame["objective"], frame["schedule"])]
    return frame.assign(method=methods)


def _check_tail_fraction(tail_fraction: float) -> float:
    if isinstance(tail_fraction, bool) or not isinstance(tail_fraction, (int, float)) \
            or not (0 < float(tail_fraction) <= 1):
        raise ValueError(f"tail_fraction must be a number in (0, 1] (the paper: 100 of 2000 epochs = 0.05); "
                         f"got {tail_fraction!r}")
    return float(tail_fraction)


def pcfg_summary(
    histories: pd.DataFrame,
    metrics: Sequence[str] = PCFG_METRICS,
    *,
    tail_fraction: float = PCFG_TAIL_FRACTION,
) -> pd.DataFrame:
    """The numbers of Fig. 6: per method and S, the median over seeds at each epoch, then the mean
    of those medians over the last ``tail_fraction`` of the epochs (Appendix D.1: "the median over
    20 seeds and then ... the average over the last 100 epochs" of 2000).

    ``histories`` is a history frame of PCFG runs (:func:`collect_histories` of the
    ``tvolib.sweeps.fig6_pcfg`` configs): columns ``epoch``, ``S``, the metrics, ``method`` or
    ``objective``/``schedule``, and ``seed`` (without it each (method, S) is one run). The tail of
    a (method, S) group is its epochs ``e > E - max(1, round(tail_fraction * E))``, ``E`` its last
    epoch (the rule of ``tvolib.pcfg``'s ``*_tail`` values); epochs where a metric was not
    evaluated are skipped, and if none in the tail was, its last evaluation is used.

    Returns one row per (method, S), methods in :data:`PCFG_METHOD_ORDER`, with ``method``,
    ``S``, ``n_seeds``, ``tail_first`` / ``tail_last`` (the epochs averaged) and one column per metric.
    """
    tail_fraction = _check_tail_fraction(tail_fraction)
    if not metrics:
        raise ValueError("pcfg_summary needs at least one metric")
    if histories.empty:
        raise ValueError("pcfg_summary got an empty history frame (no runs)")
    frame = _pcfg_with_method(histories, "pcfg_summary")
    _require(frame, ["epoch", "S", *metrics], "pcfg_summary")
    rows = []
    for (method, S), part in frame.groupby(["method", "S"], sort=False):
        last = int(part["epoch"].max())
        tail = max(1, round(tail_fraction * last))
        row: dict[str, Any] = {"method": method, "S": int(S),
                               "n_seeds": int(part["seed"].nunique()) if "seed" in part.columns else 1,
                               "tail_first": max(0, last - tail + 1) if last > 0 else 0, "tail_last": last}
        for metric in metrics:
            evaluated = part[part[metric].notna()]
            if evaluated.empty:
                row[metric] = float("nan")
                continue
            window = evaluated[evaluated["epoch"] > last - tail]
            if window.empty:
                window = evaluated[evaluated["epoch"] == evaluated["epoch"].max()]
            medians = window.groupby("epoch")[metric].median()  # median over seeds, per epoch
            row[metric] = float(medians.mean())  # then the mean over the tail epochs
        rows.append(row)
    out = pd.DataFrame(rows)
    rank = {m: i for i, m in enumerate(_ordered(out["method"], PCFG_METHOD_ORDER))}
    out = out.assign(_rank=out["method"].map(rank)).sort_values(["_rank", "S"]).drop(columns="_rank")
    return out.reset_index(drop=True)


def _pcfg_summary_of(data: pd.DataFrame, metrics: Sequence[str], tail_fraction: float) -> pd.DataFrame:
    """A summary from a history frame (has ``epoch``) or an existing :func:`pcfg_summary` frame."""
    if "epoch" in data.columns:
        return pcfg_summary(data, metrics, tail_fraction=tail_fraction)
    if {"method", "S"} <= set(data.columns):
        _require(data, ["method", "S", *metrics], "plot_pcfg")
        return data
    raise ValueError("expected a PCFG history frame (columns epoch, S, objective/schedule or method, seed and the "
                     "metrics; see plotting.collect_histories) or a plotting.pcfg_summary frame; got columns "
                     f"{list(data.columns)}")


def _spans_decades(values: Iterable[float], decades: float = 1.0) -> bool:
    """True when the finite values are all positive and span at least ``decades`` powers of ten."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    return bool(arr.size > 1 and (arr > 0).all() and np.log10(arr.max() / arr.min()) >= decades)


def plot_pcfg(
    histories_or_frame: pd.DataFrame,
    *,
    metrics: Sequence[str] = PCFG_METRICS,
    tail_fraction: float = PCFG_TAIL_FRACTION,
    curves_S: int | str | None = "max",
    methods: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Fig. 6 (Appendix D.1): one row per KL metric; left, the tail mean of the median over seeds
    (:func:`pcfg_summary`) versus S, one line per method; right (when ``curves_S`` is not None and
    a history frame is given), the median-over-seeds curves versus epoch at that S (``"max"``: the
    largest), with the averaged tail shaded, to show whether the runs have settled.

    Colours: :func:`pcfg_palette` (TVO-log and TVO-GP-bandit as the log and GP-bandit schedules
    elsewhere); baselines are dashed. A panel whose positive values span a decade or more gets a
    log y axis. ``methods`` restricts and orders the methods (``tvolib.pcfg.method_label`` names).
    """
    tail_fraction = _check_tail_fraction(tail_fraction)
    if not metrics:
        raise ValueError("plot_pcfg needs at least one metric")
    data = histories_or_frame
    is_history = "epoch" in data.columns
    if is_history:
        data = _pcfg_with_method(data, "plot_pcfg")
    summary = _pcfg_summary_of(data, metrics, tail_fraction)
    if methods is not None:
        unknown = sorted(set(methods) - set(summary["method"]))
        if unknown:
            raise ValueError(f"plot_pcfg: methods {unknown} have no runs; available: {sorted(set(summary['method']))}")
        summary = summary[summary["method"].isin(methods)]
        data = data[data["method"].isin(methods)] if is_history else data
    if summary.empty:
        raise ValueError("plot_pcfg: no runs to plot")
    names = list(methods) if methods is not None else _ordered(summary["method"], PCFG_METHOD_ORDER)
    palette = pcfg_palette(names)
    S_values = sorted(int(s) for s in summary["S"].unique())
    curve_S: int | None = None
    if curves_S is not None and is_history:
        curve_S = max(S_values) if curves_S == "max" else int(curves_S)
        if curve_S not in S_values:
            raise ValueError(f"plot_pcfg: curves_S={curves_S!r} is not among the runs' S values {S_values}")
    set_style()
    ncols = 2 if curve_S is not None else 1
    fig, axes = plt.subplots(len(metrics), ncols, figsize=(5.0 * ncols + 0.6, 2.7 * len(metrics) + 1.0),
                             squeeze=False, layout="constrained")

    def style(name: str) -> dict[str, Any]:
        return dict(color=palette[name], linestyle="-" if str(name).startswith("tvo") else "--",
                    label=pcfg_method_label(name))

    for row, metric in enumerate(metrics):
        ax = axes[row][0]
        for name in names:
            line = summary[summary["method"] == name].sort_values("S")
            if line.empty:
                continue
            ax.plot(line["S"].to_numpy(dtype=float), line[metric].to_numpy(dtype=float), linewidth=1.6,
                    marker=_PCFG_MARKERS.get(name, "o"), markersize=6, **style(name))
        ax.set_xscale("log")
        ax.set_xticks(S_values)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if len(S_values) == 1:
            ax.set_xlim(S_values[0] / 1.5, S_values[0] * 1.5)
        if _spans_decades(summary[metric]):
            ax.set_yscale("log")
        ax.set_ylabel(PCFG_METRIC_LABELS.get(metric, metric))
        if row == 0:
            ax.set_title(f"median over seeds, mean over the last {tail_fraction:.0%} of epochs")
        if row == len(metrics) - 1:
            ax.set_xlabel("S (samples per data point)")
        if curve_S is None:
            continue
        ax = axes[row][1]
        part = data[(data["S"] == curve_S) & data[metric].notna()]
        shown: list[float] = []
        for name in names:
            runs = part[part["method"] == name]
            if runs.empty:
                continue
            curve = runs.groupby("epoch")[metric].median()
            ax.plot(curve.index.to_numpy(dtype=float), curve.to_numpy(dtype=float), linewidth=1.3, **style(name))
            shown.extend(curve.tolist())
        if not part.empty:
            first = summary.loc[summary["S"] == curve_S, "tail_first"].min()
            last = summary.loc[summary["S"] == curve_S, "tail_last"].max()
            lo = float(part["epoch"].min())
            ax.axvspan(max(lo, first - 0.5), last, color="grey", alpha=0.15, linewidth=0)
            ax.set_xlim(lo, max(last, lo + 1))
        if _spans_decades(shown):
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        if row == 0:
            ax.set_title(f"median over seeds per epoch, S={curve_S} (tail shaded)")
        if row == len(metrics) - 1:
            ax.set_xlabel("epoch")
    seeds = summary["n_seeds"] if "n_seeds" in summary.columns else pd.Series([1])
    span = f"{int(seeds.min())}" if seeds.min() == seeds.max() else f"{int(seeds.min())}-{int(seeds.max())}"
    return _finish(fig, axes, f"method ({span} seed{'s' if seeds.max() > 1 else ''})", title)


def pcfg_table(
    histories_or_frame: pd.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    tail_fraction: float = PCFG_TAIL_FRACTION,
) -> pd.DataFrame:
    """The Fig. 6 numbers as a table: rows (S, method), one column per metric (median over seeds,
    then mean over the tail, :func:`pcfg_summary`), plus the number of seeds and the tail epochs.

    ``metrics`` defaults to :data:`PCFG_METRICS` followed by ``q_parse_mass`` and ``kl_true_q``
    where the frame has them: the posterior KLs renormalise ``q`` on the parses of each sentence,
    so they must be read with the mass ``q`` puts on those parses (``tvolib.pcfg``).
    """
    if metrics is None:
        metrics = list(PCFG_METRICS) + [m for m in ("q_parse_mass", "kl_true_q") if m in histories_or_frame.columns]
    summary = _pcfg_summary_of(histories_or_frame, metrics, tail_fraction)
    if summary.empty:
        raise ValueError("pcfg_table: no runs")
    summary = summary.sort_values("S", kind="stable")
    table = pd.DataFrame({
        "S": summary["S"].astype(int).to_numpy(),
        "method": [pcfg_method_label(m) for m in summary["method"]],
        **{_PCFG_COLUMN_NAMES.get(m, m): summary[m].to_numpy(dtype=float) for m in metrics},
    })
    if "n_seeds" in summary.columns:
        table["seeds"] = summary["n_seeds"].astype(int).to_numpy()
    if {"tail_first", "tail_last"} <= set(summary.columns):
        table["tail epochs"] = [f"{int(a)}-{int(b)}" if a != b else f"{int(b)}"
                                for a, b in zip(summary["tail_first"], summary["tail_last"])]
    return table.set_index(["S", "method"])


def pcfg_scale_caption(configs_or_frame: Any, profile: str | None = None) -> str:
    """A one-line caption stating the scale of PCFG runs (from their configs or a frame of config
    columns): sentences, epochs, batch, learning rate, network, d, seeds and S values, with the
    paper's scale for comparison (Appendix D.1: 2000 epochs, 20 seeds, S in {2, 5, 10, 20})."""
    if isinstance(configs_or_frame, pd.DataFrame):
        frame = configs_or_frame
    else:
        frame = pd.DataFrame([_config_fields(c) for c in configs_or_frame])
    need = ["epochs", "n_train", "n_test", "batch_size", "lr", "hidden_dim", "S", "seed"]
    _require(frame, need, "pcfg_scale_caption")
    if frame.empty:
        raise ValueError("pcfg_scale_caption: no runs")

    def values(column: str, rows: pd.DataFrame = frame) -> str:
        vals = sorted(set(rows[column].dropna().tolist()))
        return f"{vals[0]:g}" if len(vals) == 1 else "{" + ", ".join(f"{v:g}" for v in vals) + "}"

    tvo = frame[frame["objective"] == "tvo"] if "objective" in frame.columns else frame
    d = f", TVO d = {values('d', tvo)}" if "d" in frame.columns and len(tvo) else ""
    words = f" (test sentences <= {values('eval_max_words')} words)" if "eval_max_words" in frame.columns else ""
    seeds = frame["seed"].nunique()
    text = (f"{values('n_train')} training / {values('n_test')} test sentences{words}, "
            f"{values('epochs')} epochs, batch {values('batch_size')}, Adam lr {values('lr')}, "
            f"GRU {values('hidden_dim')} units{d}, {seeds} seed{'s' if seeds > 1 else ''}, S in {{"
            + ", ".join(str(int(s)) for s in sorted(frame['S'].unique())) + "}")
    if profile is not None:
        text = f"profile '{profile}': {text}"
        if profile != "paper":
            text += " (reduced scale; paper: 2000 epochs, 20 seeds, S in {2, 5, 10, 20})"
    return text


__all__ += [
    "PCFG_METHOD_ORDER",
    "PCFG_METRICS",
    "PCFG_METRIC_LABELS",
    "PCFG_TAIL_FRACTION",
    "pcfg_method_label",
    "pcfg_palette",
    "pcfg_scale_caption",
    "pcfg_summary",
    "pcfg_table",
    "plot_pcfg",
]
