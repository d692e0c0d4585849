"""The parsed-array cache: round trip, and every kind of bad cache file rebuilt (tvolib.data.cache)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import tvolib.data as D
from tvolib.data import cache, sources

SOURCE = "a" * 64
SHAPES = {"bits": (6, 98)}


def _bits(rows: int = 6) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(rows, 98), dtype=np.uint8)


def test_round_trip_and_absent_entry(tmp_cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.cache_load("entry", SOURCE, SHAPES) is None  # absent: silently None
        cache.cache_save("entry", SOURCE, bits=_bits())
        loaded = cache.cache_load("entry", SOURCE, SHAPES)
    assert set(loaded) == {"bits"} and np.array_equal(loaded["bits"], _bits())
    assert cache.cache_path("entry").parent == tmp_cache / "arrays"


def _truncated(path):
    path.write_bytes(path.read_bytes()[:200])


def _no_record(path):  # e.g. ten zero rows written by hand or by another tool
    np.savez(path, bits=np.zeros((10, 98), dtype=np.uint8))


def _wrong_rows(path):  # a self-consistent file, but not the rows this dataset has
    cache.cache_save("entry", SOURCE, bits=np.zeros((10, 98), dtype=np.uint8))


def _other_source(path):
    cache.cache_save("entry", "b" * 64, bits=_bits())


def _altered_values(path):  # same shape and record, one byte changed
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays["bits"] = arrays["bits"].copy()
    arrays["bits"][3, 7] ^= 1
    np.savez(path, **arrays)


@pytest.mark.parametrize("damage, reason", [
    (_truncated, r"not a readable \.npz \(BadZipFile"),
    (_no_record, "no verification record"),
    (_wrong_rows, r"array 'bits' has shape \(10, 98\), expected \(6, 98\)"),
    (_other_source, "built from other source files"),
    (_altered_values, "array .bits. does not match its recorded shape, dtype and SHA256"),
])
def test_bad_cache_files_are_reported_and_not_used(tmp_cache, damage, reason):
    cache.cache_save("entry", SOURCE, bits=_bits())
    path = cache.cache_path("entry")
    damage(path)
    with pytest.warns(UserWarning, match=rf"parsed-array cache {path} is unusable: {reason}.*rebuilding"):
        assert cache.cache_load("entry", SOURCE, SHAPES) is None


@pytest.mark.parametrize("damage", [_truncated, _no_record])
def test_a_bad_dataset_cache_is_rebuilt_with_the_same_numbers(data_root, tmp_cache, damage):
    good = sources.read_binarized_mnist("test", data_root)
    path = cache.cache_path(f"binarized_mnist_test_{D.SHA256['binarized_mnist/binarized_mnist_test.amat'][:16]}")
    assert path.exists()
    damage(path)
    with pytest.warns(UserWarning, match=f"parsed-array cache {path} is unusable"):
        rebuilt = sources.read_binarized_mnist("test", data_root)
    assert np.array_equal(rebuilt, good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt file is sound again
        assert np.array_equal(sources.read_binarized_mnist("test", data_root), good)


def test_unwritable_cache_still_loads(data_root, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TVOLIB_CACHE", str(blocker))
    with pytest.warns(UserWarning, match="could not write the parsed-array cache .*TVOLIB_CACHE"):
        images = sources.read_binarized_mnist("test", data_root)
    assert images.shape == (10_000, 784)


def test_record_lists_source_and_array_hashes(tmp_cache):
    cache.cache_save("entry", SOURCE, bits=_bits())
    with np.load(cache.cache_path("entry")) as stored:
        meta = json.loads(str(stored["__meta__"]))
    assert meta["source"] == SOURCE and meta["arrays"]["bits"]["shape"] == [6, 98]
    assert len(meta["arrays"]["bits"]["sha256"]) == 64
