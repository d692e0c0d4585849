"""Run folders: names, config records, and the verification that decides what counts as done."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from fake_trainer import cfg, root, run  # noqa: F401 - root is a fixture
from tvolib import runs
from tvolib.runs import store
from tvolib.runs.store import RunFolderError
from tvolib.training import RunConfig
from tvolib.training.pcfg import PCFGConfig


def _perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5
    if isinstance(value, str):
        return value + "_x"
    if value is None:
        return 7
    if isinstance(value, tuple):
        return value + (("zz_extra", 1),)
    raise AssertionError(f"no perturbation for {value!r}")


def test_digest_sensitive_to_every_field():
    base = cfg()
    seen = {base.digest()}
    for f in dataclasses.fields(RunConfig):
        changed = dataclasses.replace(base, **{f.name: _perturb(getattr(base, f.name))})
        assert changed.digest() not in seen, f"digest ignores field {f.name}"
        seen.add(changed.digest())
        assert runs.run_dir(changed) != runs.run_dir(base)


def test_digest_stable_across_processes_and_spellings():
    a = cfg(schedule="gp_bandit", schedule_options={"b": 1, "a": (1, 2)})
    b = RunConfig.from_dict(json.loads(json.dumps(a.to_dict())))
    assert a == b and a.digest() == b.digest() and len(a.digest()) == 12
    code = ("import json,sys; from tvolib.training import RunConfig; "
            "print(RunConfig.from_dict(json.loads(sys.argv[1])).digest())")
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(a.to_dict())], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    assert out.stdout.strip() == a.digest()


def test_committed_digest_unchanged():
    """A config of the committed results keeps its folder name (cached runs still resolve)."""
    c = RunConfig(model="vae", dataset="mnist", S=10, batch_size=50, d=2, data_seed=0, epochs=60, eval_S=300,
                  eval_every=20, log_beta1=0.025, lr=0.001, n_test=300, n_train=1000, objective="tvo",
                  schedule="moments", seed=0)
    record = store.config_record(c)
    assert store.config_from_dict(json.loads(json.dumps(record))) == c
    assert runs.config_digest(c) == f"tvo-{c.digest()}"


PINNED_DIGESTS = [
    (RunConfig(model="vae", dataset="mnist", S=10, batch_size=50, d=2, data_seed=0, epochs=60, eval_S=300,
               eval_every=20, log_beta1=0.025, lr=0.001, n_test=300, n_train=1000, objective="tvo",
               schedule="moments", seed=0), "1162bce91751"),
    (RunConfig(), "d01831eb8b26"),
    (RunConfig(model="sbn", dataset="omniglot", n_train=192, lr=3e-4), "2ef9992851a5"),
    (PCFGConfig(), "5a90b9671517"),
    (PCFGConfig(objective="reinforce"), "40f27814441c"),
]


@pytest.mark.parametrize("config, digest", PINNED_DIGESTS, ids=lambda v: v if isinstance(v, str) else None)
def test_pinned_digests_never_change(config, digest):
    """Cached results are found by these names: a change of the digest's recipe must leave them all as they are
    (bandit configs are left out: their digests carry the bandit's revision, which changes on purpose)."""
    assert config.digest() == digest


def test_run_dir_layout_and_kinds_never_share_a_folder(tmp_path):
    c = cfg()
    assert runs.run_dir(c, tmp_path) == tmp_path / f"tvo-{c.digest()}"

    @dataclasses.dataclass(frozen=True)
    class Other:  # same to_dict and digest, another kind
        kind = "pcfg"
        inner: RunConfig

        def to_dict(self):
            return self.inner.to_dict()

        def digest(self):
            return self.inner.digest()

        def validate(self):
            return self

    assert runs.run_dir(Other(c), tmp_path) != runs.run_dir(c, tmp_path)


@given(seed=st.integers(0, 2**31 - 1), d=st.integers(2, 50), schedule=st.sampled_from(["log", "linear", "moments"]))
def test_config_record_round_trip(seed, d, schedule):
    c = cfg(seed=seed, d=d, schedule=schedule)
    assert store.config_from_dict(json.loads(json.dumps(store.config_record(c)))) == c
    assert store.config_from_dict(c.to_dict()) == c


def test_config_from_dict_rejects_bad_records(tmp_path):
    with pytest.raises(ValueError, match="unknown config kind 'nope'.*tvo, pcfg"):
        store.config_from_dict({"kind": "nope", "config": {}})
    with pytest.raises(ValueError, match="unknown RunConfig fields"):
        store.config_from_dict({"model": "vae", "colour": "red"})
    with pytest.raises(ValueError, match="JSON object"):
        store.config_from_dict([1, 2])
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"bad\.json is not valid JSON"):
        store.load_config(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="no config file"):
        store.load_config(tmp_path / "absent.json")


