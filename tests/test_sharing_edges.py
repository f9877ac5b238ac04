"""`sharing` edge cases: a slow first batch, a late join in the last epoch, a stale socket
file, and leaving counted as leaving."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
import torch
from sharing_checks import (
    FORK,
    Signalling,
    check_workers_gone,
    consume,
    failing_dataloader,
    id_batches,
    no_leftovers,
    start,
)

from sharing import Consumer, LateJoinError, Producer, SharingError, StreamEnded, protocol
from sharing.endpoint import default_endpoint, listen
from sharing.layout import describe

pytestmark = pytest.mark.timeout(90)


def _connect_timed(endpoint, outcome, timeout_s):
    began = time.monotonic()
    try:
        Consumer(endpoint, timeout_s=timeout_s)
        outcome.put(("welcomed", time.monotonic() - began))
    except TimeoutError as error:
        outcome.put((f"TimeoutError: {error}", time.monotonic() - began))


@pytest.mark.slow
def test_the_wait_for_the_welcome_honours_timeout_s():
    """The welcome comes with the producer's first batch; a consumer waits for it as long as
    its ``timeout_s`` says (None: as long as the producer lives), not a fixed 30 s."""
    outcome, results = FORK.Queue(), FORK.Queue()
    with no_leftovers(), Producer(id_batches(64, 16, first_delay_s=4.0), epochs=1) as producer:
        start(_connect_timed, producer.endpoint, outcome, 0.5)
        start(consume, producer.endpoint, results, 1, None, "patient", timeout_s=None)
        producer.serve()
        what, waited = outcome.get(timeout=30)
        (_, _, epochs, _) = results.get(timeout=30)
    assert what.startswith("TimeoutError") and "0.5" in what
    assert waited < 3.5  # well before the first batch (4 s)
    assert epochs == [list(range(64))]


def _join_late(endpoint, outcome, late_join, served):
    served.wait(30)  # the producer has handed on a few batches: this join is late
    try:
        consumer = Consumer(endpoint, late_join=late_join)
        ids = [i for batch in consumer for i in batch["id"].tolist()]
        outcome.put((late_join, (consumer.mode, ids)))
    except LateJoinError as error:
        outcome.put((late_join, f"LateJoinError: {error}"))


def test_a_late_join_in_the_last_epoch_wraps_onto_batches_loaded_for_it_alone():
    """No next epoch follows the last: a wrapped joiner's epoch is completed by loading the
    leading batches it missed once more, for it alone; next_epoch has nothing to wait for."""
    outcome, results, served = FORK.Queue(), FORK.Queue(), FORK.Event()
    # 20 batches, about 1 s: the late joiners connect after batch 3, well before the end
    source = Signalling(id_batches(320, 16, delay_s=0.05), served, after=3)
    with no_leftovers(), Producer(source, epochs=1, replay_batches=0) as producer:
        start(consume, producer.endpoint, results, 1, None, "early")
        for late_join in ("auto", "next_epoch"):
            start(_join_late, producer.endpoint, outcome, late_join, served)
        producer.serve()
        outcomes = dict(outcome.get(timeout=30) for _ in range(2))
        (_, _, epochs, _) = results.get(timeout=30)
        metrics = producer.metrics()
    assert epochs == [list(range(320))]
    mode, ids = outcomes["auto"]
    joined_at = ids[0]  # its epoch: from where it joined to the end, then the start again
    assert mode == "wrap" and 0 < joined_at < 320 and joined_at % 16 == 0
    assert ids == list(range(joined_at, 320)) + list(range(joined_at))
    assert metrics["batches_for_late_joiners"] == joined_at // 16
    assert metrics["batches_produced"] == 20 + joined_at // 16
    assert outcomes["next_epoch"].startswith("LateJoinError"), outcomes
    assert "last" in outcomes["next_epoch"]


def _iterate_reporting(endpoint, outcome):
    consumer = Consumer(endpoint)
    try:
        received = sum(1 for _ in consumer)
        outcome.put(f"ended quietly after {received}")
    except SharingError as error:
        outcome.put(f"SharingError: {error}")


def test_a_producer_stopped_mid_epoch_makes_its_consumers_raise_not_end_short():
    outcome = FORK.Queue()
    with no_leftovers(), Producer(id_batches(100_000, 16, delay_s=0.01), epochs=1) as producer:
        start(_iterate_reporting, producer.endpoint, outcome)
        threading.Timer(0.5, producer.stop).start()
        producer.serve()
        what = outcome.get(timeout=30)
    assert what.startswith("SharingError") and "middle" in what, what


def _serve_forever_at(endpoint, ready):
    with Producer(id_batches(100_000, 16, delay_s=0.01), endpoint=endpoint, epochs=1) as producer:
        ready.put(producer.endpoint)
        producer.serve()


def test_a_stale_socket_file_left_by_a_killed_producer_is_replaced(tmp_path):
    path = tmp_path / "producer.sock"
    endpoint = f"unix:{path}"
    ready = FORK.Queue()
    killed = start(_serve_forever_at, endpoint, ready)
    ready.get(timeout=10)
    os.kill(killed.pid, signal.SIGKILL)
    killed.join(10)
    assert path.exists()  # nobody removed it
    results = FORK.Queue()
    with no_leftovers(), Producer(id_batches(48, 16), endpoint=endpoint, epochs=1) as producer:
        start(consume, endpoint, results, 1, None, "new")
        producer.serve()
        (_, _, epochs, _) = results.get(timeout=30)
    assert epochs == [list(range(48))]
    assert not path.exists()


def test_a_live_producer_or_a_regular_file_at_the_path_is_never_replaced(tmp_path):
    path = tmp_path / "producer.sock"
    with Producer([], endpoint=f"unix:{path}"):
        with pytest.raises(OSError, match="already listening"):
            Producer([], endpoint=f"unix:{path}")
        assert path.exists()
    regular = tmp_path / "notes.txt"
    regular.write_text("keep me")
    with pytest.raises(OSError, match="not a socket"):
        Producer([], endpoint=f"unix:{regular}")
    assert regular.read_text() == "keep me"


def _leave_early(endpoint, batches, left):
    consumer = Consumer(endpoint)
    for i, _ in enumerate(consumer):
        if i + 1 == batches:
            break
    consumer.leave()
    left.put(os.getpid())
    time.sleep(3)  # alive, with its socket closed


def _serve_until(producer, done):
    """Serve until ``done()`` returns, then (once the producer has noticed) stop."""

    def stop_when_done():
        done()
        time.sleep(0.5)  # for the producer to notice
        producer.stop()

    stopper = threading.Thread(target=stop_when_done)
    stopper.start()
    producer.serve()
    stopper.join()


def _script_env():
    path = [os.getcwd(), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))


def test_consumers_that_call_leave_are_counted_as_left_never_as_lost():
    """Both leave while the producer is still sending to them (a fast loader)."""
    left = FORK.Queue()
    with no_leftovers(), Producer(id_batches(16_000, 16), epochs=1, consumers=2) as producer:
        for _ in range(2):
            start(_leave_early, producer.endpoint, 3, left)
        _serve_until(producer, lambda: [left.get(timeout=30) for _ in range(2)])
        metrics = producer.metrics()
    assert (metrics["consumers_left"], metrics["consumers_lost"]) == (2, 0)


def test_a_socket_nobody_listens_on_is_not_mistaken_for_a_live_producer(tmp_path):
    """A socket file bound by a process that never listens (or closed) is stale too."""
    path = tmp_path / "bound.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(str(path))
    sock.close()
    with Producer([], endpoint=f"unix:{path}") as producer:
        assert producer.endpoint == f"unix:{path}"
    assert not path.exists()


def test_a_producer_that_closes_with_our_releases_unread_still_ends_the_stream_cleanly():
    """Closing a socket with data unread makes the peer's next read fail once (a reset)
    before what was sent is read: the stream's end must still arrive."""
    endpoint = default_endpoint()
    listener = listen(endpoint)
    batch = torch.arange(4)
    layout, fds, _keep = describe(batch)

    def producer_that_exits():
        listener.setblocking(True)
        sock, _ = listener.accept()
        protocol.recv(sock)  # hello
        protocol.send(sock, "welcome", version=protocol.PROTOCOL_VERSION, consumer_id=0,
                      batches_per_epoch=1, epoch=0, start_index=0, mode="start")  # fmt: skip
        protocol.send(sock, "batch", fds, seq=0, epoch=0, index=0, layout=layout, segment=None)
        protocol.send(sock, "end_epoch", epoch=0, batches=1)
        protocol.send(sock, "end", reason="finished", detail="")
        time.sleep(0.5)  # the consumer has released batch 0 by now; nobody reads it
        sock.close()

    server = threading.Thread(target=producer_that_exits)
    server.start()
    consumer = Consumer(endpoint)
    assert [b.tolist() for b in consumer] == [[0, 1, 2, 3]]
    server.join(10)
    with pytest.raises(StreamEnded, match="finished its stream after serving this consumer 1"):
        list(consumer)  # the end, not ProducerGone
    listener.close()


