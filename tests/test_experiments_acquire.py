"""`python -m experiments.acquire`: fills the cache by reading both splits; writes a receipt."""

from __future__ import annotations

import json

import pytest

from experiments.acquire import main


def test_acquire_reads_both_splits_and_writes_a_receipt(tmp_path, toy_workload, capsys):
    out = tmp_path / "data" / "toy.json"
    assert main(["--workload", toy_workload, "--out", str(out)]) == 0
    receipt = json.loads(out.read_text())
    assert receipt["workload"] == toy_workload and receipt["scale"] == "cpu"
    assert receipt["examples"] == {"train": 512, "eval": 256}
    assert receipt["data_dir"] is None  # the cache; no machine path in committed receipts
    assert "512" in capsys.readouterr().out


def test_paper_scale_needs_a_data_dir(tmp_path, toy_workload, capsys):

    with pytest.raises(SystemExit) as error:
        main(["--workload", toy_workload, "--scale", "paper", "--out", str(tmp_path / "r.json")])
    assert error.value.code == 2
    assert "--data-dir" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
