"""The claims the figures test, each checked on the figure's saved table by one rule.

Every figure saves its numbers as ``figures/<stem>.csv``. A :class:`Claim` names the paper's claim
(or, for Figs 10-13 and the series this package adds, ours), quotes the paper's number where it
gives one, and turns the table into :class:`~tvolib.paper.verdict.Comparison` s, each oriented so
that a positive difference is the claimed direction; :func:`~tvolib.paper.verdict.judge` gives the
verdict. The results page (:mod:`tvolib.paper.results_page`) and each notebook's last cell read the
same tables through :func:`evaluate`, so they never disagree.

The comparisons per figure (all on mean ± s.e. over seeds unless stated):

* Figs 4, 5, 7, 8 (``summarise_by_schedule``'s table): per dataset, S and d, a schedule against
  the best of linear, log and moments by mean (log p(x)), or against the lower KL of log and moments
  (the paper's caption compares inference with those two);
* Fig 6: per S, each TVO method against each baseline on KL(p_theta || p_true) (lower is better);
* Fig 11, 13 and the wall-clock table: as their captions state (below).

Example:
    >>> import pandas as pd
    >>> table = pd.DataFrame({"panel": ["closed form"], "exact": [True], "ELBO": [-3.0],
    ...                       "left sum (TVO)": [-2.5], "area": [-2.0], "right sum": [-1.5]})
    >>> [r.verdict for r in evaluate("fig1_tvo_integrand", table)]
    ['reproduced']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd

from tvolib.paper.analysis import mean_sem
from tvolib.paper.sweeps import FIGURES
from tvolib.paper.names import schedule_label
from tvolib.paper.verdict import Comparison, compare, compare_equal, compare_no_worse, exact, judge, untested

__all__ = ["Claim", "ClaimResult", "CLAIMS", "STANDARD_SCHEDULES", "evaluate", "summarise_comparisons"]

#: The fixed schedules a user would keep instead of a bandit (the paper's baselines).
STANDARD_SCHEDULES: tuple[str, ...] = ("linear", "log", "moments")
#: Series this package adds beside the paper's (each gets an "ours" row where a figure has it).
OUR_SERIES: tuple[str, ...] = ("gp_bandit_tvolib", "gp_bandit_integrand", "bias_optimal")
_LOG_PX, _KL = "test_log_px", "test_kl"


@dataclass(frozen=True)
class ClaimResult:
    """A claim checked on a table: its comparisons, the verdict and a one-cell summary ``ours``."""

    claim: "Claim"
    comparisons: list[Comparison]
    verdict: str
    ours: str


@dataclass(frozen=True)
class Claim:
    """One claim of a figure.

    Args:
        stem: the figure's stem.
        text: the claim in one line.
        paper: the paper's number where it gives one ("" where it only draws).
        check: table -> comparisons (empty when the table cannot test it).
        ours_only: a claim of this package's own, not the paper's.
    """

    stem: str
    text: str
    paper: str
    check: Callable[[pd.DataFrame], list[Comparison]] = field(repr=False)
    ours_only: bool = False

    def evaluate(self, table: pd.DataFrame) -> ClaimResult:
        """The comparisons on ``table`` and their verdict; a table without a column the claim reads
        (written by an older version of the figure) is "not assessed", naming the column."""
        try:
            comparisons = self.check(table)
        except KeyError as exc:
            return ClaimResult(self, [], judge([]), f"the table has no column {exc}: regenerate the figure")
        return ClaimResult(self, comparisons, judge(comparisons), summarise_comparisons(comparisons))


def summarise_comparisons(comparisons: Sequence[Comparison]) -> str:
    """One cell: the single difference, or the range of differences and how many held.

    Example:
        >>> summarise_comparisons([compare("a", 1.0, 0.1, 0.0, 0.1), compare("b", -0.1, 0.1, 0.0, 0.1)])
        'Δ -0.10 ± 0.14 to +1.00 ± 0.14 over 2: 1 holds, 1 within noise'
    """
    if not comparisons:
        return "not in this table"
    if len(comparisons) == 1:
        return f"Δ {comparisons[0].text()}"
    low, high = min(comparisons, key=lambda c: c.diff), max(comparisons, key=lambda c: c.diff)
    counts = {o: sum(c.outcome == o for c in comparisons) for o in ("holds", "reversed", "within noise", "untested")}
    parts = [f"{n} {o}" for o, n in counts.items() if n]
    return f"Δ {low.text()} to {high.text()} over {len(comparisons)}: " + ", ".join(parts)


# ------------------------------------------------------------------------------------------------
# Tables of schedules against d (Figs 4, 5, 7, 8): summarise_by_schedule's columns
# ------------------------------------------------------------------------------------------------

def _cells(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(label, rows)`` per dataset, S and d of a schedule-summary table."""
    keys = [k for k in ("dataset", "S", "d") if k in table.columns]
    out = []
    for key, rows in table.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append((", ".join(f"{k} = {v}" if k != "dataset" else str(v) for k, v in zip(keys, key)), rows))
    return out


