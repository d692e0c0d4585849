"""Schedules by name: the one place a config's ``schedule`` string becomes a :class:`Schedule`.

Names: ``linear`` and ``log`` (fixed, :mod:`tvolib.tvo`), ``moments`` (:mod:`tvolib.schedules`),
``bias_optimal`` (the grid schedule with the largest estimated TVO, :mod:`tvolib.bias_optimal`),
``gp_bandit`` (Algorithm 1), its ablations ``gp_bandit_unsorted`` and
``gp_bandit_time_invariant``, ``random`` (random search with the bandit's windows), and
``gp_bandit_adaptive`` (the bandit that also chooses ``d`` every round, up to the config's ``d``:
:class:`~tvolib.bandit.AdaptiveDBanditSchedule`), all from :mod:`tvolib.bandit`. Objectives
outside the TVO family train with the ELBO point ``[0]``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import re
from typing import Any, Callable

import torch

from tvolib.bandit import PROTOCOLS, AdaptiveDBanditSchedule, GPBanditSchedule, RandomSchedule
from tvolib.bias_optimal import BiasOptimalSchedule
from tvolib.checks import plain_value
from tvolib.schedules import FixedSchedule, MomentsSchedule, Schedule
from tvolib.tvo import linear, log_uniform

__all__ = [
    "BANDIT_REVISION",
    "BANDIT_SCHEDULES",
    "SCHEDULE_REVISIONS",
    "SCHEDULES",
    "VARIABLE_D_SCHEDULES",
    "canonical_options",
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
BANDIT_SCHEDULES: tuple[str, ...] = ("gp_bandit", "gp_bandit_unsorted", "gp_bandit_time_invariant", "random",
                                     "gp_bandit_adaptive")
#: Revisions of one schedule's numbers beyond :data:`BANDIT_REVISION` (schedule -> revision): part
#: of that schedule's runs' digests only, so its cached results are not reused while every other
#: run keeps its name.
SCHEDULE_REVISIONS: dict[str, int] = {"gp_bandit_adaptive": AdaptiveDBanditSchedule.D_CHOICE_REVISION}
#: Schedules whose length changes between epochs: the config's ``d`` is their largest (``d_max``);
#: in a stack of that ``d`` their shorter schedules are padded with intervals of width zero
#: (:func:`~tvolib.stacked.objectives.left_points`).
VARIABLE_D_SCHEDULES: tuple[str, ...] = ("gp_bandit_adaptive",)


def _fixed_linear(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return FixedSchedule(linear(d))


def _fixed_log(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return FixedSchedule(log_uniform(d, beta1=beta_1))


def _moments(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return MomentsSchedule(d, **options)


def _bias_optimal(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return BiasOptimalSchedule(d, **options)


def _bandit(sort: bool, time_varying: bool) -> Callable[..., Schedule]:
    def build(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
        extra = {} if device is None else {"device": device}
        return GPBanditSchedule(d, sort=sort, time_varying=time_varying, seed=seed, **{**extra, **options})

    return build


def _random(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return RandomSchedule(d, seed=seed, **options)


def _adaptive(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    """The config's ``d`` is ``d_max``: the most left points the run may train with."""
    extra = {} if device is None else {"device": device}
    return AdaptiveDBanditSchedule(d, seed=seed, **{**extra, **options})


