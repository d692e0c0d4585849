"""run_one: caching, resume, failure records, repair, the lock, and checks before training."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from fake_trainer import FAIL_ENV, calls, cfg, fake_train, root  # noqa: F401 - root is a fixture
from tvolib import runs, training
from tvolib.checkpoint import atomic_write
from tvolib.runs import kinds, run as run_module, store
from tvolib.runs.store import RunFolderError
from tvolib.training.run_folder import LOCK_NAME, RunFolderAccessError


def test_registry_maps_kinds_to_classes_and_trainers():
    assert runs.get_kind("tvo").config_class is training.RunConfig and runs.get_kind("tvo").train is training.train
    assert runs.get_kind("pcfg").config_class is training.PCFGConfig
    assert runs.get_kind("pcfg").train is training.train_pcfg
    assert runs.get_kind("pcfg").load_model is training.load_model
    with pytest.raises(ValueError, match="unknown config kind 'gan'; accepted kinds: tvo, pcfg"):
        runs.get_kind("gan")


def test_registered_trainer_gets_the_shared_arguments(root, monkeypatch, tmp_path):
    seen = {}

    def trainer(config, run_dir=None, *, data_root=None, device=None, progress=None):
        seen.update(run_dir=run_dir, data_root=data_root, device=device, progress=progress)
        return fake_train(config, run_dir)

    entry = kinds.CONFIG_KINDS["tvo"]
    monkeypatch.setitem(kinds.CONFIG_KINDS, "tvo", kinds.ConfigKind(entry.config_class, trainer, entry.load_model))
    c = cfg()
    runs.run_one(c, results_root=root, data_root=tmp_path, device="cpu", progress=False)
    assert seen == {"run_dir": runs.run_dir(c, root), "data_root": tmp_path, "device": "cpu", "progress": False}


def test_failure_recorded_then_resumed(root, monkeypatch):
    c = cfg()
    monkeypatch.setenv(FAIL_ENV, f"{c.digest()}@2")
    with pytest.raises(RuntimeError, match="fake failure at epoch 2"):
        runs.run_one(c, results_root=root, train_fn=fake_train)
    folder = runs.run_dir(c, root)
    assert "RuntimeError: fake failure" in (folder / "error.txt").read_text()
    assert json.loads((folder / "wall_time.json").read_text())["seconds"] >= 0
    assert runs.run_status(c, root) == "partial"
    monkeypatch.delenv(FAIL_ENV)
    final = runs.run_one(c, results_root=root, train_fn=fake_train)
    assert final["digest"] == c.digest() and final["kind"] == "tvo" and not (folder / "error.txt").exists()
    assert calls(c, root) == 2 and runs.run_one(c, results_root=root, train_fn=fake_train) == final
    assert calls(c, root) == 2


@pytest.mark.parametrize("damage", ["{}", '{"epochs": 3, "ki', "foreign"])
def test_damaged_folder_stops_the_run_or_is_repaired(root, damage):
    other = cfg(seed=9)
    runs.run_one(other, results_root=root, train_fn=fake_train)
    c = cfg()
    runs.run_one(c, results_root=root, train_fn=fake_train)
    folder = runs.run_dir(c, root)
    text = (runs.run_dir(other, root) / "final.json").read_text() if damage == "foreign" else damage
    (folder / "final.json").write_text(text)
    with pytest.raises(RunFolderError, match=f"run folder {folder} is (corrupt|foreign).*Delete the folder"):
        runs.run_one(c, results_root=root, train_fn=fake_train)
    final = runs.run_one(c, results_root=root, train_fn=fake_train, repair=True)
    assert final["digest"] == c.digest() and final["test_log_px"] == -103.0
    assert runs.run_status(c, root) == "done"
    assert calls(c, root) == 2  # repaired by resuming from the intact checkpoint


def test_foreign_config_json_is_replaced_on_repair(root):
    a, b = cfg(seed=0), cfg(seed=1)
    runs.run_one(a, results_root=root, train_fn=fake_train)
    folder_b = runs.run_dir(b, root)
    folder_b.mkdir(parents=True)
    (folder_b / "config.json").write_text((runs.run_dir(a, root) / "config.json").read_text())
    with pytest.raises(RunFolderError, match="foreign: config.json holds another config"):
        runs.run_one(b, results_root=root, train_fn=fake_train)
    runs.run_one(b, results_root=root, train_fn=fake_train, repair=True)
    assert runs.load_config(folder_b) == b


def test_failed_final_write_leaves_no_final_json(root, monkeypatch):
    c = cfg()
    real = store.write_json

    def flaky(path, obj):
        if path.name == "final.json":
            def half(f):
                f.write('{"test_log_px": ')
                raise OSError("disk full")
            atomic_write(path, half, "w")
        real(path, obj)

    monkeypatch.setattr(run_module, "write_json", flaky)
    with pytest.raises(OSError, match="disk full"):
        runs.run_one(c, results_root=root, train_fn=fake_train)
    folder = runs.run_dir(c, root)
    assert not (folder / "final.json").exists() and not list(folder.glob(".*.tmp"))
    assert runs.run_status(c, root) == "partial"
    monkeypatch.setattr(run_module, "write_json", real)
    assert runs.run_one(c, results_root=root, train_fn=fake_train)["test_log_px"] == -103.0


def test_stale_temp_files_are_removed(root):
    c = cfg()
    folder = runs.run_dir(c, root)
    folder.mkdir(parents=True)
    (folder / ".final.json.abc123.tmp").write_text("half")
    runs.run_one(c, results_root=root, train_fn=fake_train)
    assert not list(folder.glob(".*.tmp"))


def test_incomplete_trainer_result_is_not_marked_done(root):
    def stops_early(config, run_dir, **kw):
        out = fake_train(config, run_dir, **kw)
        out.final["completed"] = False
        return out

    c = cfg()
    with pytest.raises(RuntimeError, match="incomplete"):
        runs.run_one(c, results_root=root, train_fn=stops_early)
    assert runs.run_status(c, root) == "partial"


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "meta"])
def test_unusable_device_rejected_before_training(root, device):
    with pytest.raises(ValueError, match=f"device={device!r} cannot be used.*accepted: 'cpu'"):
        runs.run_one(cfg(), results_root=root, device=device, train_fn=fake_train)
    assert not root.exists()


def test_unwritable_results_root_rejected_before_training(tmp_path):
    """A results root that is a file (as unwritable for root as for anyone)."""
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    c = cfg()
    with pytest.raises(RunFolderAccessError, match=f"run folder {runs.run_dir(c, blocker)} is not writable"):
        runs.run_one(c, results_root=blocker, train_fn=fake_train)


def test_second_process_on_the_same_folder_is_refused(root, tmp_path):
    """A child process holds the folder's lock file (as a running ``run_one`` does) meanwhile this one tries."""
    c = cfg()
    folder = runs.run_dir(c, root)
    folder.mkdir(parents=True)
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent(f"""
        import fcntl, sys
        with open({str(folder / LOCK_NAME)!r}, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            print("locked", flush=True)
            sys.stdin.readline()
    """))
    child = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(runs.RunLockedError, match=f"run folder {folder} is in use by another process"):
            runs.run_one(c, results_root=root, train_fn=fake_train)
        assert calls(c, root) == 0
    finally:
        child.communicate("done\n", timeout=60)
    runs.run_one(c, results_root=root, train_fn=fake_train)  # free again once the other process ended
    assert runs.run_status(c, root) == "done" and calls(c, root) == 1


def test_a_killed_attempt_counts_in_the_wall_time(root):
    """A kill leaves no record of its own: its time from start to last checkpoint is still summed."""
    import time
    from pathlib import Path

    c = cfg()

    def killed(config, run_dir, **options):
        time.sleep(0.4)
        (Path(run_dir) / "checkpoint.pt").write_text(json.dumps({"epoch": 0, "history": [{"epoch": 0}]}))
        raise KeyboardInterrupt  # as a kill: nothing after this line runs in the attempt

    with pytest.raises(KeyboardInterrupt):
        runs.run_one(c, results_root=root, train_fn=killed)
    final = runs.run_one(c, results_root=root, train_fn=fake_train)
    assert final["wall_seconds"] >= 0.4