def _row(rows: pd.DataFrame, schedule: str) -> pd.Series | None:
    found = rows[rows["schedule"] == schedule]
    return None if found.empty else found.iloc[0]


def _mean_se(row: pd.Series, metric: str) -> tuple[float, float]:
    return float(row[f"{metric}_mean"]), float(row.get(f"{metric}_sem", math.nan))


def _best(rows: pd.DataFrame, schedules: Sequence[str], metric: str, higher: bool) -> pd.Series | None:
    present = rows[rows["schedule"].isin(schedules)]
    if present.empty:
        return None
    column = present[f"{metric}_mean"]
    return present.loc[column.idxmax() if higher else column.idxmin()]


def beats_best(schedule: str, metric: str = _LOG_PX, against: Sequence[str] = STANDARD_SCHEDULES,
               higher: bool = True) -> Callable[[pd.DataFrame], list[Comparison]]:
    """``schedule`` against the best of ``against`` (by mean) in every cell of a summary table."""
    def check(table: pd.DataFrame) -> list[Comparison]:
        comparisons = []
        for label, rows in _cells(table):
            mine, best = _row(rows, schedule), _best(rows, against, metric, higher)
            if mine is None or best is None:
                continue
            (a, sa), (b, sb) = _mean_se(mine, metric), _mean_se(best, metric)
            sign = 1.0 if higher else -1.0
            comparisons.append(compare(f"{label}: vs {best['schedule']}", sign * a, sa, sign * b, sb))
        return comparisons
    return check


def comparable_to(schedule: str, against: Sequence[str], metric: str = _LOG_PX) -> Callable[[pd.DataFrame],
                                                                                           list[Comparison]]:
    """``schedule`` equal, within noise, to each of ``against`` in every cell."""
    def check(table: pd.DataFrame) -> list[Comparison]:
        comparisons = []
        for label, rows in _cells(table):
            mine = _row(rows, schedule)
            for other in against:
                theirs = _row(rows, other)
                if mine is not None and theirs is not None:
                    comparisons.append(compare_equal(f"{label}: vs {other}", *_mean_se(mine, metric),
                                                     *_mean_se(theirs, metric)))
        return comparisons
    return check


def largest_cell(check: Callable[[pd.DataFrame], list[Comparison]]) -> Callable[[pd.DataFrame], list[Comparison]]:
    """``check`` on the rows of the largest S and d only (the paper's Fig 7 claim is at S = 50, d = 15)."""
    def narrowed(table: pd.DataFrame) -> list[Comparison]:
        if table.empty:
            return []
        top = table[table["S"] == table["S"].max()]
        return check(top[top["d"] == top["d"].max()])
    return narrowed