#: name -> (builder, schedule class, keyword arguments the builder sets itself).
_REGISTRY: dict[str, tuple[Callable[..., Schedule], type[Schedule] | None, tuple[str, ...]]] = {
    "linear": (_fixed_linear, None, ()),
    "log": (_fixed_log, None, ()),
    "moments": (_moments, MomentsSchedule, ("d",)),
    "bias_optimal": (_bias_optimal, BiasOptimalSchedule, ("d",)),
    "gp_bandit": (_bandit(True, True), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "gp_bandit_unsorted": (_bandit(False, True), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "gp_bandit_time_invariant": (_bandit(True, False), GPBanditSchedule, ("d", "sort", "time_varying", "seed")),
    "random": (_random, RandomSchedule, ("d", "seed")),
    "gp_bandit_adaptive": (_adaptive, AdaptiveDBanditSchedule, ("d", "d_max", "sort", "seed")),
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
        d: left points including ``b_0 = 0`` (the most, ``d_max``, for :data:`VARIABLE_D_SCHEDULES`).
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


def _constructor_parameters(name: str) -> dict[str, inspect.Parameter] | None:
    """Keyword parameters of schedule ``name``'s constructor, through the base classes it forwards
    ``**kwargs`` to; ``None`` when it forwards them to no named base (anything is accepted)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")
    cls = _REGISTRY[name][1]
    if cls is None:  # linear / log take no options (log's beta_1 is a config field)
        return {}
    named: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        for p in params.values():
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                named.setdefault(p.name, p)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return named
    return None


def schedule_option_names(name: str) -> set[str] | None:
    """Keyword arguments ``options`` may set for schedule ``name`` (``None``: anything).

    A constructor that forwards ``**kwargs`` to its base class accepts the base's names too;
    names the builder sets itself (``d``, ``seed``, ...) are excluded.
    """
    params = _constructor_parameters(name)
    if params is None:
        return None
    return set(params) - set(_REGISTRY[name][2]) - {"self"}


def _as_annotated(value: Any, annotation: Any) -> Any:
    """An int given for a parameter annotated ``float`` (and not ``int``) as a float, also inside a tuple."""
    text = str(annotation)
    if not re.search(r"\bfloat\b", text) or re.search(r"\bint\b", text):
        return value
    if isinstance(value, tuple):
        return tuple(_as_annotated(v, "float") for v in value)
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def canonical_options(name: str, options: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """Schedule ``name``'s ``options`` (sorted ``(key, value)`` pairs) in one spelling per meaning, so that
    one run has one config digest.

    NumPy and torch scalars become Python values; an int given for a ``float`` parameter becomes a
    float (``kappa=2`` is ``kappa=2.0``); options that say what leaving them out says are dropped:
    ``None`` for a parameter whose default is ``None`` (``kappa=None``), ``protocol`` at its default,
    and a protocol item at the chosen preset's value (``corner_guards=True`` under ``"code"``,
    :data:`tvolib.bandit.PROTOCOLS`). Every other option is kept as given, also at its default
    (``burn_in=0``), so that existing configs keep their names. Unknown schedules and names are left
    for :meth:`RunConfig.validate` to refuse.

    Example:
        >>> canonical_options("gp_bandit", (("corner_guards", True), ("kappa", 2), ("window", 3)))
        (('kappa', 2.0), ('window', 3))
    """
    options = plain_value(tuple(options))
    if not isinstance(name, str) or name not in _REGISTRY:
        return options
    params = _constructor_parameters(name) or {}
    values = dict(options)
    default_protocol = params["protocol"].default if "protocol" in params else None
    protocol = values.get("protocol", default_protocol)
    preset = PROTOCOLS.get(protocol, {}) if isinstance(protocol, str) else {}
    kept = []
    for key, value in options:
        param = params.get(key)
        if param is not None:
            value = _as_annotated(value, param.annotation)
            at_preset = preset.get(key) is not None and type(value) is type(preset[key]) and value == preset[key]
            if (value is None and param.default is None) or (key == "protocol" and value == default_protocol) \
                    or at_preset:
                continue
        kept.append((key, value))
    return tuple(kept)


def config_digest(kind: str, fields: dict[str, Any], bandit: bool) -> str:
    """A config's 12-hex-digit name: sha256 of the sorted JSON of ``{"kind": kind, **fields}``.

    ``bandit=True`` (the run trains with a schedule of :data:`BANDIT_SCHEDULES`) adds
    ``bandit_revision``, and for a schedule of :data:`SCHEDULE_REVISIONS` its ``schedule_revision``,
    so runs whose numbers changed with the bandit get new names while every other config keeps its name.
    """
    payload = {"kind": kind, **fields}
    if bandit:
        payload["bandit_revision"] = BANDIT_REVISION
        if fields.get("schedule") in SCHEDULE_REVISIONS:
            payload["schedule_revision"] = SCHEDULE_REVISIONS[fields["schedule"]]
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
