"""K copies of one latent-variable model evaluated as a single batched computation.

A :class:`StackedModel` is built FROM K single-run models (``tvolib.models.build_model``), which
stay the source of truth: every parameter and buffer is stacked along a new leading run
dimension ``K``, so run ``k`` starts exactly where the single model with its seed starts, and
:meth:`StackedModel.state_dict` writes run ``k`` back in the single model's format.

The layers are hand-batched (``torch.baddbmm`` on ``(K, out, in)`` weights) rather than
``torch.func.vmap`` over the single modules: measured on one GPU (fp32, batch 1000, S = 10,
K = 32-128), the batched matmuls ran about twice as fast. The Monte-Carlo noise is drawn outside the model, per run, from each
run's own ``torch.Generator`` (:meth:`StackedModel.draw_noise`), with the same generator calls
the single model makes on the global RNG; a run in a stack therefore gives the numbers of the single
model to float32 rounding (the same noise; batched matmuls may reduce in another order; tests/stacked).

Example:
    >>> from tvolib.models import build_model
    >>> runs = []
    >>> for seed in (1, 2, 3):
    ...     _ = torch.manual_seed(seed); runs.append(build_model("vae"))
    >>> stack = StackedModel(runs)
    >>> gens = [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    >>> x = torch.rand(3, 7, 784).round()                      # (K, B, D)
    >>> noise = stack.draw_noise(gens, S=10, B=7)
    >>> log_p, log_q = stack.log_joint_and_q(x, 10, False, noise)
    >>> log_p.shape
    torch.Size([3, 10, 7])
"""
from __future__ import annotations

import copy
from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.distributions import Bernoulli, Normal

from tvolib.checks import check_samples
from tvolib.models.base import LatentVariableModel
from tvolib.models.bernoulli import bernoulli_log_prob
from tvolib.models.sbn import SigmoidBeliefNetwork
from tvolib.models.vae import GaussianVAE

__all__ = ["StackedModel", "batched_linear", "host_to_device"]

Params = dict[str, Tensor]


def host_to_device(t: Tensor, device: torch.device) -> Tensor:
    """A CPU tensor on ``device`` without a host synchronisation: on CUDA through pinned memory and a
    non-blocking copy (a plain copy from pageable memory waits for the device), else ``t.to(device)``."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def batched_linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``y[k] = x[k] W[k]^T + b[k]`` for ``x`` ``(K, ..., in)``, ``weight`` ``(K, out, in)``, ``bias`` ``(K, out)``.

    One ``baddbmm`` over the flattened middle dimensions (``nn.Linear`` per run, batched).
    """
    K, n_in = x.shape[0], x.shape[-1]
    flat = x.reshape(K, -1, n_in)
    y = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))
    return y.reshape(*x.shape[:-1], weight.shape[1])


def _sequential(seq: nn.Sequential, prefix: str, params: Params, h: Tensor) -> Tensor:
    """Apply a single-run ``nn.Sequential`` of ``Linear`` layers and elementwise activations to a stack."""
    for i, layer in enumerate(seq):
        if isinstance(layer, nn.Linear):
            h = batched_linear(h, params[f"{prefix}.{i}.weight"], params[f"{prefix}.{i}.bias"])
        else:  # tanh / relu: elementwise, the single-run module works on any shape
            h = layer(h)
    return h


# ------------------------------------------------------------------------------------------------
# Per-class forward passes: (template, params, buffers, x (K, B, D), noise, reparam) -> (K, S, B) x 2
# ------------------------------------------------------------------------------------------------


def _vae_noise(model: GaussianVAE, S: int, B: int) -> list[tuple[str, tuple[int, ...]]]:
    # Normal.sample / rsample draw one standard normal tensor of the sample shape (S, B, latent).
    return [("normal", (S, B, model.latent_dim))]


