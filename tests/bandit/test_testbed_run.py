"""run_case and run_cases: bad inputs are refused up front with the argument named, and a worker that
dies keeps the finished jobs' results and names the job it was running."""
from __future__ import annotations

import dataclasses
import os
import signal

import numpy as np
import pytest
import torch

from tvolib.bandit import RandomSchedule
from tvolib.bandit.testbed import CASES, ScheduleFactory, TestbedCase, TestbedJobError, calibrated_width, run_case, run_cases

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASE = dataclasses.replace(CASES["d2-log-strong"], epochs=8)
RANDOM = ScheduleFactory.of(RandomSchedule, 2, window=2)


def test_integer_seeds_of_numpy_and_torch_are_seeds():
    plain = run_case(CASE, RANDOM, 3)
    for seed in (np.int64(3), np.int32(3), torch.tensor(3)):
        assert run_case(CASE, RANDOM, seed).arms == plain.arms


@pytest.mark.parametrize("seed, match", [(-1, "seed must be an integer >= 0"), (2.5, "seed must be an integer"),
                                         ("3", "seed must be an integer"), (True, "seed must be an integer")])
def test_bad_seeds_are_refused(seed, match):
    with pytest.raises(ValueError, match=match):
        run_case(CASE, RANDOM, seed)


def test_a_case_name_given_for_a_case_is_refused_with_the_lookup():
    with pytest.raises(ValueError, match=r"case must be a test-bed case .*got the name 'd5-log-strong'.*CASES\["):
        run_case("d5-log-strong", RANDOM, 0)
    with pytest.raises(ValueError, match=r"case must be a test-bed case .*got dict"):
        run_case({"d": 5}, RANDOM, 0)


@pytest.mark.parametrize("field, value, match", [
    ("epochs", 0, "epochs must be an int >= 2"), ("epochs", -5, "epochs must be an int >= 2"),
    ("epochs", 2.5, "epochs must be an int >= 2"), ("width", 0, "width must be a finite number > 0"),
    ("width", float("nan"), "width must be a finite number > 0"), ("d", "3", "d must be an int >= 2"),
    ("d", 1, "d must be an int >= 2"), ("noise", float("nan"), "noise must be a finite number >= 0"),
    ("window", 0, "window must be an int >= 1"),
    ("optimum", (float("nan"),), "optimum must be 1 sorted finite points"),
])
def test_bad_case_fields_are_refused_when_the_case_is_made(field, value, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(CASE, **{field: value})


def test_a_d1_case_is_refused_as_such():
    with pytest.raises(ValueError, match="d must be an int >= 2 .*interior point"):
        TestbedCase("x", 1, ())


@pytest.mark.parametrize("workers", [1.5, "2", 0, None])
def test_bad_max_workers_are_refused(workers):
    with pytest.raises(ValueError, match="max_workers must be an integer >= 1"):
        run_cases([(CASE, RANDOM, 0)], max_workers=workers)


@pytest.mark.parametrize("made, name", [(None, "NoneType"), ([0.0, 0.5], "list")])
def test_a_factory_that_builds_no_schedule_is_refused(made, name):
    with pytest.raises(ValueError, match=rf"make_schedule\(0\) must return a Schedule .*got {name}"):
        run_case(CASE, lambda seed: made, 0)
    with pytest.raises(ValueError, match=rf"make_schedule\(0\) must return a Schedule .*got {name}"):
        run_cases([(CASE, lambda seed: made, 0), (CASE, lambda seed: made, 1)])


def test_a_lambda_factory_with_two_workers_is_refused_before_any_worker_starts():
    with pytest.raises(ValueError, match="cannot be sent to a worker process.*ScheduleFactory.of.*module-level"):
        run_cases([(CASE, lambda seed: RandomSchedule(2, seed=seed), s) for s in range(2)], max_workers=2)


def test_a_job_without_a_seed_is_refused_naming_the_job():
    with pytest.raises(ValueError, match=r"jobs\[1\] must be a \(case, make_schedule, seed\) triple.*no seed"):
        run_cases([(CASE, RANDOM, 0), (CASE, RANDOM)])
    with pytest.raises(ValueError, match=r"jobs\[0\]\[2\] \(the seed\) must be an integer >= 0"):
        run_cases([(CASE, RANDOM, None)])


@dataclasses.dataclass(frozen=True)
class _Dies:
    """A factory whose schedule ends its own process at epoch 3 when its seed is ``victim``."""

    how: str
    victim: int = 2

    def __call__(self, seed: int):
        return _Dying(self.how if seed == self.victim else "", seed)


class _Dying(RandomSchedule):
    def __init__(self, how: str, seed: int) -> None:
        super().__init__(2, window=2, seed=seed)
        self.how = how

    def step(self, epoch, evidence=None, log_weights=None):
        if epoch == 3 and self.how == "SIGKILL":
            os.kill(os.getpid(), signal.SIGKILL)
        if epoch == 3 and self.how == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)
        if epoch == 3 and self.how == "exit":
            os._exit(3)
        if epoch == 3 and self.how == "raise":
            raise RuntimeError("boom")
        super().step(epoch, evidence)


