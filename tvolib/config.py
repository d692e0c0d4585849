"""What every experiment config shares: JSON round trip, a stable digest, validated copies.

:class:`tvolib.training.RunConfig` (image models) and :class:`tvolib.training.PCFGConfig` are frozen
dataclasses that inherit these methods; the runner (:mod:`tvolib.runs`) relies only on them
and on the class attribute ``kind``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, ClassVar, TypeVar

import torch

from tvolib.checks import plain_value

__all__ = ["ExperimentConfig", "freeze", "normalise_numbers", "resolve_device"]

C = TypeVar("C", bound="ExperimentConfig")


def freeze(value: Any) -> Any:
    """Lists (e.g. from JSON) to tuples, recursively, so that configs stay hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def normalise_numbers(config: Any) -> None:
    """Set a frozen config's NumPy and torch scalars to Python values (:func:`tvolib.checks.plain_value`)
    and an int given for a ``float`` field to a float, so that every config can be written as JSON and
    equal configs share one digest (``lr=1`` and ``lr=1.0``); values already plain are left as they are
    (their digests stay)."""
    for f in dataclasses.fields(config):
        value = plain_value(getattr(config, f.name))
        if f.type in ("float", float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        object.__setattr__(config, f.name, value)


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


class ExperimentConfig:
    """Mixin for frozen config dataclasses; subclasses set ``kind`` (part of the digest)."""

    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """Field values as JSON-ready Python objects (tuples become lists)."""
        return {f.name: _thaw(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def _check_names(cls, names: Any) -> None:
        accepted = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(names) - set(accepted))
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {unknown}; accepted: {accepted}")

    @classmethod
    def from_dict(cls: type[C], d: dict[str, Any]) -> C:
        """Inverse of :meth:`to_dict`; unknown keys are rejected (a ``"kind"`` key must match :attr:`kind`)."""
        d = dict(d)
        if "kind" in d:
            kind = d.pop("kind")
            if kind != cls.kind:
                raise ValueError(f"config kind {kind!r} is not {cls.kind!r}")
        cls._check_names(d)
        return cls(**{k: freeze(v) for k, v in d.items()})

    def digest(self) -> str:
        """A stable 12-hex-digit name: sha256 of the sorted JSON of :meth:`to_dict` plus :attr:`kind`."""
        payload = json.dumps({"kind": self.kind, **self.to_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` applied (unknown names rejected with the list of fields)."""
        self._check_names(changes)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to compute on: ``device``, or CUDA when available and CPU otherwise.

    Args:
        device: ``None``, ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or a ``torch.device``.

    Returns:
        A ``torch.device``.

    Raises:
        ValueError: for a malformed or unsupported device string, or CUDA when it is unavailable.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a valid device; use 'cpu', 'cuda' or 'cuda:<index>'") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but CUDA is not available; use device='cpu'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {str(dev)!r} is not supported; use 'cpu' or 'cuda'")
    return dev
