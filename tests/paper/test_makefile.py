"""The Makefile's `figures` target: the datasets are fetched once, before the first notebook."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_figures_fetches_the_data_once_before_the_notebooks_which_only_read():
    env = {k: v for k, v in os.environ.items() if k not in {"TVOLIB_DOWNLOAD", "MAKEFLAGS", "MFLAGS"}}
    plan = subprocess.run(["make", "-n", "figures", "PROFILE=smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True).stdout.splitlines()
    fetch = [i for i, line in enumerate(plan) if "-m tvolib.data --download" in line]
    notebooks = [i for i, line in enumerate(plan) if "papermill" in line]
    assert len(fetch) == 1 and notebooks and fetch[0] < notebooks[0], plan
    assert all("TVOLIB_DOWNLOAD=${TVOLIB_DOWNLOAD:-0}" in plan[i] for i in notebooks), plan
