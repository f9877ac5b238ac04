"""sharing over Ray (endpoint ``ray:NAME``), against a real Ray cluster: several simulated
nodes (`ray.cluster_utils.Cluster`, each with its own raylet and object store), consumers in
Ray actors placed on them, no mocks."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

ray = pytest.importorskip("ray", reason="ray is not installed (the ray extra: pip install .[ray])")

from ray._private.internal_api import node_stats  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from sharing_checks import check_workers_gone, failing_dataloader  # noqa: E402

from sharing import Producer, ProducerGone, SharingError  # noqa: E402
from sharing.ray_backend import RayProducer, simulated_cluster  # noqa: E402

pytestmark = pytest.mark.slow

# Ray's workers cannot import this test module: its actors travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROWS = 4
"""Rows of each producer batch."""


def batches(count: int, width: int = 2) -> list[torch.Tensor]:
    """``count`` batches; batch i holds the value i."""
    return [torch.full((ROWS, width), float(i)) for i in range(count)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node (where the tests' producers run) and a node ``b`` for consumers."""
    head = {"num_cpus": 2, "object_store_memory": 100 << 20}
    node = {"num_cpus": 4, "resources": {"b": 100}, "object_store_memory": 80 << 20}
    with simulated_cluster(head, [node]) as made:
        yield made


@ray.remote(num_cpus=0)
class Reader:
    """One consumer, driven from the test a step at a time."""

    def __init__(self, endpoint: str, **kwargs: Any) -> None:
        from sharing import Consumer

        self.consumer = Consumer(endpoint, **kwargs)
        self.flat = self._flat()
        self.given: list[float] = []

    def _flat(self) -> Iterator[tuple[str, Any]]:
        for epoch in self.consumer.epochs():
            for batch in epoch:
                yield "batch", batch
            yield "end_epoch", None

    def mode(self) -> str:
        return self.consumer.mode

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def take(self, count: int, step_s: float = 0.0) -> list[tuple[float, float]]:
        """The first value and the arrival time of each of the next ``count`` batches."""
        got = []
        while len(got) < count:
            kind, batch = next(self.flat)
            if kind == "batch":
                got.append((float(batch[0, 0]), time.monotonic()))
                time.sleep(step_s)
        return got

    def ids(self, count: int) -> list[list[float]]:
        """The first column of each of the next ``count`` batches."""
        got: list[list[float]] = []
        while len(got) < count:
            kind, batch = next(self.flat)
            if kind == "batch":
                got.append(batch[:, 0].tolist())
        return got

    def rest(self) -> list[list[float]]:
        """Every remaining epoch's values, to the end of the stream (the epoch in progress
        first)."""
        epochs: list[list[float]] = [[]]
        for kind, batch in self.flat:
            if kind == "batch":
                epochs[-1].extend(batch[:, 0].tolist())
            else:
                epochs.append([])
        return [epoch for epoch in epochs if epoch]

    def poke(self, value: float) -> list[float]:
        """Write ``value`` into the next batch in place; return the batch's values after."""
        _, batch = next(self.flat)
        batch += value
        return batch[:, 0].tolist()

    def loop_again(self) -> str:
        """One more ``for`` loop over the consumer: the name of what it raised."""
        try:
            list(self.consumer)
        except Exception as error:
            return type(error).__name__
        return "nothing"

    def counts(self) -> dict[str, int]:
        c = self.consumer
        return {"fresh": c.fresh_examples, "echoed": c.echoed_examples, "epochs": c.epochs_done}

    def leave(self) -> None:
        self.consumer.leave()

    def state(self) -> dict[str, Any]:
        return self.consumer.state_dict()


@ray.remote(num_cpus=0)
def try_join(endpoint: str, **kwargs: Any) -> str:
    """Join and leave: "joined", or the error a consumer raised."""
    from sharing import Consumer

    try:
        Consumer(endpoint, **kwargs).leave()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "joined"


@ray.remote(num_cpus=0)
class Serving:
    """A producer in its own process (so its node can be lost)."""

    def __init__(self, endpoint: str, count: int, **kwargs: Any) -> None:
        self.producer = Producer(batches(count), endpoint=endpoint, **kwargs)
        threading.Thread(target=self.producer.serve, daemon=True).start()

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


