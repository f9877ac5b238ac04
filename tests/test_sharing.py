"""`sharing`: a producer and real consumer processes over a local socket and shared memory."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time

import pytest
import sharing_checks as checks
import torch
from sharing_checks import FORK, collect, consume, id_batches, start

from echo.torch import Echo
from sharing import Consumer, LateJoinError, Producer, ProducerGone, StreamEnded

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def no_leftovers():
    with checks.no_leftovers():
        yield


@pytest.mark.parametrize("consumers", [1, 2, 3, 4])
def test_every_consumer_gets_every_batch_once_in_order_with_the_tail(consumers, no_leftovers):
    results = FORK.Queue()
    with Producer(id_batches(203, 16), epochs=2, consumers=consumers) as producer:
        procs = [start(consume, producer.endpoint, results, 2, None, i) for i in range(consumers)]
        producer.serve()
        metrics = producer.metrics()
        reports = collect(results, consumers)
    for process in procs:
        process.join(10)
    for _, mode, epochs, _ in reports:
        assert mode == "start"
        assert [ids == list(range(203)) for ids in epochs] == [True, True]
    assert metrics["batches_produced"] == 2 * 13
    assert metrics["batches_served"] == consumers * 2 * 13


def test_mixed_batch_sizes_slice_and_concatenate(no_leftovers):
    results = FORK.Queue()
    sizes = {"half": 8, "same": 16, "double": 32, "quarter": 4}
    with Producer(id_batches(100, 16), epochs=1, consumers=len(sizes)) as producer:
        for name, size in sizes.items():
            start(consume, producer.endpoint, results, 1, size, name)
        producer.serve()
        reports = collect(results, len(sizes))
    for _, _, epochs, _ in reports:
        assert epochs == [list(range(100))]


def _report_cuts(endpoint, results, size):
    """Report (size, [(ids, is a view of the producer's memory) per batch])."""
    consumer = Consumer(endpoint, batch_size=size)
    cuts = [(b["id"].tolist(), b["id"]._base is not None) for b in consumer]
    results.put((size, cuts))
    consumer.leave()


def test_any_batch_size_is_recut_across_producer_batches_copying_only_what_spans_two():
    results = FORK.Queue()
    sizes = (6, 20, 7, 8)  # the producer's is 16, with a tail of 4
    with Producer(id_batches(100, 16), epochs=1, consumers=len(sizes)) as producer:
        for size in sizes:
            start(_report_cuts, producer.endpoint, results, size)
        producer.serve()
        reports = dict(collect(results, len(sizes)))
    for size, cuts in reports.items():
        assert [i for ids, _ in cuts for i in ids] == list(range(100))
        assert [len(ids) for ids, _ in cuts] == [size] * (100 // size) + [100 % size] * (
            100 % size > 0
        )
        for ids, is_view in cuts:
            inside_one = ids[0] // 16 == ids[-1] // 16
            assert is_view == inside_one, (size, ids)
    assert all(is_view for _, is_view in reports[8])  # a divisor: zero-copy throughout


@pytest.mark.parametrize(("replay_batches", "mode"), [(None, "replay"), (0, "wrap")])
def test_late_joiner_starts_at_once_and_sees_each_sample_once(replay_batches, mode, no_leftovers):
    results = FORK.Queue()
    source = id_batches(320, 16, delay_s=0.02)  # 20 batches, about 0.4 s an epoch
    with Producer(source, epochs=2, replay_batches=replay_batches) as producer:
        start(consume, producer.endpoint, results, 2, None, "early")
        start(_join_late, producer.endpoint, results, 0.15)
        producer.serve()
        reports = dict((r[0], r) for r in collect(results, 2))
    assert reports["early"][2] == [list(range(320))] * 2
    _, late_mode, late_epochs, _ = reports["late"]
    assert late_mode == mode
    first = late_epochs[0]
    assert sorted(first) == list(range(320))  # each sample exactly once in its first epoch
    if mode == "replay":
        assert first == list(range(320))  # and in the producer's order


def _join_late(endpoint, results, after_s):
    time.sleep(after_s)
    consume(endpoint, results, 1, None, "late")


def test_replay_only_join_is_refused_clearly_when_batches_are_gone():
    source = id_batches(320, 16, delay_s=0.02)
    with Producer(source, epochs=1, replay_batches=0) as producer:
        start(consume, producer.endpoint, FORK.Queue(), 1, None, "early")
        outcome = FORK.Queue()
        start(_join_replay_only, producer.endpoint, outcome)
        producer.serve()
        assert outcome.get(timeout=10) == "LateJoinError"


def _join_replay_only(endpoint, outcome):
    time.sleep(0.15)
    try:
        Consumer(endpoint, late_join="replay")
        outcome.put("joined")
    except LateJoinError as error:
        outcome.put("LateJoinError" if "replay" in str(error) else str(error))


def _epochs_until_the_end(endpoint, results):
    consumer = Consumer(endpoint)
    epochs = [[i for batch in epoch for i in batch["id"].tolist()] for epoch in consumer.epochs()]
    try:
        next(iter(consumer))
        after = "a batch"
    except StreamEnded as error:
        after = str(error)
    results.put((epochs, consumer.epochs_done, after))


def test_finish_serves_the_epoch_in_progress_whole_then_ends_the_stream(no_leftovers):
    results = FORK.Queue()
    with Producer(id_batches(160, 16, delay_s=0.01), epochs=None) as producer:
        start(_epochs_until_the_end, producer.endpoint, results)
        threading.Timer(0.25, producer.finish).start()  # in the second or third epoch
        producer.serve()
        epochs, done, after = results.get(timeout=30)
    assert len(epochs) >= 2 and epochs == [list(range(160))] * done
    # a loop after the last epoch raises, naming what was served: never an empty epoch
    assert "finished its stream" in after and f"{done} whole epochs" in after, after


def _timeline(endpoint, results, name, per_batch_s):
    stamps = []
    for _ in Consumer(endpoint):
        stamps.append(time.monotonic())
        time.sleep(per_batch_s)
    results.put((name, stamps))


def test_producer_runs_at_most_max_lag_batches_ahead_of_the_slowest_consumer():
    results = FORK.Queue()
    with Producer(id_batches(30 * 16, 16), epochs=1, consumers=2, max_lag=2) as producer:
        start(_timeline, producer.endpoint, results, "fast", 0.0)
        start(_timeline, producer.endpoint, results, "slow", 0.03)
        producer.serve()
        timelines = dict(results.get(timeout=30) for _ in range(2))
    fast, slow = timelines["fast"], timelines["slow"]
    assert len(fast) == len(slow) == 30
    # The fast consumer gets batch i only once the slow one has taken batch i - max_lag.
    assert all(fast[i] >= slow[i - 2] for i in range(2, 30))
    assert fast[-1] - fast[0] > 0.5  # so it was indeed held back (30 x 30 ms for the slow)


def _leave_after(endpoint, batches, how):
    consumer = Consumer(endpoint)
    for i, _ in enumerate(consumer):
        if i + 1 == batches:
            break
    if how == "leave":
        consumer.leave()
        time.sleep(5)  # stays alive: the producer must not wait for it
    else:
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("how", ["leave", "sigkill"])
def test_a_consumer_leaving_or_killed_never_stalls_the_others(how, no_leftovers):
    results = FORK.Queue()
    source = id_batches(640, 16, delay_s=0.01)
    with Producer(source, epochs=1, consumers=2, max_lag=2) as producer:
        start(consume, producer.endpoint, results, 1, None, "stays")
        start(_leave_after, producer.endpoint, 5, how)
        producer.serve()
        (_, _, epochs, gaps) = results.get(timeout=30)
        metrics = producer.metrics()
    assert epochs == [list(range(640))]
    assert max(gaps) < 1.0
    if how == "leave":  # "stays" may leave too before the producer has finished
        assert metrics["consumers_lost"] == 0 and metrics["consumers_left"] >= 1
    else:
        assert metrics["consumers_lost"] == 1


class _SlowIds(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        time.sleep(0.003)
        return {"id": torch.tensor(index), "x": torch.full((3,), float(index))}


def _produce(endpoint_queue, n_samples, delay_s):
    producer = Producer(id_batches(n_samples, 16, delay_s=delay_s), epochs=1)
    endpoint_queue.put(producer.endpoint)
    producer.serve()
    producer.close()


def _produce_with_workers(endpoint_queue):
    loader = torch.utils.data.DataLoader(_SlowIds(), batch_size=16, num_workers=2)
    producer = Producer(loader, epochs=1)
    endpoint_queue.put(producer.endpoint)
    producer.serve()


@pytest.mark.parametrize("workers", [False, True])
def test_killed_producer_makes_consumers_raise_within_five_seconds(workers, no_leftovers):
    """With loader workers, which outlive the producer a while and hold copies of its
    sockets, the consumer must still notice."""
    endpoints = FORK.Queue()
    if workers:
        process = start(_produce_with_workers, endpoints, daemon=False)  # it has children
    else:
        process = start(_produce, endpoints, 10_000, 0.05)
    consumer = Consumer(endpoints.get(timeout=10))
    received = 0
    with pytest.raises(ProducerGone, match="producer"):
        for _ in consumer:
            received += 1
            if received == 3:
                killed_at = time.monotonic()
                os.kill(process.pid, signal.SIGKILL)
    assert time.monotonic() - killed_at < 5.0
    process.join(5)


def test_sigterm_ends_serving_and_removes_the_socket_file(tmp_path):
    path = tmp_path / "producer.sock"
    endpoints = FORK.Queue()
    process = start(_produce_at, f"unix:{path}", endpoints)
    endpoints.get(timeout=10)
    consumer = Consumer(f"unix:{path}")
    iterator = iter(consumer)
    next(iterator)
    assert path.exists() and (path.stat().st_mode & 0o077) == 0  # owner-only
    os.kill(process.pid, signal.SIGTERM)
    process.join(10)
    assert process.exitcode == 0
    assert not path.exists()
    consumer.leave()


def _produce_at(endpoint, endpoints):
    with Producer(id_batches(100_000, 16, delay_s=0.01), endpoint=endpoint, epochs=1) as producer:
        endpoints.put(producer.endpoint)
        producer.serve()


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\n\r\n",
        b"not json!",
        b"x" * 70_000,
        b'{"type":"pickle","data":"x"}',
        b'{"type":"leave"}',
        b'{"type":"hello","version":1,"batch_size":0,"late_join":"auto","pid":1}',
        b'{"type":"hello","version":1,"batch_size":null,"late_join":"auto"}',
        b'{"type":"release","seq":123456}',
    ],
)
def test_malformed_or_foreign_messages_are_rejected_and_serving_goes_on(garbage):
    results = FORK.Queue()
    with Producer(id_batches(160, 16, delay_s=0.01), epochs=1) as producer:
        start(consume, producer.endpoint, results, 1, None, "honest")
        start(_send_garbage, producer.endpoint, garbage)
        producer.serve()
        (_, _, epochs, _) = results.get(timeout=30)
    assert epochs == [list(range(160))]


def _send_garbage(endpoint, garbage):
    time.sleep(0.05)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(b"\0" + endpoint.removeprefix("unix:@").encode())
    with contextlib.suppress(OSError):
        sock.send(garbage)
    time.sleep(1)
    sock.close()


def test_consumer_output_composes_with_batch_echo():
    results = FORK.Queue()
    with Producer(id_batches(64, 16), epochs=1) as producer:
        start(_echo_consumer, producer.endpoint, results)
        producer.serve()
        ids, fresh, emitted = results.get(timeout=30)
    assert sorted(ids) == sorted(list(range(64)) * 2)
    assert (fresh, emitted) == (4, 8)


def _echo_consumer(endpoint, results):
    consumer = Consumer(endpoint)
    stage = Echo(consumer, 2)
    ids = [i for batch in stage for i in batch["id"].tolist()]
    results.put((ids, stage.fresh, stage.emitted))


def test_in_place_changes_stay_private_to_the_consumer_that_makes_them():
    results = FORK.Queue()
    with Producer(id_batches(64, 16), epochs=1, consumers=2) as producer:
        start(_modify_in_place, producer.endpoint)
        start(consume, producer.endpoint, results, 1, None, "reader")
        producer.serve()
        (_, _, epochs, _) = results.get(timeout=30)
    assert epochs == [list(range(64))]  # consume() checks x against id for every batch


def _modify_in_place(endpoint):
    for batch in Consumer(endpoint):
        batch["x"].add_(1000.0)
        batch["id"].zero_()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epochs": 0}, "epochs"),
        ({"max_lag": 0}, "max_lag"),
        ({"replay_batches": -1}, "replay_batches"),
        ({"consumers": 0}, "consumers"),
        ({"endpoint": "tcp://0.0.0.0:5555"}, "endpoint"),
        ({"endpoint": "unix:relative.sock"}, "endpoint"),
    ],
)
def test_bad_producer_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Producer([], **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"batch_size": 0}, "batch_size"), ({"late_join": "later"}, "late_join")],
)
def test_bad_consumer_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Consumer("unix:@nobody-listens-here", **kwargs)


def test_no_producer_is_a_connection_error():
    with pytest.raises(ConnectionError, match="no producer"):
        Consumer("unix:@nobody-listens-here", connect_timeout_s=0.2)


def make_loader(samples: int = 48, batch_size: int = 16):
    """A loader factory for the command-line test."""
    return id_batches(samples, batch_size)


@pytest.mark.slow
def test_command_line_serves_a_loader_factory():
    import subprocess
    import sys

    command = [
        sys.executable, "-m", "sharing", "serve", "--loader", "test_sharing:make_loader",
        "--loader-kwargs", '{"samples": 40}', "--log-level", "WARNING",
    ]  # fmt: skip
    path = [os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        endpoint = process.stdout.readline().strip()
        consumer = Consumer(endpoint)
        ids = [i for batch in consumer for i in batch["id"].tolist()]
        assert ids == list(range(40))
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()


@pytest.mark.slow
def test_command_line_rejects_a_bad_loader_with_a_one_line_error():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "sharing", "serve", "--loader", "no_colon_here"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--loader must look like" in result.stderr
