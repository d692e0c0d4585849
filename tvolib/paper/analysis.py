"""Pure pandas summaries behind the figures, and the paper's tables.

Conventions:

* A *run frame* has one row per run: the config fields (``dataset``, ``S``, ``d``, ``schedule``,
  ``seed``, ...) and the final metrics (``test_log_px``, ``test_kl``, ``train_seconds``, ...).
* A *history frame* concatenates per-epoch histories, each row carrying its run's config fields.
* List-valued cells (``betas``, ``arm``) may be lists, tuples, arrays or their string form (read
  back from CSV); :func:`as_float_list` accepts all of them.
* Error bars are mean +- standard error over seeds (``ddof=1``; NaN with a single seed).

The PCFG (Fig 6) is in :mod:`tvolib.paper.pcfg_analysis`.
"""
from __future__ import annotations

import ast
import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from tvolib.paper.names import TRAINING_PHASES, GP_VARIANT_LABELS, ordered, schedule_label

__all__ = [
    "with_series",
    "as_float_list",
    "interior",
    "mean_sem",
    "require",
    "summarise_by_schedule",
    "training_curves",
    "wallclock_table",
    "permutation_table",
    "markdown_table",
    "stage_rounds",
    "reward_observations",
    "betas_by_phase",
    "training_phase",
]


def as_float_list(value: Any) -> list[float]:
    """A list-valued cell as floats: lists, tuples, arrays, tensors and their string form
    ``"[0.0, 0.3]"`` or ``"[0.  0.3]"``; a scalar gives one element, None or NaN none."""
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):  # numpy's repr without commas
            parsed = [float(t) for t in text.strip("[]()").replace(",", " ").split()]
        return as_float_list(parsed)
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [float(value)]


def interior(arm: Any) -> list[float]:
    """The interior points ``beta_1, ..., beta_{d-1}`` of a schedule cell (a leading 0 is dropped)."""
    values = as_float_list(arm)
    return values[1:] if len(values) > 1 and values[0] == 0.0 else values


