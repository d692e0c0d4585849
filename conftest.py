"""Every pytest run from this repository (the unit tests and the notebooks under nbval): figures and
tables go to a scratch folder unless ``$TVOLIB_FIGURES`` names one, so that no test overwrites the
committed ``figures/`` (``make test`` names its own scratch folder)."""
from __future__ import annotations

import os
import tempfile


def pytest_configure(config) -> None:
    if not os.environ.get("TVOLIB_FIGURES"):
        os.environ["TVOLIB_FIGURES"] = tempfile.mkdtemp(prefix="tvolib-test-figures-")
