"""Where results and figures go: explicit folders first, then environment variables, then the repository's.

``TVOLIB_RESULTS`` (default ``<repo>/results``) holds one folder per run; ``TVOLIB_FIGURES``
(default ``<repo>/figures``, the committed figures) receives the figures. ``make test`` points both
at temporary folders so that the smoke profile never overwrites the committed figures, and
:func:`tvolib.paper.figures.figure` sends a smoke run's figures to a scratch folder
(:func:`figures_path` with ``scratch=True``) unless a folder is named. The data root is
``tvolib.data.data_root`` (``TVOLIB_DATA``). An explicit empty path (``""``) is an error everywhere:
it never means "the default" (nor the current folder); an empty environment variable counts as
unset, as ``make`` exports variables that were not given.

Example:
    >>> choose_folder(None, "TVOLIB_NOT_SET", "results", what="results_root").as_posix()
    'results'
    >>> choose_folder("", "TVOLIB_NOT_SET", "results", what="results_root")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: results_root must be a folder path, or None for $TVOLIB_NOT_SET or results; got '' (an empty ...
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SCRATCH_FIGURES", "choose_folder", "figures_dir", "figures_path", "repo_root", "results_root"]

#: Where :func:`figures_path` puts figures with ``scratch=True`` (a smoke run) when no folder is
#: named, relative to the repository: git-ignored, never the committed ``figures/``.
SCRATCH_FIGURES = Path(".cache") / "figures-smoke"


def repo_root() -> Path:
    """The checkout holding this package (the folder with ``pyproject.toml``), else the cwd."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def choose_folder(root: str | os.PathLike[str] | None, variable: str, default: str | os.PathLike[str], *,
                  what: str) -> Path:
    """The folder ``root`` names, else ``$variable`` (when set and not empty), else ``default``.

    Args:
        root: an explicit folder, or ``None``.
        variable: the environment variable consulted when ``root`` is ``None``.
        default: the folder used when neither is given.
        what: the argument's name, for messages.

    Raises:
        TypeError: ``root`` is not a path.
        ValueError: ``root`` is empty (``""``): never the default or the current folder.
    """
    if root is None:
        return Path(os.environ.get(variable) or default).expanduser()
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"{what} must be a folder path (str or os.PathLike) or None, got {type(root).__name__} "
                        f"{root!r}")
    if not os.fspath(root):
        raise ValueError(f"{what} must be a folder path, or None for ${variable} or {default}; got '' (an empty "
                         "path is never the default)")
    return Path(root).expanduser()


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Folder of cached runs: ``root``, else ``$TVOLIB_RESULTS``, else ``<repo>/results`` (``""`` is refused)."""
    return choose_folder(root, "TVOLIB_RESULTS", repo_root() / "results", what="results_root")


def figures_path(root: str | os.PathLike[str] | None = None, *, scratch: bool = False) -> Path:
    """Folder for figures and tables (not created): ``root``, else ``$TVOLIB_FIGURES``, else
    ``<repo>/figures`` -- or, with ``scratch`` (a smoke run), ``<repo>/.cache/figures-smoke``, so that
    only a folder asked for by name receives figures that are not meant to be committed."""
    default = repo_root() / (SCRATCH_FIGURES if scratch else "figures")
    return choose_folder(root, "TVOLIB_FIGURES", default, what="figures_dir")


def figures_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """:func:`figures_path`, created if needed."""
    path = figures_path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
