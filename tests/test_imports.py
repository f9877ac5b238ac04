"""Package boundaries a user relies on: TensorFlow stays out unless asked for, and the two
libraries do not import each other or the rest of the project."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("echo", ["tensorflow", "sharing", "experiments", "analysis"]),
        ("echo.torch", ["tensorflow", "sharing", "experiments", "analysis"]),
        ("sharing", ["tensorflow", "echo", "experiments", "analysis"]),
    ],
)
def test_importing_a_library_pulls_in_nothing_it_should_not(module, forbidden):
    code = f"import sys, {module}; print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
