"""The paper's own bandit budget on one GPU: Fig 11 at the ``gpu`` profile (T = 1000 epochs of full MNIST,
d = 5, S = 10, w = 10), every series of ``sweeps.BUDGET_SERIES``, 3 seeds, stacked, bf16 + torch.compile.

What ``benchmarks/gpu_check.sh budget`` runs (``plan``, then ``train`` under a deadline, then ``report``).
The runs are the sweep's configs (:func:`tvolib.paper.sweeps.fig11_bandit_budget`) with
``precision="bf16"``: a labelled variant, whose folders have their own digests (``precision`` enters a
config's digest only when it is not fp32), so the sweep's fp32 runs and digests are untouched. They
go through the runner (:func:`tvolib.runs.run_configs`, ``stack="on"``, ``compile=True``) into a
results root that survives between commands on a warm machine; a command stopped at its deadline
leaves checkpoints (every 10 epochs) from which the next command resumes (the runner's resume is
bit-identical).

- ``plan``: the runs, their digests (fp32 and the variant's), the cost model's seconds
  (:func:`tvolib.runs.cost.estimate_stack_seconds`, eager, calibrated on an H200) and this script's
  estimate for bf16 + compile on an H100 (:func:`estimate_seconds`, from the H100 measurements in
  ``benchmarks/README.md``), per part.
- ``train``: the runs of the chosen part through the runner.
- ``report``: per series, test log p(x) mean ± s.e. over seeds at the last epoch and at intermediate
  epochs, KL, the GP's rounds and the share of degenerate GP arms (overall and per third of
  training), as markdown to paste into ``benchmarks/README.md``, and CSVs, into ``--out``. A run not
  finished yet is reported from its checkpoint (epochs done, evaluations so far) with the time left.

``--part k/n`` splits the series into ``n`` groups (bandit protocols other than the code's first,
then moments, log, bias-optimal, the code's bandit, linear, random, then any others), each to run in
one command; ``--series a,b`` names series instead. ``--smoke`` runs the same path on the CPU at a
toy scale (6 epochs of 100 examples, windows of 2 epochs, eager) in about a minute.

Example (the GPU session; see ``gpu_check.sh``): ``python benchmarks/gpu_budget.py plan --part 1/2``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from tvolib import runs  # noqa: E402
from tvolib.paper import sweeps  # noqa: E402
from tvolib.paper.analysis import mean_sem, training_phase  # noqa: E402
from tvolib.paper.bandit_analysis import GP_SOURCES, degenerate_share  # noqa: E402
from tvolib.paper.names import TRAINING_PHASES  # noqa: E402
from tvolib.paper.profiles import get_profile  # noqa: E402
from tvolib.runs.cost import bandit_rounds, estimate_stack_seconds, evaluation_count  # noqa: E402

#: Series run first when the budget is split (the most informative comparisons first): bandit
#: protocols other than the code's come before these, series not named here after them.
PRIORITY = ("moments", "log", "bias_optimal", "gp_bandit", "linear", "random")

#: This script's H100 estimate for bf16 + compile (seconds; low, central, high). Measured on one H100
#: (``benchmarks/README.md``): the stacked loop in bf16 + compile at K = 128, S = 10, batch 1000 ran
#: 6,092 run-steps/s (0.164 ms a run-step when the GPU is saturated); one stacked IWAE-1000 evaluation
#: of 10,000 points took 0.35 s a run; the gpu Fig 4 slice (25 runs, fp32) took 0.35-0.44 s an epoch
#: more than the cost model, which bounds the per-epoch host work (evidence sums, schedule steps,
#: history, checkpoints) at about 10 ms a run. Not measured: the per-step host floor of the compiled
#: stack (eager Adam over 12 tensors, K noise draws, the compiled graphs' calls), and how far the
#: trainer is below the bare loop (80-90% on the H200).
H100_BF16_COMPILE: dict[str, tuple[float, float, float]] = {
    "run_step_s": (1 / 6092, 1 / 6092, 1 / 6092),
    "host_floor_s": (1.5e-3, 2.0e-3, 3.0e-3),
    "trainer_factor": (1.1, 1.18, 1.25),
    "epoch_s_per_run": (0.006, 0.010, 0.016),
    "eval_s_per_run_1e7_pairs": (0.35, 0.35, 0.40),
    "compile_s": (30.0, 60.0, 120.0),
    "startup_s": (20.0, 30.0, 45.0),
    "round_s": (0.2, 0.3, 0.5),
}

SMOKE = dict(epochs=6, n_train=100, n_test=50, batch_size=100, eval_S=10, eval_every=3)
SMOKE_WINDOWS = dict(window=2, burn_in=1)


def all_series(profile: str = "gpu") -> list[str]:
    """The budget's series in priority order (:data:`PRIORITY`)."""
    names = list(dict.fromkeys(sweeps.budget_series(c) for c in sweeps.fig11_bandit_budget(profile)))
    gp = [n for n in names if sweeps.BUDGET_SERIES[n][0] in sweeps.GP_SCHEDULES and n not in PRIORITY]
    return gp + [n for n in PRIORITY if n in names] + [n for n in names if n not in gp and n not in PRIORITY]


