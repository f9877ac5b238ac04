"""The producer's parts that need no process: join/replay policy, batch store, loader thread,
a peer's queue and leave, re-cutting, and message checks."""

from __future__ import annotations

import socket
import threading

import pytest
import torch

from sharing import protocol
from sharing.errors import ProtocolError
from sharing.loading import EpochEnd, Loaded, LoaderDone, LoaderFailed, LoaderThread
from sharing.peers import Peer, SendEndEpoch
from sharing.policy import Join, Position, Refusal, check_hello, plan_join, replay_window
from sharing.recut import recut
from sharing.store import BatchStore, SharedBatch

HELLO = {
    "type": "hello",
    "version": protocol.PROTOCOL_VERSION,
    "batch_size": None,
    "late_join": "auto",
    "pid": 1,
    "resume": None,
}


def at(
    epoch=0, index=0, window=3, batches=10, epochs=2, finished=False, repeats=True, reload=None
) -> Position:
    return Position(epoch, index, window, batches, epochs, finished, repeats, reload)


UNSEEDED = "the loader shuffles without a seed"


@pytest.mark.parametrize(
    ("position", "late_join", "expected"),
    [
        (at(index=0), "replay", Join("start", 0, 0)),
        (at(index=3), "replay", Join("replay", 0, 0)),  # the missed 3 are all held
        (at(index=4), "auto", Join("wrap", 0, 4)),
        (at(index=4), "next_epoch", Join("next_epoch", 1, 0)),
        (at(index=4, batches=None), "auto", Join("reload", 0, 0)),  # cannot wrap: load again
        (at(index=4, repeats=False), "auto", Join("reload", 0, 0)),  # epochs differ: again
        (at(epoch=1, index=4, repeats=False), "auto", Join("reload", 1, 0)),  # last epoch too
        (at(index=4, epochs=None), "auto", Join("wrap", 0, 4)),
        (at(epoch=1, index=0), "auto", Join("start", 1, 0)),
        (at(epoch=1, index=2), "replay", Join("replay", 1, 0)),  # last epoch, replayable
        (at(epoch=1, index=4), "auto", Join("wrap", 1, 4)),  # last epoch: completed after it
    ],
)
def test_join_plans(position, late_join, expected):
    assert plan_join(position, late_join) == expected


@pytest.mark.parametrize(
    ("position", "late_join", "code", "words"),
    [
        (at(index=4), "replay", "late_join", "only the first 3"),
        (at(index=4, repeats=False, reload=UNSEEDED), "auto", "late_join", UNSEEDED),
        (at(index=4, repeats=False, reload=UNSEEDED), "auto", "late_join", "consumers=N"),
        (at(index=4, repeats=False, reload=UNSEEDED), "auto", "late_join", "join_grace_s"),
        (at(epoch=1, index=4), "next_epoch", "late_join", "last epoch"),
        (at(epoch=2, index=0), "auto", "finished", "all its epochs"),
        (at(finished=True), "auto", "finished", "all its epochs"),
    ],
)
def test_joins_that_cannot_give_a_whole_epoch_are_refused(position, late_join, code, words):
    refusal = plan_join(position, late_join)
    assert isinstance(refusal, Refusal) and refusal.code == code and words in refusal.reason


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"version": 99}, "protocol"),
        ({"late_join": "later"}, "bad_argument"),
        ({"late_join": "x" * 100_000}, "bad_argument"),
        ({"batch_size": 0}, "bad_argument"),
    ],
)
def test_hellos_asking_for_the_impossible_are_refused_with_a_short_reason(change, code):
    refusal = check_hello({**HELLO, **change})
    assert refusal is not None and refusal.code == code and len(refusal.reason) < 300
    assert check_hello({**HELLO, "batch_size": 7}) is None  # any size >= 1 is served


def test_replay_window_from_batches_or_bytes_capped_at_an_epoch():
    assert replay_window(5, 0, 100, 10) == 5
    assert replay_window(None, 1000, 100, 20) == 10
    assert replay_window(None, 1000, 100, 4) == 4
    assert replay_window(None, 1000, 0, None) == 1000


def batch(epoch=0, index=0) -> SharedBatch:
    return SharedBatch(epoch, index, {"t": "value", "v": None}, [], [], 10)


def test_store_keeps_a_batch_while_referenced_or_retained():
    store = BatchStore()
    store.add(0, batch(index=0), [], retained=False)
    assert 0 not in store  # nobody needs it
    store.add(1, batch(index=1), [7, 8], retained=False)
    store.unref(1, 7)
    assert 1 in store
    store.unref(1, 8)
    assert 1 not in store
    store.unref(1, 8)  # already gone: ignored
    store.add(2, batch(index=2), [], retained=True)
    store.ref(2, 9)
    store.end_retention()
    assert 2 in store and store.nbytes == 10
    store.unref(2, 9)
    assert len(store) == 0


def test_store_replays_retained_batches_of_the_epoch_before_an_index_in_order():
    store = BatchStore()
    for seq, index in enumerate([0, 1, 2]):
        store.add(seq, batch(epoch=0, index=index), [], retained=True)
    store.add(3, batch(epoch=1, index=0), [], retained=True)
    assert store.replayable(0, 2) == [0, 1]
    assert store.replayable(1, 5) == [3]
    with pytest.raises(ValueError, match="already"):
        store.add(3, batch(), [], retained=True)


