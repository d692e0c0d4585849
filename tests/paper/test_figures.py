"""figure(): from cached run folders to saved outputs under the figure's stem (fake trainer, no training)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tvolib import runs  # noqa: E402
from tvolib.runs import store  # noqa: E402
from tvolib.paper import results, sweeps  # noqa: E402
from tvolib.paper.figures import BUILDERS, NOTEBOOK_PARAMETERS, FigureResult, figure, notebook_parameters  # noqa: E402
from tvolib.paper.names import PCFG_METRICS  # noqa: E402
from tvolib.paper.profiles import get_profile  # noqa: E402
from tvolib.paper.sweeps import FIGURES, figure_configs  # noqa: E402
from tvolib.training.run_folder import RunFolder  # noqa: E402

SCHEDULE_OFFSET = {"linear": 3.0, "log": 1.0, "moments": 2.0, "gp_bandit": 0.0, "gp_bandit_unsorted": 0.5,
                   "random": 4.0, "none": 0.0, "gp_bandit_adaptive": -0.5, "bias_optimal": 1.5}


def fake_train(config, run_dir, **_):
    """Histories with test log p(x) = -100 - offset(schedule) - seed + epoch / 10 at evaluated epochs; a
    bandit's rounds also in the final checkpoint (what its schedule_history.csv is verified against)."""
    folder = RunFolder(run_dir)
    folder.save_model({"weights": torch.zeros(1)}, config.digest())
    offset = SCHEDULE_OFFSET[config.schedule] + config.seed
    every = getattr(config, "eval_every", 1) or config.epochs
    history = []
    for epoch in range(config.epochs + 1):
        row = {"epoch": epoch, "train_iwae": -150.0 + epoch - offset, "betas": [0.0, 0.3]}
        if epoch % every == 0 or epoch == config.epochs:
            row["test_log_px"] = -100.0 - offset + epoch / 10
            row.update({m: 0.1 * (1 + offset) for m in PCFG_METRICS})
        history.append(row)
    arms = ([0.2, 0.4, 0.6, 0.8][:config.d - 1], [0.05, 0.0501, 0.0502, 0.0503][:config.d - 1])
    gp = config.schedule in sweeps.GP_SCHEDULES
    rounds = [{"round": r, "epoch": r + 1, "arm": [0.0, 0.2, 0.4, 0.6, 0.8][:config.d], "reward": 0.1,
               "source": "random" if r < 2 or not gp else "gp", "next_arm": arms[r % 2], "next_degenerate": r % 2 == 1}
              for r in range(config.epochs)]  # GP rounds from round 2 on, every other arm degenerate
    rounds = rounds if config.schedule in sweeps.WINDOWED_SCHEDULES else []  # fixed schedules have no rounds
    if config.schedule == "gp_bandit_adaptive":  # d = 2, 3, ..., d_max, 2, ... (each round a window of one epoch)
        rounds = [{"round": r, "start_epoch": r, "epoch": r + 1, "d": 2 + r % (config.d - 1), "reward": 0.1,
                   "arm": [0.1 * (k + 1) for k in range(1 + r % (config.d - 1))], "source": "random" if r < 2 else "gp",
                   "next_arm": [0.1 * (k + 1) for k in range(1 + (r + 1) % (config.d - 1))], "next_degenerate": False}
                  for r in range(config.epochs)]
    folder.save_checkpoint({"digest": config.digest(), "epoch": config.epochs, "optimizers": [], "rng": {},
                            "schedule": {"round": len(rounds), "history": rounds}, "history": history, "timers": {}})
    final = {"test_log_px": history[-1]["test_log_px"], "test_kl": 5.0 + offset, "train_seconds": 60.0,
             "eval_seconds": 6.0, "bandit_seconds": 0.0, "epochs": config.epochs, "completed": True}
    if getattr(config, "dataset", None) == "mnist":
        final["dataset_label"] = "MNIST (as the run read it)"
    return SimpleNamespace(config=config, history=history, schedule_history=rounds, final=final)


