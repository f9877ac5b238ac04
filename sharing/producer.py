"""`Producer`: runs one input pipeline and serves every batch to all connected consumers."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import selectors
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from sharing import endpoint as endpoints
from sharing import protocol
from sharing.errors import ProtocolError
from sharing.layout import describe, first_dim, map_tensors

__all__ = ["LATE_JOIN_MODES", "Producer"]

log = logging.getLogger("sharing.producer")

LATE_JOIN_MODES = ("auto", "replay", "next_epoch")
_HELLO_TIMEOUT_S = 2.0
_LIVENESS_EVERY_S = 0.2


@dataclass
class _Consumer:
    """The producer's view of one connected consumer."""

    cid: int
    sock: socket.socket
    pid: int
    connected_at: float = field(default_factory=time.monotonic)
    hello: dict | None = None  # received before the first batch: answered once it exists
    welcomed: bool = False
    waiting_epoch: int | None = None  # joins the stream at this epoch's first batch
    outbox: deque = field(default_factory=deque)  # ("batch", seq) | ("end_epoch", e, n)
    held: set[int] = field(default_factory=set)  # sent, not yet released
    live: set[int] = field(default_factory=set)  # live (not replayed) seqs queued or held


@dataclass
class _Batch:
    """A produced batch, kept while a consumer still needs it or for replay."""

    epoch: int
    index: int
    layout: dict
    fds: list[int]
    keep: list[torch.Tensor]
    nbytes: int
    refs: set[int] = field(default_factory=set)
    retained: bool = False