def drain(thread: LoaderThread, until=LoaderDone) -> list:
    items = []
    while not items or not isinstance(items[-1], (until, LoaderFailed)):
        item = thread.get()
        if item is not None:
            items.append(item)
    return items


def test_loader_thread_reports_batches_epoch_ends_and_done():
    class Loader:
        epochs_set: list[int] = []

        def set_epoch(self, epoch):
            self.epochs_set.append(epoch)

        def __iter__(self):
            return iter(["a", "b"])

    loader = Loader()
    thread = LoaderThread(loader, 2, lambda: None)
    thread.start()
    items = drain(thread)
    thread.join(5)
    assert items == [
        Loaded(0, 0, "a"), Loaded(0, 1, "b"), EpochEnd(0, 2),
        Loaded(1, 0, "a"), Loaded(1, 1, "b"), EpochEnd(1, 2), LoaderDone(),
    ]  # fmt: skip
    assert loader.epochs_set == [0, 1]


def test_loader_thread_reports_a_loader_error_and_finish_skips_an_empty_epoch():
    def failing():
        yield 1
        raise KeyError("boom")

    class Failing:
        def __iter__(self):
            return failing()

    thread = LoaderThread(Failing(), 1, lambda: None)
    thread.start()
    *_, last = drain(thread)
    assert isinstance(last, LoaderFailed) and isinstance(last.error, KeyError)

    gate = threading.Event()

    class Gated:
        def __iter__(self):
            gate.wait(5)
            return iter([])

    thread = LoaderThread(Gated(), None, lambda: None)
    thread.start()
    thread.finish()
    gate.set()
    assert drain(thread) == [LoaderDone()]  # no empty epoch after finish


def rows(ids: list[list[int]]):
    return [(seq, {"id": torch.tensor(part)}) for seq, part in enumerate(ids)]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 12, 20])
def test_recut_gives_every_row_once_in_batches_of_size_with_the_tail(size):
    stream = rows([list(range(0, 4)), list(range(4, 8)), list(range(8, 11))])
    released: list[int] = []
    out = [b["id"].tolist() for b in recut(stream, size, released.append)]
    assert [i for b in out for i in b] == list(range(11))
    assert [len(b) for b in out[:-1]] == [size] * (len(out) - 1)
    assert 0 < len(out[-1]) <= size
    assert released == [0, 1, 2]


def test_recut_views_inside_one_batch_copies_across_two_and_releases_before_gathering():
    stream = iter(rows([list(range(0, 4)), list(range(4, 8))]))
    released: list[int] = []
    cuts = recut(stream, 3, released.append)
    first = next(cuts)
    assert first["id"]._base is not None and released == []  # a view; batch 0 still needed
    second = next(cuts)  # rows 3, 4, 5: spans two batches
    assert second["id"].tolist() == [3, 4, 5] and second["id"]._base is None
    assert released == [0]


@pytest.mark.parametrize(
    "body",
    [b"[" * 60_000, b'{"type":"release","seq":' + b"9" * 5_000 + b"}", b"\xff\xfe", b"{"],
)
def test_decode_turns_any_unparseable_body_into_a_protocol_error(body):
    with pytest.raises(ProtocolError):
        protocol.decode(body)


def test_integers_beyond_64_bits_are_refused_and_quoted_briefly():
    with pytest.raises(ProtocolError, match="digits") as caught:
        protocol.check({"type": "release", "seq": 10**4000})
    assert len(str(caught.value)) < 200


def peer_and_other_end():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    return Peer(cid=1, sock=ours, pid=0), theirs


def test_a_peer_sends_its_queue_reads_what_it_was_sent_and_releases():
    store = BatchStore()
    peer, theirs = peer_and_other_end()
    store.add(0, batch(index=0), [peer.cid], retained=False)
    peer.enqueue(0, live=True)
    peer.outbox.append(SendEndEpoch(0, 1))
    assert peer.flush(store) == 1 and peer.held == {0} and peer.live == {0} and not peer.outbox
    assert [protocol.recv(theirs)[0]["type"] for _ in range(2)] == ["batch", "end_epoch"]
    assert not peer.release(store, 5)  # not held: the producer drops such a peer
    protocol.send(theirs, "release", seq=0)
    theirs.close()
    assert [m["type"] for m in peer.messages()] == ["release"] and peer.closed
    assert peer.release(store, 0) and 0 not in store and not peer.live


def test_a_peer_that_said_leave_and_closed_with_batches_unread_is_seen_to_have_left():
    """The clean-leave case without processes: the leave lies behind a connection reset."""
    store = BatchStore()
    peer, theirs = peer_and_other_end()
    store.add(0, batch(index=0), [peer.cid], retained=False)
    peer.enqueue(0, live=True)
    peer.flush(store)
    protocol.send(theirs, "leave")
    theirs.close()  # the batch unread
    with pytest.raises(OSError):
        peer.sock.send(b"x")  # what the producer sees first
    peer.drain()
    assert peer.left
