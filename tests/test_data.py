"""Tests of the data layer (issue 2, "Data layer") against the offline mirror (``data_root`` fixture)."""
from __future__ import annotations

import gzip
import io
import os
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from hypothesis import given, settings, strategies as st

import tvolib.data as D
from tvolib.data import sources
from tvolib.data.__main__ import main as data_cli

MIRROR_AMAT_TEST = "binarized_mnist/binarized_mnist_test.amat.gz"


@pytest.fixture(scope="module")
def load(data_root):
    """Memoised loader so that each full dataset is read once per module."""

    @lru_cache(maxsize=None)
    def _load(name: str, **kwargs) -> D.BinaryImageData:
        return D.load_dataset(name, data_root, **kwargs)

    return lambda name, **kwargs: _load(name, **kwargs)


@pytest.fixture
def offline(monkeypatch):
    """No download allowed, and any network access fails like a machine without internet."""
    monkeypatch.delenv("TVOLIB_DOWNLOAD", raising=False)

    def no_network(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("TVOLIB_CACHE", str(cache))
    return cache


def _is_binary(x: torch.Tensor) -> bool:
    return bool(((x == 0) | (x == 1)).all())


# ----------------------------------------------------------------------------- roots and caches
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


# ----------------------------------------------------------------------------- MNIST, Fashion MNIST
@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_grey_datasets_shapes_values_and_fixed_test(load, data_root, name):
    data = load(name)
    assert data.name == name and data.dynamic_binarization
    assert data.train.shape == (60_000, 784) and data.test.shape == (10_000, 784)
    for t in (data.train, data.test, data.train_mean):
        assert t.dtype == torch.float32 and t.device.type == "cpu"
    assert data.train.min() >= 0 and data.train.max() <= 1
    assert not _is_binary(data.train)  # grey levels before binarization
    assert _is_binary(data.test)
    assert data.train_labels.shape == (60_000,) and set(data.test_labels.unique().tolist()) == set(range(10))
    torch.testing.assert_close(data.train_mean, data.train.mean(0))
    again = D.load_dataset(name, data_root)  # a fresh load: same fixed test binarization
    assert again.test.equal(data.test)


def test_mnist_test_binarization_follows_grey_levels(data_root):
    import torchvision

    grey = torchvision.datasets.MNIST(str(data_root), train=False).data.reshape(-1, 784).float() / 255
    test = D.load_dataset("mnist", data_root).test
    assert not test[grey == 0].any()
    assert test[grey == 1].all()
    assert abs(test.mean() - grey.mean()) < 2e-3


def test_test_binarization_is_fixed_across_run_seeds_not_dataset_seeds(load):
    base = load("mnist")
    assert load("mnist", seed=3).test.equal(base.test)  # comparable across runs
    assert not load("mnist", dataset_seed=1).test.equal(base.test)
    assert load("mnist", seed=3).train.equal(base.train)  # grey levels: nothing random


def test_dynamic_binarization_draws(load):
    data = load("mnist", n_train=5_000)  # same code path as the full set, 12x cheaper draws
    first = data.train_epoch(torch.Generator().manual_seed(0))
    again = data.train_epoch(torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    epoch1, epoch2 = data.train_epoch(gen), data.train_epoch(gen)
    assert first.dtype == torch.float32 and first.shape == data.train.shape and _is_binary(first)
    assert first.equal(again)  # seeded
    assert not epoch1.equal(epoch2)  # a fresh draw each epoch
    assert 0.01 < (epoch1 != epoch2).float().mean() < 0.2
    assert not epoch1[data.train == 0].any() and epoch1[data.train == 1].all()
    assert abs(epoch1.mean() - data.train.mean()) < 1e-3


# ----------------------------------------------------------------------------- binarized MNIST
def test_binarized_mnist(load, data_root):
    data = load("binarized_mnist")
    assert data.label == "binarized MNIST" and not data.dynamic_binarization
    assert data.train.shape == (50_000, 784) and data.test.shape == (10_000, 784)
    assert data.train.dtype == data.test.dtype == torch.float32
    assert _is_binary(data.train) and _is_binary(data.test)
    assert data.train_epoch(torch.Generator().manual_seed(0)) is data.train  # fixed binarization
    assert 0.12 < data.train.mean() < 0.14  # MNIST's ink fraction
    assert data.train_labels is None
    # Rows are the file's lines in order: check against a plain Python parse of a few lines.
    with gzip.open(data_root / MIRROR_AMAT_TEST, "rt") as handle:
        lines = [next(handle) for _ in range(3)]
    expected = torch.tensor([[float(v) for v in line.split()] for line in lines])
    assert data.test[:3].equal(expected)


def test_parse_amat():
    content = b"0 1 " * 392 + b"\n" + b"1 0 " * 392 + b"\n\n"
    parsed = sources.parse_amat(content)
    assert parsed.shape == (2, 784) and parsed[0, :4].tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="784 per line"):
        sources.parse_amat(b"0 1 1\n")


# ----------------------------------------------------------------------------- Omniglot
def test_omniglot_derived(load):
    data = load("omniglot")
    assert data.label == "omniglot (derived 28x28)" and not data.dynamic_binarization
    assert data.train.shape == (23_000, 784) and data.test.shape == (8_070, 784)
    assert data.train.dtype == torch.float32 and _is_binary(data.train) and _is_binary(data.test)
    assert 0.03 < data.train.mean() < 0.2  # strokes on paper: inverted, ink = 1
    assert data.train_labels.shape == (23_000,) and data.train_labels.max() < 1623
    again = load("omniglot", n_test=8_070)  # a distinct call, same dataset_seed
    assert again.test.equal(data.test)


@pytest.mark.slow
def test_omniglot_split_depends_on_dataset_seed(load):
    a, b = load("omniglot"), load("omniglot", dataset_seed=1)
    assert not a.train_labels.equal(b.train_labels)
    assert b.train.shape == (23_000, 784)


def test_area_resize_analytic():
    ink = np.zeros((2, 105, 105), dtype=bool)
    ink[0] = True
    ink[1, :15, :15] = True  # 15 px = exactly 4 output pixels at 105/28 = 3.75
    out = sources.area_resize_28(ink).reshape(2, 28, 28)
    assert out.dtype == np.float32 and np.all(out[0] == 1)
    assert np.all(out[1, :4, :4] == 1) and out[1, 4:].sum() == 0 and out[1, :, 4:].sum() == 0


def test_omniglot_chardata_preferred(tmp_path, tmp_cache, monkeypatch):
    """A (small, synthetic) chardata.mat is read column-major, split and labelled as the paper's."""
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "pool", 30)
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "train", 25)
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "test", 10)
    rng = np.random.default_rng(0)
    images = (rng.random((40, 28, 28)) < 0.3).astype(np.float64)  # binary: binarization keeps them
    images[:, 0, :] = 1.0
    images[:, 1:, 0] = 0.0  # first row inked, first column (below it) blank: orientation check
    column_major = images.transpose(0, 2, 1).reshape(40, 784).T  # MATLAB stores images by columns
    targets = np.eye(5)[:, np.arange(40) % 5]
    (tmp_path / "omniglot").mkdir()
    scipy.io.savemat(tmp_path / "omniglot" / "chardata.mat",
                     {"data": column_major[:, :30], "testdata": column_major[:, 30:],
                      "target": targets[:, :30], "testtarget": targets[:, 30:]})
    data = D.load_dataset("omniglot", tmp_path)
    assert data.label == "omniglot" and data.train.shape == (25, 784)
    flat = torch.from_numpy(images.reshape(40, 784)).float()
    assert data.test.equal(flat[30:])
    train_rows = {tuple(row.tolist()) for row in flat[:30]}
    assert all(tuple(row.tolist()) in train_rows for row in data.train)
    assert data.test_labels.tolist() == [i % 5 for i in range(30, 40)]