@pytest.fixture()
def cached(tmp_path, monkeypatch):
    """Run every smoke config of the tested figures with the fake trainer into a results folder.

    The fake checkpoints hold hand-made bandit rounds, not a schedule's state: the store's checks that
    a schedule takes them and that every value keeps its rule (tests/runs/test_repair.py,
    tests/bandit/test_history_rules.py) are switched off here; schedule_history.csv is still checked
    against them, row by row and cell by cell."""
    monkeypatch.setattr(store, "_bandit_record_problem", lambda config, state: "")
    monkeypatch.setattr(store, "check_history", lambda rows, schedule=None, **_: None)
    root = tmp_path / "results"

    def run(name):
        runs.run_configs(figure_configs(name, "smoke"), results_root=root, train_fn=fake_train, max_workers=1,
                                progress=False)
        return figure(name, profile="smoke", results_root=root, figures_dir=tmp_path / "figures")
    return run


def test_every_stem_has_a_builder():
    assert list(BUILDERS) == list(FIGURES)


def test_fig4_summary_labels_and_files(cached, tmp_path):
    result = cached("fig4_vae_mnist_fashion")
    assert isinstance(result, FigureResult) and result.name == "fig4_vae_mnist_fashion"
    assert [p.name for p in result.paths] == [f"fig4_vae_mnist_fashion.{ext}" for ext in ("pdf", "png", "csv", "md")]
    assert all(p.parent == tmp_path / "figures" and p.stat().st_size for p in result.paths)
    row = result.table.query("dataset == 'mnist' and d == 5 and schedule == 'log'").iloc[0]
    assert row["test_log_px_mean"] == pytest.approx(-100.0 - 1.0 + 6 / 10)  # one seed, final epoch 6
    assert result.figure.axes[0].get_title() == "MNIST (as the run read it), S=5"  # label from the results
    text = result._repr_markdown_()
    assert text.startswith("profile 'smoke'") and "**Scale.** profile 'smoke'" in text
    # its numbers and one-line title beside the picture; its claims checked on them; the results page
    md = (tmp_path / "figures" / "fig4_vae_mnist_fashion.md").read_text()
    assert md.startswith("**Fig 4. VAE on MNIST and Fashion-MNIST: test log p(x) and KL against d (profile smoke).**")
    assert result.figure._suptitle.get_text() == "Fig 4. VAE on MNIST and Fashion-MNIST: test log p(x) and KL against d " \
        "(profile smoke)"
    assert result.claims and "GP-bandit improves test log p(x)" in result.verdict()._repr_markdown_()
    page = (tmp_path / "figures" / "RESULTS.md").read_text()
    assert "| [Fig 4](fig4_vae_mnist_fashion.png)" in page and "not computed" in page  # the other figures


def test_alias_and_prefix_give_the_same_stem(cached):
    assert cached("fig4_vae").name == cached("fig4").name == "fig4_vae_mnist_fashion"


def test_tables_are_saved_under_their_stems(cached, tmp_path):
    wall = cached("table_wallclock")
    assert [p.name for p in wall.paths] == ["table_wallclock.csv", "table_wallclock.md"] and wall.figure is None
    assert wall.table["schedule"].tolist() == ["GP-bandit", "grid-searched log"]
    assert wall.caption.startswith("Wall-clock table (Appendix D.3), VAE on ")
    perm = cached("table_permutation")
    assert list(perm.table.columns) == ["T=3 / 3 rounds", "T=3 / 3 rounds s.e.", "T=6 / 6 rounds",
                                        "T=6 / 6 rounds s.e."]
    assert perm.table.iloc[0, 0] == pytest.approx(-100.0 + 0.3)  # sorted GP, T = 3