def _vae_forward(model: GaussianVAE, params: Params, buffers: Params, x: Tensor, noise: list[Tensor],
                 reparam: bool) -> tuple[Tensor, Tensor]:
    """Stacked :meth:`GaussianVAE.log_joint_and_q`, with ``z = mean + eps * std`` for the given ``eps``."""
    mean, log_std = _sequential(model.encoder, "encoder", params, x).float().chunk(2, dim=-1)  # float32 under autocast
    std = log_std.exp()
    q = Normal(mean.unsqueeze(1), std.unsqueeze(1), validate_args=False)  # (K, 1, B, L)
    eps = noise[0]  # (K, S, B, L)
    if reparam:
        z = q.loc + eps * q.scale
    else:
        with torch.no_grad():
            z = q.loc + eps * q.scale
    # a scale of 1.0 would become a tensor copied from the host: a synchronisation per minibatch on a GPU
    prior = Normal(z.new_zeros(()), z.new_ones(()), validate_args=False)
    logits = _sequential(model.decoder, "decoder", params, z).float()
    log_p = prior.log_prob(z).sum(-1) + bernoulli_log_prob(logits, x.unsqueeze(1)).sum(-1)
    return log_p, q.log_prob(z).sum(-1)


def _sbn_noise(model: SigmoidBeliefNetwork, S: int, B: int) -> list[tuple[str, tuple[int, ...]]]:
    # Bernoulli.sample draws one uniform per unit and returns (u < p), one layer after the other.
    return [("uniform", (S, B, d)) for d in model.latent_dims]


def _bernoulli(logits: Tensor) -> Bernoulli:
    return Bernoulli(logits=logits, validate_args=False)


def _sbn_forward(model: SigmoidBeliefNetwork, params: Params, buffers: Params, x: Tensor, noise: list[Tensor],
                 reparam: bool) -> tuple[Tensor, Tensor]:
    """Stacked :meth:`SigmoidBeliefNetwork.log_joint_and_q`, with ``z_l = (u_l < p_l)`` for the given ``u_l``."""
    if reparam:
        raise ValueError("the SBN has discrete latents: no reparameterisation, call with reparam=False")
    n = len(model.encoder)
    h = (x - buffers["train_mean"].unsqueeze(1) + 1) / 2
    logits = batched_linear(h, params["encoder.0.weight"], params["encoder.0.bias"]).float().unsqueeze(1)
    zs = [(noise[0] < _bernoulli(logits).probs).to(x.dtype)]  # (K, S, B, d_1)
    log_q = bernoulli_log_prob(logits, zs[0]).sum(-1)
    for i in range(1, n):
        logits = batched_linear(2 * zs[-1] - 1, params[f"encoder.{i}.weight"], params[f"encoder.{i}.bias"]).float()
        zs.append((noise[i] < _bernoulli(logits).probs).to(x.dtype))
        log_q = log_q + bernoulli_log_prob(logits, zs[-1]).sum(-1)
    log_p = bernoulli_log_prob(params["prior_logits"][:, None, None, :], zs[-1]).sum(-1)
    below = [*zs[-2::-1], x.unsqueeze(1)]
    for i, (parent, child) in enumerate(zip(zs[::-1], below)):
        logits = batched_linear(2 * parent - 1, params[f"decoder.{i}.weight"], params[f"decoder.{i}.bias"]).float()
        log_p = log_p + bernoulli_log_prob(logits, child).sum(-1)
    return log_p, log_q


_NoiseSpec = Callable[..., list[tuple[str, tuple[int, ...]]]]
#: Stackable single-run model classes: (noise layout, batched forward pass).
STACKABLE: dict[type[LatentVariableModel], tuple[_NoiseSpec, Callable[..., tuple[Tensor, Tensor]]]] = {
    GaussianVAE: (_vae_noise, _vae_forward),
    SigmoidBeliefNetwork: (_sbn_noise, _sbn_forward),
}
_DRAW = {"normal": torch.randn, "uniform": torch.rand}


