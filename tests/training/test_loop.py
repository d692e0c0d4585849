"""The shared training loop: bit-identical kill-and-resume for both trainers (the same kernels on the
same inputs), L_0 for the bandit, fixed-schedule numbers unchanged (to float32 noise), divergence,
digests. No pinned thread count: every comparison here holds with any."""
from __future__ import annotations

import math
import pickle

import pytest
import torch

import tvolib.training.images as images
from tvolib import checkpoint as ckpt
from tvolib.training.images import RunConfig, merge_adam_states, train
from tvolib.training.loop import TrainingDivergedError, derived_seed, progress_bar
from tvolib.training.pcfg import PCFGConfig, train_pcfg

from numerics import ADAM_TERMS, assert_close_fp32

#: A tiny image run: 200 MNIST training images, minibatches of 100, cheap evaluation.
TINY = RunConfig(n_train=200, n_test=50, batch_size=100, epochs=4, S=4, eval_S=8, d=3)
#: A tiny PCFG run: 4 training sentences of at most 9 words.
SMALL_PCFG = PCFGConfig(objective="tvo", S=3, epochs=4, n_train=4, n_test=4, hidden_dim=16, train_max_words=9,
                        eval_max_words=7, max_productions=31)
#: Windows of one epoch and two random rounds, so that the GP decides within a few epochs.
SMALL_BANDIT = {"window": 1, "n_init": 2, "burn_in": 0}

#: Pinned numbers (written down from earlier runs, on other CPUs and thread counts) hold to this
#: relative tolerance: a little above float32 noise (eps32 = 1.2e-7) for log-likelihoods after a few
#: epochs (measured: within 6e-8 with AVX-512 or no vector instructions, 1 or 2 threads).
PINNED_REL = 1e-6


def _strip(history):
    """Records without wall-clock times (``seconds``, ``fit_seconds``, ...: the only fields that may differ)."""
    return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in history]


def _trainer(config, data_root):
    if isinstance(config, PCFGConfig):
        return lambda run_dir, **kw: train_pcfg(config, run_dir, device="cpu", progress=False, **kw)
    return lambda run_dir, **kw: train(config, run_dir, data_root=data_root, device="cpu", progress=False, **kw)


