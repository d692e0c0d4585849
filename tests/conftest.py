"""Shared test settings and fixtures: the data root the tests read, the published grammar, hypothesis.

Numerical comparisons (tests/README.md): bit for bit only where the same kernels run on the same
inputs (a rerun, kill-and-resume, a stack of the same shape), each such comparison with a comment
saying why it is exact; across code paths (stacked vs single run, CPU vs CUDA, chunked vs not,
another instruction set or thread count) to float32 rounding through ``numerics.assert_close_fp32``,
whose tolerance is ``terms * eps32 * scale`` (the length and magnitude of the reduction).

The data root is the library's own setting, :func:`tvolib.data.data_root`: ``$TVOLIB_DATA`` if set
(CI and ``make test`` pass the offline mirror there), else the library default
``~/.cache/tvolib/data`` (where ``make data`` / ``python -m tvolib.data --download`` put the
files). Tests never name an absolute path or a folder outside the repository.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tvolib.data import data_root as library_data_root

# No per-example deadline (CI shares 2 cores; speed goals live in benchmarks/) and derandomised
# examples, so a CI run is reproducible.
settings.register_profile("tvolib", deadline=None, derandomize=True)
settings.load_profile("tvolib")

#: Folders every dataset test needs under the data root.
DATASET_FOLDERS = ("MNIST/raw", "FashionMNIST/raw", "binarized_mnist", "omniglot")


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root: ``$TVOLIB_DATA``, else the library default (``~/.cache/tvolib/data``).

    Missing dataset folders fail loudly (never a skip): the data tests must read real files.
    """
    root = library_data_root().resolve()
    missing = [folder for folder in DATASET_FOLDERS if not (root / folder).is_dir()]
    if missing:
        origin = "TVOLIB_DATA" if os.environ.get("TVOLIB_DATA") else "the default data root (TVOLIB_DATA is unset)"
        pytest.fail(f"datasets not found under {root} ({origin}): missing {', '.join(missing)}. Set TVOLIB_DATA "
                    "to a folder holding MNIST/, FashionMNIST/, binarized_mnist/ and omniglot/ (e.g. an offline "
                    "mirror), or download them there with `python -m tvolib.data --download`.", pytrace=False)
    return root


@pytest.fixture(scope="session")
def grammar_path(data_root: Path) -> Path:
    """The published "Astronomers" grammar as provided with the data (``pcfgs/astronomers.json``),
    to compare with the packaged copy ``tvolib/grammars/astronomers.json``; fails loudly if absent."""
    path = data_root / "pcfgs" / "astronomers.json"
    if not path.is_file():
        pytest.fail(f"published grammar not found at {path}: the data root must hold pcfgs/astronomers.json "
                    "(the offline mirror does)", pytrace=False)
    return path


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread, as a process it is compared with runs (e.g. a pool worker or a
    Slurm job with one CPU): a GP fit's last bits depend on the thread count. Not a way to make a
    comparison across code paths exact (tests/README.md)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
