"""Rebuild the bandit's GP from a recorded history (for Fig 2 and any post-hoc analysis).

Every history row of :class:`~tvolib.bandit.scheduler.GPBanditSchedule` holds the round's
observation (arm, round index, reward) and the hyperparameters fitted after it, plus the model's
configuration. :func:`observations` extracts the GP's training set at any round -- the scheduler
itself uses it, so the rebuilt GP is the one the bandit used, by construction.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..checks import check_int
from .model import BanditGP, Hyperparameters, training_data
from .pointwise import pointwise_reward_posterior
from .state import check_history, check_history_sequence, parse_history

__all__ = ["observations", "observed_rows", "replay", "reward_posterior"]

#: The fields of a GP round that :func:`reward_posterior` rebuilds its GP from.
_GP_FIELDS = ("lo", "hi", "t_pred", "n_obs", "t_origin", "lengthscale", "rho", "noise", "sort", "time_varying")


def _rows(schedule_history: Any) -> list[dict[str, Any]]:
    """Accept a list of dicts (``Schedule.history()``) or a pandas DataFrame of the same rows."""
    if hasattr(schedule_history, "to_dict") and hasattr(schedule_history, "columns"):
        return schedule_history.to_dict("records")
    if isinstance(schedule_history, Sequence) and all(isinstance(r, dict) for r in schedule_history):
        return list(schedule_history)
    raise TypeError(
        f"schedule_history must be a list of dicts or a pandas DataFrame; got {type(schedule_history).__name__}"
    )


def _vector(value: Any) -> list[float]:
    if isinstance(value, str):  # e.g. read back from CSV
        value = json.loads(value)
    return [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]


def _matrix(value: Any) -> list[list[float]]:
    """A list of vectors as written to a dict, or read back from CSV (JSON text)."""
    if isinstance(value, str):
        value = json.loads(value)
    return [_vector(v) for v in value]


def _flag(value: Any) -> bool:
    """A boolean field as written to a dict (bool) or read back from CSV (bool, or the text "True")."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


