"""Schedules by name: the one place a config's ``schedule`` string becomes a :class:`Schedule`.

Names: ``linear`` and ``log`` (fixed, :mod:`tvolib.tvo`), ``moments`` (:mod:`tvolib.schedules`),
``gp_bandit`` (Algorithm 1), its ablations ``gp_bandit_unsorted`` and
``gp_bandit_time_invariant``, and ``random`` (random search with the bandit's windows), all
from :mod:`tvolib.bandit`. Objectives outside the TVO family train with the ELBO point ``[0]``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any, Callable

import torch

from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.schedules import FixedSchedule, MomentsSchedule, Schedule
from tvolib.tvo import linear, log_uniform

__all__ = [
    "BANDIT_REVISION",
    "BANDIT_SCHEDULES",
    "SCHEDULES",
    "config_digest",
    "make_schedule",
    "schedule_option_names",
]

#: Version of the bandit family's numbers. 2: the untrained model's evidence ``L_0`` is reported
#: before epoch 1, so round 0's reward is ``L_w - L_0`` (the paper's reward definition). 3: the
#: authors' code's protocol by default (:mod:`tvolib.bandit.protocol`). 4: the staggered domain's
#: per-point scaling. 5: the code's upper corner guard and the ``"tvolib"`` protocol.
#: Part of the bandit runs' config digests, so their cached results are not reused.
BANDIT_REVISION = GPBanditSchedule.REVISION
BANDIT_SCHEDULES: tuple[str, ...] = ("gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random")


def _fixed_linear(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return FixedSchedule(linear(d))


def _fixed_log(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return FixedSchedule(log_uniform(d, beta1=beta_1))


def _moments(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return MomentsSchedule(d, **options)


def _bandit(sort: bool, time_varying: bool) -> Callable[..., Schedule]:
    def build(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
        extra = {} if device is None else {"device": device}
        return GPBanditSchedule(d, sort=sort, time_varying=time_varying, seed=seed, **{**extra, **options})

    return build


def _random(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return RandomSchedule(d, seed=seed, **options)


#: name -> (builder, schedule class, keyword arguments the builder sets itself).
_REGISTRY: dict[str, tuple[Callable[..., Schedule], type[Schedule] | None, tuple[str, ...]]] = {
    "linear": (_fixed_linear, None, ()),
    "log": (_fixed_log, None, ()),
    "moments": (_moments, MomentsSchedule, ("d",)),
    "gp_bandit": (_bandit(True, True), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "gp_bandit_unsorted": (_bandit(False, True), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "gp_bandit_time_invariant": (_bandit(True, False), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "random": (_random, RandomSchedule, ("d", "seed")),
}
SCHEDULES: tuple[str, ...] = tuple(_REGISTRY)


def make_schedule(
    name: str,
    d: int,
    *,
    beta_1: float = 0.025,
    seed: int = 0,
    options: dict[str, Any] | None = None,
    device: str | torch.device | None = None,
    uses_schedule: bool = True,
) -> Schedule:
    """The schedule called ``name`` with ``d`` left points (Section 3 for the bandits).

    Args:
        name: one of :data:`SCHEDULES`.
        d: left points including ``b_0 = 0``.
        beta_1: first non-zero point of ``log`` (``log_uniform(d, beta_1)``).
        seed: seeds the bandit's and random search's own generator.
        options: extra keyword arguments for the schedule's constructor.
        device: where the GP bandit computes (default: its own choice).
        uses_schedule: ``False`` for objectives outside the TVO family: the fixed ELBO point ``[0]``.

    Returns:
        A fresh :class:`~tvolib.schedules.Schedule`.

    Example:
        >>> make_schedule("linear", 4).current().tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    if not uses_schedule:
        return FixedSchedule(torch.zeros(1, dtype=torch.float64))
    if name not in _REGISTRY:
        raise ValueError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")
    build = _REGISTRY[name][0]
    return build(d, beta_1, seed, dict(options or {}), device)


def schedule_option_names(name: str) -> set[str] | None:
    """Keyword arguments ``options`` may set for schedule ``name`` (``None``: anything).

    A constructor that forwards ``**kwargs`` to its base class accepts the base's names too;
    names the builder sets itself (``d``, ``seed``, ...) are excluded.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")
    _, cls, reserved = _REGISTRY[name]
    if cls is None:  # linear / log take no options (log's beta_1 is a config field)
        return set()
    named: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        named |= {p.name for p in params.values()
                  if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            break
    else:
        return None
    return named - set(reserved) - {"self"}


def config_digest(kind: str, fields: dict[str, Any], bandit: bool) -> str:
    """A config's 12-hex-digit name: sha256 of the sorted JSON of ``{"kind": kind, **fields}``.

    ``bandit=True`` (the run trains with a schedule of :data:`BANDIT_SCHEDULES`) adds
    ``bandit_revision``, so runs whose numbers changed with the bandit get new names while every
    other config keeps its name.
    """
    payload = {"kind": kind, **fields}
    if bandit:
        payload["bandit_revision"] = BANDIT_REVISION
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
