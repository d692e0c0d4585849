"""Is the GP bandit's reward the same under bf16 autocast as in fp32, to within the reward's own noise?

Not a test: a CPU measurement (torch's CPU autocast runs bfloat16), run before the bandit budget is
trained in bf16 on a GPU (``benchmarks/gpu_check.sh budget``). Two parts:

1. **Same model states** (``--part states``). fp32 runs of the log schedule (VAE/TVO, MNIST, the
   ``quick`` budget's scale by default: 3,000 / 100 examples, batch 100, S = 10, d = 5) are trained by
   the library's own image task. At every training minibatch the task's fp32 forward pass is done
   again under ``precision="bf16"`` autocast from the same model state with the same samples (the
   global RNG restored; the fp32 recomputation of each epoch's first minibatch is checked to
   reproduce the training ``log w`` exactly), so that every epoch has the bandit's evidence
   ``L = mean_x log_evidence(log w)`` (:func:`tvolib.tvo.log_evidence`, what ``step(evidence=...)``
   receives) both ways, over the same minibatches and samples, for the code's estimate (trapezoid
   over ``10**linspace(-9, 0, 50)``) and the paper's (left sum over ``linear(50)``). Training itself
   is fp32 and untouched. From the two evidence sequences it forms the windows' rewards after the
   burn-in (fixed windows of ``--window`` epochs) under the three reward rules
   (:mod:`tvolib.bandit.reward`): ``code`` (window mean minus the previous window's mean), ``paper``
   (``L_end - L_start``) and ``rate`` (``tvolib``'s: the code's ``L``, ``(L_end - L_start) / w``). It
   prints the bf16 - fp32 reward differences (same seed, same window) in units of the reward's noise
   sd, measured two ways from the fp32 rewards: between seeds (the spread of one window's reward
   over seeds, all training the same arm, pooled over windows) and within a run (the rewards'
   scatter about a quadratic trend in the round, pooled over seeds). The level ``L_bf16 - L_fp32``
   per epoch is printed too: a constant offset cancels in every reward.
2. **End to end** (``--part e2e``): GP-bandit runs at a tiny scale (1,000 / 200 examples, batch 100,
   45 epochs, window 3 after a 6-epoch burn-in, 4 random rounds; the code's protocol and tvolib's)
   trained in fp32 and in bf16 (``RunConfig.precision``, one ``train_many`` call), same seeds. The
   burn-in and random rounds train the same arms in both precisions (they depend on the seed only),
   so their rewards are compared pair by pair against the between-seed spread of the same rounds
   and against the GP's own noise estimate (``sqrt(noise) * y_std`` of its fitted rounds); the
   rounds after are compared as distributions; the final test log p(x) against the seed noise.

Seeds: 0, 1, 2 (both parts; nothing here was tuned: the scales are the ``quick`` budget's and the
``quick`` profile's bandit settings). Time on the 2-core development CPU shared with other jobs
(load 10-14, one torch thread): part 1 16 minutes (200-380 s a seed of 80 epochs), part 2 11 minutes
(12 runs of 45 epochs); on an idle machine a third of that or less.

Run: ``TVOLIB_DATA=... python benchmarks/bench_bandit_bf16.py`` (both parts), ``--part states`` or
``--part e2e``; smaller: ``--epochs 40 --window 4 --burn-in 8``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tvolib.objectives import compute_loss  # noqa: E402
from tvolib.precision import autocast_scope  # noqa: E402
from tvolib.training.images import ImageTask, RunConfig  # noqa: E402
from tvolib.training.loop import run  # noqa: E402
from tvolib.training.many import train_many  # noqa: E402
from tvolib.tvo import EvidenceSpec, log_evidence  # noqa: E402

#: The two evidence estimates the bandit's rewards use: the code's (rules "code" and "rate") and the paper's.
SPECS = {"code": EvidenceSpec.authors_code(50), "paper": EvidenceSpec.paper(50)}
#: Reward rule -> the estimate it reads.
RULE_SPEC = {"code": "code", "paper": "paper", "rate": "code"}


class TwoPrecisionTask(ImageTask):
    """An fp32 image task that also computes each training minibatch's ``log w`` under ``other``
    autocast, from the same model state and the same samples; training is unchanged.

    After each epoch :attr:`records` gets the epoch's evidence under both precisions and both
    estimates of :data:`SPECS`, and the per-example sd of the code estimate's difference.
    """

    def __init__(self, config: RunConfig, data_root: str | None, other: str = "bf16") -> None:
        if config.precision != "fp32":
            raise ValueError(f"TwoPrecisionTask trains in fp32; got precision={config.precision!r}")
        super().__init__(config, torch.device("cpu"), data_root)
        self.other = other
        self.records: list[dict[str, float]] = []
        self.max_recompute_diff = 0.0
        self._shadow: list[torch.Tensor] = []

    def _loss(self, x: torch.Tensor, betas: Any) -> Any:
        before = torch.get_rng_state()
        out = super()._loss(x, betas)
        after = torch.get_rng_state()
        with torch.no_grad():
            if not self._shadow:  # the epoch's first minibatch: the recomputation must reproduce training
                torch.set_rng_state(before)
                again = compute_loss(self.config.objective, self.model, x, self.config.S, betas).log_w
                self.max_recompute_diff = max(self.max_recompute_diff, float((again - out.log_w).abs().max()))
            torch.set_rng_state(before)
            with autocast_scope(self.other, self.device):
                shadow = compute_loss(self.config.objective, self.model, x, self.config.S, betas).log_w
            torch.set_rng_state(after)
        self._shadow.append(shadow.detach().float())
        return out

    def minibatch_steps(self, x_epoch: torch.Tensor, perm: torch.Tensor, betas: list[float]) -> list[Any]:
        self._shadow = []
        outputs = super().minibatch_steps(x_epoch, perm, betas)
        self._main = [o.log_w for o in outputs]
        return outputs

    def run_epoch(self, epoch: int, betas: torch.Tensor) -> dict[str, Any]:
        row = super().run_epoch(epoch, betas)
        n = sum(w.shape[1] for w in self._main)
        record: dict[str, float] = {"epoch": epoch, "train_evidence": row["train_evidence"]}
        with torch.no_grad():
            for name, spec in SPECS.items():
                main = torch.cat([log_evidence(w, spec).double() for w in self._main])
                other = torch.cat([log_evidence(w, spec).double() for w in self._shadow])
                record[f"fp32_{name}"] = float(main.sum()) / n
                record[f"{self.other}_{name}"] = float(other.sum()) / n
                record[f"example_sd_{name}"] = float((other - main).std())
        self.records.append(record)
        return row


def windows(epochs: int, burn_in: int, window: int) -> list[tuple[int, int]]:
    """Fixed windows ``(first, last)`` epoch after the burn-in (the bandit's rounds, without growth)."""
    out, start = [], burn_in + 1
    while start + window - 1 <= epochs:
        out.append((start, start + window - 1))
        start += window
    return out


def rewards(evidence: dict[int, float], spans: Sequence[tuple[int, int]], rule: str) -> np.ndarray:
    """Each window's reward (from the second window on) under ``rule`` from per-epoch evidence."""
    out = []
    for (a0, a1), (b0, b1) in zip(spans[:-1], spans[1:]):
        if rule == "code":
            out.append(np.mean([evidence[e] for e in range(b0, b1 + 1)]) - np.mean([evidence[e] for e in range(a0, a1 + 1)]))
        elif rule == "paper":
            out.append(evidence[b1] - evidence[a1])
        else:  # rate
            out.append((evidence[b1] - evidence[a1]) / (b1 - a1))
    return np.asarray(out)


def noise_sds(R: np.ndarray) -> tuple[float, float]:
    """Reward noise sd from fp32 rewards ``R`` (seeds x windows): between seeds (pooled over windows)
    and within runs (about a quadratic trend in the round, pooled over seeds)."""
    n_seeds, n_win = R.shape
    between = math.sqrt(((R - R.mean(0)) ** 2).sum() / ((n_seeds - 1) * n_win)) if n_seeds > 1 else math.nan
    k = np.arange(n_win)
    res = [r - np.polyval(np.polyfit(k, r, 2), k) for r in R]
    within = math.sqrt(sum((e ** 2).sum() for e in res) / (n_seeds * (n_win - 3))) if n_win > 3 else math.nan
    return between, within


def part_states(args: argparse.Namespace) -> None:
    base = RunConfig(n_train=args.n_train, n_test=100, batch_size=args.batch, S=args.S, d=args.d, schedule="log",
                     epochs=args.epochs, eval_every=args.epochs, eval_S=50)
    spans = windows(args.epochs, args.burn_in, args.window)
    print(f"## part 1, same model states: VAE/TVO log schedule d = {args.d}, {args.n_train} MNIST examples, "
          f"batch {args.batch}, S = {args.S}, {args.epochs} fp32 epochs, seeds {args.seeds}; rewards of "
          f"{len(spans) - 1} windows of {args.window} epochs after a {args.burn_in}-epoch burn-in", flush=True)
    records: dict[int, list[dict[str, float]]] = {}
    for seed in args.seeds:
        start = time.perf_counter()
        config = base.replace(seed=seed).validate()
        task = TwoPrecisionTask(config, args.data_root)
        run(config, lambda: task, None, progress=False)
        records[seed] = task.records
        gap = max(abs(r["fp32_paper"] - r["train_evidence"]) for r in task.records)
        print(f"seed {seed}: {time.perf_counter() - start:.0f} s; fp32 recomputation max |diff| "
              f"{task.max_recompute_diff:.1e} (must be 0); the paper estimate vs the trainer's train_evidence "
              f"max |diff| {gap:.1e}", flush=True)
        if task.max_recompute_diff != 0.0:
            raise SystemExit("the fp32 recomputation did not reproduce training: the samples differ, no comparison")
    print("\nlevel L_bf16 - L_fp32 per epoch after the burn-in (nats; a constant offset cancels in rewards), and the "
          "per-example sd of the difference:")
    for name in SPECS:
        level = [r[f"bf16_{name}"] - r[f"fp32_{name}"] for s in args.seeds for r in records[s] if r["epoch"] > args.burn_in]
        ex = np.mean([r[f"example_sd_{name}"] for s in args.seeds for r in records[s]])
        print(f"  {name:>5}: mean {np.mean(level):+.4f}, sd over epochs and seeds {np.std(level, ddof=1):.4f}, "
              f"range [{min(level):+.4f}, {max(level):+.4f}]; per example sd {ex:.4f}")
    print(f"\n{'rule':>5} {'noise sd between seeds':>22} {'within run':>10} {'mean diff':>10} {'sd diff':>8} "
          f"{'max |diff|':>10} {'mean/noise':>10} {'max/noise':>9} {'t(mean)':>7}")
    for rule, spec in RULE_SPEC.items():
        R = {p: np.stack([rewards({r["epoch"]: r[f"{p}_{spec}"] for r in records[s]}, spans, rule) for s in args.seeds])
             for p in ("fp32", "bf16")}
        between, within = noise_sds(R["fp32"])
        diff = (R["bf16"] - R["fp32"]).ravel()
        noise = np.nanmin([between, within])
        t = diff.mean() / (diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.nan
        print(f"{rule:>5} {between:22.4f} {within:10.4f} {diff.mean():+10.5f} {diff.std(ddof=1):8.5f} "
              f"{np.abs(diff).max():10.5f} {diff.mean() / noise:+10.4f} {np.abs(diff).max() / noise:9.4f} {t:+7.2f}")
    print("(noise: the smaller of the two sds; diff: bf16 - fp32 reward of one seed's window, "
          f"{len(args.seeds)} seeds x {len(spans) - 1} windows)", flush=True)


def _gp_noise_sd(rounds: Sequence[dict[str, Any]]) -> float:
    """The GP's noise sd in reward units, median over its fitted rounds (``sqrt(noise) * y_std``)."""
    values = [math.sqrt(r["noise"]) * r["y_std"] for r in rounds
              if r.get("noise") is not None and r.get("y_std") is not None and r.get("source") not in (None, "random")]
    values = [v for v in values if math.isfinite(v)]
    return float(np.median(values)) if values else math.nan


def part_e2e(args: argparse.Namespace) -> None:
    options = {"window": 3, "burn_in": 6, "n_init": 4}
    base = RunConfig(n_train=1000, n_test=200, batch_size=100, S=args.S, d=args.d, epochs=args.e2e_epochs,
                     eval_every=args.e2e_epochs, eval_S=100, schedule="gp_bandit")
    configs = [base.replace(seed=s, precision=p, schedule_options={**options, "protocol": protocol}).validate()
               for protocol in args.protocols for p in ("fp32", "bf16") for s in args.seeds]
    print(f"\n## part 2, end to end: GP bandit ({', '.join(args.protocols)} protocols), 1000/200 MNIST, batch 100, "
          f"S = {args.S}, d = {args.d}, {args.e2e_epochs} epochs, window 3 after a 6-epoch burn-in, 4 random rounds, "
          f"fp32 and bf16, seeds {args.seeds}: {len(configs)} runs in one train_many call", flush=True)
    start = time.perf_counter()
    results = train_many(configs, [None] * len(configs), device="cpu", progress=False, data_root=args.data_root)
    print(f"{time.perf_counter() - start:.0f} s", flush=True)
    by = {(c.schedule_options, c.precision, c.seed): r for c, r in zip(configs, results)}
    for protocol in args.protocols:
        opts = base.replace(schedule_options={**options, "protocol": protocol}).schedule_options
        hist = {(p, s): [r for r in by[(opts, p, s)].schedule_history if not r.get("skipped")]
                for p in ("fp32", "bf16") for s in args.seeds}
        n_rounds = min(len(h) for h in hist.values())
        same = [k for k in range(n_rounds) if all(hist[("fp32", s)][k]["arm"] == hist[("bf16", s)][k]["arm"]
                                                   for s in args.seeds)]
        R = {p: np.array([[hist[(p, s)][k]["reward"] for k in range(n_rounds)] for s in args.seeds]) for p in ("fp32", "bf16")}
        gp_sd = _gp_noise_sd([r for s in args.seeds for r in hist[("fp32", s)]])
        print(f"\nprotocol {protocol!r}: {n_rounds} rounds per run; rounds with the same arm in both precisions "
              f"(every seed): {same}; the GP's noise sd (fp32 runs, median over GP rounds): {gp_sd:.4f}")
        if same:
            paired = (R["bf16"][:, same] - R["fp32"][:, same]).ravel()
            between = math.sqrt(((R["fp32"][:, same] - R["fp32"][:, same].mean(0)) ** 2).sum()
                                / ((len(args.seeds) - 1) * len(same)))
            print(f"  same-arm rounds, bf16 - fp32 reward: mean {paired.mean():+.4f}, sd {paired.std(ddof=1):.4f}, "
                  f"max |diff| {np.abs(paired).max():.4f}; fp32 sd between seeds {between:.4f}; "
                  f"rms diff / GP noise sd {math.sqrt((paired ** 2).mean()) / gp_sd:.3f}")
        print(f"  {'round':>5} " + " ".join(f"{'fp32 s' + str(s):>9} {'bf16 s' + str(s):>9}" for s in args.seeds))
        for k in range(n_rounds):
            cells = " ".join(f"{R['fp32'][i, k]:9.3f} {R['bf16'][i, k]:9.3f}" for i in range(len(args.seeds)))
            print(f"  {k:>5} {cells}{'  (same arm)' if k in same else ''}")
        late = [k for k in range(n_rounds) if k not in same]
        if late:
            f, b = R["fp32"][:, late].ravel(), R["bf16"][:, late].ravel()
            se = math.sqrt(f.var(ddof=1) / f.size + b.var(ddof=1) / b.size)
            print(f"  rounds with different arms: mean reward fp32 {f.mean():+.4f}, bf16 {b.mean():+.4f}, "
                  f"difference {b.mean() - f.mean():+.4f} ± {se:.4f} (s.e.)")
        lp = {p: [by[(opts, p, s)].final["test_log_px"] for s in args.seeds] for p in ("fp32", "bf16")}
        print(f"  final test log p(x): fp32 {' '.join(f'{v:.2f}' for v in lp['fp32'])} (mean {np.mean(lp['fp32']):.2f}, "
              f"sd {np.std(lp['fp32'], ddof=1):.2f}); bf16 {' '.join(f'{v:.2f}' for v in lp['bf16'])} "
              f"(mean {np.mean(lp['bf16']):.2f}, sd {np.std(lp['bf16'], ddof=1):.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("states", "e2e", "both"), default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=80)
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--S", type=int, default=10)
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--window", type=int, default=6)
    parser.add_argument("--burn-in", type=int, default=20)
    parser.add_argument("--e2e-epochs", type=int, default=45)
    parser.add_argument("--protocols", nargs="+", default=["code", "tvolib"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# cpu ({args.threads} thread(s)), torch {torch.__version__}, bf16 by CPU autocast", flush=True)
    if args.part in ("states", "both"):
        part_states(args)
    if args.part in ("e2e", "both"):
        part_e2e(args)


if __name__ == "__main__":
    main()
