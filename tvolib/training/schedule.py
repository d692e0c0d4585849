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
from tvolib.bandit.acquisition import acquisition_budget
from tvolib.bandit.protocol import CONFIG_DEFAULT_PROTOCOL, size_defaults
from tvolib.bias_optimal import BiasOptimalSchedule
from tvolib.checks import plain_value
from tvolib.schedules import FixedSchedule, MomentsSchedule, Schedule
from tvolib.tvo import linear, log_uniform

__all__ = [
    "BANDIT_REVISION",
    "BANDIT_SCHEDULES",
    "SCHEDULE_REVISIONS",
    "SCHEDULES",
    "SPELLED_DEFAULTS",
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
        extra = {"protocol": CONFIG_DEFAULT_PROTOCOL, **({} if device is None else {"device": device})}
        return GPBanditSchedule(d, sort=sort, time_varying=time_varying, seed=seed, **{**extra, **options})

    return build


def _random(d: int, beta_1: float, seed: int, options: dict[str, Any], device: Any) -> Schedule:
    return RandomSchedule(d, seed=seed, **{"protocol": CONFIG_DEFAULT_PROTOCOL, **options})


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
    """An int given for a parameter annotated ``float`` (and not ``int``) as a float, also inside a
    tuple; the int 0 or 1 given for a parameter annotated ``bool`` as that bool (a string stays, for
    the schedule to refuse); ``-0.0`` as ``0.0``."""
    text = str(annotation)
    if isinstance(value, tuple):
        return tuple(_as_annotated(v, "float" if re.search(r"\bfloat\b", text) and not re.search(r"\bint\b", text)
                                   else "") for v in value)
    if re.search(r"\bbool\b", text) and type(value) is int and value in (0, 1):
        return bool(value)
    if re.search(r"\bfloat\b", text) and not re.search(r"\bint\b", text) and type(value) is int:
        value = float(value)
    return value + 0.0 if type(value) is float else value  # -0.0 + 0.0 is 0.0


#: Options kept as given also at the value the schedule would pick: existing runs are named with
#: them spelled at their defaults (``burn_in=0`` and ``window=6`` in the sweeps of the smoke and
#: quick profiles), and dropping them would rename those runs.
SPELLED_DEFAULTS: tuple[str, ...] = ("burn_in", "window")
_NO_DEFAULT = object()


def _same(value: Any, default: Any) -> bool:
    """``value == default`` with equal types, element by element in tuples (``1 == True`` is not)."""
    if isinstance(value, tuple) or isinstance(default, tuple):
        return (isinstance(value, tuple) and isinstance(default, tuple) and len(value) == len(default)
                and all(_same(v, w) for v, w in zip(value, default)))
    return type(value) is type(default) and value == default


def _picked(name: str, key: str, params: dict[str, inspect.Parameter], values: dict[str, Any], d: Any) -> Any:
    """The value schedule ``name`` uses for option ``key`` when it is left out, where known from the
    config alone (else ``_NO_DEFAULT``): the constructor's default, or for ``n_init``,
    ``max_observations``, ``raw_samples`` and ``num_restarts`` the value it derives from ``d``."""
    default = CONFIG_DEFAULT_PROTOCOL if key == "protocol" else params[key].default  # a config's, not the class's
    if key in SPELLED_DEFAULTS or default is inspect.Parameter.empty:
        return _NO_DEFAULT
    if default is not None:
        return default
    protocol = values.get("protocol", CONFIG_DEFAULT_PROTOCOL if "protocol" in params else None)
    if type(d) is not int or d < 2 or not isinstance(protocol, str) or protocol not in PROTOCOLS:
        return _NO_DEFAULT
    if name in VARIABLE_D_SCHEDULES:  # AdaptiveDBanditSchedule: n_init at d_min + 3, the cap at d_max = d
        d_min = values.get("d_min", params["d_min"].default)
        if key == "n_init" and type(d_min) is int and d_min >= 2:
            return size_defaults(protocol, d_min + 3)[0]
        return size_defaults(protocol, d)[1] if key == "max_observations" else _NO_DEFAULT
    if key == "n_init" and d == 2:
        return _NO_DEFAULT  # the budget sweep's runs at d = 2 are named with n_init=6, this default, spelled
    picks = {"n_init": size_defaults(protocol, d)[0], "max_observations": size_defaults(protocol, d)[1],
             "raw_samples": acquisition_budget(d - 1)[0], "num_restarts": acquisition_budget(d - 1)[1]}
    return picks.get(key, _NO_DEFAULT)


def canonical_options(name: str, options: tuple[tuple[str, Any], ...], d: Any = None) -> tuple[tuple[str, Any], ...]:
    """Schedule ``name``'s ``options`` (sorted ``(key, value)`` pairs) in one spelling per meaning, so that
    one run has one config digest.

    NumPy and torch scalars become Python values; an int given for a ``float`` parameter becomes a
    float (``kappa=2`` is ``kappa=2.0``), ``-0.0`` becomes ``0.0``, and the int 0 or 1 given for a
    ``bool`` parameter becomes ``False`` or ``True`` (``time_varying=0`` is ``time_varying=False``;
    a string is kept, for the schedule to refuse). Options that say what leaving them out says are
    dropped: an option at its constructor's default (``kappa=None``, ``d_min=2``, ``ml_starts=200``),
    ``protocol`` at a config's default (:data:`~tvolib.bandit.protocol.CONFIG_DEFAULT_PROTOCOL`, the one a
    config that names none is built with), a protocol item at the chosen preset's value (``corner_guards=True``
    under ``"code"``, :data:`tvolib.bandit.PROTOCOLS`), and, given ``d`` (the config's), the sizes
    the schedule derives from it (``n_init=12`` and ``max_observations=120`` for ``gp_bandit`` at
    ``d = 4``, ``n_init=15`` for ``gp_bandit_adaptive``; ``raw_samples``, ``num_restarts``). So a
    config that spells such a size is the config that leaves it out, and a copy with another ``d``
    takes that ``d``'s size. Kept as given: :data:`SPELLED_DEFAULTS` and ``n_init`` at ``d = 2``,
    with which existing runs are named, and the names the builder sets itself (``sort`` of
    ``gp_bandit_unsorted``). Unknown schedules and names are left for :meth:`RunConfig.validate` to
    refuse.

    Example:
        >>> canonical_options("gp_bandit", (("corner_guards", True), ("kappa", 2), ("window", 3)))
        (('kappa', 2.0), ('window', 3))
        >>> canonical_options("gp_bandit", (("max_observations", 120), ("n_init", 12), ("window", 6)), d=4)
        (('window', 6),)
    """
    options = plain_value(tuple(options))
    if not isinstance(name, str) or name not in _REGISTRY:
        return options
    params = _constructor_parameters(name) or {}
    own = set(_REGISTRY[name][2])
    values = {k: _as_annotated(v, params[k].annotation) if k in params else v for k, v in options}
    protocol = values.get("protocol", CONFIG_DEFAULT_PROTOCOL if "protocol" in params else None)
    preset = PROTOCOLS.get(protocol, {}) if isinstance(protocol, str) else {}
    kept = []
    for key, value in values.items():
        if key in params and key not in own:
            at_preset = preset.get(key) is not None and _same(value, preset[key])
            if at_preset or (value is None and params[key].default is None) \
                    or _same(value, _picked(name, key, params, values, d)):
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
