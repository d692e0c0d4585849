"""The cost model behind the printed plan: rough seconds per run or stack, and the makespan of a pool.

:func:`estimate_seconds` is deliberately simple: it prices a run from its config (examples x
samples x epochs, evaluations, bandit rounds, moments re-estimates) with the constants below, so
that ``python -m tvolib status``/``run`` can say how long a sweep will take before it starts.
:func:`estimate_stack_seconds` prices a stack of runs on one GPU (:data:`GPU_COST_CONSTANTS`) and
:func:`estimate_gpu_seconds` a whole sweep on one GPU machine.

Example:
    >>> estimate_wall_seconds([3.0, 2.0, 2.0], workers=2)
    4.0
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from tvolib.training.schedule import BANDIT_SCHEDULES, VARIABLE_D_SCHEDULES

__all__ = [
    "COST_CONSTANTS",
    "DATASET_SIZES",
    "MOMENTS_EXAMPLES",
    "GPU_COST_CONSTANTS",
    "bandit_rounds",
    "estimate_seconds",
    "estimate_wall_seconds",
    "estimate_stack_seconds",
    "estimate_gpu_seconds",
    "evaluation_count",
]


#: Full split sizes (train, test) used when a config asks for the whole dataset (n_train=None).
DATASET_SIZES: dict[str, tuple[int, int]] = {
    "mnist": (60_000, 10_000),
    "fashion_mnist": (60_000, 10_000),
    "binarized_mnist": (50_000, 10_000),
    "omniglot": (23_000, 8_070),
}

#: Constants of :func:`estimate_seconds` (single CPU thread per run, two runs at a time on the
#: 2-core development machine; calibrated on quick-profile VAE/MNIST runs, batch 50: ~1.8e-5 s per
#: training (example, sample) pair and ~9e-6 s per evaluation pair; rounded up):
#: - ``startup_s``: per run, worker start, imports, data loading and model build;
#: - ``train_s_per_sample[model]``: one forward+backward of one (example, importance sample) pair;
#: - ``eval_s_per_sample[model]``: one forward of one (example, sample) pair in IWAE evaluation;
#: - ``bandit_round_s`` + ``bandit_round_s_per_d * d``: one GP fit + acquisition (Algorithm 1);
#: - ``adaptive_round_factor``: a round of the bandit that chooses d (its ``d`` is ``d_max``) against
#:   a fixed-``d_max`` round (measured on the test bed: 0.25 s against 0.13 s at d_max = 10);
#: - ``bandit_early_factor``: extra rounds from early updates (measured: 29 rounds where windows
#:   2, 3, 4, ... growing every 10 rounds give 27.5 in 80 epochs);
#: - ``moments_s_per_sample``: moments-schedule re-estimation, averaged per epoch, per (example,
#:   sample) of the at most ``MOMENTS_EXAMPLES`` training examples the trainer hands it (measured:
#:   7.2 s over 120 epochs with 1000 examples, S = 10);
#: - ``bias_optimal_s_per_sample``: one bias-optimal update (its log weights, the integrand on its
#:   grid, the dynamic programme), per (example, sample) (measured: 0.14 to 0.21 s with 1000 examples, S = 10);
#: - ``pcfg_step_s`` + ``pcfg_step_s_per_sample * S``: one PCFG minibatch step (Appendix D.1; its
#:   cost is the Python loop over derivation steps, nearly independent of the batch size; measured
#:   ~0.12 + 0.02 S s at batch 25 on a loaded 2-core CPU, 2-3x for wake-wake and REINFORCE).
COST_CONSTANTS: dict[str, Any] = {
    "startup_s": 2.0,
    "train_s_per_sample": {"vae": 2.0e-5, "sbn": 1.2e-5},
    "eval_s_per_sample": {"vae": 1.0e-5, "sbn": 8.0e-6},
    "bandit_round_s": 0.15,
    "bandit_round_s_per_d": 0.02,
    "bandit_early_factor": 1.05,
    "adaptive_round_factor": 2.0,
    "moments_s_per_sample": 6.0e-6,
    "bias_optimal_s_per_sample": 1.7e-5,
    "pcfg_step_s": 0.12,
    "pcfg_step_s_per_sample": 0.02,
}


#: Constants of :func:`estimate_stack_seconds`: one GPU, eager mode, the paper's networks, runs trained
#: by ``train_many`` (the runner's stacks). Calibrated on one NVIDIA H200 (torch 2.11, batch 1000,
#: fp32; ``benchmarks/README.md``): a step of a K-run stack costs ``step_overhead_s + K * B * S /
#: train_pairs_per_s``, fitted to the trainers end to end (``train``: 194-207 run-steps/s at S = 10
#: and 149-174 at S = 50; ``train_many`` with K = 32: 1,513-1,534 and 401-403), which it reproduces
#: to 7% (210, 150, 1,624, 393); the bare stacked loop of ``bench_stack.py`` is 5-10% faster
#: (2,093 / 458 at K = 128, model 1,940 / 409). Evaluation is one batched IWAE pass over a stack's
#: runs (:func:`tvolib.stacked.evaluate_stack`); its rate is what is left of the measured Fig 4
#: slice at the ``gpu`` profile (20 runs, full MNIST, 100 epochs, S = 10, IWAE-1000 at 0, 25, 50,
#: 75, 100: 138 s in all) after startup, training and bandit rounds: 36 s for 1e9 (example, sample)
#: pairs. The previous constants (unstacked evaluation at 1.1e7 pairs/s, 2.5e7 training pairs/s,
#: 3.5 ms per step) priced that slice at 3.4 min.
#: - ``train_pairs_per_s[model]``: (example, sample) pairs per second of a saturated stack in fp32.
#:   The SBN's value is the VAE's scaled by their CPU cost ratio (not measured on a GPU);
#: - ``precision_speedup[precision]``: factor on ``train_pairs_per_s`` for ``RunConfig.precision``
#:   (bf16: TF32 + bf16 autocast measured 1.25-1.29x at K = 128 on the H200; tf32: TF32 alone measured
#:   1.23x at K = 32 and 128 on an H100, where bf16 gave 1.21x);
#: - ``eval_pairs_per_s[model]``: (example, sample) pairs per second of a stack's batched IWAE
#:   evaluation (always fp32); one run alone measured 1.1e7 (IWAE-5000 on 10k points: 4.2-4.6 s);
#: - ``startup_s``: per job (process, CUDA context, data to the device; not measured separately);
#: - ``bandit_round_s``: one GP round on one host core; a window's rounds of a stack run
#:   ``host_workers`` at a time (:class:`tvolib.stacked.StepPool`: 0.55-0.77 s for the 64 rounds of
#:   a K = 64 stack at d = 15 on 16 workers, i.e. 0.14-0.19 s a round);
#: - ``host_workers``: host processes for bandit rounds and for runs that cannot be stacked (the
#:   PCFG), which train on the CPU beside the stacks.
GPU_COST_CONSTANTS: dict[str, Any] = {
    "step_overhead_s": 4.3e-3,
    "train_pairs_per_s": {"vae": 2.1e7, "sbn": 3.4e7},
    "precision_speedup": {"fp32": 1.0, "tf32": 1.2, "bf16": 1.25},
    "eval_pairs_per_s": {"vae": 2.8e7, "sbn": 4.6e7},
    "startup_s": 15.0,
    "bandit_round_s": 0.2,
    "host_workers": 15,
}


#: Training examples the trainer gives the moments schedule per re-estimate (tvolib.training.images).
MOMENTS_EXAMPLES = 1000


def _sizes(config: Any) -> tuple[int, int]:
    full = DATASET_SIZES.get(getattr(config, "dataset", ""), (60_000, 10_000))
    n_train = getattr(config, "n_train", None) or full[0]
    n_test = getattr(config, "n_test", None) or full[1]
    return int(n_train), int(n_test)


def evaluation_count(config: Any) -> int:
    """Test evaluations of a run from scratch: epoch 0, every ``eval_every`` epochs and the last epoch
    (once when it is also a multiple of ``eval_every``), as :func:`tvolib.training.loop.evaluates_after`."""
    epochs = int(getattr(config, "epochs", 0) or 0)
    every = int(getattr(config, "eval_every", 0) or 0)
    if epochs == 0:
        return 1
    return 1 + (epochs // every + (1 if epochs % every else 0) if every else 1)


def bandit_rounds(epochs: int, window: int = 6, growth_every: int = 10) -> int:
    """Bandit rounds in ``epochs`` epochs when the window starts at ``window`` epochs and grows by
    one every ``growth_every`` rounds (Section 5), without early updates."""
    rounds, used = 0, 0
    while used < epochs:
        used += window + rounds // growth_every
        rounds += 1
    return rounds


def estimate_seconds(config: Any, constants: dict[str, Any] | None = None) -> float:
    """Rough single-thread CPU seconds one run takes (for the printed plan, not a promise).

    For a TVO run (``config.kind == "tvo"``):
    ``startup + epochs * n_train * S * c_train + n_evals * n_test * eval_S * c_eval
    + bandit rounds * (c_round + c_d * d) + epochs * min(n_train, 1000) * S * c_moments``,
    with ``n_evals`` from :func:`evaluation_count` (epoch 0, every ``eval_every``, the end); a
    round of the bandit that chooses ``d`` costs ``adaptive_round_factor`` rounds at ``d = d_max``.
    A PCFG run costs ``startup + epochs * ceil(n_train / batch_size) * (pcfg_step_s + S * pcfg_step_s_per_sample)``.
    """
    c = COST_CONSTANTS if constants is None else {**COST_CONSTANTS, **constants}
    kind = getattr(config, "kind", "tvo")
    epochs = int(getattr(config, "epochs", 0) or 0)
    S = int(getattr(config, "S", 1) or 1)
    if kind != "tvo":
        steps = -(-int(getattr(config, "n_train", 1)) // int(getattr(config, "batch_size", 1)))
        return c["startup_s"] + epochs * steps * (c["pcfg_step_s"] + S * c["pcfg_step_s_per_sample"])
    model = getattr(config, "model", "vae")
    n_train, n_test = _sizes(config)
    train = epochs * n_train * S * c["train_s_per_sample"].get(model, 3.0e-6)
    n_evals = evaluation_count(config)
    eval_S = int(getattr(config, "eval_S", 0) or 0)
    evaluate = n_evals * n_test * eval_S * c["eval_s_per_sample"].get(model, 1.0e-6)
    schedule = str(getattr(config, "schedule", ""))
    d = int(getattr(config, "d", 2) or 2)
    extra = 0.0
    if schedule in BANDIT_SCHEDULES:
        window = dict(getattr(config, "schedule_options", ()) or ()).get("window", 6)
        rounds = bandit_rounds(epochs, int(window)) * c["bandit_early_factor"]
        factor = c["adaptive_round_factor"] if schedule in VARIABLE_D_SCHEDULES else 1.0
        extra = rounds * factor * (c["bandit_round_s"] + c["bandit_round_s_per_d"] * d)
    elif schedule.startswith("moment"):
        extra = epochs * min(n_train, MOMENTS_EXAMPLES) * S * c["moments_s_per_sample"]
    elif schedule == "bias_optimal":  # an update every ``update_every`` epochs (default 1)
        updates = epochs // int(dict(getattr(config, "schedule_options", ()) or ()).get("update_every", 1))
        extra = updates * min(n_train, MOMENTS_EXAMPLES) * S * c["bias_optimal_s_per_sample"]
    return float(c["startup_s"] + train + evaluate + extra)


def estimate_wall_seconds(costs: Iterable[float], workers: int) -> float:
    """Makespan of running jobs with the given costs on ``workers`` parallel workers.

    Longest-processing-time-first greedy assignment (what a pool fed largest-first achieves).
    """
    loads = [0.0] * max(1, int(workers))
    for cost in sorted(costs, reverse=True):
        i = loads.index(min(loads))
        loads[i] += cost
    return max(loads)


def estimate_stack_seconds(configs: Sequence[Any], constants: dict[str, Any] | None = None) -> float:
    """Rough seconds of one stack (runs of one stack key, trained together) on one GPU.

    ``startup + steps * (step_overhead + K * B * S / (train_pairs_per_s * precision_speedup))
    + n_evals * K * n_test * eval_S / eval_pairs_per_s + rounds * ceil(K_bandit / host_workers) * round_s``,
    with ``steps = epochs * ceil(n_train / B)``, ``n_evals`` from :func:`evaluation_count` (each one
    batched IWAE pass over the stack's runs, in fp32) and the bandit's rounds as in
    :func:`estimate_seconds`. One config alone is a stack of one.
    """
    c = GPU_COST_CONSTANTS if constants is None else {**GPU_COST_CONSTANTS, **constants}
    first, K = configs[0], len(configs)
    model = getattr(first, "model", "vae")
    n_train, n_test = _sizes(first)
    B, S, epochs = int(first.batch_size), int(first.S), int(first.epochs)
    steps = epochs * -(-n_train // B)
    precision = getattr(first, "precision", "fp32")
    rate = c["train_pairs_per_s"].get(model, 2.1e7) * c["precision_speedup"].get(precision, 1.0)
    train = steps * (c["step_overhead_s"] + K * B * S / rate)
    evaluate = evaluation_count(first) * K * n_test * int(first.eval_S) / c["eval_pairs_per_s"].get(model, 2.8e7)
    bandits = [cfg for cfg in configs if cfg.schedule in BANDIT_SCHEDULES]
    rounds = 0.0
    if bandits:
        window = dict(getattr(bandits[0], "schedule_options", ()) or ()).get("window", 6)
        rounds = bandit_rounds(epochs, int(window)) * COST_CONSTANTS["bandit_early_factor"]
    bandit = rounds * -(-len(bandits) // int(c["host_workers"])) * c["bandit_round_s"]
    return float(c["startup_s"] + train + evaluate + bandit)


def estimate_gpu_seconds(jobs: Sequence[Sequence[Any]], constants: dict[str, Any] | None = None) -> dict[str, float]:
    """Rough wall seconds of a sweep on one GPU machine: its stacks one after the other on the GPU,
    beside them the runs that cannot be stacked on ``host_workers`` CPU processes.

    Args:
        jobs: the sweep's jobs (:func:`tvolib.runs.stacks.stack_jobs`): lists of configs; a job of
            one image-model config is a stack of one, a PCFG run is priced by :func:`estimate_seconds`.

    Returns:
        ``gpu_seconds`` (the stacks), ``cpu_seconds`` (makespan of the CPU-only runs) and
        ``wall_seconds`` (the larger of the two).
    """
    c = GPU_COST_CONSTANTS if constants is None else {**GPU_COST_CONSTANTS, **constants}
    gpu, cpu = 0.0, []
    for job in jobs:
        if getattr(job[0], "kind", "tvo") == "tvo":
            gpu += estimate_stack_seconds(job, constants)
        else:
            cpu.extend(estimate_seconds(config) for config in job)
    host = estimate_wall_seconds(cpu, int(c["host_workers"])) if cpu else 0.0
    return {"gpu_seconds": gpu, "cpu_seconds": host, "wall_seconds": max(gpu, host)}
