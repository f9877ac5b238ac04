"""benchmarks.sharing_ray at a tiny size, on a real Ray cluster: the rows it writes, and the
copies per node counted from Ray's object store."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="ray is not installed (the ray extra: pip install .[ray])")

from benchmarks import sharing_ray

pytestmark = pytest.mark.slow


def test_a_tiny_run_writes_one_row_per_trial_and_counts_one_copy_per_node(tmp_path):
    out = tmp_path / "sharing_ray.csv"
    rows = sharing_ray.main([
        "--out", str(out), "--workloads", "images", "--modes", "own", "ray",
        "--layouts", "1x2", "--batches", "4", "--workers", "0",
    ])  # fmt: skip
    assert out.is_file()
    assert [(row["mode"], row["nodes"], row["consumers_per_node"]) for row in rows] == [
        ("own", 1, 2),
        ("ray", 1, 2),
    ]
    assert all(row["consumers_finished"] == 2 for row in rows)
    shared = rows[1]
    # Two consumers on the node, one copy of each batch crossed to it (Ray's own count).
    assert 1.0 <= shared["copies_per_node_per_batch"] < 1.1
    assert shared["cpu_ms_per_batch"] > 0 and shared["per_consumer_batches_per_s"] > 0


def test_bad_layouts_are_refused_with_the_form(capsys):
    with pytest.raises(SystemExit):
        sharing_ray.main(["--out", "x.csv", "--layouts", "2by2"])
    assert "sharing_ray.layouts" in capsys.readouterr().err


def test_echo_on_stall_over_ray_lets_the_fast_consumer_train_while_the_slow_one_gets_all(
    tmp_path,
):
    import os
    from pathlib import Path

    from benchmarks import sharing_echo

    before = set(os.listdir("/tmp"))
    rows = sharing_echo.main([
        "--out", str(tmp_path / "echo.csv"), "--backends", "ray", "--batches", "12",
        "--factors", "1", "4", "--slow-ms", "60", "--fast-ms", "1",
    ])  # fmt: skip
    by = {(row["fast_echo_on_stall"], row["consumer"]): row for row in rows}
    fresh = 12 * sharing_echo.BATCH
    # Every consumer trained on every fresh example once, echo or not.
    assert {row["fresh_examples"] for row in rows} == {fresh}
    assert by[1, "fast"]["echoed_examples"] == 0 and by[4, "slow"]["echoed_examples"] == 0
    # With echo, the fast one trained on more steps, at most 4 uses of each fresh batch.
    fast = by[4, "fast"]
    assert (
        fast["steps"] > 12 and fast["echoed_examples"] == (fast["steps"] - 12) * sharing_echo.BATCH
    )
    assert fast["steps"] <= 4 * 12
    # Ray's files went into a directory of their own, removed with the cluster.
    assert set(os.listdir("/tmp")) - before == set() and not Path("/tmp/ray").exists()
