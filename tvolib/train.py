"""TEMPORARY shim, removed at integration: the trainer lives in :mod:`tvolib.training`."""
from tvolib.training.run_folder import CHECKPOINT_NAME, MODEL_NAME  # noqa: F401
from tvolib.training.images import *  # noqa: F401,F403
from tvolib.training.images import (  # noqa: F401
    MODELS,
    REPARAM_OBJECTIVES,
    SCHEDULE_LOG_WEIGHT_EXAMPLES,
    SCHEDULES,
    RunConfig,
    build_schedule as make_schedule,
    train,
)
from tvolib.training.kinds import load_model  # noqa: F401
from tvolib.training.loop import RunResult, TrainingDivergedError  # noqa: F401