def gap_grows_with_d(schedule: str, baseline: str) -> Callable[[pd.DataFrame], list[Comparison]]:
    """Per dataset: the gap ``schedule - baseline`` at the largest d minus the gap at the smallest."""
    def check(table: pd.DataFrame) -> list[Comparison]:
        comparisons = []
        for dataset, rows in table.groupby("dataset", sort=True):
            ends = []
            for d in (rows["d"].min(), rows["d"].max()):
                at = rows[rows["d"] == d]
                mine, theirs = _row(at, schedule), _row(at, baseline)
                if mine is None or theirs is None:
                    break
                (a, sa), (b, sb) = _mean_se(mine, _LOG_PX), _mean_se(theirs, _LOG_PX)
                ends.append((a - b, math.hypot(sa, sb)))
            if len(ends) == 2 and rows["d"].min() != rows["d"].max():
                (small, s_small), (large, s_large) = ends
                comparisons.append(compare(f"{dataset}: gap at d = {rows['d'].max()} vs d = {rows['d'].min()}",
                                           large, s_large, small, s_small))
        return comparisons
    return check


def _present(table: pd.DataFrame, schedule: str) -> bool:
    return "schedule" in table.columns and bool((table["schedule"] == schedule).any())


def series_claims(stem: str, table_schedules: Sequence[str] = OUR_SERIES) -> list[Claim]:
    """This package's series against the best standard schedule, in a figure that has them."""
    texts = {"gp_bandit_tvolib": "GP-bandit under this package's GP-UCB protocol beats the best standard schedule",
             "gp_bandit_integrand": "GP-bandit under the integrand protocol (the default) beats the best standard "
                                    "schedule",
             "bias_optimal": "The bias-optimal schedule beats the best standard schedule"}
    return [Claim(stem, texts[s] + " (test log p(x))", "", _only_if_present(s, beats_best(s)), ours_only=True)
            for s in table_schedules]


def _only_if_present(schedule: str, check: Callable[[pd.DataFrame], list[Comparison]]
                     ) -> Callable[[pd.DataFrame], list[Comparison]]:
    return lambda table: check(table) if _present(table, schedule) else []


# ------------------------------------------------------------------------------------------------
# The other figures' tables
# ------------------------------------------------------------------------------------------------

def _fig1(table: pd.DataFrame) -> list[Comparison]:
    """Closed form: ELBO <= left sum <= log p(x) <= right sum, each an exact gap (positive: holds)."""
    out = []
    for _, row in table[table["exact"].astype(str) == "True"].iterrows():
        out += [exact(f"{row['panel']}: left sum - ELBO", row["left sum (TVO)"] - row["ELBO"]),
                exact(f"{row['panel']}: log p(x) - left sum", row["area"] - row["left sum (TVO)"]),
                exact(f"{row['panel']}: right sum - log p(x)", row["right sum"] - row["area"])]
    return out


def _fig2(table: pd.DataFrame) -> list[Comparison]:
    """The posterior mean's range over beta_1 at the first stage drawn minus at the last (one run)."""
    if len(table) < 2:
        return []
    spread = (table["mean_max"] - table["mean_min"]).to_numpy()
    first, last = table.iloc[0], table.iloc[-1]
    return [untested(f"range after epoch {first['epoch']} - after epoch {last['epoch']} (one run)",
                     float(spread[0] - spread[-1]))]


def _seed_mean_se(values: pd.Series) -> tuple[float, float]:
    mean, sem, _ = mean_sem(values)
    return mean, sem


def _fig3(table: pd.DataFrame) -> list[Comparison]:
    """Per budget: the GP arms' mean interior beta below 0.5 in the middle third, and higher in the last."""
    out = []
    for budget, rows in table.groupby("budget", sort=False):
        wide = rows.pivot_table(index="seed", columns="phase", values="mean_beta")
        if "middle" not in wide or wide["middle"].count() == 0:
            continue
        middle, se = _seed_mean_se(wide["middle"])
        out.append(compare(f"{budget}: 0.5 - mean beta, middle third", 0.5, 0.0, middle, se))
        if "late" in wide:
            rise, se_rise = _seed_mean_se(wide["late"] - wide["middle"])
            if not math.isnan(rise):
                out.append(compare(f"{budget}: mean beta, last third - middle third", rise, se_rise, 0.0, 0.0))
    return out