# ----------------------------------------------------------------------------- subsets
def test_subsets_are_seeded_random_draws(load, data_root):
    full = load("binarized_mnist")
    sub = load("binarized_mnist", n_train=500, n_test=200, seed=0)
    assert sub.train.shape == (500, 784) and sub.test.shape == (200, 784)
    assert sub.train.equal(full.train[sub.train_index]) and sub.test.equal(full.test[sub.test_index])
    # Not the first N: the test file is sorted by class, so a subset must span the whole file.
    assert not sub.test_index.equal(torch.arange(200))
    assert sub.test_index.min() < 1_000 and sub.test_index.max() > 9_000
    torch.testing.assert_close(sub.train_mean, sub.train.mean(0))
    same = D.load_dataset("binarized_mnist", data_root, n_train=500, n_test=200, seed=0)
    assert same.train_index.equal(sub.train_index) and same.test.equal(sub.test)
    other = load("binarized_mnist", n_train=500, n_test=200, seed=1)
    assert not other.train_index.equal(sub.train_index)


def test_mnist_test_subset_mixes_classes(load):
    sub = load("mnist", n_train=100, n_test=100, seed=0)
    assert len(sub.test_labels.unique()) >= 8
    assert sub.test.equal(load("mnist").test[sub.test_index])  # same fixed binarization


