"""`build_pipeline`: read -> [echo] -> augment -> [echo] -> collate -> [echo], with exact
accounting of the fresh examples behind every batch that reaches training."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from echo.core import (
    EchoCounts,
    check_factor,
    check_seed,
    check_shuffle_buffer,
    echo_items,
    stage_rng,
)
from echo.points import EchoPoint
from echo.torch.sources import is_indexable, shard

__all__ = ["EchoLoader", "build_pipeline"]

Augment = Callable[[Any, np.random.Generator], Any]
Collate = Callable[[list[Any]], Any]

_LOADER_OPTIONS = ("pin_memory", "prefetch_factor", "multiprocessing_context", "timeout")


class _Tagged(NamedTuple):
    """A batch as it leaves a worker: the worker's fresh-example count when it was made."""

    batch: Any
    worker: int
    fresh: int


def _identity(example: Any, rng: np.random.Generator) -> Any:
    return example


def _untouched(tagged: _Tagged) -> _Tagged:
    return tagged


def _counted(items: Iterable[Any], counts: EchoCounts) -> Iterator[Any]:
    for item in items:
        counts.fresh += 1
        yield item


def _chunks(items: Iterator[Any], size: int, drop_last: bool) -> Iterator[list[Any]]:
    while chunk := list(itertools.islice(items, size)):
        if drop_last and len(chunk) < size:
            return
        yield chunk


class _ExampleStages(IterableDataset):
    """What runs in each DataLoader worker: its shard of the source up to collated batches."""

    def __init__(self, read: Any, augment: Augment, collate: Collate, spec: dict[str, Any]):
        self.read, self.augment, self.collate, self.spec = read, augment, collate, spec
        self.epoch = 0

    def _source(self, worker: int, num_workers: int) -> Iterator[Any]:
        spec = self.spec
        order = stage_rng(spec["seed"], "source", self.epoch) if spec["shuffle"] else None
        return shard(self.read, worker, num_workers, order if is_indexable(self.read) else None)

    def __iter__(self) -> Iterator[_Tagged]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info else (0, 1)
        spec, seed = self.spec, self.spec["seed"]
        source = EchoCounts()
        items = _counted(self._source(worker, num_workers), source)
        point, factor, buffer = spec["point"], spec["factor"], spec["shuffle_buffer"]
        if point is EchoPoint.BEFORE_AUGMENT:
            rng = stage_rng(seed, "echo", worker, self.epoch)
            items = echo_items(items, factor, buffer, rng, EchoCounts())
        augment_rng = np.random.default_rng([seed, worker, self.epoch])
        items = (self.augment(example, augment_rng) for example in items)
        if point is EchoPoint.AFTER_AUGMENT:
            rng = stage_rng(seed, "echo", worker, self.epoch)
            items = echo_items(items, factor, buffer, rng, EchoCounts())
        for chunk in _chunks(items, spec["batch_size"], spec["drop_last"]):
            yield _Tagged(self.collate(chunk), worker, source.fresh)


class EchoLoader:
    """Batches for training, with the fresh examples behind them counted exactly.

    Built by `build_pipeline`. Each ``for`` loop over it is one epoch of the source.

    Attributes:
        fresh_examples: Source examples read to produce every batch delivered so far: the
            sum, over workers, of what each worker had read when it made its latest
            delivered batch (examples waiting in a shuffle buffer count as read).
        steps: Batches delivered so far, echoes included.
        epoch: The epoch the next ``for`` loop runs.
    """

    def __init__(self, stages: _ExampleStages, spec: dict[str, Any], loader_options: dict):
        self._stages, self._spec, self._options = stages, spec, loader_options
        self.fresh_examples = 0
        self.steps = 0
        self.epoch = 0
        self._epoch_steps = 0
        self._epoch_base = 0
        self._skip = 0

    @property
    def point(self) -> EchoPoint | None:
        """Where the echo stage sits (None: no echoing)."""
        return self._spec["point"]

    @property
    def factor(self) -> float:
        """The echo factor (1.0: no echoing)."""
        return self._spec["factor"]

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``for`` loop run ``epoch`` (source order and draws depend on it)."""
        self.epoch = check_seed(epoch, "epoch")

    def _dataloader(self, epoch: int) -> DataLoader:
        self._stages.epoch = epoch
        seed = stage_rng(self._spec["seed"], "loader", epoch).getrandbits(62)
        generator = torch.Generator().manual_seed(seed)
        return DataLoader(
            self._stages,
            batch_size=None,
            collate_fn=_untouched,
            num_workers=self._spec["num_workers"],
            generator=generator,
            **self._options,
        )

    def _fresh_batches(self, loader: DataLoader) -> Iterator[Any]:
        self._epoch_base = self.fresh_examples
        latest = [0] * max(1, self._spec["num_workers"])
        for tagged in loader:
            latest[tagged.worker] = tagged.fresh
            self.fresh_examples = self._epoch_base + sum(latest)
            yield tagged.batch

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        batches = self._fresh_batches(self._dataloader(epoch))
        spec = self._spec
        if spec["point"] is EchoPoint.AFTER_BATCH:
            rng = stage_rng(spec["seed"], "batch_echo", epoch)
            batches = echo_items(batches, spec["factor"], spec["shuffle_buffer"], rng, EchoCounts())
        if self._skip:
            batches = self._replayed(batches)
        else:
            self._epoch_steps = 0
        for batch in batches:
            self.steps += 1
            self._epoch_steps += 1
            yield batch
        self._epoch_steps = 0

    def _replayed(self, batches: Iterator[Any]) -> Iterator[Any]:
        saved_fresh, saved_steps = self.fresh_examples, self.steps
        for _ in itertools.islice(batches, self._skip):
            pass
        self._epoch_base -= self.fresh_examples - saved_fresh
        self.fresh_examples, self.steps = saved_fresh, saved_steps
        self._epoch_steps, self._skip = self._skip, 0
        yield from batches

    def state_dict(self) -> dict[str, int]:
        """Progress for `load_state_dict`: ``epoch`` in progress (or next), ``epoch_steps``
        delivered in it, and the totals ``steps`` and ``fresh_examples``."""
        in_epoch = self._epoch_steps > 0
        return {
            "epoch": self.epoch - 1 if in_epoch else self.epoch,
            "epoch_steps": self._epoch_steps,
            "steps": self.steps,
            "fresh_examples": self.fresh_examples,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume from `state_dict`. The next ``for`` loop re-runs the saved epoch (the
        pipeline is seeded, so it yields the same batches) and skips what was delivered.

        Raises:
            ValueError: A key is missing or negative.
        """
        for key in ("epoch", "epoch_steps", "steps", "fresh_examples"):
            if not isinstance(state.get(key), int) or state[key] < 0:
                raise ValueError(f"state[{key!r}] must be an integer >= 0, got {state.get(key)!r}")
        self.epoch, self._skip = state["epoch"], state["epoch_steps"]
        self.steps, self.fresh_examples = state["steps"], state["fresh_examples"]
        self._epoch_steps = 0

    def __repr__(self) -> str:
        point = self.point.value if self.point else None
        return (
            f"EchoLoader(point={point}, factor={self.factor}, steps={self.steps}, "
            f"fresh_examples={self.fresh_examples})"
        )


