"""Where results and figures go: environment variables first, then the repository's folders.

``TVOLIB_RESULTS`` (default ``<repo>/results``) holds one folder per run; ``TVOLIB_FIGURES``
(default ``<repo>/figures``) receives the figures. ``make test`` points both at temporary
folders so that the smoke profile never overwrites the committed figures. The data root is
``tvolib.data.data_root`` (``TVOLIB_DATA``).
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "results_root", "figures_dir", "figures_path"]


def repo_root() -> Path:
    """The checkout holding this package (the folder with ``pyproject.toml``), else the cwd."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Folder of cached runs: ``root``, else ``$TVOLIB_RESULTS``, else ``<repo>/results``."""
    chosen = root or os.environ.get("TVOLIB_RESULTS") or repo_root() / "results"
    return Path(chosen).expanduser()


def figures_path(root: str | os.PathLike[str] | None = None) -> Path:
    """Folder for figures and tables (not created): ``root``, else ``$TVOLIB_FIGURES``, else ``<repo>/figures``."""
    chosen = root or os.environ.get("TVOLIB_FIGURES") or repo_root() / "figures"
    return Path(chosen).expanduser()


def figures_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """:func:`figures_path`, created if needed."""
    path = figures_path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
