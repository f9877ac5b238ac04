"""``python -m analysis verify``: which records retrain bit-identically, and where the first
that does not departs."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import pytest

from analysis import cli
from analysis.verify import compare, select

ROOT = Path(__file__).resolve().parents[1]


def _record(metrics=(2.0, 1.5, 1.2)) -> dict:
    curve = [
        {"fresh_examples": 100 * i, "steps": 10 * i, "wall_s": 0.1 * i, "metric": m,
         "metrics": {"loss": m}}
        for i, m in enumerate(metrics)
    ]  # fmt: skip
    return {
        "workload": "lm1b_transformer",
        "eval_curve": curve,
        "fresh_examples_to_target": 200,
        "steps_to_target": 20,
        "reached": True,
        "config_hash": "0123456789abcdef",
        "refined": {"fresh_examples_to_target": 150, "wall_s_to_target": 0.2},
        "machine": {"cpu_model": "Some CPU", "cpu_vector_isa": "AVX2"},
        "numerics": {"mode": "portable"},
    }


def test_a_rerun_that_differs_only_in_timing_is_identical():
    old = _record()
    new = copy.deepcopy(old)
    for row in new["eval_curve"]:
        row["wall_s"] += 5
    new["refined"]["wall_s_to_target"] = 9.0
    row = compare(old, new, "a.json")
    assert row["identical"] is True and row["first_differing_eval"] == ""
    assert row["numerics"] == "portable" and row["trained_on"] == "Some CPU (AVX2)"


def test_the_first_differing_evaluation_and_the_moved_crossings_are_named():
    old, new = _record(), _record(metrics=(2.0, 1.5, 1.2000001))
    new["fresh_examples_to_target"], new["refined"]["fresh_examples_to_target"] = 300, 250
    row = compare(old, new, "a.json")
    assert row["identical"] is False
    assert (row["first_differing_eval"], row["first_differing_fresh"]) == (2, 200)
    assert row["largest_metric_difference"] == pytest.approx(1e-7)
    assert (row["fresh_to_target_was"], row["fresh_to_target_now"]) == (200, 300)
    assert (row["refined_fresh_was"], row["refined_fresh_now"]) == (150, 250)
    assert row["other_differences"] == "fresh_examples_to_target refined"


def test_a_metric_beside_the_target_metric_counts_and_a_shorter_curve_differs():
    old, new = _record(), _record()
    new["eval_curve"][1]["metrics"]["accuracy"] = 0.5
    assert compare(old, new, "a.json")["first_differing_eval"] == 1
    del new["eval_curve"][1:]
    assert compare(old, new, "a.json")["first_differing_eval"] == 1
    unstamped = {k: v for k, v in old.items() if k != "numerics"}
    assert compare(unstamped, old, "a.json")["numerics"] == "unpinned"


def test_select_takes_the_cheapest_or_a_seeded_sample(tmp_path):
    paths = []
    for cost in (5.0, 1.0, 3.0, 2.0):
        path = tmp_path / f"cost{cost}.json"
        path.write_text(json.dumps({"timing": {"total_s": cost}}))
        paths.append(str(path))
    assert [Path(p).stem for p in select(paths, cheapest=2)] == ["cost1.0", "cost2.0"]
    drawn = select(paths, sample=2, seed=7)
    assert len(drawn) == 2 and drawn == select(paths, sample=2, seed=7)
    assert select(paths) == paths


def _committed(count: int) -> list[Path]:
    found = sorted((ROOT / "results/records/lm1b_transformer").glob("cpu-none-e1-*.json"))
    if len(found) < count:
        pytest.skip("the default study's lm1b records are not committed")
    return [path.relative_to(ROOT) for path in found[:count]]


def test_verify_against_another_workflow_run_exits_3_and_names_the_record(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    same, changed = _committed(2)
    again = tmp_path / "again" / "lm1b_transformer"
    again.mkdir(parents=True)
    shutil.copy(same, again / same.name)
    record = json.loads(changed.read_text())
    record["eval_curve"][-1]["metric"] += 0.5  # as another CPU's floating point would
    (again / changed.name).write_text(json.dumps(record))
    out = tmp_path / "verify.csv"
    argv = ["verify", str(same), str(changed), "--trained-in", str(tmp_path / "again")]
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--out", str(out)])
    assert exit_.value.code == 3
    rows = {row["record"]: row for row in csv.DictReader(out.open())}
    assert rows[str(same)]["identical"] == "True"
    assert rows[str(changed)]["identical"] == "False"
    assert rows[str(changed)]["first_differing_eval"] == str(len(record["eval_curve"]) - 1)
    assert "1 of 2 records identical" in capsys.readouterr().out


def test_verify_refuses_a_record_of_another_study_and_a_missing_rerun(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    (same,) = _committed(1)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["verify", "results/records/nowhere.json", "--out", str(tmp_path / "v.csv")])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        cli.main(["verify", str(same), "--trained-in", str(tmp_path), "--out", "v.csv"])
    assert exit_.value.code == 1
    with pytest.raises(SystemExit) as exit_:
        cli.main(["verify", str(same), "--cheapest", "2", "--out", "v.csv"])
    assert exit_.value.code == 2
