"""Run folders and configs that cannot be trusted: corrupt checkpoints, bad folders, a full disk, two
processes, stale temporary files, permissions, bad option values. Each case: the error type and a
message that names the file or the argument."""
from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import tvolib.checkpoint as ckpt
import tvolib.training.images as images
from tvolib.checkpoint import CorruptFileError, DiskFullError, atomic_save, atomic_write
from tvolib.training.images import RunConfig, train
from tvolib.training.kinds import load_model
from tvolib.training.loop import TrainingDivergedError
from tvolib.training.pcfg import PCFGConfig
from tvolib.training.run_folder import LOCK_NAME, RunFolder, RunFolderAccessError

TINY = RunConfig(n_train=200, n_test=50, batch_size=100, epochs=4, S=4, eval_S=8, d=3)
REPO = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _fit(run_dir, data_root, config=TINY, **kwargs):
    return train(config, run_dir, data_root=data_root, device="cpu", progress=False, **kwargs)


@pytest.fixture
def no_task(monkeypatch):
    """Fail loudly if training gets as far as building the task (data, model)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the task was built although the run folder is unusable")

    monkeypatch.setattr(images, "ImageTask", refuse)


# ------------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory, data_root) -> bytes:
    run_dir = tmp_path_factory.mktemp("good")
    _fit(run_dir, data_root, stop_after=2)
    return (run_dir / "checkpoint.pt").read_bytes()


def _edited(good: bytes, tmp_path: Path, **changes) -> bytes:
    path = tmp_path / "edit.pt"
    path.write_bytes(good)
    state = ckpt.load(path)
    state.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del state[key]
    torch.save(state, path)
    return path.read_bytes()


CORRUPT = {
    "truncated": (lambda good, tmp: good[: len(good) // 2], "corrupt"),
    "garbage": (lambda good, tmp: b"\x00garbage" * 100, "corrupt"),
    "empty": (lambda good, tmp: b"", "corrupt"),
    "not a dict": (lambda good, tmp: _saved([1, 2, 3], tmp), "not a tvolib checkpoint"),
    "missing keys": (lambda good, tmp: _edited(good, tmp, rng=None), r"missing \['rng'\]"),
    "format": (lambda good, tmp: _edited(good, tmp, format=99), "format 99"),
    "foreign config": (lambda good, tmp: _edited(good, tmp, digest="0123456789ab"), "belongs to config"),
    "epoch beyond the config": (lambda good, tmp: _edited(good, tmp, epoch=TINY.epochs + 1), "epoch 5, outside"),
    "negative epoch": (lambda good, tmp: _edited(good, tmp, epoch=-1), "epoch -1, outside"),
    "history cut": (lambda good, tmp: _edited_history(good, tmp, lambda rows: rows[:-1]),
                    r"at epoch 2 but its history holds the rows of epochs \[0, 1\]"),
    "history row repeated": (lambda good, tmp: _edited_history(good, tmp, lambda rows: [rows[0], *rows[:-1]]),
                             r"history holds the rows of epochs \[0, 0, 1\], not 0..2"),
}


def _edited_history(good: bytes, tmp: Path, edit) -> bytes:
    path = tmp / "history.pt"
    path.write_bytes(good)
    return _edited(good, tmp, history=edit(ckpt.load(path)["history"]))


def _saved(obj, tmp: Path) -> bytes:
    path = tmp / "obj.pt"
    torch.save(obj, path)
    return path.read_bytes()


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_a_bad_checkpoint_names_the_file_and_the_way_out(case, tmp_path, data_root, good_checkpoint, no_task):
    make, message = CORRUPT[case]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(make(good_checkpoint, tmp_path))
    with pytest.raises(CorruptFileError, match=message) as err:
        _fit(run_dir, data_root)
    assert str(run_dir / "checkpoint.pt") in str(err.value)
    if case != "foreign config":
        assert "delete" in str(err.value) and "from scratch" in str(err.value)


def _nan_weight(state):
    weights = state["model"]
    name = next(iter(weights))
    weights[name] = torch.full_like(weights[name], float("nan"))
    return {"model": weights}


def test_nan_weights_in_a_checkpoint_are_named_as_a_divergence(tmp_path, data_root, good_checkpoint):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(good_checkpoint)
    state = ckpt.load(path)
    torch.save({**state, **_nan_weight(state)}, path)
    with pytest.raises(TrainingDivergedError, match=r"epoch 3: the parameter model\['encoder.* holds NaN") as err:
        _fit(tmp_path, data_root)
    assert f"checkpoint in {tmp_path} holds them: delete it to restart the run" in str(err.value)


@pytest.mark.parametrize("damage, words", [
    (lambda state: {"optimizers": [{"state": {}, "param_groups": "garbled"}]}, r"cannot be restored \("),
    (lambda state: {"rng": {**state["rng"], "torch": torch.zeros(3, dtype=torch.uint8)}}, r"cannot be restored \("),
    (lambda state: {"model": {"nonsense": torch.zeros(2)}}, r"cannot be restored \(RuntimeError: Error\(s\) in loading"),
])
def test_a_checkpoint_that_cannot_be_restored_names_the_file_and_the_way_out(damage, words, tmp_path, data_root,
                                                                            good_checkpoint):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(good_checkpoint)
    state = ckpt.load(path)
    torch.save({**state, **damage(state)}, path)
    with pytest.raises(CorruptFileError, match=words) as err:
        _fit(tmp_path, data_root)
    assert str(err.value).startswith(str(path)) and f"delete {path} to restart the run" in str(err.value)


def test_an_optimiser_state_of_the_wrong_shape_names_the_file_and_the_way_out(tmp_path, data_root, good_checkpoint):
    """Adam's moments must have their parameters' shapes; otherwise the first step would fail deep in torch."""
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(good_checkpoint)
    state = ckpt.load(path)
    (optimiser,) = state["optimizers"]
    moments = optimiser["state"][0]
    moments["exp_avg"] = moments["exp_avg"].reshape(-1)[:3].clone()
    torch.save(state, path)
    with pytest.raises(CorruptFileError, match=r"cannot be restored .*optimiser 0's state of parameter 0: 'exp_avg' "
                                               r"has shape \(3,\), the parameter \(") as err:
        _fit(tmp_path, data_root)
    assert str(err.value).startswith(str(path)) and f"delete {path} to restart the run" in str(err.value)


#: A tiny GP-bandit run: windows of one epoch, two random rounds, small GP budgets.
BANDIT = TINY.replace(epochs=6, schedule="gp_bandit", schedule_options={
    "window": 1, "n_init": 2, "burn_in": 0, "ml_starts": 4, "raw_samples": 32, "num_restarts": 2, "acq_maxiter": 10})


def test_a_bandit_history_cut_with_its_round_counter_lowered_is_not_resumed(tmp_path, data_root):
    """The bandit's rounds must match the epochs the checkpoint trained: a history cut by its last
    round, with the round counter lowered and the arm mended to match, is refused (it would resume
    and leave a schedule_history.csv with a round missing)."""
    _fit(tmp_path, data_root, BANDIT, stop_after=4)
    path = tmp_path / "checkpoint.pt"
    state = ckpt.load(path)
    bandit = state["schedule"]
    assert bandit["round"] == 4
    bandit["history"], bandit["round"] = bandit["history"][:-1], 3
    bandit["arm"] = bandit["history"][-1]["next_arm"]
    torch.save(state, path)
    with pytest.raises(CorruptFileError, match=r"'start_epoch' is 4, but the last recorded round \(2\) ended at "
                                               r"epoch 3") as err:
        _fit(tmp_path, data_root, BANDIT)
    assert str(err.value).startswith(str(path)) and f"delete {path} to restart the run" in str(err.value)


def test_a_checkpoint_trained_on_other_data_files_is_not_resumed(tmp_path, data_root, good_checkpoint):
    """E.g. a run started on the derived Omniglot set must not go on with chardata.mat (no checksum)."""
    (tmp_path / "checkpoint.pt").write_bytes(_edited(good_checkpoint, tmp_path, data="chardata:0123:seed=0:v1"))
    with pytest.raises(CorruptFileError, match=r"other data files \(chardata:0123.*\) than those found now \(mnist\)"
                       ) as err:
        _fit(tmp_path, data_root)
    assert f"delete {tmp_path / 'checkpoint.pt'} to restart the run" in str(err.value)
    assert ckpt.load(tmp_path / "checkpoint.pt")["data"] == "chardata:0123:seed=0:v1"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, data_root) -> Path:
    run_dir = tmp_path_factory.mktemp("finished")
    _fit(run_dir, data_root)
    return run_dir


def _copy_run(finished: Path, target: Path) -> Path:
    target.mkdir()
    for name in ("checkpoint.pt", "model.pt"):
        (target / name).write_bytes((finished / name).read_bytes())
    return target


def test_another_runs_model_file_is_refused(tmp_path, finished_run):
    other = TINY.replace(seed=7)
    (tmp_path / "model.pt").write_bytes((finished_run / "model.pt").read_bytes())
    with pytest.raises(CorruptFileError, match=f"model.pt is the model of config '{TINY.digest()}', not of this "
                                               f"config '{other.digest()}'") as err:
        load_model(other, tmp_path)
    assert str(tmp_path / "model.pt") in str(err.value) and "run the trainer again" in str(err.value)
    assert isinstance(load_model(TINY, finished_run), torch.nn.Module)


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_lost_model_file_is_rebuilt_from_the_final_checkpoint(tmp_path, data_root, finished_run, damage,
                                                                monkeypatch):
    """The advice for a bad model.pt works: the trainer rewrites it from the checkpoint (no epoch trained again)."""
    run_dir = _copy_run(finished_run, tmp_path / "run")
    model = run_dir / "model.pt"
    if damage == "missing":
        model.unlink()
    else:
        model.write_bytes(model.read_bytes()[:100])
        with pytest.raises(CorruptFileError, match="run the trainer again"):
            load_model(TINY, run_dir)
    monkeypatch.setattr(images.ImageTask, "run_epoch", lambda *args: pytest.fail("an epoch was trained again"))
    result = _fit(run_dir, data_root)
    assert result.final["completed"] and len(result.history) == TINY.epochs + 1
    assert model.read_bytes() == (finished_run / "model.pt").read_bytes()


def test_an_empty_run_dir_is_an_error_not_the_current_folder(tmp_path, data_root, monkeypatch, no_task):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"run_dir must be a folder path .* or None to save nothing; got ''"):
        _fit("", data_root)
    assert not list(tmp_path.iterdir())


def test_a_corrupt_model_file_names_the_file(tmp_path):
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptFileError, match="model.pt is corrupt") as err:
        load_model(TINY, tmp_path)
    assert str(tmp_path / "model.pt") in str(err.value)
    with pytest.raises(FileNotFoundError, match="not complete"):
        load_model(TINY, tmp_path / "nothing")


def test_a_format_1_checkpoint_with_two_optimisers_resumes_exactly(tmp_path, data_root):
    """Checkpoints written before the shared loop kept one Adam for theta and one for phi."""
    straight = _fit(tmp_path / "straight", data_root)
    _fit(tmp_path / "old", data_root, stop_after=2)
    path = tmp_path / "old" / "checkpoint.pt"
    state = ckpt.load(path)
    (merged,) = state["optimizers"]
    model = images.build_model(TINY.model)
    n_theta = len(list(model.generative_parameters()))
    group = merged["param_groups"][0]

    def part(ids):
        return {"state": {i - ids[0]: merged["state"][i] for i in ids if i in merged["state"]},
                "param_groups": [dict(group, params=[i - ids[0] for i in ids])]}

    state.update(format=1, optimizers=[part(group["params"][:n_theta]), part(group["params"][n_theta:])])
    torch.save(state, path)
    resumed = _fit(tmp_path / "old", data_root)
    strip = lambda h: [{k: v for k, v in r.items() if k != "seconds"} for r in h]  # noqa: E731
    assert strip(resumed.history) == strip(straight.history)


# ------------------------------------------------------------------------------------------
# Run folders
# ------------------------------------------------------------------------------------------


def test_a_run_folder_that_is_a_file_is_refused_before_training(tmp_path, data_root, no_task):
    target = tmp_path / "run"
    target.write_text("not a folder")
    with pytest.raises(RunFolderAccessError, match="is a file, not a folder") as err:
        _fit(target, data_root)
    assert str(target) in str(err.value)


def test_an_unwritable_run_folder_is_refused_before_training(tmp_path, data_root, no_task, monkeypatch):
    def denied(*args, **kwargs):  # as root, chmod cannot make a folder unwritable: simulate the OS's answer
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("tvolib.training.run_folder.tempfile.mkstemp", denied)
    with pytest.raises(RunFolderAccessError, match="is not writable") as err:
        _fit(tmp_path / "run", data_root)
    assert str(tmp_path / "run") in str(err.value)


def test_a_full_disk_fails_clearly_and_keeps_the_previous_checkpoint(tmp_path, data_root, monkeypatch):
    _fit(tmp_path, data_root, stop_after=1)
    before = (tmp_path / "checkpoint.pt").read_bytes()
    real_fsync = os.fsync

    def full(fd):
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(ckpt.os, "fsync", full)
    with pytest.raises(DiskFullError, match="no space left") as err:
        _fit(tmp_path, data_root, checkpoint_every=1)
    assert str(tmp_path / "checkpoint.pt") in str(err.value)
    assert (tmp_path / "checkpoint.pt").read_bytes() == before
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("target", ["nowhere", "loop"])
def test_a_dangling_or_looping_symlink_as_run_folder_is_named(tmp_path, data_root, no_task, target):
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "nowhere" if target == "nowhere" else link)
    with pytest.raises(RunFolderAccessError, match="is a symbolic link to .*dangling or looping") as err:
        _fit(link, data_root)
    assert str(link) in str(err.value) and "remove the link" in str(err.value)


def test_a_file_size_limit_is_named_like_a_full_disk(tmp_path, monkeypatch):
    atomic_write(tmp_path / "final.json", lambda f: f.write("{}"), "w")

    def too_large(fd):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(ckpt.os, "fsync", too_large)
    with pytest.raises(DiskFullError, match=r"could not write .*final\.json: file too large .*ulimit -f") as err:
        atomic_write(tmp_path / "final.json", lambda f: f.write('{"a": 1}'), "w")
    assert str(tmp_path / "final.json") in str(err.value)
    assert (tmp_path / "final.json").read_text() == "{}" and not list(tmp_path.glob(".*.tmp"))


def test_a_second_thread_is_stopped_by_the_lock(tmp_path):
    errors = []

    def enter():
        try:
            with RunFolder(tmp_path):
                pass
        except RunFolderAccessError as exc:
            errors.append(exc)

    with RunFolder(tmp_path), RunFolder(tmp_path):  # the same thread enters again (runner, then trainer)
        thread = threading.Thread(target=enter)
        thread.start()
        thread.join()
    assert len(errors) == 1 and "in use by another thread of this process" in str(errors[0])
    thread = threading.Thread(target=enter)  # free again
    thread.start()
    thread.join()
    assert len(errors) == 1


def test_a_second_process_is_stopped_by_the_lock(tmp_path, data_root):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from tvolib.training.run_folder import RunFolder\n"
         "with RunFolder(sys.argv[1]):\n    print('locked', flush=True)\n    sys.stdin.read()\n",
         str(tmp_path)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderAccessError, match="in use by another process") as err:
            _fit(tmp_path, data_root)
        assert str(tmp_path / LOCK_NAME) in str(err.value)
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0
    assert _fit(tmp_path, data_root, config=TINY.replace(epochs=1)).final["completed"]  # free again


def test_stale_temporary_files_are_removed_at_start(tmp_path):
    stale = [tmp_path / ".checkpoint.pt.x1y2.tmp", tmp_path / ".model.pt.abc.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")
    keep = tmp_path / "notes.tmp"
    keep.write_text("a user's file")
    with RunFolder(tmp_path):
        assert not any(path.exists() for path in stale)
    assert keep.exists()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_save({"a": 1}, tmp_path / "state.pt")
        atomic_write(tmp_path / "final.json", lambda f: f.write("{}"), "w")
    finally:
        os.umask(old)
    for name in ("state.pt", "final.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


# ------------------------------------------------------------------------------------------
# Config values
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"model_options": {"hidden": 7}}, "model_options", "building model 'vae' failed"),
        ({"model_options": {"latent_dim": 0}}, "model_options", "latent_dim"),
        ({"schedule": "gp_bandit", "schedule_options": {"window": 0}}, "schedule_options", "window"),
        ({"schedule": "moments", "schedule_options": {"update_every": 0}}, "schedule_options", "update_every"),
        ({"schedule": "gp_bandit", "schedule_options": {"box": (0.5, 0.2)}}, "schedule_options", "box"),
        ({"schedule": "gp_bandit", "schedule_options": {"max_observations": 4}}, "schedule_options",
         "max_observations=4 is below n_init=15"),
        ({"schedule": "gp_bandit", "schedule_options": {"ml_starts": 10**9}}, "schedule_options",
         r"ml_starts .*in \[1, 2000\]"),
        ({"seed": 2**70}, "seed", r"\[0, 2\*\*63\)"),
        ({"data_seed": 2**63}, "data_seed", r"\[0, 2\*\*63\)"),
    ],
)
def test_option_values_are_checked_by_validate(changes, field, words):
    with pytest.raises(ValueError, match=rf"RunConfig\.{field}") as err:
        RunConfig(**changes).validate()
    assert re.search(words, str(err.value)), str(err.value)


def test_validate_leaves_the_global_rng_alone():
    before = torch.get_rng_state()
    RunConfig(schedule="gp_bandit").validate()
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("field", ["seed", "data_seed"])
def test_pcfg_seeds_are_bounded(field):
    with pytest.raises(ValueError, match=rf"PCFGConfig\.{field}=.*2\*\*63"):
        PCFGConfig(**{field: 2**64}).validate()


def test_bad_trainer_arguments_are_named(tmp_path, data_root):
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        _fit(tmp_path, data_root, checkpoint_every=0)
    with pytest.raises(ValueError, match="stop_after=-1"):
        _fit(tmp_path, data_root, stop_after=-1)


@pytest.mark.parametrize("changes, field", [
    ({"schedule": "gp_bandit", "d": 1000}, "d"),
    ({"schedule": "gp_bandit", "d": 1000, "schedule_options": {"window": 3}}, "d"),
    ({"schedule": "gp_bandit", "d": 5, "schedule_options": {"window": 0}}, "schedule_options"),
])
def test_a_schedule_that_cannot_be_built_blames_the_right_field(changes, field):
    with pytest.raises(ValueError, match=rf"^RunConfig\.{field}=") as err:
        RunConfig(**changes).validate()
    assert "building schedule 'gp_bandit' failed" in str(err.value)