def _equal_states(a, b):
    """Nested states equal, tensors bitwise (for a resumed run: the same kernels), wall-clock fields
    (``*seconds``) ignored."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal_states(a[k], b[k]) for k in a if not str(k).endswith("seconds"))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal_states(x, y) for x, y in zip(a, b))
    return a == b


RESUME_CASES = {
    "images-log": TINY.replace(eval_every=3),
    "images-moments": TINY.replace(schedule="moments", schedule_options={"update_every": 1}),
    "images-gp_bandit": TINY.replace(epochs=6, schedule="gp_bandit", schedule_options=SMALL_BANDIT),
    # d chosen every round (up to 5): the schedule's length changes between epochs
    "images-gp_bandit_adaptive": TINY.replace(epochs=6, d=5, schedule="gp_bandit_adaptive", schedule_options={
        **SMALL_BANDIT, "raw_samples": 16, "num_restarts": 2, "ml_starts": 20}),
    "pcfg-log": SMALL_PCFG,
    # 13 epochs: bandit rounds (default windows of 6) close before and after the interruption
    "pcfg-gp_bandit": SMALL_PCFG.replace(schedule="gp_bandit", epochs=13),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_killed_and_resumed_run_is_bit_identical(case, tmp_path, data_root):
    config = RESUME_CASES[case]
    fit = _trainer(config, data_root)
    straight = fit(tmp_path / "straight", checkpoint_every=1)
    stop = config.epochs // 2 + 1
    first = fit(tmp_path / "killed", checkpoint_every=3, stop_after=stop)
    assert len(first.history) == stop + 1 and not first.final["completed"]
    assert not (tmp_path / "killed" / "model.pt").exists()
    resumed = fit(tmp_path / "killed", checkpoint_every=3)
    assert _strip(resumed.history) == _strip(straight.history)
    assert _strip(resumed.schedule_history) == _strip(straight.schedule_history)
    assert _equal_states(ckpt.load(tmp_path / "straight" / "model.pt"), ckpt.load(tmp_path / "killed" / "model.pt"))
    c1, c2 = (ckpt.load(tmp_path / name / "checkpoint.pt") for name in ("straight", "killed"))
    assert c1["epoch"] == c2["epoch"] == config.epochs
    for key in ("optimizers", "rng", "schedule"):
        assert _equal_states(c1[key], c2[key]), key
    if "bandit" in case:
        assert len(straight.schedule_history) >= 2
        assert len({tuple(row["betas"]) for row in straight.history[1:]}) > 1, "the bandit never changed the schedule"
    if "adaptive" in case:  # every epoch's schedule has the d its bandit round chose
        assert len({len(row["betas"]) for row in straight.history[1:]}) > 1
        d_of = {row["round"]: row["d"] for row in straight.schedule_history}
        assert all(2 <= d <= 5 for d in d_of.values())
        recommended = [row["recommended_d"] for row in straight.schedule_history if row["source"] != "random"]
        assert recommended and all(2 <= d <= 5 for d in recommended)  # the run's records keep the recommendation
    if "moments" in case:
        assert len(straight.schedule_history) == config.epochs  # re-estimated after every epoch


@pytest.mark.parametrize("config", [TINY.replace(epochs=6, schedule="gp_bandit", schedule_options=SMALL_BANDIT),
                                    SMALL_PCFG.replace(schedule="gp_bandit", epochs=7)],
                         ids=["images", "pcfg"])
def test_the_bandit_sees_the_untrained_models_evidence(config, data_root):
    """Round 0 starts at epoch 0 with L_0 (the reward is L_w - L_0), from streams of its own."""
    result = _trainer(config, data_root)(None)
    first = result.schedule_history[0]
    assert first["start_epoch"] == 0 and math.isfinite(first["evidence_start"])
    assert first["reward"] == pytest.approx(first["evidence_end"] - first["evidence_start"])
    by_epoch = {row["epoch"]: row for row in result.history}
    assert first["evidence_end"] == by_epoch[first["epoch"]]["train_evidence"]
    # L_0 is not the first epoch's evidence: it is the untrained model's
    assert first["evidence_start"] != by_epoch[1]["train_evidence"]
    again = _trainer(config, data_root)(None)
    assert again.schedule_history[0]["evidence_start"] == first["evidence_start"]


def test_fixed_schedule_numbers_are_unchanged(data_root):
    """A linear-schedule image run and a log PCFG run give the numbers of the trainers before the shared loop."""
    image = train(TINY.replace(schedule="linear"), None, data_root=data_root, device="cpu", progress=False).history
    assert [r["epoch"] for r in image] == [0, 1, 2, 3, 4]
    assert image[0]["test_log_px"] == pytest.approx(-545.1256350677888, rel=PINNED_REL)
    assert [r["loss"] for r in image[1:]] == pytest.approx(
        [542.7853393554688, 535.5605773925781, 524.978515625, 509.64915466308594], rel=PINNED_REL)
    assert image[4]["train_evidence"] == pytest.approx(-508.8373797607422, rel=PINNED_REL)
    assert image[4]["test_log_px"] == pytest.approx(-487.1285256078916, rel=PINNED_REL)
    pcfg = train_pcfg(SMALL_PCFG.replace(epochs=3), device="cpu", progress=False).history
    assert [r["loss"] for r in pcfg[1:]] == pytest.approx(
        [31.78102684020996, 25.467967987060547, 21.738834381103516], rel=PINNED_REL)
    # exact float64 sums over the parses, from float32 parameters: float32 noise again
    assert [r["test_log_px"] for r in pcfg] == pytest.approx(
        [-6.504670622857088, -6.502592523286661, -6.50078656176418, -6.498734826491907], rel=PINNED_REL)


def test_digests_change_only_for_the_bandit_family():
    # fixed and moments schedules keep their results folders; the bandit family's numbers changed
    assert RunConfig().digest() == "d01831eb8b26"
    assert RunConfig(schedule="moments").digest() == "97b806a449a3"
    assert RunConfig(objective="elbo", schedule="gp_bandit").digest() == "5bdc70e452ff"  # no schedule used
    assert PCFGConfig().digest() == "5a90b9671517"
    old = {"gp_bandit": "848a5ce2369b", "random": "e91923ec97a8"}
    for name, before in old.items():
        assert RunConfig(schedule=name).digest() not in (before, RunConfig().digest())
    assert PCFGConfig(schedule="gp_bandit").digest() != "0f96a7c92801"


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, data_root, monkeypatch):
    real = images.compute_loss
    calls = {"n": 0}

    def poisoned(objective, model, x, S, betas):
        calls["n"] += 1
        out = real(objective, model, x, S, betas)
        if calls["n"] == 6:  # epoch 3, minibatch 2 (two minibatches per epoch)
            return out._replace(loss=out.loss * float("nan"))
        return out

    monkeypatch.setattr(images, "compute_loss", poisoned)
    with pytest.raises(TrainingDivergedError, match=r"epoch 3, minibatch 2/2") as err:
        train(TINY, tmp_path, data_root=data_root, progress=False, device="cpu", checkpoint_every=1)
    assert isinstance(err.value, RuntimeError)
    assert err.value.epoch == 3 and err.value.minibatch == 2
    assert err.value.last_metrics["epoch"] == 2 and math.isfinite(err.value.last_metrics["train_elbo"])
    assert "train_elbo" in str(err.value)
    again = pickle.loads(pickle.dumps(err.value))  # survives a process boundary (executors)
    assert (again.epoch, again.minibatch, str(again)) == (3, 2, str(err.value))
    state = ckpt.load(tmp_path / "checkpoint.pt")
    assert state["epoch"] == 2
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    assert not (tmp_path / "model.pt").exists()


def test_a_failure_caused_by_diverged_parameters_is_reported_as_divergence(data_root, monkeypatch):
    """NaN parameters can make a later minibatch raise (e.g. a sampler); the loop names the first bad loss."""
    real = images.compute_loss
    calls = {"n": 0}

    def poisoned(objective, model, x, S, betas):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("probability tensor contains either inf, nan or element < 0")
        out = real(objective, model, x, S, betas)
        return out._replace(loss=out.loss * float("inf")) if calls["n"] == 3 else out

    monkeypatch.setattr(images, "compute_loss", poisoned)
    with pytest.raises(TrainingDivergedError, match=r"epoch 2, minibatch 1/2") as err:
        train(TINY, None, data_root=data_root, progress=False, device="cpu")
    assert isinstance(err.value.__cause__, RuntimeError)


def test_one_adam_over_theta_and_phi_equals_the_two_of_checkpoint_format_1():
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(2, 2))
    two = [torch.optim.Adam([a.detach().clone().requires_grad_()], lr=0.1),
           torch.optim.Adam([b.detach().clone().requires_grad_()], lr=0.1)]
    for _ in range(3):
        for opt in two:
            (p,) = opt.param_groups[0]["params"]
            p.grad = torch.ones_like(p)
            opt.step()
    one = torch.optim.Adam([two[0].param_groups[0]["params"][0].detach().clone().requires_grad_(),
                            two[1].param_groups[0]["params"][0].detach().clone().requires_grad_()], lr=0.1)
    one.load_state_dict(merge_adam_states([opt.state_dict() for opt in two]))
    for p in one.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    one.step()
    for opt in two:
        opt.step()
    for p, opt in zip(one.param_groups[0]["params"], two):  # a loaded state may take another path: rounding
        assert_close_fp32(p, opt.param_groups[0]["params"][0], terms=4 * ADAM_TERMS, what="after 4 steps")


def test_derived_seeds_are_stable_distinct_and_in_range():
    assert derived_seed(1, "a") == derived_seed(1, "a")
    seeds = {derived_seed(s, p) for s in range(50) for p in ("a", "b")}
    assert len(seeds) == 100 and all(0 <= s < 2**63 for s in seeds)


def test_progress_is_quiet_when_not_interactive(monkeypatch):
    import io
    import sys

    class NotATTY(io.StringIO):
        def isatty(self):
            return False

    monkeypatch.setattr(sys, "stderr", NotATTY())
    assert progress_bar(None, total=3) is None
    assert progress_bar(False, total=3) is None
    bar = progress_bar(True, total=3)
    assert bar is not None
    bar.close()
