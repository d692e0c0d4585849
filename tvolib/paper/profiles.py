"""Experiment scales (``smoke``, ``quick``, ``gpu``, ``paper``): every knob of every figure's sweep.

A :class:`Profile` fixes what :mod:`tvolib.paper.sweeps` needs: subset sizes, epochs, batch size,
the grids of ``S`` and ``d``, seeds, evaluation settings, the wall-clock grid (Appendix D.3), the
permutation-table budgets (Appendix D.4) and the PCFG's scale (:class:`PCFGScale`, Appendix D.1).
``paper`` is the paper's setup (Section 5 "Experimental Setup", Appendices A and D); ``quick`` is
the default of ``make figures`` (a laptop CPU); ``gpu`` is every figure on one GPU in a few hours
(runs stacked, ``tvolib.runs.stacks``); ``smoke`` runs every notebook end to end for CI.

``python -m tvolib.paper.profiles NAME`` prints a profile's description, or an error listing the
accepted names (the Makefile's check before it starts any notebook).

Example:
    >>> get_profile("quick").S_values
    (10,)
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Profile", "PCFGScale", "BudgetScale", "PROFILES", "DEFAULT_PROFILE", "get_profile", "main"]

#: The profile of ``get_profile(None)`` when ``$TVOLIB_PROFILE`` is unset.
DEFAULT_PROFILE = "quick"


def _positive_ints(values: Sequence[Any], low: int = 1) -> bool:
    return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values)


@dataclass(frozen=True)
class PCFGScale:
    """The scale of the PCFG sweep (Fig 6): the :class:`tvolib.pcfg.PCFGConfig` fields that a
    profile sets, the S values and seeds, and the fraction of the last epochs averaged.

    The paper (Appendix D.1): 2000 epochs of the 20 training sentences, 20 seeds, S in
    {2, 5, 10, 20}, the median over seeds then the mean over the last 100 epochs (0.05).
    """

    epochs: int
    n_train: int
    n_test: int
    hidden_dim: int
    train_max_words: int
    eval_max_words: int
    max_productions: int
    lr: float
    S_values: tuple[int, ...]
    seeds: tuple[int, ...]
    #: Fraction of the epochs averaged after the median over seeds (Fig 6).
    tail_fraction: float
    batch_size: int = 2
    theta_init: str = "normal"

    def __post_init__(self) -> None:
        for name in ("epochs", "n_train", "n_test", "hidden_dim", "train_max_words", "eval_max_words",
                     "max_productions"):
            if not _positive_ints([getattr(self, name)]):
                raise ValueError(f"PCFGScale.{name}={getattr(self, name)!r} is invalid; expected a positive int")
        if not _positive_ints(self.S_values, 2):
            raise ValueError(f"PCFGScale.S_values={self.S_values!r} is invalid; expected a non-empty tuple of "
                             "ints >= 2 (the TVO's covariance estimator needs two samples)")
        if not _positive_ints(self.seeds, 0):
            raise ValueError(f"PCFGScale.seeds={self.seeds!r} is invalid; expected a non-empty tuple of ints >= 0")
        if not (isinstance(self.lr, float) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"PCFGScale.lr={self.lr!r} is invalid; expected a positive finite float")
        t = self.tail_fraction
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
            raise ValueError(f"PCFGScale.tail_fraction={t!r} is invalid; expected a number in (0, 1]")

    def config_fields(self) -> dict[str, Any]:
        """The :class:`tvolib.pcfg.PCFGConfig` fields this scale sets."""
        names = ("epochs", "n_train", "n_test", "hidden_dim", "train_max_words", "eval_max_words",
                 "max_productions", "lr", "batch_size", "theta_init")
        return {name: getattr(self, name) for name in names}

    def describe(self) -> str:
        """One sentence stating the scale."""
        S = ", ".join(str(s) for s in self.S_values)
        return (f"PCFG: {self.n_train} training sentences (<= {self.train_max_words} words) / {self.n_test} test "
                f"sentences, {self.epochs} epochs of batch {self.batch_size}, GRU {self.hidden_dim} units, "
                f"Adam lr {self.lr:g}, theta initialised {self.theta_init}, S in {{{S}}}, {len(self.seeds)} seed(s), "
                f"last {self.tail_fraction:.0%} of the epochs averaged")


@dataclass(frozen=True)
class TestbedScale:
    """The bandit test bed's scale (:mod:`tvolib.bandit.testbed`, the test-bed figure): which cases
    of :data:`~tvolib.bandit.testbed.CASES`, how many seeds, and the run length (``None``: each
    case's own, 160 epochs)."""

    __test__ = False  # not a pytest class

    cases: tuple[str, ...]
    seeds: int
    epochs: int | None = None

    def __post_init__(self) -> None:
        # The case names are checked against tvolib.bandit.testbed.CASES where the cases are read
        # (tvolib.paper.testbed.testbed_cases): importing the bandit here would import torch.
        if not self.cases or not all(isinstance(c, str) for c in self.cases):
            raise ValueError(f"TestbedScale.cases={self.cases!r} is invalid; expected names of "
                             "tvolib.bandit.testbed.CASES")
        if not _positive_ints([self.seeds]) or (self.epochs is not None and not _positive_ints([self.epochs])):
            raise ValueError(f"TestbedScale seeds={self.seeds!r}, epochs={self.epochs!r}: expected positive ints "
                             "(epochs may be None)")


#: The test bed at every profile but smoke: d = 2, 5 and 10 under the strong trend, the optima of
#: every kind, and the d = 5 log-like optimum under every other trend; then the cases of the TVO's
#: form (tvolib.bandit.testbed_tvo): the closed-form integrand at d = 5 and 10 and moving at d = 5,
#: the recorded run's moving integrand at d = 5 and 10 and under its own trend and noise; five seeds.
TESTBED = TestbedScale(
    cases=("d2-log-strong", "d2-drift-strong", "d5-log-strong", "d5-linear-strong", "d5-corner-strong",
           "d5-drift-strong", "d5-log-none", "d5-log-mild", "d5-log-quick", "d10-log-strong",
           "d10-corner-strong", "d5-tvo-lg-strong", "d10-tvo-lg-strong", "d5-tvo-lg-moving-strong",
           "d5-tvo-recorded-strong", "d10-tvo-recorded-strong", "d5-tvo-recorded-quick"),
    seeds=5,
)


@dataclass(frozen=True)
class BudgetScale:
    """The scale of the bandit-budget figure (Fig 11), whose bandit runs Figs 3 and 10 also draw:
    VAE on MNIST, d = 5, the profile's first S and three seeds, long enough for the GP to choose
    many arms.

    The bandit's windows follow :class:`tvolib.bandit.GPBanditSchedule`'s rule: after ``burn_in``
    epochs on the log schedule, window ``k`` lasts ``window + floor(k / 10)`` epochs (+1 every 10
    rounds), shorter on an early update; the first ``n_init`` rounds draw random arms (``None``:
    the protocol's own number, the code's ``3 d``). The paper's T = 1000 epochs use w = 10; the
    authors' code w = 6 after a 20-epoch burn-in.
    """

    epochs: int
    #: Training / test examples (a seeded subset; ``None`` = the full split) and the minibatch.
    n_train: int | None
    n_test: int | None
    batch_size: int
    window: int
    burn_in: int
    n_init: int | None
    #: Test log p(x) (IWAE at the profile's ``eval_S``) every ``eval_every`` epochs and at the end.
    eval_every: int

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "window", "eval_every"):
            if not _positive_ints([getattr(self, name)]):
                raise ValueError(f"BudgetScale.{name}={getattr(self, name)!r} is invalid; expected a positive int")
        for name in ("n_train", "n_test", "n_init"):
            value = getattr(self, name)
            if value is not None and not _positive_ints([value]):
                raise ValueError(f"BudgetScale.{name}={value!r} is invalid; expected a positive int or None")
        if not _positive_ints([self.burn_in], 0):
            raise ValueError(f"BudgetScale.burn_in={self.burn_in!r} is invalid; expected an int >= 0 (epochs)")

    def describe(self) -> str:
        """One sentence stating the scale."""
        data = "full MNIST" if self.n_train is None else f"{self.n_train} train / {self.n_test} test MNIST examples"
        n_init = "3 d" if self.n_init is None else str(self.n_init)
        return (f"bandit budget (Fig 11, and the long runs of Figs 3 and 10): {data}, {self.epochs} epochs of batch "
                f"{self.batch_size}, test log p(x) every {self.eval_every} epochs; bandit window w = {self.window} "
                f"epochs (+1 every 10 rounds) after a burn-in of {self.burn_in} epochs on the log schedule, "
                f"{n_init} random rounds before the GP")


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
    #: Random rounds before the GP chooses arms (GP-bandit schedules; ``None``: the authors' code's
    #: ``3 d``, which a short run never leaves: shorter profiles scale it to their number of rounds).
    bandit_n_init: int | None
    #: The bandit-budget figure's scale (:class:`BudgetScale`; ``None``: not run at this profile).
    budget: BudgetScale | None
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
    #: Fig 6's scale (Appendix D.1).
    pcfg: PCFGScale
    #: The bandit test bed's scale (not a training run: synthetic rewards with known optima).
    testbed: TestbedScale = TESTBED
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
        if self.bandit_n_init is not None and (not isinstance(self.bandit_n_init, int) or self.bandit_n_init < 1):
            raise bad("bandit_n_init", "None (the code's 3 d random rounds) or a positive int")
        if self.budget is not None and not isinstance(self.budget, BudgetScale):
            raise bad("budget", "a BudgetScale or None (the budget figure is not run)")
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
        if not isinstance(self.pcfg, PCFGScale):
            raise bad("pcfg", "a PCFGScale")
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
            f"after a burn-in of {self.bandit_burn_in} epochs on the log schedule, "
            f"{'3 d' if self.bandit_n_init is None else self.bandit_n_init} random rounds before the GP "
            f"(the authors' code's protocol); wall-clock table: "
            f"{self.wallclock_epochs} epochs, bandit for d in {braces(self.wallclock_d_values)} vs log schedule "
            f"with {self.wallclock_grid_size} beta_1 in [{self.wallclock_beta1_range[0]:g}, "
            f"{self.wallclock_beta1_range[1]:g}] per d; permutation table budgets {self.permutation_budgets} epochs; "
            f"{self.pcfg.describe()}" + (f"; {self.budget.describe()}." if self.budget else ".")
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
    bandit_n_init=None,
    # Fig 11 at the paper's T = 1000 epochs with w = 10 and the code's burn-in and 3 d random rounds.
    budget=BudgetScale(epochs=1000, n_train=None, n_test=None, batch_size=1000, window=10, burn_in=20, n_init=None,
                       eval_every=50),
    reward_surface_epochs=(2000, 3000, 10_000),
    curves_d_values=(5, 15),
    wallclock_epochs=5000,
    wallclock_d_values=(2, 3, 4, 5, 6),
    wallclock_grid_size=20,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(1000, 2000, 5000, 10_000),
    permutation_d_values=(5, 10, 15),
    permutation_S_values=(10, 50),
    pcfg=PCFGScale(epochs=2000, n_train=20, n_test=20, hidden_dim=100, train_max_words=64, eval_max_words=15,
                   max_productions=127, lr=1e-3, S_values=(2, 5, 10, 20), seeds=tuple(range(20)),
                   tail_fraction=0.05),
    departures=(
        "none intended (the paper's Section 5 and Appendices A, D; the bandit's 20-epoch burn-in, which the "
        "paper does not state, is the authors' code's); meant for a GPU machine or a cluster."
    ),
)