class Served:
    """A producer serving in a thread of the test process, closed on exit."""

    def __init__(self, data: Any, **kwargs: Any) -> None:
        self.producer = Producer(data, **kwargs)
        self.thread = threading.Thread(target=self.producer.serve, daemon=True)
        self.thread.start()

    def __enter__(self) -> RayProducer:
        return self.producer  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        self.producer.stop()
        self.thread.join(timeout=20)
        self.producer.close()


def endpoint(name: str) -> str:
    return f"ray:test-{name}-{os.getpid()}-{time.monotonic_ns()}"


def on(resource: str) -> dict[str, Any]:
    return {"resources": {resource: 1}}


def until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def created_bytes(node: Any) -> int:
    """Bytes ever created in ``node``'s object store (puts, and copies pulled from others)."""
    stats = node_stats(node.node_ip_address, node.node_manager_port, include_memory_info=False)
    return stats.store_stats.cumulative_created_bytes


def test_a_ray_endpoint_makes_the_ray_backend_and_bad_ones_are_named(cluster: Cluster) -> None:
    with Served(batches(2), endpoint=endpoint("kind")) as producer:
        assert isinstance(producer, RayProducer) and isinstance(producer, Producer)
        with pytest.raises(OSError, match="another producer serves"):
            Producer(batches(2), endpoint=producer.endpoint)
    with pytest.raises(ValueError, match="ray:NAME"):
        Producer(batches(2), endpoint="ray:bad name")
    with pytest.raises(ValueError, match="max_bytes"):
        Producer(batches(2), endpoint=endpoint("x"), max_bytes=0)
    with pytest.raises(ValueError, match="one host"):
        Producer.from_dataset(list(range(4)), batch_size=2, endpoint=endpoint("x"))


def test_every_consumer_gets_every_batch_once_in_order_at_its_batch_size(
    cluster: Cluster,
) -> None:
    name = endpoint("order")
    with Served(batches(6), endpoint=name, epochs=2, consumers=2):
        whole = Reader.options(**on("b")).remote(name)
        recut = Reader.options(**on("b")).remote(name, batch_size=3)
        epochs_whole, epochs_recut = ray.get([whole.rest.remote(), recut.rest.remote()])
        counts = ray.get(recut.counts.remote())
    expected = [float(i) for i in range(6) for _ in range(ROWS)]
    assert epochs_whole == [expected, expected]
    assert epochs_recut == [expected, expected]
    assert counts == {"fresh": 2 * 6 * ROWS, "echoed": 0, "epochs": 2}


def test_a_batch_crosses_to_a_node_once_however_many_consumers_read_it(
    cluster: Cluster,
) -> None:
    name = endpoint("once")
    node_b = cluster.list_all_nodes()[1]
    data = batches(8, width=25_000)  # 400 kB each
    total = sum(batch.numel() * batch.element_size() for batch in data)
    before = created_bytes(node_b)
    with Served(data, endpoint=name, consumers=3):
        readers = [Reader.options(**on("b")).remote(name) for _ in range(3)]
        results = ray.get([reader.rest.remote() for reader in readers])
    assert all(len(result[0]) == 8 * ROWS for result in results)
    moved = created_bytes(node_b) - before
    assert total <= moved < 1.1 * total  # one copy, not three


def test_copy_gives_private_batches_and_other_consumers_see_the_original(
    cluster: Cluster,
) -> None:
    name = endpoint("copy")
    with Served(batches(3), endpoint=name, consumers=2):
        writer = Reader.options(**on("b")).remote(name, copy=True)
        other = Reader.options(**on("b")).remote(name)
        assert ray.get(writer.poke.remote(100.0)) == [100.0] * ROWS
        first = ray.get(other.take.remote(1))
        assert first[0][0] == 0.0
        ray.get([writer.rest.remote(), other.rest.remote()])


class Gated:
    """``count`` batches an epoch, each given once the test releases ``gate``."""

    def __init__(self, count: int, gate: threading.Semaphore) -> None:
        self.count, self.gate = count, gate

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[torch.Tensor]:
        for batch in batches(self.count):
            self.gate.acquire()
            yield batch


