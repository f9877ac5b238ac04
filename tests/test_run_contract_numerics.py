"""The numerics mode: set before torch works, checked against what the libraries chose, and
stamped on every record."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from run_contract import numerics


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in numerics.MODES["portable"]}
    environment.pop(numerics.ENV, None)
    return subprocess.run(
        [sys.executable, "-c", code], env={**environment, **env}, capture_output=True, text=True
    )


@pytest.mark.slow
def test_importing_experiments_pins_the_libraries_and_check_passes():
    done = _python(
        "import json, experiments; from run_contract import numerics; numerics.check(); "
        "print(json.dumps(numerics.stamp()))"
    )
    assert done.returncode == 0, done.stderr
    stamp = json.loads(done.stdout)
    assert stamp["mode"] == "portable"
    assert stamp["observed"] == {"aten": "AVX2", "mkl": "COMPATIBLE,STRICT", "onednn": "Intel AVX2"}
    assert stamp["pins"]["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert stamp["versions"]["torch"] and stamp["versions"]["onednn"]


@pytest.mark.slow
def test_native_mode_pins_nothing():
    done = _python(
        "import json, experiments; from run_contract import numerics; numerics.check(); "
        "print(json.dumps(numerics.stamp()))",
        ECHO_NUMERICS="native",
    )
    assert done.returncode == 0, done.stderr
    stamp = json.loads(done.stdout)
    assert stamp["mode"] == "native" and stamp["pins"] == {}
    assert stamp["observed"]["mkl"] == "OFF"


def test_importing_analysis_pins_numpy_before_it_is_imported():
    """`python -m analysis` computes its tables and figures in the workflow's mode, so a
    command run by hand and a Snakemake job draw the same bytes on any x86-64 CPU."""
    done = _python(
        "import json, os, analysis; from numpy._core._multiarray_umath import __cpu_features__ "
        "as on; from run_contract import numerics; "
        "print(json.dumps([{k: os.environ.get(k) for k in numerics.MODES['portable']}, "
        "[k for k in ('X86_V4', 'AVX512_SKX', 'AVX512_ICL', 'AVX512_SPR') if on.get(k)]]))"
    )
    assert done.returncode == 0, done.stderr
    pins, wide = json.loads(done.stdout)
    assert pins == numerics.MODES["portable"]
    assert wide == []  # no dispatch target of numpy's above AVX2, whatever this CPU has


def test_an_unknown_mode_is_refused_with_the_valid_ones():
    done = _python("import experiments", ECHO_NUMERICS="fast")
    assert done.returncode != 0
    assert "ECHO_NUMERICS='fast' is not a numerics mode; use one of portable, native" in done.stderr


@pytest.mark.slow
def test_a_run_after_unpinned_tensor_work_is_refused():
    # torch fixes MKL's branch on its first matrix product, before experiments is imported.
    done = _python(
        "import torch; torch.ones(64, 64) @ torch.ones(64, 64)\n"
        "from experiments.harness import Run, RunConfig\n"
        "from run_contract.identity import RunOptions, RunSpec\n"
        "Run(RunConfig(RunSpec(workload='lm1b_transformer'), RunOptions(device='cpu')))"
    )
    assert done.returncode != 0
    # On an AVX-512 CPU ATen's and oneDNN's paths are named too, before MKL's.
    assert "numerics mode 'portable' is not in effect: " in done.stderr
    assert "mkl runs 'OFF', the mode needs 'COMPATIBLE,STRICT'" in done.stderr


@pytest.mark.parametrize(
    ("record", "mode"),
    [({"numerics": {"mode": "portable"}}, "portable"), ({"machine": {}}, numerics.UNPINNED)],
)
def test_a_record_without_a_stamp_is_unpinned(record, mode):
    assert numerics.record_mode(record) == mode
