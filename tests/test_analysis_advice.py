"""`analysis.advice`: the evidence `echo.advise` carries is what the committed records say."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.advice import FAMILIES, dumps, evidence
from analysis.cli import main
from analysis.records import read_runs

ROOT = Path(__file__).resolve().parents[1]
RUNS = "results/protocol/runs.csv"


def test_the_committed_evidence_is_what_the_committed_records_give():
    computed = evidence(read_runs(ROOT / RUNS), RUNS)
    assert (ROOT / "echo" / "evidence.json").read_text() == dumps(computed), (
        f"echo/evidence.json is stale: python -m analysis advice --runs {RUNS} "
        "--out echo/evidence.json"
    )
    assert {row["workload"] for row in computed["rows"]} == set(FAMILIES)
    for row in computed["rows"]:
        assert row["low"] <= row["ratio"] <= row["high"] and row["searches"] == 5


def test_the_command_writes_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "evidence.json"
    main(["advice", "--runs", RUNS, "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads((ROOT / "echo" / "evidence.json").read_text())
    assert "28 workload, point and factor rows" in capsys.readouterr().out