def test_late_joiners_replay_wait_for_the_next_epoch_or_wrap(cluster: Cluster) -> None:
    name = endpoint("late")
    gate = threading.Semaphore(0)
    with Served(Gated(6, gate), endpoint=name, epochs=2, max_lag=10, replay_batches=2) as producer:
        first = Reader.options(**on("b")).remote(name)
        assert ray.get(first.mode.remote()) == "start"
        gate.release()
        until(lambda: producer.metrics()["batches_produced"] == 1)
        replay = Reader.options(**on("b")).remote(name, late_join="replay")
        assert ray.get(replay.mode.remote()) == "replay"  # batch 1 of 6, within the window
        for _ in range(4):
            gate.release()
        until(lambda: producer.metrics()["batches_produced"] == 5)
        waits = Reader.options(**on("b")).remote(name, late_join="next_epoch")
        wraps = Reader.options(**on("b")).remote(name)  # auto, past the window: wrap
        assert ray.get([waits.mode.remote(), wraps.mode.remote()]) == ["next_epoch", "wrap"]
        for _ in range(100):
            gate.release()
        results = ray.get([r.rest.remote() for r in (first, replay, waits, wraps)])
        metrics = producer.metrics()
    epoch = [float(i) for i in range(6) for _ in range(ROWS)]
    assert results[:3] == [[epoch, epoch], [epoch, epoch], [epoch]]
    start = 5  # the wrapped consumer joined at batch 5 of epoch 0
    wrapped = [float((start + i) % 6) for i in range(6) for _ in range(ROWS)]
    assert results[3] == [wrapped, wrapped]
    assert metrics["batches_for_late_joiners"] == start


def test_streams_end_loudly_after_the_last_epoch_and_when_stopped(cluster: Cluster) -> None:
    name = endpoint("end")
    with Served(batches(2), endpoint=name):
        done = Reader.options(**on("b")).remote(name)
        assert len(ray.get(done.rest.remote())) == 1
        assert ray.get(done.loop_again.remote()) == "StreamEnded"
    name = endpoint("stop")
    gate = threading.Semaphore(2)
    with Served(Gated(6, gate), endpoint=name) as producer:
        cut = Reader.options(**on("b")).remote(name)
        ray.get(cut.take.remote(2))
        producer.stop()
        with pytest.raises(SharingError, match="was stopped after 2 batches"):
            ray.get(cut.take.remote(1))


def test_a_failing_dataloaders_workers_are_gone_when_serve_raises(cluster: Cluster) -> None:
    """As on one host: the error may be held long after serve() raises; the DataLoader's
    worker processes must not live as long."""
    loader, worker_pids = failing_dataloader()
    name = endpoint("fails")
    producer = Producer(loader, endpoint=name, epochs=1)
    try:
        reader = Reader.options(**on("b")).remote(name)
        read = reader.rest.remote()  # reads the batches as they come
        with pytest.raises(OSError, match="corrupt sample 40") as raised:
            producer.serve()
        check_workers_gone(worker_pids(), raised.value)
        with pytest.raises(ray.exceptions.RayTaskError, match="corrupt sample 40"):
            ray.get(read)
    finally:
        producer.close()


def test_max_lag_bounds_a_consumer_that_never_reads(cluster: Cluster) -> None:
    name = endpoint("lag")
    with Served(batches(50), endpoint=name, max_lag=3) as producer:
        idle = Reader.options(**on("b")).remote(name)
        ray.get(idle.mode.remote())
        time.sleep(1.5)
        assert producer.metrics()["batches_produced"] == 3
        assert producer.metrics()["lag"] == {0: 3}
        ray.get(idle.leave.remote())


def test_a_nearly_full_object_store_means_backpressure_not_spilling(cluster: Cluster) -> None:
    name = endpoint("bytes")
    data = batches(40, width=250_000)  # 4 MB each
    nbytes = data[0].numel() * data[0].element_size()
    head = cluster.list_all_nodes()[0]
    spilled = node_stats(head.node_ip_address, head.node_manager_port).store_stats
    with Served(data, endpoint=name, max_lag=1000, max_bytes=int(2.5 * nbytes)) as producer:
        idle = Reader.options(**on("b")).remote(name)
        ray.get(idle.mode.remote())
        time.sleep(1.5)
        metrics = producer.metrics()
        assert metrics["batches_produced"] == 2
        assert metrics["bytes_held"] <= 2.5 * nbytes
        assert len(ray.get(idle.rest.remote())[0]) == 40 * ROWS  # and it all arrives
    after = node_stats(head.node_ip_address, head.node_manager_port).store_stats
    assert after.spilled_bytes_total == spilled.spilled_bytes_total


