"""K independent Adam optimisers over stacked ``(K, ...)`` parameters, one step count per run.

Adam acts elementwise, so one optimiser over a stacked tensor is K optimisers over its slices,
except for the bias corrections ``1 - beta^t``, which depend on each run's step count ``t_k``.
:class:`StackedAdam` keeps ``t_k`` per run (runs may join a stack at different steps, e.g. after
a resume) and applies ``torch.optim.Adam``'s update with per-run corrections:

    m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2,
    theta <- theta - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps),

with the same operations in the same order as ``torch.optim.Adam``'s single-tensor path, so given
the same gradients run ``k`` follows a ``torch.optim.Adam`` over run ``k``'s parameters to float32
rounding, bitwise where the elementwise kernels coincide (as on the CPUs tested; tests/stacked).
Run ``k``'s state converts to and from the state dicts of the single-run trainer's two Adam
optimisers (theta, phi) with :meth:`StackedAdam.run_state_dicts` and
:meth:`StackedAdam.load_run_state_dicts`.

Example:
    >>> opt = StackedAdam(stack, lr=1e-3)  # doctest: +SKIP
    >>> stacked_loss("tvo", stack, x, 10, noise, points).loss.sum().backward()  # doctest: +SKIP
    >>> opt.step(); opt.zero_grad()  # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor

from tvolib.models.base import LatentVariableModel
from tvolib.stacked.models import StackedModel, host_to_device

__all__ = ["StackedAdam"]


class StackedAdam:
    """Adam (Kingma & Ba 2015; ``torch.optim.Adam`` defaults) for every run of a :class:`StackedModel`.

    Args:
        stack: the stacked model whose ``params`` (K, ...) are updated in place.
        lr: learning rate (the paper: 1e-3), shared by the runs.
        betas, eps: as ``torch.optim.Adam``.
    """

    def __init__(self, stack: StackedModel, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a finite number > 0; got {lr!r}")
        if not (len(betas) == 2 and all(0.0 <= b < 1.0 for b in betas)):
            raise ValueError(f"betas must be two numbers in [0, 1); got {betas!r}")
        if not (isinstance(eps, (int, float)) and eps >= 0):
            raise ValueError(f"eps must be a number >= 0; got {eps!r}")
        self.stack, self.lr, self.betas, self.eps = stack, float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.steps: list[int] = [0] * stack.K
        self.exp_avg = {n: torch.zeros_like(p, memory_format=torch.preserve_format) for n, p in stack.params.items()}
        self.exp_avg_sq = {n: torch.zeros_like(p, memory_format=torch.preserve_format) for n, p in stack.params.items()}

    def zero_grad(self) -> None:
        """Drop the stacked parameters' gradients (``set_to_none``)."""
        for p in self.stack.params.values():
            p.grad = None

    def _corrections(self, ref: Tensor) -> tuple[Tensor, Tensor]:
        """Per-run ``-lr / (1 - beta1^t)`` and ``sqrt(1 - beta2^t)``, computed in double as torch does, ``(K,)``."""
        beta1, beta2 = self.betas
        neg_step = [-(self.lr / (1 - beta1**t)) for t in self.steps]
        bc2_sqrt = [(1 - beta2**t) ** 0.5 for t in self.steps]
        as_t = lambda v: host_to_device(torch.tensor(v, dtype=torch.float64).to(ref.dtype), ref.device)  # noqa: E731
        return as_t(neg_step), as_t(bc2_sqrt)

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every run; parameters without a gradient are left alone (as torch does)."""
        self.steps = [t + 1 for t in self.steps]
        beta1, beta2 = self.betas
        ref = next(iter(self.stack.params.values()))
        neg_step, bc2_sqrt = self._corrections(ref)
        for name, p in self.stack.params.items():
            if p.grad is None:
                continue
            grad, m, v = p.grad, self.exp_avg[name], self.exp_avg_sq[name]
            shape = (-1,) + (1,) * (p.ndim - 1)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v.sqrt() / bc2_sqrt.view(shape)).add_(self.eps)
            # torch's addcdiv_(m, denom, value=-step_size) computes p + (value * m) / denom.
            p.add_(neg_step.view(shape) * m / denom)

    # ----- runs in and out ------------------------------------------------------------------------
    def _torch_adams(self, model: LatentVariableModel) -> list[torch.optim.Adam]:
        return [torch.optim.Adam(list(ps), lr=self.lr, betas=self.betas, eps=self.eps)
                for ps in (model.generative_parameters(), model.inference_parameters())]

    def run_state_dicts(self, k: int, model: LatentVariableModel | None = None) -> list[dict[str, Any]]:
        """Run ``k``'s state as the ``state_dict()`` of two ``torch.optim.Adam`` (theta, then phi).

        That is the single-run trainer's checkpoint format; ``model`` (default: ``stack.unstack(k)``)
        supplies the parameter objects the two optimisers are built over.
        """
        k = self.stack._check_run(k)
        model = model if model is not None else self.stack.unstack(k)
        params = dict(model.named_parameters())
        out = []
        for opt, names in zip(self._torch_adams(model), (self.stack.generative_names, self.stack.inference_names)):
            if self.steps[k] > 0:
                for n in names:
                    opt.state[params[n]] = {
                        "step": torch.tensor(float(self.steps[k])),
                        "exp_avg": self.exp_avg[n][k].clone().to(params[n].device),
                        "exp_avg_sq": self.exp_avg_sq[n][k].clone().to(params[n].device),
                    }
            out.append(opt.state_dict())
        return out

    def load_run_state_dicts(self, k: int, states: Sequence[dict[str, Any]]) -> None:
        """Set run ``k``'s state from the two single-run Adam state dicts (theta, phi) of a checkpoint."""
        k = self.stack._check_run(k)
        if len(states) != 2:
            raise ValueError(f"states must be the two Adam state dicts (theta, phi); got {len(states)}")
        steps = set()
        for state, names in zip(states, (self.stack.generative_names, self.stack.inference_names)):
            per_param = state.get("state", {})
            if per_param and sorted(per_param) != list(range(len(names))):
                raise ValueError(f"an Adam state dict for {len(names)} parameters has state for {sorted(per_param)}")
            for i, n in enumerate(names):
                s = per_param.get(i)
                for key in ("exp_avg", "exp_avg_sq"):
                    if s and tuple(s[key].shape) != tuple(self.exp_avg[n][k].shape):
                        raise ValueError(f"the saved Adam state of parameter {n}: {key!r} has shape "
                                         f"{tuple(s[key].shape)}, the parameter {tuple(self.exp_avg[n][k].shape)} "
                                         "(a checkpoint of another model?)")
                with torch.no_grad():
                    self.exp_avg[n][k].copy_(s["exp_avg"] if s else 0.0)
                    self.exp_avg_sq[n][k].copy_(s["exp_avg_sq"] if s else 0.0)
                steps.add(int(float(s["step"])) if s else 0)
        if len(steps) != 1:
            raise ValueError(f"the parameters of one run must share one step count; got {sorted(steps)}")
        self.steps[k] = steps.pop()

    def run_state_dict(self, k: int, model: LatentVariableModel | None = None) -> dict[str, Any]:
        """Run ``k``'s state as the ``state_dict()`` of one ``torch.optim.Adam`` over theta, then phi.

        That is the single-run trainer's optimiser (checkpoint format 2): Adam acts elementwise, so
        it holds exactly the states of the two optimisers of :meth:`run_state_dicts`, renumbered.
        """
        theta, phi = self.run_state_dicts(k, model)
        offset = len(self.stack.generative_names)
        (group,), (phi_group,) = theta["param_groups"], phi["param_groups"]
        return {"state": {**theta["state"], **{offset + i: s for i, s in phi["state"].items()}},
                "param_groups": [dict(group, params=group["params"] + [offset + i for i in phi_group["params"]])]}

    def load_run_state_dict(self, k: int, state: dict[str, Any]) -> None:
        """Set run ``k``'s state from one ``torch.optim.Adam`` state dict over theta, then phi (:meth:`run_state_dict`)."""
        groups = state.get("param_groups") if isinstance(state, dict) else None
        n_theta, n_phi = len(self.stack.generative_names), len(self.stack.inference_names)
        if not groups or len(groups) != 1 or len(groups[0].get("params", ())) != n_theta + n_phi:
            raise ValueError(f"state must be one Adam state dict with one parameter group over the run's "
                             f"{n_theta + n_phi} parameters (theta, then phi)")
        per_param = state.get("state", {})
        parts = [{"state": {i: per_param[i] for i in range(n_theta) if i in per_param}},
                 {"state": {i - n_theta: per_param[i] for i in range(n_theta, n_theta + n_phi) if i in per_param}}]
        self.load_run_state_dicts(k, parts)

    def select(self, runs: Sequence[int], stack: StackedModel) -> "StackedAdam":
        """The optimiser of ``stack = self.stack.select(runs)``: the chosen runs' states, copied."""
        idx = [self.stack._check_run(k) for k in runs]
        if stack.K != len(idx):
            raise ValueError(f"stack has {stack.K} runs; runs names {len(idx)}")
        new = StackedAdam(stack, self.lr, self.betas, self.eps)
        index = torch.tensor(idx, device=stack.device)
        new.steps = [self.steps[k] for k in idx]
        new.exp_avg = {n: m[index].clone() for n, m in self.exp_avg.items()}
        new.exp_avg_sq = {n: v[index].clone() for n, v in self.exp_avg_sq.items()}
        return new
