"""GP-UCB acquisition of the bandit (Section 4.1, Eq. 17; Theorem 1), via BoTorch.

``beta_{t+1} = argmax_b mu_t(b) + sqrt(kappa_t) sigma_t(b)`` at the current time, with ``kappa_t``
from Theorem 1 and the time column of the GP input held fixed (BoTorch ``optimize_acqf`` with
``fixed_features``): multi-start L-BFGS-B over the (normalised) box, started from the best of a
Sobol set of raw samples. The result is projected onto the feasible set by sorting (Section 4.2).
"""
from __future__ import annotations

import math
import warnings

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from .model import BanditGP
from .threads import one_blas_thread

__all__ = ["GPUCB", "MAX_NUM_RESTARTS", "MAX_RAW_SAMPLES", "PaddedArms", "acquisition_budget", "arm_effect_posterior",
           "maximize_ucb", "project_arm", "theorem1_kappa"]

#: Largest acquisition budgets accepted (16 and 10 times the defaults' largest): the raw samples are
#: evaluated in one batch, the restarts optimised as one problem.
MAX_RAW_SAMPLES = 16384
MAX_NUM_RESTARTS = 100


def theorem1_kappa(n_rounds: int, dim: int, *, delta: float = 0.1, a: float = 1.0, b: float = 1.0) -> float:
    """Exploration weight ``kappa`` of Theorem 1 after ``n_rounds`` bandit rounds.

    With ``n = T / w`` the number of rounds so far and ``dim`` the dimension of the arm's domain,

        kappa = 2 log(pi^2 n^2 / (2 delta)) + 2 dim log(dim b n^2 sqrt(log(dim a pi^2 n^2 / (2 delta)))),

    the time-varying GP-UCB weight of Bogunovic et al. (2016) (after Srinivas et al. 2010, Thm 2;
    the square root sits inside the last logarithm, as there). ``delta`` in (0, 1) is the failure
    probability of the regret bound; ``a, b > 0`` bound the reward's Lipschitz constants through
    ``P(sup |df/db_j| >= L) <= a exp(-(L / b)^2)``. Defaults: ``delta = 0.1`` (a 90% bound),
    ``a = b = 1`` (unit-scale gradients for standardised rewards on the normalised box) -- the
    paper gives no values.

    Args:
        n_rounds: completed bandit rounds ``n >= 1``.
        dim: dimension of the arm (``d - 1`` for a schedule of ``d`` left points).
        delta: failure probability in (0, 1).
        a, b: the Lipschitz-tail constants, > 0.

    Returns:
        ``kappa`` as a float (the acquisition uses ``sqrt(kappa)``).

    Example:
        >>> round(theorem1_kappa(40, 2), 1)
        59.8
    """
    if n_rounds < 1:
        raise ValueError(f"n_rounds must be >= 1; got {n_rounds}")
    if dim < 1:
        raise ValueError(f"dim must be >= 1; got {dim}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta}")
    if not (a > 0 and b > 0):
        raise ValueError(f"a and b must be > 0; got a={a}, b={b}")
    n2 = float(n_rounds) ** 2
    inner = math.log(dim * a * math.pi**2 * n2 / (2 * delta))
    if inner <= 0:
        raise ValueError(f"log(dim a pi^2 n^2 / (2 delta)) = {inner:.3g} <= 0: increase a or decrease delta")
    return 2 * math.log(math.pi**2 * n2 / (2 * delta)) + 2 * dim * math.log(dim * b * n2 * math.sqrt(inner))


class GPUCB(AcquisitionFunction):
    """``mu(x) + sqrt(kappa) sigma(x)`` (Eq. 17) on a :class:`BanditGP`, ``q = 1``.

    The posterior is the arm effect's (``component="arm"``): with a trend term in the GP, the
    trend's share is the same for every arm at the time of the acquisition and is left out, so the
    exploration bonus measures what is unknown about the arm, not about the trend. Without a trend
    it is the whole posterior.

    Same value as BoTorch's ``UpperConfidenceBound(model, beta=kappa)``; written out (three lines)
    because that class moves the model to the input's device and builds a posterior object on every
    call, a quarter of the acquisition time at the sizes used here.
    """

    def __init__(self, model: BanditGP, kappa: float) -> None:
        super().__init__(model=model)
        self.sqrt_kappa = math.sqrt(kappa)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        mean, var = self.model.mean_and_variance(X.squeeze(-2), component="arm")
        return mean + self.sqrt_kappa * var.clamp_min(1e-12).sqrt()


