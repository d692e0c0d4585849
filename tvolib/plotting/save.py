"""Writing figures (PDF and PNG) and tables (CSV and Markdown) under one file stem.

Every file is written atomically (:func:`tvolib.checkpoint.atomic_write`: produced in memory, then
a temporary sibling renamed over the old file), so a process killed while saving keeps the
previous figure or table whole.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from tvolib.checkpoint import atomic_write
from tvolib.paper.analysis import markdown_table
from tvolib.paths import figures_dir as default_figures_dir

__all__ = ["save_figure", "save_table"]


def _check_stem(name: str, what: str, example: str) -> None:
    if not isinstance(name, str) or not name or Path(name).name != name or Path(name).suffix:
        raise ValueError(f"{what} name must be a bare file stem such as {example!r}; got {name!r}")


def save_figure(fig: Figure, name: str, figures_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png``.

    Args:
        fig: the figure.
        name: the figure's stem (e.g. ``"fig4_vae_mnist_fashion"``), no folder, no suffix.
        figures_dir: the folder (default :func:`tvolib.paths.figures_dir`: ``$TVOLIB_FIGURES`` or
            ``<repo>/figures``).

    Returns:
        The two paths. The files carry no creation date, so an unchanged figure gives unchanged files.
    """
    _check_stem(name, "figure", "fig4_vae_mnist_fashion")
    out = default_figures_dir(figures_dir)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    atomic_write(paths[0], lambda f: fig.savefig(f, format="pdf", metadata={"CreationDate": None}))
    atomic_write(paths[1], lambda f: fig.savefig(f, format="png", metadata={"Software": None}))
    return paths


def save_table(
    frame: pd.DataFrame,
    name: str,
    figures_dir: str | os.PathLike[str] | None = None,
    *,
    caption: str | None = None,
    floatfmt: str = ".3f",
) -> list[Path]:
    """Save ``frame`` as ``<name>.csv`` and ``<name>.md`` (:func:`tvolib.paper.analysis.markdown_table`,
    preceded by ``caption`` if given); the index is written unless it is a plain RangeIndex.

    Returns:
        The two paths.
    """
    _check_stem(name, "table", "table_wallclock")
    out = default_figures_dir(figures_dir)
    index = not isinstance(frame.index, pd.RangeIndex)
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    atomic_write(csv_path, lambda f: frame.to_csv(f, index=index), "w")
    text = markdown_table(frame, floatfmt=floatfmt, index=index)
    atomic_write(md_path, lambda f: f.write(f"{caption}\n\n{text}" if caption else text), "w")
    return [csv_path, md_path]
