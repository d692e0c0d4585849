"""``benchmarks/gpu_budget.py``, the script behind ``gpu_check.sh budget``: how it splits the bandit
budget into parts, that its bf16 variant leaves the sweep's fp32 configs and digests alone, and its
CPU path end to end at the smoke scale (one series): a command stopped after epoch 3 is reported
from its checkpoints as not complete, the next command resumes it through the runner, and the
report then gives every run's final numbers and every evaluation epoch."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from tvolib import runs
from tvolib.paper import sweeps
from tvolib.training.many import train_many

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_budget.py"


@pytest.fixture(scope="module")
def gb():
    spec = importlib.util.spec_from_file_location("gpu_budget", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parts_cover_every_series_once(gb):
    names = gb.all_series()
    assert sorted(names) == sorted({sweeps.budget_series(c) for c in sweeps.fig11_bandit_budget("gpu")})
    for n in range(1, len(names) + 1):
        parts = [gb.part_series(names, k, n) for k in range(1, n + 1)]
        assert [s for part in parts for s in part] == names
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(SystemExit, match="--part"):
        gb.parse_part("3/2")


def test_variant_keeps_the_sweep_digests(gb):
    rows = gb.budget_configs(gb.all_series(), "bf16")
    sweep = sweeps.fig11_bandit_budget("gpu")
    assert sorted(c.digest() for _, c, _ in rows) == sorted(c.digest() for c in sweep)
    for _, config, trained in rows:
        assert config.precision == "fp32" and trained.precision == "bf16"
        assert trained.digest() != config.digest()
        assert trained.replace(precision="fp32") == config  # nothing else changed
    gb.check_digests(rows)  # raises on a shared digest


def test_estimate_grows_with_the_stack(gb):
    rows = [c for _, _, c in gb.budget_configs(gb.all_series(), "bf16")]
    small, large = gb.estimate_seconds(rows[:6]), gb.estimate_seconds(rows)
    assert large["total"] > small["total"] and large["evaluate"] == pytest.approx(small["evaluate"] * len(rows) / 6)
    assert gb.estimate_seconds(rows, 0)["total"] < large["total"] < gb.estimate_seconds(rows, 2)["total"]


def test_stopped_command_is_reported_then_resumed(gb, data_root, tmp_path):
    root, out = tmp_path / "results", tmp_path / "out"
    common = ["--smoke", "--series", "gp_bandit_tvolib", "--root", str(root), "--out", str(out)]
    configs = [c for _, _, c in gb.budget_configs(["gp_bandit_tvolib"], "bf16", smoke=True)]
    # What a command stopped at its deadline leaves: checkpoints part of the way.
    train_many(configs, [runs.run_dir(c, root) for c in configs], device="cpu", stop_after=3, progress=False,
               data_root=data_root)
    assert {runs.inspect_run(c, root).status for c in configs} == {"partial"}
    assert gb.main(["report", *common]) == 3
    partial = pd.read_csv(out / "budget_smoke_runs.csv")
    assert list(partial["status"]) == ["partial"] * 3 and list(partial["epoch"]) == [3] * 3
    assert "NOT COMPLETE: epochs 3-3 of 6" in (out / "budget_smoke_report.md").read_text()

    assert gb.main(["train", *common]) == 0
    assert gb.main(["report", *common]) == 0
    done = pd.read_csv(out / "budget_smoke_runs.csv")
    assert list(done["status"]) == ["done"] * 3 and done["test_log_px"].notna().all()
    assert (done["gp_rounds"] > 0).all()
    curves = pd.read_csv(out / "budget_smoke_curves.csv")
    assert sorted(curves["epoch"].unique()) == [0, 3, 6] and len(curves) == 9
    assert "| gp_bandit_tvolib | 3/3 |" in (out / "budget_smoke_report.md").read_text()