def test_fig6_writes_figure_and_table_under_one_stem(cached):
    result = cached("fig6_pcfg")
    assert [p.name for p in result.paths] == ["fig6_pcfg.pdf", "fig6_pcfg.png", "fig6_pcfg.csv", "fig6_pcfg.md"]
    assert result.table.loc[(2, "TVO-log"), "KL(p_theta || p_true)"] == pytest.approx(0.2)
    assert "tvolib.paper.sweeps.pcfg_sweep" in result.scale


def test_fig3_and_fig9_draw_from_the_histories(cached):
    assert "no bandit rounds" not in str(cached("fig3_beta_over_time").figure.axes[0].texts)
    curves = cached("fig9_training_curves").figure
    assert len(curves.axes) == 4  # four datasets x one d


def test_fig3_summarises_each_seed_and_reports_the_degenerate_share(cached):
    result = cached("fig3_beta_over_time")
    table = result.details["arm_summary"]
    epochs = result.frame["epochs"].iloc[0]
    # smoke: one seed; the profile's run, then the bandit budget's (Fig 11's GP-bandit runs: the code's
    # protocol, then this package's two)
    assert list(table["budget"]) == [f"{epochs} epochs", f"{epochs} epochs (bandit budget)",
                                     f"{epochs} epochs (bandit budget): GP-bandit (tvolib)",
                                     f"{epochs} epochs (bandit budget): GP-bandit (integrand)"]
    assert list(table["seed"]) == [0, 0, 0, 0] and (table["rounds"] == epochs).all()
    # GP rounds 2..epochs-1 choose alternately a spread and a degenerate arm
    gp = epochs - 2
    assert (table["gp_rounds"] == gp).all()
    assert table["degenerate_share"].tolist() == pytest.approx([(gp // 2) / gp] * 4)
    assert f"(bandit budget): {gp} of {epochs} rounds' arms chosen by the GP, {(gp // 2) / gp:.0%}" in result.caption
    assert table["test_log_px"].tolist() == pytest.approx([-100.0 + epochs / 10] * 4)
    assert [ax.get_title() for ax in result.figure.axes if ax.get_title()] == list(table["budget"])


def test_fig10_lists_every_protocol_variant_beside_the_schedules(cached):
    table = cached("fig10_bandit_protocol").table
    fixed_names = [f"{s} (schedule)" for s in ("log", "linear", "moments", "random")]
    short, long = (part for _, part in table.groupby("budget", sort=False))
    assert list(short["method"][:4]) == fixed_names and list(short["method"][4:]) == list(sweeps.PROTOCOL_VARIANTS)
    fixed, bandit = short.iloc[:4], short.iloc[4:]
    assert (fixed["gp_rounds"] == 0).all() and fixed["degenerate_share"].isna().all()
    assert (bandit["gp_rounds"] > 0).all() and bandit["degenerate_share"].between(0.3, 0.7).all()
    # the second row: Fig 11's runs, the code's and this package's protocols named as in the first
    assert long["budget"].iloc[0].endswith("(bandit budget)")
    assert list(long["method"]) == fixed_names + ["bias-optimal (schedule)", "code", "tvolib", "integrand"]  # Fig 11's series
    assert long["log_px"].iloc[0] == pytest.approx(-100.0 - 1.0 + 6 / 10)


def test_fig11_draws_the_budgets_curves_arms_and_degenerate_thirds(cached):
    result = cached("fig11_bandit_budget")
    table = result.table.set_index("method")
    assert list(table.index) == list(sweeps.BUDGET_SERIES)
    assert table.loc["log", "log_px"] == pytest.approx(-100.0 - 1.0 + 6 / 10)  # the run's last evaluation
    # smoke: 6 rounds, the GP's decisions at epochs 3..6 alternate spread / degenerate arms: none in the
    # first third, one of two in each of the others
    assert table.loc["gp_bandit", "gp_rounds"] == 4 and table.loc["log", "gp_rounds"] == 0
    assert [table.loc["gp_bandit", f"degenerate_share_{p}"] for p in ("middle", "late")] == [0.5, 0.5]
    assert np.isnan(table.loc["gp_bandit", "degenerate_share_early"])
    curves, *arms, shares = result.figure.axes
    assert len(curves.lines) == len(sweeps.BUDGET_SERIES)
    assert np.allclose(curves.lines[0].get_xdata(), range(7))  # evaluated every epoch at smoke
    assert [ax.get_title() for ax in arms] == ["GP-bandit: arms, every seed", "GP-bandit (tvolib): arms, every seed",
                                               "GP-bandit (integrand): arms, every seed"]
    assert "at least 3 rounds per run train an arm chosen by the GP" in result.caption
    assert [p.name for p in result.paths] == [f"fig11_bandit_budget.{e}" for e in ("pdf", "png", "csv", "md")]


def test_one_more_bandit_series_reaches_figs_3_10_and_11(cached, monkeypatch):
    """A series added to BUDGET_SERIES (here the box domain) is drawn by Fig 11 (its own arms panel),
    gets its own column in Fig 3 and its own line in Fig 10's second row."""
    name = "GP-bandit (box domain)"
    box = ("gp_bandit", {"protocol": "code", "arm_domain": "box"})
    monkeypatch.setattr(sweeps, "BUDGET_SERIES", {**sweeps.BUDGET_SERIES, name: box})
    fig11 = cached("fig11_bandit_budget")
    assert list(fig11.table["method"]) == list(sweeps.BUDGET_SERIES)
    assert [ax.get_title() for ax in fig11.figure.axes[1:5]] == [
        "GP-bandit: arms, every seed", "GP-bandit (tvolib): arms, every seed",
        "GP-bandit (integrand): arms, every seed", f"{name}: arms, every seed"]
    fig3 = cached("fig3_beta_over_time")
    assert list(fig3.details["arm_summary"]["budget"]) == ["6 epochs", "6 epochs (bandit budget)",
                                          "6 epochs (bandit budget): GP-bandit (tvolib)",
                                          "6 epochs (bandit budget): GP-bandit (integrand)",
                                          f"6 epochs (bandit budget): {name}"]
    long = cached("fig10_bandit_protocol").table.query("budget == '6 epochs (bandit budget)'")
    assert list(long["method"])[-4:] == ["code", "tvolib", "integrand", name]


def test_fig13_puts_the_adaptive_bandit_beside_each_fixed_d_and_its_grid(cached):
    result = cached("fig13_adaptive_d")
    assert [p.name for p in result.paths] == [f"fig13_adaptive_d.{e}" for e in ("pdf", "png", "csv", "md")]
    table = result.table.set_index(["dataset", "schedule", "d"])
    adaptive = table.loc[("mnist", "GP-bandit (adaptive d)", "<= 5")]
    assert adaptive["log_px"] == pytest.approx(-100.0 + 0.5 + 0.6) and adaptive["runs_per_seed"] == 1
    assert adaptive["minutes_per_seed"] == pytest.approx(66.0 / 60)
    best = table.loc[("mnist", "log", "best (d = 2)")]  # the fake gives every d the same numbers: the first
    assert best["runs_per_seed"] == 2 and best["minutes_per_seed"] == pytest.approx(2 * 66.0 / 60)
    assert {s for _, s, _ in table.index} == {"GP-bandit (adaptive d)", "log", "moments", "GP-bandit", "GP-bandit (tvolib)",
                                                 "GP-bandit (integrand)"}
    assert len(result.figure.axes) == 3 * 2  # log p(x), KL, d over training; MNIST, Fashion-MNIST
    rounds = result.details["rounds"]
    assert set(rounds["d"]) == {2, 3, 4, 5} and set(rounds["dataset"]) == {"mnist", "fashion_mnist"}


def test_fig11_says_it_was_not_run_where_the_profile_has_no_budget(tmp_path):
    profile = get_profile("smoke").replace(budget=None)
    result = figure("fig11_bandit_budget", profile=profile, results_root=tmp_path / "results",
                    figures_dir=tmp_path / "figures")
    assert result.caption.startswith("Not run at profile 'smoke'")
    assert (tmp_path / "figures" / "fig11_bandit_budget.png").is_file()


def test_dataset_labels_fall_back_to_the_loaded_data(data_root):
    frame = pd.DataFrame({"dataset": ["mnist", "fashion_mnist"], "dataset_label": ["from run", None]})
    assert results.dataset_labels(frame, data_root) == {"mnist": "from run", "fashion_mnist": "Fashion MNIST"}


def test_runs_of_one_dataset_on_different_files_are_refused(data_root):
    frame = pd.DataFrame({"dataset": ["omniglot"] * 3,
                          "dataset_label": ["omniglot", "omniglot (derived 28x28)", "omniglot"]})
    with pytest.raises(ValueError, match=r"'omniglot' were trained on different data \('omniglot', "
                                         r"'omniglot \(derived 28x28\)'\)"):
        results.dataset_labels(frame, data_root)


def test_pcfg_reference_levels_are_the_exact_values():
    """Fig 6's uniform level and length-cut floor for the quick scale (25 words) and the 15-word cut."""
    from tvolib.paper.figures import pcfg_reference_levels
    from tvolib.training import PCFGConfig

    (_, uniform), (_, floor) = pcfg_reference_levels(PCFGConfig(train_max_words=25, max_productions=49))
    assert uniform == pytest.approx(0.053957, abs=1e-6)
    assert floor == pytest.approx(0.00221, rel=0.01)
    assert pcfg_reference_levels(PCFGConfig(train_max_words=15))[1][1] == pytest.approx(0.007027, rel=1e-3)


def test_a_figures_dir_that_is_a_file_fails_before_the_sweep(tmp_path, monkeypatch):
    target = tmp_path / "figures"
    target.write_text("a file")
    monkeypatch.setattr(runs, "run_configs", lambda *a, **k: pytest.fail("the sweep ran before the check"))
    with pytest.raises(OSError, match=f"figures folder {target} is a file, not a folder"):
        figure("fig4_vae_mnist_fashion", profile="smoke", results_root=tmp_path / "results", figures_dir=target)


def test_notebook_parameters_refuse_a_misspelt_name():
    namespace = {"profile": "smoke", "executor": None, "data_root": None, "results_root": None,
                 "figures_dir": None, "figure": figure, "In": [], "_oh": {}, "pd": pd}
    assert notebook_parameters(namespace)["profile"] == "smoke"
    with pytest.raises(ValueError, match=r"unknown notebook parameter\(s\) \['profil'\]; accepted: profile"):
        notebook_parameters({**namespace, "profil": "smoke"})


def test_every_notebook_defines_exactly_the_parameters_it_checks():
    import json

    for path in sorted(Path(__file__).resolve().parents[2].glob("notebooks/[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        parameters = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        names = [line.split("=")[0].strip() for line in parameters["source"] if "=" in line]
        assert tuple(names) == NOTEBOOK_PARAMETERS, path.name
        assert any("notebook_parameters(globals())" in "".join(c["source"]) for c in cells), path.name


def test_papermill_with_a_misspelt_parameter_fails_before_any_run(tmp_path):
    papermill = pytest.importorskip("papermill")
    notebook = Path(__file__).resolve().parents[2] / "notebooks" / "04_fig4_vae_mnist_fashion.ipynb"
    with pytest.raises(papermill.PapermillExecutionError, match="unknown notebook parameter"):
        papermill.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), parameters={"profil": "smoke"},
                                   cwd=str(notebook.parent), progress_bar=False, kernel_name="python3")


def test_figures_read_only_verified_bandit_records(cached, tmp_path):
    """Fig 10 with every bandit run's schedule_history.csv cut to one round: the damage is refused (the
    table's degenerate share and GP-round count would otherwise come from the cut files)."""
    cached("fig10_bandit_protocol")
    root = tmp_path / "results"
    cut = 0
    for config in figure_configs("fig10_bandit_protocol", "smoke"):
        path = runs.run_dir(config, root) / "schedule_history.csv"
        if config.schedule in sweeps.WINDOWED_SCHEDULES:
            path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
            cut += 1
    assert cut > 1
    with pytest.raises(runs.RunFolderError, match=r"schedule_history\.csv holds 1 rows, not the \d+ rounds recorded"):
        figure("fig10_bandit_protocol", profile="smoke", results_root=root, figures_dir=tmp_path / "figures")
    with pytest.raises(runs.RunFolderError, match=r"schedule_history\.csv holds 1 rows"):
        results.collect_schedule_histories(figure_configs("fig10_bandit_protocol", "smoke"), root)


@pytest.mark.parametrize("argument", ["figures_dir", "results_root", "data_root"])
def test_an_empty_path_is_an_error_not_the_default(argument, tmp_path, monkeypatch):
    """papermill's -p figures_dir '' used to mean "the default" and overwrote the committed figures."""
    monkeypatch.setenv("TVOLIB_FIGURES", str(tmp_path / "env-figures"))
    monkeypatch.setattr(runs, "run_configs", lambda *a, **k: pytest.fail("the sweep ran before the check"))
    folders = {"results_root": tmp_path / "results", "figures_dir": tmp_path / "figures", argument: ""}
    with pytest.raises(ValueError, match=rf"{argument} must be a folder path.*; got '' \(an empty path is never the "
                                         r"default\)"):
        figure("fig11_bandit_budget", profile="smoke", **folders)
    assert not (tmp_path / "env-figures").exists()


def test_a_smoke_run_never_writes_into_the_committed_figures_unless_named(tmp_path, monkeypatch):
    """At profile smoke, with neither figures_dir nor $TVOLIB_FIGURES, the figures go to a scratch folder
    (the repository is a stand-in here, so that the test cannot touch the real figures/)."""
    from tvolib import paths

    repo = tmp_path / "repo"
    (repo / "figures").mkdir(parents=True)
    monkeypatch.setattr(paths, "repo_root", lambda: repo)
    monkeypatch.setitem(FIGURES, "fig11_bandit_budget", lambda profile: [])  # its "not run" figure: no training
    monkeypatch.delenv("TVOLIB_FIGURES", raising=False)
    result = figure("fig11_bandit_budget", profile="smoke", results_root=tmp_path / "results")
    assert {p.parent for p in result.paths} == {repo / ".cache" / "figures-smoke"} and result.paths[0].is_file()
    assert not any((repo / "figures").iterdir())
    named = figure("fig11_bandit_budget", profile="smoke", results_root=tmp_path / "results",
                   figures_dir=repo / "figures")  # asked for by name
    assert {p.parent for p in named.paths} == {repo / "figures"}
    monkeypatch.setenv("TVOLIB_FIGURES", str(tmp_path / "env"))
    assert figure("fig11_bandit_budget", profile="smoke", results_root=tmp_path / "results").paths[0].parent == (
        tmp_path / "env")
    monkeypatch.delenv("TVOLIB_FIGURES")
    quick = figure("fig11_bandit_budget", profile="quick", results_root=tmp_path / "results")
    assert {p.parent for p in quick.paths} == {repo / "figures"}  # the committed figures' profile


def test_notebook_parameters_refuse_an_empty_path():
    namespace = {"profile": "smoke", "executor": None, "data_root": None, "results_root": None, "figures_dir": ""}
    with pytest.raises(ValueError, match=r"notebook parameter figures_dir is '': give a folder, or None"):
        notebook_parameters(namespace)


def test_the_test_suite_never_writes_into_the_committed_figures():
    """Unless $TVOLIB_FIGURES names a folder, pytest runs (unit tests, notebooks under nbval) send figures
    to a scratch folder (the repository's conftest.py)."""
    from tvolib import paths

    assert paths.figures_path().resolve() != (paths.repo_root() / "figures").resolve()