def _fork_a_child_that_drops(obj):
    """Fork a child that does what collecting its copy of ``obj`` and then exiting normally
    do (``__del__``, then the exit handlers), and wait for it."""
    from sharing import lifetime

    pid = os.fork()
    if pid == 0:
        obj.__del__()
        lifetime._close_open()
        os._exit(0)
    os.waitpid(pid, 0)


def _consume_after_a_forked_copy_exits(endpoint, results):
    consumer = Consumer(endpoint)
    _fork_a_child_that_drops(consumer)
    results.put([i for batch in consumer for i in batch["id"].tolist()])
    consumer.leave()


def test_a_forked_copy_of_a_consumer_does_not_leave_for_its_parent():
    """Before: the child's copy of the Consumer sent "leave" on the socket it shares with its
    parent, so the producer dropped the parent."""
    results = FORK.Queue()
    # 100 batches: more than the producer sends ahead, so a drop shows as a short epoch
    with no_leftovers(), Producer(id_batches(1600, 16), epochs=1, consumers=1) as producer:
        start(_consume_after_a_forked_copy_exits, producer.endpoint, results)
        producer.serve()
        assert results.get(timeout=30) == list(range(1600))


def test_a_forked_copy_of_a_producer_does_not_unlink_its_parents_socket(tmp_path):
    path = tmp_path / "p.sock"
    producer = Producer(id_batches(32, 16), endpoint=f"unix:{path}", epochs=1, consumers=1)
    _fork_a_child_that_drops(producer)
    assert path.exists()
    results = FORK.Queue()
    start(consume, producer.endpoint, results, 1, None, "after")
    producer.serve()
    assert results.get(timeout=30)[2] == [list(range(32))]
    producer.close()
    assert not path.exists()


