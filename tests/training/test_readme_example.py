"""The README's drop-in loop: GPBanditSchedule driving TVO training without tvolib's trainer."""
import torch

from tvolib.bandit import GPBanditSchedule
from tvolib.models import build_model
from tvolib.tvo import log_evidence, tvo_bound


def _tvo_step(model, optimizer, x, betas, evidence_spec) -> float:
    """One Adam step on the TVO bound at ``betas``; returns the batch's mean log-evidence."""
    log_p, log_q = model.log_joint_and_q(x, 4, reparam=True)
    log_w = log_p - log_q
    loss = -tvo_bound(log_w, betas).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return log_evidence(log_w.detach(), evidence_spec).mean().item()


def test_bandit_drives_a_hand_written_training_loop():
    torch.manual_seed(0)
    model = build_model("vae")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_all = torch.bernoulli(torch.full((64, 784), 0.3))
    loader = [x_all[:32], x_all[32:]]
    schedule = GPBanditSchedule(d=3, seed=0, window=1, n_init=2)
    used = []
    for epoch in range(1, 9):
        betas = schedule.current()
        used.append(betas.clone())
        evidences = [_tvo_step(model, optimizer, x, betas, schedule.evidence_spec) for x in loader]
        schedule.step(epoch, evidence=sum(evidences) / len(evidences))
    rounds = schedule.history()
    assert len(rounds) >= 6  # one round per 1-epoch window (early updates can only add rounds)
    assert any(r.get("source") == "gp" for r in rounds)  # the GP chose arms after n_init random ones
    assert len({tuple(b.tolist()) for b in used}) > 1  # the schedule actually changed
    for b in used:
        assert b[0] == 0 and (b[1:] > b[:-1]).all() and (b[1:] >= 0.05).all() and (b < 0.95 + 1e-9).all()


def test_the_default_bandit_reads_the_integrand_from_the_loops_log_weights():
    """The README's loop as written: ``epochs=`` and ``log_weights`` at every step; the default protocol
    (the integrand's) reads the integrand when a window closes and its GP chooses after 3 rounds."""
    import warnings

    torch.manual_seed(0)
    model = build_model("vae")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_all = torch.bernoulli(torch.full((64, 784), 0.3))
    loader = [x_all[:32], x_all[32:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 8 epochs of 1-epoch windows: the GP trains most of them, no warning
        schedule = GPBanditSchedule(d=3, seed=0, window=1, epochs=8)
    assert schedule.protocol == "integrand"

    def log_weights():
        with torch.no_grad():
            log_p, log_q = model.log_joint_and_q(x_all, 4, reparam=True)
        return log_p - log_q

    for epoch in range(1, 9):
        betas = schedule.current()
        evidences = [_tvo_step(model, optimizer, x, betas, schedule.evidence_spec) for x in loader]
        schedule.step(epoch, evidence=sum(evidences) / len(evidences), log_weights=log_weights)
    rounds = schedule.history()
    assert all(r.get("integrand") for r in rounds)  # every round recorded the integrand it read
    # the arms of the first 3 rounds are the initial design (chosen by the rows before: "random"); the GP
    # chooses the arm of round 3 on
    assert [r["source"] for r in rounds[:2]] == ["random"] * 2 and {r["source"] for r in rounds[2:]} == {"gp"}


def test_the_adaptive_bandit_drives_the_same_loop_with_changing_lengths():
    """The README's loop with AdaptiveDBanditSchedule: the TVO bound takes a schedule whose length
    changes from window to window."""
    from tvolib.bandit import AdaptiveDBanditSchedule

    torch.manual_seed(0)
    model = build_model("vae")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_all = torch.bernoulli(torch.full((64, 784), 0.3))
    schedule = AdaptiveDBanditSchedule(d_max=6, seed=1, window=1, n_init=2, raw_samples=16, num_restarts=2,
                                       device="cpu")
    lengths = []
    for epoch in range(1, 9):
        betas = schedule.current()
        lengths.append(len(betas))
        assert len(betas) == schedule.d and betas[0] == 0 and (betas[1:] > betas[:-1]).all()
        schedule.step(epoch, evidence=_tvo_step(model, optimizer, x_all, betas, schedule.evidence_spec))
    assert len(set(lengths)) > 1 and any(r["source"] == "gp" for r in schedule.history())
