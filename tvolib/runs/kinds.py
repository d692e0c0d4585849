"""The kinds of run the store knows: for each config ``kind``, its config class, trainer and loader.

A plain registry dict, imported normally: :mod:`tvolib.runs` imports the trainers, the trainers
never import :mod:`tvolib.runs`. Every registered trainer has the signature
``train(config, run_dir=None, *, data_root=None, device=None, progress=None)`` and returns an
object (or mapping) with ``history``, ``schedule_history`` and ``final``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tvolib.training import kinds as training_kinds

__all__ = ["ConfigKind", "CONFIG_KINDS", "TrainFn", "get_kind"]

#: ``train(config, run_dir=None, *, data_root=None, device=None, progress=None) -> result``.
TrainFn = Callable[..., Any]


@dataclass(frozen=True)
class ConfigKind:
    """What the store needs to know about one kind of run.

    Attributes:
        config_class: the frozen config dataclass (``from_dict``, ``to_dict``, ``digest``, ``validate``).
        train: the trainer, with the shared signature above.
        load_model: ``load_model(config, run_dir, *, device="cpu")`` of a complete run.
    """

    config_class: type
    train: TrainFn
    load_model: Callable[..., Any]


#: ``kind`` -> :class:`ConfigKind`, from the trainers' registry. Tests may register further kinds.
CONFIG_KINDS: dict[str, ConfigKind] = {
    kind: ConfigKind(config_class, training_kinds.TRAINERS[kind], training_kinds.load_model)
    for kind, config_class in training_kinds.CONFIG_KINDS.items()
}


def get_kind(kind: str) -> ConfigKind:
    """The registry entry of ``kind``; a ``ValueError`` listing the known kinds otherwise."""
    try:
        return CONFIG_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown config kind {kind!r}; accepted kinds: {', '.join(CONFIG_KINDS)}") from None