class PaddedArms(torch.nn.Module):
    """A view of a :class:`BanditGP` over arms of ``n_points`` points, fewer than its ``n_arm`` columns.

    The view's input is ``[arm (n_points columns), t]``; the GP sees the arm padded to its
    ``n_arm`` columns by repeating the arm's largest coordinate, which a kernel invariant to
    repeated points (:class:`~tvolib.bandit.kernels.StepFunctionKernel`) reads as the arm itself.
    :func:`maximize_ucb` then maximises over arms of ``n_points`` points.

    Example:
        >>> view = PaddedArms(BanditGP(4), 2)
        >>> view.pad(torch.tensor([[0.1, 0.3, 0.5]], dtype=torch.float64)).tolist()  # arm (0.1, 0.3), t = 0.5
        [[0.1, 0.3, 0.3, 0.3, 0.5]]
    """

    def __init__(self, gp: BanditGP, n_points: int) -> None:
        super().__init__()
        if not 1 <= n_points <= gp.n_arm:
            raise ValueError(f"n_points must lie in [1, {gp.n_arm}] (the GP's arm columns); got {n_points}")
        self.gp, self.n_arm = gp, int(n_points)

    def pad(self, x: Tensor) -> Tensor:
        """``[arm, t]`` ``(..., n_points + 1)`` as the GP's input ``(..., gp.n_arm + 1)``."""
        arm, t = x[..., :self.n_arm], x[..., self.n_arm:]
        top = arm.max(dim=-1, keepdim=True).values
        return torch.cat([arm, top.expand(*arm.shape[:-1], self.gp.n_arm - self.n_arm), t], dim=-1)

    def _require_data(self) -> tuple[Tensor, Tensor]:
        return self.gp._require_data()

    def mean_and_variance(self, x: Tensor, component: str = "total") -> tuple[Tensor, Tensor]:
        """The GP's posterior at the padded ``x`` (:meth:`BanditGP.mean_and_variance`)."""
        return self.gp.mean_and_variance(self.pad(x), component)


def arm_effect_posterior(gp: BanditGP, arms: list[Tensor]) -> tuple[Tensor, Tensor]:
    """The arm effect's joint posterior at normalised ``arms``, each of its own length (padded for
    the GP, :class:`PaddedArms`), at the prediction time ``t = 1``.

    Args:
        gp: a :class:`BanditGP` with data; every arm has at most ``gp.n_arm`` points.
        arms: ``M`` tensors of points in the GP's normalised units.

    Returns:
        The mean ``(M,)`` and covariance ``(M, M)`` (:meth:`BanditGP.joint_posterior`, component ``"arm"``).
    """
    rows = torch.cat([PaddedArms(gp, x.numel()).pad(torch.cat([x, x.new_ones(1)])[None]) for x in arms])
    with torch.no_grad():
        return gp.joint_posterior(rows, "arm")


def acquisition_budget(n_arm: int) -> tuple[int, int]:
    """``(raw_samples, num_restarts)`` for an arm of ``n_arm`` coordinates: both grow with it.

    ``raw_samples = min(1024, 128 n_arm)`` Sobol points pick ``num_restarts = min(10, 4 + n_arm)``
    L-BFGS-B starts. With the sorted kernel every permutation of an optimum is an optimum, so
    restarts need not cover the n_arm! copies.
    """
    return min(1024, 128 * n_arm), min(10, 4 + n_arm)


