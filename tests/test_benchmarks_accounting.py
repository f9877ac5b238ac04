"""What the benchmarks attribute: CPU by role in a process tree, and memory per producer."""

from __future__ import annotations

import argparse
import functools
import math
import os
import time
from pathlib import Path

import pytest

from benchmarks.sharing import cpu_by_role
from experiments.procstat import TreeCpu


def _tree(cpu: dict[int, float], parents: dict[int, int], root: int = 10) -> TreeCpu:
    tree = TreeCpu(root)  # never started: filled as sampling would fill it
    tree.cpu, tree.parents = dict(cpu), dict(parents)
    return tree


def test_a_process_is_attributed_to_the_child_of_the_root_it_descends_from():
    tree = _tree({10: 0.1, 11: 1.0, 12: 2.0, 13: 3.0, 14: 4.0}, {11: 10, 12: 11, 13: 12, 14: 10})
    assert [tree.top_ancestor(pid) for pid in (10, 11, 12, 13, 14)] == [10, 11, 11, 11, 14]


def test_cpu_by_role_splits_consumers_producer_and_their_loaders():
    # trial 10: consumers 11 and 12 (11 with an own loader worker 21), producer 13 with
    # loader workers 31 and 32 (and 41, a process one of them started)
    cpu = {10: 0.5, 11: 1.0, 12: 1.5, 21: 2.0, 13: 3.0, 31: 4.0, 32: 5.0, 41: 0.25}
    parents = {11: 10, 12: 10, 13: 10, 21: 11, 31: 13, 32: 13, 41: 32}
    roles = cpu_by_role(_tree(cpu, parents), consumer_pids={11, 12})
    assert roles == {
        "consumers": 2.5,
        "consumer_loaders": 2.0,
        "producer": 3.0,
        "producer_loaders": 9.25,
    }
    assert sum(roles.values()) == sum(cpu.values()) - cpu[10]  # the trial's own: total only


def test_the_memory_benchmark_samples_both_producers(tmp_path):
    from benchmarks import sharing_rss

    out = tmp_path / "rss.csv"
    rows = sharing_rss.main(
        ["--out", str(out), "--consumers", "2", "--batches", "40", "--every-s", "0.1"]
    )
    assert out.exists() and {row["mode"] for row in rows} == set(sharing_rss.MODES)
    for row in rows:
        assert row["producer_rss_mb"] > 0 and row["batches_served"] >= 0
    assert max(row["segments"] for row in rows if row["mode"] == "shared_pool") > 0


def test_the_sharing_table_has_the_lent_share_and_rows_from_a_64_mb_shm(tmp_path):
    """``--shm-mb 0 64``: every trial also runs in a private 64 MB /dev/shm, and ``shared``
    rows say that the DataLoader's workers collated every batch into the producer's segments
    (none copied); figures and claims read the machine's rows."""
    from sharing_checks import small_shm_unavailable

    from analysis.figures._registry import TABLES
    from benchmarks import sharing

    why = small_shm_unavailable()
    if why:
        pytest.skip(why)
    out = tmp_path / "shared_loading.csv"
    options = ["--workloads", "images", "--consumers", "1", "--modes", "own", "shared"]
    rows = sharing.main(["--out", str(out), *options, "--batches", "4", "--shm-mb", "0", "64"])
    by = {(row["mode"], row["shm_mb"]): row for row in rows}
    assert set(by) == {("own", 0), ("shared", 0), ("own", 64), ("shared", 64)}
    assert all(by["shared", shm]["consumers_finished"] == 1 for shm in (0, 64))
    assert all(by["shared", shm]["lent_share"] == 1.0 for shm in (0, 64))
    assert math.isnan(by["shared", 0]["copy_ms_per_batch"])
    assert math.isnan(by["own", 0]["lent_share"])
    assert set(TABLES["sharing"].read(str(out))["shm_mb"]) == {0}


def _orphan_a_sleeper(*args, pid_file: Path) -> None:
    """A trial that leaves a grandchild behind, re-parented away from the trial's tree at
    once (as a killed producer's loader workers are)."""
    if os.fork() == 0:
        if os.fork() == 0:
            pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
            pid_file.with_suffix(".tmp").rename(pid_file)
            time.sleep(120)
            os._exit(0)  # never back into pytest, killed or not
        os._exit(0)
    while not pid_file.exists():
        time.sleep(0.01)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_trial_leaves_no_process_behind_even_one_its_tree_never_saw(tmp_path, monkeypatch):
    from benchmarks import sharing

    pid_file = tmp_path / "orphan.pid"
    monkeypatch.setattr(sharing, "trial", functools.partial(_orphan_a_sleeper, pid_file=pid_file))
    args = argparse.Namespace(batches=4, ts_batches=4, recut_batch=None, workers=0)
    row = sharing.run_trial("own", "images", 1, args, work=0)
    orphan = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _running(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(orphan), f"the trial's orphan, process {orphan}, still runs"
    assert row["consumers_finished"] == 0