def _fig6(table: pd.DataFrame) -> list[Comparison]:
    """Per S: each TVO method's KL(p_theta || p_true) below each baseline's (seed means ± s.e.)."""
    mean, sem = "KL(p_theta || p_true) seed mean", "KL(p_theta || p_true) seed s.e."
    out = []
    for S, rows in table.groupby("S", sort=True):
        by = rows.set_index("method")
        for tvo in [m for m in by.index if str(m).startswith("TVO")]:
            for base in [m for m in by.index if not str(m).startswith("TVO")]:
                out.append(compare(f"S = {S}: {tvo} vs {base}", -by.at[base, mean], by.at[base, sem],
                                   -by.at[tvo, mean], by.at[tvo, sem]))
    return out


def _wallclock(table: pd.DataFrame) -> list[Comparison]:
    """Best runs (one run each: untested) and the cumulative time (exact)."""
    by = table.set_index("schedule")
    if not {"GP-bandit", "grid-searched log"} <= set(by.index):
        return []
    bandit, grid = by.loc["GP-bandit"], by.loc["grid-searched log"]
    time = [c for c in table.columns if c.startswith("cumulative run time")][0]
    return [untested("best log p(x), bandit - grid", bandit["best log p(x)"] - grid["best log p(x)"]),
            untested("KL at best, grid - bandit", grid["KL at best"] - bandit["KL at best"]),
            exact(f"{time}, grid - bandit", grid[time] - bandit[time])]


def _permutation(table: pd.DataFrame) -> list[Comparison]:
    """Per S, d and budget: sorted minus unsorted (means ± s.e. over seeds)."""
    budgets = [c for c in table.columns if c.startswith("T=") and not c.endswith("s.e.")]
    out = []
    for (S, d), rows in table.groupby(["S", "d"], sort=True):
        by = rows.set_index("GP")
        sorted_, unsorted = by.index[0], by.index[-1]
        if sorted_ == unsorted:
            continue
        for budget in budgets:
            out.append(compare(f"S = {S}, d = {d}, {budget}", by.at[sorted_, budget], by.at[sorted_, f"{budget} s.e."],
                               by.at[unsorted, budget], by.at[unsorted, f"{budget} s.e."]))
    return out


def _fig9(table: pd.DataFrame) -> list[Comparison]:
    """Per panel: the GP-bandit's drops per run (training IWAE, after the burn-in) above every fixed schedule's."""
    return beats_best("gp_bandit", "drops", STANDARD_SCHEDULES)(table)


def _protocol_rows(table: pd.DataFrame, budget: str) -> pd.DataFrame:
    return table[table["budget"] == budget].set_index("method")


def _fig10_degenerate(table: pd.DataFrame) -> list[Comparison]:
    """Per budget: the code's share of degenerate GP arms minus tvolib's (exact counts)."""
    out = []
    for budget in dict.fromkeys(table["budget"]):
        by = _protocol_rows(table, budget)
        if {"code", "tvolib"} <= set(by.index):
            out.append(exact(f"{budget}: code - tvolib", by.at["code", "degenerate_share"] -
                             by.at["tvolib", "degenerate_share"]))
    return out


def _fig10_log_px(table: pd.DataFrame) -> list[Comparison]:
    """Per budget: tvolib's test log p(x) against the code's (equal within noise, or better)."""
    out = []
    for budget in dict.fromkeys(table["budget"]):
        by = _protocol_rows(table, budget)
        if {"code", "tvolib"} <= set(by.index):
            out.append(compare_no_worse(f"{budget}: tvolib - code", by.at["tvolib", "log_px"],
                                        by.at["tvolib", "log_px_sem"], by.at["code", "log_px"],
                                        by.at["code", "log_px_sem"]))
    return out


def _method_beats_best(table: pd.DataFrame, methods: Sequence[str]) -> list[Comparison]:
    """Fig 11: each of ``methods`` present against the best standard schedule's final test log p(x)."""
    by = table.set_index("method")
    fixed = by.loc[[m for m in STANDARD_SCHEDULES if m in by.index]]
    if fixed.empty:
        return []
    best = fixed["log_px"].idxmax()
    return [compare(f"{schedule_label(m)} vs {best}", by.at[m, "log_px"], by.at[m, "log_px_sem"], by.at[best, "log_px"],
                    by.at[best, "log_px_sem"]) for m in methods if m in by.index]


