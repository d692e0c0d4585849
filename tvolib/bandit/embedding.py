"""Schedules of any length as one vector: the left-Riemann step function on a fixed grid.

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

The embedding evaluates a smoothed step function at ``G`` grid midpoints ``u_g = (g - 1/2) / G``:

    phi(b)_g = s~_b(u_g) / sqrt(G),
    s~_b(u) = sum_{j=1}^{d-1} (b_j - b_{j-1}) sigma((u - b_j) / tau),

so that ``||phi(b) - phi(b')||^2`` is the grid's estimate of ``int_0^1 (s_b(u) - s_b'(u))^2 du``.
``s~_b`` is ``s_b`` written as a sum of steps of height ``b_j - b_{j-1}`` at ``b_j``, each step a
logistic ``sigma`` of width ``tau`` (half a grid cell by default): the embedding is then
differentiable in the points, which the acquisition's L-BFGS-B needs (the exact step function is
piecewise constant in ``b`` and has no gradient). Repeated points add steps of height 0.

The estimate is close for arms that differ by more than a few grid cells and too small below:
moving one point by ``delta`` changes the exact squared distance by about ``h^2 delta`` (``h`` its
step's height), linear in ``delta``, but the smoothed, sampled one about quadratically. Shifting
the point 0.4 of ``[0.2, 0.4, 0.6]`` by 0.005, 0.01, 0.02 and 0.04 gives 0.16, 0.31, 0.53 and 0.73
of the exact value. The distance in closed form (``<s_b, s_c> = sum_{j,k} h_j h'_k (1 -
max(b_j, c_k))``, steps smoothed by 0.001) was tried in its place and not adopted: on the test
bed its GP's candidates came no nearer the optimum, at six times the run time
(``docs/adaptive-d.md``, *The time kernel where nine points are best*).

Why this distance: for any integrand ``f`` with Lipschitz constant ``K``,

    |L(b) - L(b')| = |int_0^1 f(s_b(u)) - f(s_b'(u)) du| <= K ||s_b - s_b'||_1 <= K ||s_b - s_b'||_2,

so schedules whose step functions are close have close left sums whatever the integrand, which
changes through training and from model to model. (A warp of the betas that follows the
integrand's shape would tighten the bound for one integrand; none is known in advance.) Every
embedding lies in a set of diameter at most ``(int_0^1 u^2 du)^(1/2) = 0.58``.

:func:`pad_arm` writes an arm of any length as ``n`` points by repeating its largest point, which
adds intervals of width zero and leaves ``phi`` unchanged: a GP over padded arms
(:class:`~tvolib.bandit.kernels.StepFunctionKernel`) sees every length through one input.

Example:
    >>> corner = step_embedding(torch.tensor([0.05, 0.0501, 0.0502, 0.95]))
    >>> three = step_embedding(torch.tensor([0.05, 0.95]))
    >>> float((corner - three).norm()) < 0.01
    True
    >>> pad_arm([0.4, 0.1], 4)
    [0.1, 0.4, 0.4, 0.4]
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["GRID_SIZE", "STEP_WIDTH", "pad_arm", "step_embedding", "step_grid"]

#: Grid points ``G`` of the embedding (a resolution of 0.01 in beta).
GRID_SIZE = 100
#: Width ``tau`` of each smoothed step, in grid cells.
STEP_WIDTH = 0.5


def step_grid(size: int = GRID_SIZE, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
              ) -> Tensor:
    """The grid midpoints ``u_g = (g - 1/2) / G``, ``(G,)``."""
    if size < 1:
        raise ValueError(f"the step grid needs at least one point; got {size}")
    return (torch.arange(size, dtype=dtype, device=device) + 0.5) / size


def step_embedding(points: Tensor, *, grid: Tensor | None = None, width: float = STEP_WIDTH) -> Tensor:
    """``phi(b)`` (module docstring) of the interior points ``points`` ``(..., m)``, any order.

    Args:
        points: interior points ``b_1..b_{d-1}`` in beta units (``b_0 = 0`` is implied), in any
            order; repeated points are allowed (they add intervals of width zero).
        grid: the grid ``(G,)`` (default :func:`step_grid`).
        width: the steps' logistic width in grid cells.

    Returns:
        ``(..., G)``, differentiable in ``points``.
    """
    grid = step_grid(dtype=points.dtype, device=points.device) if grid is None else grid
    tau = width / grid.shape[-1]
    b = torch.sort(points, dim=-1).values
    rise = torch.diff(b, dim=-1, prepend=torch.zeros_like(b[..., :1]))  # b_j - b_{j-1}, b_0 = 0
    steps = torch.sigmoid((grid.unsqueeze(-2) - b.unsqueeze(-1)) / tau)  # (..., m, G)
    s = (rise.unsqueeze(-1) * steps).sum(-2)
    return s / math.sqrt(grid.shape[-1])


def pad_arm(arm: Sequence[float] | Tensor, n: int) -> list[float]:
    """``arm`` sorted and padded to ``n`` points by repeating its largest (intervals of width zero).

    Raises:
        ValueError: ``arm`` is empty or longer than ``n``.
    """
    points = sorted(float(v) for v in (arm.tolist() if torch.is_tensor(arm) else arm))
    if not points or len(points) > n:
        raise ValueError(f"an arm of 1 to {n} points can be padded to {n}; got {len(points)} points")
    return points + [points[-1]] * (n - len(points))
