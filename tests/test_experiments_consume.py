"""Training from a shared loader: ``experiments.run --consume`` against a `sharing.Producer`
serving a workload's pipeline (`experiments.consume.workload_loader`)."""

from __future__ import annotations

import json
import multiprocessing as mp
import threading

import pytest

from experiments.consume import workload_loader
from experiments.run import main
from run_contract.record import validate
from sharing import Producer

FORK = mp.get_context("fork")


def _train(args: list[str], out: str, results) -> None:
    results.put((out, main([*args, "--threads", "1", "--out", out])))


def serve_and_train(tmp_path, producer_kwargs, runs):
    """Run a producer in a thread and one training process per argument list; return the
    records and the producer's metrics."""
    results = FORK.Queue()
    producer = Producer(**producer_kwargs)
    outs = [str(tmp_path / f"run{i}.json") for i in range(len(runs))]
    processes = [
        FORK.Process(target=_train, args=([*args, "--consume", producer.endpoint], out, results))
        for args, out in zip(runs, outs, strict=True)
    ]
    for process in processes:  # forked before the producer starts its threads
        process.start()
    server = threading.Thread(target=producer.serve)
    server.start()
    statuses = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(30)
    producer.stop()
    server.join(30)
    metrics = producer.metrics()
    producer.close()
    assert all(status == 0 for status in statuses.values()), statuses
    return [json.loads(open(out).read()) for out in outs], metrics


def test_two_learning_rates_train_from_one_loader(tmp_path, toy_workload):
    loader = workload_loader(toy_workload, seed=0)
    runs = [["--workload", toy_workload, "--lr", lr] for lr in ("0.1", "0.05")]
    records, metrics = serve_and_train(
        tmp_path, {"loader": loader, "epochs": None, "consumers": 2}, runs
    )
    for record in records:
        validate(record)
        assert record["reached"]
        assert record["consume"].startswith("unix:@")
        assert record["fresh_examples_to_target"] == 16 * record["steps_to_target"]
        assert record["timing"]["upstream_s_per_batch"] is None  # spent in the producer
    assert {r["hparams"]["lr"] for r in records} == {0.1, 0.05}
    steps = [r["final"]["steps"] for r in records]
    assert metrics["batches_produced"] <= max(steps) + 8  # read once, not once per run
    assert metrics["batches_served"] >= sum(steps)


def test_a_consumer_can_batch_echo_what_it_receives(tmp_path, toy_workload):
    runs = [
        ["--workload", toy_workload, "--echo-point", "after_batch", "--echo-factor", "2",
         "--hparam", "separation=0", "--max-fresh", "320"]
    ]  # fmt: skip
    (record,), _ = serve_and_train(
        tmp_path, {"loader": workload_loader(toy_workload), "epochs": None}, runs
    )
    fresh_batches = record["final"]["fresh_examples"] // 16
    assert fresh_batches == 20
    # Each batch is used twice; training stops as the last fresh batch arrives.
    assert 2 * fresh_batches - 1 <= record["final"]["steps"] <= 2 * fresh_batches


def test_a_stream_that_ends_before_the_target_is_a_result(tmp_path, toy_workload):
    runs = [["--workload", toy_workload, "--hparam", "separation=0", "--max-fresh", "100000"]]
    (record,), _ = serve_and_train(
        tmp_path, {"loader": workload_loader(toy_workload), "epochs": 1}, runs
    )
    assert not record["reached"]
    assert record["final"]["fresh_examples"] == 512  # one epoch of the toy's training set


@pytest.mark.parametrize("point", ["before_augment", "after_augment"])
def test_example_echo_points_are_refused_with_consume(tmp_path, toy_workload, capsys, point):
    args = ["--workload", toy_workload, "--echo-point", point, "--echo-factor", "2"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--consume", "unix:@nobody", "--out", str(tmp_path / "r.json")])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert "argument --echo-point" in message and "with consume" in message