@pytest.mark.slow
def test_what_a_script_leaves_open_is_closed_at_exit_and_counted_as_left():
    """A script that never calls leave(): at exit the consumer leaves cleanly (the exit
    handlers run before modules are torn down), with nothing printed."""
    import subprocess
    import sys

    script = (
        "import sys\nfrom sharing import Consumer\n"
        "consumer = Consumer(sys.argv[1])\n"
        "print(sum(len(batch['id']) for batch in consumer))\n"
    )
    with no_leftovers(), Producer(id_batches(48, 16), epochs=None, consumers=1) as producer:
        # The script reads one epoch of many: its leave comes while the producer serves.
        child = subprocess.Popen(
            [sys.executable, "-c", script, producer.endpoint], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=_script_env(),
        )  # fmt: skip
        _serve_until(producer, lambda: child.wait(timeout=60))
        out, err = child.communicate(timeout=60)
        metrics = producer.metrics()
    assert (child.returncode, out.strip(), err) == (0, "48", "")
    assert (metrics["consumers_left"], metrics["consumers_lost"]) == (1, 0)


@pytest.mark.slow
def test_a_producer_serving_in_a_daemon_thread_stops_its_loader_at_exit():
    """``threading.Thread(target=producer.serve, daemon=True)`` and a script that just ends:
    the loader's iteration is closed at exit (a DataLoader's workers shut down), not frozen
    mid-batch. Before, it was frozen, and a loader inside a torch op at that moment aborted
    the process ("terminate called without an active exception")."""
    import subprocess
    import sys

    script = """
import threading, torch
from sharing import Consumer, Producer
class Batches:
    def __iter__(self):
        try:
            while True:
                yield torch.zeros(4)
        finally:
            print("loader closed", flush=True)
producer = Producer(Batches(), epochs=1)
threading.Thread(target=producer.serve, daemon=True).start()
consumer = Consumer(producer.endpoint)
print(next(iter(consumer)).tolist(), flush=True)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env=_script_env(),
    )  # fmt: skip
    assert (result.returncode, result.stdout.split("\n")[:2], result.stderr) == (
        0, ["[0.0, 0.0, 0.0, 0.0]", "loader closed"], ""
    )  # fmt: skip


def test_loops_after_the_last_epoch_raise_instead_of_coming_back_empty():
    """The issue's smallest case: 3 loops over a 1-epoch stream gave 40, 0, 0 and exit 0."""
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(40)), batch_size=8)
    with no_leftovers(), Producer(loader, epochs=1) as producer:
        threading.Thread(target=producer.serve, daemon=True).start()
        consumer = Consumer(producer.endpoint, batch_size=8)
        assert sum(len(b) for (b,) in consumer) == 40
        for _ in range(2):  # and again: an ended stream stays ended, loudly
            with pytest.raises(StreamEnded, match=r"finished its stream.*1 whole epoch\b"):
                sum(len(b) for (b,) in consumer)
        consumer.leave()


