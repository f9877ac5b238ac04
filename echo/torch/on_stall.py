"""`EchoOnStall`: batch echoing only while the next fresh batch is not ready."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["EchoOnStall"]

_END = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _put_until(ready: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` once there is room; False if ``stop`` is set first."""
    while not stop.is_set():
        try:
            ready.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


class EchoOnStall:
    """Opportunistic batch echoing: repeat the latest batch only while training would wait.

    A background thread pulls fresh batches from ``loader`` into a queue of ``prefetch``
    batches. Each step takes a fresh batch if one is ready; otherwise it repeats the most
    recent batch, at most ``max_factor`` uses per fresh batch in all, and only then blocks for
    the next fresh one. A pipeline that is not input-bound always has a fresh batch ready and
    never echoes; an input-bound one runs up to ``min(max_factor, R)`` steps per fresh batch,
    with R = upstream time / downstream time per batch. The training loop needs no change::

        for batch in EchoOnStall(loader, max_factor=4):
            train_step(batch)

    The same tensor objects are yielded again for an echo (no copy).

    Args:
        loader: Any iterable of batches, typically a DataLoader with workers.
        max_factor: Most uses of one fresh batch (1 disables echoing). An int >= 1.
        prefetch: Fresh batches buffered ahead of training. Default 2.

    Attributes:
        fresh: Fresh batches taken from ``loader`` so far.
        emitted: Batches yielded so far (fresh and echoed).
        last_was_echo: Whether the latest yielded batch was an echo.

    Raises:
        ValueError: ``max_factor`` or ``prefetch`` is not an integer >= 1.
    """

    def __init__(self, loader: Iterable[Any], *, max_factor: int, prefetch: int = 2) -> None:
        self.loader = loader
        self.max_factor = _check_positive_int(max_factor, "max_factor")
        self.prefetch = _check_positive_int(prefetch, "prefetch")
        self.fresh = 0
        self.emitted = 0
        self.last_was_echo = False

    @property
    def echoed(self) -> int:
        """Echoed (repeated) batches yielded so far."""
        return self.emitted - self.fresh

    def _fill(self, ready: queue.Queue, stop: threading.Event) -> None:
        """Producer thread: move fresh batches into ``ready`` until the loader ends."""
        try:
            for batch in self.loader:
                if not _put_until(ready, batch, stop):
                    return
            item: Any = _END
        except BaseException as error:  # handed to the training thread, re-raised there
            item = _Failure(error)
        _put_until(ready, item, stop)

    def __iter__(self) -> Iterator[Any]:
        ready: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        filler = threading.Thread(target=self._fill, args=(ready, stop), daemon=True)
        filler.start()
        latest, uses = None, 0
        try:
            while True:
                try:
                    item = ready.get_nowait()
                except queue.Empty:
                    if latest is not None and uses < self.max_factor:
                        uses += 1
                        self.emitted += 1
                        self.last_was_echo = True
                        yield latest
                        continue
                    item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                latest, uses = item, 1
                self.fresh += 1
                self.emitted += 1
                self.last_was_echo = False
                yield item
        finally:
            stop.set()
            filler.join(timeout=5.0)

    def __repr__(self) -> str:
        return (
            f"EchoOnStall(max_factor={self.max_factor}, fresh={self.fresh}, emitted={self.emitted})"
        )
