"""Wall time of one GP-bandit round (MAP fit + GP-UCB acquisition) and its share of training time.

Not a test (no assertions on time). Targets: <= 0.5 s per round at N = 1000 observations
for d up to 15, and <= 2% of a training run's wall time at d = 15.

**Rounds.** For each d in (2, 5, 10, 15) and N in (50, 200, 1000): a :class:`GPBanditSchedule`
(default options: Theorem 1 kappa, acquisition budget growing with d) is given N observations of a
smooth, slowly drifting synthetic reward of the sorted arm (random arms, no GP cost), then runs GP
rounds. The first is *cold* (hyperparameters from their initial values); the next ``--warm`` rounds
are *warm* (started from the previous round's values, as in a run) -- the steady-state cost.
Reported: median warm seconds of the whole round, of the fit and of the acquisition, the number of
MAP objective evaluations, and the cold round's seconds.

**Share of training.** (a) measured: ``tvolib.training.train`` with ``gp_bandit`` at d = 15 for
``--train-epochs`` epochs on ``--n-train`` MNIST examples, ``n_init=3`` so GP rounds start early
(bandit seconds / training seconds; early in a run, so few observations); (b) projected for the
paper's 10,000-epoch run: windows of 6 + k // 10 epochs give K ~ 396 rounds; the bandit's total is the sum of round costs interpolated
(log-log in N) from the warm table, divided by 10,000 x the measured seconds per epoch.

**Regret** (optional, ``--regret-rounds R``): average regret over R rounds on the tests' synthetic
reward (2-d Gaussian bump, static or drifting) for the GP bandit with Theorem 1's kappa, with the
authors' code's ``kappa = log N``, and random search.

Run: ``python benchmarks/bench_bandit.py [--threads 1] [--device cpu] [--warm 3] [--ds 2 5 10 15]
[--ns 50 200 1000] [--train-epochs 40] [--n-train 6000] [--regret-rounds 60] [--markdown]``.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tvolib.bandit import GPBanditSchedule, RandomSchedule  # noqa: E402


def synthetic_reward(arm: torch.Tensor, k: int, rng: np.random.Generator) -> float:
    """Smooth bump over the sorted arm whose centre drifts with the round, plus noise."""
    b = np.sort(arm.numpy())
    centre = np.linspace(0.15, 0.85, b.size) ** 1.5 + 0.05 * math.sin(k / 40)
    return float(np.exp(-np.sum((b - centre) ** 2) / (2 * 0.1 * b.size)) + 0.05 * rng.standard_normal())


def time_rounds(d: int, n: int, warm: int, device: str) -> dict[str, float]:
    sched = GPBanditSchedule(d, seed=0, n_init=n + 1, device=device)  # random arms up to N observations
    rng = np.random.default_rng(0)
    for k in range(n):
        sched.observe(synthetic_reward(sched.current_arm(), k, rng))
    sched.n_init = 1  # from now on every round fits the GP and maximises GP-UCB
    walls = []
    for k in range(n, n + 1 + warm):
        reward = synthetic_reward(sched.current_arm(), k, rng)
        t0 = time.perf_counter()
        sched.observe(reward)
        walls.append(time.perf_counter() - t0)
    rows = sched.history()[-(1 + warm):]
    assert all(r["source"] == "gp" for r in rows)
    w = rows[1:]
    return {
        "cold": walls[0],
        "round": statistics.median(walls[1:]),
        "fit": statistics.median(r["fit_seconds"] for r in w),
        "acq": statistics.median(r["acq_seconds"] for r in w),
        "evals": statistics.median(r["fit_evals"] for r in w),
        "n_obs": w[-1]["n_obs"],
    }


def training_share(epochs: int, n_train: int, device: str) -> dict[str, float] | None:
    """Bandit seconds / training seconds of a real gp_bandit run at d = 15 (None without data)."""
    try:
        from tvolib.training import RunConfig, train
    except ImportError as exc:  # trainer not available
        print(f"(skipping the training-share measurement: {exc})")
        return None
    # n_init=3 so that GP rounds start after ~3 windows (the default, d = 15 random rounds, would
    # take ~100 epochs); the projection below uses the round table, not this run.
    config = RunConfig(model="vae", dataset="mnist", n_train=n_train, n_test=100, schedule="gp_bandit", d=15,
                       S=10, epochs=epochs, eval_every=0, eval_S=10, schedule_options={"n_init": 3})
    try:  # data from the data-root setting ($TVOLIB_DATA, else the library default)
        result = train(config, None, device=device)
    except Exception as exc:  # noqa: BLE001 - report and carry on with the round table
        print(f"(skipping the training-share measurement: {type(exc).__name__}: {exc})")
        return None
    final = result.final
    rounds = [r for r in result.schedule_history if r.get("source") == "gp"]
    return {
        "epochs": final["epochs"],
        "train_seconds": final["train_seconds"],
        "bandit_seconds": final["bandit_seconds"],
        "share": final["bandit_seconds"] / final["train_seconds"],
        "epoch_seconds": final["train_seconds"] / max(final["epochs"], 1),
        "gp_rounds": len(rounds),
    }


def projected_share(table: dict[tuple[int, int], dict[str, float]], d: int, epoch_seconds: float,
                    total_epochs: int = 10_000) -> tuple[int, float, float]:
    """Rounds, bandit seconds and share for a ``total_epochs`` run (paper: 10,000) at dimension ``d``."""
    ns = sorted(n for (dd, n) in table if dd == d)
    log_n = np.log(ns)
    log_c = np.log([table[(d, n)]["round"] for n in ns])
    epochs, k, bandit = 0, 0, 0.0
    while epochs < total_epochs:
        epochs += 6 + k // 10
        n_obs = max(k + 1, ns[0])
        bandit += float(np.exp(np.interp(np.log(n_obs), log_n, log_c)))  # flat outside the measured range
        k += 1
    return k, bandit, bandit / (total_epochs * epoch_seconds)


def regret_table(rounds: int, seeds: int) -> None:
    """Average regret on a drifting 2-d Gaussian bump (as in the tests): GP-UCB kappa choices vs random."""
    def bump(arm: torch.Tensor, k: int, drift: float) -> float:
        b = np.sort(arm.numpy())
        centre = np.array([0.3, 0.65]) + drift * math.sin(2 * math.pi * k / 60)
        return float(np.exp(-np.sum((b - centre) ** 2) / (2 * 0.2**2)))

    print(f"\n| reward (d = 3, {rounds} rounds, {seeds} seeds) | GP, kappa Theorem 1 | GP, kappa = log N "
          "| random search |")
    print("|---|---|---|---|")
    for drift in (0.0, 0.1):
        cells = []
        for make in (lambda s: GPBanditSchedule(3, seed=s), lambda s: GPBanditSchedule(3, seed=s, kappa="log_n"),
                     lambda s: RandomSchedule(3, seed=s)):
            regrets = []
            for seed in range(seeds):
                sched, noise, total = make(seed), np.random.default_rng(1000 + seed), 0.0
                for k in range(rounds):
                    f = bump(sched.current_arm(), k, drift)
                    total += 1.0 - f
                    sched.observe(f + 0.05 * noise.standard_normal())
                regrets.append(total / rounds)
            cells.append(f"{np.mean(regrets):.3f} +- {np.std(regrets) / math.sqrt(seeds):.3f}")
        label = "static bump" if drift == 0 else f"bump drifting +-{drift}"
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--ds", type=int, nargs="+", default=[2, 5, 10, 15])
    parser.add_argument("--ns", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--train-epochs", type=int, default=40, help="0 skips the training-share run")
    parser.add_argument("--n-train", type=int, default=6000)
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--regret-rounds", type=int, default=0, help="> 0 adds the synthetic regret table")
    parser.add_argument("--regret-seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {args.device}")

    if args.regret_rounds > 0:
        regret_table(args.regret_rounds, args.regret_seeds)

    table: dict[tuple[int, int], dict[str, float]] = {}
    if args.markdown:
        print("\n| d | N | warm round (s) | fit (s) | acquisition (s) | MAP evals | cold round (s) |")
        print("|---|---|---|---|---|---|---|")
    else:
        print(f"\n{'d':>3} {'N':>5} {'round':>8} {'fit':>8} {'acq':>8} {'evals':>6} {'cold':>8}")
    for d in args.ds:
        for n in args.ns:
            r = time_rounds(d, n, args.warm, args.device)
            table[(d, n)] = r
            if args.markdown:
                print(f"| {d} | {n} | {r['round']:.3f} | {r['fit']:.3f} | {r['acq']:.3f} | {r['evals']:.0f} "
                      f"| {r['cold']:.3f} |", flush=True)
            else:
                print(f"{d:>3} {n:>5} {r['round']:8.3f} {r['fit']:8.3f} {r['acq']:8.3f} {r['evals']:6.0f} "
                      f"{r['cold']:8.3f}", flush=True)

    if args.train_epochs > 0:
        share = training_share(args.train_epochs, args.n_train, args.device)
        if share is not None:
            print(f"\nmeasured (VAE, MNIST n_train={args.n_train}, gp_bandit d=15, {share['epochs']} epochs, "
                  f"{share['gp_rounds']} GP rounds): bandit {share['bandit_seconds']:.2f} s of "
                  f"{share['train_seconds']:.1f} s training = {100 * share['share']:.2f}%, "
                  f"{share['epoch_seconds']:.2f} s/epoch")
            if 15 in args.ds:
                for label, sec in (("measured s/epoch", share["epoch_seconds"]), ("paper GPU, 6 s/epoch", 6.0)):
                    k, bandit, frac = projected_share(table, 15, sec)
                    print(f"projected 10,000-epoch run at d=15 ({label}): {k} rounds, bandit {bandit:.0f} s "
                          f"= {100 * frac:.2f}% of training")


if __name__ == "__main__":
    main()
