"""Atomic checkpoint files that load with ``torch.load(weights_only=True)``.

A checkpoint is written to a temporary file in the destination folder, flushed and fsync'ed,
then moved over the old one with ``os.replace`` (atomic on POSIX), so that a run killed while
saving leaves the previous checkpoint intact. Contents are restricted to what the safe
unpickler accepts (tensors, numbers, str, bool, None, lists, tuples, dicts); :func:`plain`
converts NumPy scalars/arrays and other tensors-in-records into such values.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Callable

import torch

__all__ = ["atomic_save", "atomic_write", "load", "plain", "progress_bar"]


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


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], Any], mode: str = "wb") -> Path:
    """Write ``path`` through ``write(fileobj)`` atomically: a temporary sibling, flushed and
    fsync'ed, then ``os.replace``'d over ``path``, so a killed writer leaves the old file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
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


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Save ``obj`` with ``torch.save`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: torch.save(obj, f), "wb")


def progress_bar(progress: bool | None, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on stderr, or ``None`` when ``progress`` is False (``None``: only on a terminal)."""
    if progress is None:
        try:
            progress = sys.stderr.isatty()
        except (AttributeError, ValueError):
            progress = False
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(file=sys.stderr, **tqdm_kwargs)


def load(path: str | os.PathLike[str]) -> Any:
    """Load a file written by :func:`atomic_save` with the safe unpickler, tensors on CPU."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)
