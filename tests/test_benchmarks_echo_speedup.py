"""`benchmarks.echo_speedup` pairs every echo case with the loop fed from memory run next to it,
and writes each round of both, which the claim on a slow upstream reads."""

from __future__ import annotations

import pandas as pd

from analysis.claims.benchmark import by_repeat
from analysis.claims.rules import NO_DATA
from analysis.claims.upstream_slowdown_compensated import decide
from benchmarks.echo_speedup import main, paired_rates


def test_each_case_is_paired_with_the_reference_run_just_before_it():
    calls: list[str] = []

    def rate(batches: str) -> float:  # a machine that slows down with every measurement
        calls.append(batches)
        return 100.0 - len(calls)

    cases = {("batch_echo", 1.0): "e1", ("batch_echo", 2.0): "e2"}
    rates, references = paired_rates(cases, "memory", 2, rate)
    assert calls == ["memory", "e1", "memory", "e2"] * 2  # rounds interleave the cases
    assert rates == {("batch_echo", 1.0): [98.0, 94.0], ("batch_echo", 2.0): [96.0, 92.0]}
    # each reference is the one measured just before its case: one step of drift apart
    for key in cases:
        assert [r - c for r, c in zip(references[key], rates[key], strict=True)] == [1.0, 1.0]


def test_the_csv_keeps_every_round_of_each_case_and_of_its_reference(tmp_path):
    out = tmp_path / "speedup.csv"
    main(["--out", str(out), "--ratios", "2", "--factors", "1", "2", "--max-factor", "2",
          "--steps", "3", "--rounds", "2", "--step-ms", "1"])  # fmt: skip
    table = pd.read_csv(out)
    assert sorted(zip(table["mode"], table["factor"], strict=True)) == [
        ("batch_echo", 1.0), ("batch_echo", 2.0), ("echo_on_stall", 2.0)
    ]  # fmt: skip
    for _, row in table.iterrows():
        assert len(by_repeat(row["steps_per_s_by_repeat"])) == 2
        assert len(by_repeat(row["in_memory_steps_per_s_by_repeat"])) == 2
    parts = decide(table, None)
    assert [p.name for p in parts] == ["R=2 batch_echo e=2", "R=2 echo_on_stall e=2"]
    assert all(p.verdict != NO_DATA for p in parts)
