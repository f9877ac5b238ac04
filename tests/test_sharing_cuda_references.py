"""CUDA IPC references, checked on the CPU: what the producer and consumers do with them is
plain bookkeeping, so it runs here with tensors that report a CUDA device and stand-ins for
torch's share, release and synchronize calls (`sharing.cuda_share`). What torch then does
with a reference on a GPU is `test_sharing_cuda.py`'s."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import socket
import threading
import time

import numpy as np
import pytest
import torch

from sharing import Consumer, Producer, cuda_share, protocol
from sharing.endpoint import connect, default_endpoint, listen
from sharing.layout import describe
from sharing.peers import Peer
from sharing.store import BatchStore

WAIT_S = 10.0


class FakeCuda(torch.Tensor):
    """A CPU tensor that says it is on cuda:0 (what the producer checks to share it)."""

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", 0)


def cuda_batch(index: int) -> tuple:
    return (torch.full((4,), float(index)).as_subclass(FakeCuda), "label")


class Torch:
    """Stand-ins for torch's share and synchronize calls, logging each: a share makes a
    counter of its own, set to 1, in a counter file laid out as torch's (a 64-byte header,
    then int64 counters) that torch's own release call then lowers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.name = f"/torch_sharing_test_{os.getpid()}_{id(self)}"
        self.path = f"/dev/shm{self.name}"
        counters = np.zeros(8 + 10_000, dtype=np.int64)  # torch maps that size
        counters[0] = 1  # the header's mapping count: the producer's own mapping
        counters.tofile(self.path)
        self.log: list[tuple] = []
        self.shared: list[dict] = []
        monkeypatch.setattr(cuda_share, "share_tensor", self.share)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda d: self.log.append(("sync", d)))

    def share(self, tensor: torch.Tensor) -> dict:
        ipc = ipc_fields(len(self.shared), self.name)
        self._write(len(self.shared), 1)
        self.shared.append(ipc)
        self.log.append(("share", float(tensor[0])))
        return ipc

    def _write(self, counter: int, value: int) -> None:
        with open(self.path, "r+b") as counters:
            counters.seek(64 + 8 * counter)
            counters.write(value.to_bytes(8, "little", signed=True))

    def counters(self) -> list[int]:
        """Each share's counter now, in order."""
        values = np.fromfile(self.path, dtype=np.int64)[8:]
        return values[: len(self.shared)].tolist()


@pytest.fixture
def fake(monkeypatch):
    faked = Torch(monkeypatch)
    yield faked
    os.unlink(faked.path)


def ipc_fields(counter: int, name: str = "/torch_sharing_test_none") -> dict:
    return {
        "device": 0, "handle": base64.b64encode(b"memory").decode(), "size": 16,
        "storage_offset": 0, "ref_counter_handle": base64.b64encode(name.encode()).decode(),
        "ref_counter_offset": counter, "event_handle": None, "event_sync_required": False,
    }  # fmt: skip


class RawConsumer:
    """A consumer that speaks the protocol itself: it sees each batch message's references as
    sent, and lowers their counters as torch does once a batch's tensors are gone."""

    def __init__(self, endpoint: str) -> None:
        self.sock = connect(endpoint, WAIT_S)
        protocol.send(self.sock, "hello", version=protocol.PROTOCOL_VERSION, batch_size=None,
                      late_join="auto", pid=os.getpid(), resume=None)  # fmt: skip
        self.sock.settimeout(WAIT_S)
        self.welcome = self.next()
        assert self.welcome["type"] == "welcome", self.welcome
        self.kept: list[dict] = []  # references of batches whose tensors it still holds

    def next(self) -> dict:
        try:
            message, fds = protocol.recv(self.sock)
        except ConnectionResetError:  # closed with our releases unread: what it sent follows
            message, fds = protocol.recv(self.sock)
        for fd in fds:
            os.close(fd)
        assert message is not None, "the producer closed the connection"
        return message

    def counters(self, keep: bool = False) -> list[list[int]]:
        """Each batch's reference counters until the epoch's end, releasing each batch, and
        letting go of its tensors unless ``keep``."""
        counters = []
        while (message := self.next())["type"] == "batch":
            counters.append(offsets(message))
            protocol.send(self.sock, "release", seq=message["seq"])
            self.kept += cuda_share.ipc_fields(message["layout"])
            if not keep:
                self.let_go()
        assert message["type"] == "end_epoch", message
        return counters

    def let_go(self) -> None:
        """Its tensors are gone: lower their counters (torch's own call)."""
        for ipc in self.kept:
            cuda_share.release_counter(ipc)
        self.kept = []

    def leave(self) -> None:
        with contextlib.suppress(OSError):  # the producer may have closed: nothing is held
            protocol.send(self.sock, "leave")
        self.sock.close()


