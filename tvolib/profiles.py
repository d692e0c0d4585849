"""Experiment scales (``smoke``, ``quick``, ``paper``) and a cost model for planning sweeps.

A :class:`Profile` fixes every knob the figure sweeps (:mod:`tvolib.sweeps`) need: subset sizes,
epochs, batch size, the grids of ``S`` and ``d``, seeds, evaluation settings, and the sizes of the
wall-clock grid (Appendix D.3) and the permutation-table budgets (Appendix D.4). ``paper`` is the
paper's setup (Section 5 "Experimental Setup", Appendix A); ``quick`` is the default of
``make figures`` (the whole figure set in <= 45 minutes on 2 CPU cores with a cold cache);
``smoke`` runs every notebook end to end in about two minutes for CI.

:func:`estimate_seconds` is a deliberately simple cost model used only to print a plan before a
sweep starts; its constants are single-thread CPU guesses documented below, to be calibrated from
measured runs (the lead owns the calibration).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = [
    "Profile",
    "PROFILES",
    "get_profile",
    "estimate_seconds",
    "estimate_wall_seconds",
    "bandit_rounds",
    "DATASET_SIZES",
    "COST_CONSTANTS",
]


@dataclass(frozen=True)
class Profile:
    """The scale of every figure's sweep. ``None`` subset sizes mean the full dataset."""

    name: str
    #: Training / test examples per dataset (a seeded random subset; ``None`` = full split).
    n_train: int | None
    n_test: int | None
    #: Training epochs of every VAE/SBN run (the wall-clock table has its own, below).
    epochs: int
    batch_size: int
    lr: float
    #: Grids compared in Figs 4, 5, 7, 8 (paper: S in {10, 50}, d in {2, 5, 10, 15}).
    S_values: tuple[int, ...]
    d_values: tuple[int, ...]
    #: Seeds of every run where schedules are compared (paper: 5).
    seeds: tuple[int, ...]
    #: Test log p(x) by IWAE with ``eval_S`` samples, every ``eval_every`` epochs (Appendix A).
    eval_S: int
    eval_every: int
    #: Initial bandit window w in epochs for the GP-bandit and random schedules (None: the
    #: schedule's default, the paper's w = 6 growing by 1 every 10 rounds, Section 5). Short
    #: profiles need a shorter window for the GP to get enough rounds.
    bandit_window: int | None
    #: Epochs before the bandit's first window (GP-bandit and random schedules): the first epochs
    #: of an untrained model change the evidence by hundreds of nats whatever the arm, a reward that
    #: would dominate the GP. The authors' code waits 20 epochs; the paper text does not say.
    bandit_burn_in: int
    #: Fig 2: epochs at which the GP reward surface is drawn (paper: 2k, 3k, 10k of 10k).
    reward_surface_epochs: tuple[int, ...]
    #: Fig 9: values of d whose training curves are drawn (paper: 5 and 15, S = 10).
    curves_d_values: tuple[int, ...]
    #: Wall-clock table (Appendix D.3): VAE on Omniglot, S = 10; the bandit runs once per d,
    #: the log schedule is grid-searched over ``wallclock_grid_size`` values of beta_1 spaced
    #: linearly in ``wallclock_beta1_range`` for every d.
    wallclock_epochs: int
    wallclock_d_values: tuple[int, ...]
    wallclock_grid_size: int
    wallclock_beta1_range: tuple[float, float]
    #: Permutation table (Appendix D.4): test log p(x) after each budget (epochs of the same runs,
    #: read from the evaluation history, so every budget must be a multiple of ``eval_every``).
    permutation_budgets: tuple[int, ...]
    permutation_d_values: tuple[int, ...]
    permutation_S_values: tuple[int, ...]
    #: How this profile departs from the paper (shown in captions / the plan).
    departures: str = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the bad field, its value and what is accepted."""
        def bad(field: str, accepted: str) -> ValueError:
            return ValueError(
                f"profile {self.name!r}: field {field}={getattr(self, field)!r} is invalid; expected {accepted}"
            )

        for f in ("n_train", "n_test"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise bad(f, "a positive int or None (full dataset)")
        for f in ("epochs", "batch_size", "eval_S", "eval_every", "wallclock_epochs", "wallclock_grid_size"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise bad(f, "a positive int")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise bad("lr", "a positive finite float")
        if self.bandit_window is not None and (not isinstance(self.bandit_window, int) or self.bandit_window < 1):
            raise bad("bandit_window", "None (the paper's w = 6) or a positive int")
        if not isinstance(self.bandit_burn_in, int) or self.bandit_burn_in < 0:
            raise bad("bandit_burn_in", "an int >= 0 (epochs before the bandit's first window)")
        for f in ("S_values", "seeds", "permutation_S_values"):
            v = getattr(self, f)
            if not v or any(not isinstance(x, int) or x < (1 if f != "seeds" else 0) for x in v):
                raise bad(f, "a non-empty tuple of positive ints (seeds: ints >= 0)")
        for f in ("d_values", "curves_d_values", "wallclock_d_values", "permutation_d_values"):
            v = getattr(self, f)
            if not v or any(not isinstance(x, int) or x < 2 for x in v):
                raise bad(f, "a non-empty tuple of ints >= 2 (d counts beta_0 = 0 and >= 1 interior point)")
        lo, hi = self.wallclock_beta1_range
        if not 0 < lo < hi < 1:
            raise bad("wallclock_beta1_range", "(lo, hi) with 0 < lo < hi < 1")
        for f in ("reward_surface_epochs", "permutation_budgets"):
            v = getattr(self, f)
            if not v or any(not isinstance(x, int) or not 0 < x <= self.epochs for x in v):
                raise bad(f, f"a non-empty tuple of epochs in 1..{self.epochs}")
        off = [b for b in self.permutation_budgets if b % self.eval_every and b != self.epochs]
        if off:
            raise bad("permutation_budgets", f"multiples of eval_every={self.eval_every} (test log p(x) is only "
                      f"recorded there); {off} are not")

    @property
    def wallclock_beta1_grid(self) -> tuple[float, ...]:
        """The beta_1 grid of the wall-clock table (linear spacing, as in Masrani et al. 2019 Sec. 7.2)."""
        lo, hi = self.wallclock_beta1_range
        n = self.wallclock_grid_size
        if n == 1:
            return (lo,)
        return tuple(round(lo + (hi - lo) * i / (n - 1), 10) for i in range(n))

    def describe(self) -> str:
        """One paragraph stating the scale (for figure captions and the printed plan)."""
        sub = "full datasets" if self.n_train is None else f"{self.n_train} train / {self.n_test} test examples"

        def braces(values: tuple[int, ...]) -> str:
            return "{" + ", ".join(str(v) for v in sorted(set(values))) + "}"

        text = (
            f"profile '{self.name}': {sub}, {self.epochs} epochs, batch {self.batch_size}, Adam lr {self.lr:g}, "
            f"S in {braces(self.S_values)}, d in {braces(self.d_values)}, {len(self.seeds)} seed(s), "
            f"test log p(x) by IWAE-{self.eval_S} every {self.eval_every} epochs; bandit window "
            f"{'w = 6 (+1 every 10 rounds)' if self.bandit_window is None else f'{self.bandit_window} epochs (+1 every 10 rounds)'} "
            f"after a burn-in of {self.bandit_burn_in} epochs; wall-clock table: "
            f"{self.wallclock_epochs} epochs, bandit for d in {braces(self.wallclock_d_values)} vs log schedule "
            f"with {self.wallclock_grid_size} beta_1 in [{self.wallclock_beta1_range[0]:g}, "
            f"{self.wallclock_beta1_range[1]:g}] per d; permutation table budgets {self.permutation_budgets} epochs; "
            f"PCFG (Fig 6) scale set by tvolib.pcfg.pcfg_sweep."
        )
        return text + (f" Departures from the paper: {self.departures}" if self.departures else "")

    def replace(self, **changes: Any) -> "Profile":
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)


_PAPER = Profile(
    name="paper",
    n_train=None,
    n_test=None,
    epochs=10_000,
    batch_size=1000,
    lr=1e-3,
    S_values=(10, 50),
    d_values=(2, 5, 10, 15),
    seeds=(0, 1, 2, 3, 4),
    eval_S=5000,
    eval_every=200,
    bandit_window=None,
    bandit_burn_in=20,
    reward_surface_epochs=(2000, 3000, 10_000),
    curves_d_values=(5, 15),
    wallclock_epochs=5000,
    wallclock_d_values=(2, 3, 4, 5, 6),
    wallclock_grid_size=20,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(1000, 2000, 5000, 10_000),
    permutation_d_values=(5, 10, 15),
    permutation_S_values=(10, 50),
    departures=(
        "none intended (the paper's Section 5 and Appendices A, D; the bandit's 20-epoch burn-in, which the "
        "paper does not state, is the authors' code's); meant for a GPU machine or a cluster."
    ),
)

_QUICK = Profile(
    name="quick",
    n_train=1000,
    n_test=300,
    epochs=60,
    batch_size=50,
    lr=1e-3,
    S_values=(10,),
    d_values=(2, 5, 10),
    seeds=(0, 1, 2),
    eval_S=300,
    eval_every=20,
    bandit_window=3,
    bandit_burn_in=6,
    reward_surface_epochs=(12, 18, 60),
    curves_d_values=(5, 10),
    wallclock_epochs=60,
    wallclock_d_values=(2, 3, 4),
    wallclock_grid_size=3,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(20, 40, 60),
    permutation_d_values=(5, 10),
    permutation_S_values=(10,),
    departures=(
        "seeded subsets of 1000 train / 300 test examples instead of the full datasets; 60 epochs of batch 50 "
        "(1200 Adam steps) instead of 10,000 epochs of batch 1000; S = 10 only (paper: 10 and 50); d in "
        "{2, 5, 10} (paper adds 15); 3 seeds (paper: 5); IWAE-300 test evaluation (paper: 5000); bandit "
        "window 3 epochs instead of 6 (so that the GP sees ~20 rounds), after a 6-epoch burn-in (the authors' "
        "code: 20 of 10,000); Fig 2's stages at epochs 12/18/60 "
        "mirror the paper's 2k/3k/10k of 10k; Fig 9 uses d in {5, 10} (paper: 5, 15); wall-clock table "
        "scaled down to d in {2, 3, 4} with a 3-point beta_1 grid (paper: d = 2..6, 20 points, 100 runs, "
        "5000 epochs); permutation table at budgets 20/40/60 epochs, d in {5, 10}, S = 10 (paper: "
        "1k/2k/5k/10k epochs, d in {5, 10, 15}, S in {10, 50})."
    ),
)

_SMOKE = Profile(
    name="smoke",
    n_train=200,
    n_test=100,
    epochs=6,
    batch_size=100,
    lr=1e-3,
    S_values=(5,),
    d_values=(2, 5),
    seeds=(0,),
    eval_S=50,
    eval_every=3,
    bandit_window=1,
    bandit_burn_in=0,
    reward_surface_epochs=(3, 6),
    curves_d_values=(5,),
    wallclock_epochs=6,
    wallclock_d_values=(2, 3),
    wallclock_grid_size=2,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(3, 6),
    permutation_d_values=(5,),
    permutation_S_values=(5,),
    departures=(
        "a plumbing check only (CI): 200 train / 100 test examples, 6 epochs, S = 5, d in {2, 5}, one seed, "
        "IWAE-50 evaluation, bandit window 1 epoch; the numbers mean nothing."
    ),
)

#: The profiles by name.
PROFILES: dict[str, Profile] = {p.name: p for p in (_SMOKE, _QUICK, _PAPER)}


def get_profile(name: "str | Profile") -> Profile:
    """The profile called ``name`` (a :class:`Profile` is returned unchanged).

    Raises ``ValueError`` listing the accepted names for an unknown one.
    """
    if isinstance(name, Profile):
        return name
    if not isinstance(name, str):
        raise TypeError(f"profile must be a name (str) or a Profile, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; accepted profiles: {', '.join(PROFILES)}")
    return PROFILES[key]


# --------------------------------------------------------------------------------------------
# Cost model
# --------------------------------------------------------------------------------------------

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
#: - ``bandit_early_factor``: extra rounds from early updates (measured: 29 rounds where windows
#:   2, 3, 4, ... growing every 10 rounds give 27.5 in 80 epochs);
#: - ``moments_s_per_sample``: moments-schedule re-estimation, averaged per epoch, per (example,
#:   sample) of the at most ``MOMENTS_EXAMPLES`` training examples the trainer hands it (measured:
#:   7.2 s over 120 epochs with 1000 examples, S = 10);
#: - ``pcfg_epoch_s`` + ``pcfg_epoch_s_per_sample * S``: one PCFG epoch (Appendix D.1; measured
#:   ~0.1 + 0.03 S s for TVO and wake-sleep, 2-3x for wake-wake and REINFORCE).
COST_CONSTANTS: dict[str, Any] = {
    "startup_s": 2.0,
    "train_s_per_sample": {"vae": 2.0e-5, "sbn": 1.2e-5},
    "eval_s_per_sample": {"vae": 1.0e-5, "sbn": 8.0e-6},
    "bandit_round_s": 0.15,
    "bandit_round_s_per_d": 0.02,
    "bandit_early_factor": 1.05,
    "moments_s_per_sample": 6.0e-6,
    "pcfg_epoch_s": 0.1,
    "pcfg_epoch_s_per_sample": 0.03,
}


#: Training examples the trainer gives the moments schedule per re-estimate (tvolib.train).
MOMENTS_EXAMPLES = 1000


def _sizes(config: Any) -> tuple[int, int]:
    full = DATASET_SIZES.get(getattr(config, "dataset", ""), (60_000, 10_000))
    n_train = getattr(config, "n_train", None) or full[0]
    n_test = getattr(config, "n_test", None) or full[1]
    return int(n_train), int(n_test)


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
    with ``n_evals = epochs // eval_every + 2`` (epoch 0, every ``eval_every``, the end).
    A PCFG run costs ``startup + epochs * (pcfg_epoch_s + S * pcfg_epoch_s_per_sample)``.
    """
    c = COST_CONSTANTS if constants is None else {**COST_CONSTANTS, **constants}
    kind = getattr(config, "kind", "tvo")
    epochs = int(getattr(config, "epochs", 0) or 0)
    S = int(getattr(config, "S", 1) or 1)
    if kind != "tvo":
        return c["startup_s"] + epochs * (c["pcfg_epoch_s"] + S * c["pcfg_epoch_s_per_sample"])
    model = getattr(config, "model", "vae")
    n_train, n_test = _sizes(config)
    train = epochs * n_train * S * c["train_s_per_sample"].get(model, 3.0e-6)
    eval_every = int(getattr(config, "eval_every", 0) or 0) or max(epochs, 1)
    n_evals = epochs // eval_every + 2
    eval_S = int(getattr(config, "eval_S", 0) or 0)
    evaluate = n_evals * n_test * eval_S * c["eval_s_per_sample"].get(model, 1.0e-6)
    schedule = str(getattr(config, "schedule", ""))
    d = int(getattr(config, "d", 2) or 2)
    extra = 0.0
    if schedule.startswith("gp") or schedule.startswith("random") or "bandit" in schedule:
        window = dict(getattr(config, "schedule_options", ()) or ()).get("window", 6)
        rounds = bandit_rounds(epochs, int(window)) * c["bandit_early_factor"]
        extra = rounds * (c["bandit_round_s"] + c["bandit_round_s_per_d"] * d)
    elif schedule.startswith("moment"):
        extra = epochs * min(n_train, MOMENTS_EXAMPLES) * S * c["moments_s_per_sample"]
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
