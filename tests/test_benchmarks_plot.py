"""`benchmarks.plot` draws the benchmark CSVs it knows and refuses others."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks import plot


def test_echo_speedup_and_shared_loading_csvs_become_figures(tmp_path):
    speedup = pd.DataFrame(
        {
            "measured_R": [1.0, 2.0, 1.0, 2.0],
            "mode": ["batch_echo", "batch_echo", "echo_on_stall", "echo_on_stall"],
            "factor": [2.0, 2.0, 8.0, 8.0],
            "speedup_vs_e1": [1.0, 1.9, 1.0, 2.0],
            "ideal_speedup": [1.0, 2.0, 1.0, 2.0],
        }
    )
    sharing = pd.DataFrame(
        {
            "workload": ["images"] * 4,
            "mode": ["own", "own", "shared", "shared"],
            "consumers": [1, 2, 1, 2],
            "per_consumer_batches_per_s": [100.0, 50.0, 100.0, 95.0],
            "cpu_ms_per_batch_received": [10.0, 11.0, 4.0, 2.0],
        }
    )
    for name, table in {"speedup": speedup, "sharing": sharing}.items():
        source, figure = tmp_path / f"{name}.csv", tmp_path / f"{name}.png"
        table.to_csv(source, index=False)
        plot.main(["--in", str(source), "--out", str(figure)])
        assert figure.read_bytes().startswith(b"\x89PNG")


def test_unknown_csv_is_a_clear_error(tmp_path, capsys):
    source = tmp_path / "other.csv"
    pd.DataFrame({"a": [1]}).to_csv(source, index=False)
    with pytest.raises(SystemExit) as exit_info:
        plot.main(["--in", str(source), "--out", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    assert "not a CSV this script knows" in capsys.readouterr().err
