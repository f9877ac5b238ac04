"""The producer's loader thread: iterates the loader once per epoch and hands each batch, each
epoch's end and the end of loading to the serving loop through a small queue; then, if the
serving loop asks, loads the leading batches of one more epoch for late joiners whose first
epoch wrapped (`LoaderThread.complete`)."""

from __future__ import annotations

import itertools
import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

__all__ = [
    "EpochEnd",
    "Loaded",
    "LoaderDone",
    "LoaderFailed",
    "LoaderThread",
    "Owed",
    "epoch_iter",
    "length",
    "offer",
    "sampler_of",
    "set_epoch",
]


class Loaded(NamedTuple):
    """Batch ``index`` of ``epoch``."""

    epoch: int
    index: int
    batch: Any


class Owed(NamedTuple):
    """Batch ``index`` of ``epoch``, loaded after the last epoch only for late joiners whose
    first epoch wrapped into the next one (`LoaderThread.complete`)."""

    epoch: int
    index: int
    batch: Any


class EpochEnd(NamedTuple):
    """``epoch`` ended after ``batches`` batches."""

    epoch: int
    batches: int


class LoaderDone(NamedTuple):
    """Every epoch was loaded (and, after a `LoaderThread.complete`, the batches owed)."""


class LoaderFailed(NamedTuple):
    """The loader raised ``error`` (re-raised by the serving loop)."""

    error: BaseException


Item = Loaded | Owed | EpochEnd | LoaderDone | LoaderFailed


def released(error: BaseException) -> BaseException:
    """``error``, its traceback's finished frames cleared of their locals (in place).

    A loader's error is raised again in another thread, and may be kept long after. Its
    traceback's frames hold the loader's iterator; a DataLoader's owns its worker processes.
    Cleared, the iterator goes now and shuts its workers down in order. Kept, it lives as
    long as the error, and its workers are terminated at exit, leaving their temporary folders
    behind. The traceback still names every file and line.

    Args:
        error (BaseException): What the loader raised, caught in the frame that iterates it.

    Returns:
        BaseException: ``error`` itself.
    """
    traceback.clear_frames(error.__traceback__)
    return error


def sampler_of(loader: Any) -> Any:
    """A DataLoader's (or PooledLoader's) sampler of indices, if it has one."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    return getattr(batch_sampler, "sampler", None) or getattr(loader, "sampler", None)


def set_epoch(loader: Any, epoch: int) -> None:
    """Call ``set_epoch(epoch)`` on ``loader``, or else on its sampler (a DataLoader's
    ``DistributedSampler``), where one has it."""
    for target in (loader, sampler_of(loader)):
        if hasattr(target, "set_epoch"):
            target.set_epoch(epoch)
            return


def epoch_iter(loader: Any, epoch: int, lock: threading.Lock) -> Iterator[Any]:
    """An iterator over ``epoch`` of ``loader``: ``set_epoch`` and the start of the
    iteration (which fixes a sampler's order) happen under ``lock``, so two threads that
    iterate one loader at different epochs each get their own. The iteration starts through
    ``lock.begin(loader)`` where the lock has one (`sharing.lending.IterationLock`), else
    ``iter(loader)``."""
    with lock:
        set_epoch(loader, epoch)
        batches = getattr(lock, "begin", iter)(loader)
        first = next(batches, _DONE)
    return batches if first is _DONE else itertools.chain([first], batches)


_DONE = object()


def offer(into: queue.Queue, item: Any, stop: threading.Event, wake: Callable[[], None]) -> bool:
    """Put ``item`` into the bounded queue ``into`` (a loading thread's, read by the serving
    loop), waiting for room until ``stop`` is set; then call ``wake``. False if stopped."""
    while not stop.is_set():
        try:
            into.put(item, timeout=0.1)
        except queue.Full:
            continue
        wake()
        return True
    return False


def length(loader: Any) -> int | None:
    """``len(loader)``, or None if it has no length."""
    try:
        return len(loader)
    except TypeError:
        return None


class LoaderThread:
    """Iterate ``loader`` for ``epochs`` epochs (None: until stopped) in a daemon thread.

    After `LoaderDone` the thread waits: `complete` makes it load the leading batches of one
    more epoch (from ``loader.completion_loader`` if the loader has one, else ``loader``),
    reported as `Owed`, then `LoaderDone` again; `stop` ends it.

    Args:
        loader: A re-iterable of batches; ``set_epoch(epoch)`` is called first if it has one.
        epochs: Epochs to load; None: until `stop` or `finish`.
        wake: Called (from the thread) after each item is queued.
        depth: Items queued ahead of the serving loop. Default 2.
        adopt: Turns each batch into what is queued, in this thread, as soon as the loader
            yields it (the loader's own batch is let go of at once). Default None: queued as
            it is.
        lock: Held while an epoch's iteration starts (`epoch_iter`), shared with whatever
            else iterates the loader. Default None: a lock of its own.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        epochs: int | None,
        wake: Callable[[], None],
        depth: int = 2,
        adopt: Callable[[Any], Any] | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.loader, self.epochs, self._wake = loader, epochs, wake
        self._adopt = adopt or (lambda batch: batch)
        self._lock = lock or threading.Lock()
        self._queue: queue.Queue[Item] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finish = threading.Event()
        self._owed: queue.Queue[tuple[int, int]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="sharing-loader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop at the next batch (thread-safe)."""
        self._stop.set()

    def finish(self) -> None:
        """Load no epoch after the one in progress (thread-safe): an epoch that yields no
        batch once this is called is not reported."""
        self._finish.set()

    def complete(self, epoch: int, batches: int) -> None:
        """After `LoaderDone`: load the first ``batches`` batches of ``epoch`` as `Owed`, then
        report `LoaderDone` again (thread-safe)."""
        self._owed.put((epoch, batches))

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` s for the thread to end (at once if it never started)."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def get(self) -> Item | None:
        """The next item, or None if none is ready."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def _put(self, item: Item) -> bool:
        return offer(self._queue, item, self._stop, self._wake)

    def _run(self) -> None:
        try:
            epoch = 0
            while (self.epochs is None or epoch < self.epochs) and not self._finish.is_set():
                count = 0
                for batch in epoch_iter(self.loader, epoch, self._lock):
                    item = Loaded(epoch, count, self._adopt(batch))
                    del batch  # the loader's memory (a worker's /dev/shm file) goes now
                    if not self._put(item):
                        return
                    count += 1
                if count == 0 and self._finish.is_set():
                    break
                if not self._put(EpochEnd(epoch, count)):
                    return
                epoch += 1
            if self._put(LoaderDone()):
                self._load_owed()
        except BaseException as error:  # re-raised by the serving loop in the caller's thread
            self._put(LoaderFailed(released(error)))

    def _load_owed(self) -> None:
        while not self._stop.is_set():
            try:
                epoch, batches = self._owed.get(timeout=0.1)
            except queue.Empty:
                continue
            source = getattr(self.loader, "completion_loader", self.loader)
            for index, batch in enumerate(epoch_iter(source, epoch, self._lock) if batches else ()):
                item = Owed(epoch, index, self._adopt(batch))
                del batch
                if not self._put(item):
                    return
                if index + 1 == batches:
                    break  # the rest of this epoch is owed to nobody
            self._put(LoaderDone())
            return