def parse_part(text: str | None) -> tuple[int, int]:
    """``"k/n"`` -> ``(k, n)`` with ``1 <= k <= n``; ``None`` -> ``(1, 1)``."""
    if text is None:
        return 1, 1
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        k, n = 0, 0
    if not 1 <= k <= n:
        raise SystemExit(f"--part must be k/n with 1 <= k <= n (e.g. 1/2); got {text!r}")
    return k, n


def part_series(series: Sequence[str], k: int, n: int) -> list[str]:
    """Part ``k`` of ``n`` of ``series``: contiguous groups, the first ones one larger."""
    size, extra = divmod(len(series), n)
    start = (k - 1) * size + min(k - 1, extra)
    return list(series[start:start + size + (k <= extra)])


def chosen_series(args: argparse.Namespace) -> list[str]:
    names = all_series()
    if args.series:
        wanted = [s for s in args.series.split(",") if s]
        bad = [s for s in wanted if s not in names]
        if bad:
            raise SystemExit(f"--series: unknown {bad}; the budget's series are {names}")
        return wanted
    return part_series(names, *parse_part(args.part))


def variant(config: Any, precision: str, smoke: bool, eval_every: int | None) -> Any:
    """The budget config as this script trains it: ``precision`` and, at ``--smoke``, the toy scale."""
    changes: dict[str, Any] = {"precision": precision}
    if eval_every:
        changes["eval_every"] = eval_every
    if smoke:
        changes.update(SMOKE)
        if config.schedule in sweeps.WINDOWED_SCHEDULES:
            options = {**dict(config.schedule_options), **SMOKE_WINDOWS}
            if config.schedule in sweeps.GP_SCHEDULES:
                options["n_init"] = 1
            changes["schedule_options"] = options
    return config.replace(**changes).validate()


def budget_configs(series: Sequence[str], precision: str, smoke: bool = False,
                   eval_every: int | None = None) -> list[tuple[str, Any, Any]]:
    """``(series, sweep config, trained config)`` for every run of ``series``, in the sweep's order."""
    out = []
    for config in sweeps.fig11_bandit_budget("gpu"):
        name = sweeps.budget_series(config)
        if name in series:
            out.append((name, config, variant(config, precision, smoke, eval_every)))
    return sorted(out, key=lambda item: list(series).index(item[0]))


def check_digests(rows: Sequence[tuple[str, Any, Any]]) -> None:
    """The sweep's configs are fp32 and keep their digests; every variant that differs from its sweep
    config (another precision, the smoke scale) has a digest of its own."""
    for name, sweep, config in rows:
        if sweep.precision != "fp32" or sweep.replace(precision="fp32").digest() != sweep.digest():
            raise SystemExit(f"{name}: the sweep's config is not the fp32 run it should be: {sweep}")
        if config != sweep and config.digest() == sweep.digest():
            raise SystemExit(f"{name}: the variant {config} shares its digest with the sweep's fp32 config")


