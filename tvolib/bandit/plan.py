"""When a bandit run's GP starts: its rounds planned by the window rule, before anything trains.

A windowed schedule trains round ``k`` for ``w_k = window + window_growth * floor(k /
window_growth_every)`` epochs, the first window starting at ``burn_in``
(:meth:`~tvolib.bandit.base.BanditScheduleBase.window_length`). The GP bandit's first ``n_init``
rounds train random arms; round ``n_init`` is the first whose arm the GP chose, so it starts
training at epoch

    e_GP = burn_in + sum_{k < n_init} w_k + 1,

and a run of ``T`` epochs trains GP-chosen arms for ``max(0, T - e_GP + 1)`` of them. Early
updates (:mod:`tvolib.bandit.reward`) only shorten windows, so the GP starts at ``e_GP`` or
before. With the defaults (``window=6``, 3 d random rounds) the GP of a d = 5 bandit first
trains at epoch 96: a shorter run trains random arms only (the integrand bandit's, given the
integrand, at epoch 19: three rounds of 6 epochs).
:class:`~tvolib.bandit.GPBanditSchedule` warns (:class:`ShortRunWarning`) when told, by
``epochs=``, of a run in which GP-chosen arms would train fewer than half of the epochs.

Example:
    >>> plan = round_plan(100, burn_in=0, window=6, window_growth_every=10, window_growth=1, n_init=15)
    >>> plan.first_gp_epoch, plan.gp_epochs, plan.rounds
    (96, 5, 15)
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from ..checks import check_int

__all__ = ["RoundPlan", "ShortRunWarning", "round_plan", "schedule_plan", "short_run_message"]


class ShortRunWarning(UserWarning):
    """A bandit schedule built for a run in which its GP would choose few or none of the arms trained."""


@dataclass(frozen=True)
class RoundPlan:
    """A windowed run's rounds by the window rule, without early updates.

    Attributes:
        epochs: the run's length ``T``.
        rounds: windows that close by epoch ``T``.
        gp_rounds: of those, the windows that train an arm the GP chose (rounds ``>= n_init``).
        first_gp_epoch: the first epoch trained with a GP-chosen arm (``None``: none, or after ``T``).
        gp_epochs: epochs up to ``T`` trained with GP-chosen arms (a last unfinished window included).
        n_init: the random rounds before the GP (``None``: the schedule has no GP).
    """

    epochs: int
    rounds: int
    gp_rounds: int
    first_gp_epoch: int | None
    gp_epochs: int
    n_init: int | None

    @property
    def gp_share(self) -> float:
        """The share of the run's epochs trained with GP-chosen arms."""
        return self.gp_epochs / self.epochs if self.epochs else 0.0


