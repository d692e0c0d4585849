"""No host synchronisation in a stacked epoch's minibatch loop; the epoch's metrics read back once.

On the CPU the tests forbid every read-back method of a tensor while the loop runs; on CUDA
(``-k cuda``) the loop runs under ``torch.cuda.set_sync_debug_mode("error")``, which also catches
copies from pageable host memory. The metrics computed without reading back are the ones computed
with the checks (bit for bit: the same kernels on the same inputs).
"""
from __future__ import annotations

import math

import pytest
import torch

from helpers_stacked import B, S, SEEDS, batches, generators, stack_of
from tvolib.stacked import epoch as stacked_epoch
from tvolib.stacked.epoch import evidence_sums, minibatch_steps
from tvolib.stacked.objectives import left_points
from tvolib.stacked.optim import StackedAdam
from tvolib.tvo import EvidenceSpec, log_evidence

READ_BACK = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")


class _Counted:
    """Replace the read-back methods of ``torch.Tensor``; count calls (``forbid``: raise instead)."""

    def __init__(self, monkeypatch, forbid: bool) -> None:
        self.calls = dict.fromkeys(READ_BACK, 0)
        for name in READ_BACK:
            original = getattr(torch.Tensor, name)

            def patched(tensor, *args, _name=name, _original=original, **kwargs):
                if forbid:
                    raise AssertionError(f"Tensor.{_name} called inside the minibatch loop")
                self.calls[_name] += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, patched)


def _epoch_inputs(name: str, device: str = "cpu", n: int = 2 * B):
    stack, _ = stack_of(name)
    stack.to(device)
    K = len(SEEDS)
    x = batches(K, n).to(device)
    perm = torch.stack([torch.randperm(n, generator=torch.Generator().manual_seed(k)) for k in range(K)]).to(device)
    gens = [torch.Generator(device=device).manual_seed(1000 + s) for s in SEEDS]
    points = left_points([[0.0, 0.2, 0.5]] * K, device=device)
    return stack, StackedAdam(stack), x, perm, gens, points


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_the_minibatch_loop_reads_nothing_back(monkeypatch, name, precision):
    stack, optimiser, x, perm, gens, points = _epoch_inputs(name)
    with monkeypatch.context() as patch:
        _Counted(patch, forbid=True)
        loss_log, outputs = minibatch_steps(stack, optimiser, "tvo", x, perm, gens, S=S, batch_size=B,
                                            points=points, precision=precision)
    assert loss_log.shape == (2, len(SEEDS), 2) and len(outputs) == 2
    assert torch.isfinite(loss_log).all()


def test_the_epoch_sums_read_back_once(monkeypatch):
    stack, optimiser, x, perm, gens, points = _epoch_inputs("vae")
    loss_log, outputs = minibatch_steps(stack, optimiser, "tvo", x, perm, gens, S=S, batch_size=B, points=points)
    specs = [EvidenceSpec.paper(), EvidenceSpec.authors_code(), EvidenceSpec.paper()]
    # the quadratures are validated on the host once per epoch (reads of CPU tensors): not counted here
    quadratures = {spec: spec.quadrature(torch.float32, "cpu") for spec in specs}
    with monkeypatch.context() as patch:
        patch.setattr(EvidenceSpec, "quadrature", lambda spec, dtype, device: quadratures[spec])
        counted = _Counted(patch, forbid=False)
        sums = stacked_epoch._epoch_sums(outputs, specs, loss_log)
    assert counted.calls == {**dict.fromkeys(READ_BACK, 0), "tolist": 1}
    # the same evidence as with log_evidence's own checks and the same grouping (same kernels: bitwise)
    checked = sum(evidence_sums(out.log_w, specs) for out in outputs)
    assert torch.equal(sums[:, 4], checked)
    # and as each run's own log_evidence (other tensor shapes: to float32 rounding)
    for k, spec in enumerate(specs):
        alone = sum(log_evidence(out.log_w[k], spec).double().sum() for out in outputs)
        assert torch.allclose(sums[k, 4], alone, rtol=1e-6, atol=0)


def test_evidence_without_read_back_equals_the_checked_estimate():
    g = torch.Generator().manual_seed(0)
    log_w = torch.randn(S, 48, generator=g) * 3
    with_zero = log_w.clone()
    with_zero[0, :5] = -math.inf
    with_zero[:, 7] = -math.inf  # every sample of one point has zero weight
    for spec in (EvidenceSpec.paper(), EvidenceSpec.paper(7), EvidenceSpec.authors_code()):
        quadrature = spec.quadrature(torch.float32, "cpu")
        for weights, zero in ((log_w, False), (with_zero, True)):
            checked = log_evidence(weights, spec)
            # exact: the same operations on the same tensors, the checks and quadrature only precomputed
            assert torch.equal(log_evidence(weights, spec, zero_weights=zero, quadrature=quadrature), checked)
        # telling "there may be zero weights" when there are none changes nothing
        assert torch.equal(log_evidence(log_w, spec, zero_weights=True), log_evidence(log_w, spec))


def test_evidence_sums_of_a_subset_of_runs():
    log_w = torch.randn(4, S, B, generator=torch.Generator().manual_seed(1))
    specs = [EvidenceSpec.paper(), EvidenceSpec.authors_code(), EvidenceSpec.paper(), EvidenceSpec.paper()]
    finite = [True, True, False, True]
    sums = evidence_sums(log_w, specs, finite)
    assert sums[2] == 0
    for k in (0, 1, 3):
        assert torch.allclose(sums[k], log_evidence(log_w[k], specs[k]).double().sum(), rtol=1e-6, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_cuda_minibatch_loop_has_no_host_synchronisation(name, precision):
    stack, optimiser, x, perm, gens, points = _epoch_inputs(name, "cuda")
    minibatch_steps(stack, optimiser, "tvo", x, perm, gens, S=S, batch_size=B, points=points,
                    precision=precision)  # warm-up: first calls may initialise CUDA libraries
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss_log, outputs = minibatch_steps(stack, optimiser, "tvo", x, perm, gens, S=S, batch_size=B,
                                            points=points, precision=precision)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss_log).all() and len(outputs) == 2
