"""A workload's input pipeline, built in one place for the harness and for a shared loader's
producer: read -> [echo] -> augment -> [echo] -> collate -> [echo] (`echo.torch.build_pipeline`)
with the harness's upstream timing and simulated cost (`experiments.upstream`)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from echo.torch import EchoLoader, PipelineSettings, build_pipeline
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
    pin_memory: bool = False,
    **settings: Any,
) -> EchoLoader:
    """The training pipeline of ``workload`` (its ``self.hp`` gives the batch size).

    Args:
        workload: The workload instance of the run.
        seed: Seeds the data order, augmentation and echo draws.
        upstream: Simulated upstream cost. Default None: none.
        pin_memory: Pin batches for a CUDA device. Default False.
        **settings: The other fields of the pipeline's `echo.torch.PipelineSettings` by
            name (``point``, ``factor``, ``shuffle_buffer``, ``num_workers`` ...), with its
            defaults (no echo stage, one process).

    Returns:
        An `echo.torch.EchoLoader` of `experiments.upstream.TimedBatch` objects.

    Raises:
        TypeError: The workload's ``read`` breaks the contract (see `read_split`), or a
            setting is not a field of `echo.torch.PipelineSettings`.
        ValueError: A bad setting (as `echo.torch.PipelineSettings` says).
    """
    batch_size = workload.hp["batch_size"]
    read, augment, collate = timed_stages(
        read_split(workload, "train"),
        workload.augment,
        workload.collate,
        upstream or UpstreamCost(),
        batch_size,
    )
    pipeline = PipelineSettings(batch_size=batch_size, seed=seed, **settings)
    return build_pipeline(read, augment, collate, settings=pipeline, pin_memory=pin_memory)


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
