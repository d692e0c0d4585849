"""The name registry: orders, labels, and agreement with the code's own names."""
from __future__ import annotations

import pytest

from tvolib.paper import names, sweeps
from tvolib.training.images import SCHEDULES


def test_ordered_puts_known_names_first_then_alphabetical():
    assert names.ordered(["random", "zeta", "linear", "alpha", "linear"]) == ["linear", "random", "alpha", "zeta"]
    assert names.ordered(["wake-sleep", "tvo-log", "vimco"], names.PCFG_METHOD_ORDER) == ["tvo-log", "wake-sleep",
                                                                                          "vimco"]


def test_labels():
    assert names.schedule_label("gp_bandit") == "GP-bandit" and names.schedule_label("new") == "new"
    assert names.pcfg_method_label("tvo-gp_bandit") == "TVO-GP-bandit"
    assert names.dataset_label("fashion_mnist") == "Fashion MNIST"
    assert names.dataset_label("omniglot", derived=True) == "omniglot (derived 28x28)"
    assert names.dataset_label("mnist", derived=True) == "MNIST"  # only Omniglot has a derived version
    assert names.dataset_label("omniglot", labels={"omniglot": "from the run"}) == "from the run"


@pytest.mark.parametrize("objective, schedule, method", [
    ("tvo", "log", "tvo-log"), ("tvo", "gp_bandit", "tvo-gp_bandit"), ("reinforce", "none", "reinforce"),
    ("wake-wake", "none", "wake-wake"), ("wake-sleep", "none", "wake-sleep")])
def test_pcfg_method_names(objective, schedule, method):
    assert names.pcfg_method(objective, schedule) == method


def test_registry_covers_the_code_names():
    assert [names.pcfg_method(o, s) for o, s in sweeps.PCFG_METHODS] == list(names.PCFG_METHOD_ORDER)
    for name in set(SCHEDULES) | set(sweeps.COMPARED_SCHEDULES) | set(sweeps.WINDOWED_SCHEDULES):
        assert name in names.SCHEDULE_LABELS and name in names.SCHEDULE_COLOURS and name in names.SCHEDULE_MARKERS
    assert set(sweeps.VAE_DATASETS + sweeps.SBN_DATASETS) == set(names.DATASET_ORDER) == set(names.DATASET_LABELS)
    assert set(names.PCFG_METHOD_ORDER) == set(names.PCFG_METHOD_LABELS) == set(names.PCFG_METHOD_COLOURS)
    fixed = set(names.SCHEDULE_COLOURS.values())
    assert not fixed & set(names.SPARE_COLOURS)


def test_plotting_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, tvolib.plotting, tvolib.paper.analysis, tvolib.paper.captions; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
