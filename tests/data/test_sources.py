"""Readers of each dataset's files: .amat parsing, Omniglot's two sources, no writes to the data root
(tvolib.data.sources)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

import tvolib.data as D
from tvolib.data import files, sources


# ----------------------------------------------------------------------------- binarized MNIST
def test_parse_amat():
    content = b"0 1 " * 392 + b"\n" + b"1 0 " * 392 + b"\n\n"
    parsed = sources.parse_amat(content)
    assert parsed.shape == (2, 784) and parsed[0, :4].tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="784 per line"):
        sources.parse_amat(b"0 1 1\n")


@settings(max_examples=25, deadline=None)
@given(arrays(np.uint8, st.tuples(st.integers(1, 5), st.just(784)), elements=st.integers(0, 1)))
def test_parse_amat_round_trip(rows):
    text = "".join(" ".join(map(str, row)) + " \n" for row in rows.tolist()).encode()
    assert np.array_equal(sources.parse_amat(text), rows)


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


# ----------------------------------------------------------------------------- Omniglot
def test_area_resize_analytic():
    ink = np.zeros((2, 105, 105), dtype=bool)
    ink[0] = True
    ink[1, :15, :15] = True  # 15 px = exactly 4 output pixels at 105/28 = 3.75
    out = sources.area_resize_28(ink).reshape(2, 28, 28)
    assert out.dtype == np.float32 and np.all(out[0] == 1)
    assert np.all(out[1, :4, :4] == 1) and out[1, 4:].sum() == 0 and out[1, :, 4:].sum() == 0


def _write_chardata(root, monkeypatch):
    """A small synthetic chardata.mat (40 images) with the paper's split sizes scaled down."""
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "pool", 30)
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "train", 25)
    monkeypatch.setitem(sources.OMNIGLOT_SIZES, "test", 10)
    rng = np.random.default_rng(0)
    images = (rng.random((40, 28, 28)) < 0.3).astype(np.float64)  # binary: binarization keeps them
    images[:, 0, :] = 1.0
    images[:, 1:, 0] = 0.0  # first row inked, first column (below it) blank: orientation check
    column_major = images.transpose(0, 2, 1).reshape(40, 784).T  # MATLAB stores images by columns
    targets = np.eye(5)[:, np.arange(40) % 5]
    (root / "omniglot").mkdir()
    scipy.io.savemat(root / "omniglot" / "chardata.mat",
                     {"data": column_major[:, :30], "testdata": column_major[:, 30:],
                      "target": targets[:, :30], "testtarget": targets[:, 30:]})
    return images


def test_omniglot_chardata_preferred(tmp_path, tmp_cache, monkeypatch):
    """A (small, synthetic) chardata.mat is read column-major, split and labelled as the paper's."""
    images = _write_chardata(tmp_path, monkeypatch)
    data = D.load_dataset("omniglot", tmp_path)
    assert data.label == "omniglot" and data.train.shape == (25, 784)
    flat = torch.from_numpy(images.reshape(40, 784)).float()
    assert data.test.equal(flat[30:])
    train_rows = {tuple(row.tolist()) for row in flat[:30]}
    assert all(tuple(row.tolist()) in train_rows for row in data.train)
    assert data.test_labels.tolist() == [i % 5 for i in range(30, 40)]


def test_each_omniglot_variant_names_its_files(tmp_path, tmp_cache, monkeypatch, load):
    """``source`` tells chardata.mat (unverifiable: its hash) from the derived set, so a run can refuse to mix them."""
    _write_chardata(tmp_path, monkeypatch)
    chardata = D.load_dataset("omniglot", tmp_path)
    digest = files.sha256_of(tmp_path / "omniglot" / "chardata.mat")
    assert chardata.source.startswith(f"chardata:{digest}:")
    monkeypatch.undo()
    assert load("omniglot", n_train=10, n_test=10).source.startswith("derived28:")
    assert load("mnist", n_train=10, n_test=10).source == "mnist"


def test_chardata_with_values_outside_grey_levels_is_refused(tmp_path, tmp_cache, monkeypatch):
    _write_chardata(tmp_path, monkeypatch)
    path = tmp_path / "omniglot" / "chardata.mat"
    mat = scipy.io.loadmat(path)
    scipy.io.savemat(path, {**{k: v for k, v in mat.items() if not k.startswith("__")}, "data": mat["data"] * 7})
    with pytest.raises(D.CorruptFileError, match="grey levels outside"):
        D.load_dataset("omniglot", tmp_path)


@pytest.mark.parametrize("damage", ["truncated", "wrong sizes"])
def test_damaged_chardata_names_the_file(tmp_path, tmp_cache, monkeypatch, damage):
    _write_chardata(tmp_path, monkeypatch)
    path = tmp_path / "omniglot" / "chardata.mat"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    else:
        monkeypatch.setitem(sources.OMNIGLOT_SIZES, "pool", 31)
    with pytest.raises(D.CorruptFileError) as info:
        D.load_dataset("omniglot", tmp_path)
    assert info.value.path == path and str(path) in str(info.value)
    assert "Delete it and download it again" in str(info.value)


# ----------------------------------------------------------------------------- MNIST
def test_torchvision_processed_files_are_never_read(data_root, load, tmp_path, tmp_cache):
    """Tensors in torchvision's legacy ``processed/*.pt`` (no checksum) must not replace the verified IDX files."""
    root = tmp_path / "root"
    (root / "MNIST" / "raw").mkdir(parents=True)
    for path in (data_root / "MNIST" / "raw").iterdir():
        (root / "MNIST" / "raw" / path.name).symlink_to(path)
    (root / "MNIST" / "processed").mkdir()
    decoy = (torch.zeros(100, 28, 28, dtype=torch.uint8), torch.zeros(100, dtype=torch.long))
    for name in ("training.pt", "test.pt"):
        torch.save(decoy, root / "MNIST" / "processed" / name)
    data = D.load_dataset("mnist", root, n_train=20, n_test=20)
    assert (data.n_train_full, data.n_test_full) == (60_000, 10_000)
    assert data.train.equal(load("mnist", n_train=20, n_test=20).train)


def test_parse_idx_checks_the_header():
    images = bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]) + bytes([1, 2, 3, 4])
    assert sources.parse_idx(images).tolist() == [[[1, 2]], [[3, 4]]]
    with pytest.raises(ValueError, match="announces shape"):
        sources.parse_idx(images[:-1])
    with pytest.raises(ValueError, match="not an IDX file"):
        sources.parse_idx(b"PK\x03\x04")
