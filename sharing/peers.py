"""The producer's view of its consumers: per connection, its socket, what is queued for it
and what it holds (`Peer`); for all of them, accepting, liveness, dropping and counts
(`Peers`)."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sharing import cuda_share, protocol
from sharing import endpoint as endpoints
from sharing.errors import ProtocolError
from sharing.policy import Refusal
from sharing.store import BatchStore

__all__ = ["CatchUp", "Peer", "Peers", "SendBatch", "SendEndEpoch"]

log = logging.getLogger("sharing.producer")
_MAX_REASON_CHARS = 2000


class SendBatch(NamedTuple):
    """Queued: send batch ``seq``."""

    seq: int


@dataclass
class CatchUp:
    """Part of a consumer's catch-up: batches ``start`` to ``stop`` - 1 of past ``epoch``,
    loaded again for it (``start`` advances as they arrive); ``ends``: the epoch ends there."""

    epoch: int
    start: int
    stop: int
    ends: bool
    requested: bool = False


class SendEndEpoch(NamedTuple):
    """Queued: tell the consumer that ``epoch`` ended after ``batches`` batches."""

    epoch: int
    batches: int


@dataclass
class Peer:
    """One connection, from accept until it is dropped.

    Attributes:
        cid: Consumer id (also the holder id of its batch references).
        sock: Its non-blocking socket.
        pid: Its process id (from SO_PEERCRED).
        hello: Its hello, once received (answered when the first batch exists).
        welcomed: Whether it was let in.
        waiting_epoch: The epoch whose first batch it joins the stream at (next_epoch mode).
        wrap_index: Where its epochs start in the producer's (wrap mode; 0 otherwise): the
            leading batches its last epoch needs after the producer's last.
        outbox: Messages queued for it, oldest first.
        held: Batches sent and not yet released.
        kept: Batches in recycled segments that it released but whose memory it still
            references (freed by a ``free`` message).
        live: Live (not replayed) batches queued or held: its lag behind the producer.
        catchup: Batches loaded again for it that come before anything live (`CatchUp`).
        deferred: Live messages queued behind its catch-up.
        segments: Recycled segments whose descriptor it has (sent once each).
        unsent: The first queued message, once made (its CUDA references, made with it, are
            kept until it is sent, or lowered here if it never is).
        references: The CUDA references sent to it that it may still hold (pruned at each
            send, as torch's counters reach 0: `sharing.cuda_share.held`).
        left: Whether it said leave (a clean exit, whatever happens to its socket then).
        closed: Whether its end of the connection has closed.
    """

    cid: int
    sock: socket.socket
    pid: int
    connected_at: float = field(default_factory=time.monotonic)
    hello: dict | None = None
    welcomed: bool = False
    waiting_epoch: int | None = None
    wrap_index: int = 0
    outbox: deque[SendBatch | SendEndEpoch] = field(default_factory=deque)
    held: set[int] = field(default_factory=set)
    kept: set[int] = field(default_factory=set)
    live: set[int] = field(default_factory=set)
    catchup: deque[CatchUp] = field(default_factory=deque)
    deferred: deque[SendBatch | SendEndEpoch] = field(default_factory=deque)
    segments: set[int] = field(default_factory=set)
    unsent: tuple[bytes, list[int], list[dict]] | None = None
    references: list[dict] = field(default_factory=list)
    left: bool = False
    closed: bool = False

    def enqueue(self, seq: int, *, live: bool) -> None:
        """Queue batch ``seq`` for this consumer (which must hold a reference to it); a live
        one waits behind its catch-up."""
        if live:
            self.push(SendBatch(seq))
            self.live.add(seq)
        else:
            self.outbox.append(SendBatch(seq))

    def push(self, entry: SendBatch | SendEndEpoch) -> None:
        """Queue a live message: behind the catch-up while there is one."""
        (self.deferred if self.catchup else self.outbox).append(entry)

    def flush(self, store: BatchStore) -> int:
        """Send queued messages until the socket is full; the number of batches sent.

        Raises:
            OSError: The connection broke (the peer closed it, or died).
        """
        sent = 0
        while self.outbox:
            entry = self.outbox[0]
            if self.unsent is None:
                self.unsent = _record(entry, store, self.segments)
            body, fds, references = self.unsent
            try:
                if fds:
                    socket.send_fds(self.sock, [body], fds)
                else:
                    self.sock.send(body)
            except BlockingIOError:
                break
            self.unsent = None
            if references:
                self.references = [*cuda_share.held(self.references), *references]
            self.outbox.popleft()
            if isinstance(entry, SendBatch):
                self.held.add(entry.seq)
                segment = store[entry.seq].segment
                if segment is not None:
                    self.segments.add(segment)
                sent += 1
        return sent

    def release(self, store: BatchStore, seq: int) -> bool:
        """This consumer is done with batch ``seq`` (it no longer counts in its lag); its
        memory is let go of too, but for a batch in a recycled segment, which waits for
        `free`. False if this consumer does not hold it."""
        if seq not in self.held:
            return False
        self.held.discard(seq)
        self.live.discard(seq)
        if seq in store and store[seq].segment is not None:
            self.kept.add(seq)
        else:
            store.unref(seq, self.cid)
        return True

    def free(self, store: BatchStore, seq: int) -> bool:
        """This consumer references batch ``seq``'s recycled segment no more; False if it
        had not released it."""
        if seq not in self.kept:
            return False
        self.kept.discard(seq)
        store.unref(seq, self.cid)
        return True

    def release_all(self, store: BatchStore) -> None:
        """Let go of everything queued or held (the consumer is gone), and lower the counters
        of CUDA references made for a message it never got."""
        if self.unsent is not None:
            for ipc in self.unsent[2]:
                cuda_share.release_counter(ipc)
            self.unsent = None
        for entry in (*self.outbox, *self.deferred):
            if isinstance(entry, SendBatch):
                store.unref(entry.seq, self.cid)
        for seq in self.held | self.kept:
            store.unref(seq, self.cid)
        self.outbox.clear()
        self.deferred.clear()
        self.catchup.clear()
        self.held.clear()
        self.kept.clear()
        self.live.clear()

    def messages(self) -> Iterator[dict]:
        """Each message the peer has sent and not yet been read (descriptors it sent are
        closed unread); ``closed`` is set once its connection has ended.

        Raises:
            ProtocolError: A message is malformed or oversized.
        """
        reset = False
        while not self.closed:
            try:
                message, fds = protocol.recv(self.sock)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionResetError:
                if not reset:  # the peer closed with data unread: what it sent still follows
                    reset = True
                    continue
                message, fds = None, []
            except OSError:
                message, fds = None, []
            for fd in fds:  # consumers have no reason to send descriptors
                os.close(fd)
            if message is None:
                self.closed = True
                return
            yield message

    def drain(self) -> None:
        """Read what the peer sent before its connection broke, noting a leave."""
        with contextlib.suppress(OSError, ProtocolError):
            self.sock.setblocking(False)
            for count, message in enumerate(self.messages()):
                if message["type"] == "leave" or count > 10_000:  # a live peer never stops
                    self.left = message["type"] == "leave"
                    return

    def refuse(self, refusal: Refusal) -> None:
        """Tell the peer why it is not served (the reason cut to a safe length)."""
        reason = refusal.reason
        if len(reason) > _MAX_REASON_CHARS:
            reason = reason[:_MAX_REASON_CHARS] + "..."
        self.send_now("error", code=refusal.code, reason=reason)

    def send_now(self, kind: str, **fields: Any) -> None:
        """Send one message, waiting up to 1 s; errors are ignored (the peer is going)."""
        with contextlib.suppress(OSError, ProtocolError):
            self.sock.settimeout(1.0)
            protocol.send(self.sock, kind, **fields)


def _record(
    entry: SendBatch | SendEndEpoch, store: BatchStore, segments: set[int]
) -> tuple[bytes, list[int], list[dict]]:
    """A queued entry's message, descriptors (a recycled segment's only the first time, to a
    peer that has not got it: ``segments``) and the CUDA references made for it, one per
    CUDA tensor (`sharing.cuda_share.for_send`)."""
    if isinstance(entry, SendBatch):
        batch = store[entry.seq]
        layout, references = cuda_share.for_send(batch.layout, batch.keep)
        body = protocol.encode(
            "batch", seq=entry.seq, epoch=batch.epoch, index=batch.index, layout=layout,
            segment=batch.segment,
        )  # fmt: skip
        return body, [] if batch.segment in segments else batch.fds, references
    return protocol.encode("end_epoch", epoch=entry.epoch, batches=entry.batches), [], []


class Peers:
    """The producer's connections: accepted from its own user only, watched for death and
    silence, dropped with their references freed, and counted.

    Args:
        listener: The listening socket.
        store: The batch store their references live in.
        hello_timeout_s: A connection that sends no hello for this long is dropped.
    """

    def __init__(self, listener: socket.socket, store: BatchStore, hello_timeout_s: float) -> None:
        self.listener, self.store, self.hello_timeout_s = listener, store, hello_timeout_s
        self.selector: selectors.BaseSelector | None = None
        self.on_drop: Callable[[int], None] = lambda cid: None  # told each dropped cid
        self.departed: list[Peer] = []  # dropped, alive, and holding CUDA references
        self.counts = {"joined": 0, "left": 0, "lost": 0}
        self._peers: dict[int, Peer] = {}
        self._next_cid = 0

    def __iter__(self) -> Iterator[Peer]:
        return iter(list(self._peers.values()))

    def __len__(self) -> int:
        return len(self._peers)

    def __contains__(self, peer: Peer) -> bool:
        return peer.cid in self._peers

    def get(self, cid: int) -> Peer | None:
        """The peer with consumer id ``cid``, if still connected."""
        return self._peers.get(cid)

    def active(self) -> list[Peer]:
        """The welcomed peers."""
        return [p for p in self._peers.values() if p.welcomed]

    def accept(self) -> None:
        """Accept every pending connection of this user (others are closed at once)."""
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as error:  # e.g. out of descriptors: serving goes on
                log.warning("cannot accept a connection now: %s", error)
                return
            pid, uid, _ = endpoints.peer_credentials(sock)
            if uid != os.getuid():
                log.warning("refused a connection from uid %d (pid %d)", uid, pid)
                sock.close()
                continue
            sock.setblocking(False)
            peer = Peer(self._next_cid, sock, pid)
            self._next_cid += 1
            self._peers[peer.cid] = peer
            assert self.selector is not None
            self.selector.register(sock, selectors.EVENT_READ, peer)

    def guarded(self, peer: Peer, handler: Callable[[Peer], None]) -> None:
        """Run ``handler(peer)``; whatever the peer's messages make it raise drops that peer
        (telling it why if possible) and nothing else."""
        try:
            handler(peer)
        except Exception as error:
            if not isinstance(error, ProtocolError):
                log.exception("consumer %d (pid %d): unexpected error", peer.cid, peer.pid)
            log.warning("consumer %d (pid %d): %s", peer.cid, peer.pid, protocol.short(error))
            peer.refuse(Refusal("protocol", f"protocol error: {error}"))
            self.drop(peer, "left")

    def drop(self, peer: Peer, why: str) -> None:
        """Forget ``peer`` and free everything it held; ``why`` is "left" or "lost", but one
        that said leave counts as left, whatever became of its socket since."""
        if self._peers.pop(peer.cid, None) is None:
            return
        if why == "lost" and not peer.left:
            peer.drain()
        why = "left" if peer.left else why
        if self.selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(peer.sock)
        peer.sock.close()
        peer.release_all(self.store)
        self.departed = [p for p in [*self.departed, peer] if _holds_cuda(p)]
        self.on_drop(peer.cid)
        if peer.welcomed:
            self.counts[why] += 1
            log.info("consumer %d (pid %d) %s", peer.cid, peer.pid, why)

    def check(self, now: float) -> None:
        """Drop peers whose process died, and connections that sent no hello in time."""
        for peer in list(self._peers.values()):
            if not endpoints.pid_alive(peer.pid):
                self.drop(peer, "lost")
            elif peer.hello is None and now - peer.connected_at > self.hello_timeout_s:
                log.warning("dropped a connection that sent no hello (pid %d)", peer.pid)
                self.drop(peer, "left")

    def await_cuda_release(
        self, end: bytes, untold: list[Peer], read: Callable[[Peer], None], limit_s: float
    ) -> None:
        """After the stream's ``end`` message: while a consumer process, connected or gone,
        is alive and holds a CUDA reference this process made (torch's counter above 0,
        `sharing.cuda_share.held`), go on reading (with ``read``) the messages of those
        connected; at most ``limit_s``, then a warning names each still holding some. (Their
        tensors are this process's memory, kept for them only while it lives.) ``untold``:
        peers the ``end`` message did not fit yet, sent it again meanwhile."""
        waiting = [p for p in [*self._peers.values(), *self.departed] if _holds_cuda(p)]
        if not waiting or self.selector is None:
            return
        for key in list(self.selector.get_map().values()):
            if not (isinstance(key.data, Peer) and key.data in waiting):
                self.selector.unregister(key.fileobj)
        deadline = time.monotonic() + limit_s
        while waiting and time.monotonic() < deadline:
            untold = [p for p in untold if p.cid in self._peers and not _sent(p, end)]
            for key, _ in self.selector.select(timeout=0.1):
                self.guarded(key.data, read)
            self.check(time.monotonic())
            waiting = [p for p in waiting if _holds_cuda(p)]
        for peer in waiting:
            log.warning(
                "consumer %d (pid %d) still holds %d CUDA tensors of this producer %g s after "
                "the stream's end (cuda_release_s): the producer closes now, and those tensors "
                "may read freed memory once this process exits. Let go of every batch (and end "
                "the loop, or call Consumer.leave()) before the producer exits, or raise "
                "cuda_release_s", peer.cid, peer.pid, len(peer.references), limit_s,
            )  # fmt: skip

    def close(self) -> None:
        """Close every connection."""
        for peer in self._peers.values():
            peer.sock.close()
        self._peers.clear()


def _holds_cuda(peer: Peer) -> bool:
    """Whether ``peer``'s process is alive and holds a CUDA reference it was sent (its list
    pruned to those)."""
    if not peer.references or not endpoints.pid_alive(peer.pid):
        return False
    peer.references = cuda_share.held(peer.references)
    return bool(peer.references)


def _sent(peer: Peer, message: bytes) -> bool:
    """Whether ``message`` went to ``peer`` without waiting."""
    try:
        peer.sock.send(message, socket.MSG_DONTWAIT)
    except OSError:
        return False
    return True
