"""Precision as a run setting (``RunConfig.precision``): digests, scoping, bf16 vs fp32 numerics.

The digests of fp32 configs (every config written before the setting existed) must not change:
their results folders keep their names and their ``config.json`` files keep matching.
"""
from __future__ import annotations

import math
import statistics

import pytest
import torch

from helpers_stacked import B, S, SEEDS, batches, generators, stack_of
from tvolib.precision import PRECISIONS, autocast_scope, matmul_scope, precision_scope
from tvolib.stacked.objectives import left_points, stacked_loss
from tvolib.training.images import RunConfig, train
from tvolib.training.many import stack_key, train_many

#: Digests of configs that existed before ``precision``: pinned so that adding fields never renames them.
FP32_DIGESTS = {
    "d01831eb8b26": RunConfig(),
    "97b806a449a3": RunConfig(schedule="moments"),
    "5bdc70e452ff": RunConfig(objective="elbo", schedule="gp_bandit"),
    "d21d25d76027": RunConfig(model_options={"hidden": (50, 50)}),
}


def test_fp32_digests_unchanged():
    for digest, config in FP32_DIGESTS.items():
        assert config.digest() == digest


# ---- the setting ------------------------------------------------------------------------------
def test_precision_in_to_dict_and_digest_only_when_not_fp32():
    base = RunConfig()
    assert "precision" not in base.to_dict()
    assert RunConfig.from_dict(base.to_dict()) == base
    digests = {base.digest()}
    for precision in ("tf32", "bf16"):
        config = base.replace(precision=precision).validate()
        assert config.to_dict()["precision"] == precision
        assert RunConfig.from_dict(config.to_dict()) == config
        digests.add(config.digest())
    assert len(digests) == 3
    assert base.replace(precision="fp32").digest() == "d01831eb8b26"


def test_bad_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        RunConfig(precision="fp16").validate()


def test_stack_key_separates_precisions():
    keys = {stack_key(RunConfig(precision=p)) for p in PRECISIONS}
    assert len(keys) == 3 and None not in keys


# ---- the scopes -------------------------------------------------------------------------------
def _tf32_flags():
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_scopes_on_the_cpu():
    a, b = torch.randn(2, 4, 3), torch.randn(2, 3, 5)
    flags = _tf32_flags()
    for precision, dtype in (("fp32", torch.float32), ("tf32", torch.float32), ("bf16", torch.bfloat16)):
        with precision_scope(precision, "cpu"):
            assert torch.bmm(a, b).dtype == dtype
            assert _tf32_flags() == flags  # TF32 is a CUDA setting: nothing changes on the CPU
    with pytest.raises(ValueError, match="precision"):
        with precision_scope("fp16", "cpu"):
            pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_scopes_set_and_restore_tf32():
    before = _tf32_flags()
    for precision, inside in (("fp32", False), ("tf32", True), ("bf16", False)):
        with matmul_scope(precision, "cuda"):
            assert _tf32_flags() == (inside, inside)
        assert _tf32_flags() == before
    with precision_scope("bf16", "cuda"):
        assert torch.ones(2, 3, device="cuda").matmul(torch.ones(3, 2, device="cuda")).dtype == torch.bfloat16


# ---- the forward pass under bf16 --------------------------------------------------------------
@pytest.mark.parametrize("name", ["vae", "sbn"])
def test_bf16_forward_gives_float32_densities_and_loss(name):
    stack, models = stack_of(name)
    x, points = batches(len(SEEDS)), left_points([[0.0, 0.2, 0.5]] * len(SEEDS))
    noise = stack.draw_noise(generators(SEEDS), S, B)
    log_p, log_q = stack.log_joint_and_q(x, S, False, noise)
    with autocast_scope("bf16", "cpu"):
        log_p16, log_q16 = stack.log_joint_and_q(x, S, False, noise)
        out = stacked_loss("tvo", stack, x, S, noise, points)
        torch.manual_seed(5)
        single = models[0].log_joint_and_q(x[0], S, reparam=False)
    assert {t.dtype for t in (log_p16, log_q16, out.loss, out.log_w, *single)} == {torch.float32}
    if name == "vae":  # same latent samples: only the networks' rounding differs (the SBN's samples flip)
        assert (log_p16 - log_p).abs().max() < 0.5 and (log_q16 - log_q).abs().max() < 0.5
        assert not torch.equal(log_p16, log_p)  # the networks did run in bf16


