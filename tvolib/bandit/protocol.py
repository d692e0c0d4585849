"""The bandit's protocol: how the search around the GP-UCB step is guarded (burn-in, arms, rewards).

The paper's text specifies the GP and the acquisition (Section 4) but is silent on most of the
protocol around them. The authors' code, which produced the paper's numbers, guards the search in
ways the text does not state; without them the GP-UCB search measurably collapses onto corner
schedules (all interior points near the lower or the upper bound, a d-point schedule that acts
like a 2-point one). Three presets:

* ``"code"`` (what the paper's experiments ran; the paper's figures name it): the log schedule during burn-in;
  random arms until ``3 d`` observations exist (``d`` = the number of partitions ``K``); arms in a
  box with lower bound 0.05 and staggered upper bounds ``0.95 k / (d - 1)`` for coordinate
  ``k = 1..d-1`` (0.7 for ``d = 2``), so random arms lean towards small betas like the log
  schedule, and the GP scales each coordinate of a sorted arm by its own range onto ``[0, 1]``
  (:func:`coordinate_scale`); two pseudo-observations at the all-lower and all-upper corners with
  the worst reward seen, and a random arm if the acquisition still proposes the all-lower corner;
  proposals rounded to 4 decimals; the last ``30 d`` rewards standardised, those with
  ``|z| > 3`` dropped and the rest standardised again; ``kappa = log(N + 2)``; hyperparameters by
  type-II maximum likelihood from 200 random starts then L-BFGS-B within the code's bounds
  (:data:`ML_BOUNDS`); the reward from the trapezoid evidence over 50 log-spaced points, as window
  means (:mod:`tvolib.bandit.reward`). The upper guard is the code's arm, every point on 0.95,
  which the per-point scaling puts far outside the unit cube.
* ``"tvolib"`` (the default of run configs that name no protocol, :data:`CONFIG_DEFAULT_PROTOCOL`,
  and of :class:`~tvolib.bandit.AdaptiveDBanditSchedule`; :class:`~tvolib.bandit.GPBanditSchedule`'s
  until the ``"integrand"`` preset did better on the bandit's test bed, :mod:`tvolib.bandit.testbed`):
  the code's, with three departures, each chosen on the
  test bed where the code's protocol puts 60-100% of its arms on corners and does worse than random
  arms once the evidence has a falling trend (docs/paper-notes.md):

  - ``trend=True``: the GP adds a trend shared by every arm, a smooth function of time, to the
    arm effect (:class:`~tvolib.bandit.model.BanditGP`), and the acquisition ranks arms by the arm
    effect alone. Rewards fall as training converges whatever the arm; a zero-mean GP of arm and
    time cannot tell that fall from the arms, and an arm it has not seen keeps the mean of all
    rewards, above the latest ones, so the search goes where it has not been: the corners.
  - ``reward="rate"``: ``(L_end - L_start) / length``, the paper's reward per epoch of its window.
    The windows grow (and early updates cut them short), so the code's difference of window means
    grows with the windows' lengths as much as with the arm, and half of it comes from the previous
    window's arm.
  - ``ml_bounds="dimension"``: the length scale in ``[0.1, 1] sqrt(d - 1)`` (:func:`ml_bounds`)
    rather than the code's ``[0.5, 1.58]`` at every d.
* ``"paper-text"`` (what the text alone specifies; this package's behaviour before revision 3): a
  random arm during burn-in; ``max(3, d)`` random rounds; the box ``[0.05, 0.95]`` for every
  coordinate; no corner guards; clamp, sort and push points ``min_gap`` apart; all rewards
  standardised by their mean and standard deviation; Theorem 1's ``kappa``; MAP hyperparameters
  (weak priors) warm-started from the previous round; the reward ``L_end - L_start`` of the left
  Riemann evidence over 50 linear points (Eq. 7).

* ``"integrand"`` (the default of :class:`~tvolib.bandit.GPBanditSchedule`, :data:`DEFAULT_PROTOCOL`:
  the best on the test bed; :class:`~tvolib.bandit.integrand_bandit.IntegrandBanditSchedule`, which
  :class:`~tvolib.bandit.GPBanditSchedule` builds for it: a different algorithm, :data:`PRESET_CLASSES`):
  the reward's part that the integrand predicts, the TVO's bias at the arm, enters with a fitted
  weight, a GP over points models the rest and the next arm is a dynamic programme's; its items
  are ``"tvolib"``'s, which serve the rounds without an integrand (arm for arm ``"tvolib"``'s).

Every item is also a keyword of :class:`~tvolib.bandit.GPBanditSchedule`, so one item can be
changed at a time (the ablation figure does).

Example:
    >>> resolve_protocol("code", {"kappa": "theorem1"})["kappa"]
    'theorem1'
    >>> [round(u, 4) for u in staggered_upper(5, 0.05, 0.95)]
    [0.2375, 0.475, 0.7125, 0.95]
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ..checks import check_bool, plain_value

__all__ = [
    "CONFIG_DEFAULT_PROTOCOL",
    "DEFAULT_PROTOCOL",
    "ML_BOUNDS",
    "PRESET_CLASSES",
    "PROTOCOLS",
    "ROUND_DECIMALS",
    "STAGGERED_UPPER_D2",
    "arm_degeneracy",
    "coordinate_scale",
    "ml_bounds",
    "resolve_protocol",
    "robust_standardize",
    "size_defaults",
    "staggered_upper",
]

#: The preset a bandit schedule follows when none is named (the best on the test bed).
DEFAULT_PROTOCOL = "integrand"
#: The preset a run config means when it names none: ``"tvolib"``, the default when such configs were
#: first named, so that moving :data:`DEFAULT_PROTOCOL` neither renames nor re-means a cached run
#: (:mod:`tvolib.training.schedule` builds and names configs by it).
CONFIG_DEFAULT_PROTOCOL = "tvolib"
#: Decimals kept by the ``"round"`` projection (the authors' code rounds proposals to 4).
ROUND_DECIMALS = 4
#: Upper bound of the single interior point when ``d = 2`` in the authors' code (staggered domain).
STAGGERED_UPPER_D2 = 0.7
#: Hyperparameter bounds of the code's type-II ML fit, in this package's units. The code bounds
#: omega to [0, 0.9] (rho = -log(1 - omega) in [0, log 10]), noise to [1e-4, 0.5] and its length
#: scale l to [0.5, 5], where its squared-exponential kernel divides the squared distance by l, not
#: by 2 l^2: our length scale is sqrt(l / 2), i.e. [0.5, sqrt(2.5)].
ML_BOUNDS: dict[str, tuple[float, float]] = {
    "lengthscale": (0.5, math.sqrt(2.5)),
    "rho": (1e-6, math.log(10.0)),
    "noise": (1e-4, 0.5),
    "trend_share": (0.0, 0.9999),
    "trend_lengthscale": (0.1, 2.0),
}

def ml_bounds(kind: str, n_arm: int) -> dict[str, tuple[float, float]]:
    """Hyperparameter bounds of the type-II ML fit for an arm of ``n_arm`` coordinates.

    ``"code"``: the authors' code's (:data:`ML_BOUNDS`), the same at every ``d``. ``"dimension"``:
    the length scale in ``[0.1, 1] sqrt(n_arm)``, the rest as the code's. The GP's arm inputs fill
    the unit cube, whose diameter is ``sqrt(n_arm)``: a longer length scale makes the SE kernel
    nearly quadratic over the whole domain, and one of a tenth of that resolves bumps a tenth of
    the domain wide. Scaling with ``sqrt(n_arm)`` follows the dimension-scaled length-scale prior
    of Hvarfner et al. (2024), BoTorch's default. The code's fixed ``[0.5, 1.58]`` is ``[0.25,
    0.79] sqrt(n_arm)`` at ``d = 5`` and ``[0.17, 0.53] sqrt(n_arm)`` at ``d = 10``.

    Example:
        >>> ml_bounds("dimension", 4)["lengthscale"]
        (0.2, 2.0)
    """
    if kind == "code":
        return dict(ML_BOUNDS)
    if kind == "dimension":
        root = math.sqrt(n_arm)
        return {**ML_BOUNDS, "lengthscale": (round(0.1 * root, 12), round(root, 12))}
    raise ValueError(f"ml_bounds must be one of {list(CHOICES['ml_bounds'])}; got {kind!r}")


#: The presets: each maps every protocol item to its value (``None`` for the size-dependent
#: ``n_init`` and ``max_observations``: see :func:`resolve_protocol`).
PROTOCOLS: dict[str, dict[str, Any]] = {
    "code": {
        "burn_in_schedule": "log",
        "arm_domain": "staggered",
        "projection": "round",
        "reward": "code",
        "corner_guards": True,
        "standardize": "robust",
        "kappa": "log_n",
        "fit": "ml",
        "ml_bounds": "code",
        "trend": False,
        "n_init": None,
        "max_observations": None,
    },
    "tvolib": {
        "burn_in_schedule": "log",
        "arm_domain": "staggered",
        "projection": "round",
        "reward": "rate",
        "corner_guards": True,
        "standardize": "robust",
        "kappa": "log_n",
        "fit": "ml",
        "ml_bounds": "dimension",
        "trend": True,
        "n_init": None,
        "max_observations": None,
    },
    "paper-text": {
        "burn_in_schedule": "arm",
        "arm_domain": "box",
        "projection": "spread",
        "reward": "paper",
        "corner_guards": False,
        "standardize": "global",
        "kappa": "theorem1",
        "fit": "map",
        "ml_bounds": "code",
        "trend": False,
        "n_init": None,
        "max_observations": None,
    },
}
#: The integrand protocol's items are the ``tvolib`` protocol's: without an integrand it is that
#: protocol, arm for arm (its own algorithm, :data:`PRESET_CLASSES`, takes over when one is read).
PROTOCOLS["integrand"] = dict(PROTOCOLS["tvolib"])

#: Presets that are another algorithm than :class:`~tvolib.bandit.GPBanditSchedule`'s GP-UCB: preset
#: -> the subclass ``GPBanditSchedule(d, protocol=preset)`` builds (filled by the subclass's module).
PRESET_CLASSES: dict[str, type] = {}

#: Accepted values of each choice-valued item.
CHOICES: dict[str, tuple[Any, ...]] = {
    "burn_in_schedule": ("log", "arm"),
    "arm_domain": ("staggered", "box"),
    "projection": ("round", "spread"),
    "reward": ("code", "paper", "rate"),
    "corner_guards": (True, False),
    "standardize": ("robust", "global"),
    "fit": ("ml", "map"),
    "ml_bounds": ("code", "dimension"),
    "trend": (True, False),
}


def resolve_protocol(protocol: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The preset ``protocol`` with the items in ``overrides`` that are not ``None`` replaced.

    Args:
        protocol: ``"code"``, ``"tvolib"`` or ``"paper-text"``.
        overrides: item -> value (``None`` keeps the preset's value).

    Returns:
        Every item of the protocol, plus ``"protocol"`` (the preset's name). NumPy and torch scalars
        become Python values; an on/off item (``corner_guards``, ``trend``) takes ``True``, ``False``,
        ``0`` or ``1`` and is stored as a bool (:func:`~tvolib.checks.check_bool`).

    Raises:
        ValueError: an unknown preset, item or choice (the message lists what is accepted), a
            string or another number for an on/off item.
    """
    protocol = plain_value(protocol)
    if not isinstance(protocol, str) or protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}; got {protocol!r}")
    items = dict(PROTOCOLS[protocol])
    for name, value in overrides.items():
        if name not in items:
            raise ValueError(f"unknown bandit protocol item {name!r}; accepted: {sorted(items)}")
        value = plain_value(value)  # NumPy and torch scalars as Python values
        if value is None:
            continue
        if CHOICES.get(name) == (True, False):
            try:
                value = check_bool(name, value)
            except ValueError:
                raise ValueError(f"{name} must be one of [True, False] (or 0 or 1); got {value!r}") from None
        elif name in CHOICES and (isinstance(value, bool) or value not in CHOICES[name]):
            raise ValueError(f"{name} must be one of {list(CHOICES[name])}; got {value!r}")
        items[name] = value
    return {"protocol": protocol, **items}


