"""`Echo`: example or batch echoing as a composable PyTorch iterable stage."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from torch.utils.data import IterableDataset, get_worker_info

from echo.core import (
    EchoCounts,
    check_factor,
    check_seed,
    check_shuffle_buffer,
    echo_items,
    stage_rng,
)
from echo.torch.counters import WorkerCountTable
from echo.torch.sources import is_indexable, shard

__all__ = ["Echo"]

T = TypeVar("T")


_TICKS = 2**62


class _Ticker:
    """Counts the items of a pass-through stage without Python code per item.

    For a list, tuple or range the count is read off the source's own iterator; for an
    indexable source off the index iterator that drives ``map(source.__getitem__, ...)``;
    for any other iterable ``itertools.compress`` draws one tick per item from a range
    iterator. In each case ``operator.length_hint`` of that iterator gives the count.
    """

    __slots__ = ("_ticks", "_total", "stream")

    def __init__(self, source: Iterable[T]) -> None:
        if type(source) in (list, tuple, range):
            self._total = len(source)  # type: ignore[arg-type]
            self._ticks = self.stream = iter(source)
        elif is_indexable(source):
            self._total = len(source)  # type: ignore[arg-type]
            self._ticks = iter(range(self._total))
            self.stream = map(source.__getitem__, self._ticks)  # type: ignore[attr-defined]
        else:
            self._total = _TICKS
            self._ticks = iter(range(1, _TICKS + 1))  # all truthy
            self.stream = itertools.compress(source, self._ticks)

    @property
    def count(self) -> int:
        return self._total - operator.length_hint(self._ticks)

    @property
    def sized(self) -> bool:
        return self._total != _TICKS

    @property
    def exhausted(self) -> bool:
        """Whether a sized source has handed out every item."""
        return self.sized and operator.length_hint(self._ticks) == 0


def _then(callback: Callable[[], None]) -> Iterator[Any]:
    """An empty iterator that calls ``callback`` when reached (end-of-stream hook)."""
    callback()
    yield from ()


class Echo(IterableDataset, Generic[T]):
    """Repeat every item of ``source`` ``factor`` times on average, then shuffle the copies.

    Use it for example echoing inside DataLoader workers::

        stage = Echo(dataset, 2.0, shuffle_buffer=1024, seed=0)
        loader = DataLoader(stage, batch_size=128, num_workers=2)

    or for batch echoing after the DataLoader (the same tensor objects are yielded again, no
    copy; a train step that modifies its batch in place would modify the echoes too)::

        for batch in Echo(loader, 2.0):
            ...

    Inside a DataLoader worker the stage reads its shard of ``source``: every
    ``num_workers``-th item of a sized, indexable source (a list or map-style Dataset); an
    `IterableDataset` source is trusted to shard itself (torch's convention); any other
    iterable is read whole and every ``num_workers``-th item kept.

    Randomness (the fractional extra copy and the shuffle) is seeded by ``(seed, worker id,
    epoch)``. The epoch advances by one each time the stage is iterated in a process; with
    non-persistent DataLoader workers call `set_epoch` before each epoch (as with
    ``DistributedSampler``), otherwise every epoch repeats epoch 0's draws.

    Args:
        source: Upstream items (examples or batches).
        factor: Echo factor ``e >= 1``. A fractional ``e`` repeats each item ``floor(e)`` or
            ``floor(e) + 1`` times, the extra copy drawn with probability ``e - floor(e)``.
        shuffle_buffer: Size of the shuffle buffer after echoing. Default 0: copies stay
            adjacent. The buffer is drained at the end, so no item is dropped.
        seed: Seed of the stage's random draws. Default 0.

    Raises:
        ValueError: A bad ``factor``, ``shuffle_buffer`` or ``seed``; the message names it.
    """

    def __init__(
        self, source: Iterable[T], factor: float, *, shuffle_buffer: int = 0, seed: int = 0
    ) -> None:
        self.source = source
        self.factor = check_factor(factor)
        self.shuffle_buffer = check_shuffle_buffer(shuffle_buffer)
        self.seed = check_seed(seed)
        self._local = EchoCounts()
        self._workers = WorkerCountTable()
        self._epoch = 0
        self._epoch_start_emitted = 0
        self._in_epoch = False
        self._ticker: _Ticker | None = None
        self._resume: dict[str, int] | None = None

    @property
    def fresh(self) -> int:
        """Items taken from upstream so far, in this process and all DataLoader workers."""
        return self._local.fresh + self._ticked() + self._workers.total().fresh

    @property
    def emitted(self) -> int:
        """Items handed downstream so far, in this process and all DataLoader workers."""
        return self._local.emitted + self._ticked() + self._workers.total().emitted

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will run."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run ``epoch`` (its draws depend on it)."""
        self._epoch = check_seed(epoch, "epoch")

    def __len__(self) -> int:
        """Items per epoch for an integer factor over a sized source (in one process)."""
        if not self.factor.is_integer():
            raise TypeError("an Echo with a fractional factor has no fixed length")
        return len(self.source) * int(self.factor)  # type: ignore[arg-type]

    def _ticked(self) -> int:
        return self._ticker.count if self._ticker is not None else 0

    def __iter__(self) -> Iterator[T]:
        info = get_worker_info()
        epoch = self._epoch
        self._epoch += 1
        if info is not None:  # a DataLoader worker: counts go to shared memory
            items = shard(self.source, info.id, info.num_workers)
            rng = stage_rng(self.seed, "echo", info.id, epoch)
            counts = self._workers.row(info.id)
            return echo_items(items, self.factor, self.shuffle_buffer, rng, counts)

        self._fold_ticks()
        if self.factor == 1.0 and self.shuffle_buffer == 0:
            # The identity runs no Python code per item: counted by _Ticker, all in C.
            self._ticker = _Ticker(self.source)
            stream = self._ticker.stream
            if not self._ticker.sized:  # a sized source's end is read off the ticker
                stream = itertools.chain(stream, _then(self._epoch_finished))
        else:
            items = shard(self.source)
            rng = stage_rng(self.seed, "echo", 0, epoch)
            stream = echo_items(
                items, self.factor, self.shuffle_buffer, rng, self._local, self._epoch_finished
            )
        self._in_epoch = True
        if self._resume is not None:
            return self._resumed(stream, self._resume)
        self._epoch_start_emitted = self._local.emitted
        return stream

    def _fold_ticks(self) -> None:
        """Move the pass-through count of the previous epoch into the plain counters."""
        ticked = self._ticked()
        self._local.fresh += ticked
        self._local.emitted += ticked
        self._ticker = None

    def _epoch_finished(self) -> None:
        self._in_epoch = False

    def _resumed(self, stream: Iterator[T], saved: dict[str, int]) -> Iterator[T]:
        """Replay the saved epoch's draws up to the saved position, then continue."""
        for _ in itertools.islice(stream, saved["position"]):
            pass
        self._local.fresh += saved["fresh"] - self.fresh
        self._local.emitted += saved["emitted"] - self.emitted
        self._epoch_start_emitted = saved["emitted"] - saved["position"]
        self._resume = None
        yield from stream

    def state_dict(self) -> dict[str, int]:
        """The stage's progress, for `load_state_dict`.

        Keys: ``epoch`` (the epoch in progress, or the next one once an epoch has ended),
        ``position`` (items emitted in that epoch so far), ``fresh`` and ``emitted`` (totals).
        Resuming mid-epoch replays the epoch's draws up to ``position``, so it assumes
        ``source`` yields the same items in the same order when iterated again, and that the
        stage runs in the main process.
        """
        if self._resume is not None:
            return dict(self._resume)
        in_epoch = self._in_epoch and not (self._ticker and self._ticker.exhausted)
        position = self._local.emitted + self._ticked() - self._epoch_start_emitted
        return {
            "epoch": self._epoch - 1 if in_epoch else self._epoch,
            "position": position if in_epoch else 0,
            "fresh": self.fresh,
            "emitted": self.emitted,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore progress saved by `state_dict`; the next iteration resumes from it.

        Raises:
            ValueError: A key is missing or negative.
        """
        for key in ("epoch", "position", "fresh", "emitted"):
            if not isinstance(state.get(key), int) or state[key] < 0:
                raise ValueError(f"state[{key!r}] must be an integer >= 0, got {state.get(key)!r}")
        self._epoch = state["epoch"]
        self._workers.reset()
        self._ticker = None
        self._local = EchoCounts(state["fresh"], state["emitted"])
        self._epoch_start_emitted = state["emitted"]
        self._in_epoch = False
        self._resume = dict(state) if state["position"] else None

    def __repr__(self) -> str:
        return (
            f"Echo(factor={self.factor}, shuffle_buffer={self.shuffle_buffer}, "
            f"seed={self.seed}, fresh={self.fresh}, emitted={self.emitted})"
        )
