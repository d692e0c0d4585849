"""The root conftest's settings for pytest-xdist workers (tests/README.md, *Running in parallel*)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def _root_conftest():
    spec = importlib.util.spec_from_file_location("tvolib_root_conftest", ROOT_CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_worker_gets_its_own_folders_and_its_share_of_the_cpus(monkeypatch, tmp_path):
    conftest = _root_conftest()
    monkeypatch.setattr(conftest, "usable_cpus", lambda: 8)
    monkeypatch.setenv("TVOLIB_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("TVOLIB_RESULTS", str(tmp_path / "results"))
    for name in ("OMP_NUM_THREADS", "TVOLIB_MAX_WORKERS"):
        monkeypatch.delenv(name, raising=False)
    threads = torch.get_num_threads()
    try:
        conftest._configure_worker("gw3", 4)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert os.environ["TVOLIB_FIGURES"] == str(tmp_path / "figures" / "gw3")
    assert os.environ["TVOLIB_RESULTS"] == str(tmp_path / "results" / "gw3")
    assert os.environ["OMP_NUM_THREADS"] == "2" and os.environ["TVOLIB_MAX_WORKERS"] == "2"


def test_settings_the_user_gave_are_kept(monkeypatch, tmp_path):
    conftest = _root_conftest()
    monkeypatch.setattr(conftest, "usable_cpus", lambda: 2)
    monkeypatch.setenv("TVOLIB_FIGURES", str(tmp_path))
    monkeypatch.delenv("TVOLIB_RESULTS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("TVOLIB_MAX_WORKERS", "5")
    threads = torch.get_num_threads()
    conftest._configure_worker("gw0", 2)
    assert torch.get_num_threads() == threads
    assert (os.environ["OMP_NUM_THREADS"], os.environ["TVOLIB_MAX_WORKERS"]) == ("3", "5")
    assert "TVOLIB_RESULTS" not in os.environ
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    assert conftest.auto_workers() == 2
    monkeypatch.setattr(conftest.shutil, "which", lambda name: f"/usr/bin/{name}")  # Slurm installed
    assert conftest.auto_workers() == 3