# ---- training ---------------------------------------------------------------------------------
TINY = RunConfig(n_train=128, n_test=32, batch_size=64, S=8, eval_S=16, epochs=2, d=3)


def _metrics(history):
    return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in history]


@pytest.mark.usefixtures("one_torch_thread")
def test_tf32_on_the_cpu_trains_exactly_as_fp32():
    fp32 = train(TINY, device="cpu", progress=False)
    tf32 = train(TINY.replace(precision="tf32"), device="cpu", progress=False)
    assert _metrics(tf32.history) == _metrics(fp32.history)  # the same kernels on the same inputs: bitwise
    stacks = [train_many([TINY.replace(precision=p, seed=s) for s in (1, 2)], [None, None], device="cpu",
                         progress=False) for p in ("fp32", "tf32")]
    assert [_metrics(r.history) for r in stacks[1]] == [_metrics(r.history) for r in stacks[0]]


@pytest.mark.usefixtures("one_torch_thread")
def test_bf16_trains_single_and_stacked_with_fp32_evaluation():
    config = TINY.replace(precision="bf16", epochs=1)
    fp32 = train(TINY.replace(epochs=1), device="cpu", progress=False)
    single = train(config, device="cpu", progress=False)
    stacked = train_many([config, config.replace(seed=2)], [None, None], device="cpu", progress=False)[0]
    tested = ("test_log_px", "test_elbo", "test_kl")
    # epoch 0 evaluates the same initial model: fp32 evaluation gives the fp32 run's numbers (the
    # single run bitwise: the same kernels; the stack's batched evaluation to float32 rounding)
    assert {k: single.history[0][k] for k in tested} == {k: fp32.history[0][k] for k in tested}
    for key in tested:
        assert stacked.history[0][key] == pytest.approx(fp32.history[0][key], rel=1e-6), key
    for result in (single, stacked):
        # epoch 1 trained in bf16: close to fp32 (same data and noise), not equal
        for key in ("loss", "train_elbo", "test_log_px"):
            assert result.history[1][key] == pytest.approx(fp32.history[1][key], rel=1e-2), key
    assert single.history[1]["train_elbo"] != fp32.history[1]["train_elbo"]
    # the stacked and the single bf16 paths agree to bf16 rounding, 2**-8 (other kernels: baddbmm vs addmm)
    for key in ("loss", "train_elbo", "train_iwae", "train_evidence", "test_log_px"):
        assert stacked.history[1][key] == pytest.approx(single.history[1][key], rel=2**-8), key


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_bf16_training_stays_within_seed_noise_of_fp32():
    """A small VAE trained in bf16 reaches the fp32-trained test log p(x) up to the seed-to-seed noise.

    Three seeds per precision (each set one stack). The allowed gap between the two means is four
    standard errors of a difference of means, from the seed noise measured here (pooled standard
    deviation of both groups): a bias of bf16 training (e.g. from importance weights summed from
    8-bit-mantissa logits) larger than that fails. ``benchmarks/bench_precision.py`` repeats
    this at the reference configuration on a GPU.
    """
    base = RunConfig(n_train=500, n_test=200, batch_size=100, S=5, d=5, epochs=10, eval_S=100)
    seeds = (1, 2, 3)
    values = {}
    for precision in ("fp32", "bf16"):
        configs = [base.replace(seed=s, precision=precision) for s in seeds]
        values[precision] = [r.final["test_log_px"] for r in train_many(configs, [None] * 3, device="cpu",
                                                                           progress=False)]
    fp32, bf16 = values["fp32"], values["bf16"]
    pooled = math.sqrt((statistics.variance(fp32) + statistics.variance(bf16)) / 2)
    allowed = 4 * pooled * math.sqrt(2 / len(seeds))
    gap = abs(statistics.mean(bf16) - statistics.mean(fp32))
    assert gap <= allowed, f"bf16 {bf16} vs fp32 {fp32}: gap {gap:.3f} nats > {allowed:.3f} (seed sd {pooled:.3f})"
    assert fp32 != bf16  # the two precisions did train differently
