"""Test-set evaluation throughput: chunked IWAE-5000 (tvolib.training.evaluate) versus batch size 1.

Not a test (no assertions on time). For each model (the paper's VAE and SBN, untrained, seeded),
on the same test points and the same S (default 5000, as in the paper), it measures:

* **batch size 1**: the authors' way, one point at a time with all S samples in one call;
* **chunked**: :func:`tvolib.training.evaluate.evaluate`, points and samples in chunks;

and prints a table with points per second, the speed-up (target >= 20x) and both mean test
log p(x) estimates. The two use different random draws, so they agree within Monte Carlo error:
the table gives their mean paired difference and its standard error over the points.
On a CPU both ways are bound by the same arithmetic (S = 5000 already fills a batch), so expect
little gain there; the target is for a GPU, where one point per call leaves the device idle.

Run: ``python benchmarks/bench_evaluate.py [--points 100] [--S 5000] [--device cuda] [--threads 1]``.
Data: MNIST / binarized MNIST test points from the data root (``--data-root``, else the data-root
setting ``$TVOLIB_DATA``); random binary images when none is found.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tvolib.training.evaluate import evaluate  # noqa: E402
from tvolib.models import build_model  # noqa: E402


def test_points(dataset: str, n: int, data_root: str | None) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """``n`` test images, the training mean (for the SBN) and where they came from."""
    root = data_root or os.environ.get("TVOLIB_DATA")
    try:
        from tvolib.data import load_dataset

        data = load_dataset(dataset, root, n_train=1000, n_test=n, seed=0)
        return data.test, data.train_mean, f"{dataset} test ({root})"
    except Exception as error:  # no data: the throughput does not depend on pixel values
        print(f"[{dataset}] data unavailable ({type(error).__name__}: {error}); using random binary images")
        gen = torch.Generator().manual_seed(0)
        return torch.bernoulli(torch.full((n, 784), 0.13), generator=gen), None, "random binary"


@torch.no_grad()
def batch_size_one(model, x: torch.Tensor, S: int) -> torch.Tensor:
    """Per-point IWAE-S estimates ``(N,)``, one point (and all S samples) per call."""
    values = []
    for i in range(x.shape[0]):
        log_p, log_q = model.log_joint_and_q(x[i : i + 1], S, reparam=False)
        values.append((torch.logsumexp(log_p - log_q, dim=0) - math.log(S)).item())
    return torch.tensor(values, dtype=torch.float64)


def timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--S", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--sample-chunk", type=int, default=None)
    parser.add_argument("--models", nargs="+", default=["vae", "sbn"], choices=["vae", "sbn"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    rows = []
    for name in args.models:
        x, train_mean, source = test_points("mnist" if name == "vae" else "binarized_mnist", args.points, args.data_root)
        torch.manual_seed(0)
        model = build_model(name, train_mean=train_mean).to(device)
        x = x.to(device)
        evaluate(model, x[:2], S=min(args.S, 100), batch_size=2)  # warm-up (allocator, kernels)
        one, t_one = timed(lambda: batch_size_one(model, x, args.S))
        chunked, t_chunk = timed(
            lambda: evaluate(model, x, S=args.S, batch_size=args.batch_size, sample_chunk=args.sample_chunk,
                             seed=1, per_point=True)
        )
        diff = chunked["log_px_points"] - one
        se = (diff.std() / math.sqrt(diff.numel())).item() if diff.numel() > 1 else float("nan")
        rows.append((name, source, t_one, t_chunk, one.mean().item(), chunked["log_px"], diff.mean().item(), se))

    print(f"\nIWAE-{args.S} test log p(x), {args.points} points, device {device}, threads {args.threads}, "
          f"batch_size {args.batch_size}, sample_chunk {args.sample_chunk or 'auto'}")
    header = (f"{'model':<5} {'bs1 pts/s':>10} {'chunk pts/s':>12} {'speed-up':>9} {'bs1 log p(x)':>13} "
              f"{'chunk log p(x)':>15} {'diff ± s.e.':>16}  data")
    print(header)
    print("-" * len(header))
    for name, source, t_one, t_chunk, one_mean, chunk_mean, diff, se in rows:
        n = args.points
        print(f"{name:<5} {n / t_one:>10.1f} {n / t_chunk:>12.1f} {t_one / t_chunk:>8.1f}x {one_mean:>13.2f} "
              f"{chunk_mean:>15.2f} {diff:>+8.3f} ± {se:.3f}  {source}")


if __name__ == "__main__":
    main()