def test_a_consumer_that_leaves_or_dies_costs_the_others_nothing(cluster: Cluster) -> None:
    name = endpoint("leave")
    with Served(batches(12), endpoint=name, consumers=3, max_lag=2) as producer:
        stays, leaves, dies = (Reader.options(**on("b")).remote(name) for _ in range(3))
        ray.get([reader.take.remote(2) for reader in (stays, leaves, dies)])
        ray.get(leaves.leave.remote())
        ray.kill(dies)
        started = time.monotonic()
        rest = ray.get(stays.rest.remote())
        metrics = producer.metrics()
    assert rest == [[float(i) for i in range(2, 12) for _ in range(ROWS)]]
    assert metrics["consumers_left"] == 1 and metrics["consumers_lost"] == 1
    assert time.monotonic() - started < 10


def test_echo_on_stall_trains_a_fast_consumer_with_exact_fresh_counts(cluster: Cluster) -> None:
    def slow(count: int) -> Iterator[torch.Tensor]:
        for batch in batches(count):
            time.sleep(0.1)
            yield batch

    class Slow:
        def __iter__(self) -> Iterator[torch.Tensor]:
            return slow(8)

    name = endpoint("echo")
    with Served(Slow(), endpoint=name):
        fast = Reader.options(**on("b")).remote(name, echo_on_stall=4)
        given = ray.get(fast.take.remote(16, 0.005))
        counts = ray.get(fast.counts.remote())
        ray.get(fast.rest.remote())
        final = ray.get(fast.counts.remote())
    values = [value for value, _ in given]
    assert values[0] == 0.0 and values == sorted(values)  # echoes repeat the latest only
    assert counts["echoed"] > 0
    assert counts["fresh"] + counts["echoed"] == 16 * ROWS
    assert final["fresh"] == 8 * ROWS  # every fresh batch once, however many echoes


def test_a_consumer_node_lost_mid_epoch_stalls_the_others_about_a_lease(
    cluster: Cluster,
) -> None:
    doomed = cluster.add_node(num_cpus=1, resources={"c": 10}, object_store_memory=80 << 20)
    name = endpoint("node")
    with Served(batches(20), endpoint=name, consumers=2, max_lag=2) as producer:
        stays = Reader.options(**on("b")).remote(name)
        lost = Reader.options(**on("c")).remote(name)
        ray.get([stays.take.remote(3), lost.take.remote(3)])
        cluster.remove_node(doomed, allow_graceful=False)
        given = ray.get(stays.take.remote(17))
        metrics = producer.metrics()
    assert [value for value, _ in given] == [float(i) for i in range(3, 20)]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(given)]
    assert max(gaps) < 2.5, gaps  # the lease (1 s) and its check, room for a loaded machine
    assert metrics["consumers_lost"] == 1, metrics


def test_consumers_raise_producer_gone_within_5_s_of_the_producers_node(
    cluster: Cluster,
) -> None:
    doomed = cluster.add_node(num_cpus=1, resources={"p": 10}, object_store_memory=80 << 20)
    name = endpoint("gone")
    serving = Serving.options(**on("p")).remote(name, 100, max_lag=2)
    ray.get(serving.node.remote())  # serving (a new node's first worker takes a while)
    reader = Reader.options(**on("b")).remote(name)
    ray.get(reader.take.remote(2))
    cluster.remove_node(doomed, allow_graceful=False)
    started = time.monotonic()
    with pytest.raises(ProducerGone):
        ray.get(reader.take.remote(100))
    assert time.monotonic() - started < 5
    del serving


