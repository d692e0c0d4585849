"""Many runs of one configuration as one batched computation (stacked along a leading run dimension K).

* :mod:`.models` -- :class:`StackedModel`: K copies of the VAE or SBN built from single-run models;
* :mod:`.objectives` -- the training losses of :mod:`tvolib.objectives`, batched over runs;
* :mod:`.optim` -- :class:`StackedAdam`: K independent Adam optimisers over the stacked tensors;
* :mod:`.epoch` -- :func:`~.epoch.train_epoch`: one training epoch of every run, the per-run metric sums;
* :mod:`.evaluate` -- :func:`evaluate_stack`: every run's IWAE test log p(x), ELBO and KL;
* :mod:`.bandits` -- :func:`step_schedules`: the runs' schedules, GP-bandit rounds in a :class:`StepPool`.
"""
from .bandits import ScheduleStepError, StepPool, step_schedules
from .evaluate import evaluate_stack
from .models import StackedModel, batched_linear

__all__ = ["ScheduleStepError", "StackedModel", "StepPool", "batched_linear", "evaluate_stack", "step_schedules"]
