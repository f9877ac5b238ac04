"""`scripts/gpu-check.sh --dry`: every step of the GPU check runs on the CPU at tiny sizes and
writes its CSV (the GPU tests skip), so the script is ready for a GPU machine; ``--only`` runs
setup and the steps named."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).parents[1]
STEPS = ["setup", "cuda", "tests", "sharing", "echo", "paper", "plan"]
SCRIPT = str(ROOT / "scripts" / "gpu-check.sh")


def rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def skipped(path: Path) -> tuple[int, int]:
    """(tests, skipped) of a junit file, checking that none failed."""
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("0", "0")
    return int(suite.get("tests")), int(suite.get("skipped"))


def test_only_runs_setup_then_the_cuda_tests_alone_first(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        [SCRIPT, "--dry", "--only", "cuda", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    log = (tmp_path / "gpu-check.log").read_text()
    assert result.returncode == 0, log[-4000:]
    assert [r["step"] for r in rows(tmp_path / "steps.csv")] == ["setup", "cuda"]
    assert re.search(r"limits: setup \d+ s, cuda \d+ s, tests \d+ s, .*: \d+ s at most", log)
    assert "pytest -p no:cacheprovider -m gpu -ra --timeout 40" in log
    assert log.count("test session starts") == 1  # the CUDA tests in a pytest call of their own
    assert re.search(r"tests/test_sharing_cuda.py s+ ", log) and "needs a CUDA device" in log
    tests, skips = skipped(tmp_path / "cuda-tests.xml")
    assert tests == skips >= 5  # no CUDA here: all skip
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cuda-tests.xml",
        "gpu-check.log",
        "steps.csv",
    ]


def test_only_an_unknown_step_is_refused_naming_the_steps(tmp_path):
    result = subprocess.run(
        [SCRIPT, "--dry", "--only", "cuda,bogus", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"--only: no step 'bogus'; steps: {' '.join(STEPS)}"


@pytest.mark.timeout(720)  # under two minutes alone; a loaded machine takes longer
@pytest.mark.slow
def test_dry_run_runs_every_step_and_writes_the_tables(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        [SCRIPT, "--dry", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=700,
    )
    log = (tmp_path / "gpu-check.log").read_text()
    assert result.returncode == 0, log[-4000:]
    assert log.rstrip().endswith("gpu-check: ok")
    assert [(r["step"], r["status"]) for r in rows(tmp_path / "steps.csv")] == [
        (step, "0") for step in STEPS
    ]
    planned = re.search(
        r"(\d+) training jobs \(every 50th of \d+\), (\d+) with gpu=1, (\d+) on cuda", log
    )
    assert planned and int(planned[1]) > 0 and len(set(planned.groups())) == 1

    tests, skips = skipped(tmp_path / "cuda-tests.xml")
    assert tests == skips >= 5  # no CUDA here: all skip
    tests, skips = skipped(tmp_path / "gpu-tests.xml")
    assert tests == skips >= 3

    sharing = rows(tmp_path / "gpu_sharing.csv")
    assert [(r["mode"], r["trainers"]) for r in sharing] == [
        ("own", "1"), ("shared", "1"), ("in_memory", "1"), ("own", "2"), ("shared", "2"),
    ]  # fmt: skip
    for row in sharing:
        assert row["trainers_finished"] == row["trainers"]
        assert float(row["per_trainer_steps_per_s"]) > 0 and float(row["cores_busy"]) > 0
    assert [r["loader_workers"] for r in sharing] == ["1", "1", "0", "2", "2"]
    assert float(sharing[3]["aggregate_vs_own"]) == 1.0
    assert "goal (N=2 shared >= 1.9x own)" in log

    echo = rows(tmp_path / "gpu_echo.csv")
    assert [(r["mode"], float(r["factor"])) for r in echo] == [
        ("batch_echo", 1.0), ("batch_echo", 2.0), ("batch_echo", 4.0), ("echo_on_stall", 4.0),
    ]  # fmt: skip
    for row in echo:
        assert float(row["steps_per_s"]) > 0 and float(row["measured_R"]) > 0
        assert float(row["ideal_speedup"]) == min(
            float(row["factor"]), max(1.0, float(row["measured_R"]))
        )

    paper = rows(tmp_path / "paper_smoke.csv")
    # Most important first: a step cut short by its time limit loses the least.
    assert [r["workload"] for r in paper] == [
        "imagenet_resnet", "coco_ssd", "lm1b_transformer", "common_crawl_transformer",
        "cifar10_resnet",
    ]  # fmt: skip
    assert [r["model"] for r in paper] == ["ResNet", "SSD", "CausalLM", "CausalLM", "CifarResNet"]
    for row in paper:
        assert row["steps"] == "1" and float(row["steps_per_s"]) > 0 and row["device"] == "cpu"
        assert "peak_memory_gib" in row