def test_a_second_producer_on_an_abstract_name_is_told_who_is_there():
    with (
        Producer([torch.arange(2)]) as first,
        pytest.raises(OSError, match=f"another producer is already listening at {first.endpoint}"),
    ):
        Producer([torch.arange(2)], endpoint=first.endpoint)


class _FailsAt:
    """A loader whose batch ``at`` raises (a corrupt file, say), or blocks forever."""

    def __init__(self, at, block=False):
        self.at, self.block = at, block

    def __len__(self):
        return 50

    def __iter__(self):
        for index in range(50):
            time.sleep(0.01)
            if index == self.at:
                if self.block:
                    threading.Event().wait()
                raise OSError(f"corrupt sample in batch {index}")
            yield {"id": torch.arange(index * 4, index * 4 + 4)}


def _iterate_timed(endpoint, outcome):
    consumer = Consumer(endpoint)
    received = 0
    try:
        for _ in consumer:
            received += 1
        outcome.put((received, "ended quietly", time.monotonic()))
    except SharingError as error:
        outcome.put((received, f"{type(error).__name__}: {error}", time.monotonic()))


def test_a_failing_loader_surfaces_in_serve_and_in_every_consumer():
    outcome = FORK.Queue()
    with no_leftovers(), Producer(_FailsAt(7), epochs=1, consumers=2, max_lag=2) as producer:
        for _ in range(2):
            start(_iterate_timed, producer.endpoint, outcome)
        with pytest.raises(OSError, match="corrupt sample in batch 7"):
            producer.serve()
        failed_at = time.monotonic()
        outcomes = [outcome.get(timeout=30) for _ in range(2)]
    for received, what, when in outcomes:
        assert received <= 7 and what.startswith("SharingError"), what
        assert "failed (OSError: corrupt sample in batch 7)" in what, what
        assert when - failed_at < 5.0


def test_a_failing_dataloaders_workers_are_gone_when_serve_raises():
    """The loader's error may be held long after serve() raises (here by pytest.raises); the
    DataLoader's worker processes must not live as long (they did, held by the error's
    traceback, and were terminated at exit, leaving their temp folders behind)."""
    loader, worker_pids = failing_dataloader()
    outcome = FORK.Queue()
    with no_leftovers(), Producer(loader, epochs=1, max_lag=2) as producer:
        start(_iterate_timed, producer.endpoint, outcome)
        with pytest.raises(OSError, match="corrupt sample 40") as raised:
            producer.serve()
        check_workers_gone(worker_pids(), raised.value)
        assert "SharingError" in outcome.get(timeout=30)[1]