@pytest.mark.parametrize("n_train, n_test, match", [
    (-1, None, r"n_train .* accepted: 1\.\.50000"),
    (0, None, r"n_train .* accepted: 1\.\.50000"),
    (50_001, None, r"n_train .* accepted: 1\.\.50000"),
    (None, 10_001, r"n_test .* accepted: 1\.\.10000"),
])
def test_bad_subset_sizes(load, n_train, n_test, match):
    with pytest.raises(ValueError, match=match):
        load("binarized_mnist", n_train=n_train, n_test=n_test)


def test_bad_arguments(data_root):
    with pytest.raises(ValueError, match="unknown dataset 'cifar10'.*mnist, fashion_mnist, binarized_mnist, omniglot"):
        D.load_dataset("cifar10", data_root)
    with pytest.raises(TypeError, match=r"n_train .*must be an int, got float"):
        D.load_dataset("binarized_mnist", data_root, n_train=1.5)
    with pytest.raises(ValueError, match="seed = -1 is out of range"):
        D.load_dataset("binarized_mnist", data_root, seed=-1)


# ----------------------------------------------------------------------------- missing and corrupt files
@pytest.mark.parametrize("name, expected", [
    ("mnist", "MNIST/raw/train-images-idx3-ubyte"),
    ("fashion_mnist", "FashionMNIST/raw/t10k-labels-idx1-ubyte"),
    ("binarized_mnist", "binarized_mnist/binarized_mnist_test.amat (or .amat.gz)"),
    ("omniglot", "omniglot/chardata.mat"),
])
def test_missing_files_give_a_clear_error(tmp_path, tmp_cache, offline, name, expected):
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_dataset(name, tmp_path)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert repr(name) in message and str(tmp_path / expected) in message
    assert "TVOLIB_DATA" in message and "download=True" in message


def test_download_without_network_gives_a_clear_error(tmp_path, tmp_cache, offline):
    with pytest.raises(D.DatasetNotFoundError, match=r"could not download http://www\.cs\.toronto\.edu/.*URLError"):
        D.load_dataset("binarized_mnist", tmp_path, download=True)
    assert not list((tmp_path / "binarized_mnist").glob("*"))  # no partial file left


def _serve(content: bytes):
    return lambda url, timeout=None: io.BytesIO(content)


def test_download_is_verified(data_root, tmp_path, tmp_cache, monkeypatch):
    good = gzip.decompress((data_root / MIRROR_AMAT_TEST).read_bytes())
    monkeypatch.setattr(urllib.request, "urlopen", _serve(good))
    images = sources.read_binarized_mnist("test", tmp_path, download=True)
    assert images.shape == (10_000, 784)
    assert (tmp_path / "binarized_mnist" / "binarized_mnist_test.amat").read_bytes() == good

    bad_root = tmp_path / "bad"
    monkeypatch.setattr(urllib.request, "urlopen", _serve(good.replace(b"1", b"0", 1)))
    with pytest.raises(D.ChecksumError):
        sources.read_binarized_mnist("test", bad_root, download=True)
    assert not (bad_root / "binarized_mnist" / "binarized_mnist_test.amat").exists()


