"""What the benchmarks attribute and compare: CPU by role in a process tree, and records
trained again elsewhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import rerun_records
from benchmarks.sharing import cpu_by_role
from experiments.procstat import TreeCpu

ROOT = Path(__file__).resolve().parents[1]


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


def test_rerun_records_compares_with_records_another_workflow_run_trained(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    committed = sorted((ROOT / "results/records/lm1b_transformer").glob("cpu-none-e1-*.json"))
    if len(committed) < 2:
        pytest.skip("the default study's lm1b records are not committed")
    same, changed = (path.relative_to(ROOT) for path in committed[:2])
    again = tmp_path / "again" / "lm1b_transformer"
    again.mkdir(parents=True)
    shutil.copy(same, again / same.name)
    record = json.loads(changed.read_text())
    record["eval_curve"][-1]["metric"] += 0.5  # as another machine's floating point would
    (again / changed.name).write_text(json.dumps(record))
    out = tmp_path / "compare.csv"
    rerun_records.main(
        [str(same), str(changed), "--trained-in", str(tmp_path / "again"), "--out", str(out)]
    )
    rows = out.read_text().splitlines()
    assert rows[1].split(",")[3] == "True"
    assert rows[2].split(",")[3] == "False"
    with pytest.raises(SystemExit):  # a record the other run did not train
        rerun_records.main(
            [str(same), "--trained-in", str(tmp_path / "missing"), "--out", str(out)]
        )


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
