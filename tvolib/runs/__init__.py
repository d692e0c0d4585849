"""Run configs once, read them forever: the results store, its executors, status and plan.

- :mod:`~tvolib.runs.kinds`: the registry of config kinds (config class, trainer, model loader).
- :mod:`~tvolib.runs.store`: one folder per config, its files, and the verification of a folder.
- :mod:`~tvolib.runs.readers`: final metrics, histories and models of complete runs.
- :mod:`~tvolib.runs.plan`: cache status and estimated cost of a sweep.
- :mod:`~tvolib.runs.cost`: rough seconds of a run on the CPU, of a stack and a sweep on one GPU.
- :mod:`~tvolib.runs.run`: :func:`run_one`, one run in this process; :func:`run_stack`, one stack.
- :mod:`~tvolib.runs.stacks`: which runs train together (``stack`` modes, stack size, jobs).
- :mod:`~tvolib.runs.executors`: :func:`run_configs` over a local pool, submitit or Slurm.
- :mod:`~tvolib.runs.slurm`: Slurm options and job state read without ``sacct``.

Example:
    >>> from tvolib import runs
    >>> from tvolib.paper import sweeps
    >>> frame = runs.run_configs(sweeps.fig4_vae_mnist_fashion("smoke"))  # doctest: +SKIP
"""
from tvolib.runs.executors import EXECUTORS, RunFailedError, SubmititRun, resolve_executor, run_configs
from tvolib.runs.kinds import CONFIG_KINDS, ConfigKind, get_kind
from tvolib.runs.plan import format_plan, plan, run_status, status
from tvolib.runs.readers import load_final, load_history, load_model, load_schedule_history, results_frame
from tvolib.runs.run import RunLockedError, check_device, run_one, run_stack
from tvolib.runs.slurm import SlurmOptions, slurm_parameters
from tvolib.runs.store import (
    RunFolderError, RunState, config_digest, config_from_dict, config_kind, inspect_run, load_config, run_dir,
)

__all__ = [
    "CONFIG_KINDS", "ConfigKind", "get_kind",
    "EXECUTORS", "RunFailedError", "RunFolderError", "RunLockedError", "RunState", "SlurmOptions", "SubmititRun",
    "check_device", "config_digest", "config_from_dict", "config_kind", "format_plan", "inspect_run",
    "load_config", "load_final", "load_history", "load_model", "load_schedule_history", "plan",
    "resolve_executor", "results_frame", "run_configs", "run_dir", "run_one", "run_stack", "run_status",
    "slurm_parameters",
    "status",
]