def offsets(message: dict) -> list[int]:
    """The reference counters of a batch message's CUDA tensors."""
    return [ipc["ref_counter_offset"] for ipc in cuda_share.ipc_fields(message["layout"])]


def serving(producer: Producer) -> threading.Thread:
    thread = threading.Thread(target=producer.serve, daemon=True)
    thread.start()
    return thread


def test_each_consumer_gets_references_of_its_own_for_every_tensor_it_is_sent(fake):
    batches = [cuda_batch(i) for i in range(3)]
    with Producer(batches, consumers=2) as producer:
        thread = serving(producer)
        first, second = RawConsumer(producer.endpoint), RawConsumer(producer.endpoint)
        seen = [first.counters(), second.counters()]
        for consumer in (first, second):
            assert consumer.next()["type"] == "end"
            consumer.leave()
        thread.join(WAIT_S)
        assert not thread.is_alive()
    # one reference per tensor per send, as torch makes one per pickle: no counter is shared
    assert [len(c) for c in seen] == [3, 3]
    counters = [counter for per_consumer in seen for batch in per_consumer for counter in batch]
    assert sorted(counters) == list(range(len(fake.shared))) == list(range(6))
    assert fake.counters() == [0] * 6  # each lowered once, by its own consumer


def test_a_late_joiners_replayed_batches_come_with_references_of_its_own(fake):
    batches = [cuda_batch(i) for i in range(4)]
    with Producer(batches, max_lag=1, replay_batches=2) as producer:
        thread = serving(producer)
        first = RawConsumer(producer.endpoint)
        batch = first.next()  # held, unreleased: the producer waits at max_lag=1
        late = RawConsumer(producer.endpoint)
        assert late.welcome["mode"] == "replay"
        protocol.send(first.sock, "release", seq=batch["seq"])
        cuda_share.release_counter(cuda_share.ipc_fields(batch["layout"])[0])
        late_all: list = []
        reading = threading.Thread(target=lambda: late_all.extend(late.counters()))
        reading.start()  # both read at once: each holds the other back at max_lag=1
        first_rest = first.counters()
        reading.join(WAIT_S)
        for consumer in (first, late):
            consumer.leave()
        thread.join(WAIT_S)
    firsts = offsets(batch) + [c for counters in first_rest for c in counters]
    lates = [counter for counters in late_all for counter in counters]
    assert len(firsts) == len(lates) == 4
    assert set(firsts).isdisjoint(lates)  # batch 0's replay too
    assert fake.counters() == [0] * 8


def test_a_loaders_own_cuda_batch_is_shared_only_after_its_device_finished_making_it(fake):
    # A loader may make its CUDA tensors on a stream of its own, which the event recorded at
    # share time (on the producer's stream) would not cover: the device is synchronised first.
    with Producer([cuda_batch(i) for i in range(3)]) as producer:
        thread = serving(producer)
        consumer = RawConsumer(producer.endpoint)
        consumer.counters()
        consumer.leave()
        thread.join(WAIT_S)
    syncs = [entry for entry in fake.log if entry[0] == "sync"]
    assert syncs == [("sync", torch.device("cuda", 0))] * 3
    for value in (0.0, 1.0, 2.0):
        first_share = fake.log.index(("share", value))
        assert sum(entry[0] == "sync" for entry in fake.log[:first_share]) > value


def test_cpu_batches_wait_for_no_device(fake):
    with Producer([torch.arange(4)] * 2) as producer:
        thread = serving(producer)
        consumer = RawConsumer(producer.endpoint)  # reads nothing more, holds everything
        thread.join(WAIT_S)  # returns with the consumer still connected: no CUDA memory
        assert not thread.is_alive()
        consumer.sock.close()
    assert fake.log == []


def test_the_producer_outlives_its_cuda_batches_until_no_consumer_holds_one(fake):
    with Producer([cuda_batch(i) for i in range(2)]) as producer:
        thread = serving(producer)
        consumer = RawConsumer(producer.endpoint)
        consumer.counters(keep=True)  # a training loop still holds its tensors
        assert consumer.next()["type"] == "end"
        consumer.leave()  # its connection is gone; its tensors are not
        thread.join(1.0)
        assert thread.is_alive()  # its memory is what the consumer still reads
        consumer.let_go()
        let_go = time.monotonic()
        thread.join(WAIT_S)
        assert not thread.is_alive()
        assert time.monotonic() - let_go < 2.0
    assert producer.metrics()["consumers_left"] == 1


