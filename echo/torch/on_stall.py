"""`EchoOnStall`: batch echoing only while the next fresh batch is not ready."""

from __future__ import annotations

import atexit
import queue
import threading
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from echo.core import check_int
from echo.state import SOURCE_KEY, check_state, make_state

__all__ = ["EchoOnStall"]

_GRACE_S = 1e-4
"""How long a step waits for a fresh batch before echoing: long enough for the loader thread
to hand over a batch it already has (it needs the GIL for that), short beside a train step."""

_JOIN_S = 0.2
"""How long leaving the loop waits for the loader thread; a slow upstream's current batch is
not waited for (the thread drops it and closes the loader's iterator itself)."""

_EXIT_JOIN_S = 10.0
"""How long interpreter exit waits for a loader thread still running (an epoch left open):
a thread caught inside a torch op while the interpreter finalizes aborts the process."""

_RUNNING: set[tuple[threading.Event, threading.Thread]] = set()
"""(stop, thread) of every loader thread started and not yet joined, for `_stop_at_exit`."""


@atexit.register
def _stop_at_exit() -> None:
    running = list(_RUNNING)
    for stop, _ in running:
        stop.set()
    for _, thread in running:
        if thread.is_alive():
            thread.join(timeout=_EXIT_JOIN_S)


class _Fresh(NamedTuple):
    """A fresh batch and the loader's progress right after it was taken."""

    batch: Any
    state: Any
    fresh_examples: int | None