@pytest.mark.parametrize("how, death", [("SIGKILL", "killed by SIGKILL"), ("SIGTERM", "killed by SIGTERM"),
                                        ("exit", "exited with code 3"), ("raise", "raised in its worker")])
def test_a_dying_worker_keeps_the_finished_results_and_names_its_job(how, death):
    """Jobs 0 and 1 finish before job 2 starts (the victim runs alone, last); the error names job 2
    and carries the results of 0 and 1, equal to those of run_case."""
    jobs = [(CASE, _Dies(how), seed) for seed in range(3)]
    with pytest.raises(TestbedJobError, match=rf"{death}.*job 2 .*seed 2|job 2 .*seed 2.*{death}") as info:
        run_cases(jobs, max_workers=2)
    error = info.value
    assert error.job == 2 and error.results[2] is None
    finished = [r for r in error.results if r is not None]
    assert finished, "no finished result kept"
    for k, result in enumerate(error.results):
        if result is not None:
            assert result.arms == run_case(CASE, RANDOM, k).arms  # the seeds' arms, as run here


def test_calibrated_width_refuses_what_it_cannot_calibrate():
    cases = [((5, (0.1, 0.2)), "optimum must be 4 sorted finite points"),
             ((5, (0.1, 0.2, 0.3, float("nan"))), "optimum must be 4 sorted finite points"),
             ((1, ()), "d must be an integer >= 2"),
             ((2, (0.2,)), "metric must be one of", {"metric": "bogus"}),
             ((2, (0.2,)), "n_arms must be an integer >= 1", {"n_arms": 0})]
    for target in (1.5, 1.0, 0.0, -0.1, float("nan")):
        cases.append(((2, (0.2,)), "target must be a mean regret strictly between 0 and 1", {"target": target}))
    for args, match, *options in cases:
        with pytest.raises(ValueError, match=match):
            calibrated_width(*args, **(options[0] if options else {}))


class _Recording(RandomSchedule):
    """Random arms that keep every evidence reported to them."""

    def __init__(self, d, seed=0, window=2):
        super().__init__(d, seed=seed, window=window)
        self.reported = []

    def step(self, epoch, evidence=None, **kwargs):
        self.reported.append(evidence)
        super().step(epoch, evidence=evidence, **kwargs)


def test_the_result_keeps_the_evidence_of_the_last_epoch():
    schedules = []
    result = run_case(CASE, lambda seed: schedules.append(_Recording(2, seed)) or schedules[-1], 1)
    assert len(schedules[0].reported) == CASE.epochs + 1 and schedules[0].reported[0] == 0.0
    assert result.evidence == schedules[0].reported[-1] != 0.0
