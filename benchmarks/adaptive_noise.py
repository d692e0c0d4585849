"""The adaptive-d bandit's noise bound and its recommendation on the test bed (revision 5).

The bandit's GP has no output scale (rewards are standardised), so its noise variance is the share
of the rewards' variance it may leave unexplained. The protocol bounds it by 0.5 (the authors'
code's bound); :class:`tvolib.bandit.AdaptiveDBanditSchedule` bounds it by ``NOISE_UPPER`` (all of
it). On the test bed the noise is known, so its true share of the rewards' variance can be set
beside the fits. Printed per case and seed (the two step cases):

* ``noise share``: the variance of the rewards' noise (reward minus the noiseless reward of its
  window's arm, trend and epochs) over the rewards' variance, over the run and its last 60 rounds;
* ``fits on the bound``: the share of the last 20 GP rounds whose fitted noise is on its upper
  bound, and their median noise;
* the ``d`` trained most in the second half and the mean regret of its arms;
* the last GP round's recommendation by the library's rule (the one-standard-error rule on lower
  bounds ``mean - sd``, revision 5) and by revision 4's (on means), with the regret of each arm.
  The recommendation draws nothing from the schedule's generator, so both come from one run.

    .venv/bin/python benchmarks/adaptive_noise.py [seeds] [epochs] [--protocol-bound]

(``0:12 480``, the defaults: 23 minutes on 2 cores.) ``--protocol-bound`` fits the noise within the
protocol's 0.5, as revisions 1 to 4 did: its trained arms are revision 4's.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
from typing import Any

import torch

from tvolib.bandit.acquisition import arm_effect_posterior
from tvolib.bandit.adaptive import AdaptiveDBanditSchedule
from tvolib.bandit.model import BanditGP
from tvolib.bandit.protocol import ml_bounds
from tvolib.bandit.testbed import CASES, CaseResult, ScheduleFactory, TestbedCase, arm_value, run_cases, trend_gain

from adaptive_tolerance import BUDGET, STEP_CASES, seeds_epochs_flag  # benchmarks/, this script's folder


class ProtocolNoiseBound(AdaptiveDBanditSchedule):
    """The library's schedule with the noise fitted within the protocol's bound (revisions 1 to 4)."""

    def fit_bounds(self) -> dict[str, tuple[float, float]]:
        return {**super().fit_bounds(), "noise": ml_bounds(self.ml_bounds, 1)["noise"]}


class RecordingJointPosterior(AdaptiveDBanditSchedule):
    """The library's schedule, whose history also keeps each GP round's candidates (``candidates``,
    beta units) and their joint posterior covariance (``cov_by_d``), from which any rule over them
    can be recomputed. Same draws, same arms."""

    def _maximise_each(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[torch.Tensor, float]]:
        best = super()._maximise_each(gp, kappa, seed)  # the recommendation's search (kappa = 0)
        ds = sorted(best)
        self._record = {"cov_by_d": arm_effect_posterior(gp, [best[d][0] for d in ds])[1].tolist(),
                        "candidates": [(self.lo + (self.hi - self.lo) * best[d][0].cpu()).tolist() for d in ds]}
        return best

    def _recommend(self, gp: BanditGP, seed: int) -> dict[str, Any]:
        return {**super()._recommend(gp, seed), **self._record}


class ProtocolBoundRecording(ProtocolNoiseBound, RecordingJointPosterior):
    """Both of the above."""


def by_means(row: dict[str, Any], d_min: int) -> int:
    """Revision 4's rule: the smallest ``d`` whose mean is not one sd of the difference below the
    highest mean."""
    mean, cov = torch.tensor(row["mean_by_d"]), torch.tensor(row["cov_by_d"])
    top = int(torch.argmax(mean))
    gap = (cov[top, top] + cov.diagonal() - 2 * cov[top]).clamp_min(0.0).sqrt()
    return d_min + next(k for k in range(len(mean)) if mean[k] >= mean[top] - gap[k])


def noise_share(case: TestbedCase, result: CaseResult, last: int | None = None) -> float:
    """The variance of the rewards' noise over the rewards' variance (the last ``last`` rounds)."""
    rows = [r for r in result.history if r.get("reward") is not None and not r.get("skipped")]
    rows = rows[-last:] if last else rows
    rewards, noise = [], []
    for r in rows:
        epochs = range(r["start_epoch"] + 1, r["epoch"] + 1)
        clean = sum(trend_gain(case, e) + arm_value(case, r["arm"], (e - 1) / (case.epochs - 1)) - 0.5
                    for e in epochs) / len(epochs)
        rewards.append(r["reward"])
        noise.append(r["reward"] - clean)
    return statistics.pvariance(noise) / statistics.pvariance(rewards)


def main(seeds: range, epochs: int, protocol_bound: bool = False) -> None:
    cls = ProtocolBoundRecording if protocol_bound else RecordingJointPosterior
    jobs = []
    for name in STEP_CASES:
        case = dataclasses.replace(CASES[name], epochs=epochs)
        jobs += [(case, ScheduleFactory.of(cls, 10, window=case.window, **BUDGET), seed) for seed in seeds]
    results = run_cases(jobs, max_workers=2)
    upper = (ProtocolNoiseBound if protocol_bound else AdaptiveDBanditSchedule)(10, device="cpu").fit_bounds()["noise"][1]
    print("| case | seed | noise share (run, last 60) | fits on the bound, median noise | d trained most, "
          "regret | recommended d, regret (lower bounds) | (means) |\n|---|---|---|---|---|---|---|")
    summary: dict[str, list[tuple[int, int, float, float, float]]] = {}
    for (case, _, seed), result in zip(jobs, results):
        gp_rows = [r for r in result.history if r.get("noise") is not None]
        late = [r["noise"] for r in gp_rows[-20:]]
        on_bound = sum(n >= upper - 1e-3 for n in late) / len(late)
        last = [r for r in result.history if r.get("recommended_d") is not None][-1]
        regret = [1.0 - arm_value(case, arm, 1.0) for arm in last["candidates"]]  # d = 2, 3, ...
        d_lower, d_mean = last["recommended_d"], by_means(last, 2)
        print(f"| {case.name} | {seed} | {noise_share(case, result):.2f}, {noise_share(case, result, 60):.2f} | "
              f"{on_bound:.2f}, {statistics.median(late):.2f} | {result.d_mode}, {result.regret:.2f} | "
              f"{d_lower}, {regret[d_lower - 2]:.2f} | {d_mean}, {regret[d_mean - 2]:.2f} |", flush=True)
        summary.setdefault(case.name, []).append((result.d_mode, d_lower, result.regret, regret[d_lower - 2],
                                                  regret[d_mean - 2]))
    for name, rows in summary.items():
        mean = [statistics.mean(column) for column in list(zip(*rows))[2:]]
        print(f"{name}: d trained most {[r[0] for r in rows]}, regret {mean[0]:.2f}; recommended {[r[1] for r in rows]}, "
              f"regret {mean[1]:.2f} (by means {mean[2]:.2f})")


if __name__ == "__main__":
    seeds, epochs, protocol_bound = seeds_epochs_flag(sys.argv[1:], "--protocol-bound", "0:12")
    main(seeds, epochs, protocol_bound=protocol_bound)
