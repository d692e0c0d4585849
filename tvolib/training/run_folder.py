"""Run folders: checked, locked against a second process, cleaned, with checked checkpoints.

A run's results folder holds ``checkpoint.pt`` (everything needed to resume), ``model.pt`` (the
trained model, once complete, with its config's digest: :func:`load_model_state` checks it) and ``.lock``. A :class:`RunFolder` is entered before training: it
checks that the folder is a writable folder, takes an exclusive ``fcntl.flock`` on ``.lock`` (a
second process gets a clear :class:`RunFolderError`), removes temporary files left by killed
writes, and checks a checkpoint's format version, config digest and epoch before anything is
restored from it.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from tvolib.checkpoint import TMP_SUFFIX, CorruptFileError, atomic_save, load

try:  # POSIX only; elsewhere run folders are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "LOCK_NAME", "MODEL_ADVICE", "MODEL_FORMAT", "MODEL_NAME", "RunFolder",
    "RunFolderAccessError", "RunLockedError", "check_folder_path", "check_writable", "load_model_state", "model_record",
]

CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
LOCK_NAME = ".lock"
#: Version of the checkpoint layout; 1 had one optimiser state per parameter set (still read).
CHECKPOINT_FORMAT = 2
_READABLE_FORMATS = (1, 2)
_CHECKPOINT_KEYS = ("format", "digest", "epoch", "optimizers", "schedule", "rng", "history", "timers")
#: Version of the ``model.pt`` layout ``{"model_format", "digest", "state"}``; files without it
#: (written before model files carried their config's digest) hold the bare state and are still read.
MODEL_FORMAT = 1
#: What to do about a bad ``model.pt`` (``{path}``): the trainer rebuilds it from the final checkpoint.
MODEL_ADVICE = ("delete {path} and run the trainer again: it rewrites model.pt from the run's checkpoint "
                "(or retrains the run without one)")
#: Locks this process holds: resolved folder -> [lock file descriptor, times entered, thread]. A
#: folder locked by the runner is entered again by its trainer in the same thread (an ``flock``
#: taken twice through two descriptors would refuse the second); another thread is refused.
_HELD: dict[Path, list[int]] = {}
_HELD_GUARD = threading.Lock()


class RunFolderAccessError(OSError):
    """The run folder cannot be used: not a folder, not writable, or in use by another process."""


class RunLockedError(RunFolderAccessError):
    """Another process is training in the same run folder."""


def check_folder_path(folder: Path, *, what: str = "run folder", advice: str = "choose another run_dir") -> None:
    """Make sure ``folder`` is a folder or absent (not a file, not a dangling or looping link); creates nothing.

    Raises:
        RunFolderAccessError: naming the folder and what to do.
    """
    if folder.is_symlink() and not folder.exists():
        raise RunFolderAccessError(f"{what} {folder} is a symbolic link to {os.readlink(folder)!r}, which does not "
                                   f"lead to a folder (dangling or looping); remove the link, point it at a "
                                   f"folder, or {advice}")
    if folder.exists() and not folder.is_dir():
        raise RunFolderAccessError(f"{what} {folder} is a file, not a folder; remove it or {advice}")


def check_writable(folder: Path, *, what: str = "run folder", advice: str = "choose another run_dir") -> None:
    """Create ``folder`` if needed and make sure files can be written in it.

    Raises:
        RunFolderAccessError: naming the folder (also for a path that exists as a file).
    """
    check_folder_path(folder, what=what, advice=advice)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", suffix=TMP_SUFFIX, dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise RunFolderAccessError(f"{what} {folder} is not writable "
                                   f"({exc.strerror or exc}); fix its permissions or {advice}") from exc


def model_record(state: Any, digest: str) -> dict[str, Any]:
    """What ``model.pt`` holds: the trained ``state`` with its config's ``digest``."""
    return {"model_format": MODEL_FORMAT, "digest": digest, "state": state}


def load_model_state(path: str | os.PathLike[str], digest: str, *, advice: str, mmap: bool = False) -> Any:
    """The trained state in ``model.pt`` at ``path``, checked to belong to the config ``digest``.

    Raises:
        CorruptFileError: the file is damaged or holds another config's model (naming the file and
            ``advice``); ``FileNotFoundError`` when it is absent.
    """
    path = Path(path)
    record = load(path, advice=advice, mmap=mmap)
    if not isinstance(record, dict) or "model_format" not in record:
        return record  # written before model files carried their config's digest
    if record["model_format"] != MODEL_FORMAT or "state" not in record:
        raise CorruptFileError(f"{path} has model format {record['model_format']!r} (this tvolib reads "
                               f"{MODEL_FORMAT}) or no state; {advice}")
    if record.get("digest") != digest:
        raise CorruptFileError(f"{path} is the model of config {record.get('digest')!r}, not of this config "
                               f"{digest!r} (copied from another run?); {advice}")
    return record["state"]


