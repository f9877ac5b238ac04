"""Shared fixtures and settings for the test suite."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

# TensorFlow's C++ start-up banner drowns pytest's output; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Importing triton after TensorFlow segfaults (torch 2.14.1 + tensorflow-cpu 2.21), and the
# first torch optimizer imports it through torch._dynamo. The TensorFlow tests share this
# process with training tests, so triton is loaded first when it is installed.
with contextlib.suppress(ImportError):
    import triton  # noqa: F401


@pytest.fixture
def toy_workload(tmp_path_factory, monkeypatch):
    """Register a throwaway workload the way a user adds one: one new module in a workload
    package, found by discovery. Yields its name; the registry is restored afterwards."""
    from experiments import registry

    root = tmp_path_factory.mktemp("toy")
    package = root / "toy_workloads"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copy(Path(__file__).parent / "toy_workload.py", package / "toy.py")
    # The project's own workloads register first, into the real registry: a module first
    # imported while the copy below is in place would register only into the copy (and,
    # cached by Python, never again), so later tests would not see it.
    registry.discover()
    monkeypatch.setattr(registry, "_WORKLOADS", dict(registry._WORKLOADS))
    monkeypatch.syspath_prepend(str(root))
    registry.discover("toy_workloads")
    yield "toy_blobs"
    for module in [m for m in sys.modules if m.split(".")[0] == "toy_workloads"]:
        del sys.modules[module]


@pytest.fixture
def toy_figure(tmp_path_factory, monkeypatch):
    """Register a throwaway figure the way a user adds one: one new module, named after the
    figure, in a package of figures found by discovery. Yields its name; the registry is
    restored afterwards."""
    from analysis.figures import _registry

    root = tmp_path_factory.mktemp("toy_figure")
    package = root / "toy_figures"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copy(Path(__file__).parent / "toy_figure.py", package / "toy_figure.py")
    _registry.discover()  # the project's own figures register into the real registry first
    monkeypatch.setattr(_registry, "_FIGURES", dict(_registry._FIGURES))
    monkeypatch.syspath_prepend(str(root))
    _registry.discover("toy_figures")
    yield "toy_figure"
    for module in [m for m in sys.modules if m.split(".")[0] == "toy_figures"]:
        del sys.modules[module]
