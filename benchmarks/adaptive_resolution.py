"""What a budget can tell apart on the adaptive-d test bed: each ``d``'s best arm, and the epochs
any method would need to tell it from the optimum.

The step cases of :mod:`tvolib.bandit.testbed` (``d3-step-mild``, ``d10-step-mild``) know every
schedule's value, so the best regret ``Delta_d = 1 - max_b f(b)`` over arms of ``d`` points is a
property of the case, not of a bandit (:func:`best_regrets`). Where fewer points cannot make the
optimum, ``Delta_d`` is what the missing points cost.

An oracle that knew the two arms (the best of ``d`` points and the optimum) and trained each for
``E`` epochs would tell them apart at ``z`` standard errors when the difference of their mean
per-epoch gains, ``Delta_d``, reaches ``z`` times its standard error ``sigma sqrt(2 / E)`` (the
case's white per-epoch noise ``sigma``; the shared trend cancels):

    E_z(d) = 2 z^2 sigma^2 / Delta_d^2   epochs on each arm.

No bandit needs fewer: it must also find the arms and share the run with every other ``d``. Where
even the oracle, spending the whole run of ``T`` epochs on the two arms, separates them by about
one standard error or less, no method can tell that ``d`` from the optimum's at that budget.

    .venv/bin/python benchmarks/adaptive_resolution.py [epochs ...]   # about 1 minute, one core

Printed per case, for ``d`` = 2 to 10: ``Delta_d``, ``E_1`` and ``E_2``, and for each run length
``T`` (default 160, 480 and 960 epochs, the budgets of ``docs/adaptive-d.md``) the standard errors
``z = Delta_d sqrt(T) / (2 sigma)`` by which the oracle, training each arm for ``T / 2`` epochs,
separates them.
"""
from __future__ import annotations

import math
import sys

import numpy as np
from scipy.optimize import minimize

from tvolib.bandit.embedding import pad_arm
from tvolib.bandit.testbed import CASES, TestbedCase, arm_value

from adaptive_tolerance import STEP_CASES  # benchmarks/, this script's folder

D_RANGE = range(2, 11)
RANDOM_STARTS = 4


def best_regrets(case: TestbedCase, *, seed: int = 0) -> dict[int, float]:
    """``Delta_d`` for ``d`` in :data:`D_RANGE`: the smallest regret of an arm of ``d`` points on ``case``.

    More points than the optimum's make it by tying points (regret 0). Fewer are searched from the
    largest ``d`` down: Nelder-Mead from the best arm of ``d + 1`` points less each one of its
    points, and from a few random arms.
    """
    rng = np.random.default_rng(seed)
    best: dict[int, tuple[float, np.ndarray]] = {}
    for d in sorted(D_RANGE, reverse=True):
        m = d - 1
        if m >= len(case.optimum):
            arm = np.asarray(pad_arm(case.optimum, m))
            best[d] = (_regret(case, arm), arm)
            continue
        larger = best[d + 1][1]
        starts = [np.delete(larger, k) for k in range(larger.size)]
        starts += [np.sort(rng.uniform(0.0, 1.0, m)) for _ in range(RANDOM_STARTS)]
        fits = [minimize(lambda x: _regret(case, x), x0, method="Nelder-Mead",
                         options=dict(maxiter=2000, xatol=1e-5, fatol=1e-8)) for x0 in starts]
        fit = min(fits, key=lambda r: r.fun)
        best[d] = (float(fit.fun), np.sort(np.clip(fit.x, 0.0, 1.0)))
    return {d: best[d][0] for d in D_RANGE}


def _regret(case: TestbedCase, points: np.ndarray) -> float:
    return 1.0 - arm_value(case, np.clip(points, 0.0, 1.0).tolist(), 0.5)


def oracle_epochs(delta: float, sigma: float, z: float) -> float:
    """``E_z``: epochs on each of two arms whose mean gains differ by ``delta`` to separate them at ``z``."""
    return math.inf if delta <= 1e-9 else 2 * z**2 * sigma**2 / delta**2


def oracle_z(delta: float, sigma: float, epochs: int) -> float:
    """The standard errors that separate the two arms when the oracle trains each for ``epochs / 2``."""
    return delta * math.sqrt(epochs / 2 / 2) / sigma


def main(argv: list[str]) -> None:
    budgets = [int(a) for a in argv] or [160, 480, 960]
    for name in STEP_CASES:
        case = CASES[name]
        sigma, _ = case.noise_model
        print(f"{name}: the optimum has d = {case.d}; per-epoch noise {sigma}; z: the oracle with T epochs")
        print(f"{'d':>3} {'Delta_d':>8} {'E_1':>8} {'E_2':>8}" + "".join(f"{'z, T=' + str(t):>11}" for t in budgets))
        for d, delta in best_regrets(case).items():
            print(f"{d:>3} {delta:8.3f} {oracle_epochs(delta, sigma, 1):8.0f} {oracle_epochs(delta, sigma, 2):8.0f}"
                  + "".join(f"{oracle_z(delta, sigma, t):11.2f}" for t in budgets))


if __name__ == "__main__":
    main(sys.argv[1:])
