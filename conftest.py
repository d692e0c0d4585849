"""Every pytest run from this repository (the unit tests and the notebooks under nbval).

* Figures and tables go to a scratch folder unless ``$TVOLIB_FIGURES`` names one, so that no test
  overwrites the committed ``figures/`` (``make test`` names its own scratch folder).
* In parallel (``make test`` runs ``pytest -n auto --dist loadfile``, pytest-xdist): one worker per
  usable CPU, at most :data:`MAX_WORKERS`; each worker gets its own subfolder of
  ``$TVOLIB_FIGURES`` and ``$TVOLIB_RESULTS`` (two workers never write one file) and, unless
  ``$OMP_NUM_THREADS`` is set, an equal share of the CPUs as torch threads (one each on two cores),
  inherited by the processes it starts; unless ``$TVOLIB_MAX_WORKERS`` is set, the same share
  bounds a sweep's local process pool. A worker runs a test module's tests together (its
  module-scoped fixtures and caches are computed once) and all the notebooks, in order as without
  workers: later notebooks reuse the runs of earlier ones. ``make test`` keeps the collection
  order (``--no-loadscope-reorder``): the Slurm tests first (moved there by
  :func:`pytest_collection_modifyitems`: their worker mostly waits, and last they left the CPUs
  idle for the final minute), then the notebooks, whose few minutes start at once beside the
  slowest test modules, the bandit's (collected first of ``tests/``).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

#: More workers gain little: the notebooks (a few minutes at ``smoke``) run on one of them.
MAX_WORKERS = 4


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS reports one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_workers() -> int:
    """One worker per usable CPU, at most :data:`MAX_WORKERS`."""
    return min(usable_cpus(), MAX_WORKERS)


def auto_workers() -> int:
    """The workers of ``-n auto``: :func:`cpu_workers`, and one more where Slurm is installed. The
    worker that runs the Slurm tests (``tests/runs/test_slurm.py``) mostly waits for its jobs and
    the scheduler (minutes on a one-node cluster), while the jobs' processes, not pytest's, use
    the CPUs; the extra worker keeps the other modules going meanwhile."""
    return cpu_workers() + (shutil.which("sbatch") is not None)


#: The test module that waits on Slurm jobs (run first).
SLURM_TESTS = "test_slurm.py"


def pytest_collection_modifyitems(items: list) -> None:
    """The Slurm tests first, the rest in collection order (a stable sort)."""
    items.sort(key=lambda item: item.path.name != SLURM_TESTS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    return auto_workers()


def pytest_configure(config) -> None:
    if not os.environ.get("TVOLIB_FIGURES"):
        os.environ["TVOLIB_FIGURES"] = tempfile.mkdtemp(prefix="tvolib-test-figures-")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        _configure_worker(worker, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def _configure_worker(worker: str, workers: int) -> None:
    """Give an xdist worker its own scratch subfolders and its share of the CPUs."""
    for name in ("TVOLIB_FIGURES", "TVOLIB_RESULTS"):
        if os.environ.get(name):
            os.environ[name] = os.path.join(os.environ[name], worker)
    share = str(max(1, usable_cpus() // workers))
    # A sweep's local process pool (the notebooks') gets the worker's share too: with one CPU the
    # runs train in the calling process, e.g. the notebook's kernel (tvolib.runs.executors).
    os.environ.setdefault("TVOLIB_MAX_WORKERS", share)
    if not os.environ.get("OMP_NUM_THREADS"):
        os.environ["OMP_NUM_THREADS"] = share  # for the processes the worker starts
        import torch

        torch.set_num_threads(int(share))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, except that every notebook is in one unit: a worker runs a test module's
    tests together, and all the notebooks' cells in collection order.

    (Written here because ``xdist_group`` marks do not reach the scheduler with pytest 9.2, whose
    test ids no longer follow the ``_nodeid`` that pytest-xdist 3.8 appends the group to.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModulesAndNotebooks(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "notebooks" if path.endswith(".ipynb") else path

    return ModulesAndNotebooks(config, log)
