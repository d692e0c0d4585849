"""load_dataset: shapes, binarization, subsets and argument checks against the data root (tvolib.data.dataset)."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import tvolib.data as D
from tvolib.data.dataset import _subset

MIRROR_AMAT_TEST = "binarized_mnist/binarized_mnist_test.amat.gz"


def _is_binary(x: torch.Tensor) -> bool:
    return bool(((x == 0) | (x == 1)).all())


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


@pytest.mark.parametrize("kwargs, error, match", [
    ({"name": "cifar10"}, ValueError, "unknown dataset 'cifar10'.*mnist, fashion_mnist, binarized_mnist, omniglot"),
    ({"name": None}, ValueError, "unknown dataset None; accepted names"),
    ({"n_train": 1.5}, TypeError, r"n_train .*must be an int, got float"),
    ({"n_test": True}, TypeError, r"n_test .*must be an int, got bool"),
    ({"seed": -1}, ValueError, "seed = -1 is out of range"),
    ({"dataset_seed": "0"}, TypeError, "dataset_seed must be an int, got str"),
    ({"root": 7}, TypeError, r"root must be a folder path \(str or os.PathLike\) or None, got int 7"),
    ({"download": "no"}, TypeError, "download must be True, False or None, got str 'no'"),
])
def test_bad_arguments_fail_before_any_file_is_read(tmp_path, kwargs, error, match):
    kwargs = {"name": "binarized_mnist", "root": tmp_path, **kwargs}  # an empty root: nothing to read
    with pytest.raises(error, match=match):
        D.load_dataset(**kwargs)


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


def test_pinned_pixel_sums(load):
    """The numbers every result rests on: pixel sums of the full splits (fixed test binarization)."""
    sums = {name: (float(load(name).train.double().sum()), float(load(name).test.sum()))
            for name in D.DATASETS}
    assert sums["mnist"] == (pytest.approx(6146268.857009373, abs=1e-6), 1039355.0)
    assert sums["fashion_mnist"] == (pytest.approx(13455349.927203547, abs=1e-6), 2249187.0)
    assert sums["binarized_mnist"] == (5118041.0, 1038896.0)
    assert sums["omniglot"] == (1452225.0, 507747.0)


# ----------------------------------------------------------------------------- properties, devices
@settings(max_examples=50, deadline=None)
@given(total=st.integers(1, 500), frac=st.floats(0, 1), seed=st.integers(0, 2**31))
def test_subset_indices(total, frac, seed):
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
