"""GP-bandit optimisation of the TVO schedule (paper Sections 3-4, Algorithm 1).

* :mod:`.kernels` -- the time kernel ``(1 - omega)^{|t - t'|/2}`` and the SE kernel on sorted arms;
* :mod:`.model` -- the exact GP and its data normalisation;
* :mod:`.fit` -- its hyperparameters: MAP warm-started, or type-II ML from random starts;
* :mod:`.acquisition` -- ``kappa_t`` of Theorem 1 and GP-UCB maximised with BoTorch;
* :mod:`.reward` -- windows, the reward ``L_end - L_start`` (Eq. 7) and the early-update rule;
* :mod:`.base` -- arms, rounds, history and state shared by both schedules (:mod:`.state` checks it);
* :mod:`.scheduler` -- :class:`GPBanditSchedule` and :class:`RandomSchedule`;
* :mod:`.protocol` -- the protocol around the GP step: the authors' code's (default) or the text's;
* :mod:`.posterior` -- :func:`reward_posterior`, the GP rebuilt from a recorded history, and
  :func:`replay`, the arms a fresh schedule chooses from it.
"""
from .acquisition import theorem1_kappa
from .model import Hyperparameters
from .posterior import replay, reward_posterior
from .protocol import PROTOCOLS, arm_degeneracy
from .reward import evidence_spec_for
from .scheduler import GPBanditSchedule, RandomSchedule

__all__ = [
    "GPBanditSchedule",
    "Hyperparameters",
    "PROTOCOLS",
    "RandomSchedule",
    "arm_degeneracy",
    "evidence_spec_for",
    "replay",
    "reward_posterior",
    "theorem1_kappa",
]
