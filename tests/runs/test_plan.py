"""status and plan: every state reported, counts, the cost line."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from fake_trainer import FAIL_ENV, cfg, root, run  # noqa: F401 - root is a fixture
from tvolib import runs
from tvolib.runs.cost import estimate_seconds
from tvolib.runs.plan import format_seconds


def test_status_reports_every_state(root, monkeypatch):
    done, partial, missing, corrupt = (cfg(seed=s) for s in range(4))
    run([done, corrupt], root)
    monkeypatch.setenv(FAIL_ENV, f"{partial.digest()}@2")
    with pytest.raises(runs.RunFailedError):
        run([partial], root)
    (runs.run_dir(corrupt, root) / "final.json").write_text('{"epochs": 3')
    frame = runs.status([done, partial, missing, corrupt, done], root)
    assert frame["status"].tolist() == ["done", "partial", "missing", "corrupt"]
    assert frame["run"].tolist() == [runs.config_digest(c) for c in (done, partial, missing, corrupt)]
    errors = frame.set_index("status")["error"]
    assert errors["done"] == "" and errors["missing"] == ""
    assert errors["partial"] == "RuntimeError: fake failure at epoch 2"
    assert "final.json is not valid JSON" in errors["corrupt"]
    assert frame["est_seconds"].tolist() == [estimate_seconds(done)] * 4 and (frame["d"] == 3).all()


def test_plan_counts_and_line(root):
    a, b, c = cfg(seed=0), cfg(seed=1), cfg(seed=2)
    run([a, b], root)
    (runs.run_dir(b, root) / "final.json").write_text("{}")
    p = runs.plan([a, b, c], results_root=root, workers=2)
    assert {k: p[k] for k in ("total", "cached", "partial", "missing", "problems", "to_run")} == {
        "total": 3, "cached": 1, "partial": 0, "missing": 1, "problems": 1, "to_run": 2}
    assert p["est_cpu_seconds"] == pytest.approx(2 * estimate_seconds(c))
    assert p["est_wall_seconds"] == pytest.approx(estimate_seconds(c))
    line = runs.format_plan(p, "local")
    assert line.startswith("[tvolib] 3 runs: 1 cached, 0 partial (resume), 1 new, 1 corrupt or foreign -> 2 to run")
    assert "on executor 'local' with 2 worker(s)" in line
    assert "worker" not in runs.format_plan(p, "slurm")


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (89.4, "89 s"), (90, "1.5 min"), (5399, "90.0 min"),
                                           (5400, "1.5 h"), (36000, "10.0 h")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


@given(st.floats(0, 1e7))
def test_format_seconds_round_trips_to_the_right_unit(seconds):
    value, unit = format_seconds(seconds).split()
    scale = {"s": 1, "min": 60, "h": 3600}[unit]
    assert abs(float(value) * scale - seconds) <= 0.05 * scale + 0.5
