"""Reading one DataLoader worker's share of a source."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import IterableDataset

__all__ = ["is_indexable", "shard"]


def is_indexable(source: object) -> bool:
    """Whether ``source`` is read by index: sized and indexable, not an IterableDataset."""
    return (
        not isinstance(source, IterableDataset)
        and hasattr(source, "__len__")
        and hasattr(source, "__getitem__")
    )


def shard(
    source: Iterable[Any],
    worker_id: int = 0,
    num_workers: int = 1,
    order_rng: random.Random | None = None,
) -> Iterator[Any]:
    """The items of ``source`` that worker ``worker_id`` of ``num_workers`` reads.

    * An `IterableDataset` is iterated as is (torch's convention: it shards itself).
    * A sized, indexable source (list, map-style Dataset) is read by index: every
      ``num_workers``-th index from ``worker_id``, in an order shuffled by ``order_rng`` when
      given. A map-style Dataset is never iterated directly, since iteration through
      ``__getitem__`` only ends when it raises IndexError.
    * Any other iterable is read whole and every ``num_workers``-th item kept.

    Args:
        source: The source.
        worker_id: This worker's id. Default 0.
        num_workers: Number of workers. Default 1 (the whole source).
        order_rng: Shuffles the index order of an indexable source. Default None: in order.
    """
    if isinstance(source, IterableDataset):
        return iter(source)
    if is_indexable(source):
        if order_rng is None and num_workers == 1 and hasattr(type(source), "__iter__"):
            return iter(source)  # e.g. a list: its own iterator is the cheapest
        indices: Iterable[int] = range(len(source))  # type: ignore[arg-type]
        if order_rng is not None:
            indices = list(indices)
            order_rng.shuffle(indices)
        return map(source.__getitem__, itertools.islice(indices, worker_id, None, num_workers))  # type: ignore[attr-defined]
    return itertools.islice(iter(source), worker_id, None, num_workers)