# ---------------------------------------------------------------------------------------------
# Verification of complete runs
# ---------------------------------------------------------------------------------------------

def _done(root, **changes):
    c = cfg(**changes)
    run([c], root)
    assert runs.run_status(c, root) == "done"
    return c, runs.run_dir(c, root)


@pytest.mark.parametrize("content, status, reason", [
    ("{}", "corrupt", r"final\.json lacks the keys \['kind', 'digest', 'epochs'\]"),
    ('{"test_log_px": -10', "corrupt", r"final\.json is not valid JSON"),
    ("[1, 2]", "corrupt", r"final\.json is not a JSON object"),
    (b"\xff\xfe\x00", "corrupt", r"final\.json is not valid JSON"),
])
def test_damaged_final_json_is_not_done(root, content, status, reason):
    c, folder = _done(root)
    final = folder / "final.json"
    final.write_bytes(content if isinstance(content, bytes) else content.encode())
    state = runs.inspect_run(c, root)
    assert state.status == status and re.search(reason, state.reason), state.reason
    with pytest.raises(RunFolderError, match=f"run folder {folder} is {status}") as info:
        runs.load_final(c, root)
    assert "Delete the folder" in str(info.value) and "--repair" in str(info.value)
    assert info.value.problems == [(folder, status, state.reason)]


def test_another_configs_final_json_is_foreign(root):
    a, folder_a = _done(root, seed=0)
    b, folder_b = _done(root, seed=1)
    (folder_b / "final.json").write_text((folder_a / "final.json").read_text())
    state = runs.inspect_run(b, root)
    assert state.status == "foreign" and f"belongs to run tvo-{a.digest()}" in state.reason
    with pytest.raises(RunFolderError, match="foreign"):
        runs.results_frame([b], root)  # never reports a's test log p(x) as b's
    assert runs.results_frame([a], root)["test_log_px"].tolist() == [-103.0]


def test_folder_holding_another_config_is_foreign_or_corrupt(root):
    a, folder_a = _done(root, seed=0)
    b = cfg(seed=1)
    folder_b = runs.run_dir(b, root)
    folder_b.mkdir(parents=True)
    (folder_b / "config.json").write_text((folder_a / "config.json").read_text())
    assert runs.inspect_run(b, root) == store.RunState(
        "foreign", f"config.json holds another config (tvo-{a.digest()}), not tvo-{b.digest()}: fields ['seed'] differ")
    (folder_b / "config.json").write_text("{not json")
    assert runs.inspect_run(b, root).status == "corrupt"
    folder_b.rename(root / "elsewhere")
    folder_b.write_text("a file where the folder should be")
    assert runs.inspect_run(b, root) == store.RunState("corrupt", "the path is a file, not a folder")


@pytest.mark.parametrize("edit, words", [
    ({"epochs": 1, "completed": False}, r"records 1 of the config's 3 epochs \(completed: False\)"),
    ({"completed": False}, r"records 3 of the config's 3 epochs \(completed: False\)"),
    ({"epochs": 2}, r"records 2 of the config's 3 epochs"),
])
def test_final_json_of_an_unfinished_run_is_not_done_and_repair_finishes_it(root, edit, words):
    c, folder = _done(root)
    final = json.loads((folder / "final.json").read_text())
    (folder / "final.json").write_text(json.dumps({**final, **edit}))
    state = runs.inspect_run(c, root)
    assert state.status == "corrupt" and re.search(words, state.reason), state.reason
    with pytest.raises(RunFolderError, match="--repair"):
        runs.load_final(c, root)
    assert run([c], root, repair=True)["epochs"].tolist() == [3]
    assert runs.load_final(c, root)["completed"] is True


