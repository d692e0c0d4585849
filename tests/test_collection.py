"""pytest's collection, as `make test` runs it: the notebooks `make figures` executed are outputs,
not tests (the pyproject's ``norecursedirs`` leaves ``notebooks/executed/`` out)."""
from __future__ import annotations

import shutil
from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


def test_notebooks_executed_by_make_figures_are_not_collected(pytester) -> None:
    shutil.copy(ROOT / "pyproject.toml", pytester.path / "pyproject.toml")
    pytester.makepyfile(**{"notebooks/test_kept": "def test_kept():\n    pass\n",
                           "notebooks/executed/test_output": "def test_output():\n    assert False\n"})
    result = pytester.runpytest("notebooks", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
