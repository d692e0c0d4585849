"""Plotting helpers and table builders on synthetic frames (no training, no runner needed)."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tvolib import plotting  # noqa: E402

SCHEDULES = ["gp_bandit", "linear", "log", "moments"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def run_frame(datasets=("mnist", "fashion_mnist"), S=(10, 50), d=(2, 5, 10), seeds=(0, 1, 2)) -> pd.DataFrame:
    """A synthetic run frame: log p(x) = -90 - schedule offset - seed/10, KL = 5 + d/10."""
    rows = []
    for ds in datasets:
        for s in S:
            for dd in d:
                for i, sch in enumerate(SCHEDULES):
                    for seed in seeds:
                        rows.append(dict(model="vae", dataset=ds, S=s, d=dd, schedule=sch, seed=seed,
                                         test_log_px=-90.0 - i - seed / 10, test_kl=5.0 + dd / 10,
                                         train_seconds=60.0 * (seed + 1)))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- helpers


def test_mean_sem_matches_formula():
    mean, sem, n = plotting.mean_sem([1.0, 2.0, 3.0, float("nan")])
    assert (mean, n) == (2.0, 3)
    assert sem == pytest.approx(1.0 / math.sqrt(3))
    assert math.isnan(plotting.mean_sem([4.0])[1])
    assert plotting.mean_sem([])[2] == 0


@pytest.mark.parametrize("cell, expected", [
    ([0.0, 0.3], [0.0, 0.3]),
    ((0.0, 0.3), [0.0, 0.3]),
    (np.array([0.0, 0.3]), [0.0, 0.3]),
    ("[0.0, 0.3]", [0.0, 0.3]),
    ("[0.  0.3]", [0.0, 0.3]),
    (0.4, [0.4]),
    (float("nan"), []),
])
def test_as_float_list_accepts_csv_round_trips(cell, expected):
    assert plotting.as_float_list(cell) == pytest.approx(expected)


def test_schedule_palette_is_stable_across_figures():
    a = plotting.schedule_palette(["log", "gp_bandit"])
    b = plotting.schedule_palette(["gp_bandit", "random", "linear", "log"])
    assert a["gp_bandit"] == b["gp_bandit"] and a["log"] == b["log"]
    assert len({tuple(c) for c in b.values()}) == 4
    assert plotting.schedule_markers(["random", "gp_bandit"]) == {"gp_bandit": "D", "random": "X"}
    assert plotting.schedule_label("gp_bandit") == "GP-bandit"
    assert plotting.schedule_label("something_new") == "something_new"


def test_dataset_display_prefers_given_label():
    assert plotting.dataset_display("omniglot", {"omniglot": "omniglot (derived 28x28)"}) == "omniglot (derived 28x28)"
    assert plotting.dataset_display("fashion_mnist") == "Fashion MNIST"  # as tvolib.data.LABELS


# ---------------------------------------------------------------- tables


def test_summarise_by_schedule_mean_and_sem():
    frame = run_frame()
    out = plotting.summarise_by_schedule(frame)
    assert len(out) == 2 * 2 * 3 * 4
    assert list(out.columns[:4]) == ["dataset", "S", "d", "schedule"]
    assert (out["n_seeds"] == 3).all()
    row = out[(out.schedule == "linear") & (out.d == 5) & (out.S == 10) & (out.dataset == "mnist")].iloc[0]
    assert row["test_log_px_mean"] == pytest.approx(-91.1)
    assert row["test_log_px_sem"] == pytest.approx(0.1 / math.sqrt(3))
    assert row["test_kl_sem"] == pytest.approx(0.0)
    # schedules follow SCHEDULE_ORDER within a group
    first = out[(out.dataset == "fashion_mnist") & (out.S == 10) & (out.d == 2)]["schedule"].tolist()
    assert first == ["linear", "log", "moments", "gp_bandit"]


def test_summarise_skips_absent_group_columns_and_rejects_missing_metrics():
    frame = run_frame(datasets=("mnist",)).drop(columns="dataset")
    out = plotting.summarise_by_schedule(frame)
    assert "dataset" not in out.columns and len(out) == 2 * 3 * 4
    with pytest.raises(ValueError, match="test_log_px"):
        plotting.summarise_by_schedule(frame.drop(columns="test_log_px"))


def test_wallclock_table_best_run_and_cumulative_time():
    frame = pd.DataFrame({
        "schedule": ["log"] * 4 + ["gp_bandit"] * 3,
        "d": [2, 2, 3, 3, 2, 3, 4],
        "log_beta1": [0.01, 0.3, 0.01, 0.3] + [0.025] * 3,
        "test_log_px": [-115.0, -110.0, -111.0, -113.0, -111.0, -110.5, -112.0],
        "test_kl": [9.0, 8.4, 8.0, 8.1, 7.0, 7.5, 8.0],
        "train_seconds": [1800.0] * 4 + [3000.0] * 3,
        "eval_seconds": [0.0] * 4 + [400.0] * 3,
        "bandit_seconds": [0.0] * 4 + [200.0] * 3,  # GP fits + acquisition count towards the bandit's time
    })
    table = plotting.wallclock_table(frame, time_unit="h")
    assert table["schedule"].tolist() == ["GP-bandit", "grid-searched log"]
    assert list(table.columns) == ["schedule", "best log p(x)", "KL at best", "d at best", "beta_1 at best",
                                   "number of runs", "cumulative run time (h)"]
    bandit, log = table.iloc[0], table.iloc[1]
    assert bandit["best log p(x)"] == -110.5 and bandit["KL at best"] == 7.5 and bandit["d at best"] == 3
    assert bandit["number of runs"] == 3 and bandit["cumulative run time (h)"] == pytest.approx(3.0)
    assert math.isnan(bandit["beta_1 at best"])  # the bandit has no beta_1 to report
    assert log["best log p(x)"] == -110.0 and log["KL at best"] == 8.4 and log["beta_1 at best"] == 0.3
    assert log["cumulative run time (h)"] == pytest.approx(2.0)
    minutes = plotting.wallclock_table(frame, time_columns=("train_seconds",))
    assert minutes["cumulative run time (min)"].tolist() == pytest.approx([150.0, 120.0])
    with pytest.raises(ValueError, match="time_unit"):
        plotting.wallclock_table(frame, time_unit="days")


def _perm_histories() -> pd.DataFrame:
    rows = []
    for d in (5, 10):
        for sort in (True, False):
            for seed in (0, 1):
                for epoch in range(0, 31):
                    evaluated = epoch % 10 == 0
                    value = -100 + epoch / 10 + (1.0 if sort else 0.0) + seed if evaluated else np.nan
                    rows.append(dict(S=10, d=d, schedule="gp_bandit" if sort else "gp_bandit_unsorted",
                                     seed=seed, epoch=epoch, test_log_px=value))
    return pd.DataFrame(rows)


def test_permutation_table_cells_are_seed_means_at_budget():
    hist = _perm_histories()
    table = plotting.permutation_table(hist, budgets=[10, 25])
    assert list(table.columns) == ["T=10", "T=25"]
    assert table.index.names == ["S", "d", "GP"]
    assert [i[2] for i in table.index] == ["sorted (perm. invariant)", "unsorted"] * 2
    # sorted, d=5: mean over seeds 0,1 of -100 + 1 + 1 + seed = -97.5 at T=10; at T=25 the last
    # evaluation is epoch 20: -96.5
    assert table.loc[(10, 5, "sorted (perm. invariant)"), "T=10"] == pytest.approx(-97.5)
    assert table.loc[(10, 5, "sorted (perm. invariant)"), "T=25"] == pytest.approx(-96.5)
    assert table.loc[(10, 10, "unsorted"), "T=10"] == pytest.approx(-98.5)
    default = plotting.permutation_table(hist)
    assert list(default.columns) == ["T=10", "T=20", "T=30"]


def test_permutation_table_counts_rounds():
    hist = _perm_histories()
    rounds = pd.DataFrame([dict(S=10, d=d, schedule=s, seed=seed, epoch=e)
                           for d in (5, 10) for s in ("gp_bandit", "gp_bandit_unsorted") for seed in (0, 1)
                           for e in (3, 6, 9, 12)])
    table = plotting.permutation_table(hist, budgets=[10], rounds=rounds)
    assert list(table.columns) == ["T=10 / 3 rounds"]
    as_bool = hist.assign(sort=hist["schedule"] == "gp_bandit").drop(columns="schedule")
    by_flag = plotting.permutation_table(as_bool, budgets=[10], variant="sort")
    assert by_flag["T=10"].tolist() == pytest.approx(plotting.permutation_table(hist, budgets=[10])["T=10"].tolist())


def test_markdown_table_by_hand():
    frame = pd.DataFrame({"name": ["a|b", "c"], "value": [1.23456, float("nan")], "n": [3, 4]})
    text = plotting.markdown_table(frame)
    lines = text.strip().split("\n")
    assert lines[0] == "| name | value | n |"
    assert lines[1] == "| :--- | ---: | ---: |"
    assert lines[2] == r"| a\|b | 1.235 | 3 |"
    assert lines[3] == "| c |  | 4 |"
    indexed = plotting.markdown_table(frame.set_index("name"))
    assert indexed.split("\n")[0] == "| name | value | n |"


def test_save_table_and_figure(tmp_path):
    frame = run_frame(datasets=("mnist",), S=(10,), d=(2,), seeds=(0,))
    paths = plotting.save_table(frame, "table_x", tmp_path, caption="Caption line")
    assert [p.name for p in paths] == ["table_x.csv", "table_x.md"]
    assert pd.read_csv(paths[0]).shape == frame.shape
    assert paths[1].read_text().startswith("Caption line\n\n| model |")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    out = plotting.save_figure(fig, "fig_x", tmp_path)
    assert [p.name for p in out] == ["fig_x.pdf", "fig_x.png"]
    assert all(p.stat().st_size > 0 for p in out)
    first = out[0].read_bytes()
    plotting.save_figure(fig, "fig_x", tmp_path)
    assert out[0].read_bytes() == first  # no timestamp: reproducible PDFs
    with pytest.raises(ValueError, match="bare file stem"):
        plotting.save_figure(fig, "fig_x.png", tmp_path)


# ---------------------------------------------------------------- Fig 1


def test_riemann_sums_of_a_line_are_exact():
    beta = np.linspace(0, 1, 101)
    values = -10 + 4 * beta  # integral -8
    sums = plotting.riemann_sums(beta, values, [0.0, 0.5])
    assert sums["left"] == pytest.approx(-10 * 0.5 + -8 * 0.5)
    assert sums["right"] == pytest.approx(-8 * 0.5 + -6 * 0.5)
    assert sums["elbo"] == pytest.approx(-10)
    assert sums["area"] == pytest.approx(-8)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8, unique=True), st.floats(0.1, 5.0))
def test_riemann_sums_bracket_the_area_of_increasing_integrands(points, scale):
    beta = np.linspace(0, 1, 401)
    values = -20 + scale * np.sqrt(beta)  # increasing: left <= area <= right, elbo <= left
    schedule = [0.0] + sorted(points)
    sums = plotting.riemann_sums(beta, values, schedule)
    assert sums["elbo"] <= sums["left"] + 1e-9
    assert sums["left"] <= sums["area"] + 1e-6
    assert sums["area"] <= sums["right"] + 1e-6


def test_riemann_sums_reject_bad_schedules():
    beta = np.linspace(0, 1, 11)
    with pytest.raises(ValueError, match="schedule"):
        plotting.riemann_sums(beta, beta, [0.2, 0.5])
    with pytest.raises(ValueError, match="cover"):
        plotting.riemann_sums(beta[2:], beta[2:], [0.0, 0.5])


def test_plot_integrand_one_panel_per_curve():
    beta = np.linspace(0, 1, 50)
    curves = [plotting.IntegrandCurve("closed form", beta, -10 + 3 * beta ** 0.3, log_px=-7.9,
                                      estimate=(beta[::5], -10 + 3 * beta[::5] ** 0.3)),
              plotting.IntegrandCurve("VAE", beta, -100 + 8 * beta ** 0.2)]
    fig = plotting.plot_integrand(curves, [0.0, 0.1, 0.4], title="scale")
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 3  # left and right rectangles per interval
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("ELBO") for lab in labels) and "SNIS estimate" in labels
    assert fig._suptitle.get_text() == "scale"


# ---------------------------------------------------------------- Fig 2


def _bandit_history(n=12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    b = rng.uniform(0.05, 0.95, n)
    return pd.DataFrame({"round": np.arange(n), "epoch": 6 * (np.arange(n) + 1),
                         "arm": [[0.0, float(v)] for v in b], "reward": rng.normal(size=n)})


def test_plot_reward_surface_three_stages_with_fake_posterior():
    hist = _bandit_history()
    calls = []

    def posterior(h, index, grid):
        calls.append((index, grid.shape))
        return np.sin(3 * grid[:, 0]) * index, np.full(len(grid), 0.2)

    fig = plotting.plot_reward_surface(hist, posterior=posterior, grid_size=50)
    assert [c[1] for c in calls] == [(50, 1)] * 3
    assert calls[-1][0] == len(hist) - 1
    panels = [ax for ax in fig.axes if ax.get_xlabel() == r"$\beta_1$"]
    assert len(panels) == 3
    # observations shown up to each stage's round
    counts = [len(ax.collections[-1].get_offsets()) for ax in panels]
    assert counts == sorted(counts) and counts[-1] == len(hist)


def test_plot_reward_surface_rejects_d_above_2():
    hist = _bandit_history()
    hist["arm"] = [[0.0, 0.2, 0.5]] * len(hist)
    with pytest.raises(ValueError, match="d = 2"):
        plotting.plot_reward_surface(hist, posterior=lambda h, i, g: (g[:, 0], g[:, 0]))


def test_stage_rounds_picks_the_gp_as_of_each_epoch():
    hist = pd.DataFrame({"epoch": np.arange(20, 121, 10)})
    assert plotting.stage_rounds(hist, fractions=(0.2, 0.3, 1.0)) == [0, 1, 10]
    assert plotting.stage_rounds(hist, [24, 36, 120]) == [0, 1, 10]
    assert plotting.stage_rounds(hist, [5, 10, 25]) == [0]  # before the first round: the first round


# ---------------------------------------------------------------- Fig 3


def test_betas_long_and_plot_betas_over_time():
    frame = pd.DataFrame({"epoch": np.arange(30),
                          "betas": [str([0.0, 0.1 + e / 100, 0.5]) for e in range(30)]})
    long = plotting.betas_long(frame)
    assert len(long) == 60 and set(long["j"]) == {1, 2}
    fig = plotting.plot_betas_over_time(frame, title="t")
    top, bottom = fig.axes
    assert len(top.collections[0].get_offsets()) == 60
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["early", "middle", "late"]
    assert len(bottom.patches) == 3  # one step histogram per phase


# ---------------------------------------------------------------- Figs 4-8


def test_plot_metric_vs_d_grid_lines_and_error_bars():
    frame = run_frame()
    fig = plotting.plot_metric_vs_d(frame, title="quick profile")
    assert len(fig.axes) == 2 * 4  # 2 metrics x (2 datasets x 2 S)
    ax = fig.axes[0]
    assert len(ax.containers) == len(SCHEDULES)  # one errorbar container per schedule
    assert ax.get_title() == "MNIST, S=10"
    assert fig.legends and [t.get_text() for t in fig.legends[0].get_texts()] == ["linear", "log", "moments", "GP-bandit"]
    # means sit at d + dodge offset with the expected values
    line = ax.containers[0].lines[0]
    assert np.allclose(np.round(line.get_xdata()), [2, 5, 10])
    assert np.allclose(line.get_ydata().astype(float), -91.1)  # linear is SCHEDULES[1]


def test_plot_metric_vs_d_schedule_subset_and_single_seed():
    frame = run_frame(datasets=("omniglot",), S=(10,), seeds=(0,))
    fig = plotting.plot_metric_vs_d(frame, ("test_log_px",), schedules=["random", "gp_bandit", "log"],
                                    dataset_labels={"omniglot": "omniglot (derived 28x28)"})
    assert len(fig.axes) == 1
    assert fig.axes[0].get_title() == "omniglot (derived 28x28), S=10"
    assert len(fig.axes[0].containers) == 2  # random has no runs; the others are kept in given order
    with pytest.raises(ValueError, match="no runs"):
        plotting.plot_metric_vs_d(frame, schedules=["random"])


# ---------------------------------------------------------------- Fig 9


def _histories() -> pd.DataFrame:
    rows = []
    for d in (5, 15):
        for sch in SCHEDULES:
            for seed in (0, 1):
                for epoch in range(50):
                    rows.append(dict(dataset="mnist", d=d, schedule=sch, seed=seed, epoch=epoch,
                                     train_iwae=-200 + 100 * (1 - np.exp(-epoch / 10)) - seed))
    return pd.DataFrame(rows)


def test_plot_training_curves_one_line_per_schedule_per_panel():
    fig = plotting.plot_training_curves(_histories())
    assert len(fig.axes) == 2  # one dataset row, two d columns
    for ax in fig.axes:
        assert len(ax.lines) == len(SCHEDULES)
        assert np.allclose(ax.lines[0].get_ydata()[0], -200)  # first seed only
    assert fig.axes[1].get_title() == "MNIST, d=15"
    mean = plotting.plot_training_curves(_histories(), seed=None)
    assert np.allclose(mean.axes[0].lines[0].get_ydata()[0], -200.5)
    assert len(mean.axes[0].collections) == len(SCHEDULES)  # s.e. bands


def test_plot_training_curves_grid_rows_by_dataset():
    hist = pd.concat([_histories(), _histories().assign(dataset="omniglot")])
    fig = plotting.plot_training_curves(hist, dataset_labels={"omniglot": "omniglot (derived 28x28)"})
    assert [ax.get_title() for ax in fig.axes] == ["MNIST, d=5", "MNIST, d=15", "omniglot (derived 28x28), d=5",
                                                  "omniglot (derived 28x28), d=15"]


# ---------------------------------------------------------------- Fig 1 closed form


def test_linear_gaussian_curve_area_is_log_px_and_snis_agrees():
    beta = np.linspace(0, 1, 4001)
    curve = plotting.linear_gaussian_curve(beta, S=2000)
    sums = plotting.riemann_sums(curve.beta, curve.values, [0.0, 0.1, 0.4])
    assert sums["area"] == pytest.approx(curve.log_px, abs=1e-3)  # Eq. 3: int_0^1 dlogZ = log p(x)
    assert sums["elbo"] < sums["left"] < curve.log_px < sums["right"]
    points, estimate = curve.estimate
    exact = np.interp(points, beta, curve.values)
    assert np.abs(estimate - exact).max() < 0.5  # SNIS with 2000 samples tracks the exact curve
    assert plotting.integrand_grid([0.0, 0.0125], 5).tolist() == [0.0, 0.0125, 0.25, 0.5, 0.75, 1.0]


def test_reward_surface_and_betas_without_gp_rounds_say_so():
    empty = pd.DataFrame(columns=["round", "epoch", "arm", "reward", "source"])
    fig = plotting.plot_reward_surface(empty, title="t")
    assert "no bandit rounds" in fig.axes[0].texts[0].get_text()
    random_only = _bandit_history(4).assign(source="random")
    assert plotting.stage_rounds(random_only, [10, 20]) == []
    fig = plotting.plot_reward_surface(random_only)
    assert "before the first GP fit" in fig.axes[0].texts[0].get_text()
    fig = plotting.plot_betas_over_time(empty, column="arm")
    assert "no bandit rounds" in fig.axes[0].texts[0].get_text()


def test_stage_rounds_skips_rounds_without_a_gp():
    hist = _bandit_history(6).assign(source=["random"] * 3 + ["gp"] * 3)  # epochs 6..36
    assert plotting.stage_rounds(hist, [6, 24, 100]) == [3, 5]
