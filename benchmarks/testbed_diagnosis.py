"""Which items of the bandit's protocol put its arms on the corners: one change at a time, on the
test bed's d = 5 strong-trend case with an interior, log-like optimum (docs/paper-notes.md).

Each line is a protocol (the authors' code's, or this package's) with one item changed; printed:
the mean regret of the second half's arms over five seeds (per seed in brackets), the share of
them that are degenerate, and the fitted length scale and trend share of the last GP round.

    .venv/bin/python benchmarks/testbed_diagnosis.py [case] [seeds]      # about 5 minutes on 2 cores
"""
from __future__ import annotations

import statistics
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch

from tvolib.bandit import GPBanditSchedule, RandomSchedule
from tvolib.bandit.testbed import CASES, run_case

#: label -> (protocol, options); "random arms" is RandomSchedule in the same domain.
VARIANTS: dict[str, tuple[str, dict]] = {
    "random arms": ("", {}),
    "code": ("code", {}),
    "code, upper guard on the domain's upper corner (revision 4)": ("code", {"_revision4_guard": True}),
    "code, no corner guards": ("code", {"corner_guards": False}),
    "code, kappa = 0 (the posterior mean alone)": ("code", {"kappa": 0.0}),
    "code, time-invariant GP": ("code", {"time_varying": False}),
    "code, global standardisation": ("code", {"standardize": "global"}),
    "code, rate reward": ("code", {"reward": "rate"}),
    "code, dimension-scaled bounds": ("code", {"ml_bounds": "dimension"}),
    "code, trend term": ("code", {"trend": True}),
    "code, trend term + rate reward": ("code", {"trend": True, "reward": "rate"}),
    "tvolib": ("tvolib", {}),
    "tvolib, no trend term": ("tvolib", {"trend": False}),
    "tvolib, the code's reward": ("tvolib", {"reward": "code"}),
    "tvolib, the code's bounds": ("tvolib", {"ml_bounds": "code"}),
    "tvolib, no corner guards": ("tvolib", {"corner_guards": False}),
}


def _schedule(d: int, window: int, seed: int, protocol: str, options: dict):
    if not protocol:
        return RandomSchedule(d, window=window, seed=seed)
    options = dict(options)
    if options.pop("_revision4_guard", False):
        class Revision4Guard(GPBanditSchedule):
            def corner_arms(self):  # the staggered domain's upper corner, inside the unit cube
                return torch.tensor([[self.lo] * self.n_arm, list(self.upper)], dtype=torch.float64)
        return Revision4Guard(d, window=window, seed=seed, protocol=protocol, device="cpu", **options)
    return GPBanditSchedule(d, window=window, seed=seed, protocol=protocol, device="cpu", **options)


def _one(case_name: str, label: str, seed: int) -> tuple[str, float, float, float | None, float | None]:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    case = CASES[case_name]
    protocol, options = VARIANTS[label]
    result = run_case(case, lambda s: _schedule(case.d, case.window, s, protocol, options), seed)
    gp = [r for r in result.history if r.get("source") in ("gp", "corner")]
    last = gp[-1] if gp else {}
    return label, result.regret, result.degenerate, last.get("lengthscale"), last.get("trend_share")


def main(case_name: str = "d5-log-strong", seeds: int = 5) -> None:
    jobs = [(case_name, label, seed) for label in VARIANTS for seed in range(seeds)]
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        rows = list(pool.map(_one, *zip(*jobs)))
    print(f"case {case_name}, {seeds} seeds: mean regret [per seed], degenerate share, last GP round's length scale")
    for label in VARIANTS:
        mine = [r for r in rows if r[0] == label]
        regrets = " ".join(f"{r[1]:.2f}" for r in mine)
        scale = [r[3] for r in mine if r[3] is not None]
        share = [r[4] for r in mine if r[4] is not None]
        extra = (f", length scale {statistics.mean(scale):.2f}" if scale else "") + \
                (f", trend share {statistics.mean(share):.3f}" if share else "")
        print(f"{label:62s} regret {statistics.mean(r[1] for r in mine):.2f} [{regrets}], "
              f"degenerate {statistics.mean(r[2] for r in mine):.0%}{extra}")


if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["d5-log-strong"]), *(int(a) for a in sys.argv[2:3]))
