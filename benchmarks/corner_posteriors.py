"""Why the real runs' degenerate GP arms were chosen: for every GP round that chose a degenerate
arm, the arm-effect posterior (``reward_posterior(..., component="arm")``) at the chosen arm against
2000 random non-degenerate arms of the same staggered box, as the bandit saw it at that round.

Per run group (seeds pooled): how many degenerate choices; the share in which the posterior mean
at the chosen arm is the highest of all (the GP's model of the reward favours it) rather than the
upper confidence bound alone; the median gap to the best interior mean (reward units); the median
ratio of the chosen arm's posterior std to the interior arms' (above 1: chosen for its
uncertainty); the share of choices whose arm had been trained before.

    .venv/bin/python benchmarks/corner_posteriors.py      # reads the quick profile's results
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import torch

from tvolib.bandit import reward_posterior
from tvolib.bandit.protocol import arm_degeneracy, staggered_upper
from tvolib.paper import sweeps
from tvolib.paths import results_root

warnings.simplefilter("ignore")

def arm_of(s) -> list[float]:
    return sorted(json.loads(s)) if str(s).startswith("[") else sorted(map(float, str(s).split()))


def analyse(c, label: str) -> list[dict]:
    h = pd.read_csv(results_root() / f"tvo-{c.digest()}" / "schedule_history.csv")
    rows = h.to_dict("records")
    lo, hi = float(h.lo.iloc[0]), float(h.hi.iloc[0])
    up = np.array(staggered_upper(c.d, lo, hi))  # random interior arms, sorted, none degenerate
    g = torch.Generator().manual_seed(0)
    rand = lo + torch.rand(6000, c.d - 1, generator=g, dtype=torch.float64) * torch.tensor(up - lo)
    rand = torch.sort(rand, 1).values
    keep = [not arm_degeneracy(a.tolist(), lo, hi)["degenerate"] for a in rand]
    rand = rand[torch.tensor(keep)][:2000]
    out = []
    for r in rows:
        if r["source"] not in ("gp", "corner") or str(r["next_degenerate"]).lower() != "true":
            continue
        chosen = torch.tensor([arm_of(r["next_arm"])], dtype=torch.float64)
        grid = torch.cat([chosen, rand])
        mean, std = reward_posterior(h, int(r["round"]), grid, component="arm")
        tried = sum(np.allclose(arm_of(q["arm"]), chosen[0].numpy(), atol=2e-3)
                    for q in rows if q["round"] <= r["round"])
        out.append(dict(run=label, seed=c.seed, round=int(r["round"]),
                        mean_best=bool(mean[0] >= mean[1:].max()),
                        mean_gap=float(mean[0] - mean[1:].max()), std_ratio=float(std[0] / std[1:].median()),
                        tried=tried))
    return out


def main() -> None:
    runs = []
    for c in sweeps.budget_bandits("quick"):
        runs.append((c, f"budget {dict(c.schedule_options).get('protocol', 'tvolib')}"))
    for c in sweeps.fig4_vae_mnist_fashion("quick"):
        if c.schedule == "gp_bandit" and c.d in (5, 10):
            runs.append((c, f"{c.dataset} d={c.d} {dict(c.schedule_options).get('protocol', 'tvolib')}"))
    rows = [x for c, label in runs for x in analyse(c, label)]
    df = pd.DataFrame(rows)
    print(df.groupby("run").agg(degenerate_choices=("round", "size"), mean_highest=("mean_best", "mean"),
                                mean_gap=("mean_gap", "median"), std_ratio=("std_ratio", "median"),
                                tried_before=("tried", lambda t: float((t >= 1).mean()))).round(2).to_string())


if __name__ == "__main__":
    main()
