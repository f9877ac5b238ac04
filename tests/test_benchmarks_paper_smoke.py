"""`benchmarks.paper_smoke`: a workload that fails is reported and the others still run; the
exit status says that one failed (on the CPU at tiny sizes here)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_a_failing_workload_is_reported_and_the_next_one_still_runs(tmp_path):
    out = tmp_path / "paper_smoke.csv"
    command = [sys.executable, "-m", "benchmarks.paper_smoke", "--device", "cpu", "--out", out]
    command += ["--workloads", "imagenet_resnet", "cifar10_resnet", "--threads", "1"]
    command += ["--num-workers", "0", "--batch-size", "2", "--steps", "1", "--examples", "0.005"]
    command += ["--hparams", '{"imagenet_resnet": {"no_such_hparam": 1}}']  # fails at once
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "imagenet_resnet           FAILED: FieldError: hparam 'no_such_hparam'" in result.stdout
    assert "Traceback" in result.stderr
    assert result.stdout.rstrip().endswith("paper_smoke: FAILED: imagenet_resnet")
    with out.open(newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert (row["workload"], row["steps"], row["device"]) == ("cifar10_resnet", "1", "cpu")
