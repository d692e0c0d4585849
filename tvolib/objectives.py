"""Gradient estimators: the TVO's covariance estimator and the baselines' training losses.

The bounds themselves (SNIS integrand, Riemann sums, IWAE bound) live in :mod:`tvolib.tvo`;
notation as there (``log w`` of shape ``(S, B)``).

Gradient estimators used by :func:`compute_loss` (``loss`` is the negated objective, averaged over
the batch; minimise it):

============== ======================================= ========================================
objective      continuous latents (VAE)                discrete latents (SBN, PCFG)
============== ======================================= ========================================
elbo           reparameterised                         score function, leave-one-out baseline
                                                       (none when S = 1)
iwae           reparameterised                         error (use reinforce or vimco)
reinforce      score function of the IWAE-S bound, no baseline (both)
vimco          score function of the IWAE-S bound, leave-one-out baselines (Mnih & Rezende 2016)
wake-wake      theta: SNIS (IWAE) gradient; phi: wake-phi, SNIS-weighted -log q (two optimisers)
wake-sleep     theta: as wake-wake; phi: sleep-phi, -log q(z|x) on (z, x) ~ p (two optimisers)
tvo            covariance (score-function) estimator of Masrani et al. 2019 (both; the default,
               as in the paper's code)
tvo_reparam    reparameterised covariance estimator    error (needs reparameterisation)
============== ======================================= ========================================

Example:
    >>> from tvolib.models import build_model
    >>> from tvolib.tvo import linear
    >>> model = build_model("vae", hidden=(8,), latent_dim=2)
    >>> out = compute_loss("tvo", model, torch.bernoulli(torch.rand(4, 784)), S=5, betas=linear(3))
    >>> out.loss.backward()
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from tvolib.checks import check_samples
from tvolib.tvo import riemann_weights

__all__ = [
    "OBJECTIVES",
    "LossOutput",
    "compute_loss",
    "covariance_surrogate",
]

#: Objective names accepted by :func:`compute_loss`.
OBJECTIVES = ("elbo", "iwae", "reinforce", "vimco", "wake-wake", "wake-sleep", "tvo", "tvo_reparam")

#: Objectives whose covariance estimator needs at least two samples per data point.
_TVO_FAMILY = ("tvo", "tvo_reparam")


class LossOutput(NamedTuple):
    """What one training step needs.

    ``phi_loss is None``: ``loss`` trains all parameters with one optimiser. Otherwise ``loss``
    depends only on ``generative_parameters()`` and ``phi_loss`` only on
    ``inference_parameters()``, so ``(loss + phi_loss).backward()`` gives each set its own
    gradient. ``log_w`` ``(S, B)`` is detached, for cheap training metrics.
    """

    loss: Tensor
    phi_loss: Tensor | None
    log_w: Tensor


# --------------------------------------------------------------------------------------------
# Training losses
# --------------------------------------------------------------------------------------------


def _log_mean_exp(log_w: Tensor) -> Tensor:
    """The IWAE-S bound ``logsumexp_s(log w_s) - log S``: ``(B,)``.

    Same value as :func:`tvolib.tvo.iwae_bound` without its input check, so that a diverged model's
    NaN weights reach the trainer's divergence check instead of raising here.
    """
    return torch.logsumexp(log_w, dim=0) - math.log(log_w.shape[0])


def _loo_mean(values: Tensor) -> Tensor:
    """Mean over the other samples, ``(sum - v_s) / (S - 1)``, per sample: ``(S, B)``."""
    return (values.sum(dim=0, keepdim=True) - values) / (values.shape[0] - 1)


def covariance_surrogate(
    log_w: Tensor, log_pi_tilde: Tensor, betas: Tensor, deltas: Tensor
) -> Tensor:
    """Surrogate whose gradient is the covariance estimator of the TVO gradient (Eq. 5).

    For one beta, with ``f = log w`` and ``log pi~_beta`` the unnormalised log density of
    ``pi_beta`` (Eq. 2), differentiating ``E_{pi_beta}[f] = int pi~ f / Z`` gives::

        d/dtheta E_pi[f] = E_pi[df] + E_pi[f dlog pi~] - E_pi[f] dlog Z
                         = E_pi[df] + Cov_pi(f, dlog pi~),   since dlog Z = E_pi[dlog pi~].

    Both expectations are estimated by SNIS (Eq. 4) with detached weights ``softmax(beta log w)``;
    the covariance is multiplied by ``S / (S - 1)`` (Masrani et al. 2019). At beta = 0 the weights
    are uniform and the covariance term is exactly the score-function gradient with leave-one-out
    baselines, so the correction makes that term unbiased. The TVO gradient is the
    ``deltas``-weighted sum over the left points. With ``S = 1`` the covariance is zero and the
    surrogate carries no score-function gradient (:func:`compute_loss` refuses ``S < 2``).

    Args:
        log_w: ``(S, B)`` log weights, differentiable in the parameters to train.
        log_pi_tilde: ``(d, S, B)`` unnormalised ``log pi_beta`` at each left point.
        betas: ``(d,)`` left points, in ``log_w``'s dtype and device.
        deltas: ``(d,)`` interval widths ``b_{j+1} - b_j``.

    Returns:
        A tensor ``(B,)`` whose value is not a bound (read bounds from ``log_w``) and whose
        gradient is the covariance estimator.

    Example:
        >>> log_w = torch.randn(4, 2, requires_grad=True)
        >>> b, deltas = torch.tensor([0.0, 0.5]), torch.tensor([0.5, 0.5])
        >>> covariance_surrogate(log_w, b[:, None, None] * log_w[None], b, deltas).shape
        torch.Size([2])
    """
    S = log_w.shape[0]
    correction = S / (S - 1) if S > 1 else 1.0
    f = log_w.detach()[None]
    weights = torch.softmax(betas[:, None, None] * f, dim=1)
    mean_term = (weights * log_w[None]).sum(dim=1)
    centred_f = f - (weights * f).sum(dim=1, keepdim=True)
    centred_pi = log_pi_tilde - (weights * log_pi_tilde).sum(dim=1, keepdim=True)
    covariance = correction * (weights * centred_f * centred_pi).sum(dim=1)
    return (deltas[:, None] * (mean_term + covariance)).sum(dim=0)


def _left_points(betas: Tensor | list[float] | None, ref: Tensor) -> tuple[Tensor, Tensor]:
    """The left points and their widths in ``ref``'s dtype and device.

    A schedule given on the host (a list, or a CPU tensor) is validated and moved once per
    distinct schedule, dtype and device (:func:`_left_points_on`): a training loop calls this every
    minibatch with the same schedule, and a copy from pageable host memory would wait for the
    device's queue each time.
    """
    if betas is None:
        raise ValueError("the tvo objectives need betas, a schedule 0 = b_0 < ... < b_{d-1} < 1")
    host = not torch.is_tensor(betas) or (betas.device.type == "cpu" and betas.ndim == 1)
    if host:
        try:
            key = tuple(float(v) for v in betas)
        except (TypeError, ValueError):
            host = False  # not a flat sequence of numbers: riemann_weights names what is wrong
    if host:
        return _left_points_on(key, ref.dtype, ref.device)
    nodes, weights = riemann_weights(betas, "left")
    return nodes[:-1].to(ref), weights[:-1].to(ref)


@functools.lru_cache(maxsize=32)
def _left_points_on(betas: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """:func:`_left_points` of a host schedule, cached (the tensors are only read, never written)."""
    nodes, weights = riemann_weights(list(betas), "left")
    return nodes[:-1].to(dtype=dtype, device=device), weights[:-1].to(dtype=dtype, device=device)


def _continuous_only(model, objective: str) -> None:
    if model.discrete:
        raise ValueError(
            f"objective {objective!r} needs reparameterised samples, which the discrete model "
            f"{type(model).__name__} cannot give; use 'tvo', 'vimco', 'reinforce', 'elbo' "
            "(score function), 'wake-wake' or 'wake-sleep'"
        )


def _elbo(model, x: Tensor, S: int, betas) -> LossOutput:
    if not model.discrete:
        log_p, log_q = model.log_joint_and_q(x, S, reparam=True)
        log_w = log_p - log_q
        return LossOutput(-log_w.mean(), None, log_w.detach())
    log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
    log_w = log_p - log_q
    signal = log_w.detach() - (_loo_mean(log_w.detach()) if S > 1 else 0.0)
    surrogate = log_w + signal * log_q
    return LossOutput(-surrogate.mean(), None, log_w.detach())


def _iwae(model, x: Tensor, S: int, betas) -> LossOutput:
    _continuous_only(model, "iwae")
    log_p, log_q = model.log_joint_and_q(x, S, reparam=True)
    log_w = log_p - log_q
    return LossOutput(-_log_mean_exp(log_w).mean(), None, log_w.detach())


def _reinforce(model, x: Tensor, S: int, betas) -> LossOutput:
    log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
    log_w = log_p - log_q
    bound = _log_mean_exp(log_w)
    surrogate = bound + bound.detach() * log_q.sum(dim=0)
    return LossOutput(-surrogate.mean(), None, log_w.detach())


def _vimco(model, x: Tensor, S: int, betas) -> LossOutput:
    if S < 2:
        raise ValueError(f"vimco needs S >= 2 samples for its leave-one-out baselines; got S={S}")
    log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
    log_w = log_p - log_q
    bound = _log_mean_exp(log_w)
    lw = log_w.detach()
    # Row r: the S log weights with log w_r replaced by the mean of the others (geometric mean).
    eye = torch.eye(S, dtype=torch.bool, device=lw.device)[:, :, None]
    replaced = torch.where(eye, _loo_mean(lw)[:, None, :], lw[None, :, :])
    baselines = torch.logsumexp(replaced, dim=1) - math.log(S)
    surrogate = bound + ((bound.detach()[None] - baselines) * log_q).sum(dim=0)
    return LossOutput(-surrogate.mean(), None, log_w.detach())


def _wake_theta(model, x: Tensor, S: int) -> tuple[Tensor, Tensor, Tensor]:
    """Wake-theta: the IWAE bound with log q detached, so only theta gets the SNIS gradient."""
    log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
    theta_loss = -_log_mean_exp(log_p - log_q.detach()).mean()
    return theta_loss, log_q, (log_p - log_q).detach()


def _wake_wake(model, x: Tensor, S: int, betas) -> LossOutput:
    theta_loss, log_q, log_w = _wake_theta(model, x, S)
    phi_loss = -(torch.softmax(log_w, dim=0) * log_q).sum(dim=0).mean()
    return LossOutput(theta_loss, phi_loss, log_w)


def _wake_sleep(model, x: Tensor, S: int, betas) -> LossOutput:
    theta_loss, _, log_w = _wake_theta(model, x, S)
    with torch.no_grad():  # sleep-phi: S dreams per data point, no gradient into theta
        z, x_dream = model.sample_joint(S * x.shape[0])
    phi_loss = -model.log_q_given(z, x_dream).mean()
    return LossOutput(theta_loss, phi_loss, log_w)


def _tvo(model, x: Tensor, S: int, betas) -> LossOutput:
    log_p, log_q = model.log_joint_and_q(x, S, reparam=False)
    log_w = log_p - log_q
    points, deltas = _left_points(betas, log_w)
    b = points[:, None, None]
    log_pi_tilde = b * log_p[None] + (1 - b) * log_q[None]
    surrogate = covariance_surrogate(log_w, log_pi_tilde, points, deltas)
    return LossOutput(-surrogate.mean(), None, log_w.detach())


def _tvo_reparam(model, x: Tensor, S: int, betas) -> LossOutput:
    _continuous_only(model, "tvo_reparam")
    log_p, log_q = model.log_joint_and_q(x, S, reparam=True)
    log_w = log_p - log_q
    points, deltas = _left_points(betas, log_w)
    # With z = g(eps), pi_beta over eps has unnormalised log density beta log w + const.
    log_pi_tilde = points[:, None, None] * log_w[None]
    surrogate = covariance_surrogate(log_w, log_pi_tilde, points, deltas)
    return LossOutput(-surrogate.mean(), None, log_w.detach())


_LOSSES: dict[str, Callable[..., LossOutput]] = {
    "elbo": _elbo,
    "iwae": _iwae,
    "reinforce": _reinforce,
    "vimco": _vimco,
    "wake-wake": _wake_wake,
    "wake-sleep": _wake_sleep,
    "tvo": _tvo,
    "tvo_reparam": _tvo_reparam,
}


def compute_loss(
    objective: str, model, x: Tensor, S: int, betas: Tensor | list[float] | None = None
) -> LossOutput:
    """Loss(es) for one minibatch ``x`` with ``S`` samples per data point (see the module table).

    ``loss`` is the negated objective averaged over the batch (minimise it). The loss values of
    the score-function objectives include surrogate terms (e.g. the covariance term of ``tvo``),
    so read bounds from ``log_w`` (e.g. :func:`tvolib.tvo.tvo_bound`), not from the loss.

    Args:
        objective: one of :data:`OBJECTIVES`.
        model: a :class:`~tvolib.models.LatentVariableModel`.
        x: ``(B, D)`` minibatch, checked by the model (shape, dtype, device, finiteness, binary
            values for the SBN).
        S: samples per data point; ``>= 2`` for ``tvo``/``tvo_reparam`` (the covariance
            estimator) and ``vimco`` (leave-one-out baselines), ``>= 1`` otherwise.
        betas: a left-point schedule (Eq. 5), required by ``tvo`` and ``tvo_reparam`` and
            ignored otherwise.

    Returns:
        A :class:`LossOutput` ``(loss, phi_loss, log_w)``.

    Example:
        >>> from tvolib.models import build_model
        >>> from tvolib.tvo import linear
        >>> model = build_model("sbn", latent_dims=(3,))
        >>> out = compute_loss("tvo", model, torch.bernoulli(torch.rand(4, 784)), 5, linear(3))
        >>> out.log_w.shape
        torch.Size([5, 4])
    """
    if objective not in _LOSSES:
        raise ValueError(f"unknown objective {objective!r}; accepted: {OBJECTIVES}")
    if objective in _TVO_FAMILY:
        S = _check_tvo_samples(objective, S)
    else:
        S = check_samples(S)
    if not isinstance(x, Tensor) or x.ndim < 1 or x.shape[0] < 1:
        raise ValueError("x must be a tensor whose first dimension is a non-empty batch")
    return _LOSSES[objective](model, x, S, betas)


def _check_tvo_samples(objective: str, S: int) -> int:
    check_samples(S)
    if S < 2:
        raise ValueError(
            f"objective {objective!r} needs S >= 2 samples per data point: with S = 1 the covariance "
            "term of its gradient estimator is zero and the encoder would train on noise; got S=1"
        )
    return S