# One GPU, a few hours: the paper's grids and datasets, far fewer epochs (sized with tvolib.runs.cost).
_GPU = Profile(
    name="gpu",
    n_train=None,
    n_test=None,
    epochs=100,
    batch_size=1000,
    lr=1e-3,
    S_values=(10, 50),
    d_values=(2, 5, 10, 15),
    seeds=(0, 1, 2, 3, 4),
    eval_S=1000,
    eval_every=25,
    bandit_window=3,
    bandit_burn_in=10,
    bandit_n_init=6,
    # Fig 11 at the paper's T = 1000 epochs with w = 10 and the code's burn-in and 3 d random rounds.
    budget=BudgetScale(epochs=1000, n_train=None, n_test=None, batch_size=1000, window=10, burn_in=20, n_init=None,
                       eval_every=50),
    reward_surface_epochs=(20, 30, 100),
    curves_d_values=(5, 15),
    wallclock_epochs=100,
    wallclock_d_values=(2, 3, 4, 5, 6),
    wallclock_grid_size=10,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(25, 50, 100),
    permutation_d_values=(5, 10, 15),
    permutation_S_values=(10, 50),
    pcfg=PCFGScale(epochs=64, n_train=200, n_test=20, hidden_dim=32, train_max_words=25, eval_max_words=9,
                   max_productions=49, lr=0.03, S_values=(2, 5, 10, 20), seeds=tuple(range(10)), tail_fraction=0.25,
                   batch_size=25, theta_init="uniform"),
    departures=(
        "sized to finish every figure and table on one GPU in at most 3 hours (the plan's cost model, "
        "tvolib.runs.cost, estimates 2.6 h on one H200-class GPU with runs stacked; not yet timed end to end): "
        "the full datasets, batch 1000, S in {10, 50}, d in {2, 5, 10, 15}, 5 seeds as in the paper, but 100 "
        "epochs instead of 10,000; IWAE-1000 test evaluation every 25 epochs (paper: 5000 every 200); bandit "
        "window 3 epochs (+1 every 10 rounds) after a 10-epoch burn-in on the log schedule, so that the bandit "
        "sees ~24 rounds, of which the first 6 are random (the code: 3 d, i.e. 15 at d = 5, of ~390 rounds); the "
        "bandit-budget figure trains 1000 epochs with w = 10 as in the paper; Fig 2's "
        "stages at epochs 20/30/100 mirror the paper's 2k/3k/10k of 10k; wall-clock table: 100 epochs, d = 2..6, "
        "a 10-point beta_1 grid (paper: 5000 epochs, 20 points); permutation table at budgets 25/50/100 epochs "
        "(paper: 1k/2k/5k/10k); PCFG: the quick scale (200 sentences of <= 25 words, batch 25, a 32-unit network, "
        "lr 0.03, theta initialised uniform, the last quarter averaged) with 64 epochs and 10 seeds (paper: "
        "2000 epochs of 20 sentences, 20 seeds)."
    ),
)

