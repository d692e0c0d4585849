"""Training: one loop shared by every experiment, and the experiments that plug into it.

* :mod:`~tvolib.training.loop`: the epoch skeleton (resume, schedule, evaluation, checkpoints,
  divergence, progress), :class:`RunResult`, :class:`TrainingDivergedError`, the :class:`Task` interface;
* :mod:`~tvolib.training.run_folder`: run folders (lock, checks, checked checkpoints);
* :mod:`~tvolib.training.schedule`: schedules by name; :mod:`~tvolib.training.fields`: config value checks;
* :mod:`~tvolib.training.images`: VAE / SBN (:class:`RunConfig`, :func:`train`);
* :mod:`~tvolib.training.pcfg` and :mod:`~tvolib.training.pcfg_metrics`: the PCFG (:class:`PCFGConfig`,
  :func:`train_pcfg`) and its exact metrics;
* :mod:`~tvolib.training.evaluate`: test log p(x) by IWAE;
* :mod:`~tvolib.training.many`: :func:`train_many`, many runs stacked into one batched computation
  (:mod:`~tvolib.training.stack_runs`: one run of a stack as the loop sees it, and the stack's batched work);
* :mod:`~tvolib.training.kinds`: trainers by config kind and :func:`load_model`.
"""
from tvolib.training.images import RunConfig, train
from tvolib.training.kinds import CONFIG_KINDS, TRAINERS, load_model
from tvolib.training.loop import RunResult, Task, TrainingDivergedError, run
from tvolib.training.many import TrainManyError, train_many
from tvolib.training.pcfg import PCFGConfig, train_pcfg

__all__ = [
    "CONFIG_KINDS",
    "TRAINERS",
    "PCFGConfig",
    "RunConfig",
    "RunResult",
    "Task",
    "TrainManyError",
    "TrainingDivergedError",
    "load_model",
    "run",
    "train",
    "train_many",
    "train_pcfg",
]
