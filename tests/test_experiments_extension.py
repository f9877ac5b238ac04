"""The extension points as the README states them: a workload is one file and one config
entry (the README's skeleton, planned by Snakemake in a fresh tree), and a broken workload is
reported in one line naming its file while the others keep working."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import registry
from experiments.pipeline import read_split
from experiments.run import main

ROOT = Path(__file__).parents[1]
TREE = ["Snakefile", "workflow", "config", "experiments", "echo", "sharing", "analysis"]


def readme_skeleton() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- workload-skeleton -->\n```python\n(.*?)```", text, re.S)
    assert match, "README lost its workload skeleton"
    return match.group(1)


@pytest.fixture(scope="module")
def fresh_tree(tmp_path_factory) -> Path:
    """The project's code in a new folder, plus the README's skeleton as one new file."""
    root = tmp_path_factory.mktemp("tree")
    for name in TREE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, root / name)
    (root / "experiments" / "workloads" / "toy_blobs.py").write_text(readme_skeleton())
    (root / "config" / "toy.yaml").write_text(
        "out_dir: out\n"
        "workloads: {toy_blobs: {}}\n"  # the one config entry
        "studies:\n"
        "  insertion: {workloads: [toy_blobs], echo_points: [after_batch], echo_factors: [2]}\n"
    )
    return root


def run_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [*args], cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False
    )


@pytest.mark.slow
def test_the_readme_skeleton_is_one_file_and_one_config_entry(fresh_tree):
    snakemake = str(Path(sys.executable).parent / "snakemake")
    planned = run_in(fresh_tree, snakemake, "records", "-n", "--cores", "1",
                     "--configfile", "config/toy.yaml")  # fmt: skip
    assert planned.returncode == 0, planned.stderr + planned.stdout
    out = planned.stdout + planned.stderr
    assert "out/records/toy_blobs/cpu-after_batch-e2-sb0-bsdefault-seed0.json" in out
    assert "out/records/toy_blobs/cpu-none-e1-sb0-bsdefault-seed2.json" in out
    checked = run_in(
        fresh_tree, sys.executable, "-m", "experiments.check", "--workload", "toy_blobs"
    )
    assert checked.returncode == 0, checked.stderr
    assert "time to target" in checked.stdout and checked.stdout.endswith("ok\n")


@pytest.mark.slow
def test_an_unknown_workload_in_the_config_names_the_modules(fresh_tree):
    config = fresh_tree / "config" / "typo.yaml"
    config.write_text(
        (fresh_tree / "config" / "toy.yaml").read_text().replace("toy_blobs", "toy_blob")
    )
    snakemake = str(Path(sys.executable).parent / "snakemake")
    planned = run_in(fresh_tree, snakemake, "-n", "--cores", "1", "--configfile", str(config))
    assert planned.returncode != 0
    out = planned.stdout + planned.stderr  # Snakemake prints its errors on stdout
    assert "config: workloads: 'toy_blob' is not a registered workload" in out
    assert "valid: cifar10_resnet" in out and "toy_blobs" in out


@pytest.fixture
def broken_package(tmp_path, monkeypatch):
    """A workload package with a good module and one whose declarations lack ``lr``."""
    package = tmp_path / "user_workloads"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text(readme_skeleton().replace("toy_blobs", "good_blobs"))
    (package / "half.py").write_text(
        readme_skeleton()
        .replace("toy_blobs", "half_blobs")
        .replace('"lr": 0.1, ', "")
        .replace("class ToyBlobs", "class HalfBlobs")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # The built-in workloads register when first imported: import them into the real registry
    # first, or they would register into the copy below and be gone for later tests.
    registry.discover()
    monkeypatch.setattr(registry, "_WORKLOADS", dict(registry._WORKLOADS))
    monkeypatch.setattr(registry, "_BROKEN", dict(registry._BROKEN))
    yield package
    for module in [m for m in sys.modules if m.split(".")[0] == "user_workloads"]:
        del sys.modules[module]


def test_a_broken_workload_is_one_line_and_the_others_keep_working(broken_package, capsys):
    registry.discover("user_workloads")
    warning = capsys.readouterr().err.strip()
    assert warning.count("\n") == 0
    assert "half.py" in warning and "default_hparams['cpu'] lacks ['lr']" in warning
    assert "good_blobs" in registry.names() and "half_blobs" not in registry.names()
    assert registry.get("good_blobs").name == "good_blobs"
    with pytest.raises(ValueError, match=r"workload 'half' is broken: .*half\.py"):
        registry.get("half")


def test_read_returning_a_generator_is_one_line_naming_the_file(
    toy_workload, monkeypatch, tmp_path, capsys
):
    cls = registry.get(toy_workload)
    monkeypatch.setattr(cls, "read", lambda self, split: (x for x in range(3)))
    with pytest.raises(TypeError, match=r"toy\.py: ToyBlobs\.read\('train'\) returned a generator"):
        read_split(cls(), "train")
    with pytest.raises(SystemExit) as exit_info:
        main(["--workload", toy_workload, "--out", str(tmp_path / "r.json")])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "returned a generator" in message


def test_the_runs_hyper_parameters_are_self_hp_and_the_error_says_so(toy_workload):
    workload = registry.get(toy_workload)()
    assert workload.hp["lr"] == 0.1
    with pytest.raises(AttributeError, match=r"self\.hp"):
        workload.hparams  # noqa: B018
