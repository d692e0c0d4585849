"""Where dataset files live, how they are checked, and how they are fetched.

Three folders matter:

* the **data root** (:func:`data_root`): an explicit argument, else ``$TVOLIB_DATA``, else
  ``~/.cache/tvolib/data``. It may be read-only (the offline mirror is); nothing is ever written
  into it except a download the user asked for (``download=True`` or ``TVOLIB_DOWNLOAD=1``).
* the **cache** (:func:`cache_dir`): ``$TVOLIB_CACHE``, else ``~/.cache/tvolib/cache``. It holds
  parsed arrays (``.npy``) and the verdicts of checksum checks, so that repeated loads are fast.
  Cached arrays are keyed by the checksum of their source, so several data roots holding the same
  files share them. If no cache folder is writable, everything still works, only slower.
* the canonical **checksums** below: SHA256 of every file the loaders read, taken from the
  canonical downloads (for the ``.amat`` files: of the decompressed text, which is what the Toronto
  URLs serve; also listed by tensorflow-datasets). A mismatch raises :class:`ChecksumError`.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from tvolib.checkpoint import atomic_write

__all__ = [
    "DatasetNotFoundError",
    "ChecksumError",
    "SHA256",
    "data_root",
    "cache_dir",
    "download_enabled",
    "sha256_of",
    "verify_file",
    "known_sha256",
    "check_digest",
    "read_bytes",
    "download_file",
    "cache_load",
    "cache_save",
]

#: Canonical SHA256 of every file the loaders read, relative to the data root. For ``.amat``
#: files the value is that of the uncompressed text; a ``.amat.gz`` copy is checked after
#: decompression. The Omniglot ``.npz`` files are the project mirror's packing of the official
#: PNGs (no upstream ``.npz`` exists); Burda et al.'s ``chardata.mat`` has no published checksum,
#: so it is not verified.
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

_VERDICTS = "verified.json"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are missing (and could not be downloaded); the message says how to fix it."""


class ChecksumError(OSError):
    """A dataset file exists but its SHA256 differs from the canonical one."""

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        self.path, self.expected, self.actual = Path(path), expected, actual
        super().__init__(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {actual}. "
            "The file is corrupt or not the canonical one; delete it and provide a fresh copy "
            "(or download it again with download=True / TVOLIB_DOWNLOAD=1)."
        )


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Dataset folder: ``root``, else ``$TVOLIB_DATA``, else ``~/.cache/tvolib/data``."""
    chosen = root or os.environ.get("TVOLIB_DATA") or Path.home() / ".cache" / "tvolib" / "data"
    return Path(chosen).expanduser()


def cache_dir() -> Path:
    """Folder for parsed arrays and checksum verdicts: ``$TVOLIB_CACHE``, else ``~/.cache/tvolib/cache``.

    Never inside the data root, which may be read-only (the offline mirror is).
    """
    chosen = os.environ.get("TVOLIB_CACHE") or Path.home() / ".cache" / "tvolib" / "cache"
    return Path(chosen).expanduser()


def download_enabled(download: bool | None = None) -> bool:
    """Whether a missing file may be fetched: ``download`` if given, else ``TVOLIB_DOWNLOAD=1``."""
    if download is not None:
        return bool(download)
    return os.environ.get("TVOLIB_DOWNLOAD", "").strip().lower() in {"1", "true", "yes"}


def _writable_cache() -> Path | None:
    """The cache folder, created if needed, or ``None`` (with a warning) when it cannot be written."""
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, delete=True)
        probe.close()
    except OSError as err:
        warnings.warn(f"tvolib cache folder {path} is not writable ({err}); set TVOLIB_CACHE "
                      "to a writable folder to make repeated loads fast", stacklevel=3)
        return None
    return path


def read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when it ends in ``.gz``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as handle:
            return handle.read()
    return path.read_bytes()


def sha256_of(path: Path) -> str:
    """SHA256 of the file's (decompressed, for ``.gz``) content, streamed in 1 MiB blocks."""
    digest = hashlib.sha256()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stat_key(path: Path) -> tuple[str, dict[str, int]]:
    stat = path.stat()
    return str(path.resolve()), {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _load_verdicts(cache: Path) -> dict:
    try:
        return json.loads((cache / _VERDICTS).read_text())
    except (OSError, ValueError):
        return {}


def _record_verdict(path: Path, actual: str) -> None:
    cache = _writable_cache()
    if cache is None:
        return
    key, stamp = _stat_key(path)
    # Drop verdicts of files that no longer exist (temporary copies), so the file stays small.
    verdicts = {k: v for k, v in _load_verdicts(cache).items() if os.path.exists(k)}
    verdicts[key] = {**stamp, "sha256": actual}
    try:
        atomic_write(cache / _VERDICTS, lambda h: h.write(json.dumps(verdicts, indent=0).encode()))
    except OSError:
        pass


def known_sha256(path: Path) -> str | None:
    """The cached SHA256 of ``path`` if it was hashed before and its size and mtime are unchanged."""
    key, stamp = _stat_key(path)
    entry = _load_verdicts(cache_dir()).get(key)
    if entry and all(entry.get(k) == v for k, v in stamp.items()):
        return entry.get("sha256")
    return None


def check_digest(path: Path, expected: str | None, actual: str) -> None:
    """Record the hash of ``path`` and raise :class:`ChecksumError` if it is not ``expected``."""
    _record_verdict(path, actual)
    if expected is not None and actual != expected:
        raise ChecksumError(path, expected, actual)


def verify_file(path: Path, expected: str | None) -> None:
    """Check ``path`` against ``expected`` (SHA256 of its decompressed content); no-op if ``None``.

    Hashing large files costs time, so the hash is computed once and cached, keyed by the
    resolved path, size and modification time; a changed file is hashed again.
    """
    if expected is None:
        return
    actual = known_sha256(path)
    if actual is None:
        actual = sha256_of(path)
        _record_verdict(path, actual)
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


def cache_load(name: str) -> dict | None:
    """Arrays saved by :func:`cache_save` under ``name``, or ``None`` if absent or unreadable."""
    import numpy as np

    path = cache_dir() / "arrays" / f"{name}.npz"
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError, EOFError):
        return None


def cache_save(name: str, **arrays) -> None:
    """Save arrays (uncompressed ``.npz``, so loading is a plain read) under ``name``, if possible."""
    import numpy as np

    cache = _writable_cache()
    if cache is None:
        return
    path = cache / "arrays" / f"{name}.npz"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda handle: np.savez(handle, **arrays))
    except OSError as err:
        warnings.warn(f"could not cache {name} in {path.parent}: {err}", stacklevel=2)
