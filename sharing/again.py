"""Loading a past epoch's batches again, for one consumer: whether a loader can, the thread
that does it (`Reloader`), and the consumers' catch-ups it serves (`CatchUps`).

A consumer that joins past the replay window, or restarts from a checkpoint, needs batches
the producer no longer holds. They can be loaded again only if the loader gives an epoch's
batches again when asked: a loader whose epochs are all the same (no shuffle; an iterable
without ``set_epoch`` is taken to be one), or one whose ``set_epoch(epoch)`` fixes its order
(`sharing.pooled.PooledLoader`, a seeded ``DistributedSampler``). An unseeded shuffle
(``DataLoader(shuffle=True)``) draws a new order each time: that epoch is gone.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from sharing.copied import out_of_shm
from sharing.loading import LoaderFailed, epoch_iter, offer, released, sampler_of
from sharing.peers import CatchUp, Peer, Peers, SendEndEpoch
from sharing.policy import Position, held
from sharing.store import BatchStore

__all__ = ["Again", "CatchUps", "Reloader", "missed", "reload_refusal", "repeats", "short_epoch"]


def repeats(loader: Any) -> bool:
    """Whether every epoch of ``loader`` yields the same batches in the same order (then a
    consumer's epoch may wrap into the next producer epoch and still hold each sample once):
    one that says so (``epochs_repeat``), or one with neither a shuffle, a sampler that
    draws, nor ``set_epoch``."""
    loader = getattr(loader, "completion_loader", loader)
    said = getattr(loader, "epochs_repeat", None)
    if said is not None:
        return bool(said)
    sampler = sampler_of(loader)
    if sampler is not None and type(sampler).__name__ not in _ORDERED:
        return False
    return not hasattr(loader, "set_epoch") and not hasattr(sampler, "set_epoch")


def reload_refusal(loader: Any) -> str | None:
    """Why ``loader`` cannot give a past epoch's batches again, or None if it can."""
    loader = getattr(loader, "completion_loader", loader)
    sampler = sampler_of(loader)
    name = type(sampler).__name__
    if sampler is None or name in _ORDERED:
        return None
    if hasattr(sampler, "set_epoch") or hasattr(loader, "set_epoch"):
        return None
    if name == "RandomSampler" and getattr(sampler, "generator", None) is None:
        return (
            "the loader shuffles without a seed (DataLoader(shuffle=True)): each epoch's order "
            "is drawn anew, so a past one cannot be loaded again; a sampler with "
            "set_epoch(epoch), e.g. DistributedSampler(dataset, num_replicas=1, rank=0, "
            "seed=...), or Producer.from_dataset(..., shuffle=True, seed=...) can"
        )
    return (
        f"the loader's {name} has no set_epoch(epoch): its order moves on with each epoch, so "
        "a past one cannot be loaded again"
    )


_ORDERED = ("SequentialSampler", "_InfiniteConstantSampler")


def apart(loader: Any) -> Any:
    """``loader``, or, for a DataLoader with persistent workers, a twin of it without them.

    A DataLoader with persistent workers has one iterator, and a new iteration resets it: a
    past epoch loaded again beside the live one would cut the live epoch short. The twin
    shares everything else (dataset, sampler, ``collate_fn``), and starts workers of its own
    for each past epoch it loads.
    """
    if not (getattr(loader, "persistent_workers", False) and loader.num_workers > 0):
        return loader
    twin = copy.copy(loader)
    twin.__dict__.update(persistent_workers=False, _iterator=None)  # set after its __init__
    return twin


def short_epoch(epoch: int, batches: int, stop: int) -> RuntimeError:
    """The error for past ``epoch``, loaded again up to batch ``stop``, that ended after
    ``batches`` batches."""
    return RuntimeError(
        f"epoch {epoch} of the loader, loaded again, ended after {batches} batches, not "
        f"{stop}: its epochs differ in length"
    )


def missed(epoch: int, index: int, position: Position) -> list[CatchUp]:
    """What a consumer whose next batch is batch ``index`` of ``epoch`` has missed of the
    stream of a producer at ``position``, as the ranges to load again for it: the rest of
    each past epoch (each ending it), then the current epoch up to ``position.index``."""
    steps = []
    for past in range(epoch, position.epoch):
        start = index if past == epoch else 0
        assert position.batches_per_epoch is not None  # counted: the epoch has ended
        steps.append(CatchUp(past, start, position.batches_per_epoch, ends=True))
    start = index if epoch == position.epoch else 0
    if start < position.index:
        steps.append(CatchUp(position.epoch, start, position.index, ends=False))
    return steps


class Again(NamedTuple):
    """Batch ``index`` of past ``epoch``, loaded again for consumer ``cid``."""

    cid: int
    epoch: int
    index: int
    batch: Any


class _Request(NamedTuple):
    cid: int
    epoch: int
    start: int
    stop: int


class Reloader:
    """Loads ranges of past epochs again, one request at a time, in a daemon thread.

    Args:
        loader: The producer's loader (its ``completion_loader``, if it has one, is read).
        lock: Shared with the loader thread (see `epoch_iter`).
        wake: Called (from the thread) after each item is queued.
        adopt: Turns each batch into what is queued (`sharing.loading.LoaderThread`'s).
        drop: Lets go of a batch the loader yields that is not wanted (one before the range
            asked for, or after it). Default None: nothing to do.
    """

    def __init__(
        self,
        loader: Any,
        lock: threading.Lock,
        wake: Callable[[], None],
        adopt: Callable[[Any], Any] | None = None,
        drop: Callable[[Any], None] | None = None,
    ) -> None:
        self.source = apart(getattr(loader, "completion_loader", loader))
        self._drop = drop or (lambda batch: None)
        self._lock, self._wake = lock, wake
        self._adopt = adopt or (lambda batch: batch)
        self._requests: queue.Queue[_Request] = queue.Queue()
        self._queue: queue.Queue[Again | LoaderFailed] = queue.Queue(maxsize=2)
        self._cancelled: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def request(self, cid: int, epoch: int, start: int, stop: int) -> None:
        """Load batches ``start`` to ``stop`` - 1 of ``epoch`` for consumer ``cid``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sharing-again", daemon=True)
            self._thread.start()
        self._requests.put(_Request(cid, epoch, start, stop))

    def cancel(self, cid: int) -> None:
        """Consumer ``cid`` is gone: load nothing more for it (thread-safe)."""
        self._cancelled.add(cid)

    def get(self) -> Again | LoaderFailed | None:
        """The next item, or None if none is ready."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Stop at the next batch (thread-safe)."""
        self._stop.set()

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` s for the thread to end."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _put(self, item: Again | LoaderFailed) -> bool:
        return offer(self._queue, item, self._stop, self._wake)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    request = self._requests.get(timeout=0.1)
                except queue.Empty:
                    continue
                if request.cid not in self._cancelled:
                    self._load(request)
        except BaseException as error:  # re-raised by the serving loop
            self._put(LoaderFailed(released(error)))

    def _load(self, request: _Request) -> None:
        batches = epoch_iter(self.source, request.epoch, self._lock)
        index = -1
        for index, batch in enumerate(batches):
            if index >= request.stop or request.cid in self._cancelled:
                self._drop(batch)
                return
            if index < request.start:
                self._drop(batch)
            else:
                item = Again(request.cid, request.epoch, index, self._adopt(batch))
                del batch
                if not self._put(item):
                    return
        if index + 1 < request.stop:
            raise short_epoch(request.epoch, index + 1, request.stop)


class CatchUps:
    """The producer's side of catch-ups: each consumer's `CatchUp` ranges are loaded again by
    ``reloader`` and queued for it before anything live, at most ``max_lag`` ahead of it.

    Args:
        reloader: Loads the ranges.
        max_lag: Most batches loaded again that wait for one consumer.
        place: Queues a batch loaded again for its consumer (``place(peer, item)``).
        discard: Lets go of a batch whose consumer has left.
    """

    def __init__(
        self,
        reloader: Reloader,
        max_lag: int,
        place: Callable[[Peer, Again], None],
        discard: Callable[[Any], None],
    ) -> None:
        self.reloader, self.max_lag, self._place, self._discard = reloader, max_lag, place, discard
        self._waiting: Again | None = None  # loaded, waiting until its consumer has room

    def start(self, peer: Peer, step: CatchUp) -> None:
        """Add ``step`` to ``peer``'s catch-up (live messages wait behind it)."""
        peer.catchup.append(step)
        self._advance(peer)

    def resume(
        self, peer: Peer, epoch: int, index: int, position: Position, store: BatchStore
    ) -> None:
        """Queue for a restarted consumer the batches from ``index`` of ``epoch`` on, before
        its live stream: from the replay window if it holds them all, else loaded again."""
        if held(epoch, position):
            for seq in store.replayable(epoch, position.index):
                if store[seq].index >= index:
                    store.ref(seq, peer.cid)
                    peer.enqueue(seq, live=False)
            return
        for step in missed(epoch, index, position):
            self.start(peer, step)

    def deliver(self, peers: Peers) -> None:
        """Queue each batch loaded again for its consumer, while it has room."""
        while True:
            item = self._waiting or self.reloader.get()
            self._waiting = None
            if item is None:
                return
            if isinstance(item, LoaderFailed):
                raise out_of_shm(item.error)
            peer = peers.get(item.cid)
            if peer is None or not peer.catchup:  # it left
                self._discard(item.batch)
                continue
            if len(peer.outbox) + len(peer.held) >= self.max_lag:
                self._waiting = item
                return
            self._place(peer, item)
            peer.catchup[0].start += 1
            self._advance(peer)

    def _advance(self, peer: Peer) -> None:
        """Ask for what comes next of ``peer``'s catch-up; once it is all queued, queue the
        live messages waiting behind it."""
        while peer.catchup:
            step = peer.catchup[0]
            if step.start < step.stop:
                if not step.requested:
                    self.reloader.request(peer.cid, step.epoch, step.start, step.stop)
                    step.requested = True
                return
            peer.catchup.popleft()
            if step.ends:
                peer.outbox.append(SendEndEpoch(step.epoch, step.stop))
        peer.outbox.extend(peer.deferred)
        peer.deferred.clear()
