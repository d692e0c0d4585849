"""The image trainer: config validation and digests, history layout, every objective, real training."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest
import torch

import tvolib.training.images as train_mod
import tvolib.training.schedule as schedule_mod
from tvolib import checkpoint as ckpt
from tvolib.training.images import SCHEDULES, RunConfig, build_schedule, train
from tvolib.training.kinds import load_model
from tvolib.tvo import log_uniform

#: A tiny run: 200 MNIST training images, minibatches of 100, cheap evaluation.
TINY = RunConfig(n_train=200, n_test=50, batch_size=100, epochs=4, S=4, eval_S=8, d=3)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _strip(history):
    """Records without wall-clock times (``seconds``, ``fit_seconds``, ...: the only fields that may differ)."""
    return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in history]


def _weights(run_dir):
    return ckpt.load(run_dir / "model.pt")["state"]


# ------------------------------------------------------------------------------------------
# RunConfig
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, accepted",
    [
        ("model", "resnet", "'vae', 'sbn'"),
        ("dataset", "cifar", "'mnist'"),
        ("objective", "tvo2", "'wake-sleep'"),
        ("schedule", "cosine", "'gp_bandit_unsorted'"),
    ],
)
def test_bad_names_list_the_accepted_values(field, value, accepted):
    with pytest.raises(ValueError, match=rf"RunConfig\.{field}=.*{value}") as err:
        RunConfig(**{field: value}).validate()
    assert accepted in str(err.value)


@pytest.mark.parametrize(
    "changes",
    [
        {"S": 1},  # the covariance estimator needs S >= 2
        {"S": 2.0},
        {"d": 0},
        {"d": 1, "schedule": "gp_bandit"},  # a bandit needs an interior point
        {"epochs": -1},
        {"batch_size": 0},
        {"lr": 0.0},
        {"lr": float("nan")},
        {"log_beta1": 1.0},
        {"n_train": 0},
        {"eval_S": True},
        {"seed": -1},
        {"model_options": {"hidden": object()}},
        {"schedule_options": {"update_every": {"every": 1}}, "schedule": "moments"},
    ],
)
def test_bad_values_are_rejected_naming_the_field(changes):
    name = next(iter(changes)) if changes.get("schedule") != "gp_bandit" else "d"
    with pytest.raises(ValueError, match=rf"RunConfig\.{name}"):
        RunConfig(**changes).validate()


def test_reparameterised_objectives_need_a_continuous_model():
    with pytest.raises(ValueError, match=r"RunConfig\.objective='iwae'.*discrete.*'vimco'"):
        RunConfig(model="sbn", dataset="binarized_mnist", objective="iwae").validate()
    RunConfig(model="vae", objective="tvo_reparam").validate()


def test_unknown_names_are_rejected_with_the_accepted_list():
    with pytest.raises(ValueError, match=r"unknown RunConfig fields \['epoch'\].*'epochs'"):
        RunConfig.from_dict({"epoch": 3})
    with pytest.raises(ValueError, match=r"unknown RunConfig fields \['sampels'\]"):
        RunConfig().replace(sampels=3)
    with pytest.raises(ValueError, match=r"schedule_options has unknown names \['window'\].*update_every"):
        RunConfig(schedule="moments", schedule_options={"window": 3}).validate()
    with pytest.raises(ValueError, match=r"schedule_options has unknown names"):
        RunConfig(schedule="log", schedule_options={"beta1": 0.1}).validate()
    with pytest.raises(ValueError, match=r"model_options has unknown names \['hiden'\].*'latent_dim'"):
        RunConfig(model_options={"hiden": (50,)}).validate()
    with pytest.raises(ValueError, match="kind"):
        RunConfig.from_dict({"kind": "pcfg"})


def test_defaults_are_the_papers_and_valid():
    c = RunConfig().validate()
    assert (c.lr, c.batch_size, c.S, c.d, c.seed, c.eval_S, c.schedule) == (1e-3, 1000, 10, 5, 1, 5000, "log")
    for name in SCHEDULES:
        RunConfig(schedule=name).validate()


def test_the_adaptive_bandits_d_is_its_d_max_and_bad_ranges_name_their_field():
    c = RunConfig(schedule="gp_bandit_adaptive", d=8, schedule_options={"d_min": 3}).validate()
    schedule = build_schedule(c)
    assert (schedule.d_max, schedule.d_min) == (8, 3)
    with pytest.raises(ValueError, match=r"schedule_options\['d_max'\] is not accepted.*set d=10 instead"):
        RunConfig(schedule="gp_bandit_adaptive", schedule_options={"d_max": 10}).validate()
    with pytest.raises(ValueError, match=r"RunConfig.schedule_options=.*d_max must exceed d_min"):
        RunConfig(schedule="gp_bandit_adaptive", d=4, schedule_options={"d_min": 4}).validate()
    with pytest.raises(ValueError, match=r"RunConfig.d=2 .*d_max .*must be an integer >= 3"):
        RunConfig(schedule="gp_bandit_adaptive", d=2).validate()
    with pytest.raises(ValueError, match=r"schedule_options has unknown names \['sort'\]"):
        RunConfig(schedule="gp_bandit_adaptive", schedule_options={"sort": True}).validate()


def test_options_are_normalised_hashable_and_round_trip_through_json():
    c = RunConfig(schedule="moments", schedule_options={"update_every": 3, "initial": "linear"},
                  model_options=[("hidden", [100, 100])])
    assert c.schedule_options == (("initial", "linear"), ("update_every", 3))
    assert c.model_options == (("hidden", (100, 100)),)
    hash(c)
    back = RunConfig.from_dict(json.loads(json.dumps({"kind": "tvo", **c.to_dict()})))
    assert back == c and hash(back) == hash(c) and back.digest() == c.digest()


def test_digest_is_stable():
    # Results folders are named by the digest: a change here orphans every cached run, so the values
    # are pinned (sha256 of the sorted JSON of to_dict() plus kind, first 12 hex digits).
    assert RunConfig().digest() == "d01831eb8b26"
    assert RunConfig(model_options={"hidden": (50, 50)}).digest() == "d21d25d76027"
    payload = json.dumps({"kind": "tvo", **RunConfig().to_dict()}, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(payload.encode()).hexdigest()[:12] == RunConfig().digest()



def test_a_schedule_revision_renames_only_that_schedules_runs(monkeypatch):
    adaptive, fixed_d = RunConfig(schedule="gp_bandit_adaptive", d=5), RunConfig(schedule="gp_bandit", d=5)
    before = adaptive.digest(), fixed_d.digest()
    monkeypatch.setitem(schedule_mod.SCHEDULE_REVISIONS, "gp_bandit_adaptive", 99)
    assert adaptive.digest() != before[0] and fixed_d.digest() == before[1] and RunConfig().digest() == "d01831eb8b26"


CHANGED = {
    "model": "sbn", "dataset": "binarized_mnist", "n_train": 100, "n_test": 100, "data_seed": 1,
    "objective": "elbo", "schedule": "linear", "d": 6, "S": 11, "epochs": 101, "batch_size": 999,
    "lr": 2e-3, "seed": 2, "log_beta1": 0.03, "eval_every": 5, "eval_S": 4999,
    "schedule_options": {"update_every": 2}, "model_options": {"hidden": 50}, "precision": "bf16",
}


def test_digest_is_sensitive_to_every_field():
    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(CHANGED) == names, "add the new field to CHANGED"
    base = RunConfig()
    digests = {base.digest()}
    for name, value in CHANGED.items():
        digests.add(base.replace(**{name: value}).digest())
    assert len(digests) == len(CHANGED) + 1


def test_make_schedule_matches_the_names():
    log = build_schedule(RunConfig(d=5)).current()
    assert torch.allclose(log, torch.tensor([0, 0.025, 0.0628717, 0.1581139, 0.3976354], dtype=log.dtype), atol=1e-6)
    assert build_schedule(RunConfig(schedule="linear", d=4)).current().tolist() == [0, 0.25, 0.5, 0.75]
    assert build_schedule(RunConfig(objective="elbo", d=5)).current().tolist() == [0.0]
    assert build_schedule(RunConfig(schedule="moments", schedule_options={"update_every": 7})).update_every == 7
    for name in SCHEDULES:
        assert build_schedule(RunConfig(schedule=name, d=4)).d == 4


# ------------------------------------------------------------------------------------------
# Training loop (tiny real runs on the mirror)
# ------------------------------------------------------------------------------------------


def test_history_layout_and_final(tmp_path, data_root):
    c = TINY.replace(eval_every=2)
    result = train(c, tmp_path, data_root=data_root, progress=False, device="cpu")
    h = result.history
    assert [r["epoch"] for r in h] == [0, 1, 2, 3, 4]
    assert set(h[0]) == {"epoch", "test_log_px", "test_elbo", "test_kl"}
    assert {"loss", "train_elbo", "train_iwae", "train_evidence", "betas", "seconds"} <= set(h[1])
    assert "test_log_px" not in h[1] and "test_log_px" in h[2] and "test_log_px" in h[4]
    for row in h[1:]:
        # IWAE-S >= ELBO per point, so also on average; both are lower bounds near each other.
        assert row["train_iwae"] >= row["train_elbo"]
        assert row["betas"] == pytest.approx(build_schedule(c).current().tolist())
    f = result.final
    assert f["test_log_px"] == h[4]["test_log_px"] and f["epochs"] == 4 and f["completed"]
    assert f["device"] == "cpu" and f["train_seconds"] > 0 and f["eval_seconds"] > 0
    assert f["bandit_seconds"] >= 0
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "model.pt").exists()
    model = load_model(c, tmp_path)
    for name, value in model.state_dict().items():  # exact: the saved tensors, loaded back
        assert torch.equal(value, _weights(tmp_path)[name])
    # A completed run is not trained again: same result straight from the checkpoint.
    again = train(c, tmp_path, data_root=data_root, progress=False, device="cpu")
    assert again.history == h


def test_deterministic_and_evaluation_does_not_perturb_training(tmp_path, data_root):
    a = train(TINY, tmp_path / "a", data_root=data_root, progress=False, device="cpu")
    b = train(TINY, tmp_path / "b", data_root=data_root, progress=False, device="cpu")
    c = train(TINY.replace(eval_every=1), tmp_path / "c", data_root=data_root, progress=False, device="cpu")
    assert _strip(a.history) == _strip(b.history)
    train_keys = ("loss", "train_elbo", "train_iwae", "train_evidence")
    assert [[r[k] for k in train_keys] for r in a.history[1:]] == [[r[k] for k in train_keys] for r in c.history[1:]]
    for name, value in _weights(tmp_path / "a").items():  # exact: the same training, same kernels, same inputs
        assert torch.equal(value, _weights(tmp_path / "c")[name])
    d = train(TINY.replace(seed=2), None, data_root=data_root, progress=False, device="cpu")
    assert _strip(d.history) != _strip(a.history)


@pytest.mark.parametrize("model, dataset", [("vae", "mnist"), ("sbn", "binarized_mnist")])
def test_every_objective_trains_through_the_one_loop(model, dataset, data_root, monkeypatch):
    real_load, cache = train_mod.load_dataset, {}

    def load_once(*args, **kwargs):  # the same subset for every objective: read it once
        key = (args, tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = real_load(*args, **kwargs)
        return cache[key]

    monkeypatch.setattr(train_mod, "load_dataset", load_once)
    base = RunConfig(model=model, dataset=dataset, n_train=100, n_test=20, batch_size=50, epochs=1, S=3, d=3,
                     eval_S=4)
    for objective in train_mod.OBJECTIVES:
        config = base.replace(objective=objective)
        try:
            config.validate()
        except ValueError:
            assert model == "sbn" and objective in train_mod.REPARAM_OBJECTIVES
            continue
        result = train(config, None, data_root=data_root, progress=False, device="cpu")
        row = result.history[1]
        assert all(math.isfinite(row[k]) for k in ("loss", "train_elbo", "train_iwae", "train_evidence")), objective
        assert ("phi_loss" in row) == objective.startswith("wake"), objective
        expected = log_uniform(3).tolist() if objective.startswith("tvo") else [0.0]
        assert row["betas"] == pytest.approx(expected), objective


def test_checkpoint_of_another_config_is_refused(tmp_path, data_root):
    train(TINY.replace(epochs=1), tmp_path, data_root=data_root, progress=False, device="cpu")
    with pytest.raises(ValueError, match="belongs to config"):
        train(TINY.replace(epochs=2), tmp_path, data_root=data_root, progress=False, device="cpu")


def test_two_loss_objectives_keep_the_gradients_apart(data_root, monkeypatch):
    """theta must be trained by ``loss`` only and phi by ``phi_loss`` only (wake-sleep family)."""
    real = train_mod.compute_loss
    seen = {}

    def zero_phi(objective, model, x, S, betas):
        if "model" not in seen:  # parameters before the first step
            seen["model"] = model
            seen["theta"] = [p.detach().clone() for p in model.generative_parameters()]
            seen["phi"] = [p.detach().clone() for p in model.inference_parameters()]
        out = real("elbo", model, x, S, betas)  # depends on phi as well as theta
        phi_zero = sum((0.0 * p).sum() for p in model.inference_parameters())
        return out._replace(phi_loss=phi_zero)

    monkeypatch.setattr(train_mod, "compute_loss", zero_phi)
    result = train(TINY.replace(objective="wake-wake", epochs=2), None, data_root=data_root, progress=False,
                   device="cpu")
    assert "phi_loss" in result.history[1]
    model = seen["model"]
    for p, p0 in zip(model.inference_parameters(), seen["phi"]):  # exact: Adam's step is 0 / (0 + eps) = 0
        assert torch.equal(p, p0), "phi moved although its own loss has zero gradient"
    assert any(not torch.equal(p, p0) for p, p0 in zip(model.generative_parameters(), seen["theta"]))


@pytest.mark.slow
@pytest.mark.parametrize("model, dataset, epochs", [("vae", "mnist", 3), ("sbn", "binarized_mnist", 10)])
def test_short_training_improves_test_log_px(model, dataset, epochs, data_root):
    # The SBN starts from a good output bias (logit of the training mean) and learns more slowly.
    c = RunConfig(model=model, dataset=dataset, n_train=1000, n_test=100, batch_size=100, epochs=epochs,
                  S=5, d=3, eval_S=50)
    result = train(c, None, data_root=data_root, progress=False, device="cpu")
    before, after = result.history[0]["test_log_px"], result.final["test_log_px"]
    assert math.isfinite(before) and math.isfinite(after)
    assert after > before + 5, (before, after)
