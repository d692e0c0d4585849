"""Schedules of any length compared by their left-Riemann step functions, in closed form.

A schedule ``0 = b_0 < b_1 < ... < b_{d-1} < 1`` enters the TVO only through its left Riemann
sum (Eq. 5), and that sum is an integral of the integrand ``f`` (Eq. 4) composed with the
schedule's *step function* ``s_b``:

    sum_{j=0}^{d-1} (b_{j+1} - b_j) f(b_j) = int_0^1 f(s_b(u)) du,    s_b(u) = b_j on [b_j, b_{j+1}),

with ``b_d = 1``. So ``s_b`` is all of the schedule that the objective sees (the left points with
their widths), and comparing step functions compares schedules of different lengths on one
footing. It is invariant to permutations of the points by construction, and a point tied with its
neighbour (an interval of width zero) leaves it unchanged: a ``d = 5`` arm whose points bunch up,
``[0.05, 0.0501, 0.0502, 0.95]``, is (up to the 1e-4 gaps) the ``d = 3`` schedule
``[0, 0.05, 0.95]``, and their step functions agree.

The distance is the L2 distance of the step functions, in closed form. Written as a sum of steps
of height ``h_j = b_j - b_{j-1}`` at ``b_j``, ``s_b(u) = sum_j h_j 1[u >= b_j]``, so

    <s_b, s_c> = int s_b(u) s_c(u) du = sum_{j,k} h_j h'_k (1 - max(b_j, c_k)),
    D(b, c)^2 = ||s_b - s_c||^2 = <s_b, s_b> + <s_c, s_c> - 2 <s_b, s_c>,

``O(m m')`` per pair of arms of ``m`` and ``m'`` points (:func:`step_square_distance`). Each step
is smoothed into a normal CDF of width ``tau`` (:data:`STEP_WIDTH`, 0.001),
``s~_b(u) = sum_j h_j Phi((u - b_j) / tau)``, whose inner product is the same sum with ``max``
replaced by its expectation under independent ``N(0, tau^2)`` shifts of the two points, also in
closed form (:func:`_smooth_max`). So ``D^2`` is a squared distance of functions on ``(-inf, 1]``
(exactly, while no point lies within a few ``tau`` of 1) and ``exp(-D^2 / (2 l^2))`` is positive
definite (a squared exponential on a Hilbert space), for arms of any lengths.

Why smooth, and why so little. Without smoothing, ``max`` has a kink wherever a point of one arm
meets a point of another, and L-BFGS-B needed about six times the acquisition evaluations of the
earlier version below (one test-bed run, ``d10-step-mild-quiet`` for 100 epochs: 32,000 against
5,500; 9,500 at ``tau = 0.001``). Smoothing makes ``D^2`` quadratic in a point's shift
``delta`` below about ``tau`` where the true one is linear (moving a step of height ``h`` by
``delta`` changes it by ``h^2 |delta|``): at ``tau = 0.001`` a shift of one point by 0.005 comes
out at 0.77 of the exact ``D^2``, 0.01 at 0.89, 0.04 at 0.97. An earlier version sampled logistic
steps of width 0.005 on a grid of 100 betas: there shifts of 0.005 to 0.01 per point came out at
0.21 to 0.39 of the exact ``D^2`` and 0.04 at 0.72, so its GP saw every schedule within about 0.01
a point of an arm as nearly that arm; on the test bed, what one point of a ten-point schedule is
worth is a shift of 0.008 in each (``docs/adaptive-d.md``, *Revision 6*). The smoothing's ``tau``
was set from these two measurements (search cost and distance), before the bandit ran with it.

Why this distance: for any integrand ``f`` with Lipschitz constant ``K``,

    |L(b) - L(b')| = |int_0^1 f(s_b(u)) - f(s_b'(u)) du| <= K ||s_b - s_b'||_1 <= K ||s_b - s_b'||_2,

so schedules whose step functions are close have close left sums whatever the integrand, which
changes through training and from model to model. (A warp of the betas that follows the
integrand's shape would tighten the bound for one integrand; none is known in advance.) Every
step function lies in a ball of radius ``(int_0^1 u^2 du)^(1/2) = 0.58`` about 0.

:func:`pad_arm` writes an arm of any length as ``n`` points by repeating its largest point, which
adds intervals of width zero and leaves ``s_b`` unchanged: a GP over padded arms
(:class:`~tvolib.bandit.kernels.StepFunctionKernel`) sees every length through one input.

Example:
    >>> corner = torch.tensor([[0.05, 0.0501, 0.0502, 0.95]], dtype=torch.float64)
    >>> three = torch.tensor([[0.05, 0.95, 0.95, 0.95]], dtype=torch.float64)
    >>> float(step_square_distance(corner, three).sqrt()) < 0.01
    True
    >>> one, other = torch.tensor([[0.5]]), torch.tensor([[0.6]])
    >>> round(float(step_square_distance(one, other, tau=0)), 6)  # exact: 0.5^2 0.1 + 0.1^2 0.4
    0.029
    >>> round(float(step_square_distance(one, other)), 4)  # smoothed steps
    0.0287
    >>> pad_arm([0.4, 0.1], 4)
    [0.1, 0.4, 0.4, 0.4]
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["STEP_WIDTH", "pad_arm", "step_inner", "step_square_distance"]


#: Width ``tau`` of each smoothed step, in beta units (module docstring).
STEP_WIDTH = 1e-3


def _heights(b: Tensor) -> Tensor:
    """The step heights ``h_j = b_j - b_{j-1}`` (``b_0 = 0``) of sorted points ``(..., m)``."""
    return torch.diff(b, dim=-1, prepend=torch.zeros_like(b[..., :1]))


def _smooth_max(a: Tensor, c: Tensor, tau: float) -> Tensor:
    """``E max(a + tau e, c + tau e')`` for independent standard normals ``e, e'``:
    ``(a + c) / 2 + E|m + sigma Z| / 2`` with ``m = a - c``, ``sigma = sqrt(2) tau`` and
    ``E|m + sigma Z| = m (2 Phi(m / sigma) - 1) + 2 sigma phi(m / sigma)``."""
    sigma = math.sqrt(2.0) * tau
    m = a - c
    z = m / sigma
    mean_abs = m * (2 * torch.special.ndtr(z) - 1) + 2 * sigma * torch.exp(-0.5 * z.square()) / math.sqrt(2 * math.pi)
    return 0.5 * (a + c + mean_abs)


def step_inner(b1: Tensor, b2: Tensor, *, tau: float = STEP_WIDTH) -> Tensor:
    """``<s~_b, s~_c>`` (module docstring) of every pair of rows of ``b1`` ``(..., N, m)`` and ``b2``
    ``(..., M, m')``: sorted interior points in beta units (``b_0 = 0`` implied; repeated points
    allowed); ``tau = 0`` gives the exact step functions' ``<s_b, s_c>``. Returns ``(..., N, M)``."""
    h1, h2 = _heights(b1), _heights(b2)
    a, c = b1[..., :, None, :, None], b2[..., None, :, None, :]
    tail = 1.0 - (torch.maximum(a, c) if tau == 0 else _smooth_max(a, c, tau))  # (..., N, M, m, m')
    return torch.einsum("...nj,...mk,...nmjk->...nm", h1, h2, tail)


def _self_inner(b: Tensor, tau: float) -> Tensor:
    """``<s~_b, s~_b>`` of every row of ``b`` ``(..., N, m)``: ``(..., N)``."""
    return step_inner(b.unsqueeze(-2), b.unsqueeze(-2), tau=tau)[..., 0, 0]


def step_square_distance(b1: Tensor, b2: Tensor, *, tau: float = STEP_WIDTH) -> Tensor:
    """``D(b, c)^2 = ||s~_b - s~_c||^2`` (module docstring) of every pair of rows of ``b1`` ``(...,
    N, m)`` and ``b2`` ``(..., M, m')``.

    Args:
        b1, b2: interior points in beta units, each row *sorted* ascending (``b_0 = 0`` implied;
            repeated points allowed: they add intervals of width zero).
        tau: the steps' width (``0``: the exact step functions, not differentiable where a point
            of one arm equals one of the other).

    Returns:
        ``(..., N, M)``, at least 0, differentiable in the points.
    """
    cross = step_inner(b1, b2, tau=tau)
    return (_self_inner(b1, tau)[..., :, None] + _self_inner(b2, tau)[..., None, :] - 2 * cross).clamp_min(0.0)


def pad_arm(arm: Sequence[float] | Tensor, n: int) -> list[float]:
    """``arm`` sorted and padded to ``n`` points by repeating its largest (intervals of width zero).

    Raises:
        ValueError: ``arm`` is empty or longer than ``n``.
    """
    points = sorted(float(v) for v in (arm.tolist() if torch.is_tensor(arm) else arm))
    if not points or len(points) > n:
        raise ValueError(f"an arm of 1 to {n} points can be padded to {n}; got {len(points)} points")
    return points + [points[-1]] * (n - len(points))
