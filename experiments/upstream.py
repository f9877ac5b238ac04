"""The harness's wrappers around a workload's input stages: a slow upstream on demand
(simulated storage latency, extra CPU work per example) and exact per-batch upstream time.

The wrappers share one `_Clock` per process (per DataLoader worker), so the time spent
reading and augmenting the examples of a batch is attached to the batch when it is collated:
`TimedBatch.upstream_s`. Batch echoing repeats the same `TimedBatch` object, and
`TimedBatch.take_upstream` returns its time only once, so echoed copies cost no upstream time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from experiments.devices import pin
from run_contract.identity import LATENCY_PER

__all__ = ["LATENCY_PER", "TimedBatch", "UpstreamCost", "spin", "timed_stages"]


@dataclass(frozen=True)
class UpstreamCost:
    """Simulated upstream cost added to a workload's pipeline.

    Args:
        latency_ms: Storage latency (sleep) in milliseconds. Default 0.
        latency_per: ``"example"`` (each read waits) or ``"batch"`` (every ``batch_size``-th
            read in a worker waits). Default ``"example"``.
        cpu_ms: Busy CPU time per example in milliseconds, spent in augmentation (so example
            echoing before augmentation repeats it and echoing after does not). Default 0.
    """

    latency_ms: float = 0.0
    latency_per: str = "example"
    cpu_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.latency_per not in LATENCY_PER:
            raise ValueError(
                f"latency_per={self.latency_per!r} is not valid; use one of {LATENCY_PER}"
            )
        for name in ("latency_ms", "cpu_ms"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


def spin(seconds: float) -> None:
    """Keep this thread's CPU busy for ``seconds`` of wall time (a stand-in for costly
    decoding or augmentation)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class TimedBatch:
    """A collated batch and the upstream seconds spent making it (in its worker).

    Attributes:
        batch: The workload's batch.
        upstream_s: Seconds of reading, augmenting and collating behind this batch, or None
            once taken.
    """

    __slots__ = ("batch", "upstream_s")

    def __init__(self, batch: Any, upstream_s: float):
        self.batch, self.upstream_s = batch, upstream_s

    def pin_memory(self) -> TimedBatch:
        """Pin the batch's tensors (called by a DataLoader with ``pin_memory=True``)."""
        self.batch = pin(self.batch)
        return self

    def take_upstream(self) -> float | None:
        """The batch's upstream seconds the first time; None for later (echoed) uses."""
        seconds, self.upstream_s = self.upstream_s, None
        return seconds


class _Clock:
    """Upstream seconds spent in this process since the last batch was collated."""

    def __init__(self) -> None:
        self.seconds = 0.0


class _TimedSource(Dataset):
    def __init__(self, source: Sequence[Any], clock: _Clock, cost: UpstreamCost, batch_size: int):
        self.source, self.clock, self.batch_size = source, clock, batch_size
        self.latency_s = cost.latency_ms / 1000
        self.per_batch = cost.latency_per == "batch"
        self.reads = 0

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> Any:
        start = time.perf_counter()
        if self.latency_s and (not self.per_batch or self.reads % self.batch_size == 0):
            time.sleep(self.latency_s)
        self.reads += 1
        example = self.source[index]
        self.clock.seconds += time.perf_counter() - start
        return example


class _TimedAugment:
    def __init__(self, augment: Callable[[Any, np.random.Generator], Any], clock, cost):
        self.augment, self.clock, self.cpu_s = augment, clock, cost.cpu_ms / 1000

    def __call__(self, example: Any, rng: np.random.Generator) -> Any:
        start = time.perf_counter()
        if self.cpu_s:
            spin(self.cpu_s)
        example = self.augment(example, rng)
        self.clock.seconds += time.perf_counter() - start
        return example


class _TimedCollate:
    def __init__(self, collate: Callable[[list[Any]], Any], clock: _Clock):
        self.collate, self.clock = collate, clock

    def __call__(self, examples: list[Any]) -> TimedBatch:
        start = time.perf_counter()
        batch = self.collate(examples)
        seconds = self.clock.seconds + time.perf_counter() - start
        self.clock.seconds = 0.0
        return TimedBatch(batch, seconds)


def timed_stages(
    source: Sequence[Any],
    augment: Callable[[Any, np.random.Generator], Any],
    collate: Callable[[list[Any]], Any],
    cost: UpstreamCost,
    batch_size: int,
) -> tuple[Dataset, Callable, Callable]:
    """Wrap a workload's read, augment and collate for `echo.torch.build_pipeline`.

    Args:
        source: The workload's training examples (sized and indexable).
        augment: ``augment(example, rng)``.
        collate: ``collate(examples)``.
        cost: The simulated upstream cost to add.
        batch_size: Examples per batch (for ``latency_per="batch"``).

    Returns:
        ``(read, augment, collate)``; the collate returns `TimedBatch` objects.
    """
    clock = _Clock()
    return (
        _TimedSource(source, clock, cost, batch_size),
        _TimedAugment(augment, clock, cost),
        _TimedCollate(collate, clock),
    )
