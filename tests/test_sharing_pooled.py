"""`Producer.from_dataset`: a dataset collated straight into recycled shared-memory segments
that consumers keep mapped, with the guarantees of `Producer(DataLoader(...))`."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import torch
from sharing_checks import FORK, collect, consume, no_leftovers, start
from torch.utils.data import default_collate

from sharing import Consumer, Producer, SharingError
from sharing.collate import collate_into
from sharing.layout import rebuild

pytestmark = pytest.mark.timeout(120)


class Numbered:
    """Sample i: {"id": i, "x": [i, i, i]} (float32); sample ``fail_at`` raises, or kills
    the worker reading it."""

    def __init__(self, n: int, fail_at: int | None = None, kill: bool = False) -> None:
        self.n, self.fail_at, self.kill = n, fail_at, kill

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict:
        if index == self.fail_at:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise KeyError(f"no sample {index}")
        return {"id": torch.tensor(index), "x": torch.full((3,), float(index))}


@pytest.mark.parametrize("workers", [0, 2])
def test_every_consumer_gets_every_epoch_whole_at_any_batch_size(workers):
    results = FORK.Queue()
    with no_leftovers():
        producer = Producer.from_dataset(
            Numbered(100), batch_size=16, num_workers=workers, epochs=2, consumers=3
        )
        with producer:
            for name, size in (("a", None), ("b", 5), ("c", 16)):
                start(consume, producer.endpoint, results, 2, size, name)
            producer.serve()
            outcomes = collect(results, 3)
            pids = [worker.process.pid for worker in producer._pooled._workers]
    for _, mode, epochs, _ in outcomes:
        assert mode == "start" and epochs == [list(range(100))] * 2
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)  # workers stopped


def _keep_then_check(endpoint, results):
    consumer = Consumer(endpoint)
    kept = [batch for batch in consumer]  # every batch of epoch 0 kept alive
    later = [batch["id"].tolist() for batch in consumer]  # epoch 1 meanwhile
    intact = all(torch.equal(b["x"][:, 0].long(), b["id"]) for b in kept)
    results.put(([i for b in kept for i in b["id"].tolist()], intact, later))


def test_batches_a_consumer_keeps_are_never_overwritten_by_later_ones():
    results = FORK.Queue()
    with Producer.from_dataset(Numbered(80), batch_size=8, epochs=2, replay_batches=0) as p:
        start(_keep_then_check, p.endpoint, results)
        p.serve()
        first, intact, later = results.get(timeout=30)
        segments = p.metrics()["segments"]
    assert first == list(range(80)) and intact
    assert [i for ids in later for i in ids] == list(range(80))
    assert segments >= 10  # the pool grew to hold what the consumer kept


def _scribble(endpoint, results, write):
    consumer = Consumer(endpoint)
    problems = 0
    for _ in range(6):
        for batch in consumer:
            problems += not torch.equal(batch["x"][:, 0].long(), batch["id"])
            if write:
                batch["x"].mul_(-1)  # copy-on-write: this consumer's pages only
    results.put((write, problems))


def test_an_in_place_change_stays_private_and_never_reaches_a_later_batch():
    results = FORK.Queue()
    with Producer.from_dataset(
        Numbered(64), batch_size=8, epochs=6, replay_batches=0, max_lag=2, consumers=2
    ) as producer:
        start(_scribble, producer.endpoint, results, True)
        start(_scribble, producer.endpoint, results, False)
        producer.serve()
        outcomes = dict(results.get(timeout=30) for _ in range(2))
        segments = producer.metrics()["segments"]
    assert outcomes == {True: 0, False: 0}
    assert segments < 48  # recycled: far fewer segments than the 48 batches served


def test_segments_stay_few_over_many_epochs():
    results = FORK.Queue()
    with Producer.from_dataset(
        Numbered(80), batch_size=8, num_workers=2, epochs=20, replay_batches=0, max_lag=2
    ) as producer:
        start(consume, producer.endpoint, results, 20, None, "long")
        producer.serve()
        (_, _, epochs, _) = results.get(timeout=60)
        metrics = producer.metrics()
    assert epochs == [list(range(80))] * 20
    # 200 batches from a handful of segments: in flight (2 per worker), queued, lagging
    assert metrics["batches_produced"] == 200 and metrics["segments"] <= 12, metrics


def _iterate_reporting(endpoint, outcome):
    try:
        received = sum(1 for _ in Consumer(endpoint))
        outcome.put(f"ended quietly after {received}")
    except SharingError as error:
        outcome.put(f"SharingError: {error}")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_sample_that_raises_fails_serve_with_its_type_and_reaches_the_consumer(workers):
    outcome = FORK.Queue()
    dataset = Numbered(200, fail_at=37)
    with Producer.from_dataset(dataset, batch_size=8, num_workers=workers) as producer:
        start(_iterate_reporting, producer.endpoint, outcome)
        with pytest.raises(KeyError, match="no sample 37"):
            producer.serve()
        what = outcome.get(timeout=30)
    assert what.startswith("SharingError") and "no sample 37" in what, what


def test_a_killed_worker_fails_serving_clearly():
    outcome = FORK.Queue()
    dataset = Numbered(200, fail_at=37, kill=True)
    with Producer.from_dataset(dataset, batch_size=8, num_workers=2) as producer:
        start(_iterate_reporting, producer.endpoint, outcome)
        with pytest.raises(RuntimeError, match=r"pool worker \d \(pid \d+\) exited .*signal 9"):
            producer.serve()
        assert outcome.get(timeout=30).startswith("SharingError")


def _epoch_orders(producer, epochs):
    orders = []
    thread = threading.Thread(target=producer.serve)
    thread.start()
    consumer = Consumer(producer.endpoint)
    for _ in range(epochs):
        orders.append([i for batch in consumer for i in batch["id"].tolist()])
    consumer.leave()
    thread.join(30)
    producer.close()
    return orders


def test_shuffle_draws_each_epochs_permutation_from_the_seed():
    def make(seed):
        dataset = Numbered(50)
        return Producer.from_dataset(dataset, batch_size=8, shuffle=True, seed=seed, epochs=2)

    first, again, other = (
        _epoch_orders(make(3), 2),
        _epoch_orders(make(3), 2),
        _epoch_orders(make(4), 2),
    )
    assert all(sorted(order) == list(range(50)) for order in first)
    assert first[0] != first[1] and first == again and first != other


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"dataset": iter(range(3)), "batch_size": 2}, "map-style"),
        ({"dataset": Numbered(4), "batch_size": 0}, "batch_size"),
        ({"dataset": Numbered(4), "batch_size": 2, "shuffle": True, "sampler": [0]}, "not both"),
        ({"dataset": Numbered(4), "batch_size": 2, "num_workers": -1}, "num_workers"),
        ({"dataset": Numbered(4), "batch_size": 2, "device": "cuda"}, "CPU memory"),
        ({"dataset": Numbered(4), "batch_size": 2, "max_lag": 0}, "max_lag"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, words):
    dataset = kwargs.pop("dataset")
    with pytest.raises(ValueError, match=words):
        Producer.from_dataset(dataset, **kwargs)


SAMPLES = {
    "tensor-and-int": [(torch.full((2, 3), float(i)), i) for i in range(4)],
    "dict-of-everything": [
        {"f": 0.5 * i, "b": i % 2 == 0, "s": f"s{i}", "a": np.arange(3, dtype=np.int16) + i}
        for i in range(4)
    ],
    "nested-lists": [[torch.arange(i, i + 2), [float(i), torch.tensor(i)]] for i in range(3)],
    "bfloat16-and-empty": [(torch.ones(2, dtype=torch.bfloat16), torch.empty(0)) for _ in range(3)],
}


def _same(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
        assert torch.equal(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    else:
        assert got == want


@pytest.mark.parametrize("samples", SAMPLES.values(), ids=SAMPLES.keys())
def test_stacking_into_a_segment_gives_what_default_collate_gives(samples):
    buffer = bytearray(1 << 16)
    layout, used = collate_into(samples, None, lambda size: buffer)
    assert 0 <= used <= len(buffer)
    _same(rebuild(layout, [memoryview(buffer)]), default_collate(samples))


def test_a_collate_fn_batch_is_copied_into_the_segment():
    def collate(samples):
        return {"sum": torch.stack([s[0] for s in samples]).sum(0), "n": len(samples)}

    samples = SAMPLES["tensor-and-int"]
    buffer = bytearray(1 << 12)
    layout, _ = collate_into(samples, collate, lambda size: buffer)
    _same(rebuild(layout, [memoryview(buffer)]), collate(samples))


def test_samples_that_cannot_be_stacked_are_named():
    with pytest.raises(TypeError, match=r"cannot stack the samples\[0\].*shape \[2\]"):
        collate_into([(torch.ones(2),), (torch.ones(3),)], None, bytearray)
    with pytest.raises(TypeError, match="cannot collate the samples of type object"):
        collate_into([object(), object()], None, bytearray)
