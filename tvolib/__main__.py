"""Command line: run a figure's sweep or one config outside the notebooks, and list the cache.

    python -m tvolib run <figure|all> [--profile quick] [--executor local|slurm|submitit-local|debug]
                                      [--stack auto|on|off] [--max-stack N] [--compile]
                                      [--dry-run] [--repair] [--max-workers N] [--results-root DIR]
                                      [--data-root DIR] [--device cpu] [--slurm-... options]
    python -m tvolib status [<figure|all>] [--profile quick] [--results-root DIR]
    python -m tvolib run-config config.json [--results-root DIR] [--data-root DIR] [--device cpu] [--repair]
    python -m tvolib list

The profile defaults to ``$TVOLIB_PROFILE`` or ``quick``; the executor to ``$TVOLIB_EXECUTOR`` or
``local``; stacking to ``$TVOLIB_STACK`` or ``auto`` (runs of one shape train together on CUDA); results go to ``--results-root`` / ``$TVOLIB_RESULTS`` / ``<repo>/results``. Every expected
failure (bad config, device, figure or profile, unwritable or corrupt files) ends in one
``error: ...`` line and exit status 2; failed runs end with status 1.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

import pandas as pd

from tvolib import runs
from tvolib.paper import sweeps
from tvolib.paper.profiles import PROFILES, Profile, get_profile
from tvolib.runs.cost import estimate_gpu_seconds, estimate_seconds, estimate_wall_seconds
from tvolib.runs.plan import format_seconds
from tvolib.runs.slurm import SLURM_ENV
from tvolib.runs.stacks import MAX_STACK, STACK_MODES, stack_jobs

__all__ = ["main", "build_parser"]

_SHOW_COLUMNS = ("run", "status", "model", "dataset", "objective", "schedule", "d", "S", "seed", "epochs", "stack",
                 "error")
_COUNTED = ("done", "partial", "missing", "corrupt", "foreign")
#: --slurm-* flag -> (SlurmOptions field, type, help).
_SLURM_FLAGS: dict[str, tuple[str, type, str]] = {
    "--slurm-partition": ("partition", str, "partition (sbatch --partition)"),
    "--slurm-time-min": ("timeout_min", int, "time limit per job in minutes; a job reaching it is requeued"),
    "--slurm-mem-gb": ("mem_gb", float, "memory per job in GB"),
    "--slurm-cpus": ("cpus_per_task", int, "CPUs per job"),
    "--slurm-gpus": ("gpus_per_task", int, "GPUs per job"),
    "--slurm-array-parallelism": ("array_parallelism", int, "at most this many jobs of the array at once"),
    "--slurm-account": ("account", str, "account (sbatch --account)"),
    "--slurm-extra": ("extra", str, "further sbatch flags, written with '=': --slurm-extra='--qos=high --exclusive'"),
    "--slurm-log-folder": ("log_folder", str, "job scripts and logs (default <results>/submitit)"),
    "--slurm-max-requeues": ("max_requeues", int, "requeues after a time limit per job"),
    "--slurm-poll-s": ("poll_s", float, "seconds between squeue polls"),
}


def _add_slurm_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Slurm (--executor slurm; each flag overrides its $TVOLIB_SLURM_* variable)")
    for flag, (name, cast, text) in _SLURM_FLAGS.items():
        group.add_argument(flag, dest=f"slurm_{name}", type=cast, default=None, metavar=cast.__name__.upper(),
                           help=f"{text} (${SLURM_ENV[name]})")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m tvolib``."""
    parser = argparse.ArgumentParser(prog="python -m tvolib", description=__doc__.split("\n\n")[0])
    parser.add_argument("--traceback", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,status,run-config,list}")

    def common(p: argparse.ArgumentParser, profile: bool = True) -> None:
        if profile:
            p.add_argument("--profile", default=os.environ.get("TVOLIB_PROFILE", "quick"),
                           help=f"{', '.join(PROFILES)} (default: $TVOLIB_PROFILE or quick)")
        p.add_argument("--results-root", default=None, help="results folder (default: $TVOLIB_RESULTS or <repo>/results)")

    def running(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-root", default=None, help="dataset folder (default: $TVOLIB_DATA or the user cache)")
        p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
        p.add_argument("--repair", action="store_true", help="recompute corrupt or foreign run folders")

    run = sub.add_parser("run", help="run (or read from the cache) every config of a figure")
    run.add_argument("figure", help="figure name, a unique prefix such as fig4, or 'all'")
    common(run)
    run.add_argument("--executor", default=None, help="local, slurm, submitit-local or debug (default: $TVOLIB_EXECUTOR or local)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and the cache status, run nothing")
    run.add_argument("--max-workers", type=int, default=None, help="local executor: parallel processes (default: CPU count)")
    run.add_argument("--stack", default=None, choices=STACK_MODES,
                     help="train runs of one shape together: auto (on CUDA), on, off (default: $TVOLIB_STACK or auto)")
    run.add_argument("--max-stack", type=int, default=None,
                     help=f"most runs per stack (default: what fits in free device memory, at most {MAX_STACK})")
    run.add_argument("--compile", action="store_true",
                     help="torch.compile the training minibatches (default off; equals eager runs to float32 rounding)")
    running(run)
    _add_slurm_flags(run)

    st = sub.add_parser("status", help="cache status (done / partial / missing / corrupt / foreign) per figure or per config")
    st.add_argument("figure", nargs="?", default=None, help="figure name or prefix; omit for a summary of all figures")
    common(st)

    rc = sub.add_parser("run-config", help="run one config given as JSON (a run folder's config.json or RunConfig.to_dict())")
    rc.add_argument("config", help="path to the JSON file (or a run folder)")
    common(rc, profile=False)
    running(rc)

    sub.add_parser("list", help="list the figures and the profiles")
    return parser


def _print_frame(frame: pd.DataFrame, columns: Sequence[str] = _SHOW_COLUMNS) -> None:
    cols = [c for c in columns if c in frame.columns]
    if frame.empty:
        print("(no runs)")
        return
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
        print(frame[cols].to_string(index=False))


def _counts(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    return {s: int(counts.get(s, 0)) for s in _COUNTED}


def _cmd_run(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    configs = sweeps.figure_configs(args.figure, profile)
    slurm = {name: getattr(args, f"slurm_{name}") for name, _, _ in _SLURM_FLAGS.values()}
    print(profile.describe())
    if profile.name == "gpu":
        paper = _one_gpu_hours(get_profile("paper"))
        print(f"[tvolib] for comparison, the paper profile would take about {paper:.0f} h on one GPU "
              "(stacked, fp32; tvolib.runs.cost)")
    frame = runs.run_configs(
        configs, executor=args.executor, results_root=args.results_root, data_root=args.data_root,
        max_workers=args.max_workers, device=args.device, dry_run=args.dry_run, repair=args.repair, slurm=slurm,
        stack=args.stack, max_stack=args.max_stack, compile=args.compile,
    )
    if args.dry_run:
        _print_frame(frame)
    else:
        print(f"[tvolib] {len(frame)} run(s) complete")
    return 0


def _status_line(counts: dict[str, int]) -> str:
    shown = [s for s in _COUNTED if s in ("done", "partial", "missing") or counts[s]]
    return ", ".join(f"{counts[s]} {s}" for s in shown)


def _cmd_status(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    if args.figure is not None and args.figure.strip().lower() != "all":
        frame = runs.status(sweeps.figure_configs(args.figure, profile), args.results_root)
        _print_frame(frame)
        print(f"[tvolib] {sweeps.resolve_figure(args.figure)} at profile {profile.name}: {_status_line(_counts(frame))}")
        return 0
    rows: list[dict[str, Any]] = []
    for name, fn in sweeps.FIGURES.items():
        frame = runs.status(fn(profile), args.results_root)
        rows.append({"figure": name, "runs": len(frame), **_counts(frame)})
    everything = runs.status(sweeps.all_configs(profile), args.results_root)
    rows.append({"figure": "all (distinct runs)", "runs": len(everything), **_counts(everything)})
    print(f"[tvolib] cache status at profile {profile.name}")
    _print_frame(pd.DataFrame(rows), ("figure", "runs", *_COUNTED))
    return 0


def _cmd_run_config(args: argparse.Namespace) -> int:
    config = runs.load_config(args.config)
    final = runs.run_one(config, results_root=args.results_root, data_root=args.data_root, device=args.device,
                         repair=args.repair)
    print(f"[tvolib] {runs.config_digest(config)} complete in {runs.run_dir(config, args.results_root)}")
    for key in sorted(final):
        print(f"  {key}: {final[key]}")
    return 0


def _one_gpu_hours(profile: Profile) -> float:
    """Estimated hours of every figure at ``profile`` on one GPU, runs stacked (:mod:`tvolib.runs.cost`)."""
    return estimate_gpu_seconds(stack_jobs(sweeps.all_configs(profile), MAX_STACK))["wall_seconds"] / 3600


def _cmd_list(_: argparse.Namespace) -> int:
    print("figures (python -m tvolib run <figure>):")
    for name, fn in sweeps.FIGURES.items():
        print(f"  {name:22s} {(fn.__doc__ or '').strip().splitlines()[0]}")
    print("profiles (--profile), with the estimated time of every figure (tvolib.runs.cost; rough):")
    for profile in PROFILES.values():
        configs = sweeps.all_configs(profile)
        cpu = estimate_wall_seconds([estimate_seconds(c) for c in configs], 2)
        print(f"  {profile.name}: {len(configs)} runs; about {format_seconds(cpu)} on 2 CPU cores, "
              f"{format_seconds(_one_gpu_hours(profile) * 3600)} on one GPU (stacked)")
        print(f"    {profile.describe()}")
    return 0


def _one_line(error: BaseException) -> str:
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 failed runs, 2 bad input or unusable files).

    Expected failures (the library's ``ValueError`` and ``OSError`` subclasses: bad configs, device,
    figure or profile names, unwritable folders, corrupt files) print one ``error: ...`` line on
    stderr; anything else propagates with its traceback.
    """
    args = build_parser().parse_args(argv)
    commands = {"run": _cmd_run, "status": _cmd_status, "run-config": _cmd_run_config, "list": _cmd_list}
    try:
        return commands[args.command](args)
    except runs.RunFailedError as e:
        if args.traceback:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:
        if args.traceback:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
