"""The command line: plans, status, one-config runs, and one ``error:`` line for every expected failure."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tvolib import runs
from tvolib.__main__ import main
from tvolib.runs import kinds

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "runs"))
from fake_trainer import cfg, fake_train, root  # noqa: E402,F401 - root is a fixture


@pytest.fixture()
def fake_tvo(monkeypatch):
    entry = kinds.CONFIG_KINDS["tvo"]
    monkeypatch.setitem(kinds.CONFIG_KINDS, "tvo", kinds.ConfigKind(entry.config_class, fake_train, entry.load_model))


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_dry_run_and_status(root, capsys):
    assert main(["run", "fig2", "--profile", "smoke", "--dry-run", "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "profile 'smoke'" in out and "1 runs: 0 cached, 0 partial (resume), 1 new -> 1 to run" in out
    assert "gp_bandit" in out and "missing" in out and not root.exists()
    assert main(["status", "fig4", "--profile", "smoke", "--results-root", str(root)]) == 0
    assert "fig4_vae_mnist_fashion at profile smoke: 0 done, 0 partial, 28 missing" in capsys.readouterr().out
    assert main(["status", "--profile", "smoke", "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "table_permutation" in out and "all (distinct runs)" in out and "corrupt" in out and "foreign" in out


def test_dry_run_shows_stacks_and_the_gpu_profile_compares_with_paper(root, capsys):
    assert main(["run", "fig4", "--profile", "smoke", "--dry-run", "--stack", "on", "--max-stack", "3",
                 "--results-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "28 to run (24 of them in 8 stack(s) of at most 3 runs)" in out and "stack" in out.splitlines()[2]
    assert main(["run", "fig2", "--profile", "gpu", "--dry-run", "--results-root", str(root)]) == 0
    assert "the paper profile would take about" in capsys.readouterr().out
    assert main(["list"]) == 0
    assert "gpu: 1269 runs" in capsys.readouterr().out


def test_run_config_status_and_damaged_folder(root, tmp_path, capsys, fake_tvo):
    c = cfg()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(c.to_dict()))
    assert main(["run-config", str(path), "--results-root", str(root)]) == 0
    assert "test_log_px: -103.0" in capsys.readouterr().out and runs.run_status(c, root) == "done"
    folder = runs.run_dir(c, root)
    (folder / "final.json").write_text("{}")
    assert main(["run-config", str(path), "--results-root", str(root)]) == 2
    assert f"error: run folder {folder} is corrupt: final.json lacks the keys" in _error_line(capsys)
    assert main(["run-config", str(path), "--results-root", str(root), "--repair"]) == 0
    assert runs.run_status(c, root) == "done"
    capsys.readouterr()


@pytest.mark.parametrize("argv, message", [
    (["run", "fig99", "--profile", "smoke", "--dry-run"], "unknown figure 'fig99'"),
    (["status", "--profile", "huge"], "unknown profile 'huge'"),
    (["run", "fig2", "--profile", "smoke", "--device", "tpu"], "device='tpu' cannot be used"),
    (["run", "fig2", "--profile", "smoke", "--executor", "mpi"], "unknown executor 'mpi'"),
    (["run", "fig2", "--profile", "smoke", "--executor", "slurm", "--slurm-array-parallelism", "0"],
     "array_parallelism must be an int >= 1"),
    (["run", "fig2", "--profile", "smoke", "--stack", "on", "--max-stack", "0"], "max_stack=0 must be"),
    (["run-config", "{missing}"], "no config file at"),
    (["run-config", "{bad_json}"], "is not valid JSON"),
    (["run-config", "{bad_model}"], "model='gan'"),
    (["run-config", "{good}", "--device", "tpu"], "device='tpu' cannot be used"),
    (["run-config", "{good}", "--results-root", "{a_file}"], "is not writable"),
    (["run", "fig2", "--profile", "smoke", "--dry-run", "--results-root", ""], "results_root must be a folder path"),
    (["status", "fig2", "--profile", "smoke", "--results-root", ""], "got '' (an empty path is never the default)"),
    (["run-config", "{good}", "--results-root", ""], "results_root must be a folder path"),
    (["run-config", "{good}", "--data-root", ""], "data_root must be a folder path"),
    (["run", "fig2", "--profile", "smoke", "--data-root", ""], "data_root must be a folder path"),
])
def test_expected_failures_end_in_one_error_line(argv, message, root, tmp_path, capsys, fake_tvo):
    files = {"missing": tmp_path / "absent.json", "bad_json": tmp_path / "bad.json", "bad_model": tmp_path / "gan.json",
             "good": tmp_path / "good.json", "a_file": tmp_path / "a_file"}
    files["bad_json"].write_text('{"model": ')
    files["bad_model"].write_text(json.dumps({**cfg().to_dict(), "model": "gan"}))
    files["good"].write_text(json.dumps(cfg().to_dict()))
    files["a_file"].write_text("not a folder")
    argv = [a.format(**files) for a in argv]
    if "--results-root" not in argv:
        argv += ["--results-root", str(root)]
    assert main(argv) == 2
    assert message in _error_line(capsys)


@pytest.mark.parametrize("options, message", [
    ({"time_varying": "false"}, "time_varying must be True or False (or 0 or 1); got 'false' (a str)"),
    ({"trend": "no"}, "trend must be one of [True, False] (or 0 or 1); got 'no'"),
    ({"time_varying": 2}, "time_varying must be True or False (or 0 or 1); got 2 (a int)"),
])
def test_run_config_refuses_a_string_or_number_for_a_flag(options, message, root, tmp_path, capsys, fake_tvo):
    """A JSON config's ``"false"`` is a string, never a flag; nothing is trained or written."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg().to_dict(), "schedule": "gp_bandit_adaptive", "schedule_options": options}))
    assert main(["run-config", str(path), "--results-root", str(root)]) == 2
    err = _error_line(capsys)
    assert "schedule_options" in err and message in err and not root.exists()