def test_corrupt_file_raises_checksum_error(data_root, tmp_path, tmp_cache):
    """A good copy passes (and its verdict is cached); corrupting it afterwards is still caught."""
    folder = tmp_path / "binarized_mnist"
    folder.mkdir()
    target = folder / "binarized_mnist_test.amat.gz"
    source = (data_root / MIRROR_AMAT_TEST).read_bytes()
    target.write_bytes(source)
    assert sources.read_binarized_mnist("test", tmp_path).shape == (10_000, 784)

    content = bytearray(gzip.decompress(source))
    content[0] = ord("1") if content[0] == ord("0") else ord("0")  # one flipped pixel
    target.write_bytes(gzip.compress(bytes(content), compresslevel=1))
    os.utime(target, ns=(1, 1))  # a different mtime even on coarse-clock file systems
    with pytest.raises(D.ChecksumError) as info:
        sources.read_binarized_mnist("test", tmp_path)
    message = str(info.value)
    assert str(target) in message and D.SHA256["binarized_mnist/binarized_mnist_test.amat"] in message
    assert info.value.actual in message and info.value.actual != info.value.expected


def test_corrupt_mnist_file(data_root, tmp_path, tmp_cache):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"]:
        (raw / name).symlink_to(data_root / "MNIST" / "raw" / name)
    labels = bytearray((data_root / "MNIST/raw/t10k-labels-idx1-ubyte").read_bytes())
    labels[-1] = (labels[-1] + 1) % 10
    (raw / "t10k-labels-idx1-ubyte").write_bytes(bytes(labels))
    with pytest.raises(D.ChecksumError, match="t10k-labels-idx1-ubyte: expected sha256 ff7bcfd4"):
        D.load_dataset("mnist", tmp_path)


def test_read_only_root_is_never_written_and_cache_is_reused(data_root, tmp_path, tmp_cache, monkeypatch):
    root = tmp_path / "root"
    (root / "binarized_mnist").mkdir(parents=True)
    for split in ("train", "test"):
        name = f"binarized_mnist/binarized_mnist_{split}.amat.gz"
        (root / name).symlink_to(data_root / name)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    first = D.load_dataset("binarized_mnist", root, n_train=50, n_test=50)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert list((tmp_cache / "arrays").glob("binarized_mnist_test_*.npz"))

    def no_parsing(content):
        raise AssertionError("parsed again instead of using the cache")

    monkeypatch.setattr(sources, "parse_amat", no_parsing)
    second = D.load_dataset("binarized_mnist", root, n_train=50, n_test=50)
    assert second.test.equal(first.test) and second.train.equal(first.train)


def test_cli(data_root, tmp_path, tmp_cache, offline, capsys):
    assert data_cli(["--root", str(data_root), "binarized_mnist"]) == 0
    assert "ok   binarized_mnist" in capsys.readouterr().out
    assert data_cli(["--root", str(tmp_path), "binarized_mnist"]) == 1
    assert "FAIL binarized_mnist" in capsys.readouterr().err


# ----------------------------------------------------------------------------- properties, devices
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.lists(st.lists(st.integers(0, 1), min_size=784, max_size=784),
                                                    min_size=n, max_size=n)))
def test_parse_amat_round_trip(rows):
    text = "".join(" ".join(map(str, row)) + " \n" for row in rows).encode()
    assert sources.parse_amat(text).tolist() == rows


@settings(max_examples=50, deadline=None)
@given(total=st.integers(1, 500), frac=st.floats(0, 1), seed=st.integers(0, 2**31))
def test_subset_indices(total, frac, seed):
    from tvolib.data.dataset import _subset

    n = max(1, round(frac * total))
    index = _subset(total, n, seed, 2, "n_train")
    assert len(index) == n == len(set(index.tolist()))
    assert (np.diff(index) > 0).all() and index.min() >= 0 and index.max() < total
    assert np.array_equal(index, _subset(total, n, seed, 2, "n_train"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_train_epoch_on_cuda(load):
    data = load("mnist", n_train=1_000).to("cuda")
    draw = data.train_epoch(torch.Generator(device="cuda").manual_seed(0))
    assert draw.device.type == "cuda" and draw.shape == (1_000, 784) and _is_binary(draw)