def _present(value: Any) -> bool:
    """Whether a field holds a value (neither None nor the NaN of a missing CSV cell)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _optional_int(value: Any) -> int | None:
    return int(value) if _present(value) else None


def observed_rows(
    rows: list[dict[str, Any]], upto_round: int | None = None, max_observations: int | None = None
) -> list[dict[str, Any]]:
    """The rows the GP learns from after ``upto_round``: those with ``round <= upto_round`` (all
    rows when ``None``) whose reward is finite and that were not skipped (non-finite rewards are
    never given to the GP), only the last ``max_observations`` when a cap is set."""
    kept = [row for row in rows
            if (upto_round is None or int(row["round"]) <= upto_round)
            and not row.get("skipped") and math.isfinite(float(row["reward"]))]
    return kept if max_observations is None else kept[-max_observations:]


def observations(
    rows: list[dict[str, Any]], upto_round: int | None = None, max_observations: int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """The GP training set ``(arms (N, n_arm), rounds (N,), rewards (N,))`` of :func:`observed_rows`.

    Arms are in beta units, as recorded (sorted or not, per the schedule).
    """
    kept = observed_rows(rows, upto_round, max_observations)
    arms = [_vector(row["arm"]) for row in kept]
    n_arm = len(arms[0]) if arms else 0
    return (
        torch.tensor(arms, dtype=torch.float64).reshape(len(arms), n_arm),
        torch.tensor([int(row["round"]) for row in kept], dtype=torch.float64),
        torch.tensor([float(row["reward"]) for row in kept], dtype=torch.float64),
    )


def _refuse_adaptive(rows: list[dict[str, Any]]) -> None:
    """Refuse the rows of an :class:`~tvolib.bandit.AdaptiveDBanditSchedule` (columns of ``d``'s
    range, or arms of more than one length), also with their ``d_max`` column dropped."""
    marks = [k for k in ("d_max", "d_min", "next_d") if any(_present(r.get(k)) for r in rows)]
    lengths = sorted({len(r["arm"]) for r in rows if isinstance(r.get("arm"), (list, tuple))})
    if marks or len(lengths) > 1:
        found = f"columns {marks}" if marks else f"arms of {lengths} points"
        lost = "" if "d_max" in marks else " (its d_max column is missing)"
        raise ValueError(f"reward_posterior rebuilds GPBanditSchedule's GP (one d); this schedule_history has {found}: "
                         f"an AdaptiveDBanditSchedule's{lost}, whose GP compares step functions of schedules of any "
                         "d; its GP rounds record the posterior at the recommendation's candidates (mean_by_d, sd_by_d)")


def reward_posterior(schedule_history: Any, round_index: int, grid: Tensor | np.ndarray | Sequence,
                     component: str = "total") -> tuple[Tensor, Tensor]:
    """Posterior mean and std of the reward ``f`` at ``grid``, as the bandit saw it after ``round_index``.

    Rebuilds the GP from the recorded observations of rounds ``0..round_index`` and the
    hyperparameters fitted at that round, and evaluates it at the time used by that round's
    acquisition (the next round, ``t_pred``), i.e. the surface whose UCB chose the next arm.
    ``grid`` is ``(n, d - 1)`` arms in beta units (``(n,)`` allowed when ``d = 2``). Returns float64
    tensors ``(n,)`` in reward units (the standardisation is undone): the std is that of the latent
    reward ``f``, without observation noise. ``component="arm"``: the arm effect alone, what the
    acquisition ranked (without a trend term in the GP, the reward less the rewards' mean; with one,
    also less the trend's prediction, the same for every arm). The rows are checked first, each value
    by its rule (:func:`~tvolib.bandit.state.check_history`; a bad one is named by row and column).
    """
    if component not in ("total", "arm"):
        raise ValueError(f"component must be 'total' or 'arm'; got {component!r}")
    rows = parse_history(_rows(schedule_history), source="schedule_history", required=("round", "arm", "reward"))
    _refuse_adaptive(rows)
    check_history(rows, source="schedule_history")  # each value by its rule (no schedule: the rows alone)
    round_index = check_int("round_index (a recorded round)", round_index, 0)
    matches = [r for r in rows if int(r["round"]) == int(round_index)]
    if not matches:
        rounds = [int(r["round"]) for r in rows]
        raise ValueError(f"round {round_index} not in the history (recorded rounds: {rounds[:3]}...{rounds[-3:]})")
    row = matches[0]
    if row.get("source") not in ("gp", "corner"):
        raise ValueError(
            f"no GP was fitted at round {round_index} (its next arm came from {row.get('source')!r}: "
            "random initial rounds and RandomSchedule have no posterior)"
        )
    missing = [k for k in _GP_FIELDS if not _present(row.get(k))]
    if missing:
        raise ValueError(f"schedule_history round {round_index} was a GP round but has no {missing} (empty or absent "
                         "cells): the GP cannot be rebuilt from it")
    lo, hi = float(row["lo"]), float(row["hi"])
    arms, rounds, rewards = observations(rows, round_index, _optional_int(row.get("max_observations")))
    n_arm = arms.shape[1]
    guards = None
    if _flag(row.get("corner_guards")):  # rows written before the protocol items have none
        if _present(row.get("guard_arms")):  # recorded since the bandit's revision 5
            guards = torch.tensor(_matrix(row["guard_arms"]), dtype=torch.float64)
        else:  # revisions 3 and 4 put the upper guard on the domain's upper corner
            guards = torch.tensor([[lo] * n_arm, _vector(row["upper"])], dtype=torch.float64)
    standardize = row.get("standardize") if isinstance(row.get("standardize"), str) else "global"
    data = training_data(arms, rounds, rewards, lo=lo, hi=hi, t_pred=int(row["t_pred"]), standardize=standardize,
                         guards=guards)
    if arms.shape[0] != int(row["n_obs"]) or data.t_origin != int(row["t_origin"]):
        raise ValueError(
            f"history is inconsistent at round {round_index}: rebuilt {arms.shape[0]} observations from round "
            f"{data.t_origin}, recorded {row['n_obs']} from round {row['t_origin']}"
        )
    trend = _flag(row.get("trend"))  # rows written before the bandit's revision 5 have none
    hp = Hyperparameters(float(row["lengthscale"]), float(row["rho"]), float(row["noise"]),
                         **({"trend_share": float(row["trend_share"]),
                             "trend_lengthscale": float(row["trend_lengthscale"])} if trend else {}))
    scale = row.get("coordinate_scale")  # rows written before the bandit's revision 4 have none
    gp = BanditGP(n_arm, sort=_flag(row["sort"]), time_varying=_flag(row["time_varying"]), hyperparameters=hp,
                  coordinate_scale=_vector(scale) if _present(scale) else None, trend=trend, device="cpu")
    gp.set_train_data(data.X, data.y)

    g = torch.as_tensor(np.asarray(grid, dtype=np.float64) if not torch.is_tensor(grid) else grid, dtype=torch.float64)
    if g.ndim == 1 and n_arm == 1:
        g = g.unsqueeze(-1)
    if g.ndim != 2 or g.shape[1] != n_arm:
        raise ValueError(f"grid must have shape (n, {n_arm}) (arms in beta units); got {tuple(g.shape)}")
    outside = ~torch.isfinite(g) | (g < 0) | (g > 1)
    if bool(outside.any()):
        raise ValueError(f"grid must hold arms in beta units, finite and in [0, 1] (the bandit's arms lie in "
                         f"[{lo}, {hi}]); got {g[outside][0].item()!r} in row {int(outside.any(dim=1).nonzero()[0])}")
    if _present(row.get("integrand")):  # the integrand bandit's GP round: its own GP over points
        kept = observed_rows(rows, round_index, _optional_int(row.get("max_observations")))
        return pointwise_reward_posterior(kept, row, g, component)
    x = torch.cat([(g - lo) / (hi - lo), torch.ones(g.shape[0], 1, dtype=torch.float64)], dim=-1)
    with torch.no_grad():
        mean, var = gp.mean_and_variance(x, component=component)
    offset = data.y_mean if component == "total" else 0.0
    return mean * data.y_std + offset, var.sqrt() * data.y_std


def replay(schedule: Any, schedule_history: Any) -> list[list[float]]:
    """The arms a fresh schedule chooses when fed a recorded history's rewards, round by round.

    ``schedule`` must be configured and seeded like the one that wrote the history and not yet
    stepped; each recorded reward is passed to ``schedule.observe`` and the arm it chooses next is
    collected. On the machine that wrote the history this reproduces its ``next_arm`` column exactly
    (the same code path on the same inputs), which makes a run's choices checkable after the fact.

    Args:
        schedule: a fresh :class:`~tvolib.bandit.GPBanditSchedule` or :class:`~tvolib.bandit.RandomSchedule`.
        schedule_history: the recorded rows (``Schedule.history()`` or a DataFrame read back from CSV).

    Returns:
        One arm (beta units, as recorded) per round.

    Raises:
        ValueError: naming the row and what disagrees: a bad cell, rows out of order or not following
            one another, a reward that contradicts ``skipped``, a value against its rule
            (:func:`~tvolib.bandit.state.check_history`, the schedule's configuration included), a
            first arm of another configuration or seed, or a choice that differs from the recorded
            ``next_arm`` (an edited reward, or another configuration or seed).
    """
    rows = parse_history(_rows(schedule_history), source="schedule_history", required=("round", "arm", "reward"))
    check_history_sequence(rows, source="schedule_history")
    check_history(rows, schedule, source="schedule_history")  # each value by its rule and the schedule's config
    arms = []
    for row in rows:
        if _vector(row["arm"]) != [float(v) for v in schedule.current_arm().tolist()]:
            raise ValueError(f"round {row['round']}: the schedule trains {schedule.current_arm().tolist()}, the "
                             f"history recorded {row['arm']}: configure and seed it like the recorded one")
        inputs = schedule.replay_inputs(row) if hasattr(schedule, "replay_inputs") else {}  # e.g. the integrand read
        schedule.observe(float(row["reward"]), **inputs)
        arms.append([float(v) for v in schedule.current_arm().tolist()])
        if "next_arm" in row and arms[-1] != row["next_arm"]:
            raise ValueError(f"round {row['round']}: after its recorded reward {row['reward']!r} the schedule chose "
                             f"{arms[-1]}, but the history records next_arm {row['next_arm']}: a reward of rounds "
                             f"0..{row['round']} was edited, or the schedule is not configured and seeded like the "
                             "recorded one")
    return arms
