"""The workload contract, checked for every registered workload at paper scale: it trains on a
tiny fixture of its real data format, and without its data it stops with one line naming
what is missing (`workload_checks`). Each workload's case is the ``PAPER_SCALE`` of its own
test module, ``tests/test_experiments_<name>.py``, next to its fixture."""

from __future__ import annotations

import importlib
import importlib.util

import pytest
from workload_checks import PaperScale, check_paper_scale_run, check_paper_scale_without_data

from experiments import registry


def paper_scale(workload: str) -> PaperScale:
    """The ``PAPER_SCALE`` that ``tests/test_experiments_<workload>.py`` declares."""
    module = f"test_experiments_{workload}"
    found = importlib.util.find_spec(module) is not None
    case = getattr(importlib.import_module(module), "PAPER_SCALE", None) if found else None
    if not isinstance(case, PaperScale):
        pytest.fail(f"tests/{module}.py declares no PAPER_SCALE (a workload_checks.PaperScale)")
    return case


@pytest.mark.slow
@pytest.mark.parametrize("workload", registry.names())
def test_paper_scale_trains_on_a_fixture_of_its_data(workload, tmp_path, monkeypatch):
    monkeypatch.setenv("ECHO_SHARE_CACHE", str(tmp_path / "cache"))  # datasets' Arrow files
    check_paper_scale_run(tmp_path, workload, paper_scale(workload))


@pytest.mark.parametrize("workload", registry.names())
def test_paper_scale_without_data_exits_with_one_line(workload, tmp_path, capsys):
    check_paper_scale_without_data(tmp_path, capsys, workload, paper_scale(workload))