def estimate_seconds(configs: Sequence[Any], level: int = 1) -> dict[str, float]:
    """This script's H100 seconds for one stack of ``configs`` in bf16 + compile (``level`` 0, 1, 2:
    the low, central and high constants of :data:`H100_BF16_COMPILE`), by part of the work."""
    c = {k: v[level] for k, v in H100_BF16_COMPILE.items()}
    first, K = configs[0], len(configs)
    n_train = first.n_train or 60_000
    n_test = first.n_test or 10_000
    steps = first.epochs * math.ceil(n_train / first.batch_size)
    scale = first.batch_size * first.S / 1e4  # the measurement's batch 1000, S = 10
    step = max(c["host_floor_s"], K * c["run_step_s"] * scale) * c["trainer_factor"]
    windowed = [cf for cf in configs if cf.schedule in sweeps.WINDOWED_SCHEDULES]
    window = dict(windowed[0].schedule_options).get("window", 6) if windowed else 0
    rounds = bandit_rounds(first.epochs, int(window)) if windowed else 0
    parts = {
        "startup": c["startup_s"], "compile": c["compile_s"], "train": steps * step,
        "evaluate": evaluation_count(first) * K * c["eval_s_per_run_1e7_pairs"] * n_test * first.eval_S / 1e7,
        "per_epoch": first.epochs * K * c["epoch_s_per_run"], "bandit_rounds": rounds * c["round_s"],
    }
    parts["total"] = sum(parts.values())
    return parts


def plan(args: argparse.Namespace) -> None:
    names = all_series()
    series = chosen_series(args)
    rows = budget_configs(series, args.precision, args.smoke, args.eval_every)
    profile = get_profile("gpu")
    print(f"# {profile.budget.describe()}")
    print(f"# variant trained here: precision={args.precision}, compile={not args.no_compile}"
          f"{', SMOKE scale ' + str(SMOKE) if args.smoke else ''}; the sweep's fp32 configs and digests unchanged")
    print(f"# series of the budget (priority order): {', '.join(names)}")
    print(f"# this command: {', '.join(series)}: {len(rows)} runs (seeds "
          f"{sorted({c.seed for _, c, _ in rows})}), one stack")
    print(f"{'series':>18} {'seed':>4} {'sweep digest':>14} {'variant digest':>14} {'GP rounds planned':>17}")
    for name, sweep, config in rows:
        rounds = sweeps.planned_rounds(config)
        print(f"{name:>18} {config.seed:>4} {sweep.digest():>14} {config.digest():>14} {rounds[1]:>8} of {rounds[0]:>3}")
    check_digests(rows)
    configs = [config for _, _, config in rows]
    eager = estimate_stack_seconds([c.replace(precision="fp32") for c in configs])
    est = [estimate_seconds(configs, level) for level in range(3)]
    print(f"\ncost model (tvolib.runs.cost, eager, H200-calibrated): fp32 {eager:.0f} s, "
          f"{args.precision} {estimate_stack_seconds(configs):.0f} s")
    print("this script's H100 estimate, bf16 + compile (low / central / high), s: "
          + ", ".join(f"{k} {est[0][k]:.0f}/{est[1][k]:.0f}/{est[2][k]:.0f}" for k in est[1]))
    if not args.series:
        k, n = parse_part(args.part)
        for parts in sorted({1, 2, 3} | {n}):
            line = []
            for j in range(1, parts + 1):
                part = [c for _, _, c in budget_configs(part_series(names, j, parts), args.precision, args.smoke,
                                                        args.eval_every)]
                line.append(f"{j}/{parts}: {len(part)} runs, ~{estimate_seconds(part)['total']:.0f} s "
                            f"({estimate_seconds(part, 0)['total']:.0f}-{estimate_seconds(part, 2)['total']:.0f})")
            print(f"split in {parts}: " + "; ".join(line))
    sys.stdout.flush()


def train(args: argparse.Namespace) -> None:
    configs = [c for _, _, c in budget_configs(chosen_series(args), args.precision, args.smoke, args.eval_every)]
    start = time.perf_counter()
    runs.run_configs(configs, results_root=args.root, device=args.device, stack="on", compile=not args.no_compile,
                     progress=True)
    print(f"trained {len(configs)} runs in {time.perf_counter() - start:.1f} s (this command)", flush=True)


def _checkpoint(folder: Path) -> dict[str, Any] | None:
    path = folder / "checkpoint.pt"
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False, mmap=True)


def _attempts_seconds(folder: Path) -> float:
    """Seconds of a run's attempts so far: ``wall_time.json``'s, plus, for an attempt stopped before its
    end, the time from its start to its last checkpoint (as the runner counts them)."""
    try:
        record = json.loads((folder / "wall_time.json").read_text())
    except (OSError, ValueError):
        return math.nan
    seconds = float(record.get("seconds", 0.0))
    started, checkpoint = record.get("attempt_started"), folder / "checkpoint.pt"
    if isinstance(started, (int, float)) and checkpoint.exists():
        seconds += max(0.0, checkpoint.stat().st_mtime - started)
    return seconds


