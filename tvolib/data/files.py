"""Where dataset files live, how they are verified, and how they are fetched.

* The **data root** (:func:`data_root`): an explicit argument, else ``$TVOLIB_DATA``, else
  ``~/.cache/tvolib/data``. It may be read-only (the offline mirror is); nothing is ever written
  into it except a download the user asked for (``download=True`` or ``TVOLIB_DOWNLOAD=1``).
* The **checksums** below: SHA256 of every file the loaders read, taken from the canonical
  downloads (for the ``.amat`` files: of the decompressed text, which is what the Toronto URLs
  serve; also listed by tensorflow-datasets).

Verification is by **content, on first use in each process**: a file is hashed (decompressed,
for ``.gz``) the first time a process reads it, and the digest is memoised in memory only, keyed
by device, inode, size, mtime and ctime. No verdict is stored on disk, because a verdict keyed by
path, size and mtime is fooled by a file changed in place with its mtime kept (``cp -p`` or
``rsync -t`` of a bad copy, bit rot). The cost is one read of each file per process, about 0.15 s
per 50 MB: ~0.2 s for MNIST or Fashion-MNIST, ~0.2 s for binarized MNIST (decompression
included), ~0.02 s for Omniglot. A mismatch raises :class:`ChecksumError`, a damaged archive
:class:`CorruptFileError`; both name the file and what to do.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import urllib.error
import urllib.request
import zlib
from pathlib import Path

from tvolib.checkpoint import atomic_write
from tvolib.paths import choose_folder

__all__ = [
    "DatasetNotFoundError",
    "CorruptFileError",
    "ChecksumError",
    "SHA256",
    "data_root",
    "cache_dir",
    "download_enabled",
    "read_bytes",
    "sha256_of",
    "content_sha256",
    "verify_file",
    "verify_content",
    "download_file",
]

#: Canonical SHA256 of every file the loaders read, relative to the data root. For ``.amat``
#: files the value is that of the uncompressed text; a ``.amat.gz`` copy is checked after
#: decompression. The Omniglot ``.npz`` files are the project mirror's packing of the official
#: PNGs (no upstream ``.npz`` exists); Burda et al.'s ``chardata.mat`` has no published checksum,
#: so it is not verified: a run records its hash and refuses to resume on another file.
SHA256: dict[str, str] = {
    "MNIST/raw/train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "MNIST/raw/train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "MNIST/raw/t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "MNIST/raw/t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    "FashionMNIST/raw/train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "FashionMNIST/raw/train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "FashionMNIST/raw/t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "FashionMNIST/raw/t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    "binarized_mnist/binarized_mnist_train.amat": "ad693b29f94c14277b095f5238ddefbbdaaae0939789dd2f4f0205278cee3e4d",
    "binarized_mnist/binarized_mnist_valid.amat": "1de3d397c40fe8eeb33dafd4099a1f665ec01e96d9be234aaeeac8a34930e2e2",
    "binarized_mnist/binarized_mnist_test.amat": "e6687bfea3f820c174f33b7865140b2a2dd2930ef786f35d45795fc193b5ab2c",
    "omniglot/images_background.npz": "8bf84167413cd00beacdce3fe582f780ab538d8dbef043a6d688f2527bbce199",
    "omniglot/images_evaluation.npz": "0b84c7ffd94c4841c0040e529c86a82eaaccb986d8eadad5673f7991b7475276",
}

# What a truncated or garbled gzip stream raises (BadGzipFile is an OSError).
_ARCHIVE_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
# Content digests of files already hashed by this process, by _identity (see content_sha256).
_CONTENT_SHA256: dict[tuple[int, ...], str] = {}


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are missing (and could not be downloaded); the message says how to fix it."""


class CorruptFileError(OSError):
    """A dataset file exists but cannot be used (unreadable archive, wrong content); names the file."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(
            f"{path} is corrupt: {reason}. Delete it and download it again (download=True, "
            f"TVOLIB_DOWNLOAD=1 or `python -m tvolib.data --download`), or copy it again from a good copy."
        )


class ChecksumError(CorruptFileError):
    """A dataset file exists but the SHA256 of its content differs from the canonical one."""

    def __init__(self, path: str | os.PathLike[str], expected: str, actual: str) -> None:
        self.expected, self.actual = expected, actual
        super().__init__(path, f"checksum mismatch, expected sha256 {expected}, got {actual} "
                               "(the file is damaged or not the canonical one)")


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Dataset folder: ``root``, else ``$TVOLIB_DATA`` (when not empty), else ``~/.cache/tvolib/data``.

    Args:
        root: an explicit folder (``str`` or path-like), or ``None`` to defer to the others; ``""``
            is refused (:func:`tvolib.paths.choose_folder`).

    Returns:
        The folder (not checked for existence: the readers name the files they miss).
    """
    if root is not None and not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"root must be a folder path (str or os.PathLike) or None, got "
                        f"{type(root).__name__} {root!r}")
    return choose_folder(root, "TVOLIB_DATA", Path.home() / ".cache" / "tvolib" / "data", what="data_root")


