"""The producer's shared batches: each is kept while a consumer holds a reference to it or
while it is retained for replay, and dropped as soon as neither is true."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sharing import cuda_share
from sharing.layout import describe, map_tensors, nbytes
from sharing.pooled import PooledBatch
from sharing.segments import SegmentPool

__all__ = ["BatchStore", "SharedBatch", "discard", "share"]


@dataclass
class SharedBatch:
    """A batch as consumers receive it: its place in the stream, its layout and descriptors
    (see `sharing.layout`), the tensors that keep its memory alive, and its size in bytes;
    for a batch in a recycled segment, the segment's id and what gives the segment back once
    the batch is dropped."""

    epoch: int
    index: int
    layout: dict
    fds: list[int]
    keep: list[Any]
    nbytes: int
    refs: set[int] = field(default_factory=set)
    retained: bool = False
    segment: int | None = None
    on_drop: Callable[[], None] | None = None


def share(
    batch: Any, epoch: int, index: int, pool: SegmentPool | None, device: Any = None
) -> SharedBatch:
    """Batch ``index`` of ``epoch`` as consumers receive it: one in a segment of ``pool`` by
    that segment (given back once the batch is dropped), any other by its tensors'
    descriptors, moved to ``device`` first if set (a loader's own CUDA tensors once their
    device has finished making them, `sharing.cuda_share.settle`).

    Raises:
        ValueError: ``batch`` holds what cannot be shared (the message names it).
    """
    if isinstance(batch, PooledBatch):
        assert pool is not None
        sid = batch.segment
        return SharedBatch(
            epoch, index, batch.layout, [pool[sid].fd], [], batch.nbytes, segment=sid,
            on_drop=lambda: pool.release(sid),
        )  # fmt: skip
    cuda_share.settle(batch)
    if device is not None:
        batch = map_tensors(batch, lambda t: t.to(device))
    try:
        layout, fds, keep = describe(batch)
    except TypeError as error:
        raise ValueError(f"batch {index} of epoch {epoch}: {error}") from None
    return SharedBatch(epoch, index, layout, fds, keep, nbytes(batch))


def discard(batch: Any, pool: SegmentPool | None) -> None:
    """Let go of ``batch``, never shared: its segment of ``pool``, if it has one, is free."""
    if isinstance(batch, PooledBatch):
        assert pool is not None
        pool.release(batch.segment)


class BatchStore:
    """Batches by sequence number, with references by holder id and replay retention.

    A batch added with no holder and not retained is dropped at once; otherwise it lives
    until its last holder lets go (`unref`) and its retention has ended (`end_retention`).
    Dropping a batch drops the producer's references to its memory, which the kernel frees
    once every consumer has unmapped it too.
    """

    def __init__(self) -> None:
        self._batches: dict[int, SharedBatch] = {}

    def __len__(self) -> int:
        return len(self._batches)

    def __contains__(self, seq: object) -> bool:
        return seq in self._batches

    def __getitem__(self, seq: int) -> SharedBatch:
        return self._batches[seq]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._batches))

    @property
    def nbytes(self) -> int:
        """Bytes of every batch held."""
        return sum(batch.nbytes for batch in self._batches.values())

    def add(self, seq: int, batch: SharedBatch, holders: list[int], *, retained: bool) -> None:
        """Keep ``batch`` as ``seq`` for ``holders`` (and for replay if ``retained``)."""
        if seq in self._batches:
            raise ValueError(f"batch {seq} is already in the store")
        batch.refs.update(holders)
        batch.retained = retained
        self._batches[seq] = batch
        self._drop_if_unused(seq)

    def ref(self, seq: int, holder: int) -> None:
        """Add ``holder``'s reference to batch ``seq`` (which must be held)."""
        self._batches[seq].refs.add(holder)

    def unref(self, seq: int, holder: int) -> None:
        """Remove ``holder``'s reference to ``seq``, dropping the batch if now unused; a batch
        already gone or a holder without a reference is ignored."""
        batch = self._batches.get(seq)
        if batch is not None:
            batch.refs.discard(holder)
            self._drop_if_unused(seq)

    def end_retention(self) -> None:
        """End replay retention of every batch (dropping those nobody holds)."""
        for seq in list(self._batches):
            self._batches[seq].retained = False
            self._drop_if_unused(seq)

    def replayable(self, epoch: int, before: int) -> list[int]:
        """Retained batches of ``epoch`` with index < ``before``, in stream order."""
        return [
            seq
            for seq, batch in sorted(self._batches.items())
            if batch.retained and batch.epoch == epoch and batch.index < before
        ]

    def clear(self) -> None:
        """Drop every batch."""
        batches, self._batches = self._batches, {}
        for batch in batches.values():
            if batch.on_drop is not None:
                batch.on_drop()

    def _drop_if_unused(self, seq: int) -> None:
        batch = self._batches[seq]
        if not batch.refs and not batch.retained:
            del self._batches[seq]
            if batch.on_drop is not None:
                batch.on_drop()
