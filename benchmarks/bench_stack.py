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
(default: the cost model's stacked rate over 10k test points, ``eval_pairs_per_s``; one run alone
took 4.4 s on one H200), scaled to the profile's ``eval_S``.

``--precision`` (fp32, tf32, bf16: ``RunConfig.precision``, :mod:`tvolib.precision`) and
``--compile`` (``train_many(..., compile=True)``: :func:`tvolib.stacked.epoch.compiled_loss`) apply to
the stacks timed here and to ``--trainers``; the timed step is the trainer's minibatch loop
(:func:`tvolib.stacked.epoch.minibatch_steps`). ``--eval-K K ...`` times one stacked IWAE
evaluation of K runs as the runner does it (fp32, one batched pass where memory allows).

``--bandit-K K`` adds the GP-bandit rounds of a stack: K schedules at d = ``--bandit-d`` with
``--bandit-N`` observations each, one round each, stepped one by one in this process (one thread)
and through a :class:`tvolib.stacked.StepPool` of ``--workers`` processes; then the estimated
bandit share of a K = 64 stack on a ``--host-cores`` host.

``--trainers K ...`` times the trainers end to end: ``train`` (one run) and ``train_many`` with stacks
of K runs (fp32, eager), from the epoch seconds of their histories.

Run: ``python benchmarks/bench_stack.py --device cuda [--K 1 8 32 128] [--S 10 50] [--precision bf16]
[--compile] [--bandit-K 8] [--trainers 8 32] [--eval-K 1 20]``; on a CPU use small sizes, e.g. ``--K 1 4 --S 10
--batch 100 --steps 3 --trainers 4 --n-train 1000``.
"""
from __future__ import annotations

import argparse
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
from tvolib.precision import PRECISIONS, precision_scope  # noqa: E402
from tvolib.stacked.epoch import compiled_loss, minibatch_steps  # noqa: E402
from tvolib.stacked.evaluate import evaluate_stack, max_elements_for  # noqa: E402
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
              precision: str, compile_loss: bool) -> float:
    """Steady run-steps per second of a stack of K runs: the trainer's minibatch loop
    (:func:`tvolib.stacked.epoch.minibatch_steps`, in ``precision``, compiled or not) over 2 warm-up
    and then ``steps`` timed minibatches of dynamically binarised images, K different ones per step."""
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
    loss_fn = compiled_loss() if compile_loss else stacked_loss
    data_gen = torch.Generator(device=device).manual_seed(0)

    def data(n_steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, images.shape[0], (K, n_steps * batch), device=device, generator=data_gen)
        x = torch.bernoulli(images[idx], generator=data_gen).to(torch.uint8)  # (K, n, 784), cast per minibatch
        return x, torch.arange(n_steps * batch, device=device).expand(K, -1)

    def run(x: torch.Tensor, perm: torch.Tensor) -> None:
        minibatch_steps(stack, opt, "tvo", x, perm, gens, S=S, batch_size=batch, points=points, precision=precision,
                        loss_fn=loss_fn)

    run(*data(2))  # warm-up (and compilation)
    x, perm = data(steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    run(x, perm)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return K * steps / (time.perf_counter() - t0)


def bench_evaluation(Ks: list[int], model: str, eval_S: int, n_points: int, images: torch.Tensor) -> None:
    """Seconds and (example, sample) pairs per second of one stacked IWAE evaluation (fp32) of K runs,
    as the runner evaluates a stack (:func:`evaluate_stack`, groups from ``max_elements_for``), next
    to the cost model's rate."""
    device = images.device
    x = torch.bernoulli(images[:n_points], generator=torch.Generator(device=device).manual_seed(0))
    print(f"\n# stacked evaluation: IWAE-{eval_S} on {n_points} points, fp32, {model}")
    print(f"{'K':>5} {'seconds':>8} {'pairs/s':>10} {'per run s':>10} {'model pairs/s':>14}")
    for K in Ks:
        singles = []
        for seed in range(1, K + 1):
            torch.manual_seed(seed)
            singles.append(build_model(model, train_mean=images.mean(0).cpu()))
        stack = StackedModel(singles).to(device)
        kwargs = dict(seeds=list(range(K)), S=eval_S, max_elements=max_elements_for(device))
        evaluate_stack(stack, x[:100], **kwargs)  # warm-up
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with precision_scope("fp32", device):
            evaluate_stack(stack, x, **kwargs)
        seconds = time.perf_counter() - t0
        pairs = K * n_points * eval_S / seconds
        model_pairs = GPU_COST_CONSTANTS["eval_pairs_per_s"][model]
        print(f"{K:>5} {seconds:8.2f} {pairs:10.3g} {seconds / K:10.3f} {model_pairs:14.3g}", flush=True)


# ----- hour estimates ---------------------------------------------------------------------------
FIG4_RUNS_PER_S = 2 * 4 * 4 * 5  # datasets x schedules x d x seeds, at each S in {10, 50}


