"""Shared test settings and fixtures: the dataset mirror the tests read, and hypothesis settings."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline (CI shares 2 cores; speed goals live in benchmarks/) and derandomised
# examples, so a CI run is reproducible.
settings.register_profile("tvolib", deadline=None, derandomize=True)
settings.load_profile("tvolib")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The offline dataset mirror: ``$TVOLIB_DATA`` if set, else ``<repo>/../shared/data``.

    A missing mirror fails loudly (never a skip): CI must run the data tests against real files.
    """
    root = Path(os.environ.get("TVOLIB_DATA") or REPO.parent / "shared" / "data").expanduser().resolve()
    if not (root.is_dir() and any(root.iterdir())):
        pytest.fail(f"dataset mirror not found at {root}: set TVOLIB_DATA to the folder holding "
                    "MNIST/, FashionMNIST/, binarized_mnist/ and omniglot/ (see README, 'Data')",
                    pytrace=False)
    return root
