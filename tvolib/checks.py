"""Input checks shared by every public entry point: clear ``ValueError``s naming the argument.

Each checker returns the (possibly converted) value or raises a ``ValueError`` that names the
argument, says what was wrong and what is accepted. The library's functions call these instead of
letting bad input fail deep inside torch.

Example:
    >>> check_log_w(torch.zeros(4, 2)).shape
    torch.Size([4, 2])
    >>> check_int("window", 0, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: window must be an integer >= 1; got 0
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "check_batch",
    "check_betas",
    "check_bool",
    "check_finite_float",
    "check_int",
    "check_log_w",
    "check_positive_ints",
    "check_samples",
    "check_state",
    "plain_value",
]


def plain_value(value: Any) -> Any:
    """``value`` with NumPy scalars and 0-d torch tensors as Python numbers, recursively in
    tuples, lists and dicts (keys kept), so that ``np.int64(2)``, ``torch.tensor(2)`` and ``2`` are
    checked, stored and hashed alike; anything else is returned as it is.

    Example:
        >>> plain_value({"kappa": np.int64(2), "box": (np.float32(0.5), 0.9), "guards": np.bool_(True)})
        {'kappa': 2, 'box': (0.5, 0.9), 'guards': True}
    """
    if isinstance(value, np.generic):
        return value.item()
    if torch.is_tensor(value) and value.numel() == 1 and value.ndim == 0:
        return value.detach().cpu().item()
    if isinstance(value, (list, tuple)):
        return type(value)(plain_value(v) for v in value)
    if isinstance(value, dict):
        return {k: plain_value(v) for k, v in value.items()}
    return value


def _scalar(value: Any) -> Any:
    """A 0-d torch tensor as its Python value; anything else as it is."""
    if torch.is_tensor(value) and value.ndim == 0:
        return value.detach().cpu().item()
    return value


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int`` (Python or NumPy integer, or a 0-d integer tensor; not a bool), in
    ``[minimum, maximum]`` where given."""
    value = _scalar(value)
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer))
    if not ok or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        if maximum is None:
            bound = "" if minimum is None else f" >= {minimum}"
        else:
            bound = f" <= {maximum}" if minimum is None else f" in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer{bound}; got {value!r}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a ``bool``: ``True`` or ``False`` (Python, NumPy or a 0-d tensor), or the integer
    ``0`` or ``1`` (of any of those kinds), the way an int given for a float becomes a float. A
    string (``"false"`` would be true), another number, ``None`` or anything else is refused.

    Example:
        >>> check_bool("sort", np.bool_(False)), check_bool("sort", 1)
        (False, True)
        >>> check_bool("time_varying", "false")
        Traceback (most recent call last):
        ...
        ValueError: time_varying must be True or False (or 0 or 1); got 'false' (a str)
    """
    plain = plain_value(value)
    if isinstance(plain, bool):
        return plain
    if isinstance(plain, int) and plain in (0, 1):
        return bool(plain)
    raise ValueError(f"{name} must be True or False (or 0 or 1); got {value!r} (a {type(value).__name__})")


def check_finite_float(
    name: str, value: Any, *, minimum: float | None = None, strict: bool = False
) -> float:
    """``value`` as a finite ``float`` (a real number or a one-element tensor), optionally bounded below.

    ``strict=True`` requires ``value > minimum``, otherwise ``value >= minimum``.
    """
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError(f"{name} must be a scalar; got a tensor of shape {tuple(value.shape)}")
        value = value.detach().cpu().item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number; got {value!r}")
    out = float(value)
    below = minimum is not None and (out <= minimum if strict else out < minimum)
    if not math.isfinite(out) or below:
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum}"
        raise ValueError(f"{name} must be a finite number{bound}; got {value!r}")
    return out


def check_positive_ints(name: str, value: Any, *, allow_empty: bool = False) -> tuple[int, ...]:
    """``value`` as a tuple of positive ints: a list or tuple such as ``(100, 100)``, not a bare int."""
    accepted = f"{name} must be a sequence of positive ints, e.g. (100, 100)"
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValueError(f"{accepted}; got {value!r}")
    items = list(value)
    if (not items and not allow_empty) or any(
        isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in items
    ):
        raise ValueError(f"{accepted}; got {value!r}")
    return tuple(int(n) for n in items)


def check_samples(S: Any, minimum: int = 1) -> int:
    """The number of importance samples per data point ``S`` as an int ``>= minimum``."""
    if isinstance(S, bool) or not isinstance(S, (int, np.integer)) or S < minimum:
        raise ValueError(f"S (samples per data point) must be an int >= {minimum}; got {S!r}")
    return int(S)


def check_log_w(log_w: Any, name: str = "log_w") -> Tensor:
    """Log importance weights: a floating-point tensor of shape ``(S, B)`` with ``S, B >= 1``.

    Entries may be ``-inf`` (a zero weight ``w = 0``) but not NaN or ``+inf``. The finiteness test
    reads one value back from the tensor's device.
    """
    if not isinstance(log_w, Tensor):
        raise ValueError(f"{name} must be a tensor of shape (S, B), samples first; got {type(log_w).__name__}")
    if log_w.ndim != 2 or log_w.shape[0] < 1 or log_w.shape[1] < 1:
        raise ValueError(f"{name} must be a tensor of shape (S, B) with S, B >= 1; got shape {tuple(log_w.shape)}")
    if not log_w.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor (float32 or float64); got {log_w.dtype} "
            "(convert with .double())"
        )
    if bool((torch.isnan(log_w) | torch.isposinf(log_w)).any()):
        raise ValueError(f"{name} contains NaN or +inf; accepted: finite values or -inf (a zero weight)")
    return log_w


def check_batch(
    x: Any, *, data_dim: int, binary: bool = False, like: Tensor | None = None, name: str = "x"
) -> Tensor:
    """A minibatch: a ``(B, data_dim)`` tensor with finite entries, in ``{0, 1}`` when ``binary``.

    The value checks (finite, binary) run on CPU tensors only, so that the GPU training loop never
    waits for the host.

    ``like`` (a model parameter) fixes the accepted device and floating dtype: integer or bool
    data are converted to ``like``'s dtype (float32 without ``like``); floating data of another
    dtype or on another device are refused, so that no silent copy or precision change happens.
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a tensor of shape (B, {data_dim}); got {type(x).__name__}")
    if x.ndim != 2 or x.shape[1] != data_dim or x.shape[0] < 1:
        raise ValueError(f"{name} must be a tensor of shape (B, {data_dim}) with B >= 1; got shape {tuple(x.shape)}")
    dtype = torch.float32 if like is None else like.dtype
    if like is not None and x.device != like.device:
        raise ValueError(f"{name} is on {x.device} but the model is on {like.device}; move it with .to({str(like.device)!r})")
    if not x.is_floating_point():
        x = x.to(dtype)
    elif like is not None and x.dtype != dtype:
        raise ValueError(f"{name} has dtype {x.dtype} but the model computes in {dtype}; convert it with .to({dtype})")
    if x.device.type != "cpu":
        # Reading a value check's verdict on an accelerator would synchronise with the host at
        # every forward pass; there the data come checked from tvolib.data, so only the shape,
        # dtype and device are checked.
        return x
    bad = ~torch.isfinite(x)
    if binary:
        bad = bad | ((x != 0) & (x != 1))
    if bool(bad.any()):
        accepted = "0 or 1 (binary data)" if binary else "finite numbers"
        raise ValueError(f"{name} has entries that are not {accepted}")
    return x


