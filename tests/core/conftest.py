"""Fixtures of the TVO core tests: a linear-Gaussian toy whose log Z_beta is known in closed form."""
from __future__ import annotations

import pytest
import torch

from tvolib.models import LinearGaussian


@pytest.fixture
def toy() -> LinearGaussian:
    # q(z|x) = N(0.3 x + 0.2, 0.5) is wider than the posterior (variance 0.22): sane importance weights.
    return LinearGaussian(a=1.5, b=0.5, s=0.8, m=0.2, v=0.5, c=0.3)


@pytest.fixture
def x() -> torch.Tensor:
    return torch.tensor([[-0.5], [0.4], [1.2], [2.0]], dtype=torch.float64)