def size_defaults(protocol: str, d: int) -> tuple[int, int | None]:
    """The preset's ``(n_init, max_observations)`` for ``d`` left points: the code's and tvolib's ``(3 d, 30 d)``
    (``3K`` random rounds, the last ``30K`` rewards), the text's ``(max(3, d), None)`` (all rewards).

    Example:
        >>> size_defaults("code", 5), size_defaults("paper-text", 5)
        ((15, 150), (5, None))
    """
    if protocol in ("code", "tvolib", "integrand"):
        return 3 * d, 30 * d
    return max(3, d), None


def staggered_upper(d: int, lo: float, hi: float) -> tuple[float, ...]:
    """Per-coordinate upper bounds of the code's arm domain: ``hi k / (d - 1)``, ``k = 1..d-1``.

    For ``d = 2`` the single point's bound is :data:`STAGGERED_UPPER_D2` (the code's value),
    capped at ``hi``. Every bound must exceed ``lo`` (with the default box, ``d <= 19``).

    Args:
        d: left points including ``b_0 = 0`` (the code's number of partitions ``K``).
        lo, hi: the box.

    Returns:
        ``d - 1`` increasing upper bounds, the last equal to ``hi`` (``d > 2``).
    """
    n = d - 1
    # The last bound is hi itself: hi * n / n can round below hi (0.95 * 3 / 3 = 0.9499999999999998), and an arm
    # on it, rounded to its recorded digits, would then fall outside the range its saved state is checked against.
    upper = (min(STAGGERED_UPPER_D2, hi),) if n == 1 else tuple(hi * k / n for k in range(1, n)) + (hi,)
    if upper[0] <= lo:
        raise ValueError(
            f"arm_domain='staggered' needs hi / (d - 1) > lo: with box ({lo}, {hi}) the first upper bound "
            f"{upper[0]:.4g} is not above the lower bound for d = {d}; use arm_domain='box' or a smaller lo"
        )
    return upper


