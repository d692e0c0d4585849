"""Atomic checkpoint files that load with ``torch.load(weights_only=True)``.

A checkpoint is written to a temporary file in the destination folder, flushed and fsync'ed,
then moved over the old one with ``os.replace`` (atomic on POSIX), so that a run killed while
saving leaves the previous checkpoint intact. Contents are restricted to what the safe
unpickler accepts (tensors, numbers, str, bool, None, lists, tuples, dicts); :func:`plain`
converts NumPy scalars/arrays and other tensors-in-records into such values.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["atomic_save", "load", "plain"]


def plain(obj: Any) -> Any:
    """``obj`` with NumPy values turned into Python numbers/lists, recursively (tensors kept)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None or isinstance(obj, torch.Tensor):
        return obj
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in a checkpoint; use tensors, numbers, str, lists or dicts")


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Save ``obj`` with ``torch.save`` to ``path`` atomically (tmp file in the same folder, fsync, replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable; not possible on every platform/filesystem
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return path


def load(path: str | os.PathLike[str]) -> Any:
    """Load a file written by :func:`atomic_save` with the safe unpickler, tensors on CPU."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)
