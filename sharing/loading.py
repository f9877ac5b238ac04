"""The producer's loader thread: iterates the loader once per epoch and hands each batch, each
epoch's end and the end of loading to the serving loop through a small queue."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = ["EpochEnd", "Loaded", "LoaderDone", "LoaderFailed", "LoaderThread", "length"]


class Loaded(NamedTuple):
    """Batch ``index`` of ``epoch``."""

    epoch: int
    index: int
    batch: Any


class EpochEnd(NamedTuple):
    """``epoch`` ended after ``batches`` batches."""

    epoch: int
    batches: int


class LoaderDone(NamedTuple):
    """Every epoch was loaded."""


class LoaderFailed(NamedTuple):
    """The loader raised ``error`` (re-raised by the serving loop)."""

    error: BaseException


Item = Loaded | EpochEnd | LoaderDone | LoaderFailed


def length(loader: Any) -> int | None:
    """``len(loader)``, or None if it has no length."""
    try:
        return len(loader)
    except TypeError:
        return None


class LoaderThread:
    """Iterate ``loader`` for ``epochs`` epochs (None: until stopped) in a daemon thread.

    Args:
        loader: A re-iterable of batches; ``set_epoch(epoch)`` is called first if it has one.
        epochs: Epochs to load; None: until `stop` or `finish`.
        wake: Called (from the thread) after each item is queued.
        depth: Items queued ahead of the serving loop. Default 2.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        epochs: int | None,
        wake: Callable[[], None],
        depth: int = 2,
    ) -> None:
        self.loader, self.epochs, self._wake = loader, epochs, wake
        self._queue: queue.Queue[Item] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finish = threading.Event()
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
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
            except queue.Full:
                continue
            self._wake()
            return True
        return False

    def _run(self) -> None:
        try:
            epoch = 0
            while (self.epochs is None or epoch < self.epochs) and not self._finish.is_set():
                if hasattr(self.loader, "set_epoch"):
                    self.loader.set_epoch(epoch)
                count = 0
                for batch in self.loader:
                    if not self._put(Loaded(epoch, count, batch)):
                        return
                    count += 1
                if count == 0 and self._finish.is_set():
                    break
                if not self._put(EpochEnd(epoch, count)):
                    return
                epoch += 1
            self._put(LoaderDone())
        except BaseException as error:  # re-raised by the serving loop in the caller's thread
            self._put(LoaderFailed(error))
