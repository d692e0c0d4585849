"""The results page: generated from the saved tables, never stale, and the README's copy of its summary."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tvolib.paper.results_page import (
    PAGE_NAME,
    headline,
    README_BEGIN,
    README_END,
    readme_block,
    render_results_page,
    update_readme,
    write_results_page,
)
from tvolib.paths import repo_root


def _fig4(folder: Path, bandit: float) -> None:
    rows = [("log", -100.0), ("moments", -101.0), ("linear", -110.0), ("gp_bandit", bandit)]
    pd.DataFrame([{"dataset": "mnist", "S": 10, "d": 5, "schedule": s, "n_seeds": 3, "test_log_px_mean": v,
                   "test_log_px_sem": 0.5, "test_kl_mean": 5.0, "test_kl_sem": 0.1} for s, v in rows]
                 ).to_csv(folder / "fig4_vae_mnist_fashion.csv", index=False)
    (folder / "fig4_vae_mnist_fashion.md").write_text("**Fig 4.** profile 'quick': 1000 train / 300 test\n")


def test_the_page_reads_each_figure_table_and_says_which_are_missing(tmp_path):
    _fig4(tmp_path, -98.0)
    page = render_results_page(tmp_path)
    assert page.startswith("# Results\n") and "**The rule.**" in page
    row = next(line for line in page.splitlines() if line.startswith("| [Fig 4]") and "over linear" in line)
    assert "Δ +2.00 ± 0.71 (quick)" in row and "**reproduced**" in row
    assert "(../notebooks/04_fig4_vae_mnist_fashion.ipynb)" in row
    fig1 = next(line for line in page.splitlines() if line.startswith("| [Fig 1]"))
    assert "not computed" in fig1
    assert "| mnist, S = 10, d = 5: vs log | +2.00 ± 0.71 (+2.8 se) | holds |" in page


def test_a_regenerated_table_changes_the_page(tmp_path):
    _fig4(tmp_path, -98.0)
    first = write_results_page(tmp_path).read_text()
    _fig4(tmp_path, -104.0)
    second = write_results_page(tmp_path).read_text()
    assert first != second and "**not reproduced**" in second
    assert (tmp_path / PAGE_NAME).read_text() == second


def test_the_readme_block_is_replaced_between_its_markers_only(tmp_path):
    _fig4(tmp_path, -98.0)
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{README_BEGIN}\nold numbers\n{README_END}\n\nmore text\n")
    assert update_readme(readme, tmp_path)
    text = readme.read_text()
    assert text.startswith("# Title\n\n") and text.endswith("\n\nmore text\n") and "old numbers" not in text
    assert readme_block(tmp_path) in text and "(figures/fig4_vae_mnist_fashion.md)" in text
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no markers\n")
    assert not update_readme(plain, tmp_path) and plain.read_text() == "no markers\n"


def test_the_committed_page_matches_the_committed_tables():
    """Regenerate with make figures (or tvolib.paper.results_page.write_results_page('figures'))."""
    figures = repo_root() / "figures"
    assert (figures / PAGE_NAME).read_text() == render_results_page(figures)


def test_the_readme_carries_the_committed_summary():
    """The README's results block is the page's summary table, from the committed tables."""
    readme = (repo_root() / "README.md").read_text()
    assert readme.count(README_BEGIN) == 1 and readme_block(repo_root() / "figures") in readme


def test_the_headline_names_every_win_over_the_best_standard_schedule(tmp_path):
    assert headline(tmp_path) == "**Against the best standard schedule:** not computed yet."
    _fig4(tmp_path, -98.0)  # the GP bandit 2.0 ± 0.71 above log: a win
    assert "beaten beyond two standard errors in Fig 4, mnist, S = 10, d = 5: vs log (+2.00 ± 0.71)" in headline(tmp_path)
    _fig4(tmp_path, -104.0)
    text = headline(tmp_path)
    assert "in none of them does a bandit or the bias-optimal schedule beat it" in text and "1 go the other way" in text
    assert text in render_results_page(tmp_path) and text in readme_block(tmp_path)
