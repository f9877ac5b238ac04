"""`Producer`: runs one input pipeline and serves every batch to all connected consumers."""

from __future__ import annotations

import contextlib
import logging
import math
import selectors
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

import torch

from sharing import endpoint as endpoints
from sharing import lifetime, policy, protocol
from sharing.again import Again, CatchUps, Reloader, missed, reload_refusal, repeats
from sharing.args import accepting_former_names, check_seconds, check_stream, signature_of_init
from sharing.copied import SegmentCopier, out_of_shm
from sharing.errors import ProtocolError
from sharing.layout import nbytes
from sharing.loading import EpochEnd, Loaded, LoaderDone, LoaderFailed, LoaderThread, Owed, length
from sharing.peers import Peer, Peers, SendBatch, SendEndEpoch
from sharing.policy import Join, Position, Refusal, replay_window
from sharing.pooled import PooledLoader, dataset_producer
from sharing.store import BatchStore, SharedBatch, discard, share

__all__ = ["LATE_JOIN_MODES", "Producer"]

log = logging.getLogger("sharing.producer")

LATE_JOIN_MODES = protocol.LATE_JOIN_MODES  # kept importable from here for older callers
_HELLO_TIMEOUT_S = 2.0
_MAX_DETAIL_CHARS = 2000
_LIVENESS_EVERY_S = 0.2


