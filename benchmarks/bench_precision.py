"""Does training in TF32 or bf16 change the trained model? The precision check at the reference configuration.

Not a test (run it on a GPU; ``tests/stacked/test_precision.py`` is its small CPU counterpart).
Trains the reference configuration, a VAE with the TVO on 6,000 / 1,000 MNIST examples, batch
1000, S = 10, d = 5, log schedule, 200 epochs, 3 seeds, once per precision (``RunConfig.precision``),
all in ONE ``train_many`` call (one stack per precision), and evaluates every model in fp32 with
IWAE-5000 on the 1,000 test points (the trainers always evaluate in fp32).

For each precision it prints the seeds' test log p(x), their mean and standard deviation, the gap to
the fp32 mean, and the two criteria: the gap allowed by the seed noise (four standard errors of a
difference of means, from the pooled standard deviation of fp32 and that precision, as the CPU test
derives it) and the project's target of 1 nat. ``within`` says whether the gap meets both.

Run: ``python benchmarks/bench_precision.py --device cuda`` (about 1-2 minutes on one H100/H200);
on a CPU only at toy sizes, e.g. ``--device cpu --epochs 3 --n-train 1000 --n-test 200 --eval-S 100``.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tvolib.precision import PRECISIONS  # noqa: E402
from tvolib.training.images import RunConfig  # noqa: E402
from tvolib.training.many import train_many  # noqa: E402

#: The numerics target: every precision the ``gpu`` profile uses within 1 nat of fp32.
TARGET_NATS = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--n-train", type=int, default=6000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--S", type=int, default=10)
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--eval-S", type=int, default=5000)
    parser.add_argument("--objective", default="tvo")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--compile", action="store_true", help="train_many(..., compile=True)")
    args = parser.parse_args()
    precisions = ["fp32"] + [p for p in args.precisions if p != "fp32"]
    base = RunConfig(n_train=args.n_train, n_test=args.n_test, batch_size=args.batch, S=args.S, d=args.d,
                     epochs=args.epochs, eval_S=args.eval_S, objective=args.objective, schedule="log")
    configs = [base.replace(seed=s, precision=p).validate() for p in precisions for s in args.seeds]
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"# {name}, torch {torch.__version__}: VAE/{args.objective}, {args.n_train}/{args.n_test} MNIST, batch "
          f"{args.batch}, S = {args.S}, d = {args.d}, log schedule, {args.epochs} epochs, IWAE-{args.eval_S}, "
          f"seeds {args.seeds}, compile={args.compile}")
    options = {"compile": True} if args.compile else {}
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        results = train_many(configs, [Path(root) / str(i) for i in range(len(configs))], device=device,
                             data_root=args.data_root, progress=False, **options)
        wall = time.perf_counter() - start
    values: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for config, result in zip(configs, results):
        values.setdefault(config.precision, []).append(result.final["test_log_px"])
        seconds[config.precision] = seconds.get(config.precision, 0.0) + result.final["train_seconds"]
    n = len(args.seeds)
    fp32 = values["fp32"]
    print(f"\n{'precision':>9} {'test log p(x) per seed':>32} {'mean':>9} {'sd':>6} {'gap':>7} {'noise gap':>9} "
          f"{'within':>6} {'train s':>8}")
    for precision in precisions:
        vals = values[precision]
        sd = statistics.stdev(vals) if n > 1 else math.nan
        gap = statistics.mean(vals) - statistics.mean(fp32)
        pooled = math.sqrt((statistics.variance(fp32) + statistics.variance(vals)) / 2) if n > 1 else math.nan
        allowed = 4 * pooled * math.sqrt(2 / n)
        ok = "-" if precision == "fp32" else ("yes" if abs(gap) <= min(allowed, TARGET_NATS) else "NO")
        per_seed = " ".join(f"{v:.2f}" for v in vals)
        print(f"{precision:>9} {per_seed:>32} {statistics.mean(vals):9.2f} {sd:6.2f} {gap:+7.2f} {allowed:9.2f} "
              f"{ok:>6} {seconds[precision]:8.1f}")
    print(f"# one train_many call, {len(configs)} runs in {len(precisions)} stacks: {wall:.1f} s wall "
          f"(train s: the precision's runs' shares of their stack's epochs; target gap <= {TARGET_NATS:g} nat)")


if __name__ == "__main__":
    main()
