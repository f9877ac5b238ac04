"""``python -m experiments.launch``: several learning rates from one shared loader."""

from __future__ import annotations

import json

import pytest
from data_marks import needs_fashion_mnist

from experiments.launch import main


@needs_fashion_mnist
@pytest.mark.slow
def test_shared_launch_trains_every_learning_rate_and_summarizes(tmp_path):
    args = ["--workload", "cifar10_resnet", "--lrs", "0.1", "0.05", "--loading", "shared"]
    budget = ["--max-fresh", "512", "--eval-every-fresh", "512", "--num-workers", "1"]
    assert main([*args, *budget, "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "launch.json").read_text())
    assert summary["loading"] == "shared"
    assert [run["lr"] for run in summary["runs"]] == [0.1, 0.05]
    for run in summary["runs"]:
        record = json.loads((tmp_path / run["record"]).read_text())
        assert record["consume"].startswith("unix:@")
        assert record["hparams"]["lr"] == run["lr"]
        assert run["fresh_examples"] == 512 and run["steps_per_s"] > 0
    assert summary["cpu_s"] > 0 and summary["wall_s"] > 0


@pytest.mark.parametrize(("lrs", "message"), [(["0"], "> 0"), (["0.1", "0.1"], "differ")])
def test_bad_learning_rates_are_refused(tmp_path, capsys, lrs, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["--workload", "cifar10_resnet", "--lrs", *lrs, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