@signature_of_init
class Producer:
    """Serve the batches of ``loader`` to every `Consumer` connected to ``endpoint``.

    The producer iterates ``loader`` once per epoch in a background thread. Every batch lies
    in a recycled anonymous memory segment, never in /dev/shm (64 MB in many containers): a
    DataLoader's workers collate straight into one (`sharing.lending`; its ``collate_fn`` is
    wrapped while served), any other loader's batch is copied into one as it arrives
    (`sharing.copied`). Consumers receive a segment's descriptor once, keep it mapped, and
    read each batch in it without copying it. Every consumer receives every batch of every
    epoch exactly once, in one order, the tail included. The producer waits for ``consumers``
    consumers before it starts, pauses while none is connected, and never runs more than
    ``max_lag`` batches ahead of the slowest consumer, so it holds at most ``max_lag`` batches
    per consumer plus the replay window in memory.

    A consumer that joins mid-epoch starts at once: if the batches it missed are still held
    for replay (the first ``replay_batches`` of each epoch are kept until the producer moves
    past them) it receives them first, then the live stream. Otherwise, with
    ``late_join="auto"``, its epoch still holds exactly the producer's samples, or it is
    refused: when ``loader`` yields the same batches every epoch (unshuffled), each of its
    epochs runs from where it joined into the next producer epoch ("wrap"; after the last
    epoch the producer loads the leading batches that a wrapped consumer's last epoch still
    needs, for those consumers alone, counted in `metrics` as ``batches_for_late_joiners``);
    when ``set_epoch(epoch)`` fixes its order (a seeded sampler, `from_dataset`'s shuffle),
    the batches it missed are loaded again for it alone before its live stream ("reload",
    ``batches_loaded_again``); an unseeded shuffle cannot draw them again, and the join
    raises `LateJoinError` (start consumers together: ``consumers``, ``join_grace_s``).
    Replay costs memory, not CPU: ``replay_batches`` batches.

    The stream ends loudly: a consumer that asks for an epoch after the last raises
    `StreamEnded`, one whose epoch the end cuts short (`stop`, a failing loader) raises
    `SharingError`, and once `serve` returns, for whatever reason, every consumer is told and
    disconnected at once and nothing listens at ``endpoint`` any more.

    Whatever a connected process sends, the worst it can cause is the loss of its own
    connection: malformed, oversized, unknown or out-of-order messages drop that peer.

    Args:
        loader: Any re-iterable of batches (tuples, lists or dicts of CPU tensors or numpy
            arrays, plus JSON scalars), e.g. a DataLoader. If it has ``set_epoch``, that is
            called before each epoch.
        endpoint: ``unix:@NAME`` (abstract socket, default: a fresh name) or ``unix:/PATH``
            (a stale socket file there, left by a killed producer, is replaced); or
            ``ray:NAME``: serve across hosts through Ray's object store
            (`sharing.ray_backend.RayProducer`, which also takes ``max_bytes`` and
            ``lease_s``, and not ``device``).
        epochs: Epochs to serve; None serves until `stop` or `finish`. Default 1.
        max_lag: Most batches the producer runs ahead of the slowest consumer. Default 4.
        replay_batches: Leading batches of each epoch kept for late joiners. Default None:
            as many as fit in ``replay_bytes`` (and no more than one epoch).
        replay_bytes: Memory budget for replay when ``replay_batches`` is None. Default 256 MiB.
        consumers: How many consumers to wait for before the first batch. Default 1. (Its
            former name, ``wait_for``, is still accepted, with a DeprecationWarning.)
        join_grace_s: Before the first batch, also wait until no consumer has said hello for
            this long, so that consumers started within it of each other all start with the
            stream's first batch (a shuffled loader's epochs are then exact for all of them).
            Default 0.
        device: Move each batch to this device once before sharing it, e.g. "cuda": CUDA
            batches reach consumers as CUDA IPC handles (no copy; consumers must not modify
            them in place, as all share the same memory). Default None: as the loader gives
            (a loader's own CUDA tensors are shared too, once their device has finished the
            work that made them, on whatever stream: `sharing.cuda_share.settle`).
        cuda_release_s: A consumer's CUDA tensors are this process's memory: once the stream
            has ended, the producer waits until no consumer process holds one (torch's
            counters of the references it sent are all 0: every tensor let go of, its queued
            GPU work run, or its process exited), at most this long, then logs a warning
            naming those still holding some. Default 60.
        log_every_s: Seconds between metrics lines on the ``sharing.producer`` logger.
            Default 30.

    Raises:
        ValueError: A bad argument; the message names it.
        OSError: Another producer listens at ``endpoint``, or a non-socket file is there.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Producer:
        # endpoint="ray:NAME": the Ray backend's producer (its __init__ then runs with these)
        backend = endpoints.backend_class(kwargs.get("endpoint"), "PRODUCER")
        return object.__new__(backend if cls is Producer and backend is not None else cls)

    @accepting_former_names
    def __init__(
        self,
        loader: Iterable[Any],
        *,
        endpoint: str | None = None,
        epochs: int | None = 1,
        max_lag: int = 4,
        replay_batches: int | None = None,
        replay_bytes: int = 256 << 20,
        consumers: int = 1,
        join_grace_s: float = 0.0,
        device: str | torch.device | None = None,
        cuda_release_s: float = 60.0,
        log_every_s: float = 30.0,
    ) -> None:
        check_stream(epochs, max_lag, replay_batches, replay_bytes, consumers, join_grace_s)
        check_seconds(cuda_release_s, "cuda_release_s")
        if not hasattr(loader, "__iter__"):
            raise ValueError(f"loader must be an iterable of batches, got {type(loader).__name__}")
        self.loader = loader
        self.endpoint = endpoint or endpoints.default_endpoint()
        self.epochs, self.max_lag, self.consumers = epochs, max_lag, consumers
        self.join_grace_s = float(join_grace_s)
        self._last_hello = -math.inf
        self.device = None if device is None else torch.device(device)
        self.cuda_release_s = cuda_release_s
        self.log_every_s = log_every_s
        self._replay_batches, self._replay_bytes = replay_batches, replay_bytes
        self._window: int | None = None  # replay window, fixed at the first batch
        self._listener = endpoints.listen(self.endpoint)
        lifetime.sweep_temp_dirs()  # what a killed producer's loader workers left
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        # A loader's batches go into recycled segments as they arrive (none held in /dev/shm;
        # a DataLoader's workers collate into them, `sharing.lending`; others' are copied),
        # from_dataset's are made in them, and device batches are shared as they are.
        pooled, copier = isinstance(loader, PooledLoader), None
        if self.device is None and not pooled:
            copier = SegmentCopier(loader)
        self._copier = copier
        # the segments batches are served from: the dataset loader's, or the copies'
        self._pool = copier.pool if copier else loader.pool if pooled else None
        adopt, drop = (copier.copy, copier.drop) if copier else (None, None)
        lock = copier.lock() if copier else threading.Lock()  # iterations start under it
        self._loading = LoaderThread(loader, epochs, self._wake, adopt=adopt, lock=lock)
        self._catchups = CatchUps(
            Reloader(loader, lock, self._wake, adopt=adopt, drop=drop), max_lag,
            self._place_again, lambda batch: discard(batch, self._pool),
        )  # fmt: skip
        self._repeats, self._reload_refusal = repeats(loader), reload_refusal(loader)
        self._store = BatchStore()
        self._peers = Peers(self._listener, self._store, _HELLO_TIMEOUT_S)
        self._peers.on_drop = self._catchups.reloader.cancel
        self._batches_per_epoch = length(loader)
        self._epoch, self._index, self._seq = 0, 0, 0
        self._pending: Any = None
        self._loader_done = False  # every epoch loaded (owed batches may follow)
        self._owing = False  # owed batches for wrapped consumers are being loaded
        self._listening = True
        self._closed = False
        self._pid = lifetime.opened(self)
        self._serving: threading.Thread | None = None  # the thread inside serve(), if any
        self._served = threading.Event()  # set while no thread is inside serve()
        self._served.set()
        self._counters = {"produced": 0, "served": 0, "owed": 0, "again": 0}
        self._pooled: PooledLoader | None = None  # from_dataset's loader, closed with us
        self._cpu_start = time.process_time()

    @classmethod
    def from_dataset(cls, dataset: Any, **kwargs: Any) -> Producer:
        """A producer that reads a map-style ``dataset`` itself, its workers collating each
        batch straight into a pool of recycled shared-memory segments that consumers keep
        mapped (`sharing.pooled`, `sharing.segments`): no fresh memory per batch for the
        workers to fault in, no descriptor handshake, no pages for consumers to map anew. A
        segment is reused only once every consumer has let go of the batch in it, tensors
        a consumer keeps included. Consumers and their guarantees are the same as with
        ``Producer(DataLoader(dataset, ...))``::

            Producer.from_dataset(dataset, batch_size=64, num_workers=4, epochs=10)

        Args:
            dataset: Any object with ``__len__`` and ``__getitem__(int)``.
            **kwargs: `sharing.pooled.PooledLoader`'s arguments, as DataLoader's
                (``batch_size``, required; ``shuffle``, ``sampler``, ``drop_last``,
                ``num_workers``, ``collate_fn``, ``worker_init_fn``, ``seed``,
                ``prefetch_factor``, ``multiprocessing_context``), and `Producer`'s
                (``epochs``, ``max_lag``, ...) but ``device``: these batches are served from
                CPU memory.

        Raises:
            ValueError: A bad argument (the message names it).
            TypeError: An argument neither takes, or no ``batch_size``.
        """
        return dataset_producer(cls, dataset, kwargs)

    # ------------------------------------------------------------------ public API

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self) -> None:
        """Ask `serve` to return soon (thread-safe); consumers then see the stream end, and
        one in the middle of an epoch raises `SharingError` (`finish` ends cleanly)."""
        self._stop.set()
        self._wake()

    def finish(self) -> None:
        """Serve the epoch in progress to the end, then end the stream (thread-safe); an
        epoch the loader has not begun is not served."""
        self._loading.finish()
        self._wake()

    def connected(self) -> int:
        """Consumers connected now (thread-safe)."""
        return len(self._peers)

    def metrics(self) -> dict[str, Any]:
        """Batches produced and served (``batches_for_late_joiners``: those of the produced
        that were loaded after the last epoch only for wrapped consumers;
        ``batches_loaded_again``: those loaded again for a consumer that joined past the
        replay window), consumers, their lag, batches held, producer CPU s."""
        welcomed = self._peers.active()
        metrics = {
            "batches_produced": self._counters["produced"],
            "batches_served": self._counters["served"],
            "batches_for_late_joiners": self._counters["owed"],
            "batches_loaded_again": self._counters["again"],
            "consumers": len(welcomed),
            "consumers_joined": self._peers.counts["joined"],
            "consumers_left": self._peers.counts["left"],
            "consumers_lost": self._peers.counts["lost"],
            "lag": {c.cid: len(c.live) for c in welcomed},
            "batches_held": len(self._store),
            "bytes_held": self._store.nbytes,
            "producer_cpu_s": time.process_time() - self._cpu_start,
        }
        if self._pool is not None:
            metrics.update(segments=len(self._pool), segment_bytes=self._pool.nbytes)
        if self._copier is not None:
            metrics.update(self._copier.metrics())
        return metrics

    def serve(self) -> None:
        """Serve until every epoch is delivered to the connected consumers, or `stop`.

        SIGTERM received meanwhile (in the main thread) ends serving like `stop`. However it
        returns, it first tells every consumer why the stream ended (finished, stopped, or the
        loader's error), disconnects them and stops listening, so none waits on a producer
        that no longer serves. A Producer serves once.

        Raises:
            ValueError: A batch cannot be shared (see the message).
            Exception: Whatever ``loader`` raised.
        """
        if self._closed:
            raise RuntimeError("this Producer is closed")
        restore = lifetime.on_sigterm(self.stop)
        self._loading.start()
        self._peers.selector = selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "accept")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        last_check = last_log = time.monotonic()
        self._serving = threading.current_thread()
        self._served.clear()
        reason, detail = "stopped", ""
        try:
            while not self._finished():
                for key, _ in selector.select(timeout=_LIVENESS_EVERY_S):
                    self._on_event(key)
                now = time.monotonic()
                if now - last_check >= _LIVENESS_EVERY_S:
                    self._peers.check(now)
                    last_check = now
                self._produce()
                for peer in self._peers.active():
                    self._flush(peer)
                if now - last_log >= self.log_every_s:
                    log.info("metrics %s", self.metrics())
                    last_log = now
            if not self._stop.is_set():
                reason = "finished"  # every queued batch was sent
        except BaseException as error:
            reason, detail = "failed", f"{type(error).__name__}: {error}"
            raise
        finally:
            self._stop.set()
            self._loading.stop()
            self._catchups.reloader.stop()
            try:
                # Before anything that may wait (the loader's thread can be stuck in its
                # loader): consumers must not wait on a producer that serves no more.
                self._end_stream(reason, detail)
                restore()
                selector.close()
                self._peers.selector = None
                # The loader thread sees the stop at its next batch and returns; that ends the
                # loader's iteration, which stops (and reaps) its worker processes.
                self._loading.join(timeout=10.0)
                self._catchups.reloader.join(timeout=10.0)
                log.info("finished: %s", self.metrics())
            finally:
                self._served.set()

    def close(self) -> None:
        """Disconnect consumers and release the socket and held batches (idempotent).

        Called from another thread than `serve`'s, it stops serving and waits for `serve` to
        return (at most 10 s more than ``cuda_release_s``, which it may wait for consumers
        of CUDA batches to leave) and the loader's iteration to end."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._loading.stop()
        self._catchups.reloader.stop()
        # Nothing may go on running the loader's code (at exit, a thread caught inside a torch
        # op while the interpreter finalizes aborts the process).
        if self._serving is not threading.current_thread():
            self._served.wait(timeout=10.0 + self.cuda_release_s)
        if self._pooled is not None:  # first: a worker stuck in the dataset holds no one up
            self._pooled.close()
        self._loading.join(timeout=10.0)
        self._catchups.reloader.join(timeout=10.0)
        self._peers.close()
        self._store.clear()
        if self._copier is not None:
            self._copier.close()
        self._stop_listening()
        self._wake_r.close()
        self._wake_w.close()

    def __del__(self) -> None:
        # As Consumer.__del__: a forked copy must not unlink its parent's socket.
        if not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):
                if lifetime.owns(self._pid):
                    self.close()

    # ------------------------------------------------------------------ connections

    def _end_stream(self, reason: str, detail: str) -> None:
        """Tell every consumer that the stream ended and why (without waiting on any: one
        whose socket is full learns it from the closed connection), disconnect them all, and
        stop listening."""
        if reason != "stopped":
            log.log(logging.INFO if reason == "finished" else logging.ERROR,
                    "stream %s%s", reason, f": {detail}" if detail else "")  # fmt: skip
        if len(detail) > _MAX_DETAIL_CHARS:  # a worker's traceback: its start and its end
            cut = _MAX_DETAIL_CHARS // 4
            detail = f"{detail[:cut]} [...] {detail[cut - _MAX_DETAIL_CHARS :]}"
        end = protocol.encode("end", reason=reason, detail=detail)
        how = {"finished": "finished its stream", "stopped": "was stopped"}.get(reason, reason)
        refusal = protocol.encode(
            "error",
            code="finished",
            reason=f"the producer {how}{f' ({detail})' if detail else ''} before its first "
            "batch reached this consumer",
        )
        untold = []
        for peer in self._peers:
            if peer.welcomed or peer.hello is not None:
                try:
                    peer.sock.send(end if peer.welcomed else refusal, socket.MSG_DONTWAIT)
                except OSError:
                    untold.append(peer)
        self._stop_listening()
        self._peers.await_cuda_release(end, untold, self._read, self.cuda_release_s)
        self._peers.close()

    def _stop_listening(self) -> None:
        if self._listening:
            self._listening = False
            self._listener.close()
            endpoints.unlink(self.endpoint)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a wake-up is already pending, or closed
            self._wake_w.send(b"x")

    def _finished(self) -> bool:
        if self._stop.is_set():
            return True
        return (
            self._loader_done
            and not self._owing
            and all(not (p.outbox or p.catchup) for p in self._peers)
        )

    def _on_event(self, key: selectors.SelectorKey) -> None:
        if key.data == "accept":
            self._peers.accept()
        elif key.data == "wake":
            with contextlib.suppress(BlockingIOError):
                while self._wake_r.recv(4096):
                    pass
        else:
            self._peers.guarded(key.data, self._read)

    def _read(self, peer: Peer) -> None:
        for message in peer.messages():
            self._handle(peer, message)
            if peer not in self._peers:
                return
        if peer.closed:
            self._peers.drop(peer, "lost" if peer.welcomed else "left")

    def _handle(self, peer: Peer, message: dict) -> None:
        kind = message["type"]
        if kind == "hello" and peer.hello is None:
            peer.hello = message
            self._last_hello = time.monotonic()
            if self._window is not None:
                self._welcome(peer)
        elif kind == "release" and peer.welcomed:
            if not peer.release(self._store, message["seq"]):
                raise ProtocolError(
                    f"release of batch {message['seq']}, which this consumer does not hold"
                )
        elif kind == "free" and peer.welcomed:
            if not peer.free(self._store, message["seq"]):
                raise ProtocolError(f"free of batch {message['seq']}, which it has not released")
        elif kind == "leave" and peer.welcomed:
            peer.left = True
            self._peers.drop(peer, "left")
        else:
            raise ProtocolError(f"unexpected {kind!r} message")

    def _position(self) -> Position:
        return Position(
            self._epoch, self._index, self._window or 0, self._batches_per_epoch, self.epochs,
            self._loader_done, self._repeats, self._reload_refusal,
        )  # fmt: skip

    def _welcome(self, peer: Peer) -> None:
        assert peer.hello is not None
        plan = policy.plan(peer.hello, self._position())
        if isinstance(plan, Refusal):
            peer.refuse(plan)
            self._peers.drop(peer, "left")
            return
        assert isinstance(plan, Join)
        welcome = protocol.encode(
            "welcome", version=protocol.PROTOCOL_VERSION, consumer_id=peer.cid,
            batches_per_epoch=self._batches_per_epoch, epoch=plan.epoch,
            start_index=plan.start_index, mode=plan.mode,
        )  # fmt: skip
        try:
            peer.sock.send(welcome)
        except OSError:
            self._peers.drop(peer, "lost")
            return
        peer.welcomed = True
        self._peers.counts["joined"] += 1
        if plan.mode == "next_epoch":
            peer.waiting_epoch = plan.epoch
        elif plan.mode == "replay":
            for seq in self._store.replayable(self._epoch, self._index):
                self._store.ref(seq, peer.cid)
                peer.enqueue(seq, live=False)
        elif plan.mode == "wrap":
            peer.wrap_index = plan.start_index
        elif plan.mode == "reload":
            for step in missed(self._epoch, 0, self._position()):
                self._catchups.start(peer, step)
        elif plan.mode == "resume":
            self._catchups.resume(peer, plan.epoch, plan.start_index, self._position(), self._store)
        log.info("consumer %d (pid %d) joined (%s)", peer.cid, peer.pid, plan.mode)

    def _flush(self, peer: Peer) -> None:
        try:
            self._counters["served"] += peer.flush(self._store)
        except OSError:
            self._peers.drop(peer, "lost")

    # ------------------------------------------------------------------ production

    def _place_again(self, peer: Peer, item: Again) -> None:
        """Queue ``item``, a batch loaded again, for ``peer`` alone."""
        seq = self._seq
        self._seq += 1
        shared = self._share(item.batch, item.epoch, item.index)
        self._store.add(seq, shared, [peer.cid], retained=False)
        peer.outbox.append(SendBatch(seq))
        self._counters["produced"] += 1
        self._counters["again"] += 1

    def _produce(self) -> None:
        self._catchups.deliver(self._peers)
        while True:
            if self._pending is None:
                self._pending = self._loading.get()
                if self._pending is None:
                    return
            item = self._pending
            if isinstance(item, LoaderFailed):
                raise out_of_shm(item.error)
            if isinstance(item, LoaderDone):
                self._loaded_all()
            elif isinstance(item, EpochEnd):
                self._finish_epoch(item.epoch, item.batches)
            elif isinstance(item, (Loaded, Owed)) and not self._place(item):
                return
            self._pending = None

    def _loaded_all(self) -> None:
        """Every epoch is loaded: load what wrapped consumers' last epochs still need, if
        any, then end."""
        if self._owing:  # the owed batches are loaded too
            self._owing = False
            return
        self._loader_done = True
        owed = max((peer.wrap_index for peer in self._peers.active()), default=0)
        if owed:
            self._owing = True
            self._loading.complete(self._epoch, owed)

    def _first_batch(self, batch: Any) -> None:
        """Fix what the first batch determines, then answer the consumers waiting for it."""
        self._window = replay_window(
            self._replay_batches, self._replay_bytes, nbytes(batch), self._batches_per_epoch
        )
        for peer in self._peers:
            if peer.hello is not None and not peer.welcomed:
                self._peers.guarded(peer, self._welcome)

    def _place(self, item: Loaded | Owed) -> bool:
        """Share a batch and queue it for consumers; False if it must wait."""
        epoch, index, batch = item
        owed = isinstance(item, Owed)
        if self._window is None:
            self._first_batch(batch)
        active = self._peers.active()
        if self._seq == 0:
            if len(active) < self.consumers or self._in_grace():
                return False
        elif not active:
            return False
        if any(len(p.live) >= self.max_lag for p in active):
            return False
        shared = self._share(batch, epoch, index)
        seq = self._seq
        self._seq += 1
        assert self._window is not None
        if owed:
            takers = [p for p in active if p.wrap_index > index]
        else:
            self._epoch, self._index = epoch, index + 1
            takers = [p for p in active if p.waiting_epoch is None or p.waiting_epoch <= epoch]
        retained = not owed and index < self._window
        self._store.add(seq, shared, [p.cid for p in takers], retained=retained)
        for peer in takers:
            peer.waiting_epoch = None
            peer.enqueue(seq, live=True)
        if not retained:
            self._store.end_retention()
        self._counters["produced"] += 1
        self._counters["owed"] += owed
        return True

    def _share(self, batch: Any, epoch: int, index: int) -> SharedBatch:
        return share(batch, epoch, index, self._pool, self.device)

    def _in_grace(self) -> bool:
        return time.monotonic() - self._last_hello < self.join_grace_s

    def _finish_epoch(self, epoch: int, count: int) -> None:
        if self._batches_per_epoch is None:
            self._batches_per_epoch = count
        self._store.end_retention()
        for peer in self._peers.active():
            if peer.waiting_epoch is None or peer.waiting_epoch <= epoch:
                peer.push(SendEndEpoch(epoch, count))
        self._epoch, self._index = epoch + 1, 0
