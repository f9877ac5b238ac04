"""Package boundaries a user relies on: TensorFlow stays out unless asked for, and the two
libraries do not import each other or the rest of the project."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("echo", ["tensorflow", "torch", "sharing", "experiments", "analysis"]),
        ("echo.state", ["tensorflow", "torch", "sharing", "experiments", "analysis"]),
        (
            "echo.torch",
            [
                "tensorflow",
                "torchdata",
                "lightning",
                "datasets",
                "sharing",
                "experiments",
                "analysis",
            ],
        ),
        pytest.param(
            "echo.torch.nodes",
            ["tensorflow", "lightning", "datasets", "sharing", "experiments"],
            marks=pytest.mark.skipif(
                importlib.util.find_spec("torchdata") is None, reason="torchdata is not installed"
            ),
        ),
        ("sharing", ["tensorflow", "echo", "experiments", "analysis"]),
    ],
)
def test_importing_a_library_pulls_in_nothing_it_should_not(module, forbidden):
    code = f"import sys, {module}; print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