@pytest.mark.slow
def test_consumers_learn_at_once_that_serving_ended_even_while_the_loader_is_stuck():
    """serve() waits up to 10 s for a stuck loader's thread once it ends: the consumers must
    not wait with it (they used to block until close() had waited too)."""
    outcome = FORK.Queue()
    with no_leftovers(), Producer(_FailsAt(5, block=True), epochs=1) as producer:
        start(_iterate_timed, producer.endpoint, outcome)
        threading.Timer(1.0, producer.stop).start()  # the loader is stuck in batch 5 by then
        began = time.monotonic()
        producer.serve()
        received, what, when = outcome.get(timeout=30)
        stopped_at = began + 1.0
    assert received == 5 and what.startswith("SharingError") and "was stopped" in what, what
    assert when - stopped_at < 5.0


def _train_reporting(endpoint, results, name, step_s, echo_on_stall):
    consumer = Consumer(endpoint, echo_on_stall=echo_on_stall)
    fresh_ids, steps, echoes = [], 0, 0
    began = time.monotonic()
    for batch in consumer:
        steps += 1
        echoes += consumer.last_was_echo
        if not consumer.last_was_echo:
            fresh_ids.extend(batch["id"].tolist())
        time.sleep(step_s)
    seconds = time.monotonic() - began
    counts = (consumer.fresh_examples, consumer.echoed_examples)
    results.put((name, fresh_ids, steps, echoes, counts, steps / seconds))


def test_a_fast_consumer_echoes_while_a_slow_one_holds_the_producer_back():
    """max_lag ties a fast consumer to the slowest: with echo_on_stall it trains on repeats
    meanwhile (at most 4 uses of a fresh batch), never skipping or repeating fresh data."""
    results = FORK.Queue()
    with no_leftovers(), Producer(id_batches(30 * 8, 8), epochs=1, max_lag=2, consumers=2) as p:
        start(_train_reporting, p.endpoint, results, "slow", 0.03, 1)
        start(_train_reporting, p.endpoint, results, "fast", 0.002, 4)
        p.serve()
        outcomes = {r[0]: r[1:] for r in (results.get(timeout=30) for _ in range(2))}
    for name, (fresh_ids, steps, echoes, (fresh, echoed), _) in outcomes.items():
        assert fresh_ids == list(range(240)) and fresh == 240, name  # every sample once
        assert echoed == 8 * echoes and steps == 30 + echoes, name
    assert outcomes["slow"][2] == 0  # echo is opt-in
    fast_echoes = outcomes["fast"][2]
    assert 30 <= fast_echoes <= 3 * 30  # it echoed while held back, at most 3 repeats each


class _SeededOrder(torch.utils.data.Sampler):
    """Each epoch's order drawn from the epoch alone (``set_epoch``), as a seeded
    DistributedSampler's is."""

    def __init__(self, n: int) -> None:
        self.n, self.epoch = n, 0

    def __len__(self) -> int:
        return self.n

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter(_order(self.n, self.epoch))


def _order(n: int, epoch: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(epoch)).tolist()


def test_a_reload_beside_a_persistent_workers_dataloader_keeps_the_live_epochs_whole():
    """Loading a past epoch again must not reset a persistent DataLoader's one iterator,
    which the live epoch reads: every consumer still gets every sample of its epochs."""
    loader = torch.utils.data.DataLoader(
        list(range(64)), batch_size=4, sampler=_SeededOrder(64), num_workers=2,
        persistent_workers=True, multiprocessing_context=FORK,
    )  # fmt: skip
    late: dict = {}

    def join_late():
        consumer = Consumer(producer.endpoint)
        late["mode"], late["ids"] = consumer.mode, [i for b in consumer for i in b.tolist()]
        consumer.leave()  # its first epoch is what is checked

    with Producer(loader, epochs=2, replay_batches=1, max_lag=2) as producer:
        serving = threading.Thread(target=producer.serve)
        serving.start()
        early, joiner = Consumer(producer.endpoint), threading.Thread(target=join_late)
        epochs = []
        for _ in range(2):
            epochs.append([])
            for batch in early:
                epochs[-1].extend(batch.tolist())
                if len(epochs[-1]) == 24 and not joiner.is_alive() and not late:
                    joiner.start()  # batch 6, past the window of 1
        serving.join(30)
        joiner.join(30)
        again = producer.metrics()["batches_loaded_again"]
    assert epochs == [_order(64, 0), _order(64, 1)]
    assert late["mode"] == "reload" and again > 0
    assert sorted(late["ids"]) == list(range(64))
