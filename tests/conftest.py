"""Shared fixtures and settings for the test suite."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

# The numerics mode's environment is set before any test does tensor work, so training runs
# in this process run in it (run_contract.numerics.check refuses them otherwise).
import experiments  # noqa: F401

# TensorFlow's C++ start-up banner drowns pytest's output; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Importing triton after TensorFlow segfaults (torch 2.14.1 + tensorflow-cpu 2.21), and the
# first torch optimizer imports it through torch._dynamo. The TensorFlow tests share this
# process with training tests, so triton is loaded first when it is installed.
with contextlib.suppress(ImportError):
    import triton  # noqa: F401


@contextlib.contextmanager
def _one_new_module(tmp_path_factory, monkeypatch, registry, table, source, package, module):
    """Copy ``tests/<source>`` as module ``<package>.<module>`` of a new package on the path
    and discover it into a copy of ``registry.<table>`` (restored by ``monkeypatch``); the
    package is forgotten on exit."""
    root = tmp_path_factory.mktemp(package)
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    shutil.copy(Path(__file__).parent / source, root / package / f"{module}.py")
    # The project's own modules register first, into the real registry: a module first
    # imported while the copy below is in place would register only into the copy (and,
    # cached by Python, never again), so later tests would not see it.
    registry.discover()
    monkeypatch.setattr(registry, table, dict(getattr(registry, table)))
    monkeypatch.syspath_prepend(str(root))
    registry.discover(package)
    try:
        yield
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == package]:
            del sys.modules[name]


@pytest.fixture
def toy_workload(tmp_path_factory, monkeypatch):
    """Register a throwaway workload the way a user adds one: one new module in a workload
    package, found by discovery. Yields its name; the registry is restored afterwards."""
    from experiments import registry

    with _one_new_module(
        tmp_path_factory,
        monkeypatch,
        registry,
        "_WORKLOADS",
        "toy_workload.py",
        "toy_workloads",
        "toy",
    ):
        yield "toy_blobs"


@pytest.fixture
def toy_figure(tmp_path_factory, monkeypatch):
    """Register a throwaway figure the way a user adds one: one new module, named after the
    figure, in a package of figures found by discovery. Yields its name; the registry is
    restored afterwards."""
    from analysis.figures import _registry

    with _one_new_module(
        tmp_path_factory,
        monkeypatch,
        _registry,
        "_FIGURES",
        "toy_figure.py",
        "toy_figures",
        "toy_figure",
    ):
        yield "toy_figure"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line saying how many tests skipped because their data is not installed; also
    written to $ECHO_DATA_SKIPS_FILE when set (scripts/test.sh repeats it at its very end)."""
    from data_marks import DATA_MISSING

    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(DATA_MISSING):
            reasons.append(reason.removeprefix(DATA_MISSING).strip())
    if not reasons:
        return
    line = (
        f"{len(reasons)} tests skipped because data is missing: {'; '.join(sorted(set(reasons)))}"
    )
    terminalreporter.write_line(line, yellow=True, bold=True)
    if os.environ.get("ECHO_DATA_SKIPS_FILE"):
        Path(os.environ["ECHO_DATA_SKIPS_FILE"]).write_text(line + "\n")
