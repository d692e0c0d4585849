"""How often the integrand protocol's GP moves its arm off the bias-optimal arm in its box, on real runs.

The integrand protocol (``protocol="integrand"``) models the reward as the predicted bias change
with a fitted weight plus a GP over points for what the integrand does not say, and trains the arm
that maximises the upper confidence bound of that sum (:mod:`tvolib.bandit.integrand_bandit`). With
the GP's part at zero, that arm is the bias-optimal arm of the integrand read at the window's end,
in the protocol's box (:func:`~tvolib.bias_optimal.bias_optimal_points` on the schedule's grid).
This script reads every completed integrand-protocol run in the results root (``make figures``
writes them) and counts, per ``d``, the GP rounds whose next arm is that arm (every point within
``TOLERANCE``; arms are recorded to 4 decimals).

The same question on the test bed is the ablation ``integrand_candidates.py --candidates
"integrand, no GP"`` (benchmarks/README.md).

    .venv/bin/python benchmarks/integrand_inert.py [--results results]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tvolib import paths
from tvolib.bandit import GPBanditSchedule
from tvolib.bias_optimal import bias_optimal_points
from tvolib.runs.readers import config_fields, load_schedule_history
from tvolib.runs.store import load_config

#: Largest difference of any point (beta units) for an arm to count as the bias-optimal one.
TOLERANCE = 1e-3


def integrand_runs(root: Path) -> list[object]:
    """The configs of the completed runs under ``root`` whose schedule is the integrand protocol's bandit."""
    configs = []
    for path in sorted(root.glob("*/config.json")):
        if '"integrand"' not in path.read_text():
            continue
        config = load_config(path)
        options = dict(config_fields(config).get("schedule_options") or ())
        if options.get("protocol") == "integrand" and (path.parent / "final.json").exists():
            configs.append(config)
    return configs


def count(configs: list[object], root: Path) -> dict[int, list[float]]:
    """Per ``d``, the largest point difference between each GP round's next arm and the bias-optimal arm."""
    grids: dict[int, torch.Tensor] = {}
    out: dict[int, list[float]] = {}
    for config in configs:
        rows = load_schedule_history(config, root, as_records=True)
        for row, following in zip(rows, rows[1:]):
            if row.get("source") != "gp" or row.get("integrand") is None:
                continue
            arm = torch.tensor(following["arm"], dtype=torch.float64)
            d = arm.numel() + 1
            grid = grids.setdefault(d, GPBanditSchedule(d, protocol="integrand", device="cpu").grid)
            best = bias_optimal_points(d, grid, torch.tensor(row["integrand"], dtype=torch.float64))[1:]
            out.setdefault(d, []).append(float((arm - best).abs().max()))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=None, help="results root (default: the package's)")
    args = parser.parse_args(argv)
    root = Path(paths.results_root(args.results))
    configs = integrand_runs(root)
    by_d = count(configs, root)
    print(f"{len(configs)} integrand-protocol runs under {root.name}/")
    print("| d | GP rounds | next arm = bias-optimal arm in the box | median largest difference |")
    print("|---:|---:|---:|---:|")
    for d, diffs in sorted(by_d.items()):
        same = sum(x < TOLERANCE for x in diffs)
        print(f"| {d} | {len(diffs)} | {same} ({same / len(diffs):.0%}) | {sorted(diffs)[len(diffs) // 2]:.1e} |")
    print(json.dumps({"runs": len(configs), "rounds": sum(map(len, by_d.values()))}))


if __name__ == "__main__":
    main()
