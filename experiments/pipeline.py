"""A workload's input pipeline, built in one place for the harness and for a shared loader's
producer: read -> [echo] -> augment -> [echo] -> collate -> [echo] (`echo.torch.build_pipeline`)
with the harness's upstream timing and simulated cost (`experiments.upstream`)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from echo.torch import EchoLoader, build_pipeline
from experiments.upstream import UpstreamCost, timed_stages
from experiments.workload import Workload

__all__ = ["endless", "read_split", "workload_pipeline"]


def read_split(workload: Workload, split: str) -> Sequence[Any]:
    """``workload.read(split)``, checked to be the sized, indexable collection the contract asks.

    Raises:
        TypeError: ``read`` returned something without ``len`` or indexing (a generator, say);
            the message names the workload's file.
    """
    examples = workload.read(split)
    if not (hasattr(examples, "__len__") and hasattr(examples, "__getitem__")):
        where = inspect.getsourcefile(type(workload)) or type(workload).__module__
        raise TypeError(
            f"{where}: {type(workload).__name__}.read({split!r}) returned a "
            f"{type(examples).__name__}; it must return a sized, indexable collection (a list, "
            "an array or a map-style Dataset), e.g. list(...) of what it yields"
        )
    return examples


def workload_pipeline(
    workload: Workload,
    *,
    seed: int,
    upstream: UpstreamCost | None = None,
    num_workers: int = 0,
    point: str | None = None,
    factor: float = 1.0,
    shuffle_buffer: int = 0,
    pin_memory: bool = False,
) -> EchoLoader:
    """The training pipeline of ``workload`` (its ``self.hp`` gives the batch size).

    Args:
        workload: The workload instance of the run.
        seed: Seeds the data order, augmentation and echo draws.
        upstream: Simulated upstream cost. Default None: none.
        num_workers: DataLoader worker processes. Default 0.
        point: Echo insertion point, or None for no echo stage. Default None.
        factor: Echo factor. Default 1.
        shuffle_buffer: Shuffle buffer after the echo stage. Default 0.
        pin_memory: Pin batches for a CUDA device. Default False.

    Returns:
        An `echo.torch.EchoLoader` of `experiments.upstream.TimedBatch` objects.

    Raises:
        TypeError: The workload's ``read`` breaks the contract (see `read_split`).
    """
    batch_size = workload.hp["batch_size"]
    read, augment, collate = timed_stages(
        read_split(workload, "train"),
        workload.augment,
        workload.collate,
        upstream or UpstreamCost(),
        batch_size,
    )
    return build_pipeline(
        read,
        augment,
        collate,
        point=point,
        factor=factor,
        shuffle_buffer=shuffle_buffer,
        batch_size=batch_size,
        num_workers=num_workers,
        seed=seed,
        pin_memory=pin_memory,
    )


def endless(loader: Iterable[Any]) -> Iterator[Any]:
    """The batches of ``loader``, epoch after epoch (one ``for`` loop each); ends if an epoch
    is empty (a producer's stream that has ended)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return
