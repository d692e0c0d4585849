"""The parsed-array cache: datasets parsed once, stored as ``.npz`` under :func:`~tvolib.data.cache_dir`.

Each cache file carries a record of what it was built from (``source``: the canonical SHA256 of
the dataset files and the derivation's parameters) and, for every array, its shape, dtype and
SHA256. :func:`cache_load` checks all of it, so a truncated file, a file built from other
sources, or one whose arrays were altered is never used: it is reported in a warning naming the
file and rebuilt from the (verified) dataset files by the caller. If no cache folder is
writable, everything still works, only slower.
"""
from __future__ import annotations

import hashlib
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np

from tvolib.checkpoint import atomic_write

from .files import cache_dir

__all__ = ["cache_path", "cache_load", "cache_save"]

#: Version of the cache file layout; part of every file name, so older layouts are ignored.
CACHE_FORMAT = 2
_META = "__meta__"


def cache_path(name: str) -> Path:
    """Where the arrays cached under ``name`` live."""
    return cache_dir() / "arrays" / f"{name}.format{CACHE_FORMAT}.npz"


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _describe(array: np.ndarray) -> dict:
    return {"shape": list(array.shape), "dtype": array.dtype.str, "sha256": _digest(array)}


def _problem(stored: dict, meta: dict, source: str, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """Why a loaded cache file must not be used, or ``None`` if it is sound."""
    if meta.get("source") != source:
        return f"built from other source files ({meta.get('source')!r}, expected {source!r})"
    for key, shape in shapes.items():
        if key not in stored:
            return f"array {key!r} is missing"
        if stored[key].shape != tuple(shape):
            return f"array {key!r} has shape {stored[key].shape}, expected {tuple(shape)}"
    for key, array in stored.items():
        if _describe(array) != meta.get("arrays", {}).get(key):
            return f"array {key!r} does not match its recorded shape, dtype and SHA256"
    return None


def cache_load(name: str, source: str, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray] | None:
    """The arrays cached under ``name``, or ``None`` when absent or unusable (to be rebuilt).

    Args:
        name: the cache entry (a file name stem).
        source: what the arrays must have been built from (see :func:`cache_save`).
        shapes: expected shape of each required array.

    Returns:
        ``{key: array}``; ``None`` if there is no such file, and also (with a warning naming the
        file and the reason) if it is unreadable, truncated, built from another source, or its
        arrays differ from their recorded shape, dtype or SHA256.
    """
    path = cache_path(name)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
        meta = json.loads(str(arrays.pop(_META))) if _META in arrays else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        reason = f"not a readable .npz ({type(err).__name__}: {err})"
    else:
        reason = "no verification record" if not isinstance(meta, dict) else _problem(arrays, meta, source, shapes)
    if reason is None:
        return arrays
    warnings.warn(f"parsed-array cache {path} is unusable: {reason}; rebuilding it from the dataset files",
                  stacklevel=2)
    return None


def cache_save(name: str, source: str, **arrays: np.ndarray) -> None:
    """Save ``arrays`` (uncompressed ``.npz``, written atomically) under ``name``, if possible.

    Args:
        name: the cache entry (a file name stem).
        source: what the arrays were built from: the canonical SHA256 of the dataset files and any
            derivation parameters; :func:`cache_load` only accepts the same string.
        arrays: the arrays; each one's shape, dtype and SHA256 are recorded with them.
    """
    path = cache_path(name)
    meta = {"format": CACHE_FORMAT, "source": source, "arrays": {k: _describe(a) for k, a in arrays.items()}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda handle: np.savez(handle, **arrays, **{_META: np.array(json.dumps(meta))}))
    except OSError as err:
        warnings.warn(f"could not write the parsed-array cache {path} ({err}); set TVOLIB_CACHE to a "
                      "writable folder to make repeated loads fast", stacklevel=2)
