"""Reading one DataLoader worker's (and one distributed rank's) share of a source."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from torch.utils.data import Dataset, IterableDataset

__all__ = [
    "check_source",
    "is_indexable",
    "is_one_shot",
    "one_shot_error",
    "shard",
    "shard_indices",
]


_PLAIN = (list, tuple, range)  # answered without an ABC check (slow when cold, per epoch)


def is_indexable(source: object) -> bool:
    """Whether ``source`` is read by index: sized and indexable, not an IterableDataset."""
    if type(source) in _PLAIN:
        return True
    return (
        not isinstance(source, IterableDataset)
        and hasattr(source, "__len__")
        and hasattr(source, "__getitem__")
    )


def is_one_shot(source: object) -> bool:
    """Whether iterating ``source`` consumes it (an iterator, e.g. a generator)."""
    return type(source) not in _PLAIN and isinstance(source, Iterator)


def one_shot_error(name: str = "source") -> RuntimeError:
    """The error for a second pass over a one-shot source (it would silently be empty)."""
    return RuntimeError(
        f"{name} is a one-shot iterator (e.g. a generator) and was already read once in this "
        "process; a second epoch would be empty. Pass something that starts over when "
        "iterated again: a list, a map-style Dataset, or an IterableDataset whose __iter__ "
        "opens the data anew"
    )


def check_source(source: object, name: str = "source") -> None:
    """Refuse, when a stage is built, a source that could not be read when it is iterated.

    A map-style Dataset without ``__len__`` is refused too: iterating it falls back to
    ``__getitem__(0), (1), ...``, which ends only at an IndexError (a KeyError past the end,
    or an endless stream).

    Args:
        source: The source to check.
        name: Argument name used in the error message. Default ``"source"``.

    Raises:
        ValueError: ``source`` is not iterable (e.g. a number), or is a map-style Dataset
            without ``__len__``.
    """
    if type(source) in _PLAIN:
        return
    if not (hasattr(type(source), "__iter__") or hasattr(type(source), "__getitem__")):
        raise ValueError(
            f"{name} must be iterable (a list, a Dataset, a DataLoader or any iterable of "
            f"examples or batches), got {type(source).__name__} {source!r:.80}"
        )
    if (
        isinstance(source, Dataset)
        and not isinstance(source, IterableDataset)
        and not hasattr(source, "__len__")
    ):
        raise ValueError(
            f"{name} is a map-style Dataset without __len__ ({type(source).__name__}): it "
            "cannot be read by index. Define __len__, or make it an IterableDataset"
        )


def shard_indices(
    indices: Sequence[int],
    worker_id: int = 0,
    num_workers: int = 1,
    rank: int = 0,
    world_size: int = 1,
) -> Sequence[int]:
    """Worker ``worker_id``'s share of rank ``rank``'s share of ``indices``.

    The rank's share is padded like ``DistributedSampler``'s: every rank gets
    ``ceil(n / world_size)`` indices, the last ones wrapping round to the start, so that every
    rank reads (and, with the same draws, emits) as many items.
    """
    if world_size > 1:
        total = -(-len(indices) // world_size) * world_size
        padded = list(indices)
        while padded and len(padded) < total:
            padded += padded[: total - len(padded)]
        indices = padded[rank::world_size]
    return indices[worker_id::num_workers]


def shard(
    source: Iterable[Any],
    worker_id: int = 0,
    num_workers: int = 1,
    order: Sequence[int] | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[Any]:
    """The items of ``source`` that worker ``worker_id`` of ``num_workers`` on distributed
    rank ``rank`` of ``world_size`` reads.

    * An `IterableDataset` is iterated as is (torch's convention: it shards itself, by worker
      and by rank).
    * A sized, indexable source (list, map-style Dataset) is read by index: the rank's share
      of the indices (padded so that every rank reads as many, like ``DistributedSampler``),
      then every ``num_workers``-th of those from ``worker_id``; in the order ``order`` (a
      permutation of the indices) when given.
    * Any other iterable is read whole and every ``num_workers * world_size``-th item kept.

    Args:
        source: The source.
        worker_id: This worker's id. Default 0.
        num_workers: Number of workers. Default 1 (the whole source).
        order: The index order of an indexable source. Default None: in order.
        rank: This process's distributed rank. Default 0.
        world_size: Number of distributed processes. Default 1.
    """
    if isinstance(source, IterableDataset):
        return iter(source)
    if is_indexable(source):
        whole = order is None and num_workers == 1 and world_size == 1
        if whole and hasattr(type(source), "__iter__"):
            return iter(source)  # e.g. a list: its own iterator is the cheapest
        indices = range(len(source)) if order is None else order  # type: ignore[arg-type]
        mine = shard_indices(indices, worker_id, num_workers, rank, world_size)
        return map(source.__getitem__, mine)  # type: ignore[attr-defined]
    position, stride = rank * num_workers + worker_id, num_workers * world_size
    return itertools.islice(iter(source), position, None, stride)
