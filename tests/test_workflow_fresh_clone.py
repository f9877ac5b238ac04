"""The main job from a fresh clone rebuilds tables and figures and runs no benchmark again,
whatever order the clone wrote its files in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project_copy import project_copy


@pytest.mark.skipif(shutil.which("git") is None, reason="copies the checkout with git ls-files")
@pytest.mark.slow
def test_a_workflow_newer_than_the_committed_results_runs_no_benchmark(tmp_path):
    """Git writes results/ before workflow/, so in a fresh clone every rule's code is newer
    than its committed output; Snakemake reruns a `script:` rule then (mtime of the script),
    which would redo a benchmark and overwrite its committed table."""
    project = project_copy(tmp_path / "project")
    later = time.time() + 60
    for path in (project / "workflow").rglob("*"):
        os.utime(path, (later, later))
    done = subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "-n", "--cores", "2"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    planned = done.stdout + done.stderr
    assert done.returncode == 0, planned
    for benchmark in ("sharing_benchmark", "echo_speedup", "sharing_ray_benchmark"):
        assert f"rule {benchmark}:" not in planned, planned


@pytest.mark.skipif(shutil.which("git") is None, reason="copies the checkout with git ls-files")
@pytest.mark.slow
def test_the_protocol_study_plans_only_the_records_not_landed(tmp_path):
    """The landed records stay valid whatever order a clone wrote them in: a search's later
    trials wait on its earlier ones (censoring) without retraining a landed one."""
    project = project_copy(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(project)}
    run = {"cwd": project, "env": env, "capture_output": True, "text": True, "timeout": 600}
    config = ["--configfile", "config/protocol.yaml"]
    missing = subprocess.run(
        [sys.executable, "-m", "experiments.study", "paths", *config, "--missing"], **run
    ).stdout.split()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "-n", "records", *config], **run
    )
    planned = done.stdout + done.stderr
    assert done.returncode == 0, planned[-2000:]
    trained = sorted(line.split()[-1] for line in planned.splitlines() if "output:" in line)
    assert trained == sorted(missing)
