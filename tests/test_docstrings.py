"""Every docstring example in the package runs and prints what it says (``doctest``).

The examples are how a reader learns each function; one that went stale (a default changed, a
sweep grew) fails here. Examples that need data or a trained model are marked ``+SKIP``.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tvolib

MODULES = sorted(m.name for m in pkgutil.walk_packages(tvolib.__path__, "tvolib.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_written(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False,
                             report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed (printed above)"
