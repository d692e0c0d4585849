"""Stacked training throughput: run-steps per second of K runs trained as one batched computation.

Not a test (no assertions on time). For each K and S: K VAEs (or SBNs) of the paper (Appendix A)
built with their own seeds, stacked (:class:`tvolib.stacked.StackedModel`), trained with the TVO
(covariance estimator, log schedule d = 5, per-run schedules) and :class:`~tvolib.stacked.optim.StackedAdam`
on minibatches of ``--batch`` examples (K different minibatches per step), noise drawn from
each run's own generator. One "run-step" is one minibatch step of one run, so ``K * steps / s``;
the speed-up column divides by the K = 1 stack's rate at the same S.

Data: the MNIST training images from ``$TVOLIB_DATA`` (or ``--data-root``) when present, else
random binary images of MNIST's size (the timing does not depend on the pixel values).

Run: ``python benchmarks/bench_stack.py --device cuda [--K 1 8 32 128] [--S 10 50] [--tf32] [--bf16]
[--compile]``; on a CPU use small sizes, e.g. ``--K 1 4 --S 10 --batch 100 --steps 3``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tvolib.data import load_dataset  # noqa: E402
from tvolib.models import build_model  # noqa: E402
from tvolib.stacked import StackedModel  # noqa: E402
from tvolib.stacked.objectives import left_points, stacked_loss  # noqa: E402
from tvolib.stacked.optim import StackedAdam  # noqa: E402
from tvolib.tvo import log_uniform  # noqa: E402


def training_images(data_root: str | None, device: torch.device) -> torch.Tensor:
    """MNIST training intensities in [0, 1] ``(N, 784)`` if the data root has them, else random pixels."""
    root = data_root or os.environ.get("TVOLIB_DATA")
    if root:
        try:
            return load_dataset("mnist", root, n_test=1).train.to(device)
        except (OSError, ValueError) as err:
            print(f"# MNIST not loaded from {root} ({err}); using random images")
    return torch.rand(60_000, 784, device=device)


def bench_one(model: str, K: int, S: int, batch: int, steps: int, images: torch.Tensor, *,
              bf16: bool, compile_forward: bool) -> float:
    """Steady run-steps per second of a stack of K runs (the first two steps are warm-up)."""
    device = images.device
    train_mean = images.mean(0).cpu()
    singles = []
    for seed in range(1, K + 1):
        torch.manual_seed(seed)
        singles.append(build_model(model, train_mean=train_mean))
    stack = StackedModel(singles).to(device)
    opt = StackedAdam(stack, lr=1e-3)
    gens = [torch.Generator(device=device).manual_seed(seed) for seed in range(1, K + 1)]
    points = left_points([log_uniform(5)] * K, device=device)
    if compile_forward:
        stack.log_joint_and_q = torch.compile(stack.log_joint_and_q)  # instance attribute shadows the method
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext())
    data_gen = torch.Generator(device=device).manual_seed(0)
    n = images.shape[0]

    def one_step() -> None:
        idx = torch.randint(0, n, (K, batch), device=device, generator=data_gen)
        x = torch.bernoulli(images[idx], generator=data_gen)  # dynamic binarisation, (K, batch, 784)
        noise = stack.draw_noise(gens, S, batch)
        with autocast:
            out = stacked_loss("tvo", stack, x, S, noise, points)
        out.loss.float().sum().backward()
        opt.step()
        opt.zero_grad()

    for _ in range(2):
        one_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        one_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return K * steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", default="vae", choices=["vae", "sbn"])
    parser.add_argument("--K", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--S", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (CUDA)")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast of the forward pass")
    parser.add_argument("--compile", action="store_true", help="torch.compile the stacked forward pass")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    device = torch.device(args.device)
    images = training_images(args.data_root, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"# {name}, torch {torch.__version__}, model {args.model}, batch {args.batch}, tf32={args.tf32}, "
          f"bf16={args.bf16}, compile={args.compile}")
    print(f"{'S':>4} {'K':>5} {'run-steps/s':>12} {'x K=1':>7}")
    for S in args.S:
        base = None
        for K in args.K:
            try:
                rate = bench_one(args.model, K, S, args.batch, args.steps, images, bf16=args.bf16,
                                 compile_forward=args.compile)
            except torch.OutOfMemoryError:
                print(f"{S:>4} {K:>5} {'out of memory':>12}")
                torch.cuda.empty_cache()
                continue
            base = rate if K == 1 else base
            ratio = f"{rate / base:7.2f}" if base else "      -"
            print(f"{S:>4} {K:>5} {rate:12.1f} {ratio}", flush=True)


if __name__ == "__main__":
    main()
