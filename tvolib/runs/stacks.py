"""Which runs of a sweep train together: stacking mode, stack size, and the grouping into jobs.

On a GPU one small run leaves the device mostly idle; runs of one
:func:`~tvolib.training.many.stack_key` (same model, data, ``S``, ``d``, batch, epochs, ...;
schedules and seeds may differ) train as one stack (:func:`tvolib.training.train_many`). A sweep
becomes a list of *jobs*: each job is a stack of up to ``max_stack`` runs, or one run that cannot
be stacked (the PCFG, other objectives). Modes (argument ``stack``, else ``$TVOLIB_STACK``):

- ``auto`` (default): stack on CUDA, not on the CPU, where stacking measured no faster (0.8-1.2x on
  2 cores) and single runs in a process pool use the cores as well;
- ``on``: stack on any device (the CPU path is exact and tested: use it to check a stacked sweep);
- ``off``: one job per run, as before stacking existed.

Example:
    >>> from tvolib.paper import sweeps
    >>> jobs = stack_jobs(sweeps.fig4_vae_mnist_fashion("smoke"), max_stack=3)
    >>> [len(job) for job in jobs][:4]
    [3, 3, 1, 3]
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import torch

from tvolib.config import resolve_device
from tvolib.training.many import stack_key

__all__ = ["STACK_MODES", "MAX_STACK", "REMOTE_DEVICE_BYTES", "resolve_stack", "stacking_active", "run_bytes",
           "default_max_stack", "sweep_max_stack", "stack_label", "stack_jobs"]

#: Stacking modes accepted by ``--stack`` / ``$TVOLIB_STACK``.
STACK_MODES: tuple[str, ...] = ("auto", "on", "off")
#: The largest stack :func:`default_max_stack` proposes: past 32-128 runs a stack's throughput
#: stopped growing on the GPU probe (``docs/stacking.md``), while a larger stack delays every run.
MAX_STACK = 128
#: Share of the device's free memory a stack may plan to use (the rest: allocator slack, evaluation).
MEMORY_SHARE = 0.7
#: Device memory assumed for jobs that run elsewhere (Slurm): one 80 GB GPU (``max_stack`` overrides).
REMOTE_DEVICE_BYTES = 80 * 10**9


def resolve_stack(stack: str | None = None) -> str:
    """``stack``, else ``$TVOLIB_STACK``, else ``"auto"``; a ``ValueError`` naming the accepted modes."""
    name = stack if stack is not None else (os.environ.get("TVOLIB_STACK") or "auto")
    key = str(name).strip().lower()
    if key not in STACK_MODES:
        raise ValueError(f"unknown stacking mode {name!r}; accepted: {', '.join(STACK_MODES)} "
                         "(argument 'stack', --stack or $TVOLIB_STACK)")
    return key


def stacking_active(stack: str | None, device: str | torch.device | None, *, here: bool = True) -> bool:
    """Whether runs are stacked: mode ``on``, or ``auto`` with a CUDA device.

    ``device=None`` means CUDA when available (``here``), or, for jobs that run elsewhere
    (``here=False``, e.g. Slurm), CUDA only if asked for by name.
    """
    mode = resolve_stack(stack)
    if mode != "auto":
        return mode == "on"
    if device is None:
        return here and torch.cuda.is_available()
    return torch.device(device).type == "cuda"


def run_bytes(config: Any) -> int:
    """A conservative estimate of one stacked run's training memory in bytes.

    ``4 * S * B * (5 * D + 8 * H)`` for the activations that autograd keeps for one minibatch
    (``D = 784`` pixels, ``H = 500`` hidden units of the paper's VAE and SBN summed over layers,
    fp32) plus ``16 * 1.5e6`` for parameters, gradients and Adam's two moments. It errs on the
    large side (about twice what the GPU probe's stacks used) so that a proposed stack fits.
    """
    S, B = int(getattr(config, "S", 1)), int(getattr(config, "batch_size", 1))
    return 4 * S * B * (5 * 784 + 8 * 500) + 16 * 1_500_000


def _available_ram() -> int:
    """Available RAM in bytes (Linux ``sysconf``); 8 GB where the system cannot say (e.g. macOS)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 * 10**9


def default_max_stack(configs: Sequence[Any], device: str | torch.device | None = None, *,
                      free_bytes: int | None = None) -> int:
    """The stack size that fits: :data:`MEMORY_SHARE` of the free memory over :func:`run_bytes`
    of the most demanding config, between 1 and :data:`MAX_STACK`.

    Args:
        configs: the runs to stack.
        device: where they train; on CUDA the device's free memory (``torch.cuda.mem_get_info``),
            on the CPU the available RAM (8 GB assumed where the system cannot say).
        free_bytes: the free memory to assume instead of asking the device (e.g. for Slurm jobs).
    """
    if free_bytes is None:
        dev = resolve_device(device)
        if dev.type == "cuda":
            free_bytes = torch.cuda.mem_get_info(dev)[0]
        else:
            free_bytes = _available_ram()
    need = max((run_bytes(c) for c in configs), default=1)
    return max(1, min(MAX_STACK, int(MEMORY_SHARE * free_bytes // need)))


def sweep_max_stack(configs: Sequence[Any], max_stack: int | None, device: str | torch.device | None, *,
                    here: bool = True) -> int:
    """``max_stack`` if given (checked), else :func:`default_max_stack` on ``device`` (``here``) or on
    an assumed :data:`REMOTE_DEVICE_BYTES` device (jobs that run elsewhere)."""
    if max_stack is not None:
        if isinstance(max_stack, bool) or not isinstance(max_stack, int) or max_stack < 1:
            raise ValueError(f"max_stack={max_stack!r} must be None (chosen from free memory) or an integer >= 1")
        return max_stack
    return default_max_stack(configs, device if here else None, free_bytes=None if here else REMOTE_DEVICE_BYTES)


def stack_label(config: Any) -> str | None:
    """A short name of ``config``'s stack key (12 hex digits), ``None`` if it cannot be stacked."""
    key = stack_key(config)
    return None if key is None else hashlib.sha256(key.encode()).hexdigest()[:12]


def stack_jobs(configs: Sequence[Any], max_stack: int) -> list[list[Any]]:
    """Group ``configs`` into jobs: runs of one stack key in chunks of at most ``max_stack``, in the
    order their keys first appear; a config without a key (it cannot be stacked) is a job alone.

    Args:
        configs: distinct run configs.
        max_stack: most runs per job (>= 1).

    Returns:
        The jobs, each a non-empty list of configs; every config is in exactly one.
    """
    if isinstance(max_stack, bool) or not isinstance(max_stack, int) or max_stack < 1:
        raise ValueError(f"max_stack={max_stack!r} must be an integer >= 1")
    groups: dict[Any, list[Any]] = {}
    for i, config in enumerate(configs):
        key = stack_key(config)
        groups.setdefault(key if key is not None else ("alone", i), []).append(config)
    return [group[first:first + max_stack] for group in groups.values() for first in range(0, len(group), max_stack)]