def test_a_consumer_holding_cuda_tensors_is_waited_for_cuda_release_s_then_named(fake, caplog):
    caplog.set_level(logging.WARNING, logger="sharing.producer")
    with Producer([cuda_batch(i) for i in range(2)], cuda_release_s=0.5) as producer:
        thread = serving(producer)
        consumer = RawConsumer(producer.endpoint)
        consumer.counters(keep=True)
        ended = time.monotonic()
        thread.join(WAIT_S)
        waited = time.monotonic() - ended
    assert 0.4 < waited < 3.0
    assert (
        f"consumer 0 (pid {os.getpid()}) still holds 2 CUDA tensors of this producer 0.5 s "
        "after the stream's end (cuda_release_s)" in caplog.text
    )
    consumer.sock.close()


@pytest.mark.parametrize("value", [0, -1.0, "60", None])
def test_cuda_release_s_must_be_a_positive_number_of_seconds(value):
    with pytest.raises(ValueError, match=f"cuda_release_s must be .*, got {value!r}"):
        Producer([torch.zeros(1)], cuda_release_s=value)


def test_a_consumer_that_leaves_early_lowers_the_counters_of_batches_it_never_opened(fake):
    endpoint = default_endpoint()
    listener = listen(endpoint)
    layout, _, keep = describe(cuda_batch(0))
    all_sent, seen_leave = threading.Event(), threading.Event()

    def send_batch(sock: socket.socket, seq: int) -> None:
        sent, _ = cuda_share.for_send(layout, keep)
        protocol.send(sock, "batch", seq=seq, epoch=0, index=seq, layout=sent, segment=None)

    def producer() -> None:
        listener.setblocking(True)
        sock, _ = listener.accept()
        protocol.recv(sock)  # hello
        protocol.send(sock, "welcome", version=protocol.PROTOCOL_VERSION, consumer_id=0,
                      batches_per_epoch=None, epoch=0, start_index=0, mode="start")  # fmt: skip
        for seq in range(3):
            send_batch(sock, seq)
        all_sent.set()
        sock.settimeout(WAIT_S)
        message, _ = protocol.recv(sock)
        seen_leave.set()
        assert message["type"] == "leave"
        send_batch(sock, 3)  # sent before the leave was read, in a real producer
        time.sleep(0.2)
        sock.close()

    server = threading.Thread(target=producer)
    server.start()
    consumer = Consumer(endpoint)
    epochs = consumer.epochs()
    next(epochs)  # reads batch 0 ahead, unopened
    assert all_sent.wait(WAIT_S) and fake.counters() == [1, 1, 1]
    consumer.leave()
    server.join(WAIT_S)
    listener.close()
    assert seen_leave.is_set()
    # 0 read ahead, 1 and 2 in its socket, 3 in flight: none opened, each lowered once
    assert fake.counters() == [0, 0, 0, 0]


def test_references_made_for_a_message_never_sent_are_lowered_by_the_producer(fake):
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    peer = Peer(0, mine, os.getpid())
    peer.unsent = (b"{}", [], [fake.share(torch.zeros(1))])  # made, then the socket was full
    peer.release_all(BatchStore())
    assert fake.counters() == [0] and peer.unsent is None
    mine.close()
    theirs.close()


def test_a_release_lowers_torchs_counter_in_its_shared_memory_file():
    # torch's counters live in a shared-memory file: a header, then int64 counters from byte
    # 64. The release is torch's own call, which needs no GPU.
    name = f"torch_sharing_test_{os.getpid()}"
    path = f"/dev/shm/{name}"
    counters = np.zeros(8 + 10_000, dtype=np.int64)
    counters[0] = 1  # the header's mapping count: the producer's own mapping
    counters[8 + 5] = counters[8 + 6] = 1
    counters.tofile(path)
    try:
        ipc = {
            **ipc_fields(5),
            "ref_counter_handle": base64.b64encode(f"/{name}".encode()).decode(),
        }
        cuda_share.release_counter(ipc)
        cuda_share.release_counter({**ipc, "ref_counter_offset": 10_000})  # outside: ignored
        cuda_share.release_counter({**ipc, "ref_counter_handle": "not base64!"})
        after = np.fromfile(path, dtype=np.int64)
    finally:
        os.unlink(path)
    assert after[8 + 4 : 8 + 7].tolist() == [0, 0, 1]  # counter 5 lowered, no other
