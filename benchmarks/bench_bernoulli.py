"""The Bernoulli log-likelihood and the evaluation's sample chunk on the CPU: before and after.

Not a test (no assertions on time). Two measurements behind two choices of the package:

* ``tvolib.models.bernoulli.bernoulli_log_prob`` against ``torch.distributions.Bernoulli(logits=l)
  .log_prob(y)``: forward and forward + backward on a ``(S, B, 784)`` tensor of logits with ``y``
  ``(B, 784)`` broadcast over the samples, as in a training step of the ``quick`` profile
  (S = 10, batch 50);
* ``tvolib.training.evaluate.evaluate`` of the paper's untrained VAE with sample chunks of about
  2**24 elements (the automatic chunk on CUDA) and 2**20 (on the CPU): IWAE-300 on 300 points, as
  in a ``quick`` evaluation.

Run: ``python benchmarks/bench_bernoulli.py [--threads 1] [--repeats 200]``. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tvolib.chunks import AUTO_ELEMENTS  # noqa: E402
from tvolib.models import build_model  # noqa: E402
from tvolib.models.bernoulli import bernoulli_log_prob  # noqa: E402
from tvolib.training.evaluate import evaluate  # noqa: E402


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median milliseconds of ``repeats`` calls after five warm-up calls."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * sorted(times)[len(times) // 2]


def likelihood_rows(repeats: int) -> list[str]:
    g = torch.Generator().manual_seed(0)
    logits = (4 * torch.randn(10, 50, 784, generator=g)).requires_grad_()
    value = torch.bernoulli(torch.full((50, 784), 0.5), generator=g)
    ways = {
        "torch.distributions.Bernoulli": lambda: torch.distributions.Bernoulli(
            logits=logits, validate_args=False).log_prob(value).sum(-1),
        "bernoulli_log_prob": lambda: bernoulli_log_prob(logits, value).sum(-1),
    }
    rows = []
    for name, fn in ways.items():
        with torch.no_grad():
            forward = median_ms(fn, repeats)
        both = median_ms(lambda: fn().sum().backward(), repeats)
        rows.append(f"| {name} | {forward:.2f} | {both:.2f} |")
    return rows


def evaluation_rows(repeats: int) -> list[str]:
    torch.manual_seed(0)
    model, x = build_model("vae"), torch.bernoulli(torch.full((300, 784), 0.5))
    rows = []
    for label, elements in (("2**24 (CUDA's)", AUTO_ELEMENTS["cuda"]), ("2**20 (the CPU's)", AUTO_ELEMENTS["cpu"])):
        chunk = max(1, min(300, elements // (100 * 784)))
        seconds = median_ms(lambda: evaluate(model, x, S=300, sample_chunk=chunk, seed=0), max(1, repeats // 40)) / 1e3
        rows.append(f"| {label} | {chunk} | {seconds:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}\n")
    print("| log-likelihood of (10, 50, 784) logits | forward ms | forward + backward ms |\n|---|---|---|")
    print("\n".join(likelihood_rows(args.repeats)))
    print("\n| evaluation chunk (elements) | samples per chunk at batch 100 | IWAE-300 of 300 points, s |\n|---|---|---|")
    print("\n".join(evaluation_rows(args.repeats)))


if __name__ == "__main__":
    main()
