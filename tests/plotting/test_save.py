"""Saving figures and tables under one stem."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tvolib.plotting import save_figure, save_table  # noqa: E402


def test_save_table_writes_csv_and_markdown_with_caption(tmp_path):
    frame = pd.DataFrame({"model": ["vae"], "value": [1.5]})
    paths = save_table(frame, "table_x", tmp_path, caption="Caption line")
    assert [p.name for p in paths] == ["table_x.csv", "table_x.md"]
    assert pd.read_csv(paths[0]).shape == frame.shape
    assert paths[1].read_text().startswith("Caption line\n\n| model | value |")
    indexed = save_table(frame.set_index("model"), "table_y", tmp_path)
    assert pd.read_csv(indexed[0]).columns.tolist() == ["model", "value"]


def test_save_figure_is_reproducible_and_rejects_paths(tmp_path, monkeypatch):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    out = save_figure(fig, "fig_x", tmp_path)
    assert [p.name for p in out] == ["fig_x.pdf", "fig_x.png"] and all(p.stat().st_size > 0 for p in out)
    first = out[0].read_bytes()
    save_figure(fig, "fig_x", tmp_path)
    assert out[0].read_bytes() == first  # no timestamp
    monkeypatch.setenv("TVOLIB_FIGURES", str(tmp_path / "env"))
    assert save_figure(fig, "fig_z")[0].parent == tmp_path / "env"
    for bad in ("fig_x.png", "sub/fig", ""):
        with pytest.raises(ValueError, match="bare file stem"):
            save_figure(fig, bad, tmp_path)
    plt.close("all")


def _dying(original):
    """A writer that puts a few bytes where it writes, then is killed (as a Ctrl-C or a SIGTERM would)."""

    def write(self, target, *args, **kwargs):
        if hasattr(target, "write"):
            target.write("half," if isinstance(target, io.TextIOBase) else b"%PDF-1.4 half")
        else:
            with open(target, "wb") as handle:
                handle.write(b"%PDF-1.4 half")
        raise KeyboardInterrupt

    return write


def test_a_killed_save_keeps_the_previous_figure_and_table(tmp_path, monkeypatch):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    pdf, png = save_figure(fig, "fig_x", tmp_path)
    frame = pd.DataFrame({"model": ["vae"], "value": [1.5]})
    csv, md = save_table(frame, "table_x", tmp_path)
    before = {path: path.read_bytes() for path in (pdf, png, csv, md)}
    monkeypatch.setattr(Figure, "savefig", _dying(Figure.savefig))
    monkeypatch.setattr(pd.DataFrame, "to_csv", _dying(pd.DataFrame.to_csv))
    with pytest.raises(KeyboardInterrupt):
        save_figure(fig, "fig_x", tmp_path)
    with pytest.raises(KeyboardInterrupt):
        save_table(frame, "table_x", tmp_path)
    assert {path: path.read_bytes() for path in before} == before
    assert not list(tmp_path.glob(".*.tmp"))
    plt.close("all")