def sweep_hours(rates: dict[int, float], epochs: int, steps_per_epoch: int, eval_every: int,
                eval_seconds: float) -> tuple[float, float]:
    """(training hours, evaluation hours) of Fig 4's sweep at the given run-steps/s per S."""
    train = sum(FIG4_RUNS_PER_S * epochs * steps_per_epoch / rates[S] for S in (10, 50))
    evaluations = 2 * FIG4_RUNS_PER_S * (epochs // eval_every + 1)
    return train / 3600, evaluations * eval_seconds / 3600


def model_rate(K: int, S: int, batch: int, model: str, precision: str = "fp32") -> float:
    """Run-steps/s of a K-run stack predicted by the runner's cost model (``GPU_COST_CONSTANTS``)."""
    c = GPU_COST_CONSTANTS
    rate = c["train_pairs_per_s"][model] * c["precision_speedup"][precision]
    return K / (c["step_overhead_s"] + K * batch * S / rate)


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
    print("# evaluation costed stacked (the cost model's rate unless --eval-seconds); the cost model column: fp32")


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
                   data_root: str | None, device: torch.device, precision: str = "fp32", compile: bool = False
                   ) -> None:
    """Run-steps/s of ``train`` (one run) and ``train_many`` (stacks of K) from their history's epoch
    seconds (a stacked row holds its share of the stack's epoch), after a warm-up epoch; the test
    evaluation is made negligible (100 points, 10 samples)."""
    print(f"\n# trainers end to end: {epochs} epochs, batch {batch}, n_train {n_train or 'all'} (first epoch: warm-up), "
          f"precision {precision}, compile={compile}")
    print(f"{'trainer':>10} {'S':>4} {'K':>5} {'run-steps/s':>12} {'GPU model':>10}")
    for S in S_values:
        base = RunConfig(n_train=n_train, n_test=100, eval_S=10, batch_size=batch, S=S, d=5, epochs=epochs,
                         precision=precision)
        single = train(base, None, data_root=data_root, device=device, progress=False, compile=compile)
        rows = single.history[2:]
        n_batches = math.ceil(load_dataset(base.dataset, data_root, n_train=n_train, n_test=1).train.shape[0] / batch)
        print(f"{'train':>10} {S:>4} {1:>5} {n_batches * len(rows) / sum(r['seconds'] for r in rows):12.1f} "
              f"{model_rate(1, S, batch, 'vae', precision):10.1f}", flush=True)
        for K in Ks:
            try:
                results = train_many([base.replace(seed=k) for k in range(1, K + 1)], [None] * K, data_root=data_root,
                                     device=device, progress=False, compile=compile)
            except torch.OutOfMemoryError:
                print(f"{'train_many':>10} {S:>4} {K:>5} {'out of memory':>12}")
                torch.cuda.empty_cache()
                continue
            wall = sum(r["seconds"] for res in results for r in res.history[2:])
            print(f"{'train_many':>10} {S:>4} {K:>5} {K * n_batches * (epochs - 1) / wall:12.1f} "
                  f"{model_rate(K, S, batch, 'vae', precision):10.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", default="vae", choices=["vae", "sbn"])
    parser.add_argument("--K", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--S", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS,
                        help="training arithmetic (RunConfig.precision): fp32, tf32 (CUDA), bf16 autocast")
    parser.add_argument("--compile", action="store_true", help="torch.compile the stacked forward pass")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--steps-per-epoch", type=int, default=60, help="MNIST at batch 1000 (Omniglot: 25)")
    parser.add_argument("--eval-seconds", type=float, default=None,
                        help="one IWAE-5000 evaluation of one run on 10k points (default: the cost model's stacked rate)")
    parser.add_argument("--eval-K", type=int, nargs="*", default=None, metavar="K",
                        help="also time one stacked IWAE evaluation of K runs")
    parser.add_argument("--eval-S", type=int, default=1000)
    parser.add_argument("--eval-points", type=int, default=10_000)
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
    device = torch.device(args.device)
    images = training_images(args.data_root, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"# {name}, torch {torch.__version__}, model {args.model}, batch {args.batch}, precision={args.precision}, "
          f"compile={args.compile}")
    print(f"{'S':>4} {'K':>5} {'run-steps/s':>12} {'x K=1':>7} {'GPU model':>11}")
    best: dict[int, float] = {}
    for S in args.S:
        base = None
        for K in args.K:
            try:
                rate = bench_one(args.model, K, S, args.batch, args.steps, images, precision=args.precision,
                                 compile_loss=args.compile)
            except torch.OutOfMemoryError:
                print(f"{S:>4} {K:>5} {'out of memory':>12}")
                torch.cuda.empty_cache()
                continue
            base = rate if K == 1 else base
            best[S] = max(best.get(S, 0.0), rate)
            ratio = f"{rate / base:7.2f}" if base else "      -"
            predicted = model_rate(K, S, args.batch, args.model, args.precision)
            print(f"{S:>4} {K:>5} {rate:12.1f} {ratio} {predicted:11.1f}", flush=True)
    eval_seconds = args.eval_seconds or 10_000 * 5000 / GPU_COST_CONSTANTS["eval_pairs_per_s"][args.model]
    print_hours(best, args.steps_per_epoch, eval_seconds)
    if args.eval_K:
        bench_evaluation(args.eval_K, args.model, args.eval_S, args.eval_points, images)
    if args.trainers:
        bench_trainers(args.trainers, args.S, args.batch, args.trainer_epochs, args.n_train, args.data_root, device,
                       args.precision, args.compile)
    if args.bandit_K:
        bench_bandits(args.bandit_K, args.bandit_d, args.bandit_N, args.workers, args.host_cores, best)


if __name__ == "__main__":
    main()