def test_run_config_reads_0_and_1_as_flags_and_names_the_run_as_with_booleans(root, tmp_path, capsys, fake_tvo):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg().to_dict(), "schedule": "gp_bandit_adaptive",
                                "schedule_options": {"time_varying": 0, "n_init": 15}}))
    assert main(["run-config", str(path), "--results-root", str(root)]) == 0
    same = cfg(schedule="gp_bandit_adaptive", schedule_options={"time_varying": False})
    assert f"[tvolib] {same.kind}-{same.digest()} complete" in capsys.readouterr().out  # (the fake trainer's
    # run lacks a bandit's checkpoint: its status is not the point here)


def test_corrupt_history_named_and_traceback_on_request(root, capsys, fake_tvo):
    c = cfg()
    runs.run_one(c, results_root=root)
    history = runs.run_dir(c, root) / "history.csv"
    history.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(runs.RunFolderError, match=f"{history} cannot be parsed"):
        runs.load_history(c, root)
    (runs.run_dir(c, root) / "final.json").write_text("[]")
    with pytest.raises(runs.RunFolderError):
        main(["--traceback", "run-config", str(runs.run_dir(c, root)), "--results-root", str(root)])


def test_unexpected_errors_keep_their_traceback(root, tmp_path, monkeypatch, fake_tvo):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(runs, "run_one", broken)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg().to_dict()))
    with pytest.raises(ZeroDivisionError):
        main(["run-config", str(path), "--results-root", str(root)])


def test_entry_point_subprocess(root):
    env = {**os.environ, "TVOLIB_RESULTS": str(root)}
    out = subprocess.run([sys.executable, "-m", "tvolib", "run", "fig3", "--profile", "smoke", "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "4 to run" in out.stdout  # the profile's GP-bandit run and the bandit budget's three (code, tvolib, integrand)
    bad = subprocess.run([sys.executable, "-m", "tvolib", "run", "fig3", "--profile", "smoke", "--device", "tpu"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    last = bad.stderr.strip().splitlines()[-1]  # (library warnings printed at import may come first)
    assert bad.returncode == 2 and last.startswith("error: device='tpu' cannot be used (not a torch device name)")
    assert "Traceback" not in bad.stderr


def test_status_with_a_file_as_results_root_says_so(tmp_path, capsys):
    not_a_folder = tmp_path / "results"
    not_a_folder.write_text("a file")
    assert main(["status", "fig4", "--profile", "smoke", "--results-root", str(not_a_folder)]) == 2
    assert f"error: results root {not_a_folder} is a file, not a folder" in _error_line(capsys)