class _End(NamedTuple):
    state: Any
    fresh_examples: int | None


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _put_until(ready: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` once there is room; False if ``stop`` is set first."""
    while not stop.is_set():
        try:
            ready.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


class EchoOnStall:
    """Opportunistic batch echoing: repeat the latest batch only while training would wait.

    A background thread pulls fresh batches from ``loader`` into a queue of ``prefetch``
    batches. Each step takes a fresh batch if one is ready (waiting 0.1 ms for it, so that a
    loader that keeps up is never echoed); otherwise it repeats the most recent batch, at most
    ``max_factor`` uses per fresh batch in all, and only then blocks for the next fresh one. A
    pipeline that is not input-bound never echoes; an input-bound one runs up to
    ``min(max_factor, R)`` steps per fresh batch, with R = upstream time / downstream time per
    batch. The training loop needs no change::

        for batch in EchoOnStall(loader, max_factor=4):
            train_step(batch)

    The same tensor objects are yielded again for an echo (no copy). Each ``for`` loop is one
    epoch of ``loader``. Leaving the loop early (``break``, an exception, Ctrl-C) returns at
    once; the thread closes the loader's iterator when its current batch arrives. An epoch
    still open when the program ends is stopped at exit the same way, which waits (at most
    10 s) for that batch.

    Counting happens at the point of training: the thread runs up to ``prefetch + 1`` batches
    ahead, but ``fresh_examples`` and `state_dict` describe the batches yielded so far. The
    state nests the loader's own state (``loader.state_dict()``, e.g. an `EchoLoader` or a
    ``StatefulDataLoader``) as it was right after the latest yielded fresh batch, so a resume
    continues with the first batch that was not trained on. Which steps were echoes depends
    on timing, so a resumed run echoes differently.

    Args:
        loader: Any iterable of batches, typically a DataLoader with workers.
        max_factor: Most uses of one fresh batch (1 disables echoing). An int >= 1.
        prefetch: Fresh batches buffered ahead of training. Default 2.

    Attributes:
        fresh: Fresh batches yielded so far.
        emitted: Batches yielded so far (fresh and echoed).
        last_was_echo: Whether the latest yielded batch was an echo.
        epoch: The epoch the next ``for`` loop runs.

    Raises:
        ValueError: ``max_factor`` or ``prefetch`` is not an integer >= 1.
    """

    def __init__(self, loader: Iterable[Any], *, max_factor: int, prefetch: int = 2) -> None:
        self.loader = loader
        self.max_factor = check_int(max_factor, "max_factor", minimum=1)
        self.prefetch = check_int(prefetch, "prefetch", minimum=1)
        self.fresh = 0
        self.emitted = 0
        self.epoch = 0
        self.last_was_echo = False
        self._position = 0
        self._in_epoch = False
        self._resume_position: int | None = None
        self._source_state: Any = None
        self._fresh_examples: int | None = getattr(loader, "fresh_examples", None)

    @property
    def echoed(self) -> int:
        """Echoed (repeated) batches yielded so far."""
        return self.emitted - self.fresh

    @property
    def fresh_examples(self) -> int | None:
        """``loader.fresh_examples`` behind the batches yielded so far (None when the loader
        does not count them)."""
        return self._fresh_examples

    def _snapshot(self) -> tuple[Any, int | None]:
        state_dict = getattr(self.loader, "state_dict", None)
        state = state_dict() if callable(state_dict) else None
        return state, getattr(self.loader, "fresh_examples", None)

    def _fill(self, ready: queue.Queue, stop: threading.Event) -> None:
        """Loader thread: move fresh batches into ``ready`` until the loader ends."""
        try:
            self._pull(ready, stop)
        finally:
            _RUNNING.discard((stop, threading.current_thread()))

    def _pull(self, ready: queue.Queue, stop: threading.Event) -> None:
        iterator = iter(self.loader)
        try:
            for batch in iterator:
                if not _put_until(ready, _Fresh(batch, *self._snapshot()), stop):
                    return
            item: Any = _End(*self._snapshot())
        except BaseException as error:  # handed to the training thread, re-raised there
            # Its traceback's frames hold the iterator: cleared of their locals (file and line
            # stay), they let the `del` below shut a DataLoader's workers down, not the error.
            traceback.clear_frames(error.__traceback__)
            item = _Failure(error)
        finally:
            close = getattr(iterator, "close", None)
            if stop.is_set() and callable(close):
                close()
            del iterator  # a DataLoader's iterator shuts its workers down here, in this thread
        _put_until(ready, item, stop)

    def __iter__(self) -> Iterator[Any]:
        if self._resume_position is not None:
            self._position, self._resume_position = self._resume_position, None
        else:
            self._position = 0
            self._source_state = self._snapshot()[0]
        self.epoch += 1
        self._in_epoch = True
        ready: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        filler = threading.Thread(target=self._fill, args=(ready, stop), daemon=True)
        _RUNNING.add((stop, filler))  # the thread removes itself as it ends
        filler.start()
        latest, uses = None, 0
        try:
            while True:
                try:
                    item = ready.get(timeout=_GRACE_S) if latest is not None else ready.get()
                except queue.Empty:
                    if uses < self.max_factor:
                        uses += 1
                        self._yielded(echo=True)
                        yield latest
                        continue
                    item = ready.get()
                if isinstance(item, _End):
                    self._source_state, self._fresh_examples = item.state, item.fresh_examples
                    self._in_epoch = False
                    return
                if isinstance(item, _Failure):
                    raise item.error
                latest, uses = item.batch, 1
                self._source_state, self._fresh_examples = item.state, item.fresh_examples
                self.fresh += 1
                self._yielded(echo=False)
                yield latest
        finally:
            stop.set()
            filler.join(timeout=_JOIN_S)

    def _yielded(self, echo: bool) -> None:
        self.emitted += 1
        self._position += 1
        self.last_was_echo = echo

    def state_dict(self) -> dict[str, Any]:
        """Progress in the shared shape of `echo.state`: ``epoch``, ``position`` (batches
        yielded in it), ``fresh`` (fresh batches), ``emitted`` (all batches), ``units`` (all
        three in batches), and under ``"source"`` the loader's state after the latest yielded
        fresh batch (when the loader has ``state_dict``; its counters in its own units, e.g.
        `EchoLoader`'s ``fresh`` in examples)."""
        if self._resume_position is not None or self._in_epoch:
            epoch = self.epoch if self._resume_position is not None else self.epoch - 1
            position = self._resume_position or self._position
            return make_state(
                "EchoOnStall", epoch, position, self.fresh, self.emitted, self._source_state
            )
        return make_state(
            "EchoOnStall", self.epoch, 0, self.fresh, self.emitted, self._source_state
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict`: the counts, and the loader's state through its
        ``load_state_dict``.

        Raises:
            ValueError: A key is missing or negative, or the state holds a loader state but
                the loader has no ``load_state_dict``.
        """
        state = check_state(state, "EchoOnStall")
        source = state.get(SOURCE_KEY)
        if source is not None:
            load = getattr(self.loader, "load_state_dict", None)
            if not callable(load):
                raise ValueError(
                    f"the state holds a loader state under {SOURCE_KEY!r}, but the loader "
                    f"({type(self.loader).__name__}) has no load_state_dict"
                )
            load(source)
        self.epoch, self.fresh, self.emitted = state["epoch"], state["fresh"], state["emitted"]
        self._source_state = source
        self._fresh_examples = getattr(self.loader, "fresh_examples", None)
        self._resume_position = state["position"] or None
        self._in_epoch = False

    def __repr__(self) -> str:
        return (
            f"EchoOnStall(max_factor={self.max_factor}, fresh={self.fresh}, emitted={self.emitted})"
        )
