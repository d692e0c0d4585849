"""Record the TVO integrand of a real ``quick`` run at every epoch: the test bed's recorded curves.

Trains the ``quick`` profile's VAE on MNIST with the log schedule at d = 5, S = 10 (Fig 4's run of
that seed: ``tvolib.paper.sweeps.tvo_config``), and after every epoch (and before the first)
estimates the integrand ``f(beta) = E_{pi_beta}[log w]`` by SNIS (Eq. 4,
:func:`tvolib.bias_optimal.mean_integrand`) on 0 and 80 log-spaced points from 1e-4 to 1, from the
log weights the trainer offers an adaptive schedule (``S`` samples on its first 1000 training
examples of the epoch's binarisation). The estimates draw from a forked random stream, so the run
trains exactly as Fig 4's log run of the seed. Before epoch 1 the untrained model is read on a
binarisation of its own.

Writes ``tvolib/bandit/recorded_integrand.csv``: a header ``epoch,<beta_0>,...,<beta_80>`` and one
row per epoch ``0..60``, values in nats rounded to 1e-4 (the SNIS estimate's own error at S = 10 is
larger). :mod:`tvolib.bandit.testbed_tvo` reads it.

Usage (the run trains in seconds; with its 61 integrand estimates it took 12 minutes on a busy,
shared two-core machine)::

    TVOLIB_DATA=<data root> python scripts/record_integrand.py [--seed 0] [--out PATH]
"""
from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from typing import Any

import torch

from tvolib.bias_optimal import mean_integrand
from tvolib.paper.sweeps import tvo_config
from tvolib.schedules import Schedule
from tvolib.training.images import SCHEDULE_LOG_WEIGHT_EXAMPLES, ImageTask
from tvolib.training.loop import run

#: The recorded beta grid: 0 and 80 log-spaced points from 1e-4 to 1.
GRID = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-4.0, 0.0, 80, dtype=torch.float64)])
OUT = Path(__file__).resolve().parents[1] / "tvolib" / "bandit" / "recorded_integrand.csv"


class _Recorder(Schedule):
    """The run's own schedule, unchanged, that also records the integrand after every epoch."""

    def __init__(self, inner: Schedule, rows: dict[int, list[float]]) -> None:
        self.inner, self.rows = inner, rows

    @property
    def d(self) -> int:
        return self.inner.d

    @property
    def evidence_spec(self) -> Any:
        return self.inner.evidence_spec

    def current(self) -> torch.Tensor:
        return self.inner.current()

    def step(self, epoch: int, evidence: float | None = None, log_weights: Any = None) -> None:
        if log_weights is not None:
            with torch.random.fork_rng():
                self.rows[epoch] = mean_integrand(log_weights(), GRID).tolist()
        self.inner.step(epoch, evidence=evidence)

    def history(self) -> list[dict[str, Any]]:
        return self.inner.history()

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.inner.load_state_dict(state)


def _untrained(task: ImageTask, seed: int) -> list[float]:
    """The integrand of the untrained model on a binarisation drawn from streams of its own."""
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(10_000 + seed)
        x = task.data.train_epoch(torch.Generator().manual_seed(20_000 + seed))[:SCHEDULE_LOG_WEIGHT_EXAMPLES]
        log_p, log_q = task.model.log_joint_and_q(x, task.config.S, reparam=False)
        return mean_integrand(log_p - log_q, GRID).tolist()


def record(seed: int = 0) -> tuple[Any, dict[int, list[float]], dict[str, Any]]:
    """Train the run; return its config, ``{epoch: f on GRID}`` and its final metrics."""
    config = tvo_config("quick", model="vae", dataset="mnist", schedule="log", d=5, S=10, seed=seed)
    rows: dict[int, list[float]] = {}

    def make_task() -> ImageTask:
        task = ImageTask(config, torch.device("cpu"))
        rows[0] = _untrained(task, seed)
        task.schedule = _Recorder(task.schedule, rows)
        return task

    result = run(config, make_task, None, progress=False)
    return config, rows, result.final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start = time.perf_counter()
    config, rows, final = record(args.seed)
    with open(args.out, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["epoch"] + [f"{b:.6g}" for b in GRID.tolist()])
        for epoch in sorted(rows):
            assert all(math.isfinite(v) for v in rows[epoch])
            writer.writerow([epoch] + [f"{v:.4f}" for v in rows[epoch]])
    print(f"run {config.digest()} (final test log p(x) {final['test_log_px']:.4f}, as Fig 4's run of this config): "
          f"{len(rows)} epochs recorded to {args.out} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
