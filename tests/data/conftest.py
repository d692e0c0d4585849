"""Fixtures of the data tests: a memoised loader, a private cache folder, no network, file copies."""
from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pytest

import tvolib.data as D
from tvolib.data import files


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
    """A private, empty parsed-array cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TVOLIB_CACHE", str(cache))
    return cache


@pytest.fixture
def new_process(monkeypatch) -> Callable[[], None]:
    """Call it to forget every content hash memoised in memory, as a fresh process would."""
    return lambda: monkeypatch.setattr(files, "_CONTENT_SHA256", {})


@pytest.fixture
def copy_files(data_root, tmp_path) -> Callable[..., Path]:
    """``copy_files(*relative_paths)``: real copies of data-root files in a fresh root, returned.

    Tests corrupt these copies, never the data root itself.
    """

    def _copy(*relative: str) -> Path:
        root = tmp_path / "root"
        for name in relative:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(data_root / name, root / name)
        return root

    return _copy
