"""GP-bandit optimisation of the TVO schedule (paper Sections 3-4, Algorithm 1).

* :mod:`.kernels` -- the time kernel ``(1 - omega)^{|t - t'|/2}`` and the SE kernel on sorted arms;
* :mod:`.model` -- the exact GP and its data normalisation;
* :mod:`.fit` -- its hyperparameters: MAP warm-started, or type-II ML from random starts;
* :mod:`.acquisition` -- ``kappa_t`` of Theorem 1 and GP-UCB maximised with BoTorch;
* :mod:`.reward` -- windows, the reward ``L_end - L_start`` (Eq. 7) and the early-update rule;
* :mod:`.base` -- arms, rounds, history and state shared by both schedules (:mod:`.state` checks it);
* :mod:`.scheduler` -- :class:`GPBanditSchedule` and :class:`RandomSchedule`;
* :mod:`.embedding` -- schedules of any length as their left-Riemann step function on a grid;
* :mod:`.adaptive` -- :class:`AdaptiveDBanditSchedule`, which chooses ``d`` as well as the points;
* :mod:`.recommendation` -- the ``d`` and schedule it recommends: the one-standard-error rule;
* :mod:`.protocol` -- the protocol around the GP step: the authors' code's (default) or the text's;
* :mod:`.known`, :mod:`.pointwise`, :mod:`.integrand_bandit` -- the bandit that learns only what the
  integrand does not say (``protocol="integrand"``): the TVO's bias at the arm as a known part of the
  reward, a GP over points for the rest, arms by a dynamic programme;
* :mod:`.plan` -- when a run's GP starts: its rounds by the window rule, and the short-run warning;
* :mod:`.posterior` -- :func:`reward_posterior`, the GP rebuilt from a recorded history, and
  :func:`replay`, the arms a fresh schedule chooses from it.
"""
import warnings

# BoTorch imports linear_operator, which applies the deprecated ``torch.jit.script`` at import time:
# a FutureWarning about a third-party package, printed once by every process that imports this one
# (notebook kernels and every worker of a sweep). Only that warning is silenced, before the import.
warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)

from .acquisition import theorem1_kappa  # noqa: E402
from .adaptive import AdaptiveDBanditSchedule  # noqa: E402
from .integrand_bandit import IntegrandBanditSchedule  # noqa: E402
from .model import Hyperparameters  # noqa: E402
from .posterior import replay, reward_posterior  # noqa: E402
from .protocol import PROTOCOLS, arm_degeneracy  # noqa: E402
from .reward import evidence_spec_for  # noqa: E402
from .scheduler import GPBanditSchedule, RandomSchedule  # noqa: E402

__all__ = [
    "AdaptiveDBanditSchedule",
    "GPBanditSchedule",
    "Hyperparameters",
    "IntegrandBanditSchedule",
    "PROTOCOLS",
    "RandomSchedule",
    "arm_degeneracy",
    "evidence_spec_for",
    "replay",
    "reward_posterior",
    "theorem1_kappa",
]