def _fig11_bandits(table: pd.DataFrame) -> list[Comparison]:
    bandits = [m for m in table["method"] if str(m).startswith("gp_bandit")]
    return _method_beats_best(table, bandits)


def _fig12(protocol: str, against: str) -> Callable[[pd.DataFrame], list[Comparison]]:
    """Per case: ``protocol``'s regret below that of ``against``: ``"random arms"``, ``"best"`` (the
    best standard schedule of :data:`TESTBED_BASELINES`) or :data:`TESTBED_USER_GRID`."""
    def check(table: pd.DataFrame) -> list[Comparison]:
        out = []
        for case, rows in table.groupby("case", sort=False):
            by = rows.set_index("protocol")
            if protocol not in by.index:
                continue
            if against == "best":
                fixed = by.loc[[p for p in by.index if p in TESTBED_BASELINES]]
                if fixed.empty:
                    continue
                other = fixed["regret"].idxmin()
            elif against in by.index:
                other = against
            else:
                continue
            out.append(compare(f"{case}: vs {other}", -by.at[protocol, "regret"], by.at[protocol, "regret_sem"],
                               -by.at[other, "regret"], by.at[other, "regret_sem"]))
        return out
    return check


#: Fig 12's row of the grid search a user runs: the log run of the highest final evidence
#: (:data:`tvolib.bandit.testbed_baselines.USER_GRID`; importing it here would import torch).
TESTBED_USER_GRID = "log (kept by evidence)"
#: Fig 12's rows that are schedules a user would keep (the fixed rules beside the bandits).
TESTBED_BASELINES: tuple[str, ...] = ("log", "log (best beta_1)", "linear", "moments", "bias-optimal",
                                      TESTBED_USER_GRID)


def _fig13(table: pd.DataFrame) -> list[Comparison]:
    """Per dataset: the adaptive-d run against each other schedule's best d in hindsight."""
    out = []
    for dataset, rows in table.groupby("dataset", sort=False):
        adaptive = rows[rows["schedule"].str.contains("adaptive")]
        if adaptive.empty:
            continue
        a = adaptive.iloc[0]
        for _, best in rows[rows["d"].astype(str).str.startswith("best")].iterrows():
            out.append(compare_no_worse(f"{dataset}: vs {best['schedule']} {best['d']}", a["log_px"],
                                        a["log_px_sem"], best["log_px"], best["log_px_sem"]))
    return out


