"""The claims decided from benchmark tables (shared loading, echoing against a slow upstream):
paired over the benchmarks' interleaved repeats, calibrated under their own nulls, and in
the registry beside the claims on runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import cli
from analysis.calibration import GOAL, calibrate
from analysis.claims import NO_DATA, NOT_REPRODUCED, NOT_RESOLVED, REPRODUCED, claims_table
from analysis.claims.benchmark import by_repeat, permute_repeats, resample_repeats
from analysis.records import RUN_COLUMNS
from benchmarks.common import join_repeats
from benchmarks.sharing import merge_repeats


def _sharing(shared_gain: float, cpu_ratio: float, repeats: int = 5, seed: int = 0):
    """A sharing table: own and shared at N = 1 and 2, shared ``shared_gain`` times own's
    aggregate throughput and ``cpu_ratio`` times its CPU per batch, with noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for consumers in (1, 2):
        drift = rng.normal(1, 0.03, repeats)  # what every mode of a repeat shares
        for mode, gain, cpu in (("own", 1.0, 1.0), ("shared", shared_gain, cpu_ratio)):
            rate = 100 * consumers * gain * drift * rng.normal(1, 0.01, repeats)
            ms = 10 * cpu * drift * rng.normal(1, 0.01, repeats)
            rows.append({
                "workload": "cpu", "mode": mode, "consumers": consumers,
                "aggregate_batches_per_s": float(np.median(rate)),
                "cpu_ms_per_batch_received": float(np.median(ms)),
                "aggregate_batches_per_s_by_repeat": join_repeats(rate),
                "cpu_ms_per_batch_received_by_repeat": join_repeats(ms),
            })  # fmt: skip
    return pd.DataFrame(rows)


def _speedup(kept: float, rounds: int = 5, seed: int = 0):
    """An echo_speedup table at R = 4: e = 1 (input-bound), e = 4 and EchoOnStall keeping
    ``kept`` of the from-memory steps/s."""
    rng = np.random.default_rng(seed)
    memory = 100 * rng.normal(1, 0.01, rounds)
    rows = []
    for mode, factor, share in (("batch_echo", 1.0, 0.25), ("batch_echo", 4.0, kept)):
        rows.append({
            "upstream_ratio_R": 4.0, "mode": mode, "factor": factor,
            "steps_per_s_by_repeat": join_repeats(memory * share * rng.normal(1, 0.01, rounds)),
            "in_memory_steps_per_s_by_repeat": join_repeats(memory),
        })  # fmt: skip
    rows.append({**rows[-1], "mode": "echo_on_stall", "factor": 8.0})
    return pd.DataFrame(rows)


def _claims(**tables) -> pd.DataFrame:
    return claims_table(pd.DataFrame(), tables=tables).set_index("claim")


def test_sharing_that_doubles_throughput_and_halves_cpu_is_reproduced_at_n_2_only():
    table = _claims(sharing=_sharing(1.6, 0.5))
    throughput, cost = table.loc["throughput_increase"], table.loc["cost_saving"]
    assert throughput["verdict"] == cost["verdict"] == REPRODUCED
    assert "cpu N=2" in throughput["ours"] and "N=1" not in throughput["ours"]
    assert "5 for, 0 against, 0 tied" in throughput["ours"]
    assert "1.60x" in throughput["ours"] or "1.6" in throughput["ours"]
    assert "up to 2x lies above our interval" in throughput["ours"]
    assert "0.5x lies inside our interval" in cost["ours"]


def test_sharing_that_is_slower_and_costlier_is_not_reproduced():
    table = _claims(sharing=_sharing(0.7, 1.4))
    assert table.loc["throughput_increase", "verdict"] == NOT_REPRODUCED
    assert table.loc["cost_saving", "verdict"] == NOT_REPRODUCED


def test_a_gain_within_the_resolution_is_not_a_gain():
    table = _claims(sharing=_sharing(1.02, 0.98))
    assert table.loc["throughput_increase", "verdict"] != REPRODUCED
    assert table.loc["cost_saving", "verdict"] != REPRODUCED


def test_a_table_without_repeats_says_so_and_a_missing_table_is_no_data():
    old = _sharing(1.6, 0.5).drop(columns=["aggregate_batches_per_s_by_repeat"])
    table = _claims(sharing=old)
    assert table.loc["throughput_increase", "verdict"] == NO_DATA
    assert "rerun the benchmark" in table.loc["throughput_increase", "ours"]
    assert table.loc["cost_saving", "verdict"] == REPRODUCED
    missing = _claims()
    assert missing.loc["upstream_slowdown_compensated", "verdict"] == NO_DATA
    assert missing.loc["upstream_slowdown_compensated", "ours"] == "no echo_speedup benchmark table"