# Fig 11 on two CPU cores: the authors' code's windows (w = 6, +1 every 10 rounds, after 20 epochs on
# the log schedule) and its 3 d = 15 random rounds; 475 epochs are the fewest in which 40 windows
# after the random ones close (20 + 10 x (6 + 7 + 8 + 9 + 10) + 5 x 11 = 475; early updates only add
# rounds). The data size and batch were chosen by overfitting and time alone (see the departures).
_QUICK_BUDGET = BudgetScale(epochs=475, n_train=3000, n_test=300, batch_size=100, window=6, burn_in=20, n_init=None,
                            eval_every=25)

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
    bandit_n_init=4,
    budget=_QUICK_BUDGET,
    reward_surface_epochs=(12, 18, 60),
    curves_d_values=(5, 10),
    wallclock_epochs=60,
    wallclock_d_values=(2, 3, 4),
    wallclock_grid_size=3,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(20, 40, 60),
    permutation_d_values=(5, 10),
    permutation_S_values=(10,),
    # Learns visibly on 2 cores: 200 distinct sentences of <= 25 words (the length cut's ML floor,
    # 0.0022, lies far below the uniform level 0.0540), minibatches of 25 (a step's cost is the
    # Python loop over derivation steps, nearly independent of the batch), lr 0.03 for 128 steps,
    # theta initialised uniform so that epoch 0 is the uniform level exactly; 5% of 16 epochs would
    # be one noisy epoch, so a quarter is averaged.
    pcfg=PCFGScale(epochs=16, n_train=200, n_test=10, hidden_dim=32, train_max_words=25, eval_max_words=9,
                   max_productions=49, lr=0.03, S_values=(2, 5, 10, 20), seeds=(0, 1), tail_fraction=0.25,
                   batch_size=25, theta_init="uniform"),
    departures=(
        "seeded subsets of 1000 train / 300 test examples instead of the full datasets; 60 epochs of batch 50 "
        "(1200 Adam steps) instead of 10,000 epochs of batch 1000; S = 10 only (paper: 10 and 50); d in "
        "{2, 5, 10} (paper adds 15); 3 seeds (paper: 5); IWAE-300 test evaluation (paper: 5000); bandit "
        "window 3 epochs instead of 6 (so that the bandit sees ~16 rounds), after a 6-epoch burn-in on the log "
        "schedule (the authors' code: 20 of 10,000), with 4 random rounds before the GP instead of the code's 3 d "
        "(15 at d = 5, of ~390 rounds in a paper run); the bandit-budget figure (Fig 11, and the long runs of Figs 3 "
        "and 10; paper: T = 1000 epochs of full MNIST with w = 10) trains 475 epochs of batch 100 on 3000 train / 300 "
        "test examples, d = 5, S = 10, 3 seeds, with the code's windows (w = 6, +1 every 10 rounds, after 20 epochs "
        "on the log schedule) and its 3 d = 15 random rounds, so that at least 40 windows train an arm chosen by the "
        "GP; its data size and batch were chosen so that test log p(x) still improves at the last epoch (measured "
        "with the log schedule, seed 0, IWAE-300: -120.6 at epoch 100, -111.2 at 200, -107.3 at 300, -105.8 at 400, "
        "-105.4 at 450, -105.0 at 475; with 2000 examples it had flattened from epoch 425: -110.8, -110.8, -111.0) and "
        "that its 18 runs train in about 45 minutes on 2 cores with 2 workers (about 5 minutes a run, two at a time); Fig 2's "
        "stages at epochs 12/18/60 "
        "mirror the paper's 2k/3k/10k of 10k; Fig 9 uses d in {5, 10} (paper: 5, 15); wall-clock table "
        "scaled down to d in {2, 3, 4} with a 3-point beta_1 grid (paper: d = 2..6, 20 points, 100 runs, "
        "5000 epochs); permutation table at budgets 20/40/60 epochs, d in {5, 10}, S = 10 (paper: "
        "1k/2k/5k/10k epochs, d in {5, 10, 15}, S in {10, 50}); PCFG: 16 epochs of 200 sentences of <= 25 "
        "words in minibatches of 25, 2 seeds, a 32-unit network, lr 0.03, theta initialised uniform, the last "
        "quarter of the epochs averaged; the GP bandit's windows leave it choosing random schedules at this "
        "length (paper: 2000 epochs of 20 sentences of <= 64 words, batch 2, 20 seeds, 100 units, lr 1e-3, "
        "the last 100 epochs)."
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
    bandit_n_init=3,
    budget=BudgetScale(epochs=6, n_train=200, n_test=100, batch_size=100, window=1, burn_in=0, n_init=3, eval_every=1),
    reward_surface_epochs=(3, 6),
    curves_d_values=(5,),
    wallclock_epochs=6,
    wallclock_d_values=(2, 3),
    wallclock_grid_size=2,
    wallclock_beta1_range=(0.01, 0.9),
    permutation_budgets=(3, 6),
    permutation_d_values=(5,),
    permutation_S_values=(5,),
    pcfg=PCFGScale(epochs=2, n_train=4, n_test=3, hidden_dim=16, train_max_words=7, eval_max_words=7,
                   max_productions=31, lr=1e-3, S_values=(2,), seeds=(0,), tail_fraction=0.25),
    testbed=TestbedScale(cases=("d2-log-strong", "d5-log-strong", "d5-tvo-lg-strong"), seeds=1, epochs=60),
    departures=(
        "a plumbing check only (CI): 200 train / 100 test examples, 6 epochs, S = 5, d in {2, 5}, one seed, "
        "IWAE-50 evaluation, bandit window 1 epoch; the numbers mean nothing."
    ),
)

