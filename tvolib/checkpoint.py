"""Atomic, durable files and safe loading: what every writer of results, caches and checkpoints uses.

Every file is written to a temporary sibling (``.<name>.*.tmp``), flushed, fsync'ed and moved over
the old one with ``os.replace`` (atomic on POSIX), so a process killed while saving keeps its
previous file; the bytes are produced in memory first, so a full disk fails cleanly and loses
nothing. Files get the permissions of the umask, like any file a user creates. Saved states load
with ``torch.load(weights_only=True)`` (no code runs from a file), and a corrupt file gives an
error that names it and says what to do.
"""
from __future__ import annotations

import errno
import io
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Any, Callable

__all__ = ["TMP_SUFFIX", "CorruptFileError", "DiskFullError", "atomic_save", "atomic_write", "load", "plain"]

#: Suffix of the temporary files of :func:`atomic_write` (a killed writer can leave one behind).
TMP_SUFFIX = ".tmp"


class CorruptFileError(ValueError):
    """A file cannot be read or holds something else than expected; the message names it and the remedy."""


class DiskFullError(OSError):
    """A file could not be written for lack of space, quota or allowed file size; the previous
    version of the file is intact."""


#: Write errors that mean "no room for this file", with what to tell the user.
_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the allowed file size (ulimit -f) or the file system",
}


# torch is imported inside the functions that need it: tvolib.plotting writes its figures with
# atomic_write and must not import torch.


def plain(obj: Any) -> Any:
    """``obj`` with NumPy values turned into Python numbers/lists, recursively (tensors kept)."""
    import torch

    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None or isinstance(obj, torch.Tensor):
        return obj
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in a checkpoint; use tensors, numbers, str, lists or dicts")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; not possible on every platform or filesystem."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], Any], mode: str = "wb") -> Path:
    """Write ``path`` through ``write(fileobj)`` atomically (temporary sibling, fsync, ``os.replace``).

    The content is produced in memory first, so ``write`` failing or the disk filling up leaves the
    old ``path`` intact; a full disk, a quota or a file-size limit raises :class:`DiskFullError`
    naming the file. The file's mode
    follows the umask (``0o666 & ~umask``).

    Example:
        >>> atomic_write("results/final.json", lambda f: f.write("{}"), "w")  # doctest: +SKIP
    """
    path = Path(path)
    buffer: IO[Any] = io.StringIO() if "b" not in mode else io.BytesIO()
    write(buffer)
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno in _NO_ROOM:
            raise DiskFullError(exc.errno, f"could not write {path}: {_NO_ROOM[exc.errno]}; "
                                            f"the previous {path.name} (if any) is intact") from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Save ``obj`` with ``torch.save`` to ``path`` atomically (see :func:`atomic_write`)."""
    import torch

    return atomic_write(path, lambda f: torch.save(obj, f), "wb")


def load(path: str | os.PathLike[str], *, advice: str | None = None, mmap: bool = False) -> Any:
    """Load a file written by :func:`atomic_save` with the safe unpickler, tensors on CPU.

    A truncated, garbled or foreign file raises :class:`CorruptFileError` naming ``path`` and
    ``advice`` (default: delete the file). ``mmap=True`` maps the tensors' bytes instead of reading
    them (a cheap check of the file's structure and records).
    """
    import torch

    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, OSError,
            AttributeError, IndexError, KeyError, TypeError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        what = advice or f"delete {path} and run again"
        raise CorruptFileError(f"{path} is corrupt or not a tvolib file ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); {what}") from exc