def mean_sem(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, standard error ``std(ddof=1) / sqrt(n)`` (NaN when n < 2) and n of the finite values."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    sem = float(arr.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return float(arr.mean()), sem, n


def require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` naming ``what``, the missing columns and the columns present."""
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs columns {sorted(set(columns))}; missing {missing}. "
                         f"Got columns {list(frame.columns)}")


def _sorted_by_schedule(out: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    rank = {n: i for i, n in enumerate(ordered(out["schedule"]))}
    out = out.assign(_rank=out["schedule"].map(rank))
    return out.sort_values([k for k in keys if k != "schedule"] + ["_rank"]).drop(columns="_rank")


def with_series(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each GP-bandit run of a :data:`~tvolib.paper.sweeps.PROTOCOL_SERIES` (another
    protocol than the code's) named by its series in the ``schedule`` column (``gp_bandit`` under
    ``protocol="tvolib"`` becomes ``gp_bandit_tvolib``), so that summaries keep the series apart.

    Example:
        >>> frame = pd.DataFrame({"schedule": ["gp_bandit", "gp_bandit", "log"],
        ...                       "schedule_options": [(), (("protocol", "code"),), ()]})
        >>> with_series(frame)["schedule"].tolist()      # no protocol named: the default, tvolib
        ['gp_bandit_tvolib', 'gp_bandit', 'log']
    """
    from tvolib.bandit.protocol import CONFIG_DEFAULT_PROTOCOL  # torch: only when a frame is summarised
    from tvolib.paper.sweeps import PROTOCOL_SERIES

    if frame.empty or "schedule_options" not in frame.columns:
        return frame
    out = frame.copy()

    def series(row: pd.Series) -> str:
        options = {"protocol": CONFIG_DEFAULT_PROTOCOL, **dict(row["schedule_options"] or ())}  # absent: the default
        for name, chosen in PROTOCOL_SERIES.items():
            if row["schedule"] == "gp_bandit" and all(options.get(k) == v for k, v in chosen.items()):
                return name
        return row["schedule"]

    out["schedule"] = out.apply(series, axis=1)
    return out


def summarise_by_schedule(
    frame: pd.DataFrame,
    metrics: Sequence[str] = ("test_log_px", "test_kl"),
    by: Sequence[str] = ("dataset", "S", "d", "schedule"),
) -> pd.DataFrame:
    """Mean and standard error over seeds of each metric per group of ``by`` (Figs 4, 5, 7, 8).

    Args:
        frame: a run frame.
        metrics: metric columns to summarise.
        by: grouping columns; those absent from ``frame`` are skipped.

    Returns:
        One row per group: ``*by``, ``n_seeds`` and ``<metric>_mean`` / ``<metric>_sem`` per metric,
        schedules in :data:`~tvolib.paper.names.SCHEDULE_ORDER`.
    """
    if frame.empty:
        raise ValueError("summarise_by_schedule got an empty frame (no runs)")
    require(frame, metrics, "summarise_by_schedule")
    keys = [k for k in by if k in frame.columns]
    if not keys:
        raise ValueError(f"none of the grouping columns {list(by)} is in the frame")
    rows = []
    for group, part in frame.groupby(keys, sort=True, dropna=False):
        row: dict[str, Any] = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        row["n_seeds"] = int(len(part))
        for metric in metrics:
            row[f"{metric}_mean"], row[f"{metric}_sem"], _ = mean_sem(part[metric])
        rows.append(row)
    out = pd.DataFrame(rows)
    if "schedule" in out.columns:
        out = _sorted_by_schedule(out, keys)
    return out.reset_index(drop=True)


def training_curves(
    histories: pd.DataFrame,
    metric: str = "train_iwae",
    *,
    facets: Sequence[str] = ("dataset", "d"),
    seed: int | str | None = "first",
) -> pd.DataFrame:
    """Fig 9's curves: per facet value, schedule and epoch, the mean, standard error and count of
    ``metric`` over the selected runs.

    Args:
        histories: a history frame with ``epoch``, ``schedule`` and ``metric``.
        metric: the history column drawn.
        facets: panel columns (those absent are skipped).
        seed: ``"first"`` keeps the smallest seed (the paper's example curves, so the bandit's
            exploration dips are not averaged away), an int that seed, None every seed.

    Returns:
        Columns ``*facets``, ``schedule``, ``epoch``, ``mean``, ``sem``, ``count``; the chosen seed
        (or None) is in ``attrs["seed"]``.
    """
    require(histories, ["epoch", "schedule", metric], "training_curves")
    data = histories[histories[metric].notna()]
    if data.empty:
        raise ValueError(f"training_curves: no values of {metric!r}")
    chosen = None
    if seed is not None and "seed" in data.columns:
        chosen = data["seed"].min() if seed == "first" else seed
        data = data[data["seed"] == chosen]
        if data.empty:
            raise ValueError(f"training_curves: no run with seed {seed!r}")
    keys = [f for f in facets if f in data.columns] + ["schedule", "epoch"]
    stats = data.groupby(keys, sort=True)[metric].agg(["mean", "std", "count"]).reset_index()
    stats["sem"] = (stats["std"] / np.sqrt(stats["count"])).where(stats["count"] > 1)
    stats = stats.drop(columns="std")
    stats.attrs["seed"] = None if chosen is None else int(chosen)
    return stats


def wallclock_table(
    frame: pd.DataFrame,
    *,
    time_columns: Sequence[str] = ("train_seconds", "eval_seconds", "bandit_seconds"),
    time_unit: str = "min",
    beta1_column: str = "log_beta1",
) -> pd.DataFrame:
    """The wall-clock table (Appendix D.3): per schedule the best run's test log p(x), the KL of
    that run, the number of runs and the cumulative run time of all of them.

    Args:
        frame: a run frame with the bandit runs (one per d) and the grid-searched log runs.
        time_columns: seconds summed into the run time (training, evaluation, the schedule's own
            GP fits); the first is required.
        time_unit: ``"s"``, ``"min"`` or ``"h"``.
        beta1_column: the log schedule's beta_1 column.

    Returns:
        One row per schedule, GP-bandit first, "log" labelled "grid-searched log". "Best" is the
        highest ``test_log_px`` (the paper: "we take the best log p(x) and corresponding KL").
    """
    divisors = {"s": 1.0, "min": 60.0, "h": 3600.0}
    if time_unit not in divisors:
        raise ValueError(f"time_unit must be one of {sorted(divisors)}; got {time_unit!r}")
    if not time_columns:
        raise ValueError("time_columns must name at least one column of seconds")
    require(frame, ["schedule", "test_log_px", "test_kl", time_columns[0]], "wallclock_table")
    if frame.empty:
        raise ValueError("wallclock_table got an empty frame (no runs)")
    present = [c for c in time_columns if c in frame.columns]
    rows = []
    for name in ordered(frame["schedule"], order=("gp_bandit", "log")):
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
    sem: bool = False,
) -> pd.DataFrame:
    """The permutation-invariance table (Appendix D.4): test log p(x) of sorted (permutation
    invariant) versus unsorted GP-bandit runs after ``T`` epochs, per S and d.

    Args:
        histories: a history frame with ``epoch``, ``metric``, ``seed``, ``variant`` (the schedule
            ``gp_bandit`` / ``gp_bandit_unsorted``, or a bool, True = sorted) and optionally S, d.
        budgets: the T values (default: every evaluated epoch but 0). A run contributes its last
            evaluation at or before T; cells are means over seeds.
        variant, metric: the columns named above.
        rounds: a schedule-history frame (``epoch`` and the same config columns); adds the mean
            number of bandit rounds completed by T to the column names, as the paper's header.
        sem: add each budget's standard error over seeds as a column ``"<budget column> s.e."``
            (NaN for a single seed).

    Returns:
        A frame indexed by (S, d, GP), one column per budget: ``"T=<T>"`` or ``"T=<T> / <n> rounds"``.
    """
    require(histories, ["epoch", metric, "seed", variant], "permutation_table")
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
        last = upto.groupby(run_keys, sort=True).tail(1).groupby(keys + [variant], sort=True)[metric]
        cell = last.mean()
        name = f"T={int(budget)}"
        if rounds is not None:
            require(rounds, ["epoch", "seed", variant], "permutation_table(rounds=...)")
            done = rounds[rounds["epoch"] <= budget].groupby(run_keys).size()
            name += f" / {done.mean():.0f} rounds" if len(done) else " / 0 rounds"
        columns[name] = cell
        if sem:
            columns[f"{name} s.e."] = last.agg(lambda v: mean_sem(v)[1])
    table = pd.DataFrame(columns)
    table.index = table.index.set_names(keys + ["GP"])
    rank = {True: 0, "gp_bandit": 0, False: 1, "gp_bandit_unsorted": 1}  # sorted rows first, as the paper
    order = sorted(range(len(table)), key=lambda i: (table.index[i][:-1], rank.get(table.index[i][-1], 2)))
    table = table.iloc[order]
    return table.rename(index=lambda v: GP_VARIANT_LABELS.get(v, v) if isinstance(v, (bool, np.bool_, str)) else v,
                        level="GP")


def markdown_table(frame: pd.DataFrame, *, floatfmt: str = ".3f", index: bool | None = None) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (pandas' ``to_markdown`` needs ``tabulate``).

    ``index`` defaults to True unless the index is a plain RangeIndex; NaN prints as empty.
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

    numeric = [pd.api.types.is_numeric_dtype(data[c]) and not pd.api.types.is_bool_dtype(data[c])
               for c in data.columns]
    lines = ["| " + " | ".join(fmt(c) for c in data.columns) + " |",
             "| " + " | ".join("---:" if num else ":---" for num in numeric) + " |"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in data.itertuples(index=False, name=None)]
    return "\n".join(lines) + "\n"


def _gp_rounds(frame: pd.DataFrame) -> np.ndarray:
    """Positions of the rounds that fitted a GP (``source == "gp"``; every row if not recorded)."""
    if "source" not in frame.columns:
        return np.arange(len(frame))
    return np.flatnonzero((frame["source"] == "gp").to_numpy())


def stage_rounds(
    schedule_history: pd.DataFrame,
    epochs: Sequence[int] | None = None,
    *,
    fractions: Sequence[float] = (0.2, 0.3, 1.0),
) -> list[int]:
    """Fig 2's stages: row positions of the bandit rounds to draw.

    For each of ``epochs`` (a profile's ``reward_surface_epochs``) the last GP round recorded at or
    before it (the GP as it stood then); without ``epochs``, the ``fractions`` of the last round's
    epoch (the paper: 2k, 3k, 10k of 10k). A target before the first GP round gets that round;
    duplicates are dropped; an empty list means no round fitted a GP.
    """
    require(schedule_history, ["epoch"], "stage_rounds")
    if schedule_history.empty:
        return []
    recorded = schedule_history["epoch"].to_numpy(dtype=float)
    candidates = _gp_rounds(schedule_history)
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


def reward_observations(schedule_history: pd.DataFrame) -> pd.DataFrame:
    """Fig 2's points: per bandit round of a d = 2 run, ``position`` (row), ``round``, ``epoch``,
    the chosen ``beta1`` and the observed ``reward`` (NaN where not a number); empty for a run
    without bandit rounds."""
    if schedule_history.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in ("position", "round", "epoch", "beta1", "reward")})
    require(schedule_history, ["epoch", "arm", "reward"], "reward_observations")
    hist = schedule_history.reset_index(drop=True)
    arms = [interior(a) for a in hist["arm"]]
    if any(len(a) > 1 for a in arms):
        raise ValueError("Fig 2 shows d = 2 runs only (one interior beta per arm); got a longer arm")
    return pd.DataFrame({
        "position": np.arange(len(hist)),
        "round": hist["round"].to_numpy() if "round" in hist.columns else np.arange(len(hist)),
        "epoch": hist["epoch"].to_numpy(),
        "beta1": np.array([(a or [np.nan])[0] for a in arms], dtype=float),
        "reward": pd.to_numeric(hist["reward"], errors="coerce").to_numpy(dtype=float),
    })


def betas_by_phase(frame: pd.DataFrame, column: str = "betas", keep: Sequence[str] = ()) -> pd.DataFrame:
    """Fig 3's points: one row per (epoch, j, beta) for the interior points j >= 1 of a schedule
    column (``"arm"`` of a schedule history, ``"betas"`` of a history), with the training ``phase``
    (:data:`~tvolib.paper.names.TRAINING_PHASES`: first, middle, last third of the epochs from 0;
    an epoch ending a third belongs to it) and the row's ``keep`` columns; empty for an empty frame
    (no bandit rounds)."""
    if frame.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in ("epoch", "j", "beta", "phase", *keep)})
    require(frame, ["epoch", column, *keep], "betas_by_phase")
    rows = [{"epoch": row["epoch"], "j": j, "beta": beta, **{k: row[k] for k in keep}}
            for _, row in frame.iterrows()
            for j, beta in enumerate(interior(row[column]), start=1)]
    if not rows:
        raise ValueError(f"betas_by_phase: column {column!r} holds no interior betas")
    long = pd.DataFrame(rows)
    epochs = long["epoch"].to_numpy(dtype=float)
    return long.assign(phase=training_phase(epochs, epochs.max()))


def training_phase(epochs: Any, total: Any) -> list[str]:
    """The third of training (:data:`~tvolib.paper.names.TRAINING_PHASES`) of each epoch: first,
    middle or last third of ``[0, total]``; an epoch ending a third belongs to it. ``total`` is one
    number or one per epoch (each run's length).

    Example:
        >>> training_phase([1, 20, 21, 60], 60)
        ['early', 'early', 'middle', 'late']
    """
    epochs = np.asarray(epochs, dtype=float)
    scaled = epochs / np.broadcast_to(np.asarray(total, dtype=float), epochs.shape)
    edges = np.linspace(0.0, 1.0, len(TRAINING_PHASES) + 1)[1:-1]
    return [TRAINING_PHASES[i] for i in np.digitize(scaled, edges, right=True)]
