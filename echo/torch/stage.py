"""`Echo`: example or batch echoing as a composable PyTorch iterable stage."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from echo.core import (
    EchoCounts,
    check_factor,
    check_int,
    check_shuffle_buffer,
    echo_items,
    echoed_count,
    resolve_seed,
    stage_rng,
)
from echo.state import check_state, make_state
from echo.torch.counters import WorkerCountTable
from echo.torch.distributed import resolve_rank
from echo.torch.sources import (
    check_source,
    is_indexable,
    is_one_shot,
    one_shot_error,
    shard,
    shard_indices,
)

__all__ = ["Echo"]

T = TypeVar("T")


_TICKS = 2**62


class _Ticker:
    """Counts the items of a pass-through stage without Python code per item.

    For a list, tuple or range read whole the count is read off the source's own iterator;
    for an indexable source off the index iterator that drives ``map(source.__getitem__,
    ...)``; for any other iterable ``itertools.compress`` draws one tick per item from a range
    iterator. In each case ``operator.length_hint`` of that iterator gives the count.
    """

    __slots__ = ("_ticks", "_total", "stream")

    def __init__(self, source: Iterable[T], indices: Sequence[int] | None) -> None:
        if indices is None:  # not indexable: count the shard's items as they pass
            self._total = _TICKS
            self._ticks = iter(range(1, _TICKS + 1))  # all truthy
            self.stream = itertools.compress(source, self._ticks)
        elif type(source) in (list, tuple, range) and indices == range(len(source)):  # type: ignore[arg-type]
            self._total = len(indices)
            self._ticks = self.stream = iter(source)
        else:
            self._total = len(indices)
            self._ticks = iter(indices)
            self.stream = map(source.__getitem__, self._ticks)  # type: ignore[attr-defined]

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


@dataclass
class _Run:
    """The epoch in progress in this process (the main process or one worker)."""

    epoch: int
    start_emitted: int
    ticker: _Ticker | None = None
    finished: bool = False


class Echo(IterableDataset, Generic[T]):
    """Repeat every item of ``source`` ``factor`` times on average, then shuffle the copies.

    Use it for example echoing inside DataLoader workers (or under torchdata's
    ``StatefulDataLoader``, which saves and restores each worker's state)::

        stage = Echo(dataset, 2.0, shuffle_buffer=1024, seed=0)
        loader = DataLoader(stage, batch_size=128, num_workers=2)

    or for batch echoing after the DataLoader (the same tensor objects are yielded again, no
    copy; a train step that modifies its batch in place would modify the echoes too)::

        for batch in Echo(loader, 2.0):
            ...

    Sources. A sized, indexable source (a list or map-style Dataset, e.g. an HF
    ``datasets.Dataset``) is read by index, in a new seeded order each epoch when ``shuffle``
    (DataLoader refuses ``shuffle=True`` and ``sampler=`` for an iterable stage, so the stage
    shuffles itself); inside DataLoader workers each reads every ``num_workers``-th index of
    that order, and under DDP each rank first takes its padded share, like
    ``DistributedSampler``. An `IterableDataset` source is trusted to shard itself by worker
    and rank (torch's convention; for HF use ``split_dataset_by_node``). Any other iterable is
    read whole and every ``num_workers * world_size``-th item kept; a one-shot iterator (a
    generator) can be read only once per process: a second epoch raises instead of being
    silently empty. A map-style Dataset without ``__len__`` is refused.

    Epochs. Randomness (source order, the fractional extra copy and the shuffle) is seeded by
    ``(seed, epoch)`` and, for the draws, the worker id. Epochs advance by themselves: each
    DataLoader worker starts from the epoch its predecessor finished (shared memory), so
    non-persistent workers, persistent workers and Lightning (which never calls the
    dataset's ``set_epoch``) all get a new epoch each time. `set_epoch` sets it explicitly.
    The stage forwards the epoch it runs to ``source.set_epoch`` when the source has one (an HF
    ``IterableDataset`` reshuffles its shards that way).

    Counters. ``fresh`` / ``emitted`` count what the stage read and handed on, summed over this
    process and its DataLoader workers. Under a DataLoader that includes what the workers have
    prefetched but training has not consumed yet (up to ``prefetch_factor * num_workers``
    batches). For the counts behind the batches actually trained on, read them from the
    loader's state with `delivered_counts` (``StatefulDataLoader``), or use `build_pipeline`,
    whose ``fresh_examples`` is exact at the point of training.

    Args:
        source: Upstream items (examples or batches).
        factor: Echo factor ``e`` in ``[1, MAX_FACTOR]``. A fractional ``e`` repeats each item
            ``floor(e)`` or ``floor(e) + 1`` times, the extra copy drawn with probability
            ``e - floor(e)``.
        shuffle_buffer: Size of the shuffle buffer after echoing. Default 0: copies stay
            adjacent. The buffer is drained at the end, so no item is dropped.
        seed: Seed of the stage's random draws. Default 0. None draws one when the stage is
            built (not reproducible; the same for every worker and epoch of this stage).
        shuffle: Read a sized, indexable source in a new seeded order each epoch. Default True.
        rank: This process's distributed rank. Default None: from ``torch.distributed`` when
            a process group is initialised when the stage is built, else 0.
        world_size: Number of distributed processes. Default None (see ``rank``).

    Raises:
        ValueError: A bad argument; the message names it.
    """

    def __init__(
        self,
        source: Iterable[T],
        factor: float,
        *,
        shuffle_buffer: int = 0,
        seed: int | None = 0,
        shuffle: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        check_source(source)
        self.source = source
        self.factor = check_factor(factor)
        self.shuffle_buffer = check_shuffle_buffer(shuffle_buffer)
        self.seed = resolve_seed(seed)
        self.shuffle = bool(shuffle)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self._local = EchoCounts()
        self._workers = WorkerCountTable()
        self._epoch = 0
        self._run: _Run | None = None
        self._resume: dict[str, int] | None = None
        self._one_shot_read = False

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
        """The epoch the next iteration in the main process will run (the latest of this
        process's and the workers')."""
        return max(self._epoch, self._workers.next_epoch())

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run ``epoch``, here and in every DataLoader worker."""
        self._epoch = check_int(epoch, "epoch")
        self._workers.set_epoch(self._epoch)

    def __len__(self) -> int:
        """Refused: no length is right for every DataLoader (see `batches_per_epoch`).

        With workers, each worker emits its own partial batch, so ``len(DataLoader(stage))``
        (the stage's items over the batch size) would be too small.
        """
        raise TypeError(
            "len(Echo) is not defined: with DataLoader workers each worker emits its own "
            "partial batch, so no item count gives the DataLoader's true length. Use "
            "Echo.batches_per_epoch(batch_size, num_workers=..., drop_last=...) instead"
        )

    def batches_per_epoch(
        self,
        batch_size: int,
        *,
        num_workers: int = 0,
        drop_last: bool = False,
        epoch: int | None = None,
    ) -> int:
        """Batches one epoch of ``DataLoader(self, batch_size, num_workers, drop_last)`` yields
        on this rank, exactly (e.g. for ``OneCycleLR(total_steps=...)``).

        With an integer factor every epoch has the same count. With a fractional one the
        count depends on the epoch's seeded draws, which this replays without reading the
        source (about a microsecond per item): sum it over the epochs you train, e.g.
        ``sum(stage.batches_per_epoch(128, num_workers=4, epoch=e) for e in range(epochs))``.
        Each worker's share lies between ``floor(factor)`` and ``floor(factor) + 1`` copies
        of its items.

        Args:
            batch_size: The DataLoader's batch size (an int >= 1).
            num_workers: The DataLoader's workers. Default 0.
            drop_last: The DataLoader's ``drop_last``. Default False.
            epoch: The epoch to count. Default None: the epoch the stage runs next
                (`epoch`). Only a fractional factor's count depends on it.

        Raises:
            TypeError: The source is not sized and indexable (count the batches of the first
                epoch instead, or read ``emitted`` once it has ended).
            ValueError: A bad ``batch_size``, ``num_workers`` or ``epoch``.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1)
        workers = max(1, check_int(num_workers, "num_workers"))
        epoch = self.epoch if epoch is None else check_int(epoch, "epoch")
        if not is_indexable(self.source):
            raise TypeError(
                "batches_per_epoch needs a sized, indexable source (a list or a map-style "
                f"Dataset), got a {type(self.source).__name__}: count the batches of the "
                "first epoch instead, or read the stage's emitted count once it has ended"
            )
        indices = range(len(self.source))  # type: ignore[arg-type]
        total = 0
        for worker in range(workers):
            items = len(shard_indices(indices, worker, workers, self.rank, self.world_size))
            rng = stage_rng(self.seed, "echo", worker, epoch)
            items = echoed_count(items, self.factor, self.shuffle_buffer, rng)
            total += items // batch_size if drop_last else -(-items // batch_size)
        return total

    def _ticked(self) -> int:
        ticker = self._run.ticker if self._run is not None else None
        return ticker.count if ticker is not None else 0

    def _order(self, epoch: int) -> Sequence[int] | None:
        """This epoch's index order of an indexable source (the same in every worker)."""
        if not (self.shuffle and is_indexable(self.source)):
            return None
        seed = stage_rng(self.seed, "source", epoch).getrandbits(64)
        return np.random.default_rng(seed).permutation(len(self.source)).tolist()  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[T]:
        if is_one_shot(self.source):
            if self._one_shot_read:
                raise one_shot_error("Echo's source")
            self._one_shot_read = True
        info = get_worker_info()
        if info is None:
            return self._main_iter()
        row = self._workers.row(info.id)
        epoch = self._resume["epoch"] if self._resume is not None else row.next_epoch
        row.next_epoch, row.active = epoch + 1, True
        self._forward_epoch(epoch)
        order = self._order(epoch)
        items = shard(self.source, info.id, info.num_workers, order, self.rank, self.world_size)
        rng = stage_rng(self.seed, "echo", info.id, epoch)
        run = self._run = _Run(epoch, row.emitted)

        def finished() -> None:
            run.finished, row.active = True, False

        stream = echo_items(items, self.factor, self.shuffle_buffer, rng, row, finished)
        return self._resumed(stream, run, row) if self._resume is not None else stream

    def _main_iter(self) -> Iterator[T]:
        self._fold_ticks()
        epoch = self._resume["epoch"] if self._resume is not None else self.epoch
        self._epoch = epoch + 1
        self._forward_epoch(epoch)
        order = self._order(epoch)
        run = self._run = _Run(epoch, self._local.emitted)
        if self.factor == 1.0 and self.shuffle_buffer == 0:
            # The identity runs no Python code per item: counted by _Ticker, all in C.
            if is_indexable(self.source):
                indices = range(len(self.source)) if order is None else order  # type: ignore[arg-type]
                run.ticker = _Ticker(
                    self.source, shard_indices(indices, 0, 1, self.rank, self.world_size)
                )
            else:
                run.ticker = _Ticker(
                    shard(self.source, 0, 1, None, self.rank, self.world_size), None
                )
            stream = run.ticker.stream
            if not run.ticker.sized:  # a sized source's end is read off the ticker
                stream = itertools.chain(stream, _then(lambda: setattr(run, "finished", True)))
        else:
            items = shard(self.source, 0, 1, order, self.rank, self.world_size)
            rng = stage_rng(self.seed, "echo", 0, epoch)

            def finished() -> None:
                run.finished = True

            stream = echo_items(items, self.factor, self.shuffle_buffer, rng, self._local, finished)
        return self._resumed(stream, run, self._local) if self._resume is not None else stream

    def _forward_epoch(self, epoch: int) -> None:
        if type(self.source) in (list, tuple, range):  # no set_epoch; a failed getattr is slow
            return
        set_epoch = getattr(self.source, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)

    def _fold_ticks(self) -> None:
        """Move the pass-through count of the previous epoch into the plain counters."""
        ticked = self._ticked()
        self._local.fresh += ticked
        self._local.emitted += ticked
        if self._run is not None:
            self._run.ticker = None

    def _resumed(self, stream: Iterator[T], run: _Run, counts: Any) -> Iterator[T]:
        """Replay the saved epoch's draws up to the saved position, then continue."""
        saved = self._resume
        assert saved is not None
        for _ in itertools.islice(stream, saved["position"]):
            pass
        ticked = self._ticked()
        counts.fresh, counts.emitted = saved["fresh"] - ticked, saved["emitted"] - ticked
        run.start_emitted = saved["emitted"] - saved["position"]
        self._resume = None
        yield from stream

    def state_dict(self) -> dict[str, Any]:
        """The stage's progress in the shared shape of `echo.state` (for `load_state_dict`).

        Keys: ``epoch`` (the epoch in progress, or the next one once an epoch has ended),
        ``position`` (items emitted in that epoch so far), ``fresh`` and ``emitted`` (totals),
        and ``units`` (all three count items of the source).
        Inside a DataLoader worker (``StatefulDataLoader`` calls it there) it is that worker's
        own state; in the main process it covers the main process and, between epochs, the
        workers' totals. Resuming mid-epoch replays the epoch's draws up to ``position``, so it
        assumes ``source`` yields the same items in the same order when iterated again.

        Raises:
            RuntimeError: Called in the main process while DataLoader workers are inside an
                epoch: their positions are known only to them (and the DataLoader's prefetch
                runs ahead of training). Use ``StatefulDataLoader``, `build_pipeline`, or save
                between epochs.
        """
        if self._resume is not None:
            return make_state("Echo", **self._resume)
        info = get_worker_info()
        if info is not None:
            row = self._workers.row(info.id)
            run = self._run
            if run is not None and not run.finished:
                return make_state(
                    "Echo", run.epoch, row.emitted - run.start_emitted, row.fresh, row.emitted
                )
            return make_state("Echo", row.next_epoch, 0, row.fresh, row.emitted)
        if self._workers.any_active():
            raise RuntimeError(
                "Echo.state_dict() was called in the main process while DataLoader workers "
                "are inside an epoch; only the workers know their positions. Use torchdata's "
                "StatefulDataLoader (its state_dict() holds every worker's Echo state and "
                "resumes exactly), use build_pipeline (EchoLoader.state_dict()), or save "
                "between epochs"
            )
        run = self._run
        ticker = run.ticker if run is not None else None
        in_epoch = run is not None and not run.finished and not (ticker and ticker.exhausted)
        if in_epoch:
            position = self._local.emitted + self._ticked() - run.start_emitted  # type: ignore[union-attr]
            return make_state("Echo", run.epoch, position, self.fresh, self.emitted)  # type: ignore[union-attr]
        return make_state("Echo", self.epoch, 0, self.fresh, self.emitted)

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore progress saved by `state_dict`; the next iteration resumes from it.

        In the main process it restores the whole stage; inside a DataLoader worker (as
        ``StatefulDataLoader`` does) that worker's share.

        Raises:
            ValueError: A key is missing or negative.
        """
        state = check_state(state, "Echo")
        saved = {key: state[key] for key in ("epoch", "position", "fresh", "emitted")}
        info = get_worker_info()
        self._run = None
        if info is not None:
            row = self._workers.row(info.id)
            row.fresh, row.emitted = saved["fresh"], saved["emitted"]
            row.next_epoch, row.active = saved["epoch"], False
        else:
            self._epoch = saved["epoch"]
            self._workers.reset(saved["epoch"])
            self._local = EchoCounts(saved["fresh"], saved["emitted"])
        self._resume = saved if saved["position"] else None

    def __repr__(self) -> str:
        return (
            f"Echo(factor={self.factor}, shuffle_buffer={self.shuffle_buffer}, "
            f"seed={self.seed}, fresh={self.fresh}, emitted={self.emitted})"
        )
