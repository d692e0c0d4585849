"""Importing the bandit (and so BoTorch) leaves a readable log: one third-party warning silenced, no other."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_bandit_silences_only_the_torch_jit_script_warning():
    """linear_operator (through BoTorch) calls the deprecated ``torch.jit.script`` at import time;
    every notebook kernel and sweep worker printed that FutureWarning. A fresh interpreter with
    Python's default filters imports the package, then warns three times itself: another
    FutureWarning and the same text under another category must still be shown."""
    code = "\n".join([
        "import warnings",
        "import tvolib.paper.figures",
        "warnings.warn('another FutureWarning', FutureWarning)",
        "warnings.warn('`torch.jit.script` is deprecated (a DeprecationWarning)', DeprecationWarning)",
        "warnings.warn('`torch.jit.script` is deprecated (a UserWarning)', UserWarning)",
    ])
    out = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert "Please switch to `torch.compile`" not in out.stderr, out.stderr
    assert "FutureWarning: another FutureWarning" in out.stderr
    assert "DeprecationWarning: `torch.jit.script` is deprecated (a DeprecationWarning)" in out.stderr
    assert "UserWarning: `torch.jit.script` is deprecated (a UserWarning)" in out.stderr