class StackedModel:
    """K runs of one model class with parameters stacked as ``(K, ...)`` leaf tensors.

    Args:
        models: K single-run models of the same class and architecture (``GaussianVAE`` or
            ``SigmoidBeliefNetwork``), on one device and dtype. Their parameters and buffers are
            copied; the models themselves are kept only as architecture templates.
    """

    def __init__(self, models: Sequence[LatentVariableModel]) -> None:
        models = list(models)
        if not models:
            raise ValueError("models must hold at least one single-run model; got an empty sequence")
        cls = type(models[0])
        if cls not in STACKABLE:
            raise ValueError(f"cannot stack {cls.__name__}; stackable classes: {[c.__name__ for c in STACKABLE]}")
        reference = {k: (v.shape, v.dtype, v.device) for k, v in models[0].state_dict().items()}
        for k, m in enumerate(models):
            shapes = {n: (v.shape, v.dtype, v.device) for n, v in m.state_dict().items()}
            if type(m) is not cls or shapes != reference:
                raise ValueError(
                    f"models[{k}] ({type(m).__name__}) differs from models[0] ({cls.__name__}) in class, "
                    "parameter shapes, dtype or device; a stack needs K copies of one architecture"
                )
        self.template = models[0]
        self._noise_spec, self._forward = STACKABLE[cls]
        named = list(models[0].named_parameters())
        name_of = {id(p): n for n, p in named}
        # In the single model's own orders (those of its two Adam optimisers' state dicts).
        self.generative_names = [name_of[id(p)] for p in models[0].generative_parameters()]
        self.inference_names = [name_of[id(p)] for p in models[0].inference_parameters()]
        if sorted(self.generative_names + self.inference_names) != sorted(name_of.values()):
            raise ValueError("generative_parameters() and inference_parameters() must partition the parameters")
        per_run_params = [dict(m.named_parameters()) for m in models]
        per_run_buffers = [dict(m.named_buffers()) for m in models]
        with torch.no_grad():
            self.params: Params = {
                n: torch.stack([r[n].detach() for r in per_run_params]).requires_grad_(True) for n, _ in named
            }
            self.buffers: Params = {n: torch.stack([r[n] for r in per_run_buffers]) for n in per_run_buffers[0]}

    # ----- shape, device, parameters -----------------------------------------------------------
    @property
    def K(self) -> int:
        """Number of runs in the stack."""
        return next(iter(self.params.values())).shape[0]

    @property
    def discrete(self) -> bool:
        return self.template.discrete

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    def parameters(self) -> list[Tensor]:
        """The stacked leaves, theta (generative) first, then phi (inference)."""
        return [self.params[n] for n in self.generative_names + self.inference_names]

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        for n in self.generative_names + self.inference_names:
            yield n, self.params[n]

    def to(self, device: torch.device | str) -> "StackedModel":
        """Move the stack (in place) to ``device``; returns ``self``."""
        with torch.no_grad():
            self.params = {n: p.detach().to(device).requires_grad_(True) for n, p in self.params.items()}
            self.buffers = {n: b.to(device) for n, b in self.buffers.items()}
        self.template = self.template.to(device)
        return self

    # ----- runs in and out ------------------------------------------------------------------------
    def _check_run(self, k: int) -> int:
        if isinstance(k, bool) or not isinstance(k, int) or not -self.K <= k < self.K:
            raise ValueError(f"run index k must be an int in [0, {self.K}); got {k!r}")
        return k % self.K

    def state_dict(self, k: int) -> dict[str, Tensor]:
        """Run ``k``'s parameters and buffers as the single model's ``state_dict`` (copies)."""
        k = self._check_run(k)
        out = {n: p[k].detach().clone() for n, p in self.params.items()}
        out.update({n: b[k].clone() for n, b in self.buffers.items()})
        return {n: out[n] for n in self.template.state_dict()}

    def load_state_dict(self, k: int, state: dict[str, Tensor]) -> None:
        """Overwrite run ``k`` with a single model's ``state_dict`` (e.g. from a checkpoint)."""
        k = self._check_run(k)
        expected = set(self.params) | set(self.buffers)
        if set(state) != expected:
            raise ValueError(f"state must have exactly the keys {sorted(expected)}; got {sorted(state)}")
        with torch.no_grad():
            for n, v in state.items():
                target = self.params[n] if n in self.params else self.buffers[n]
                if v.shape != target.shape[1:]:
                    raise ValueError(f"state[{n!r}] has shape {tuple(v.shape)}; expected {tuple(target.shape[1:])}")
                target[k].copy_(v)

    def unstack(self, k: int) -> LatentVariableModel:
        """A fresh single-run model holding run ``k``'s parameters (for evaluation or saving)."""
        model = copy.deepcopy(self.template)
        model.load_state_dict(self.state_dict(k))
        return model

    def select(self, runs: Sequence[int]) -> "StackedModel":
        """A new stack of the given runs (e.g. without a diverged one); parameters are copied."""
        idx = [self._check_run(k) for k in runs]
        if not idx:
            raise ValueError("runs must name at least one run")
        new = object.__new__(StackedModel)
        new.__dict__.update(self.__dict__)
        index = torch.tensor(idx, device=self.device)
        with torch.no_grad():
            new.params = {n: p.detach()[index].clone().requires_grad_(True) for n, p in self.params.items()}
            new.buffers = {n: b[index].clone() for n, b in self.buffers.items()}
        return new

    # ----- Monte-Carlo noise and the densities -----------------------------------------------------
    def noise_layout(self, S: int, B: int) -> list[tuple[str, tuple[int, ...]]]:
        """Per-run noise tensors the forward pass takes: ``[(kind, shape), ...]`` in draw order."""
        return self._noise_spec(self.template, check_samples(S), B)

    def draw_noise(self, generators: Sequence[torch.Generator], S: int, B: int) -> list[Tensor]:
        """Noise for one minibatch, run ``k`` drawn from ``generators[k]``: a list of ``(K, ...)`` tensors.

        Standard normals for the VAE (``(K, S, B, latent)``), one ``U(0, 1)`` tensor per latent layer
        for the SBN. Each run's generator makes the calls the single model makes on the global RNG
        in ``log_joint_and_q``, so a generator in the global RNG's state reproduces its sample.
        """
        if len(generators) != self.K:
            raise ValueError(f"generators must hold one torch.Generator per run ({self.K}); got {len(generators)}")
        layout = self.noise_layout(S, B)
        dtype = next(iter(self.params.values())).dtype
        per_run = [
            [_DRAW[kind](shape, generator=g, device=self.device, dtype=dtype) for kind, shape in layout]
            for g in generators
        ]
        return [torch.stack([run[i] for run in per_run]) for i in range(len(layout))]

    def log_joint_and_q(self, x: Tensor, S: int, reparam: bool, noise: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """``(log p(x, z), log q(z | x))``, each ``(K, S, B)``, for ``z`` made from ``noise``.

        Run ``k`` computes what ``LatentVariableModel.log_joint_and_q`` computes for its own
        parameters on ``x[k]`` ``(B, D)``. ``noise`` comes from :meth:`draw_noise` (shapes
        :meth:`noise_layout`); ``reparam`` as in the single model.
        """
        D = self.template.data_dim
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[0] != self.K or x.shape[2] != D or x.shape[1] < 1:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (K={self.K}, B, {D}) with B >= 1; got {shape}")
        x = x if x.is_floating_point() else x.float()
        layout = self.noise_layout(S, x.shape[1])
        shapes = [(self.K, *shape) for _, shape in layout]
        if len(noise) != len(shapes) or any(tuple(n.shape) != s for n, s in zip(noise, shapes)):
            raise ValueError(f"noise must be tensors of shapes {shapes}; got {[tuple(n.shape) for n in noise]}")
        return self._forward(self.template, self.params, self.buffers, x, list(noise), reparam)