@pytest.mark.parametrize("damage, words", [
    (lambda path: path.write_bytes(b"\x89PNG\x00\xff\xfe garbage"), "history.csv cannot be parsed"),
    (lambda path: path.write_text("\n".join(path.read_text().splitlines()[:3]) + "\n"),
     r"history.csv holds 2 rows, not the 4 of epochs 0..3"),
    (lambda path: path.write_bytes(b""), "history.csv holds 0 rows"),
])
def test_a_damaged_history_is_not_done_and_repair_rebuilds_it(root, damage, words):
    c, folder = _done(root)
    damage(folder / "history.csv")
    state = runs.inspect_run(c, root)
    assert state.status == "corrupt" and re.search(words, state.reason), state.reason
    run([c], root, repair=True)
    assert runs.inspect_run(c, root).status == "done"
    assert [r["epoch"] for r in runs.load_history(c, root, as_records=True)] == [0, 1, 2, 3]


@pytest.mark.parametrize("damage, words", [
    (lambda path, other: path.unlink(), "model.pt is missing although final.json marks the run complete"),
    (lambda path, other: path.write_bytes(path.read_bytes()[:40]), "model.pt is corrupt"),
    (lambda path, other: path.write_bytes(other.read_bytes()), "model.pt is the model of config"),
])
def test_a_bad_model_file_is_not_done_and_repair_rebuilds_it(root, damage, words):
    c, folder = _done(root, seed=0)
    _, other = _done(root, seed=1)
    damage(folder / "model.pt", other / "model.pt")
    state = runs.inspect_run(c, root)
    assert state.status == "corrupt" and words in state.reason, state.reason
    run([c], root, repair=True)
    assert runs.inspect_run(c, root).status == "done"


def test_done_needs_the_history_files(root):
    c, folder = _done(root)
    (folder / "history.csv").unlink()
    state = runs.inspect_run(c, root)
    assert state.status == "corrupt" and "history.csv is missing" in state.reason


@pytest.mark.parametrize("content", [b"\x89PNG\x00\xff\xfe garbage", b"epoch,loss\n1,0.5\n2,0.4,extra,cells\n"])
@pytest.mark.parametrize("name, loader", [("history.csv", runs.load_history),
                                          ("schedule_history.csv", runs.load_schedule_history)])
def test_corrupt_history_error_names_the_file(root, content, name, loader):
    c, folder = _done(root)
    (folder / name).write_bytes(content)
    with pytest.raises(RunFolderError, match=f"{folder / name} cannot be parsed"):
        loader(c, root)


def test_clear_run_keeps_checkpoint_when_config_is_right(root):
    c, folder = _done(root)
    (folder / "final.json").write_text("{}")
    store.clear_run(c, root)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "checkpoint.pt", "config.json", "fake_calls.log", "wall_time.json"]
    (folder / "config.json").write_text("{}")
    store.clear_run(c, root)
    assert not folder.exists()


def test_numpy_numbers_are_accepted_and_numbers_normalised_before_hashing(root):
    np = pytest.importorskip("numpy")
    c = cfg(n_train=np.int64(100), lr=np.float64(0.001), seed=np.int32(0))
    assert c == cfg() and c.digest() == cfg().digest()
    assert run([c], root)["n_train"].tolist() == [100]
    assert RunConfig(lr=1).digest() == RunConfig(lr=1.0).digest() and RunConfig(lr=1).lr == 1.0
    assert PCFGConfig(likelihood_scale=np.int64(2)).digest() == PCFGConfig(likelihood_scale=2.0).digest()