def coordinate_scale(lo: float, upper: Sequence[float]) -> tuple[float, ...]:
    """The GP's stretch of each sorted arm coordinate onto its own range (the code's min-max scaling).

    The GP's inputs are arms normalised by ``[lo, max(upper)]``; coordinate ``k`` of a sorted arm in
    the domain lies in ``[lo, upper_k]``, so ``(max(upper) - lo) / (upper_k - lo)`` maps its range
    onto ``[0, 1]``. The authors' code min-max scales every coordinate of its staggered domain to
    ``[0, 1]``, and its length-scale bounds (:data:`ML_BOUNDS`) are in those units; without the
    stretch the first coordinates' ranges are a fraction of the length scale (at ``d = 10`` the
    first spans 0.06 of the unit range) and the GP cannot tell their values apart. In a box every
    entry is 1. The kernel sorts the arm, scales it, and sorts the result, which on sorted arms is
    the code's scale-then-sort and, unlike the code's, invariant to permutations of the arm
    (:class:`~tvolib.bandit.kernels.SortedRBFKernel`).

    Example:
        >>> [round(s, 3) for s in coordinate_scale(0.05, staggered_upper(5, 0.05, 0.95))]
        [4.8, 2.118, 1.358, 1.0]
    """
    hi = max(upper)
    if not all(u > lo for u in upper):
        raise ValueError(f"every upper bound must exceed lo = {lo}; got {list(upper)}")
    return tuple((hi - lo) / (u - lo) for u in upper)


