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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sharing import endpoint as endpoints
from sharing import protocol
from sharing.errors import ProtocolError
from sharing.layout import batch_nbytes, first_dim, pack
from sharing.ring import Ring

__all__ = ["Producer"]

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
    reader: protocol.FrameReader = field(default_factory=protocol.FrameReader)
    connected_at: float = field(default_factory=time.monotonic)
    welcomed: bool = False
    hello: dict | None = None  # received before the ring existed: answered once it does
    waiting_epoch: int | None = None  # joins the stream at this epoch's first batch
    outbox: deque = field(default_factory=deque)  # ("batch", seq, live) | ("end_epoch", e, n)
    held: set[int] = field(default_factory=set)  # sent, not yet released
    live: set[int] = field(default_factory=set)  # live (not replayed) seqs in outbox or held
    served: int = 0
    sendbuf: bytearray = field(default_factory=bytearray)


@dataclass
class _Batch:
    slot: int
    epoch: int
    index: int
    layout: dict


class Producer:
    """Serve the batches of ``loader`` to every `Consumer` connected to ``endpoint``.

    The producer iterates ``loader`` once per epoch (in a background thread) and copies each
    batch once into a slot of a shared-memory ring; consumers receive a small message naming
    the slot and map the batch without copying. Every consumer receives every batch of every
    epoch exactly once, in one order, the tail included. The producer waits for at least
    ``wait_for`` consumers before it starts, pauses while none is connected, and never runs
    more than ``max_lag`` batches ahead of the slowest consumer.

    A consumer that joins mid-epoch starts at once: if the batches it missed are still held
    for replay (the first ``replay_batches`` of each epoch are kept until the producer moves
    past them) it receives them first, then the live stream; otherwise, with
    ``late_join="auto"``, its first epoch runs from where it joined into the next producer
    epoch, which covers each sample exactly once when ``loader`` yields the same batches every
    epoch. Replay costs memory, not CPU: ``replay_batches`` slots of the largest batch's size.

    Args:
        loader: Any re-iterable of batches (tuples, lists or dicts of tensors / numpy arrays,
            plus JSON scalars), e.g. a DataLoader. If it has ``set_epoch``, it is called
            before each epoch.
        endpoint: ``unix:@NAME`` (abstract socket, default: a fresh name) or ``unix:/PATH``.
        epochs: Epochs to serve; None serves until `stop`. Default 1.
        max_lag: Most batches the producer runs ahead of the slowest consumer. Default 4.
        replay_batches: Leading batches of each epoch kept for late joiners. Default None:
            as many as fit in ``replay_bytes`` (and no more than one epoch).
        replay_bytes: Memory budget for replay when ``replay_batches`` is None. Default 256 MiB.
        slot_bytes: Size of a ring slot. Default None: the first batch's size; a later batch
            larger than that is an error that names this argument.
        wait_for: Consumers to wait for before the first batch. Default 1.
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
        slot_bytes: int | None = None,
        wait_for: int = 1,
        log_every_s: float = 30.0,
    ) -> None:
        _check_int("epochs", epochs, 1, allow_none=True)
        _check_int("max_lag", max_lag, 1)
        _check_int("replay_batches", replay_batches, 0, allow_none=True)
        _check_int("replay_bytes", replay_bytes, 0)
        _check_int("slot_bytes", slot_bytes, 1, allow_none=True)
        _check_int("wait_for", wait_for, 1)
        if not hasattr(loader, "__iter__"):
            raise ValueError(f"loader must be an iterable of batches, got {type(loader).__name__}")
        self.loader = loader
        self.endpoint = endpoint or endpoints.default_endpoint()
        self.epochs, self.max_lag, self.wait_for = epochs, max_lag, wait_for
        self._replay_batches, self._replay_bytes = replay_batches, replay_bytes
        self._slot_bytes = slot_bytes
        self.log_every_s = log_every_s
        self._listener = endpoints.listen(self.endpoint)
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._consumers: dict[int, _Consumer] = {}
        self._next_cid = 0
        self._batches: dict[int, _Batch] = {}
        self._ring: Ring | None = None
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
        """Batches produced and served, per-consumer lag, ring occupancy, producer CPU s."""
        ring = self._ring
        return {
            "batches_produced": self._counters["produced"],
            "batches_served": self._counters["served"],
            "consumers": len([c for c in self._consumers.values() if c.welcomed]),
            "consumers_joined": self._counters["joined"],
            "consumers_left": self._counters["left"],
            "consumers_lost": self._counters["lost"],
            "lag": {c.cid: len(c.live) for c in self._consumers.values() if c.welcomed},
            "slots_occupied": ring.occupied if ring else 0,
            "slots": len(ring.slots) if ring else 0,
            "producer_cpu_s": time.process_time() - self._cpu_start,
        }

    def serve(self) -> None:
        """Serve until every epoch is delivered to the connected consumers, or `stop`.

        SIGTERM received meanwhile (in the main thread) ends serving like `stop`.

        Raises:
            ValueError: A batch does not fit a slot (see ``slot_bytes``) or cannot be shared.
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
            self._end_stream(selector)
        finally:
            self._stop.set()
            restore()
            selector.close()
            log.info("finished: %s", self.metrics())

    def close(self) -> None:
        """Disconnect consumers and release the socket and the ring (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for consumer in list(self._consumers.values()):
            consumer.sock.close()
        self._consumers.clear()
        self._listener.close()
        address = endpoints.parse(self.endpoint)
        if isinstance(address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
        self._wake_r.close()
        self._wake_w.close()
        if self._ring is not None:
            self._ring.close()

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
        """Loader thread: fill the queue with ("batch", epoch, index, batch), ("end_epoch",
        epoch, count), then ("done",) or ("error", exception)."""
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

    # ------------------------------------------------------------------ serve loop

    def _finished(self) -> bool:
        if self._stop.is_set():
            return True
        if not self._loader_done:
            return False
        return all(not c.outbox for c in self._consumers.values())

    def _on_event(self, key: selectors.SelectorKey, selector: selectors.BaseSelector) -> None:
        if key.data == "accept":
            self._accept(selector)
        elif key.data == "wake":
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
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
        try:
            data = consumer.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(consumer, selector, "lost" if consumer.welcomed else "left")
            return
        try:
            for message in consumer.reader.feed(data):
                self._handle(consumer, message, selector)
                if consumer.cid not in self._consumers:
                    return
        except ProtocolError as error:
            log.warning(
                "consumer %d (pid %d) sent a bad message: %s", consumer.cid, consumer.pid, error
            )
            self._send_error(consumer, "protocol", f"protocol error: {error}")
            self._drop(consumer, selector, "left")

    def _handle(self, consumer: _Consumer, message: dict, selector: selectors.BaseSelector) -> None:
        kind = message["type"]
        if kind == "hello" and not consumer.welcomed and consumer.hello is None:
            consumer.hello = message
            if self._ring is not None:
                self._welcome(consumer, message, selector)
        elif kind == "release" and consumer.welcomed:
            self._release(consumer, message["seq"])
        elif kind == "leave" and consumer.welcomed:
            self._drop(consumer, selector, "left")
        else:
            raise ProtocolError(f"unexpected {kind!r} message")

    def _welcome(self, consumer: _Consumer, hello: dict, selector: selectors.BaseSelector) -> None:
        refusal = self._refusal(hello)
        if refusal is not None:
            self._send_error(consumer, *refusal)
            self._drop(consumer, selector, "left")
            return
        mode, start = self._join_plan(hello["late_join"])
        if mode == "refuse":
            self._send_error(
                consumer,
                "late_join",
                f"joined at batch {self._index} of epoch {self._epoch}, but only the first "
                f"{self._replay_window()} batches of an epoch are kept for replay; pass "
                "late_join='auto' or 'next_epoch', or give the producer more replay_batches",
            )
            self._drop(consumer, selector, "left")
            return
        ring = self._ring
        assert ring is not None
        welcome = protocol.encode(
            "welcome",
            version=protocol.PROTOCOL_VERSION,
            consumer_id=consumer.cid,
            slot_bytes=ring.slot_bytes,
            slots=len(ring.slots),
            batches_per_epoch=self._batches_per_epoch,
            epoch=self._epoch if mode != "next_epoch" else self._epoch + 1,
            start_index=start,
            mode=mode,
        )
        consumer.sock.setblocking(True)
        try:
            socket.send_fds(consumer.sock, [welcome], [ring.fd])
        except OSError:
            self._drop(consumer, selector, "lost")
            return
        finally:
            if consumer.cid in self._consumers:
                consumer.sock.setblocking(False)
        consumer.welcomed = True
        self._counters["joined"] += 1
        if mode == "next_epoch":
            consumer.waiting_epoch = self._epoch + 1
        elif mode == "replay":
            for seq, batch in sorted(self._batches.items()):
                if batch.epoch == self._epoch and batch.index < self._index:
                    self._enqueue(consumer, seq, live=False)
        log.info(
            "consumer %d (pid %d) joined: %s at epoch %d batch %d",
            consumer.cid,
            consumer.pid,
            mode,
            self._epoch,
            start,
        )

    def _refusal(self, hello: dict) -> tuple[str, str] | None:
        """(code, reason) if the consumer cannot be served, else None."""
        if hello["version"] != protocol.PROTOCOL_VERSION:
            version = f"{hello['version']} != producer's {protocol.PROTOCOL_VERSION}"
            return "protocol", f"protocol version {version}"
        if hello["late_join"] not in LATE_JOIN_MODES:
            return "bad_argument", (
                f"late_join={hello['late_join']!r}; valid: {list(LATE_JOIN_MODES)}"
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
        if self._index <= self._replay_window():
            return "replay", 0
        if late_join == "replay":
            return "refuse", self._index
        if late_join == "next_epoch" or self._batches_per_epoch is None:
            return "next_epoch", 0
        return "wrap", self._index

    def _replay_window(self) -> int:
        if self._replay_batches is not None:
            window = self._replay_batches
        else:
            window = self._replay_bytes // (self._slot_bytes or 1)
        if self._batches_per_epoch is not None:
            window = min(window, self._batches_per_epoch)
        return window

    def _release(self, consumer: _Consumer, seq: int) -> None:
        if seq not in consumer.held:
            raise ProtocolError(f"release of batch {seq}, which this consumer does not hold")
        consumer.held.discard(seq)
        consumer.live.discard(seq)
        self._unref(consumer.cid, seq)

    def _unref(self, cid: int, seq: int) -> None:
        batch = self._batches.get(seq)
        if batch is None or self._ring is None:
            return
        slot = self._ring.slots[batch.slot]
        slot.refs.discard(cid)
        if slot.free:
            del self._batches[seq]
            slot.seq = None

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
                self._pending = None
                return
            if kind == "end_epoch":
                self._finish_epoch(item[1], item[2])
                self._pending = None
                continue
            if not self._place(item[1], item[2], item[3], selector):
                return
            self._pending = None

    def _active(self) -> list[_Consumer]:
        return [c for c in self._consumers.values() if c.welcomed]

    def _place(self, epoch: int, index: int, batch: Any, selector: selectors.BaseSelector) -> bool:
        """Copy a batch into a free slot and queue it for consumers; False if it must wait."""
        if self._ring is None:
            self._create_ring(batch)
            for consumer in list(self._consumers.values()):
                if consumer.hello is not None and not consumer.welcomed:
                    self._welcome(consumer, consumer.hello, selector)
        active = self._active()
        if len(active) < (self.wait_for if self._seq == 0 else 1):
            return False
        if any(len(c.live) >= self.max_lag for c in active):
            return False
        ring = self._ring
        assert ring is not None
        slot_index = ring.free_slot()
        if slot_index is None:
            return False
        size = batch_nbytes(batch)
        if size > ring.slot_bytes:
            raise ValueError(
                f"batch {index} of epoch {epoch} takes {size} bytes but a slot has "
                f"{ring.slot_bytes}; pass slot_bytes= at least the largest batch's size"
            )
        try:
            layout, _ = pack(batch, ring.buffer, ring.offset(slot_index))
        except TypeError as error:
            raise ValueError(str(error)) from None
        seq = self._seq
        self._seq += 1
        self._epoch, self._index = epoch, index + 1
        slot = ring.slots[slot_index]
        slot.seq, slot.retained = seq, index < self._replay_window()
        self._batches[seq] = _Batch(slot_index, epoch, index, layout)
        for consumer in active:
            if consumer.waiting_epoch is not None:
                if epoch < consumer.waiting_epoch:
                    continue
                consumer.waiting_epoch = None
            self._enqueue(consumer, seq, live=True)
        if index >= self._replay_window():
            self._end_retention(epoch)
        self._counters["produced"] += 1
        self._unref(-1, seq)  # frees the slot at once if nobody needs it
        return True

    def _create_ring(self, batch: Any) -> None:
        self._slot_bytes = self._slot_bytes or max(batch_nbytes(batch), 64)
        slots = self._replay_window() + self.max_lag + 1
        self._ring = Ring(slots, self._slot_bytes)
        self._producer_batch_size = first_dim(batch)
        log.info("ring: %d slots of %d bytes", slots, self._slot_bytes)

    def _enqueue(self, consumer: _Consumer, seq: int, *, live: bool) -> None:
        batch = self._batches[seq]
        assert self._ring is not None
        self._ring.slots[batch.slot].refs.add(consumer.cid)
        consumer.outbox.append(("batch", seq))
        if live:
            consumer.live.add(seq)

    def _end_retention(self, epoch: int) -> None:
        for seq, batch in list(self._batches.items()):
            if batch.epoch <= epoch and self._ring is not None:
                slot = self._ring.slots[batch.slot]
                if slot.retained:
                    slot.retained = False
                    self._unref(-1, seq)

    def _finish_epoch(self, epoch: int, count: int) -> None:
        if self._batches_per_epoch is None and epoch == 0:
            self._batches_per_epoch = count
        self._end_retention(epoch)
        for consumer in self._active():
            if consumer.waiting_epoch is None or consumer.waiting_epoch <= epoch:
                consumer.outbox.append(("end_epoch", epoch, count))
        self._epoch, self._index = epoch + 1, 0

    # ------------------------------------------------------------------ sending

    def _flush_all(self, selector: selectors.BaseSelector) -> None:
        for consumer in list(self._consumers.values()):
            if consumer.welcomed:
                self._flush(consumer, selector)

    def _flush(self, consumer: _Consumer, selector: selectors.BaseSelector) -> None:
        """Send the consumer's queued messages (live batches were queued within max_lag)."""
        while consumer.outbox:
            entry = consumer.outbox[0]
            if entry[0] == "batch":
                seq = entry[1]
                batch = self._batches[seq]
                consumer.sendbuf += protocol.encode(
                    "batch", seq=seq, epoch=batch.epoch, index=batch.index,
                    slot=batch.slot, layout=batch.layout,
                )  # fmt: skip
                consumer.held.add(seq)
                consumer.served += 1
                self._counters["served"] += 1
            elif entry[0] == "end_epoch":
                consumer.sendbuf += protocol.encode("end_epoch", epoch=entry[1], batches=entry[2])
            else:
                consumer.sendbuf += protocol.encode("end")
            consumer.outbox.popleft()
        if consumer.sendbuf:
            try:
                sent = consumer.sock.send(consumer.sendbuf)
                del consumer.sendbuf[:sent]
            except BlockingIOError:
                pass
            except OSError:
                self._drop(consumer, selector, "lost")

    def _send_error(self, consumer: _Consumer, code: str, reason: str) -> None:
        try:
            consumer.sock.setblocking(True)
            consumer.sock.settimeout(1.0)
            protocol.send(consumer.sock, "error", code=code, reason=reason)
        except OSError:
            pass

    def _end_stream(self, selector: selectors.BaseSelector) -> None:
        """Tell every consumer the stream has ended and push out what is still buffered."""
        deadline = time.monotonic() + 5.0
        for consumer in self._active():
            consumer.outbox.append(("end",))
            self._flush(consumer, selector)
        for consumer in self._active():
            consumer.sock.setblocking(True)
            consumer.sock.settimeout(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(OSError):
                consumer.sock.sendall(consumer.sendbuf)


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


def _on_sigterm(callback) -> Any:
    """Route SIGTERM to ``callback`` while serving (main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        callback()

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)
