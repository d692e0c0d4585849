"""What a step case of the test bed lets any method tell apart: each ``d``'s best arm, and an oracle.

The step cases of :mod:`tvolib.bandit.testbed` value schedules of any length, so the best regret
over arms of ``d`` left points (``b_0 = 0`` included),

    Delta_d = 1 - max_{b of d - 1 interior points} f(b),

is a property of the case, not of a bandit (:func:`best_regrets`): 0 at and above the optimum's
``d`` (more points copy it by tying), and what the missing points cost below it.

An oracle that knew two arms, the best of ``d`` points and the optimum, and trained each for
``E`` epochs would tell them apart at ``z`` standard errors once the difference of their mean
per-epoch gains, ``Delta_d``, reaches ``z sigma sqrt(2 / E)`` (``sigma`` the case's white
per-epoch noise; the trend, shared by both arms, cancels):

    E_z(d) = 2 z^2 sigma^2 / Delta_d^2     epochs on each arm        (oracle_epochs)
    z_d(T) = Delta_d sqrt(T / 4) / sigma   the run's T epochs, half on each arm   (oracle_z)

No bandit does better: it must also find the arms and share its run between every ``d``. Where
even this oracle separates a case's ``d`` from one point fewer by about one standard error or
less, no method can tell at that budget whether the last point is needed; the test bed's
:data:`~tvolib.bandit.testbed.QUIET_NOISE` is set so that it separates them by three.

Example:
    >>> from tvolib.bandit.testbed import CASES, QUIET_NOISE
    >>> case = CASES["d5-step-mild"]
    >>> deltas = best_regrets(case, range(4, 6))        # four interior points are best
    >>> deltas[5], round(deltas[4], 2)
    (0.0, 0.24)
    >>> round(oracle_z(deltas[4], case.noise, 160), 1), round(oracle_z(deltas[4], QUIET_NOISE, 160), 1)
    (3.0, 15.1)
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from .embedding import pad_arm
from .testbed import TestbedCase, arm_value
from .testbed_tvo import TvoCase, best_of_d, optimum

__all__ = ["best_regrets", "oracle_epochs", "oracle_z"]

#: Random starts of each ``d``'s search in :func:`best_regrets`, beside the nested ones.
RANDOM_STARTS = 4


def best_regrets(case: TestbedCase | TvoCase, d_range: range = range(2, 11), *, seed: int = 0) -> dict[int, float]:
    """``Delta_d`` for every ``d`` of ``d_range``: the smallest regret of an arm of ``d`` left points on ``case``.

    At and above the optimum's ``d`` it is the optimum's regret, 0 (the optimum padded by tying its
    largest point). Below, ``d`` is searched from the largest down, each by Nelder-Mead from the
    best arm of ``d + 1`` points less each of its points and from :data:`RANDOM_STARTS` random arms:
    the best arm of fewer points is most often the best of more, thinned. A step case of the TVO's
    form (:class:`~tvolib.bandit.testbed_tvo.TvoCase`) has it exactly: each ``d``'s best arm by its
    dynamic programme (:func:`~tvolib.bandit.testbed_tvo.best_of_d`), ``Delta_d`` its loss above the
    optimum's over ``scale``.

    Args:
        case: a step case (``metric="step"``), whose value is defined for arms of any length.
        d_range: the ``d``'s (left points, ``b_0`` included, at least 2), increasing by 1.
        seed: seeds the random starts.

    Returns:
        ``{d: Delta_d}`` at mid-run (the step cases' optimum does not move).
    """
    if case.metric != "step":
        raise ValueError(f"best_regrets compares arms of any length: it needs a step case; {case.name!r} "
                         f"has metric={case.metric!r}")
    if not isinstance(d_range, range) or d_range.step != 1 or len(d_range) == 0 or d_range.start < 2:
        raise ValueError(f"d_range must be a non-empty range of d >= 2 in steps of 1; got {d_range!r}")
    if isinstance(case, TvoCase):
        best = optimum(case, 0.5).loss
        return {d: max(0.0, (best_of_d(case, d, 0.5).loss - best) / case.scale) for d in d_range}
    rng = np.random.default_rng(seed)
    best: dict[int, tuple[float, np.ndarray]] = {}
    for d in range(max(d_range.stop - 1, case.d), d_range.start - 1, -1):
        m = d - 1
        if m >= len(case.optimum):
            arm = np.asarray(pad_arm(case.optimum, m))
            best[d] = (_regret(case, arm), arm)
            continue
        larger = best[d + 1][1]
        starts = [np.delete(larger, k) for k in range(larger.size)]
        starts += [np.sort(rng.uniform(0.0, 1.0, m)) for _ in range(RANDOM_STARTS)]
        fits = [minimize(lambda x: _regret(case, x), x0, method="Nelder-Mead",
                         options=dict(maxiter=2000, xatol=1e-5, fatol=1e-8)) for x0 in starts]
        fit = min(fits, key=lambda r: r.fun)
        best[d] = (float(fit.fun), np.sort(np.clip(fit.x, 0.0, 1.0)))
    return {d: best[d][0] for d in d_range}


def _regret(case: TestbedCase, points: np.ndarray) -> float:
    return 1.0 - arm_value(case, np.clip(points, 0.0, 1.0).tolist(), 0.5)


def oracle_epochs(delta: float, sigma: float, z: float) -> float:
    """``E_z``: the epochs on each of two arms whose mean per-epoch gains differ by ``delta`` that
    separate them at ``z`` standard errors under white per-epoch noise ``sigma`` (``inf`` for a tie).

    Example:
        >>> oracle_epochs(0.5, 0.5, 1.0)
        2.0
    """
    return math.inf if delta <= 1e-9 else 2 * z**2 * sigma**2 / delta**2


def oracle_z(delta: float, sigma: float, epochs: int) -> float:
    """The standard errors that separate two arms whose mean gains differ by ``delta`` when an
    oracle trains each for half of ``epochs`` (white per-epoch noise ``sigma``).

    Example:
        >>> oracle_z(0.1, 0.5, 100)
        1.0
    """
    return delta * math.sqrt(epochs / 2 / 2) / sigma