class Producer:
    """Serve the batches of ``loader`` to every `Consumer` connected to ``endpoint``.

    The producer iterates ``loader`` once per epoch in a background thread. Each batch's
    tensors live in shared memory (a DataLoader worker's batch already does; anything else
    is moved there once); consumers receive the memory's descriptors with a small message and
    map the batch without copying it. Every consumer receives every batch of every epoch
    exactly once, in one order, the tail included. The producer waits for ``wait_for``
    consumers before it starts, pauses while none is connected, and never runs more than
    ``max_lag`` batches ahead of the slowest consumer, so it holds at most ``max_lag`` batches
    per consumer plus the replay window in memory.

    A consumer that joins mid-epoch starts at once: if the batches it missed are still held
    for replay (the first ``replay_batches`` of each epoch are kept until the producer moves
    past them) it receives them first, then the live stream; otherwise, with
    ``late_join="auto"``, its first epoch runs from where it joined into the next producer
    epoch, which covers each sample exactly once when ``loader`` yields the same batches every
    epoch. Replay costs memory, not CPU: ``replay_batches`` batches.

    Args:
        loader: Any re-iterable of batches (tuples, lists or dicts of CPU tensors or numpy
            arrays, plus JSON scalars), e.g. a DataLoader. If it has ``set_epoch``, that is
            called before each epoch.
        endpoint: ``unix:@NAME`` (abstract socket, default: a fresh name) or ``unix:/PATH``.
        epochs: Epochs to serve; None serves until `stop`. Default 1.
        max_lag: Most batches the producer runs ahead of the slowest consumer. Default 4.
        replay_batches: Leading batches of each epoch kept for late joiners. Default None:
            as many as fit in ``replay_bytes`` (and no more than one epoch).
        replay_bytes: Memory budget for replay when ``replay_batches`` is None. Default 256 MiB.
        wait_for: Consumers to wait for before the first batch. Default 1.
        device: Move each batch to this device once before sharing it, e.g. "cuda": CUDA
            batches reach consumers as CUDA IPC handles (no copy; consumers must not modify
            them in place, as all share the same memory). Default None: as the loader gives.
        log_every_s: Seconds between metrics lines on the ``sharing.producer`` logger.
            Default 30.

    Raises:
        ValueError: A bad argument; the message names it.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        endpoint: str | None = None,
        epochs: int | None = 1,
        max_lag: int = 4,
        replay_batches: int | None = None,
        replay_bytes: int = 256 << 20,
        wait_for: int = 1,
        device: str | torch.device | None = None,
        log_every_s: float = 30.0,
    ) -> None:
        _check_int("epochs", epochs, 1, allow_none=True)
        _check_int("max_lag", max_lag, 1)
        _check_int("replay_batches", replay_batches, 0, allow_none=True)
        _check_int("replay_bytes", replay_bytes, 0)
        _check_int("wait_for", wait_for, 1)
        if not hasattr(loader, "__iter__"):
            raise ValueError(f"loader must be an iterable of batches, got {type(loader).__name__}")
        self.loader = loader
        self.endpoint = endpoint or endpoints.default_endpoint()
        self.epochs, self.max_lag, self.wait_for = epochs, max_lag, wait_for
        self.device = None if device is None else torch.device(device)
        self.log_every_s = log_every_s
        self._replay_batches, self._replay_bytes = replay_batches, replay_bytes
        self._window: int | None = None  # replay window, fixed at the first batch
        self._listener = endpoints.listen(self.endpoint)
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._consumers: dict[int, _Consumer] = {}
        self._next_cid = 0
        self._batches: dict[int, _Batch] = {}
        self._producer_batch_size: int | None = None
        self._batches_per_epoch = _length(loader)
        self._epoch, self._index, self._seq = 0, 0, 0
        self._pending: tuple | None = None
        self._loader_done = False
        self._closed = False
        self._counters = {"produced": 0, "served": 0, "joined": 0, "left": 0, "lost": 0}
        self._cpu_start = time.process_time()

    # ------------------------------------------------------------------ public API

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self) -> None:
        """Ask `serve` to return soon (thread-safe); consumers then see the stream end."""
        self._stop.set()
        self._wake()

    def metrics(self) -> dict[str, Any]:
        """Batches produced and served, per-consumer lag, batches held, producer CPU s."""
        welcomed = [c for c in self._consumers.values() if c.welcomed]
        return {
            "batches_produced": self._counters["produced"],
            "batches_served": self._counters["served"],
            "consumers": len(welcomed),
            "consumers_joined": self._counters["joined"],
            "consumers_left": self._counters["left"],
            "consumers_lost": self._counters["lost"],
            "lag": {c.cid: len(c.live) for c in welcomed},
            "batches_held": len(self._batches),
            "bytes_held": sum(b.nbytes for b in self._batches.values()),
            "producer_cpu_s": time.process_time() - self._cpu_start,
        }

    def serve(self) -> None:
        """Serve until every epoch is delivered to the connected consumers, or `stop`.

        SIGTERM received meanwhile (in the main thread) ends serving like `stop`.

        Raises:
            ValueError: A batch cannot be shared (see the message).
            Exception: Whatever ``loader`` raised.
        """
        if self._closed:
            raise RuntimeError("this Producer is closed")
        restore = _on_sigterm(self.stop)
        loader_thread = threading.Thread(target=self._load, name="sharing-loader", daemon=True)
        loader_thread.start()
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "accept")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        last_check = last_log = time.monotonic()
        try:
            while not self._finished():
                for key, _ in selector.select(timeout=_LIVENESS_EVERY_S):
                    self._on_event(key, selector)
                now = time.monotonic()
                if now - last_check >= _LIVENESS_EVERY_S:
                    self._check_consumers(selector, now)
                    last_check = now
                self._produce(selector)
                self._flush_all(selector)
                if now - last_log >= self.log_every_s:
                    log.info("metrics %s", self.metrics())
                    last_log = now
            self._end_stream()
        finally:
            self._stop.set()
            restore()
            selector.close()
            # The loader thread sees the stop at its next batch and returns; that ends the
            # loader's iteration, which stops (and reaps) its worker processes.
            loader_thread.join(timeout=10.0)
            log.info("finished: %s", self.metrics())

    def close(self) -> None:
        """Disconnect consumers and release the socket and held batches (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for consumer in list(self._consumers.values()):
            consumer.sock.close()
        self._consumers.clear()
        self._batches.clear()
        self._listener.close()
        address = endpoints.parse(self.endpoint)
        if isinstance(address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
        self._wake_r.close()
        self._wake_w.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    # ------------------------------------------------------------------ loader thread

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a wake-up is already pending, or closed
            self._wake_w.send(b"x")

    def _put(self, item: tuple) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                self._wake()
                return True
            except queue.Full:
                continue
        return False

    def _load(self) -> None:
        """Loader thread: queue ("batch", epoch, index, batch) and ("end_epoch", epoch,
        count) items, then ("done",), or ("error", exception)."""
        try:
            epoch = 0
            while self.epochs is None or epoch < self.epochs:
                if hasattr(self.loader, "set_epoch"):
                    self.loader.set_epoch(epoch)
                count = 0
                for batch in self.loader:
                    if not self._put(("batch", epoch, count, batch)):
                        return
                    count += 1
                if not self._put(("end_epoch", epoch, count)):
                    return
                epoch += 1
            self._put(("done",))
        except BaseException as error:  # re-raised by serve() in the caller's thread
            self._put(("error", error))

    # ------------------------------------------------------------------ connections

    def _finished(self) -> bool:
        if self._stop.is_set():
            return True
        return self._loader_done and all(not c.outbox for c in self._consumers.values())

    def _on_event(self, key: selectors.SelectorKey, selector: selectors.BaseSelector) -> None:
        if key.data == "accept":
            self._accept(selector)
        elif key.data == "wake":
            with contextlib.suppress(BlockingIOError):
                while self._wake_r.recv(4096):
                    pass
        else:
            self._read(key.data, selector)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            pid, uid, _ = endpoints.peer_credentials(sock)
            if uid != os.getuid():
                log.warning("refused a connection from uid %d (pid %d)", uid, pid)
                sock.close()
                continue
            sock.setblocking(False)
            consumer = _Consumer(self._next_cid, sock, pid)
            self._next_cid += 1
            self._consumers[consumer.cid] = consumer
            selector.register(sock, selectors.EVENT_READ, consumer)

    def _read(self, consumer: _Consumer, selector: selectors.BaseSelector) -> None:
        while consumer.cid in self._consumers:
            try:
                message, fds = protocol.recv(consumer.sock)
            except (BlockingIOError, InterruptedError):
                return
            except ProtocolError as error:
                log.warning("consumer %d (pid %d): %s", consumer.cid, consumer.pid, error)
                self._send_error(consumer, "protocol", f"protocol error: {error}")
                self._drop(consumer, selector, "left")
                return
            except OSError:
                message, fds = None, []
            for fd in fds:  # consumers have no reason to send descriptors
                os.close(fd)
            if message is None:
                self._drop(consumer, selector, "lost" if consumer.welcomed else "left")
                return
            try:
                self._handle(consumer, message, selector)
            except ProtocolError as error:
                log.warning("consumer %d (pid %d): %s", consumer.cid, consumer.pid, error)
                self._send_error(consumer, "protocol", f"protocol error: {error}")
                self._drop(consumer, selector, "left")

    def _handle(self, consumer: _Consumer, message: dict, selector: selectors.BaseSelector) -> None:
        kind = message["type"]
        if kind == "hello" and consumer.hello is None:
            consumer.hello = message
            if self._window is not None:
                self._welcome(consumer, selector)
        elif kind == "release" and consumer.welcomed:
            self._release(consumer, message["seq"])
        elif kind == "leave" and consumer.welcomed:
            self._drop(consumer, selector, "left")
        else:
            raise ProtocolError(f"unexpected {kind!r} message")

    def _welcome(self, consumer: _Consumer, selector: selectors.BaseSelector) -> None:
        hello = consumer.hello
        assert hello is not None
        refusal = self._refusal(hello)
        if refusal is None:
            mode, start = self._join_plan(hello["late_join"])
            if mode == "refuse":
                refusal = (
                    "late_join",
                    f"joined at batch {self._index} of epoch {self._epoch}, but only the first "
                    f"{self._window} batches of an epoch are kept for replay; pass "
                    "late_join='auto' or 'next_epoch', or give the producer more replay_batches",
                )
        if refusal is not None:
            self._send_error(consumer, *refusal)
            self._drop(consumer, selector, "left")
            return
        epoch = self._epoch + 1 if mode == "next_epoch" else self._epoch
        welcome = protocol.encode(
            "welcome",
            version=protocol.PROTOCOL_VERSION,
            consumer_id=consumer.cid,
            batches_per_epoch=self._batches_per_epoch,
            epoch=epoch,
            start_index=start,
            mode=mode,
        )
        try:
            consumer.sock.send(welcome)
        except OSError:
            self._drop(consumer, selector, "lost")
            return
        consumer.welcomed = True
        self._counters["joined"] += 1
        if mode == "next_epoch":
            consumer.waiting_epoch = epoch
        elif mode == "replay":
            for seq, batch in sorted(self._batches.items()):
                if batch.epoch == self._epoch and batch.index < self._index:
                    self._enqueue(consumer, seq, live=False)
        log.info("consumer %d (pid %d) joined (%s)", consumer.cid, consumer.pid, mode)

    def _refusal(self, hello: dict) -> tuple[str, str] | None:
        """(code, reason) if the consumer cannot be served, else None."""
        if hello["version"] != protocol.PROTOCOL_VERSION:
            version = f"{hello['version']} != producer's {protocol.PROTOCOL_VERSION}"
            return "protocol", f"protocol version {version}"
        if hello["late_join"] not in LATE_JOIN_MODES:
            return (
                "bad_argument",
                f"late_join={hello['late_join']!r}; valid: {list(LATE_JOIN_MODES)}",
            )
        if self._loader_done:
            return "finished", "the producer has served all its epochs"
        size, base = hello["batch_size"], self._producer_batch_size
        if size is not None and size < 1:
            return "bad_argument", f"batch_size must be None or an integer >= 1, got {size}"
        if size is not None and base is not None and base % size and size % base:
            divisors = [d for d in range(1, base + 1) if base % d == 0]
            return "bad_argument", (
                f"batch_size={size} must divide or be a multiple of the producer's batch "
                f"size {base}: one of {divisors} or a multiple of {base}"
            )
        return None

    def _join_plan(self, late_join: str) -> tuple[str, int]:
        """(mode, first batch index) for a consumer joining now."""
        if self._index == 0:
            return "start", 0
        if self._index <= (self._window or 0):
            return "replay", 0
        if late_join == "replay":
            return "refuse", self._index
        if late_join == "next_epoch" or self._batches_per_epoch is None:
            return "next_epoch", 0
        return "wrap", self._index

    def _release(self, consumer: _Consumer, seq: int) -> None:
        if seq not in consumer.held:
            raise ProtocolError(f"release of batch {seq}, which this consumer does not hold")
        consumer.held.discard(seq)
        consumer.live.discard(seq)
        self._unref(consumer.cid, seq)

    def _unref(self, cid: int, seq: int) -> None:
        batch = self._batches.get(seq)
        if batch is None:
            return
        batch.refs.discard(cid)
        if not batch.refs and not batch.retained:
            del self._batches[seq]  # the memory goes once consumers drop their views too

    def _drop(self, consumer: _Consumer, selector: selectors.BaseSelector, why: str) -> None:
        """Forget a consumer and free everything it held (leave, death or protocol error)."""
        if self._consumers.pop(consumer.cid, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(consumer.sock)
        consumer.sock.close()
        for entry in consumer.outbox:
            if entry[0] == "batch":
                self._unref(consumer.cid, entry[1])
        for seq in list(consumer.held):
            self._unref(consumer.cid, seq)
        if consumer.welcomed:
            self._counters[why] += 1
            log.info("consumer %d (pid %d) %s", consumer.cid, consumer.pid, why)

    def _check_consumers(self, selector: selectors.BaseSelector, now: float) -> None:
        for consumer in list(self._consumers.values()):
            if not endpoints.pid_alive(consumer.pid):
                self._drop(consumer, selector, "lost")
            elif consumer.hello is None and now - consumer.connected_at > _HELLO_TIMEOUT_S:
                log.warning("dropped a connection that sent no hello (pid %d)", consumer.pid)
                self._drop(consumer, selector, "left")

    # ------------------------------------------------------------------ production

    def _produce(self, selector: selectors.BaseSelector) -> None:
        while True:
            if self._pending is None:
                try:
                    self._pending = self._queue.get_nowait()
                except queue.Empty:
                    return
            item = self._pending
            kind = item[0]
            if kind == "error":
                raise item[1]
            if kind == "done":
                self._loader_done = True
            elif kind == "end_epoch":
                self._finish_epoch(item[1], item[2])
            elif not self._place(item[1], item[2], item[3], selector):
                return
            self._pending = None

    def _active(self) -> list[_Consumer]:
        return [c for c in self._consumers.values() if c.welcomed]

    def _first_batch(self, batch: Any, nbytes: int, selector: selectors.BaseSelector) -> None:
        """Fix what the first batch determines, then answer the consumers waiting for it."""
        self._producer_batch_size = first_dim(batch)
        window = self._replay_batches
        if window is None:
            window = self._replay_bytes // max(nbytes, 1)
        if self._batches_per_epoch is not None:
            window = min(window, self._batches_per_epoch)
        self._window = window
        for consumer in list(self._consumers.values()):
            if consumer.hello is not None and not consumer.welcomed:
                self._welcome(consumer, selector)

    def _place(self, epoch: int, index: int, batch: Any, selector: selectors.BaseSelector) -> bool:
        """Share a batch and queue it for consumers; False if it must wait."""
        if self._window is None:
            self._first_batch(batch, _nbytes(batch), selector)
        active = self._active()
        if len(active) < (self.wait_for if self._seq == 0 else 1):
            return False
        if any(len(c.live) >= self.max_lag for c in active):
            return False
        if self.device is not None:
            batch = map_tensors(batch, lambda t: t.to(self.device))
        try:
            layout, fds, keep = describe(batch)
        except TypeError as error:
            raise ValueError(f"batch {index} of epoch {epoch}: {error}") from None
        seq = self._seq
        self._seq += 1
        self._epoch, self._index = epoch, index + 1
        assert self._window is not None
        shared = _Batch(epoch, index, layout, fds, keep, _nbytes(batch))
        shared.retained = index < self._window
        self._batches[seq] = shared
        for consumer in active:
            if consumer.waiting_epoch is not None:
                if epoch < consumer.waiting_epoch:
                    continue
                consumer.waiting_epoch = None
            self._enqueue(consumer, seq, live=True)
        if index >= self._window:
            self._end_retention()
        self._counters["produced"] += 1
        self._unref(-1, seq)  # drops it at once if nobody needs it
        return True

    def _enqueue(self, consumer: _Consumer, seq: int, *, live: bool) -> None:
        self._batches[seq].refs.add(consumer.cid)
        consumer.outbox.append(("batch", seq))
        if live:
            consumer.live.add(seq)

    def _end_retention(self) -> None:
        for seq, batch in list(self._batches.items()):
            if batch.retained:
                batch.retained = False
                self._unref(-1, seq)

    def _finish_epoch(self, epoch: int, count: int) -> None:
        if self._batches_per_epoch is None:
            self._batches_per_epoch = count
        self._end_retention()
        for consumer in self._active():
            if consumer.waiting_epoch is None or consumer.waiting_epoch <= epoch:
                consumer.outbox.append(("end_epoch", epoch, count))
        self._epoch, self._index = epoch + 1, 0

    # ------------------------------------------------------------------ sending

    def _flush_all(self, selector: selectors.BaseSelector) -> None:
        for consumer in self._active():
            self._flush(consumer, selector)

    def _record(self, entry: tuple) -> tuple[bytes, list[int]]:
        if entry[0] == "batch":
            seq = entry[1]
            batch = self._batches[seq]
            body = protocol.encode(
                "batch", seq=seq, epoch=batch.epoch, index=batch.index, layout=batch.layout
            )
            return body, batch.fds
        if entry[0] == "end_epoch":
            return protocol.encode("end_epoch", epoch=entry[1], batches=entry[2]), []
        return protocol.encode("end"), []

    def _flush(self, consumer: _Consumer, selector: selectors.BaseSelector) -> None:
        """Send the consumer's queued messages until its socket is full."""
        while consumer.outbox:
            entry = consumer.outbox[0]
            body, fds = self._record(entry)
            try:
                if fds:
                    socket.send_fds(consumer.sock, [body], fds)
                else:
                    consumer.sock.send(body)
            except BlockingIOError:
                return
            except OSError:
                self._drop(consumer, selector, "lost")
                return
            consumer.outbox.popleft()
            if entry[0] == "batch":
                consumer.held.add(entry[1])
                self._counters["served"] += 1

    def _send_error(self, consumer: _Consumer, code: str, reason: str) -> None:
        with contextlib.suppress(OSError):
            consumer.sock.settimeout(1.0)
            protocol.send(consumer.sock, "error", code=code, reason=reason)

    def _end_stream(self) -> None:
        """Tell every consumer the stream has ended (their queued batches were all sent)."""
        for consumer in self._active():
            with contextlib.suppress(OSError):
                consumer.sock.settimeout(1.0)
                protocol.send(consumer.sock, "end")


def _nbytes(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if hasattr(batch, "nbytes") and not isinstance(batch, (str, bytes)):
        return int(batch.nbytes)
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(_nbytes(v) for v in batch)
    return 0


def _length(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:
        return None


def _check_int(name: str, value: object, low: int, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        valid = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {valid}, got {value!r}")


def _on_sigterm(callback: Callable[[], None]) -> Callable[[], Any]:
    """Route SIGTERM to ``callback`` while serving (main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        callback()

    signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