def _paper_claims() -> list[Claim]:
    return [
        Claim("fig1_tvo_integrand", "The left Riemann sum lower-bounds log p(x), the right sum upper-bounds it, "
              "and the TVO is tighter than the ELBO", "", _fig1),
        Claim("fig2_reward_surface", "The GP tracks a reward that changes over training; late in training it "
              "flattens", "after 2k, 3k and 10k epochs (d = 2)", _fig2),
        Claim("fig3_beta_over_time", "The bandit's betas: random at first, then below 0.5, then moving towards 1",
              "d = 5, MNIST (drawn, no number)", _fig3),
        Claim("fig4_vae_mnist_fashion", "GP-bandit improves test log p(x) over linear, log and moments", "",
              beats_best("gp_bandit")),
        Claim("fig4_vae_mnist_fashion", "GP-bandit has lower test KL than log and moments", "",
              beats_best("gp_bandit", _KL, ("log", "moments"), higher=False)),
        Claim("fig5_sbn_binarized_mnist", "SBN: GP-bandit's test log p(x) is comparable to log and moments", "",
              comparable_to("gp_bandit", ("log", "moments"))),
        Claim("fig5_sbn_binarized_mnist", "SBN: GP-bandit has lower test KL than log and moments", "",
              beats_best("gp_bandit", _KL, ("log", "moments"), higher=False)),
        Claim("fig6_pcfg", "PCFG: the TVO (log and GP-bandit) learns a better model than REINFORCE, wake-wake "
              "and wake-sleep (KL to the true grammar)", "median of 20 seeds (drawn, no number)", _fig6),
        Claim("fig7_sbn_omniglot", "SBN on Omniglot: GP-bandit beats every schedule in test log p(x) at the "
              "largest S and d", "S = 50, d = 15 (drawn, no number)", largest_cell(beats_best("gp_bandit"))),
        Claim("fig7_sbn_omniglot", "SBN on Omniglot: GP-bandit has the lowest test KL at the largest S and d",
              "S = 50, d = 15", largest_cell(beats_best("gp_bandit", _KL, STANDARD_SCHEDULES, higher=False))),
        Claim("fig8_random_ablation", "GP-bandit beats random schedules", "",
              beats_best("gp_bandit", _LOG_PX, ("random",))),
        Claim("fig8_random_ablation", "GP-bandit's lead over random schedules grows with d", "",
              gap_grows_with_d("gp_bandit", "random")),
        Claim("fig9_training_curves", "GP-bandit's training curves dip more often than fixed schedules' "
              "(exploration)", "", _fig9),
        Claim("table_wallclock", "The bandit matches the grid-searched log schedule in a fraction of the time",
              "log p(x) -110.995 vs -110.722; KL 7.655 vs 8.389; 10.99 h vs 177.01 h", _wallclock),
        Claim("table_permutation", "The sorted (permutation-invariant) GP beats the unsorted one at small budgets",
              "d = 5, S = 10, T = 1000: -91.488 vs -91.554", _permutation),
    ]


def _our_claims() -> list[Claim]:
    return [
        *series_claims("fig4_vae_mnist_fashion"),
        *series_claims("fig8_random_ablation", ("gp_bandit_tvolib", "gp_bandit_integrand")),
        Claim("fig10_bandit_protocol", "This package's protocol chooses fewer degenerate arms than the code's",
              "", _fig10_degenerate, ours_only=True),
        Claim("fig10_bandit_protocol", "This package's protocol trains no worse than the code's (test log p(x))",
              "", _fig10_log_px, ours_only=True),
        Claim("fig11_bandit_budget", "Over a long budget a GP bandit beats the best standard schedule",
              "bandit -91.49 at 1000 epochs (full MNIST, d = 5)", _fig11_bandits, ours_only=True),
        Claim("fig11_bandit_budget", "Over a long budget the bias-optimal schedule beats the best standard schedule",
              "", lambda t: _method_beats_best(t, ["bias_optimal"]), ours_only=True),
        *(Claim("fig12_bandit_testbed", f"On the test bed the {name} has lower regret than {other}", "",
                _fig12(protocol, against), ours_only=True)
          for protocol, name in (("integrand", "default bandit (integrand protocol)"),
                                 ("tvolib", "GP-UCB bandit of the tvolib protocol"))
          for against, other in (("random arms", "random arms"), ("best", "the best standard schedule"),
                                 (TESTBED_USER_GRID, "a user's grid search over beta_1 (7 runs, kept by evidence)"))),
        Claim("fig13_adaptive_d", "One run that chooses d does as well as each schedule's best d in hindsight",
              "", _fig13, ours_only=True),
    ]


#: Every claim, by figure stem, in the order of the results page.
CLAIMS: dict[str, list[Claim]] = {}
for _claim in _paper_claims() + _our_claims():
    CLAIMS.setdefault(_claim.stem, []).append(_claim)
CLAIMS = {stem: CLAIMS[stem] for stem in FIGURES if stem in CLAIMS}


def evaluate(stem: str, table: pd.DataFrame) -> list[ClaimResult]:
    """The claims of figure ``stem`` checked on its saved table (this package's claims only where the
    table holds what they compare).

    Raises:
        KeyError: an unknown stem, naming the known ones.
    """
    if stem not in CLAIMS:
        raise KeyError(f"no claims for figure {stem!r}; figures with claims: {', '.join(CLAIMS)}")
    results = [claim.evaluate(table) for claim in CLAIMS[stem]]
    return [r for r in results if r.comparisons or not r.claim.ours_only]
