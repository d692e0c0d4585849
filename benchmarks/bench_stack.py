"""Stacked training throughput: run-steps per second of K runs trained as one batched computation.

Not a test (no assertions on time). For each K and S: K VAEs (or SBNs) of the paper (Appendix A)
built with their own seeds, stacked (:class:`tvolib.stacked.StackedModel`), trained with the TVO
(covariance estimator, log schedule d = 5, per-run schedules) and :class:`~tvolib.stacked.optim.StackedAdam`
on minibatches of ``--batch`` examples (K different minibatches per step), noise drawn from
each run's own generator. One "run-step" is one minibatch step of one run, so ``K * steps / s``;
the speed-up column divides by the K = 1 stack's rate at the same S.

Data: the MNIST training images from ``$TVOLIB_DATA`` (or ``--data-root``) when present, else
random binary images of MNIST's size (the timing does not depend on the pixel values).

Each row also shows the run-steps/s that the runner's GPU cost model (``tvolib.runs.cost``,
calibrated on one H200) predicts, to check it on the GPU at hand. After the table it prints hour estimates for Fig 4's sweep (2 datasets x 4 schedules x 4 d
x 2 S x 5 seeds = 320 runs of ``--steps-per-epoch`` minibatches) at the ``gpu`` and ``paper``
profiles from the best measured run-steps/s at each S, next to the cost model's estimate of every
figure. Evaluation is costed separately at ``--eval-seconds`` per IWAE-5000 evaluation and run
(default: one run over the 10k test points on one H200), scaled to the profile's ``eval_S``.

``--bandit-K K`` adds the GP-bandit rounds of a stack: K schedules at d = ``--bandit-d`` with
``--bandit-N`` observations each, one round each, stepped one by one in this process (one thread)
and through a :class:`tvolib.stacked.StepPool` of ``--workers`` processes; then the estimated
bandit share of a K = 64 stack on a ``--host-cores`` host.

``--trainers K ...`` times the trainers end to end: ``train`` (one run) and ``train_many`` with stacks
of K runs (fp32, eager), from the epoch seconds of their histories.

Run: ``python benchmarks/bench_stack.py --device cuda [--K 1 8 32 128] [--S 10 50] [--tf32] [--bf16]
[--compile] [--bandit-K 8] [--trainers 8 32]``; on a CPU use small sizes, e.g. ``--K 1 4 --S 10
--batch 100 --steps 3 --trainers 4 --n-train 1000``.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tvolib.bandit import GPBanditSchedule  # noqa: E402
from tvolib.data import load_dataset  # noqa: E402
from tvolib.models import build_model  # noqa: E402
from tvolib.paper.profiles import PROFILES  # noqa: E402
from tvolib.paper.sweeps import all_configs  # noqa: E402
from tvolib.runs.cost import GPU_COST_CONSTANTS, bandit_rounds, estimate_gpu_seconds  # noqa: E402
from tvolib.runs.stacks import MAX_STACK, stack_jobs  # noqa: E402
from tvolib.stacked import StackedModel, StepPool, step_schedules  # noqa: E402
from tvolib.stacked.objectives import left_points, stacked_loss  # noqa: E402
from tvolib.stacked.optim import StackedAdam  # noqa: E402
from tvolib.training.images import RunConfig, train  # noqa: E402
from tvolib.training.many import train_many  # noqa: E402
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


# ----- hour estimates ---------------------------------------------------------------------------
FIG4_RUNS_PER_S = 2 * 4 * 4 * 5  # datasets x schedules x d x seeds, at each S in {10, 50}


def sweep_hours(rates: dict[int, float], epochs: int, steps_per_epoch: int, eval_every: int,
                eval_seconds: float) -> tuple[float, float]:
    """(training hours, evaluation hours) of Fig 4's sweep at the given run-steps/s per S."""
    train = sum(FIG4_RUNS_PER_S * epochs * steps_per_epoch / rates[S] for S in (10, 50))
    evaluations = 2 * FIG4_RUNS_PER_S * (epochs // eval_every + 1)
    return train / 3600, evaluations * eval_seconds / 3600


def model_rate(K: int, S: int, batch: int, model: str) -> float:
    """Run-steps/s of a K-run stack predicted by the runner's cost model (``GPU_COST_CONSTANTS``)."""
    c = GPU_COST_CONSTANTS
    return K / (c["step_overhead_s"] + K * batch * S / c["train_pairs_per_s"][model])


def print_hours(rates: dict[int, float], steps_per_epoch: int, eval_seconds: float) -> None:
    """Fig 4's sweep (320 runs) at the ``gpu`` and ``paper`` profiles from the measured rates, next to
    the cost model's estimate of every figure on one GPU (what ``python -m tvolib run`` prints)."""
    if not {10, 50} <= set(rates):
        print("# hour estimates need measured rates at S = 10 and S = 50")
        return
    print(f"\n# Fig 4 sweep: {2 * FIG4_RUNS_PER_S} runs x {steps_per_epoch} steps/epoch at "
          f"{rates[10]:.0f} (S=10) / {rates[50]:.0f} (S=50) run-steps/s; evaluation {eval_seconds:g} s per run")
    print(f"{'profile':>8} {'epochs':>7} {'train h':>8} {'eval h':>7} {'total h':>8} {'cost model, all figures h':>26}")
    for name in ("gpu", "paper"):
        profile = PROFILES[name]
        scale = profile.eval_S / 5000  # --eval-seconds is one IWAE-5000 evaluation
        train, evaluation = sweep_hours(rates, profile.epochs, steps_per_epoch, profile.eval_every, eval_seconds * scale)
        model = estimate_gpu_seconds(stack_jobs(all_configs(profile), MAX_STACK))["wall_seconds"] / 3600
        print(f"{name:>8} {profile.epochs:>7} {train:8.1f} {evaluation:7.1f} {train + evaluation:8.1f} {model:26.1f}")
    print("# evaluation costed unstacked, one run at a time")


# ----- bandit rounds of a stack ------------------------------------------------------------------
def bandit_schedule(d: int, n_obs: int, seed: int) -> tuple[GPBanditSchedule, int, float]:
    """A GP schedule (1-epoch windows) with ``n_obs`` finished rounds on a noisy quadratic reward,
    recorded through random rounds (cheap); returns it, the next epoch and the evidence closing it."""
    opts = dict(window=1, window_growth=0, early_drop=None, seed=seed, device="cpu")
    warm = GPBanditSchedule(d, n_init=n_obs + 2, **opts)
    g = torch.Generator().manual_seed(seed)
    level = -100.0
    warm.step(0, evidence=level)
    for epoch in range(1, n_obs + 1):
        arm = warm.current_arm()
        level += float(0.5 - (arm - 0.5).pow(2).sum() + 0.1 * torch.randn(1, generator=g, dtype=torch.float64))
        warm.step(epoch, evidence=level)
    state = warm.state_dict()
    state["config"]["n_init"] = max(3, d)
    sched = GPBanditSchedule(d, **opts)
    sched.load_state_dict(state)
    return sched, n_obs + 1, level + 0.3


def bench_bandits(K: int, d: int, n_values: list[int], workers: int, host_cores: int, rates: dict[int, float]) -> None:
    """Seconds for K GP rounds one by one vs through a StepPool; the K = 64 estimate on a bigger host."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the pool's workers run one thread each: compare like with like
    print(f"\n# GP-bandit rounds: K = {K}, d = {d}, pool of {workers} workers (1 thread each)")
    print(f"{'N':>5} {'one by one s':>13} {'s/round':>8} {'pool s':>7} {'K=64 on ' + str(host_cores) + ' cores s':>20}")
    with StepPool(workers) as pool:
        step_schedules(*_round_inputs([bandit_schedule(d, 5, 0)] * 2), pool=pool)  # start the workers
        for n in n_values:
            base = [bandit_schedule(d, n, seed) for seed in range(K)]
            t0 = time.perf_counter()
            step_schedules(*_round_inputs(base))
            alone = time.perf_counter() - t0
            t0 = time.perf_counter()
            step_schedules(*_round_inputs(base), pool=pool)
            pooled = time.perf_counter() - t0
            per_round = alone / K
            print(f"{n:>5} {alone:13.2f} {per_round:8.3f} {pooled:7.2f} {math.ceil(64 / host_cores) * per_round:20.2f}")
    torch.set_num_threads(threads)
    if rates:
        rounds = bandit_rounds(10_000)
        window_s = math.ceil(64 / host_cores) * per_round
        for S, rate in sorted(rates.items()):
            train_s = 10_000 * 60 * 64 / rate
            share = rounds * window_s / (train_s + rounds * window_s)
            print(f"# K = 64, S = {S}: {rounds} rounds in 10,000 epochs, bandit share of the wall-clock "
                  f"{100 * share:.1f}% (at {rate:.0f} run-steps/s, N = {n_values[-1]} per round)")


def _round_inputs(base: list) -> tuple[list, int, list[float]]:
    """Fresh copies of the schedules, the epoch and the evidences that close their windows."""
    return [copy.deepcopy(b[0]) for b in base], base[0][1], [b[2] for b in base]


# ----- the trainers end to end ------------------------------------------------------------------
def bench_trainers(Ks: list[int], S_values: list[int], batch: int, epochs: int, n_train: int | None,
                   data_root: str | None, device: torch.device) -> None:
    """Run-steps/s of ``train`` (one run) and ``train_many`` (stacks of K) from their history's epoch
    seconds (a stacked row holds its share of the stack's epoch), after a warm-up epoch; the test
    evaluation is made negligible (100 points, 10 samples)."""
    print(f"\n# trainers end to end: {epochs} epochs, batch {batch}, n_train {n_train or 'all'} (first epoch: warm-up)")
    print(f"{'trainer':>10} {'S':>4} {'K':>5} {'run-steps/s':>12}")
    for S in S_values:
        base = RunConfig(n_train=n_train, n_test=100, eval_S=10, batch_size=batch, S=S, d=5, epochs=epochs)
        single = train(base, None, data_root=data_root, device=device, progress=False)
        rows = single.history[2:]
        n_batches = math.ceil(load_dataset(base.dataset, data_root, n_train=n_train, n_test=1).train.shape[0] / batch)
        print(f"{'train':>10} {S:>4} {1:>5} {n_batches * len(rows) / sum(r['seconds'] for r in rows):12.1f}", flush=True)
        for K in Ks:
            try:
                results = train_many([base.replace(seed=k) for k in range(1, K + 1)], [None] * K, data_root=data_root,
                                     device=device, progress=False)
            except torch.OutOfMemoryError:
                print(f"{'train_many':>10} {S:>4} {K:>5} {'out of memory':>12}")
                torch.cuda.empty_cache()
                continue
            wall = sum(r["seconds"] for res in results for r in res.history[2:])
            print(f"{'train_many':>10} {S:>4} {K:>5} {K * n_batches * (epochs - 1) / wall:12.1f}", flush=True)


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
    parser.add_argument("--steps-per-epoch", type=int, default=60, help="MNIST at batch 1000 (Omniglot: 25)")
    parser.add_argument("--eval-seconds", type=float, default=4.4, help="one IWAE-5000 evaluation of one run")
    parser.add_argument("--bandit-K", type=int, default=0, help="also time K GP-bandit rounds (0: no)")
    parser.add_argument("--bandit-d", type=int, default=15)
    parser.add_argument("--bandit-N", type=int, nargs="+", default=[40, 200])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--host-cores", type=int, default=16)
    parser.add_argument("--trainers", type=int, nargs="*", default=None, metavar="K",
                        help="also time train (one run) and train_many with stacks of these K, end to end")
    parser.add_argument("--trainer-epochs", type=int, default=3)
    parser.add_argument("--n-train", type=int, default=None, help="training subset for --trainers (default: all)")
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
    print(f"{'S':>4} {'K':>5} {'run-steps/s':>12} {'x K=1':>7} {'GPU model':>11}")
    best: dict[int, float] = {}
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
            best[S] = max(best.get(S, 0.0), rate)
            ratio = f"{rate / base:7.2f}" if base else "      -"
            print(f"{S:>4} {K:>5} {rate:12.1f} {ratio} {model_rate(K, S, args.batch, args.model):11.1f}", flush=True)
    print_hours(best, args.steps_per_epoch, args.eval_seconds)
    if args.trainers:
        bench_trainers(args.trainers, args.S, args.batch, args.trainer_epochs, args.n_train, args.data_root, device)
    if args.bandit_K:
        bench_bandits(args.bandit_K, args.bandit_d, args.bandit_N, args.workers, args.host_cores, best)


if __name__ == "__main__":
    main()