def round_plan(epochs: int, *, burn_in: int, window: int, window_growth_every: int, window_growth: int,
               n_init: int | None) -> RoundPlan:
    """The rounds of a run of ``epochs`` epochs under the window rule (module docstring).

    Args:
        epochs: the run's length ``T`` (>= 0).
        burn_in, window, window_growth_every, window_growth: the schedule's window rule.
        n_init: random rounds before the GP's first arm (``None``: no GP, e.g. random search).

    Returns:
        A :class:`RoundPlan`.

    Example:
        >>> round_plan(49, burn_in=20, window=2, window_growth_every=10, window_growth=1, n_init=4)
        RoundPlan(epochs=49, rounds=13, gp_rounds=9, first_gp_epoch=29, gp_epochs=21, n_init=4)
    """
    epochs = check_int("epochs (the run's length)", epochs, 0)
    rounds, start = 0, burn_in
    first_gp = None
    while True:
        if n_init is not None and rounds == n_init:
            first_gp = start + 1
        length = window + window_growth * (rounds // window_growth_every)
        if start + length > epochs:
            break
        start += length
        rounds += 1
    gp_rounds = 0 if n_init is None else max(0, rounds - n_init)
    if first_gp is None or first_gp > epochs:
        return RoundPlan(epochs, rounds, gp_rounds, None, 0, n_init)
    return RoundPlan(epochs, rounds, gp_rounds, first_gp, epochs - first_gp + 1, n_init)


def schedule_plan(schedule: Any, epochs: int, *, integrand: bool = True) -> RoundPlan:
    """:func:`round_plan` of a bandit schedule's own window rule and random rounds.

    Args:
        schedule: a :class:`~tvolib.bandit.base.BanditScheduleBase` (``n_init``: its random rounds;
            a schedule without one, e.g. :class:`~tvolib.bandit.RandomSchedule`, has no GP).
        epochs: the run's length.
        integrand: for the integrand bandit (``protocol="integrand"``), whether the loop hands it the
            integrand (``log_weights``, as the trainer does): then its GP chooses after
            ``n_init_integrand`` rounds, else after the ``tvolib`` protocol's ``n_init``.

    Example:
        >>> from tvolib.bandit import GPBanditSchedule
        >>> schedule_plan(GPBanditSchedule(5, protocol="tvolib", device="cpu"), 100).first_gp_epoch
        96
        >>> schedule_plan(GPBanditSchedule(5, device="cpu"), 100).first_gp_epoch   # reads the integrand
        19
    """
    n_init = getattr(schedule, "n_init", None)
    if integrand and getattr(schedule, "n_init_integrand", None) is not None:
        n_init = schedule.n_init_integrand
    return round_plan(epochs, burn_in=schedule.burn_in, window=schedule.window,
                      window_growth_every=schedule.window_growth_every, window_growth=schedule.window_growth,
                      n_init=n_init)


def short_run_message(schedule: Any, epochs: int) -> str | None:
    """Why a run of ``epochs`` epochs gives ``schedule``'s GP little to do, or ``None`` when GP-chosen
    arms train at least half of the epochs.

    The message names the first GP epoch, the random rounds before it, and the window that would
    let the GP train half of the run with these random rounds (or says that none would).
    """
    plan = schedule_plan(schedule, epochs)
    if plan.n_init is None or plan.gp_share >= 0.5:
        return None
    size = f"d_max={schedule.d_max}" if hasattr(schedule, "d_max") else f"d={schedule.d}"
    name = f"{type(schedule).__name__}({size})"
    if plan.first_gp_epoch is None:
        first = schedule_plan(schedule, 10**7).first_gp_epoch
        what = (f"its first GP-chosen arm trains from epoch {first}, after {plan.n_init} random rounds, so a run "
                f"of {epochs} epochs trains random arms only")
    else:
        what = (f"its first GP-chosen arm trains from epoch {plan.first_gp_epoch}, after {plan.n_init} random "
                f"rounds, so GP-chosen arms train {plan.gp_epochs} of {epochs} epochs ({plan.gp_rounds} full "
                "windows)")
    fits = [w for w in range(schedule.window, 0, -1)
            if round_plan(epochs, burn_in=schedule.burn_in, window=w, window_growth_every=schedule.window_growth_every,
                          window_growth=schedule.window_growth, n_init=plan.n_init).gp_share >= 0.5]
    advice = (f"window={fits[0]} would let the GP train half of the run" if fits
              else f"no window does with n_init={plan.n_init} random rounds; pass a smaller n_init or train longer")
    if getattr(schedule, "n_init_integrand", None) is not None:
        what += (" when step() is handed the integrand (log_weights); without it, from epoch "
                 f"{schedule_plan(schedule, 10**7, integrand=False).first_gp_epoch}")
    return (f"{name}: {what} (window rule: window={schedule.window}, +{schedule.window_growth} every "
            f"{schedule.window_growth_every} rounds, burn_in={schedule.burn_in}; early updates only start it "
            f"sooner). {advice}.")


def warn_if_short(schedule: Any, epochs: int | None, stacklevel: int = 3) -> None:
    """Issue a :class:`ShortRunWarning` with :func:`short_run_message` when it has one (``epochs=None``: never)."""
    if epochs is None:
        return
    message = short_run_message(schedule, check_int("epochs (the run's length)", epochs, 1))
    if message is not None:
        warnings.warn(message, ShortRunWarning, stacklevel=stacklevel)