def test_a_killed_consumer_restarted_from_its_state_resumes_from_the_replay_window(
    cluster: Cluster,
) -> None:
    name = endpoint("resume")
    gate = threading.Semaphore(0)
    with Served(Gated(6, gate), endpoint=name, epochs=2, max_lag=10, replay_batches=6):
        first = Reader.options(**on("b")).remote(name)
        for _ in range(4):
            gate.release()
        ray.get(first.take.remote(3))  # it trains on batches 0-2, then saves its checkpoint
        state = ray.get(first.state.remote())
        ray.get(first.take.remote(1))  # and trains on batch 3, then it is killed
        ray.kill(first)
        again = Reader.options(**on("b")).remote(name, state=state)
        assert ray.get(again.mode.remote()) == "resume"
        for _ in range(100):
            gate.release()
        rest = ray.get(again.rest.remote())
    epoch = [float(i) for i in range(6) for _ in range(ROWS)]
    assert state["epoch"] == 0 and state["examples"] == 3 * ROWS
    assert rest == [epoch[3 * ROWS :], epoch]  # batch 3 again, as it was not checkpointed


class Ids(torch.utils.data.Dataset):
    """Sample i is (i, i): a batch's first column names its samples."""

    def __len__(self) -> int:
        return 96

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((2,), float(index))


def seeded_loader(shuffle_seed: int | None = 5) -> torch.utils.data.DataLoader:
    """12 batches of 8 an epoch, shuffled by a seeded sampler (None: an unseeded shuffle)."""
    if shuffle_seed is None:
        return torch.utils.data.DataLoader(Ids(), batch_size=8, shuffle=True)
    sampler = torch.utils.data.DistributedSampler(Ids(), 1, 0, shuffle=True, seed=shuffle_seed)
    return torch.utils.data.DataLoader(Ids(), batch_size=8, sampler=sampler)


@pytest.mark.parametrize(
    ("die_after", "k"), [(14, 5), (30, 3)], ids=["outside-the-window", "last-epoch"]
)
def test_a_killed_consumer_restarted_past_the_replay_window_gets_its_batches_loaded_again(
    cluster: Cluster, die_after: int, k: int
) -> None:
    """Killed after ``die_after`` batches, restarted from the state saved ``k`` before: across
    both lives it trains on exactly what an uninterrupted consumer does, each batch once."""
    name = endpoint("resume-again")
    with Served(
        seeded_loader(), endpoint=name, epochs=3, max_lag=4, replay_batches=2, consumers=2
    ) as producer:
        first, other = (Reader.options(**on("b")).remote(name) for _ in range(2))
        along = other.ids.remote(die_after + 2)  # reads along, then past the kill
        before = ray.get(first.ids.remote(die_after - k))
        state = ray.get(first.state.remote())
        ray.get(first.ids.remote(k))  # trained on, never checkpointed
        ray.kill(first)
        ray.get(along)  # the producer is past the window
        again = Reader.options(**on("b")).remote(name, state=state)
        assert ray.get(again.mode.remote()) == "resume"
        rest, reference = ray.get([again.rest.remote(), other.rest.remote()])
        metrics = producer.metrics()
    loader = seeded_loader()
    uninterrupted = []
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        uninterrupted.extend(batch[:, 0].tolist() for batch in loader)
    flat = lambda lists: list(itertools.chain.from_iterable(lists))  # noqa: E731
    assert flat(reference) == flat(uninterrupted[die_after + 2 :])  # the others go on
    assert flat(before) + flat(rest) == flat(uninterrupted)  # each sample once, in order
    assert metrics["batches_loaded_again"] > 0


def test_a_restart_past_the_window_of_an_unseeded_shuffle_is_refused_saying_why(
    cluster: Cluster,
) -> None:
    name = endpoint("resume-gone")
    with Served(seeded_loader(None), endpoint=name, max_lag=4, replay_batches=1) as producer:
        first = Reader.options(**on("b")).remote(name)
        ray.get(first.ids.remote(1))
        state = ray.get(first.state.remote())
        ray.get(first.ids.remote(4))
        until(lambda: producer.metrics()["batches_produced"] >= 5)
        outcome = ray.get(try_join.options(**on("b")).remote(name, state=state))
        ray.get(first.leave.remote())
    assert outcome.startswith("LateJoinError") and "no longer held for replay" in outcome
    assert "shuffles without a seed" in outcome