def test_echoing_that_keeps_the_from_memory_rate_compensates_and_one_that_loses_a_third_not():
    kept = _claims(echo_speedup=_speedup(0.97)).loc["upstream_slowdown_compensated"]
    assert kept["verdict"] == REPRODUCED
    assert "R=4 batch_echo e=4" in kept["ours"] and "R=4 echo_on_stall e=8" in kept["ours"]
    assert "e=1" not in kept["ours"]  # echoing less than R times cannot compensate
    lost = _claims(echo_speedup=_speedup(0.67)).loc["upstream_slowdown_compensated"]
    refuted = lost["ours"].count(f": {NOT_REPRODUCED}")
    assert refuted > 1 and refuted == lost["ours"].count(" e=")  # every part
    # each part refuted at p 1/32, above 0.05 over its parts: 5 rounds cannot refute the claim
    assert lost["verdict"] == NOT_RESOLVED


def test_the_null_shuffles_each_repeat_among_the_cases_and_the_resample_keeps_pairs():
    table = _sharing(1.6, 0.5)
    null = permute_repeats(
        table, ["workload", "consumers"], ["aggregate_batches_per_s_by_repeat"],
        np.random.default_rng(1),
    )  # fmt: skip
    for consumers, rows in table.groupby("consumers"):
        before = np.vstack([by_repeat(c) for c in rows["aggregate_batches_per_s_by_repeat"]])
        moved = null[null["consumers"] == consumers]["aggregate_batches_per_s_by_repeat"]
        after = np.vstack([by_repeat(c) for c in moved])
        assert np.allclose(np.sort(before, axis=0), np.sort(after, axis=0), rtol=1e-5)
    drawn = resample_repeats(table, np.random.default_rng(2))
    first = [by_repeat(c) for c in table["aggregate_batches_per_s_by_repeat"]]
    again = [by_repeat(c) for c in drawn["aggregate_batches_per_s_by_repeat"]]
    index = [int(np.argmin(np.abs(first[0] - v))) for v in again[0]]
    assert all(np.allclose(a, f[index], rtol=1e-5) for a, f in zip(again, first, strict=True))


def test_the_benchmark_claims_meet_the_goal_under_their_nulls_and_have_power():
    tables = {"sharing": _sharing(1.6, 0.5), "echo_speedup": _speedup(0.97)}
    found = calibrate(pd.DataFrame(columns=RUN_COLUMNS), tables=tables,
                      permutations=300, resamples=100, seed=3)  # fmt: skip
    mine = found[found["claim"].isin(["throughput_increase", "cost_saving",
                                      "upstream_slowdown_compensated"])]  # fmt: skip
    assert set(mine["claim"]) == {"throughput_increase", "cost_saving",
                                  "upstream_slowdown_compensated"}  # fmt: skip
    assert (mine["false_positive_rate"] <= GOAL).all(), mine
    assert (mine["false_refutation_rate"] <= GOAL).all(), mine
    assert (mine[mine["part"] != "all"]["power"] > 0.5).all(), mine


def test_the_claims_command_reads_the_benchmark_tables(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    pd.DataFrame(columns=RUN_COLUMNS).to_csv(runs, index=False)
    sharing = tmp_path / "shared_loading.csv"
    _sharing(1.6, 0.5).to_csv(sharing, index=False)
    out = tmp_path / "claims.csv"
    cli.main(["claims", "--runs", str(runs), "--sharing", str(sharing), "--out", str(out)])
    table = pd.read_csv(out).set_index("claim")
    assert table.loc["throughput_increase", "verdict"] == REPRODUCED
    with pytest.raises(SystemExit) as stop:
        cli.main(["claims", "--runs", str(runs), "--echo-speedup", str(tmp_path / "no.csv"),
                  "--out", str(out)])  # fmt: skip
    assert stop.value.code == 2
    assert "--echo-speedup: no such file" in capsys.readouterr().err


def test_a_trials_repeats_merge_into_medians_and_per_repeat_cells():
    rows = [
        {"mode": "own", "consumers_finished": finished, "aggregate_batches_per_s": rate,
         "cpu_ms_per_batch_received": cpu, "wall_s": wall}
        for finished, rate, cpu, wall in ((2, 10.0, 5.0, 1.0), (1, 30.0, 7.0, 3.0),
                                           (2, 20.0, float("nan"), 2.0))
    ]  # fmt: skip
    row = merge_repeats(rows)
    assert row["aggregate_batches_per_s"] == 20.0 and row["wall_s"] == 2.0
    assert row["cpu_ms_per_batch_received"] == 6.0  # the finite repeats' median
    assert row["consumers_finished"] == 1 and row["repeats"] == 3
    assert row["aggregate_batches_per_s_by_repeat"] == "10;30;20"


@pytest.mark.slow
def test_a_study_without_benchmarks_reads_the_default_studys_tables_in_snakemake():
    """`snakemake --configfile config/protocol.yaml` decides the claims on benchmarks from the
    default study's tables, as `scripts/study-report.sh` does, not as "no data"."""
    root = Path(__file__).parents[1]
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    planned = subprocess.run(
        [snakemake, "-n", "-p", "--cores", "1", "--configfile", "config/protocol.yaml",
         "--forcerun", "claims", "claims"],
        cwd=root, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    out = planned.stdout + planned.stderr
    assert planned.returncode == 0, out
    command = next(line for line in out.splitlines() if "-m analysis claims" in line)
    assert "--sharing results/benchmarks/shared_loading.csv" in command
    assert "--echo-speedup results/benchmarks/echo_speedup.csv" in command
