"""The one tolerance of the numerical tests: two code paths that compute the same float32 result.

The rule (tests/README.md): bit-for-bit equality only where the same kernels run on the same
inputs (a rerun, a kill-and-resume, a run beside other runs in a stack of the same shape). Across
code paths (a stack's batched ``bmm`` vs the single run's ``mm``, CPU vs CUDA, chunked vs
unchunked, another thread count or CPU instruction set) the results agree to float32 rounding, and
the tests compare them with :func:`assert_close_fp32`, whose tolerance comes from float32's
epsilon and the size of the reduction behind each value:

    |actual - expected| <= terms * eps32 * scale

A float32 sum of ``terms`` summands whose magnitudes add up to ``scale`` differs between two
summation orders by at most about ``terms * eps32 * scale`` (each of the ``terms - 1`` additions
rounds by at most ``eps32 / 2`` of a partial sum no larger than ``scale``, in either order). For a
chain of reductions (a matmul, then a sum over pixels, then a mean over samples) ``terms`` is the
sum of their lengths. ``scale`` defaults to the largest ``|expected|``, which is the summands'
total for same-sign sums (log-likelihoods); where the summands cancel (gradients, a KL as the
difference of two log-likelihoods) the caller passes the magnitude of what was summed.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import torch

#: float32 machine epsilon, 2**-23.
FP32_EPS = torch.finfo(torch.float32).eps
#: ``terms`` per Adam step of a parameter or moment given the same gradient (lerp, mul, addcmul, sqrt,
#: two divisions, add, multiply, add): the step is elementwise, so two implementations differ only by
#: their kernels' rounding (a fused multiply-add in one vectorised loop, a scalar computed as a tensor).
ADAM_TERMS = 10


def fp32_tolerance(terms: int, scale: float) -> float:
    """The largest difference two float32 code paths may show on a value computed by reductions of
    ``terms`` summands in all whose magnitudes add up to ``scale``: ``terms * eps32 * scale``."""
    if terms < 1:
        raise ValueError(f"terms must be >= 1, got {terms}")
    return terms * FP32_EPS * float(scale)


def assert_close_fp32(actual: Any, expected: Any, *, terms: int, scale: float | None = None,
                      outliers: float = 0.0, what: str = "") -> None:
    """Assert ``actual`` equals ``expected`` to float32 rounding (module docstring), elementwise.

    ``actual``/``expected``: tensors or numbers of one shape (compared in float64; NaN equals NaN).
    ``scale``: default the largest finite ``|expected|``. ``outliers``: the fraction of elements
    allowed beyond the tolerance, 0 but for parameters trained by Adam, whose normalised step
    ``m / sqrt(v)`` turns a gradient at rounding level into a step of either sign (up to ``lr``).
    """
    a = torch.as_tensor(actual).detach().cpu().to(torch.float64)
    e = torch.as_tensor(expected).detach().cpu().to(torch.float64)
    label = f"{what}: " if what else ""
    assert a.shape == e.shape, f"{label}shapes differ: {tuple(a.shape)} vs {tuple(e.shape)}"
    both_nan = a.isnan() & e.isnan()
    finite = e[e.isfinite()]
    if scale is None:
        scale = finite.abs().max().item() if finite.numel() else 0.0
    tol = fp32_tolerance(terms, scale)
    diff = torch.where(both_nan, torch.zeros_like(a), (a - e).abs())
    diff = torch.where(a == e, torch.zeros_like(diff), diff)  # equal infinities
    bad = ~(diff <= tol)  # NaN differences are bad
    allowed = math.floor(outliers * a.numel())
    n_bad = int(bad.sum())
    if n_bad > allowed:
        worst = int(torch.where(bad, diff.nan_to_num(math.inf), torch.zeros_like(diff)).flatten().argmax())
        index = tuple(torch.unravel_index(torch.tensor(worst), a.shape)) if a.ndim else ()
        raise AssertionError(
            f"{label}{n_bad} of {a.numel()} elements differ by more than float32 rounding allows "
            f"(terms={terms} x eps32 x scale={scale:.4g} = {tol:.3g}; {allowed} allowed); the largest: "
            f"{a.flatten()[worst].item()!r} vs {e.flatten()[worst].item()!r} at {tuple(int(i) for i in index)}")


def assert_tree_close(actual: Any, expected: Any, *, terms: int,
                      scale: float | Callable[[str, Any], float | None] | None = None,
                      outliers: float = 0.0, atol: Callable[[str], float | None] | None = None,
                      ignore: Callable[[str], bool] = lambda key: key.endswith("seconds"), path: str = "") -> None:
    """:func:`assert_close_fp32` over nested dicts, lists and tuples (histories, checkpoints).

    Floating-point leaves (floats, float tensors) are compared to float32 rounding; everything else
    (ints, strings, flags, integer tensors such as RNG states and step counts) exactly: those are
    not rounded. ``scale`` may be a function ``(path, expected_leaf) -> scale or None`` (None: the
    leaf's own magnitude). ``atol(path)``, where it returns a number, is that leaf's absolute
    tolerance instead: for values that are not float32 reductions (e.g. points rounded to a grid,
    which a change at rounding level may move by one step). Dict keys for which ``ignore(key)``
    holds (wall-clock times) are skipped.
    """
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {type(actual).__name__} vs a dict"
        keys = [k for k in expected if not ignore(str(k))]
        assert [k for k in actual if not ignore(str(k))] == keys, f"{path}: keys differ"
        for k in keys:
            assert_tree_close(actual[k], expected[k], terms=terms, scale=scale, outliers=outliers, atol=atol,
                              ignore=ignore, path=f"{path}/{k}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f"{path}: lengths differ"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_tree_close(a, e, terms=terms, scale=scale, outliers=outliers, atol=atol, ignore=ignore,
                              path=f"{path}[{i}]")
    elif _is_float(expected):
        assert _is_float(actual), f"{path}: {actual!r} vs {expected!r}"
        if torch.is_tensor(expected):
            assert actual.dtype == expected.dtype, f"{path}: dtypes differ ({actual.dtype} vs {expected.dtype})"
        bound = atol(path) if atol is not None else None
        if bound is not None:
            diff = (torch.as_tensor(actual, dtype=torch.float64) - torch.as_tensor(expected, dtype=torch.float64)).abs()
            assert bool((diff <= bound).all()), f"{path}: {actual!r} vs {expected!r} (allowed: {bound:g})"
            return
        leaf_scale = scale(path, expected) if callable(scale) else scale
        assert_close_fp32(actual, expected, terms=terms, scale=leaf_scale, outliers=outliers, what=path)
    elif torch.is_tensor(expected):
        assert torch.is_tensor(actual) and actual.dtype == expected.dtype and torch.equal(actual, expected), path
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _is_float(value: Any) -> bool:
    return isinstance(value, float) or (torch.is_tensor(value) and value.is_floating_point())


def log_w_terms(model) -> int:
    """The length of the float32 reduction chain behind one log weight of a single image ``model``
    (VAE or SBN): each linear layer's inputs (its matmul) and outputs (the log-densities sum over the
    pixels and latent units), encoder and decoder."""
    return sum(p.shape[0] + p.shape[1] for p in model.parameters() if p.ndim == 2)


# ----- runs of the image trainers, compared across code paths ----------------------------------------

#: Their log-likelihoods are about -550 (VAE) to -800 (SBN) nats: the scale of every number computed
#: from them (losses, evidences, rewards, KLs, the GP fitted to the rewards).
RUN_NATS = 1000.0
#: Schedule points are rounded (bandit arms to 1e-4) or found by bisection (moments betas, here to
#: about 2**-12): a change at rounding level in the rewards or log weights they come from may move one
#: by a step.
RUN_GRID = 2.5e-4
#: Trained tensors: the fraction of elements allowed beyond rounding. A gradient at rounding level (a
#: sum that cancels) gives an Adam step ``lr * m / sqrt(v)`` of either sign (measured: under 0.02%).
RUN_OUTLIERS = 0.01


def run_terms(config) -> int:
    """``terms`` for the numbers of a run of ``config`` (a ``RunConfig``): a log weight's chain, then the
    sums over the S samples and the minibatch of its losses and gradients."""
    from tvolib.models import build_model

    return log_w_terms(build_model(config.model, **dict(config.model_options))) + config.S * config.batch_size


def assert_runs_close(actual: Any, expected: Any, *, terms: int, path: str = "") -> None:
    """:func:`assert_tree_close` for what two code paths wrote for one run (history, schedule records,
    final metrics, ``model.pt``, checkpoint): numbers at the scale :data:`RUN_NATS`, tensors at their
    own, schedule points within :data:`RUN_GRID`, trained tensors with :data:`RUN_OUTLIERS`."""
    def grid(leaf: str) -> float | None:
        return RUN_GRID if re.search(r"/(betas|arm|next_arm|upper)(\[|$)", leaf) else None

    assert_tree_close(actual, expected, terms=terms, scale=lambda leaf, e: None if torch.is_tensor(e) else RUN_NATS,
                      outliers=RUN_OUTLIERS, atol=grid, path=path)
