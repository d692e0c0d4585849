"""Command line: run a figure's sweep or one config outside the notebooks, and list the cache.

    python -m tvolib run <figure|all> [--profile quick] [--executor local|slurm|submitit-local|debug]
                                      [--dry-run] [--max-workers N] [--results-root DIR] [--data-root DIR]
    python -m tvolib status [<figure|all>] [--profile quick] [--results-root DIR]
    python -m tvolib run-config config.json [--results-root DIR] [--data-root DIR] [--device cpu]
    python -m tvolib list

The profile defaults to ``$TVOLIB_PROFILE`` or ``quick``; the executor to ``$TVOLIB_EXECUTOR`` or
``local``; results go to ``--results-root`` / ``$TVOLIB_RESULTS`` / ``<repo>/results``.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import pandas as pd

__all__ = ["main", "build_parser"]

_SHOW_COLUMNS = ("run", "status", "model", "dataset", "objective", "schedule", "d", "S", "seed", "epochs", "error")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m tvolib``."""
    parser = argparse.ArgumentParser(prog="python -m tvolib", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,status,run-config,list}")

    def common(p: argparse.ArgumentParser, profile: bool = True) -> None:
        if profile:
            p.add_argument("--profile", default=os.environ.get("TVOLIB_PROFILE", "quick"),
                           help="smoke, quick or paper (default: $TVOLIB_PROFILE or quick)")
        p.add_argument("--results-root", default=None, help="results folder (default: $TVOLIB_RESULTS or <repo>/results)")

    run = sub.add_parser("run", help="run (or read from the cache) every config of a figure")
    run.add_argument("figure", help="figure name, a unique prefix such as fig4, or 'all'")
    common(run)
    run.add_argument("--executor", default=None, help="local, slurm, submitit-local or debug (default: $TVOLIB_EXECUTOR or local)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and the cache status, run nothing")
    run.add_argument("--max-workers", type=int, default=None, help="local executor: parallel processes (default: CPU count)")
    run.add_argument("--data-root", default=None, help="dataset folder (default: $TVOLIB_DATA or the user cache)")
    run.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")

    st = sub.add_parser("status", help="cache status (done / partial / missing) per figure or per config")
    st.add_argument("figure", nargs="?", default=None, help="figure name or prefix; omit for a summary of all figures")
    common(st)

    rc = sub.add_parser("run-config", help="run one config given as JSON (a run folder's config.json or RunConfig.to_dict())")
    rc.add_argument("config", help="path to the JSON file (or a run folder)")
    common(rc, profile=False)
    rc.add_argument("--data-root", default=None)
    rc.add_argument("--device", default=None)

    sub.add_parser("list", help="list the figures and the profiles")
    return parser


def _print_frame(frame: pd.DataFrame, columns: Sequence[str] = _SHOW_COLUMNS) -> None:
    cols = [c for c in columns if c in frame.columns]
    if frame.empty:
        print("(no runs)")
        return
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
        print(frame[cols].to_string(index=False))


def _cmd_run(args: argparse.Namespace) -> int:
    from tvolib import experiments, sweeps
    from tvolib.profiles import get_profile

    profile = get_profile(args.profile)
    configs = sweeps.figure_configs(args.figure, profile)
    print(profile.describe())
    frame = experiments.run_configs(
        configs, executor=args.executor, results_root=args.results_root, data_root=args.data_root,
        max_workers=args.max_workers, device=args.device, dry_run=args.dry_run,
    )
    if args.dry_run:
        _print_frame(frame)
    else:
        print(f"[tvolib] {len(frame)} run(s) complete")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from tvolib import experiments, sweeps
    from tvolib.profiles import get_profile

    profile = get_profile(args.profile)
    if args.figure is not None and args.figure.strip().lower() != "all":
        frame = experiments.status(sweeps.figure_configs(args.figure, profile), args.results_root)
        _print_frame(frame)
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        print(f"[tvolib] {sweeps.resolve_figure(args.figure)} at profile {profile.name}: "
              + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "partial", "missing")))
        return 0
    rows = []
    for name, fn in sweeps.FIGURES.items():
        try:
            frame = experiments.status(fn(profile), args.results_root)
        except ImportError as e:
            rows.append({"figure": name, "runs": 0, "done": 0, "partial": 0, "missing": 0, "note": f"unavailable: {e}"})
            continue
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        rows.append({"figure": name, "runs": len(frame), **{s: counts.get(s, 0) for s in ("done", "partial", "missing")},
                     "note": ""})
    everything = experiments.status(sweeps.all_configs(profile, skip_unavailable=True), args.results_root)
    counts = everything["status"].value_counts().to_dict() if len(everything) else {}
    rows.append({"figure": "all (distinct runs)", "runs": len(everything),
                 **{s: counts.get(s, 0) for s in ("done", "partial", "missing")}, "note": ""})
    print(f"[tvolib] cache status at profile {profile.name}")
    _print_frame(pd.DataFrame(rows), ("figure", "runs", "done", "partial", "missing", "note"))
    return 0


def _cmd_run_config(args: argparse.Namespace) -> int:
    from tvolib import experiments

    config = experiments.load_config(args.config)
    final = experiments.run_one(config, results_root=args.results_root, data_root=args.data_root, device=args.device)
    print(f"[tvolib] {experiments.config_digest(config)} complete in {experiments.run_dir(config, args.results_root)}")
    for key in sorted(final):
        print(f"  {key}: {final[key]}")
    return 0


def _cmd_list(_: argparse.Namespace) -> int:
    from tvolib import sweeps
    from tvolib.profiles import PROFILES

    print("figures (python -m tvolib run <figure>):")
    for name, fn in sweeps.FIGURES.items():
        print(f"  {name:22s} {(fn.__doc__ or '').strip().splitlines()[0]}")
    print("profiles (--profile):")
    for profile in PROFILES.values():
        print(f"  {profile.describe()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 failed runs, 2 bad arguments)."""
    from tvolib.experiments import ResultsMismatchError, RunFailedError

    args = build_parser().parse_args(argv)
    commands = {"run": _cmd_run, "status": _cmd_status, "run-config": _cmd_run_config, "list": _cmd_list}
    try:
        return commands[args.command](args)
    except RunFailedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, FileNotFoundError, ResultsMismatchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
