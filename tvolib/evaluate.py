"""TEMPORARY shim, removed at integration: evaluation lives in :mod:`tvolib.training.evaluate`."""
from tvolib.training.evaluate import *  # noqa: F401,F403
from tvolib.training.evaluate import evaluate, log_weight_metrics  # noqa: F401