def cache_dir() -> Path:
    """Folder for parsed arrays: ``$TVOLIB_CACHE``, else ``~/.cache/tvolib/cache``.

    Never inside the data root, which may be read-only (the offline mirror is).
    """
    chosen = os.environ.get("TVOLIB_CACHE") or Path.home() / ".cache" / "tvolib" / "cache"
    return Path(chosen).expanduser()


def download_enabled(download: bool | None = None) -> bool:
    """Whether a missing file may be fetched: ``download`` if given, else ``TVOLIB_DOWNLOAD=1``."""
    if download is not None:
        if not isinstance(download, bool):
            raise TypeError(f"download must be True, False or None, got {type(download).__name__} {download!r}")
        return download
    return os.environ.get("TVOLIB_DOWNLOAD", "").strip().lower() in {"1", "true", "yes"}


def read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when it ends in ``.gz``; a damaged archive raises
    :class:`CorruptFileError` naming the file."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                return handle.read()
        return path.read_bytes()
    except _ARCHIVE_ERRORS as err:
        raise _bad_archive(path, err) from err


def sha256_of(path: Path) -> str:
    """SHA256 of the file's (decompressed, for ``.gz``) content, streamed in 1 MiB blocks."""
    digest = hashlib.sha256()
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except _ARCHIVE_ERRORS as err:
        raise _bad_archive(path, err) from err
    return digest.hexdigest()


def _bad_archive(path: Path, err: BaseException) -> CorruptFileError:
    return CorruptFileError(path, f"not a valid gzip file, truncated or garbled ({type(err).__name__}: {err})")


def _identity(path: Path) -> tuple[int, ...]:
    """What changes whenever the file's content may have changed: any write, rename or
    ``utime`` sets ctime to the current time, and ctime cannot be set back by a user."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def content_sha256(path: Path) -> str:
    """SHA256 of ``path``'s (decompressed) content, hashed on first use in this process.

    The result is memoised in memory only, keyed by device, inode, size, mtime and ctime, so
    a file changed later in the same process is hashed again; nothing is kept across processes.
    """
    before = _identity(path)
    known = _CONTENT_SHA256.get(before)
    if known is not None:
        return known
    actual = sha256_of(path)
    if _identity(path) == before:  # not modified while being read
        _CONTENT_SHA256[before] = actual
    return actual


def verify_file(path: Path, expected: str | None) -> str:
    """Check ``path`` against ``expected`` (SHA256 of its decompressed content) by content.

    Args:
        path: a dataset file (``.gz`` files are checked after decompression).
        expected: the canonical SHA256, or ``None`` for files without one (only hashed).

    Returns:
        The SHA256 of the file's content.

    Raises:
        ChecksumError: the content differs from ``expected``.
        CorruptFileError: a ``.gz`` file cannot be decompressed.
    """
    actual = content_sha256(path)
    if expected is not None and actual != expected:
        raise ChecksumError(path, expected, actual)
    return actual


def verify_content(path: Path, expected: str, content: bytes) -> None:
    """Check bytes already read from ``path`` against ``expected`` (used right before parsing them)."""
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise ChecksumError(path, expected, actual)


def download_file(url: str, dest: Path, expected: str | None, *, dataset: str, timeout: float = 60.0) -> Path:
    """Fetch ``url`` into ``dest`` (atomically), verify it, and return ``dest``.

    Network and file-system failures become :class:`DatasetNotFoundError` naming the dataset, the
    URL and the destination, never a bare urllib traceback.
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=timeout) as response:
            atomic_write(dest, lambda handle: shutil.copyfileobj(response, handle, 1 << 20))
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise DatasetNotFoundError(
            f"dataset {dataset!r}: could not download {url} to {dest} ({type(err).__name__}: {err}). "
            "Check the network, or download the file by hand and put it at that path "
            "(or point TVOLIB_DATA at a folder that holds it)."
        ) from err
    try:
        verify_file(dest, expected)
    except ChecksumError:
        dest.unlink(missing_ok=True)
        raise
    return dest
