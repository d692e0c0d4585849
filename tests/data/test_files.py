"""Data root, checksums by content, damaged archives and verified downloads (tvolib.data.files)."""
from __future__ import annotations

import gzip
import io
import os
import urllib.request
from pathlib import Path

import pytest

import tvolib.data as D
from tvolib.data import files, sources

AMAT_TEST = "binarized_mnist/binarized_mnist_test.amat.gz"
AMAT_TRAIN = "binarized_mnist/binarized_mnist_train.amat.gz"
MNIST = [f"MNIST/raw/{name}" for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]


def _overwrite_keeping_size_and_mtime(path: Path, offset: int, data: bytes) -> None:
    """Change bytes in place, then restore the mtime: what a bad ``cp -p`` or bit rot leaves."""
    before = path.stat()
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _assert_names_file_and_remedy(err: Exception, path: Path) -> None:
    message = str(err)
    assert str(path) in message
    assert "Delete it and download it again" in message and "copy it again" in message


# ----------------------------------------------------------------------------- roots and options
def test_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("TVOLIB_DATA", str(tmp_path / "env"))
    assert D.data_root(tmp_path / "arg") == tmp_path / "arg"
    assert D.data_root() == tmp_path / "env"
    monkeypatch.delenv("TVOLIB_DATA")
    assert D.data_root() == Path.home() / ".cache" / "tvolib" / "data"


def test_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("TVOLIB_CACHE", str(tmp_path))
    assert D.cache_dir() == tmp_path
    monkeypatch.delenv("TVOLIB_CACHE")
    assert D.cache_dir() == Path.home() / ".cache" / "tvolib" / "cache"


def test_bad_root_and_download_arguments():
    with pytest.raises(TypeError, match=r"root must be a folder path .* got int 3"):
        D.data_root(3)
    with pytest.raises(ValueError, match=r"data_root must be a folder path, or None .*; got '' \(an empty path"):
        D.data_root("")  # never the default (nor the current folder)
    with pytest.raises(TypeError, match=r"download must be True, False or None, got str 'yes'"):
        files.download_enabled("yes")


# ----------------------------------------------------------------------------- checksums by content
def test_content_hash_is_memoised_until_the_file_changes(tmp_path, new_process, monkeypatch):
    new_process()
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
    assert files.verify_file(path, expected) == expected
    monkeypatch.setattr(files, "sha256_of", lambda p: pytest.fail("hashed twice"))
    assert files.verify_file(path, expected) == expected  # memoised: same inode, size, times
    monkeypatch.undo()
    new_process()
    _overwrite_keeping_size_and_mtime(path, 0, b"abd")
    with pytest.raises(D.ChecksumError) as info:
        files.verify_file(path, expected)
    assert info.value.expected == expected and info.value.actual in str(info.value)


def test_in_place_corruption_keeping_size_and_mtime_is_caught(copy_files, tmp_cache, new_process):
    """1,000 test images zeroed in a copy whose size and mtime are kept: caught in this process
    (the inode's ctime changed) and in a new one (nothing about verification is stored on disk)."""
    root = copy_files(*MNIST)
    assert D.load_dataset("mnist", root, n_train=10, n_test=10).test.shape == (10, 784)
    images = root / "MNIST/raw/t10k-images-idx3-ubyte"
    _overwrite_keeping_size_and_mtime(images, 16 + 5_000 * 784, bytes(1_000 * 784))
    for fresh in (False, True):
        if fresh:
            new_process()
        with pytest.raises(D.ChecksumError) as info:
            D.load_dataset("mnist", root)
        assert info.value.path == images and info.value.expected == D.SHA256[MNIST[2]]
        _assert_names_file_and_remedy(info.value, images)


def test_corrupt_labels_file(copy_files, tmp_cache):
    root = copy_files(*MNIST)
    labels = root / MNIST[3]
    last = labels.read_bytes()[-1]
    _overwrite_keeping_size_and_mtime(labels, labels.stat().st_size - 1, bytes([(last + 1) % 10]))
    with pytest.raises(D.ChecksumError, match="t10k-labels-idx1-ubyte is corrupt: checksum mismatch, "
                                              "expected sha256 ff7bcfd4"):
        D.load_dataset("mnist", root)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _garbled(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 64]) + data[middle + 64:]


def _not_gzip(data: bytes) -> bytes:
    return b"0 1 0 1\n" * 10


@pytest.mark.parametrize("damage", [_truncated, _garbled, _not_gzip])
def test_damaged_amat_gz_names_the_file(copy_files, tmp_cache, damage):
    root = copy_files(AMAT_TRAIN, AMAT_TEST)
    path = root / AMAT_TEST
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(D.CorruptFileError) as info:
        D.load_dataset("binarized_mnist", root)
    assert info.value.path == path
    _assert_names_file_and_remedy(info.value, path)
    assert "not a valid gzip file" in str(info.value) or isinstance(info.value, D.ChecksumError)


# ----------------------------------------------------------------------------- downloads
def test_download_without_network_gives_a_clear_error(tmp_path, tmp_cache, offline):
    with pytest.raises(D.DatasetNotFoundError, match=r"could not download http://www\.cs\.toronto\.edu/.*URLError"):
        D.load_dataset("binarized_mnist", tmp_path, download=True)
    assert not list((tmp_path / "binarized_mnist").glob("*"))  # no partial file left


def _serve(content: bytes):
    return lambda url, timeout=None: io.BytesIO(content)


def test_download_is_verified(data_root, tmp_path, tmp_cache, monkeypatch):
    good = gzip.decompress((data_root / AMAT_TEST).read_bytes())
    monkeypatch.setattr(urllib.request, "urlopen", _serve(good))
    images = sources.read_binarized_mnist("test", tmp_path, download=True)
    assert images.shape == (10_000, 784)
    assert (tmp_path / "binarized_mnist" / "binarized_mnist_test.amat").read_bytes() == good

    bad_root = tmp_path / "bad"
    monkeypatch.setattr(urllib.request, "urlopen", _serve(good.replace(b"1", b"0", 1)))
    with pytest.raises(D.ChecksumError):
        sources.read_binarized_mnist("test", bad_root, download=True)
    assert not (bad_root / "binarized_mnist" / "binarized_mnist_test.amat").exists()


def test_only_the_missing_mnist_file_is_downloaded(copy_files, tmp_cache, monkeypatch):
    root = copy_files(*MNIST[:3])
    labels = copy_files(MNIST[3]) / MNIST[3]  # the same root: a good copy to serve, then removed
    good = gzip.compress(labels.read_bytes())
    labels.unlink()
    fetched = []

    def serve(url, timeout=None):
        fetched.append(url)
        return io.BytesIO(good)

    monkeypatch.setattr(urllib.request, "urlopen", serve)
    data = D.load_dataset("mnist", root, n_train=10, n_test=10, download=True)
    assert data.test_labels.shape == (10,)
    assert [url.rsplit("/", 1)[1] for url in fetched] == ["t10k-labels-idx1-ubyte.gz"]
    assert (root / f"{MNIST[3]}.gz").read_bytes() == good