def test_a_config_value_that_json_cannot_hold_is_named(root):
    with pytest.raises(ValueError, match=r"config #0 \(RunConfig\): a field holds a value that cannot be stored"):
        run([cfg(n_train={100})], root)


def test_an_edited_config_json_names_the_fields(root):
    c, folder = _done(root)
    record = json.loads((folder / "config.json").read_text())
    record["config"]["colour"] = "red"
    record["config"]["d"] = 7
    (folder / "config.json").write_text(json.dumps(record))
    state = runs.inspect_run(c, root)
    assert state == store.RunState("foreign", f"config.json holds another config (tvo-{c.digest()}), not "
                                              f"tvo-{c.digest()}: fields ['colour', 'd'] differ (an edited file?)")


def test_numpy_values_in_options_are_accepted_and_one_run_has_one_digest(root):
    """NumPy and torch scalars in schedule_options are Python numbers before validation and hashing; kappa=2
    and 2.0, an explicit preset value and the preset, None and no option name one run (one folder)."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    two = cfg(schedule="gp_bandit", schedule_options={"kappa": 2.0})
    for kappa in (2, np.int64(2), np.float32(2.0), torch.tensor(2), torch.tensor(2.0)):
        same = cfg(schedule="gp_bandit", schedule_options={"kappa": kappa})
        assert same == two and same.digest() == two.digest() and same.validate().schedule_options == (("kappa", 2.0),)
    assert run([cfg(schedule="gp_bandit", schedule_options={"kappa": np.int64(2), "corner_guards": np.bool_(False)})],
               root, dry_run=True)["status"].tolist() == ["missing"]
    preset = cfg(schedule="gp_bandit")
    for explicit in ({"protocol": "tvolib"}, {"corner_guards": True}, {"trend": True}, {"corner_guards": np.bool_(True)}, {"kappa": None},
                     {"kappa": "log_n", "arm_domain": "staggered", "standardize": "robust", "n_init": None}):
        spelled = cfg(schedule="gp_bandit", schedule_options=explicit)
        assert spelled == preset and spelled.digest() == preset.digest(), explicit
    code = cfg(schedule="gp_bandit", schedule_options={"protocol": "code"})
    assert code.digest() != preset.digest() and code.validate().schedule_options == (("protocol", "code"),)
    text = cfg(schedule="gp_bandit", schedule_options={"protocol": "paper-text"})
    assert cfg(schedule="gp_bandit", schedule_options={"protocol": "paper-text", "kappa": "theorem1"}) == text
    # a value that differs from the preset's is another run; options at a non-protocol default keep their names
    assert cfg(schedule="gp_bandit", schedule_options={"kappa": "theorem1"}).digest() != preset.digest()
    assert cfg(schedule="gp_bandit", schedule_options={"burn_in": 0}).digest() != preset.digest()
    assert cfg(schedule="random", schedule_options={"arm_domain": "staggered", "window": np.int64(3)}) == cfg(
        schedule="random", schedule_options={"window": 3})
    assert cfg(model_options={"latent_dim": np.int64(4)}).validate().model_options == (("latent_dim", 4),)
    scalars = cfg(n_train=torch.tensor(100), lr=torch.tensor(1e-3, dtype=torch.float64))
    assert type(scalars.n_train) is int and type(scalars.lr) is float and scalars.digest() == cfg(lr=1e-3).digest()


# ---------------------------------------------------------------------------------------------
# A bandit run's rounds: schedule_history.csv is verified against the final checkpoint
# ---------------------------------------------------------------------------------------------

#: A tiny GP-bandit run (real training): 100 MNIST images, 4 windows of one epoch, small GP budgets.
BANDIT = cfg(n_train=100, n_test=20, batch_size=100, epochs=4, S=2, eval_S=4, schedule="gp_bandit",
             schedule_options={"window": 1, "n_init": 2, "burn_in": 0, "ml_starts": 4, "raw_samples": 32,
                               "num_restarts": 2, "acq_maxiter": 10, "fit_maxiter": 10})


@pytest.fixture(scope="module")
def bandit_results(tmp_path_factory, data_root):
    """Two finished bandit runs (seeds 0 and 1), trained once for the module."""
    results = tmp_path_factory.mktemp("bandit") / "results"
    for seed in (0, 1):
        runs.run_one(BANDIT.replace(seed=seed), results_root=results, data_root=data_root, device="cpu",
                     progress=False)
    return results


def _lines(edit):
    return lambda path, other: path.write_text("".join(edit(path.read_text().splitlines(keepends=True))))


def _frame(edit):
    def damage(path, other):
        import pandas as pd

        frame = pd.read_csv(path).astype(object)
        edit(frame)
        frame.to_csv(path, index=False)
    return damage


SCHEDULE_DAMAGE = {
    "last line removed": (_lines(lambda lines: lines[:-1]), r"holds 3 rows, not the 4 rounds recorded in checkpoint\.pt"),
    "header only": (_lines(lambda lines: lines[:1]), r"holds 0 rows, not the 4 rounds"),
    "emptied": (lambda path, other: path.write_bytes(b""), r"holds 0 rows, not the 4 rounds"),
    "row repeated": (_lines(lambda lines: lines[:3] + lines[2:]), r"holds 5 rows, not the 4 rounds"),
    "next_arm garbled": (_frame(lambda f: f.__setitem__("next_arm", ["[0.1, x"] * len(f))),
                         r"row 0 \(round 0\) column 'next_arm' must be a list of finite numbers; got '\[0\.1, x'"),
    "arm column dropped": (_frame(lambda f: f.pop("arm")), r"lacks the columns \['arm'\]$"),
    "another run's file": (lambda path, other: path.write_bytes(other.read_bytes()),
                           r"row 0, column 'arm' holds \[.*\], but round 0 in checkpoint\.pt records .*another run's"),
}


@pytest.mark.parametrize("case", list(SCHEDULE_DAMAGE))
def test_a_damaged_bandit_history_is_not_done_and_repair_rebuilds_it(case, bandit_results, tmp_path, data_root):
    """One row per round of the final checkpoint, every column, parsable cells, this run's rounds:
    otherwise the run is corrupt (status says so), and --repair rebuilds the file from the checkpoint."""
    damage, words = SCHEDULE_DAMAGE[case]
    results = tmp_path / "results"
    shutil.copytree(bandit_results, results)
    c = BANDIT.replace(seed=0)
    path = runs.run_dir(c, results) / "schedule_history.csv"
    original = path.read_bytes()
    damage(path, runs.run_dir(BANDIT.replace(seed=1), results) / "schedule_history.csv")
    state = runs.inspect_run(c, results)
    assert state.status == "corrupt" and state.reason.startswith("schedule_history.csv ") \
        and re.search(words, state.reason), state.reason
    assert runs.status([c], results)["status"].tolist() == ["corrupt"]
    with pytest.raises(RunFolderError, match="schedule_history.csv"):
        runs.load_schedule_history(c, results)
    runs.run_one(c, results_root=results, data_root=data_root, device="cpu", progress=False, repair=True)
    assert runs.inspect_run(c, results).status == "done"
    assert path.read_bytes() == original  # exact: the same records, written by the same code
    assert len(runs.load_schedule_history(c, results)) == 4


def test_a_bandit_run_without_its_final_checkpoint_is_not_done(bandit_results, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(bandit_results, results)
    c = BANDIT.replace(seed=0)
    folder = runs.run_dir(c, results)
    other = runs.run_dir(BANDIT.replace(seed=1), results)
    (folder / "checkpoint.pt").write_bytes((other / "checkpoint.pt").read_bytes())
    assert re.search(r"schedule_history\.csv cannot be verified: .*checkpoint\.pt belongs to config",
                     runs.inspect_run(c, results).reason)
    (folder / "checkpoint.pt").unlink()
    assert runs.inspect_run(c, results) == store.RunState(
        "corrupt", "schedule_history.csv cannot be verified: checkpoint.pt, the bandit's own record of its rounds, "
                   "is missing")
