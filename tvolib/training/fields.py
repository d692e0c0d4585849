"""Checks of config field values shared by the trainers' configs, each error naming ``Class.field=value``."""
from __future__ import annotations

import math
from typing import Any, Iterable

__all__ = ["SEED_LIMIT", "bad_field", "check_integers", "check_positive_numbers", "check_seeds"]

#: Seeds become torch generator seeds: integers in [0, 2**63).
SEED_LIMIT = 2**63


def bad_field(config: Any, name: str, what: str) -> ValueError:
    """``ValueError("Class.name=value is not accepted; what")``."""
    return ValueError(f"{type(config).__name__}.{name}={getattr(config, name)!r} is not accepted; {what}")


def check_integers(config: Any, lows: dict[str, int], optional: Iterable[str] = ()) -> None:
    """Every field in ``lows`` is an int (not a bool) >= its bound; fields in ``optional`` may be None."""
    optional = set(optional)
    for name, low in lows.items():
        value = getattr(config, name)
        if value is None and name in optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise bad_field(config, name, f"it must be an integer >= {low}" + (" or None" if name in optional else ""))


def check_positive_numbers(config: Any, names: Iterable[str]) -> None:
    """Every field in ``names`` is a finite real number > 0."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise bad_field(config, name, "it must be a finite number > 0")


def check_seeds(config: Any, names: Iterable[str]) -> None:
    """Every field in ``names`` is an int in [0, 2**63)."""
    check_integers(config, dict.fromkeys(names, 0))
    for name in names:
        if getattr(config, name) >= SEED_LIMIT:
            raise bad_field(config, name, "it must lie in [0, 2**63)")