def _check_history(path: Path, history: Any, epoch: int, advice: str) -> None:
    """A checkpoint's history must hold the rows of epochs ``0..epoch``, in order (none cut or repeated)."""
    found = [row.get("epoch") if isinstance(row, dict) else row for row in history] \
        if isinstance(history, list) else history
    if found != list(range(epoch + 1)):
        shown = found if not isinstance(found, list) or len(found) <= 12 else [*found[:5], "...", *found[-5:]]
        raise CorruptFileError(f"{path} is at epoch {epoch} but its history holds the rows of epochs {shown!r}, "
                               f"not 0..{epoch}; {advice}")


class RunFolder:
    """A results folder that one process trains in: checked, locked, cleaned, with checked checkpoints.

    Use as a context manager: entering creates the folder if needed, checks that it is a writable
    folder, takes an exclusive lock on ``.lock`` (a second process or thread gets
    :class:`RunLockedError`; the same thread may enter again, e.g. a runner and then its trainer)
    and removes temporary files left by killed writes; leaving releases the lock.

    Example:
        >>> with RunFolder("results/tvo-0123abcd") as folder:  # doctest: +SKIP
        ...     state = folder.load_checkpoint(digest, epochs=100)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ValueError(f"run_dir must be a folder path (e.g. 'results/demo'), or None to save nothing; "
                             f"got {path!r}")
        self.path = Path(path)
        self.checkpoint_path = self.path / CHECKPOINT_NAME
        self.model_path = self.path / MODEL_NAME
        self._lock_fd: int | None = None

    def __enter__(self) -> "RunFolder":
        check_writable(self.path)
        self._lock()
        self._clean_stale_temps()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._lock_fd is None:
            return
        key = self.path.resolve()
        with _HELD_GUARD:
            _HELD[key][1] -= 1
            if _HELD[key][1] == 0:
                del _HELD[key]
                os.close(self._lock_fd)  # closing releases the flock
        self._lock_fd = None

    def _lock(self) -> None:
        if fcntl is None:
            return
        with _HELD_GUARD:
            self._lock_once(self.path.resolve())

    def _lock_once(self, key: Path) -> None:
        """Take the folder's lock, or enter it again from the thread that holds it."""
        lock_path = self.path / LOCK_NAME
        if key in _HELD:  # already locked by this process: the same thread enters again
            if _HELD[key][2] != threading.get_ident():
                raise RunLockedError(f"run folder {self.path} is in use by another thread of this process (lock "
                                     f"{lock_path}); run each config from one thread at a time")
            _HELD[key][1] += 1
            self._lock_fd = _HELD[key][0]
            return
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise RunLockedError(f"run folder {self.path} is in use by another process (lock "
                                              f"{lock_path}); wait for it to finish or stop it") from exc
        self._lock_fd = fd
        _HELD[key] = [fd, 1, threading.get_ident()]

    def _clean_stale_temps(self) -> None:
        for tmp in self.path.glob(f".*{TMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)

    def load_checkpoint(self, digest: str, epochs: int, *, mmap: bool = False) -> dict[str, Any] | None:
        """The checkpoint's state (``None`` if there is none), checked before anything is restored.

        Checks: the file loads, is a dict with the expected keys, its ``format`` is one this code
        reads, its config ``digest`` equals ``digest``, its epoch lies in ``[0, epochs]``, and its
        history holds one row per epoch ``0..epoch``. ``mmap=True`` maps the tensors' bytes instead of
        reading them (to inspect the records only).
        """
        path = self.checkpoint_path
        if not path.exists():
            return None
        advice = f"delete {path} to restart this run from scratch"
        state = load(path, advice=advice, mmap=mmap)
        if not isinstance(state, dict) or any(k not in state for k in _CHECKPOINT_KEYS):
            missing = [k for k in _CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
            raise CorruptFileError(f"{path} is not a tvolib checkpoint (missing {missing}); {advice}")
        if state["format"] not in _READABLE_FORMATS:
            raise CorruptFileError(f"{path} has checkpoint format {state['format']!r}; this tvolib reads "
                                   f"{list(_READABLE_FORMATS)}; {advice}")
        if state["digest"] != digest:
            raise CorruptFileError(f"{path} belongs to config {state['digest']!r}, not to this config {digest!r}; "
                                   "use another run_dir or delete the checkpoint")
        epoch = state["epoch"]
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= epochs:
            raise CorruptFileError(f"{path} is at epoch {epoch!r}, outside this config's 0..{epochs}; {advice}")
        _check_history(path, state["history"], epoch, advice)
        return state

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Write ``state`` (with ``format`` set) atomically to ``checkpoint.pt``."""
        atomic_save({"format": CHECKPOINT_FORMAT, **state}, self.checkpoint_path)

    def save_model(self, obj: Any, digest: str) -> None:
        """Write the trained model's state with its config's ``digest`` atomically to ``model.pt``."""
        atomic_save(model_record(obj, digest), self.model_path)
