"""`benchmarks.gpu_sharing`'s exit status: a trial whose trainers did not all finish fails the
run (on the CPU here; the same code runs on a GPU)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_a_trial_whose_trainers_did_not_finish_fails_the_run(tmp_path):
    out = tmp_path / "gpu_sharing.csv"
    # Far more steps than the trial's time limit allows: the trainers are killed unfinished.
    command = [sys.executable, "-m", "benchmarks.gpu_sharing", "--device", "cpu", "--out", out]
    command += ["--trainers", "1", "--modes", "shared", "--workers", "1", "--arch", "resnet18"]
    command += ["--batch-size", "2", "--image-size", "32", "--images", "4", "--warmup", "1"]
    command += ["--steps", "1000000", "--trial-timeout", "3"]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "gpu_sharing: FAILED: shared N=1: 0 of 1 trainers finished" in result.stdout
    with out.open(newline="") as handle:
        (row,) = csv.DictReader(handle)  # the failed trial's row is still written
    assert (row["mode"], row["trainers"], row["trainers_finished"]) == ("shared", "1", "0")


def test_own_sync_is_run_and_recorded(tmp_path):
    out = tmp_path / "gpu_sharing.csv"
    command = [sys.executable, "-m", "benchmarks.gpu_sharing", "--device", "cpu", "--out", out]
    command += ["--trainers", "1", "--modes", "own", "--workers", "1", "--arch", "resnet18"]
    command += ["--batch-size", "2", "--image-size", "32", "--images", "4", "--warmup", "1"]
    command += ["--steps", "2", "--own-sync"]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    with out.open(newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert (row["mode"], row["own_sync"], row["trainers_finished"]) == ("own", "True", "1")