def robust_standardize(rewards: Tensor, z_max: float = 3.0) -> tuple[Tensor, float, float]:
    """The code's standardisation: standardise, drop ``|z| > z_max``, standardise the rest again.

    Args:
        rewards: ``(N,)`` finite rewards.
        z_max: the cut (3 in the code).

    Returns:
        ``(keep, mean, std)``: a boolean mask of the rewards kept, and the mean and (population)
        standard deviation of the kept ones (std 1 when they are constant).

    Example:
        >>> keep, mean, std = robust_standardize(torch.tensor([0.0] * 11 + [100.0]))
        >>> int(keep.sum()), mean, std
        (11, 0.0, 1.0)
    """
    keep = torch.ones_like(rewards, dtype=torch.bool)
    if rewards.numel() > 1:
        std = float(rewards.std(unbiased=False))
        if std > 1e-12:
            keep = ((rewards - rewards.mean()) / std).abs() <= z_max
    kept = rewards[keep]
    mean = float(kept.mean())
    std = float(kept.std(unbiased=False)) if kept.numel() > 1 else 1.0
    return keep, mean, std if std > 1e-12 else 1.0


def arm_degeneracy(arm: Any, lo: float, hi: float, *, spread_tol: float = 0.01, edge_tol: float = 1e-3) -> dict[str, Any]:
    """How degenerate an arm is: a d-point schedule whose points bunch up acts like a 2-point one.

    An arm of two or more points is *degenerate* when all its points lie within ``spread_tol`` of
    each other, or when two or more lie within ``edge_tol`` of the box's lower or upper edge
    (``lo``, ``hi``). A single point (``d = 2``) is never called degenerate.

    Args:
        arm: the interior points (any order).
        lo, hi: the box's edges.

    Returns:
        ``{"spread": max - min, "min_gap": smallest gap between sorted neighbours (None for one
        point), "on_edge": points on an edge, "degenerate": bool}``.

    Example:
        >>> arm_degeneracy([0.05, 0.051, 0.052, 0.053], 0.05, 0.95)["degenerate"]
        True
        >>> arm_degeneracy([0.1, 0.17, 0.28, 0.45], 0.05, 0.95)["degenerate"]
        False
    """
    points = sorted(float(v) for v in arm)
    gaps = [b - a for a, b in zip(points, points[1:])]
    on_edge = sum(1 for p in points if p - lo <= edge_tol or hi - p <= edge_tol)
    spread = points[-1] - points[0]
    degenerate = len(points) >= 2 and (spread <= spread_tol or on_edge >= 2)
    return {"spread": spread, "min_gap": min(gaps) if gaps else None, "on_edge": on_edge, "degenerate": degenerate}
