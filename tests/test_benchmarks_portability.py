"""The portability reference table: what it digests, and whether this CPU retrains its runs
bit for bit (the real check on any CPU type other than the one that made the table)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from benchmarks import numerics_cost, portability

TABLE = Path(__file__).resolve().parents[1] / "benchmarks/reference/portability.csv"


def _record() -> dict:
    curve = [
        {"fresh_examples": 0, "steps": 0, "wall_s": 0.5, "metric": 2.5, "metrics": {"loss": 2.5}},
        {"fresh_examples": 64, "steps": 2, "wall_s": 1.5, "metric": 2.0, "metrics": {"loss": 2.0}},
    ]
    return {"eval_curve": curve, "final": {"fresh_examples": 64, "steps": 2, "wall_s": 1.5}}


def test_the_digest_sees_every_computed_bit_and_no_timing():
    record = _record()
    timed = copy.deepcopy(record)
    timed["eval_curve"][1]["wall_s"] = 99.0
    timed["final"]["wall_s"] = 99.0
    assert portability.digest(timed) == portability.digest(record)
    moved = copy.deepcopy(record)
    moved["eval_curve"][1]["metrics"]["loss"] = 2.0000000000000004  # one ulp
    assert portability.digest(moved) != portability.digest(record)


def test_the_table_spans_every_workload_and_insertion_point():
    table = portability.read_table(TABLE)
    assert len(table) == len(portability.RUNS)
    assert {row["workload"] for row in table} >= {w for w, _, _ in portability.RUNS}
    assert {row["echo_point"] for row in table} == {
        "none", "before_augment", "after_augment", "after_batch",
    }  # fmt: skip
    assert {row["mode"] for row in table} == {"portable"}
    assert [row["args"].split() for row in table] == [
        portability.run_args(*run) for run in portability.RUNS
    ]


@pytest.mark.slow
def test_this_cpu_retrains_the_cheapest_reference_runs_bit_for_bit():
    table = sorted(portability.read_table(TABLE), key=lambda row: float(row["train_s"]))[:3]
    rows = portability.check(table)
    versions = [row["agrees"] for row in rows if isinstance(row["agrees"], str)]
    if versions:
        pytest.skip(f"the table was made with other library versions: {versions[0]}")
    differing = [f"{r['args']} (made on {r['made_on']})" for r in rows if not r["agrees"]]
    assert not differing, f"on {rows[0]['checked_on']}, differing: {differing}"


def test_check_under_a_program_that_is_not_there_fails_early_naming_it(capsys):
    with pytest.raises(SystemExit) as stopped:
        portability.main(["check", str(TABLE), "--under", "no-such-emulator -cpu Haswell"])
    assert stopped.value.code == 2
    assert "--under: 'no-such-emulator' is not a program on PATH" in capsys.readouterr().err


@pytest.mark.slow
def test_check_under_a_launcher_trains_each_run_under_it(tmp_path):
    called = tmp_path / "called.txt"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(f'#!/bin/sh\necho "$@" >> {called}\nexec "$@"\n')
    launcher.chmod(0o755)
    out = tmp_path / "check.csv"
    portability.main([
        "check", str(TABLE), "--workload", "lm1b_transformer", "--cheapest", "1",
        "--under", f"{launcher}", "--out", str(out),
    ])  # fmt: skip
    (row,) = portability.read_table(out)
    assert "--workload lm1b_transformer" in row["args"]
    assert row["checked_on"].startswith(f"{launcher} on ")
    (line,) = called.read_text().splitlines()
    assert "-m experiments.run " + row["args"] in line


def test_the_cost_summary_is_the_ratio_of_median_step_times():
    rows = [
        {"workload": "w", "mode": mode, "s_per_step": s}
        for mode, s in [("native", 1.0), ("native", 3.0), ("native", 2.0), ("portable", 2.6),
                        ("portable", 2.4), ("portable", 9.0)]
    ]  # fmt: skip
    (summary,) = numerics_cost.summarise(rows)
    assert summary["s_per_step"] == 2.0
    assert summary["portable_over_native"] == pytest.approx(1.3)
