"""What a budget can tell apart on the adaptive-d test bed: each ``d``'s best arm, and the epochs
any method would need to tell it from the optimum.

The step cases of :mod:`tvolib.bandit.testbed` know every schedule's value, so the best regret
``Delta_d`` over arms of ``d`` points is a property of the case, not of a bandit, and so is what
an oracle that knew both arms would need to tell the best arm of ``d`` points from the optimum
(:mod:`tvolib.bandit.oracle`):

    E_z(d) = 2 z^2 sigma^2 / Delta_d^2   epochs on each arm,   z_d(T) = Delta_d sqrt(T / 4) / sigma.

No bandit needs fewer: it must also find the arms and share the run with every other ``d``. Where
even the oracle, spending the whole run of ``T`` epochs on the two arms, separates them by about
one standard error or less, no method can tell that ``d`` from the optimum's at that budget.

    .venv/bin/python benchmarks/adaptive_resolution.py [epochs ...]   # about 1 minute, one core

Printed per step case of the mild trend (``d3-step-mild``, ``d5-step-mild``, ``d10-step-mild``),
for ``d`` = 2 to 10: ``Delta_d``, ``E_1`` and ``E_2`` at the case's per-epoch noise, and for each
run length ``T`` (default 160, 480 and 960 epochs, the budgets of ``docs/adaptive-d.md``) the
standard errors ``z`` by which the oracle separates them, at the case's noise and at the quiet
cases' (``d*-step-mild-quiet``, :data:`~tvolib.bandit.testbed.QUIET_NOISE`).
"""
from __future__ import annotations

import sys

from tvolib.bandit.oracle import best_regrets, oracle_epochs, oracle_z
from tvolib.bandit.testbed import CASES, QUIET_NOISE

#: The step cases of the mild trend; their quiet forms differ in the noise only.
MILD_STEP_CASES = ("d3-step-mild", "d5-step-mild", "d10-step-mild")


def main(argv: list[str]) -> None:
    budgets = [int(a) for a in argv] or [160, 480, 960]
    for name in MILD_STEP_CASES:
        case = CASES[name]
        sigma, _ = case.noise_model
        print(f"{name}: the optimum has d = {case.d}; per-epoch noise {sigma} (quiet: {QUIET_NOISE}); "
              "z: the oracle with T epochs")
        print(f"{'d':>3} {'Delta_d':>8} {'E_1':>8} {'E_2':>8}"
              + "".join(f"{'z, T=' + str(t):>11}{'quiet':>7}" for t in budgets))
        for d, delta in best_regrets(case).items():
            print(f"{d:>3} {delta:8.3f} {oracle_epochs(delta, sigma, 1):8.0f} {oracle_epochs(delta, sigma, 2):8.0f}"
                  + "".join(f"{oracle_z(delta, sigma, t):11.2f}{oracle_z(delta, QUIET_NOISE, t):7.2f}"
                            for t in budgets))


if __name__ == "__main__":
    main(sys.argv[1:])
