"""Re-cutting a stream of producer batches into consumer batches of any size.

A consumer batch that lies inside one producer batch is a view of it (no copy): with a
consumer batch size that divides the producer's, every batch is. One that spans two or more
producer batches is concatenated from their rows (a copy). Each epoch's last consumer batch
holds what is left (the tail), as a DataLoader's would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from sharing.layout import first_dim, map_tensors

__all__ = ["concat", "recut"]


def recut(
    stream: Iterable[tuple[int, Any]], size: int, release: Callable[[int], None]
) -> Iterator[Any]:
    """Batches of ``size`` rows cut from ``stream``'s ``(seq, batch)`` pairs, in order.

    ``release(seq)`` is called once no batch still to be yielded needs more rows of batch
    ``seq`` than those already cut from it: views stay valid after release, so the producer
    never waits for a consumer batch that is still being gathered.

    Args:
        stream: One epoch of ``(seq, producer batch)``.
        size: Rows per consumer batch, >= 1.
        release: Called with each seq when the consumer is done with it.
    """
    parts: list[Any] = []
    rows = 0
    for seq, batch in stream:
        available = first_dim(batch) or 0
        start = 0
        while start < available:
            take = min(size - rows, available - start)
            whole = start == 0 and take == available
            parts.append(batch if whole else _rows(batch, start, start + take))
            rows += take
            start += take
            if rows == size:
                yield parts[0] if len(parts) == 1 else concat(parts)
                parts, rows = [], 0
        release(seq)
    if parts:
        yield parts[0] if len(parts) == 1 else concat(parts)


def _rows(batch: Any, start: int, stop: int) -> Any:
    # A 0-dim tensor is the batch's, not a row's: each consumer batch keeps it whole.
    return map_tensors(batch, lambda tensor: tensor[start:stop] if tensor.dim() else tensor)


def concat(batches: list[Any]) -> Any:
    """The batches' rows, concatenated along dimension 0 (non-tensor leaves: the first's)."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(batches) if first.dim() else first
    if isinstance(first, dict):
        return {key: concat([b[key] for b in batches]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(concat(list(parts)) for parts in zip(*batches, strict=True))
    return first
