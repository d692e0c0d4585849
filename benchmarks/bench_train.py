"""Training throughput: seconds per epoch of :func:`tvolib.training.images.train` next to the bare floor.

Not a test (no assertions on time). Measures, in one process and on the same data:

* **trainer**: ``train()`` on a VAE with the TVO (covariance estimator), log schedule d = 5,
  batch 1000, 6,000 MNIST training examples, S = 10 and S = 50; seconds per epoch read from the
  history rows (they include the per-epoch training metrics, i.e. the paper's linear-50 reward
  evaluation, Appendix A, but not the test evaluation);
* **floor**: a bare loop over the same minibatches with the same network and S: forward
  ``log_joint_and_q`` + ``-mean(log w)`` + backward + Adam step, nothing else;
* the ratio trainer / floor (target <= 1.25);
* optionally (``--compile``) the trainer with ``train(..., compile=True)`` (``torch.compile`` of the
  model's forward), the one-off compile time (first epoch minus a steady epoch), and the number of
  epochs after which compiling pays;
* sizing numbers for the profiles: SBN (TVO, S = 10, d = 5, batch 1000) on 5,000 binarized MNIST
  examples, and the VAE (TVO, S = 10, d = 5) with batch 100 on 1,000 MNIST examples.

Run: ``python benchmarks/bench_train.py [--threads 1] [--epochs 4] [--compile]``. Timings are the
fastest epoch after the first (warm-up); the trainer's come from its history rows.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tvolib.data import load_dataset  # noqa: E402
from tvolib.models import build_model  # noqa: E402
from tvolib.training.images import RunConfig, train  # noqa: E402


def _steady(times: list[float]) -> float:
    """Steady-state seconds per epoch: the fastest epoch after the first (warm-up, compilation).

    The minimum, not the median, because this machine is shared: other processes only ever add time.
    """
    return min(times[1:]) if len(times) > 1 else times[0]


def floor_seconds(config: RunConfig, data_root: str | None, epochs: int, device: str = "cpu") -> tuple[float, float]:
    """Steady seconds per epoch of the bare forward+backward+Adam loop, and the first epoch's seconds."""
    data = load_dataset(config.dataset, data_root, n_train=config.n_train, n_test=1, seed=config.data_seed).to(device)
    torch.manual_seed(config.seed)
    model = build_model(config.model, train_mean=data.train_mean).to(device)
    forward = model.log_joint_and_q
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    gen = torch.Generator(device=device).manual_seed(0)
    shuffle = torch.Generator().manual_seed(1)
    n = data.train.shape[0]
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        x = data.train_epoch(gen)
        perm = torch.randperm(n, generator=shuffle).to(device)
        for b in range(math.ceil(n / config.batch_size)):
            xb = x[perm[b * config.batch_size:(b + 1) * config.batch_size]]
            log_p, log_q = forward(xb, config.S, False)
            loss = -(log_p - log_q).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return _steady(times), times[0]


def trainer_seconds(config: RunConfig, data_root: str | None, device: str = "cpu", **kwargs) -> tuple[float, float]:
    """Steady seconds per training epoch of ``train()`` (epochs after the first), and the first epoch's."""
    result = train(config, None, data_root=data_root, device=device, progress=False, **kwargs)
    secs = [row["seconds"] for row in result.history if "seconds" in row]
    return _steady(secs), secs[0]


def paired(config: RunConfig, args: argparse.Namespace, dev: str) -> tuple[float, float]:
    """Floor and trainer seconds per epoch, measured alternately ``args.repeats`` times (fastest kept)."""
    floors, trainers = [], []
    for _ in range(args.repeats):
        floors.append(floor_seconds(config, args.data_root, args.epochs, device=dev)[0])
        trainers.append(trainer_seconds(config, args.data_root, device=dev)[0])
    return min(floors), min(trainers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per measurement (first is warm-up)")
    parser.add_argument("--data-root", default=None, help="dataset root (default: TVOLIB_DATA)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile of the model's forward")
    parser.add_argument("--S", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--repeats", type=int, default=2,
                        help="alternate floor and trainer measurements this many times, keep the fastest")
    parser.add_argument("--skip-sizing", action="store_true", help="skip the SBN / batch-100 sizing numbers")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = args.device
    print(f"torch {torch.__version__}, device {dev}, {torch.get_num_threads()} thread(s), {args.epochs} epochs each, "
          f"{args.repeats} alternating repeats")

    print("\n## VAE, TVO (covariance estimator), log schedule d=5, batch 1000, 6,000 MNIST examples")
    print("| S | trainer s/epoch | floor s/epoch | ratio | compiled trainer s/epoch | speed-up | compile s | pays after |")
    print("|---|---|---|---|---|---|---|---|")
    for S in args.S:
        config = RunConfig(model="vae", dataset="mnist", n_train=6000, n_test=100, S=S, d=5, batch_size=1000,
                           epochs=args.epochs, eval_S=10, schedule="log")
        floor, trainer = paired(config, args, dev)
        compiled = speedup = compile_s = pays = "-"
        if args.compile:
            c_trainer, c_first = trainer_seconds(config, args.data_root, device=dev, compile=True)
            cost = c_first - c_trainer
            compiled, speedup, compile_s = f"{c_trainer:.3f}", f"{trainer / c_trainer:.2f}x", f"{cost:.1f}"
            gain = trainer - c_trainer
            pays = f"{cost / gain:.0f} epochs" if gain > 0 else "never"
        print(f"| {S} | {trainer:.3f} | {floor:.3f} | {trainer / floor:.2f} | {compiled} | {speedup} | {compile_s} "
              f"| {pays} |")
        sys.stdout.flush()

    if args.skip_sizing:
        return
    print("\n## Sizing (TVO, S=10, d=5, log schedule): seconds per training epoch")
    print("| run | trainer s/epoch | floor s/epoch | ratio | compiled s/epoch | compile s (cold, warm cache) |")
    print("|---|---|---|---|---|---|")
    sizing = [
        ("SBN, binarized MNIST 5,000 ex., batch 1000",
         RunConfig(model="sbn", dataset="binarized_mnist", n_train=5000, n_test=100, S=10, d=5, batch_size=1000,
                   epochs=args.epochs, eval_S=10)),
        ("VAE, MNIST 1,000 ex., batch 100",
         RunConfig(model="vae", dataset="mnist", n_train=1000, n_test=100, S=10, d=5, batch_size=100,
                   epochs=args.epochs, eval_S=10)),
    ]
    for label, config in sizing:
        floor, trainer = paired(config, args, dev)
        compiled = compile_s = "-"
        if args.compile:
            costs = []
            for _ in range(2):  # the second compile finds Inductor's caches warm (a later run of a sweep)
                c_trainer, c_first = trainer_seconds(config, args.data_root, device=dev, compile=True)
                costs.append(c_first - c_trainer)
            compiled, compile_s = f"{c_trainer:.3f}", f"{costs[0]:.1f}, {costs[1]:.1f}"
        print(f"| {label} | {trainer:.3f} | {floor:.3f} | {trainer / floor:.2f} | {compiled} | {compile_s} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