def build_pipeline(
    read: Sequence[Any] | Iterable[Any],
    augment: Augment | None = None,
    collate: Collate | None = None,
    *,
    point: EchoPoint | str | None = None,
    factor: float = 1.0,
    shuffle_buffer: int = 0,
    batch_size: int,
    num_workers: int = 0,
    seed: int = 0,
    shuffle: bool = True,
    drop_last: bool = False,
    **loader_options: Any,
) -> EchoLoader:
    """Build read -> [echo] -> augment -> [echo] -> collate -> [echo], echo at ``point``.

    Reading, augmentation and collation run in ``num_workers`` DataLoader workers (or in this
    process when 0); example echoing runs in the workers, batch echoing after the DataLoader.

    Args:
        read: Source examples, before augmentation: a sized, indexable collection (list or
            map-style Dataset; read in a seeded order per epoch when ``shuffle``, split across
            workers) or an iterable (an `IterableDataset` shards itself; any other iterable is
            split by position).
        augment: ``augment(example, rng) -> example`` with ``rng`` a seeded
            `numpy.random.Generator`. Default: identity.
        collate: ``collate(list_of_examples) -> batch``. Default: torch's `default_collate`.
        point: Echo insertion point (`EchoPoint` or its string). Default None: no echo.
        factor: Echo factor >= 1 (fractional allowed). Default 1.0.
        shuffle_buffer: Shuffle buffer after the echo stage, in items at that point
            (examples, or batches for ``after_batch``). Default 0.
        batch_size: Examples per collated batch.
        num_workers: DataLoader worker processes. Default 0.
        seed: Seeds the source order, augmentation and echo draws. Default 0.
        shuffle: Read a sized source in a new seeded order each epoch. Default True.
        drop_last: Drop each worker's final partial batch. Default False.
        **loader_options: Passed to the DataLoader: ``pin_memory``, ``prefetch_factor``,
            ``multiprocessing_context``, ``timeout``.

    Returns:
        An `EchoLoader`.

    Raises:
        ValueError: A bad argument; the message names it and what is valid.
    """
    factor = check_factor(factor)
    spec = {
        "point": None if point is None else EchoPoint.parse(point),
        "factor": factor,
        "shuffle_buffer": check_shuffle_buffer(shuffle_buffer),
        "seed": check_seed(seed),
        "num_workers": check_seed(num_workers, "num_workers"),
        "shuffle": bool(shuffle),
        "drop_last": bool(drop_last),
        "batch_size": batch_size,
    }
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if spec["point"] is None and (factor != 1.0 or shuffle_buffer):
        raise ValueError(
            f"factor={factor} / shuffle_buffer={shuffle_buffer} need an echo point; "
            f"pass point= one of {[p.value for p in EchoPoint]}"
        )
    unknown = sorted(set(loader_options) - set(_LOADER_OPTIONS))
    if unknown:
        raise ValueError(f"unknown loader option(s) {unknown}; valid: {list(_LOADER_OPTIONS)}")
    stages = _ExampleStages(read, augment or _identity, collate or default_collate, spec)
    return EchoLoader(stages, spec, loader_options)
