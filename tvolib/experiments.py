"""TEMPORARY shim, removed at integration: the runner moved to :mod:`tvolib.runs`."""
from tvolib.runs import *  # noqa: F401,F403
from tvolib.runs import __all__ as _runs_all
from tvolib.runs.store import RunFolderError as ResultsMismatchError

__all__ = [*_runs_all, "ResultsMismatchError"]
