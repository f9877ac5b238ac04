"""`python -m analysis compare`: two out_dirs agree when their records match up to timing."""

from __future__ import annotations

import json

import pytest

from analysis.cli import main
from analysis.compare import compare_record_dirs
from tests.test_analysis import make_record


def write(out_dir, record, name="run.json"):
    folder = out_dir / "records" / record["workload"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(record))


def test_records_that_differ_only_in_timing_agree(tmp_path):
    record = make_record()
    slower = json.loads(json.dumps(record))
    slower["timing"]["total_s"] *= 3
    slower["wall_s_to_target"] *= 3
    slower["eval_curve"][-1]["wall_s"] *= 3
    write(tmp_path / "a", record)
    write(tmp_path / "b", slower)
    assert compare_record_dirs(tmp_path / "a", tmp_path / "b") == []


def test_a_changed_metric_or_a_missing_record_is_reported(tmp_path, capsys):
    record = make_record()
    changed = json.loads(json.dumps(record))
    changed["eval_curve"][-1]["metric"] += 0.01
    write(tmp_path / "a", record)
    write(tmp_path / "b", changed)
    write(tmp_path / "a", make_record(seed=1), name="extra.json")
    lines = compare_record_dirs(tmp_path / "a", tmp_path / "b")
    assert lines[0].startswith("only in ") and lines[0].endswith("cifar10_resnet/extra.json")
    assert lines[1] == "cifar10_resnet/run.json: differs in eval_curve"
    with pytest.raises(SystemExit) as error:
        main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert error.value.code == 1
    assert "2 records differ" in capsys.readouterr().err


def test_no_records_at_all_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no run records"):
        compare_record_dirs(tmp_path / "a", tmp_path / "b")