def check_betas(betas: Any, name: str = "betas") -> Tensor:
    """A left-point schedule ``0 = b_0 < b_1 < ... < b_{d-1} < 1`` as a 1-D float64 CPU tensor."""
    try:
        t = torch.as_tensor(betas, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{name} must be a 1-D sequence of numbers; got {betas!r}") from exc
    accepted = "a non-empty 1-D sequence 0 = b_0 < b_1 < ... < b_{d-1} < 1"
    if t.ndim != 1 or t.numel() == 0:
        raise ValueError(f"{name} must be {accepted}; got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be {accepted}; got non-finite values {t.tolist()}")
    if t[0].item() != 0.0:
        raise ValueError(f"{name} must be {accepted}; first point is {t[0].item()!r}, not 0")
    if t.numel() > 1 and not (t[1:] > t[:-1]).all():
        raise ValueError(f"{name} must be {accepted}; got a non-increasing sequence {t.tolist()}")
    if (t >= 1).any() or (t < 0).any():
        raise ValueError(f"{name} must be {accepted}; got points outside [0, 1): {t.tolist()}")
    return t


def check_state(state: Any, keys: Iterable[str], owner: str) -> dict[str, Any]:
    """``state`` if it is a dict holding every key in ``keys`` (for ``load_state_dict``).

    Raises a ``ValueError`` naming the first missing key and ``owner`` (the class whose
    ``state_dict`` should have produced it).
    """
    if not isinstance(state, dict):
        raise ValueError(f"{owner}.load_state_dict needs a dict from {owner}.state_dict(); got {type(state).__name__}")
    for key in keys:
        if key not in state:
            raise ValueError(f"{owner} state has no key {key!r} (keys found: {sorted(map(str, state))}); "
                             f"was it saved by {owner}.state_dict()?")
    return state
