"""--repair never replaces a file consistent with the run by one that is not.

A finished adaptive-d bandit run (real training, tiny): where its final checkpoint's bandit record and
its schedule_history.csv disagree, each is checked on its own (every value by its rule). A damaged
checkpoint makes the run corrupt with a message that names the checkpoint and the way out (delete
the folder, rerun from scratch); --repair, in Python and through ``python -m tvolib run-config``,
refuses it and leaves every file as it was. A damaged CSV is blamed on the CSV, and --repair
rebuilds it from the sound checkpoint, byte for byte.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tvolib.checkpoint as ckpt
from fake_trainer import cfg
from tvolib import runs
from tvolib.runs import store
from tvolib.runs.store import FROM_SCRATCH, RunFolderError

#: A tiny adaptive-d bandit run: 100 MNIST images, 5 windows of one epoch (rounds 2 to 4 chosen by
#: the GP, with a recommendation), small GP budgets.
ADAPTIVE = cfg(n_train=100, n_test=20, batch_size=100, epochs=5, S=2, eval_S=4, d=5, schedule="gp_bandit_adaptive",
               schedule_options={"window": 1, "n_init": 2, "burn_in": 0, "ml_starts": 4, "raw_samples": 16,
                                 "num_restarts": 1, "acq_maxiter": 5, "fit_maxiter": 5})
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, data_root) -> Path:
    """The results root of the finished run, trained once for the module."""
    results = tmp_path_factory.mktemp("adaptive") / "results"
    runs.run_one(ADAPTIVE, results_root=results, data_root=data_root, device="cpu", progress=False)
    return results


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(finished, results)
    return results, runs.run_dir(ADAPTIVE, results)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}


def _gp_round(history: list[dict]) -> int:
    return next(k for k, row in enumerate(history) if row["source"] == "gp")


def _edit_checkpoint(folder: Path, column: str, value) -> int:
    path = folder / "checkpoint.pt"
    state = ckpt.load(path)
    history = state["schedule"]["history"]
    k = _gp_round(history)
    history[k][column] = value
    torch.save(state, path)
    return k


CHECKPOINT_EDITS = {"d 99": ("d", 99), "recommended_arm outside the box": ("recommended_arm", [5.0]),
                    "source alien": ("source", "alien")}


@pytest.mark.parametrize("case", list(CHECKPOINT_EDITS))
def test_a_damaged_checkpoint_is_named_and_repair_refuses_to_rebuild_from_it(case, finished, tmp_path):
    results, folder = _copy(finished, tmp_path)
    column, value = CHECKPOINT_EDITS[case]
    k = _edit_checkpoint(folder, column, value)
    before = _files(folder)
    state = runs.inspect_run(ADAPTIVE, results)
    assert state.status == "corrupt", state
    assert state.reason.startswith("checkpoint.pt is damaged: its bandit record cannot be restored (")
    assert f"row {k} (round {k}) column '{column}' is {value!r}, against its rule: " in state.reason
    assert state.reason.endswith(FROM_SCRATCH) and "schedule_history.csv" not in state.reason
    assert runs.status([ADAPTIVE], results)["status"].tolist() == ["corrupt"]
    with pytest.raises(RunFolderError) as err:
        store.check_run(ADAPTIVE, results)
    assert "rerun with --repair" not in str(err.value) and "delete the run folder" in str(err.value)
    with pytest.raises(RunFolderError, match=r"checkpoint\.pt is damaged: .*rerun the run from scratch"):
        runs.run_one(ADAPTIVE, results_root=results, device="cpu", progress=False, repair=True)
    assert _files(folder) == before  # nothing removed, nothing rewritten


def test_run_config_repair_refuses_a_damaged_checkpoint_too(finished, tmp_path, data_root):
    results, folder = _copy(finished, tmp_path)
    _edit_checkpoint(folder, "d", 99)
    before = _files(folder)
    child = subprocess.run(
        [sys.executable, "-m", "tvolib", "run-config", str(folder / "config.json"), "--results-root", str(results),
         "--data-root", str(data_root), "--device", "cpu", "--repair"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.returncode == 2, child.stderr
    last = child.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run folder ") and "checkpoint.pt is damaged" in last, last
    assert "rerun with --repair" not in last and last.endswith(FROM_SCRATCH + "."), last
    assert _files(folder) == before


def test_repair_of_another_problem_refuses_a_damaged_checkpoint_before_removing_anything(finished, tmp_path):
    """A damaged final.json hides the checkpoint's damage from the status; the repair still checks
    the checkpoint before it removes the results it could not rebuild."""
    results, folder = _copy(finished, tmp_path)
    _edit_checkpoint(folder, "recommended_d", 42)
    (folder / "final.json").write_text("{}")
    before = _files(folder)
    assert runs.inspect_run(ADAPTIVE, results).reason.startswith("final.json lacks the keys")
    with pytest.raises(RunFolderError, match=r"checkpoint\.pt is damaged: .*'recommended_d' is 42"):
        runs.run_one(ADAPTIVE, results_root=results, device="cpu", progress=False, repair=True)
    assert _files(folder) == before


def test_a_damaged_csv_is_blamed_on_the_csv_and_repair_rebuilds_it(finished, tmp_path, data_root):
    results, folder = _copy(finished, tmp_path)
    path = folder / "schedule_history.csv"
    original = path.read_bytes()
    frame = store.read_records_csv(path)
    k = _gp_round(frame.to_dict("records"))
    frame.loc[k, "d"] = 99
    store.write_records_csv(path, frame.to_dict("records"))
    state = runs.inspect_run(ADAPTIVE, results)
    assert state.status == "corrupt" and state.reason.startswith(
        f"schedule_history.csv row {k} (round {k}) column 'd' is 99, against its rule: len(arm) + 1"), state
    assert FROM_SCRATCH not in state.reason
    runs.run_one(ADAPTIVE, results_root=results, data_root=data_root, device="cpu", progress=False, repair=True)
    assert runs.inspect_run(ADAPTIVE, results).status == "done"
    assert path.read_bytes() == original
