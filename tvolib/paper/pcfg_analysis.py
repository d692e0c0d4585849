"""Fig 6's numbers (the PCFG, Appendix D.1) from the runs' per-epoch histories; pure pandas.

The one summary (the paper's order): for each method and S, the **median over seeds** at every
epoch, then the **mean of those medians** over the last ``tail_fraction`` of the epochs (the paper:
"the median over 20 seeds and then ... the average over the last 100 epochs" of 2000).
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from tvolib.paper.analysis import require
from tvolib.paper.names import PCFG_COLUMN_NAMES, PCFG_METHOD_ORDER, PCFG_METRICS, ordered, pcfg_method, pcfg_method_label

__all__ = ["check_tail_fraction", "with_method", "pcfg_summary", "pcfg_curves", "pcfg_table"]


def check_tail_fraction(tail_fraction: float) -> float:
    """``tail_fraction`` as a float, or ``ValueError`` unless it is a number in (0, 1]."""
    if isinstance(tail_fraction, bool) or not isinstance(tail_fraction, (int, float)) \
            or not (0 < float(tail_fraction) <= 1):
        raise ValueError(f"tail_fraction must be a number in (0, 1] (the paper: 100 of 2000 epochs = 0.05); "
                         f"got {tail_fraction!r}")
    return float(tail_fraction)


def with_method(frame: pd.DataFrame, what: str = "with_method") -> pd.DataFrame:
    """``frame`` with a ``method`` column (kept if present, else :func:`~tvolib.paper.names.pcfg_method`
    of ``objective`` and ``schedule``)."""
    if "method" in frame.columns:
        return frame
    require(frame, ["objective", "schedule"], what)
    return frame.assign(method=[pcfg_method(o, s) for o, s in zip(frame["objective"], frame["schedule"])])


def _tail_row(part: pd.DataFrame, metrics: Sequence[str], tail_fraction: float) -> dict[str, Any]:
    last = int(part["epoch"].max())
    tail = max(1, round(tail_fraction * last))
    row: dict[str, Any] = {"n_seeds": int(part["seed"].nunique()) if "seed" in part.columns else 1,
                           "tail_first": max(0, last - tail + 1) if last > 0 else 0, "tail_last": last}
    for metric in metrics:
        evaluated = part[part[metric].notna()]
        if evaluated.empty:
            row[metric] = float("nan")
            continue
        window = evaluated[evaluated["epoch"] > last - tail]
        if window.empty:  # nothing evaluated in the tail: the last evaluation
            window = evaluated[evaluated["epoch"] == evaluated["epoch"].max()]
        row[metric] = float(window.groupby("epoch")[metric].median().mean())
    return row


def pcfg_summary(
    histories: pd.DataFrame,
    metrics: Sequence[str] = PCFG_METRICS,
    *,
    tail_fraction: float = 0.05,
) -> pd.DataFrame:
    """Fig 6's numbers: per method and S, the median over seeds at each epoch, then the mean of
    those medians over the tail epochs ``e > E - max(1, round(tail_fraction * E))``, ``E`` the
    group's last epoch.

    Args:
        histories: a history frame of PCFG runs: ``epoch``, ``S``, the metrics, ``method`` or
            ``objective``/``schedule``, and ``seed`` (without it each (method, S) is one run).
            Epochs where a metric was not evaluated are skipped; if none in the tail was, the
            last evaluation is used.
        metrics: the metric columns.
        tail_fraction: fraction of the epochs averaged (the paper: 0.05).

    Returns:
        One row per (method, S), methods in :data:`~tvolib.paper.names.PCFG_METHOD_ORDER`:
        ``method``, ``S``, ``n_seeds``, ``tail_first`` / ``tail_last`` and one column per metric.
    """
    tail_fraction = check_tail_fraction(tail_fraction)
    if not metrics:
        raise ValueError("pcfg_summary needs at least one metric")
    if histories.empty:
        raise ValueError("pcfg_summary got an empty history frame (no runs)")
    frame = with_method(histories, "pcfg_summary")
    require(frame, ["epoch", "S", *metrics], "pcfg_summary")
    rows = [{"method": method, "S": int(S), **_tail_row(part, metrics, tail_fraction)}
            for (method, S), part in frame.groupby(["method", "S"], sort=False)]
    out = pd.DataFrame(rows)
    rank = {m: i for i, m in enumerate(ordered(out["method"], PCFG_METHOD_ORDER))}
    out = out.assign(_rank=out["method"].map(rank)).sort_values(["_rank", "S"]).drop(columns="_rank")
    return out.reset_index(drop=True)


def pcfg_curves(histories: pd.DataFrame, S: int, metrics: Sequence[str] = PCFG_METRICS) -> pd.DataFrame:
    """Fig 6's right column: the median over seeds of each metric per method and epoch at ``S``.

    Returns columns ``method``, ``epoch`` and the metrics (NaN where a metric was not evaluated);
    ``attrs["S"]`` holds ``S``.
    """
    frame = with_method(histories, "pcfg_curves")
    require(frame, ["epoch", "S", *metrics], "pcfg_curves")
    part = frame[frame["S"] == S]
    if part.empty:
        raise ValueError(f"pcfg_curves: no runs with S={S!r}; the runs have S in {sorted(frame['S'].unique())}")
    out = part.groupby(["method", "epoch"], sort=True)[list(metrics)].median().reset_index()
    out.attrs["S"] = int(S)
    return out


def pcfg_table(
    histories_or_summary: pd.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    tail_fraction: float = 0.05,
) -> pd.DataFrame:
    """Fig 6's numbers as a table: rows (S, method), one column per metric (:func:`pcfg_summary`),
    the number of seeds and the tail epochs.

    Args:
        histories_or_summary: a PCFG history frame (has ``epoch``) or a :func:`pcfg_summary` frame.
        metrics: default :data:`~tvolib.paper.names.PCFG_METRICS` plus ``q_parse_mass`` and
            ``kl_true_q`` where present: the posterior KLs renormalise q on the parses of each
            sentence, so they must be read with the mass q puts there.
        tail_fraction: as :func:`pcfg_summary` (used for a history frame).

    Returns:
        A frame indexed by (S, method label).
    """
    data = histories_or_summary
    if metrics is None:
        metrics = list(PCFG_METRICS) + [m for m in ("q_parse_mass", "kl_true_q") if m in data.columns]
    if "epoch" in data.columns:
        summary = pcfg_summary(data, metrics, tail_fraction=tail_fraction)
    else:
        require(data, ["method", "S", *metrics], "pcfg_table")
        summary = data
    if summary.empty:
        raise ValueError("pcfg_table: no runs")
    summary = summary.sort_values("S", kind="stable")
    table = pd.DataFrame({
        "S": summary["S"].astype(int).to_numpy(),
        "method": [pcfg_method_label(m) for m in summary["method"]],
        **{PCFG_COLUMN_NAMES.get(m, m): summary[m].to_numpy(dtype=float) for m in metrics},
    })
    if "n_seeds" in summary.columns:
        table["seeds"] = summary["n_seeds"].astype(int).to_numpy()
    if {"tail_first", "tail_last"} <= set(summary.columns):
        table["tail epochs"] = [f"{int(a)}-{int(b)}" if a != b else f"{int(b)}"
                                for a, b in zip(summary["tail_first"], summary["tail_last"])]
    return table.set_index(["S", "method"])
