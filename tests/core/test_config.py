"""The shared experiment-config base: round trip, digest, rejected names, device choice."""
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from tvolib.config import ExperimentConfig, resolve_device
from tvolib.training import PCFGConfig, RunConfig


@dataclass(frozen=True)
class Toy(ExperimentConfig):
    a: int = 1
    pairs: tuple = (("x", 1),)
    kind: ClassVar[str] = "toy"


def test_round_trip_freezes_lists_and_checks_kind():
    toy = Toy(a=2, pairs=(("y", 3),))
    as_json = toy.to_dict()
    assert as_json == {"a": 2, "pairs": [["y", 3]]}
    assert Toy.from_dict({"kind": "toy", **as_json}) == toy  # lists back to tuples: hashable again
    with pytest.raises(ValueError, match="kind 'tvo' is not 'toy'"):
        Toy.from_dict({"kind": "tvo", "a": 1})
    with pytest.raises(ValueError, match=r"unknown Toy fields \['b'\]; accepted: \['a', 'pairs'\]"):
        Toy.from_dict({"b": 1})
    with pytest.raises(ValueError, match="unknown Toy fields"):
        toy.replace(b=1)
    assert toy.replace(a=5).a == 5


def test_digest_depends_on_kind_and_values():
    assert Toy().digest() == Toy().digest() and len(Toy().digest()) == 12
    assert Toy().digest() != Toy(a=2).digest()

    @dataclass(frozen=True)
    class Other(Toy):
        kind: ClassVar[str] = "other"

    assert Other().digest() != Toy().digest()  # same fields, another kind: another folder
    assert RunConfig().digest() != PCFGConfig().digest()


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="not supported; use 'cpu' or 'cuda'"):
        resolve_device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
