"""wall_seconds over a run's attempts (tvolib.runs.wall_time): a finished attempt is closed, a repair
that trains nothing adds nothing, and neither a copy with new modification times (``cp -r``) nor a
touched checkpoint inflates the time, of a finished run or of a killed one resumed after the copy."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import tvolib.training.images as images
from fake_trainer import cfg
from tvolib import runs
from tvolib.runs import wall_time
from tvolib.training.images import train

#: A tiny real run (100 MNIST images, 3 epochs).
TINY = cfg(n_train=100, n_test=20, batch_size=100, epochs=3, S=2, eval_S=4)
LATER = 1000.0  # seconds: a copy or a touch long after the run


def _copy_with_new_times(folder: Path, target: Path) -> Path:
    """``cp -r`` without ``-p``: every file's modification time is the copy's, here ``LATER`` s on."""
    shutil.copytree(folder, target, copy_function=shutil.copyfile)
    for path in target.iterdir():
        os.utime(path, (time.time() + LATER, time.time() + LATER))
    return target


def _wall(folder: Path) -> dict:
    return json.loads((folder / "wall_time.json").read_text())


@pytest.fixture(scope="module")
def finished(tmp_path_factory, data_root) -> Path:
    results = tmp_path_factory.mktemp("finished") / "results"
    runs.run_one(TINY, results_root=results, data_root=data_root, device="cpu", progress=False)
    return results


def test_a_finished_attempt_is_closed(finished):
    folder = runs.run_dir(TINY, finished)
    final = runs.load_final(TINY, finished)
    assert _wall(folder) == {"seconds": final["wall_seconds"]} and final["wall_seconds"] > 0


@pytest.mark.parametrize("how", ["copied", "checkpoint touched"])
def test_a_repair_that_trains_nothing_adds_nothing(how, finished, tmp_path, data_root, monkeypatch):
    """The issue's case: 5.45 s became 740 s after a repair of a copied or touched finished run."""
    wall = runs.load_final(TINY, finished)["wall_seconds"]
    results = tmp_path / "results"
    results.mkdir()
    folder = runs.run_dir(TINY, results)
    if how == "copied":
        _copy_with_new_times(runs.run_dir(TINY, finished), folder)
    else:
        shutil.copytree(runs.run_dir(TINY, finished), folder)
        os.utime(folder / "checkpoint.pt", (time.time() + LATER, time.time() + LATER))
    (folder / "history.csv").unlink()  # something for --repair to rebuild
    assert runs.inspect_run(TINY, results).status == "corrupt"
    monkeypatch.setattr(images.ImageTask, "run_epoch", lambda *args: pytest.fail("an epoch was trained again"))
    final = runs.run_one(TINY, results_root=results, data_root=data_root, device="cpu", progress=False, repair=True)
    assert final["wall_seconds"] == wall and _wall(folder) == {"seconds": wall}


def test_a_killed_run_resumed_after_a_copy_is_not_inflated(tmp_path, data_root):
    """Killed after two epochs (its attempt left open), copied with new times and resumed: the killed
    attempt counts by its checkpoint's clock (the copy's times say nothing), so the total stays
    within the time the test spent, and at least the two epochs' recorded time."""
    start = time.perf_counter()

    def killed(config, run_dir, **options):
        train(config, run_dir, stop_after=2, **options)
        raise KeyboardInterrupt  # as a kill: the attempt is never closed

    original = tmp_path / "original"
    with pytest.raises(KeyboardInterrupt):
        runs.run_one(TINY, results_root=original, data_root=data_root, device="cpu", progress=False,
                     train_fn=killed)
    assert "attempt_started" in _wall(runs.run_dir(TINY, original))
    clock = wall_time._checkpoint(runs.run_dir(TINY, original))[1]
    results = tmp_path / "results"
    results.mkdir()
    _copy_with_new_times(runs.run_dir(TINY, original), runs.run_dir(TINY, results))
    final = runs.run_one(TINY, results_root=results, data_root=data_root, device="cpu", progress=False)
    assert clock is not None and clock <= final["wall_seconds"] <= time.perf_counter() - start < LATER


def test_without_a_clock_a_copied_record_gives_no_time_from_modification_times(tmp_path):
    """A checkpoint of another trainer's format has no clock: its modification time counts only while
    wall_time.json keeps the time it was written at (not in a copy)."""
    (tmp_path / "checkpoint.pt").write_text("{}")
    wall_time.start_attempt(tmp_path)
    os.utime(tmp_path / "checkpoint.pt", (time.time() + 30, time.time() + 30))
    assert 29 < wall_time.read_wall(tmp_path) < 31  # a killed attempt: start to last checkpoint
    os.utime(tmp_path / "wall_time.json", (time.time() + LATER, time.time() + LATER))  # copied later
    assert wall_time.read_wall(tmp_path) == 0.0