def maximize_ucb(
    gp: BanditGP | PaddedArms,
    *,
    t_norm: float,
    kappa: float,
    seed: int,
    raw_samples: int | None = None,
    num_restarts: int | None = None,
    maxiter: int = 100,
    upper: Tensor | None = None,
    initial: Tensor | None = None,
) -> tuple[Tensor, float]:
    """Maximise GP-UCB over the normalised box ``[0, 1]^n_arm`` at time ``t_norm`` (fixed feature).

    ``upper`` ``(n_arm,)`` (normalised units, in ``(0, 1]``) lowers the box's upper bound per
    coordinate: the staggered arm domain of the authors' code (:mod:`tvolib.bandit.protocol`).
    ``initial`` ``(r, n_arm)`` (normalised arms) starts the ``r`` L-BFGS-B restarts there instead
    of at the best raw samples (``raw_samples`` and ``num_restarts`` are then unused).

    Returns the maximiser ``(n_arm,)`` in normalised units (*not* yet sorted or projected) and the
    acquisition value there (standardised reward units). ``seed`` seeds BoTorch's raw samples; the
    caller is expected to wrap this in ``torch.random.fork_rng`` so global RNG state is untouched.
    """
    if not (kappa >= 0 and math.isfinite(kappa)):
        raise ValueError(f"kappa must be finite and >= 0; got {kappa}")
    n_arm = gp.n_arm
    default_raw, default_restarts = acquisition_budget(n_arm)
    raw_samples = raw_samples or default_raw
    num_restarts = num_restarts or default_restarts
    X = gp._require_data()[0]
    bounds = torch.zeros(2, n_arm + 1, dtype=X.dtype, device=X.device)
    bounds[1] = 1.0
    if upper is not None:
        bounds[1, :n_arm] = torch.as_tensor(upper, dtype=X.dtype, device=X.device)
    acq = GPUCB(gp, kappa)
    starts = {}
    if initial is not None:
        t = torch.full((initial.shape[0], 1), float(t_norm), dtype=X.dtype, device=X.device)
        starts = {"batch_initial_conditions": torch.cat([initial.to(X), t], dim=-1).unsqueeze(-2)}
        num_restarts = raw_samples = initial.shape[0]
    with warnings.catch_warnings(), one_blas_thread():  # see fit.fit_map
        # BoTorch warns when L-BFGS-B stops at maxiter or when raw samples have equal values;
        # the best point found is still returned, which is what a bandit round needs.
        warnings.simplefilter("ignore")
        candidate, value = optimize_acqf(
            acq,
            bounds=bounds,
            q=1,
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            fixed_features={n_arm: float(t_norm)},
            options={
                "seed": int(seed),
                "maxiter": int(maxiter),
                "batch_limit": num_restarts,  # all restarts in one L-BFGS-B problem
                "init_batch_limit": raw_samples,  # all raw samples in one evaluation
            },
            retry_on_optimization_warning=False,
            **starts,
        )
    return candidate.reshape(-1)[:n_arm].detach(), float(value)


def project_arm(arm: Tensor, lo: float, hi: float, min_gap: float = 1e-3) -> Tensor:
    """Projection Phi of Section 4.2: sort ``arm`` and make it a valid strictly increasing schedule.

    Clamps to ``[lo, hi]``, sorts, then moves points the least needed so that neighbours differ by
    at least ``min_gap`` (a maximiser often puts several coordinates on the same bound, and the
    TVO needs distinct points). Needs ``len(arm) * min_gap <= hi - lo``.
    """
    arm = torch.as_tensor(arm, dtype=torch.float64).reshape(-1).clamp(lo, hi)
    n = arm.numel()
    if (n - 1) * min_gap > hi - lo:
        raise ValueError(f"cannot fit {n} points {min_gap} apart in [{lo}, {hi}]")
    out = torch.sort(arm).values.tolist()
    for j in range(1, n):  # push up from the left...
        out[j] = max(out[j], out[j - 1] + min_gap)
    if out[-1] > hi:  # ...and, if that overflowed, back down from the right
        out[-1] = hi
        for j in range(n - 2, -1, -1):
            out[j] = min(out[j], out[j + 1] - min_gap)
    return torch.tensor(out, dtype=torch.float64)
