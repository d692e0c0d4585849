"""One BLAS thread for SciPy's L-BFGS-B in the bandit's fits and acquisition.

L-BFGS-B on a few variables gains nothing from threads, and idle OpenBLAS threads spinning on a
busy machine doubled the wall time of a round. :func:`one_blas_thread` limits them through one
:class:`threadpoolctl.ThreadpoolController`, made once: ``threadpool_limits`` scans every loaded
library each time it is entered (about 3% of an adaptive-d bandit run's time on the test bed).

Example:
    >>> with one_blas_thread():
    ...     pass
"""
from __future__ import annotations

import functools
from contextlib import AbstractContextManager

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()  # made at first use, when SciPy's BLAS is loaded


def one_blas_thread() -> AbstractContextManager:
    """A context in which BLAS libraries (SciPy's OpenBLAS, torch's) run one thread."""
    return _controller().limit(limits=1, user_api="blas")