def _schedule_rounds(config: Any, root: str, done: bool, state: dict[str, Any] | None) -> pd.DataFrame:
    if done:
        return runs.load_schedule_history(config, root)
    schedule = (state or {}).get("schedule")
    history = schedule.get("history", []) if isinstance(schedule, dict) else []
    return pd.DataFrame(history)


def collect(rows: Sequence[tuple[str, Any, Any]], root: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per run, per evaluation and per bandit round: what the results root holds (complete runs from
    their files, partial ones from their checkpoints)."""
    per_run, curves, rounds = [], [], []
    for name, _, config in rows:
        status = runs.inspect_run(config, root).status
        folder = runs.run_dir(config, root)
        done = status == "done"
        state = None if done else _checkpoint(folder)
        history = runs.load_history(config, root) if done else pd.DataFrame((state or {}).get("history", []))
        wall = _attempts_seconds(folder)
        part = _schedule_rounds(config, root, done, state)
        chosen = part[part["source"].isin(GP_SOURCES)] if len(part) and "source" in part else part.iloc[:0]
        epoch = int(history["epoch"].max()) if len(history) else 0
        row = {"series": name, "seed": config.seed, "digest": config.digest(), "status": status, "epoch": epoch,
               "epochs": config.epochs, "gp_rounds": len(chosen), "rounds": len(part),
               "degenerate_share": degenerate_share(part) if len(chosen) else math.nan, "stack_seconds": wall}
        if done:
            final = runs.load_final(config, root)
            row.update(test_log_px=final["test_log_px"], test_kl=final["test_kl"], wall_seconds=final.get("wall_seconds"))
        per_run.append(row)
        if "test_log_px" in history:
            tested = history.dropna(subset=["test_log_px"])
            for _, h in tested.iterrows():
                curves.append({"series": name, "seed": config.seed, "epoch": int(h["epoch"]),
                               **{k: h[k] for k in ("test_log_px", "test_kl", "test_elbo") if k in h}})
        if len(part):
            keep = [k for k in ("round", "epoch", "window", "arm", "reward", "source", "next_arm", "next_degenerate",
                                "noise", "y_std", "lengthscale") if k in part]
            rounds.append(part[keep].assign(series=name, seed=config.seed, epochs=config.epochs))
    rounds_frame = pd.concat(rounds, ignore_index=True) if rounds else pd.DataFrame()
    return pd.DataFrame(per_run), pd.DataFrame(curves), rounds_frame


def _pm(values: Sequence[float]) -> str:
    mean, sem, n = mean_sem(values)
    return f"{mean:.2f} ± {sem:.2f}" if n > 1 else (f"{mean:.2f}" if n else "")


def markdown(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def tables(per_run: pd.DataFrame, curves: pd.DataFrame, rounds: pd.DataFrame, series: Sequence[str]
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The final table (one row per series) and the intermediate one (series x evaluation epochs)."""
    final = []
    for name in series:
        part = per_run[per_run["series"] == name]
        if part.empty:
            continue
        done = part[part["status"] == "done"]
        gp = part["gp_rounds"].sum()
        chosen = rounds[(rounds["series"] == name) & rounds["source"].isin(GP_SOURCES)] if len(rounds) else rounds
        thirds = ""
        if len(chosen):
            phase = training_phase(chosen["epoch"], chosen["epochs"])
            flags = chosen["next_degenerate"].map(lambda v: str(v).strip().lower() == "true")
            by = flags.groupby(pd.Series(phase, index=flags.index)).mean()
            thirds = " / ".join(f"{by.get(p, math.nan):.2f}" for p in TRAINING_PHASES)
        final.append({
            "series": name, "runs done": f"{len(done)}/{len(part)}",
            "test log p(x)": _pm(done["test_log_px"]) if len(done) else "",
            "KL": _pm(done["test_kl"]) if len(done) else "",
            "GP rounds per run": (f"{part['gp_rounds'].mean():.1f}" if gp else "-"),
            "degenerate GP arms": (f"{(part['degenerate_share'] * part['gp_rounds']).sum() / gp:.2f}" if gp else "-"),
            "by third": thirds or "-",
            "epoch reached": f"{part['epoch'].min()}-{part['epoch'].max()}",
        })
    inter = pd.DataFrame()
    if len(curves):
        epochs = sorted(curves["epoch"].unique())
        last = max(epochs)
        shown = epochs if len(epochs) <= 8 else [e for e in epochs if e % 100 == 0 or e == last or e == 50]
        inter = pd.DataFrame([{"series": name, **{str(e): _pm(curves[(curves["series"] == name) & (curves["epoch"] == e)]
                                                               ["test_log_px"]) for e in shown}}
                              for name in series if name in set(curves["series"])])
    return pd.DataFrame(final), inter


def report(args: argparse.Namespace) -> int:
    series = chosen_series(args)
    rows = budget_configs(series, args.precision, args.smoke, args.eval_every)
    per_run, curves, rounds = collect(rows, args.root)
    final, inter = tables(per_run, curves, rounds, series)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not args.smoke else "cpu"
    first = rows[0][2]
    n_done = int((per_run["status"] == "done").sum())
    wall = per_run["wall_seconds"].sum() if "wall_seconds" in per_run and n_done == len(per_run) else math.nan
    head = (f"Fig 11 at the gpu profile, {'SMOKE scale, ' if args.smoke else ''}variant precision={args.precision}, "
            f"compile={not args.no_compile}: {first.n_train or 'full'} MNIST, {first.epochs} epochs, d = {first.d}, "
            f"S = {first.S}, IWAE-{first.eval_S} every {first.eval_every} epochs; {device}, torch {torch.__version__}; "
            f"{n_done}/{len(per_run)} runs complete"
            + (f", {wall:.0f} s of training in all (every attempt, start and compile included)" if wall == wall else ""))
    text = [f"## {head}", "", "Test log p(x) and KL at the last epoch, mean ± s.e. over seeds; GP rounds per run "
            "(arms chosen by the GP) and the share of degenerate GP arms (overall; per third of training):", "",
            markdown(final), "", "Test log p(x), mean ± s.e. over the seeds evaluated, at intermediate epochs:", "",
            markdown(inter) if len(inter) else "(no evaluation yet)", ""]
    if n_done < len(per_run):
        text += [_progress(per_run, args), ""]
    body = "\n".join(text)
    print(body, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "budget_smoke" if args.smoke else "budget"
    (out / f"{tag}_report.md").write_text(body + "\n")
    per_run.to_csv(out / f"{tag}_runs.csv", index=False)
    curves.to_csv(out / f"{tag}_curves.csv", index=False)
    rounds.to_csv(out / f"{tag}_rounds.csv", index=False)
    return 0 if n_done == len(per_run) else 3


def _progress(per_run: pd.DataFrame, args: argparse.Namespace) -> str:
    """How far the runs got and, from their wall time so far, how long the rest would take."""
    lo, hi = int(per_run["epoch"].min()), int(per_run["epoch"].max())
    epochs = int(per_run["epochs"].max())
    if lo == 0:
        return (f"NOT COMPLETE: some runs have no checkpoint yet (the first is written after 10 epochs; epochs "
                f"reached {lo}-{hi} of {epochs}). Run the same command again to go on.")
    spent = float(per_run["stack_seconds"].max())  # an unfinished stack: every run's attempts timed alike
    rate = spent / max(lo, 1)
    left = rate * (epochs - lo)
    return (f"NOT COMPLETE: epochs {lo}-{hi} of {epochs} reached (checkpoints every 10 epochs); {spent:.0f} s spent "
            f"on these runs so far (start and compile included), about {rate:.2f} s an epoch, so about {left:.0f} s "
            "left, plus a start and a compile. Run the same command again on the same warm machine to resume.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("plan", "train", "report"))
    parser.add_argument("--series", default=None, help="comma-separated series (default: every series of the part)")
    parser.add_argument("--part", default=None, help="k/n: the k-th of n groups of series (default 1/1)")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "tf32", "bf16"))
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--compile", action="store_true", help="with --smoke: compile on the CPU too")
    parser.add_argument("--eval-every", type=int, default=None, help="override the budget's 50 epochs")
    parser.add_argument("--smoke", action="store_true", help="the same path on the CPU at a toy scale")
    parser.add_argument("--root", default="results/gpu_budget", help="results root (kept between commands)")
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_check_out"))
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    if args.smoke:  # compiling on the CPU takes over a minute: the smoke path trains eager unless --compile
        args.device = args.device or "cpu"
        args.no_compile = not args.compile
    if args.action == "plan":
        plan(args)
    elif args.action == "train":
        train(args)
    else:
        return report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