#: The profiles by name.
PROFILES: dict[str, Profile] = {p.name: p for p in (_SMOKE, _QUICK, _GPU, _PAPER)}


def get_profile(name: "str | Profile | None" = None) -> Profile:
    """The profile called ``name``; a :class:`Profile` is returned unchanged, ``None`` means
    ``$TVOLIB_PROFILE`` if set, else :data:`DEFAULT_PROFILE`.

    Args:
        name: ``"smoke"``, ``"quick"``, ``"paper"`` (any key of :data:`PROFILES`, case-insensitive),
            a :class:`Profile`, or ``None``.

    Returns:
        The :class:`Profile`.

    Raises:
        ValueError: an unknown name (the message lists the accepted ones).
    """
    if name is None:
        name = os.environ.get("TVOLIB_PROFILE") or DEFAULT_PROFILE
    if isinstance(name, Profile):
        return name
    if not isinstance(name, str):
        raise TypeError(f"profile must be a name (str), a Profile or None, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; accepted profiles: {', '.join(PROFILES)}")
    return PROFILES[key]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tvolib.paper.profiles NAME``: print the profile's description (exit 0), or an
    ``error:`` line naming the accepted profiles (exit 2)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m tvolib.paper.profiles NAME  (NAME: {' | '.join(PROFILES)})", file=sys.stderr)
        return 2
    try:
        print(get_profile(args[0]).describe())
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
