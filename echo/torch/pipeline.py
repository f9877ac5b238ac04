"""`build_pipeline`: read -> [echo] -> augment -> [echo] -> collate -> [echo], with exact
accounting of the fresh examples behind every batch that reaches training."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from echo.core import (
    EchoCounts,
    augment_takes_rng,
    check_factor,
    check_int,
    check_seed,
    check_shuffle_buffer,
    echo_items,
    echoed_count,
    stage_rng,
)
from echo.points import EchoPoint
from echo.state import check_state, make_state
from echo.torch.distributed import resolve_rank
from echo.torch.sources import (
    check_source,
    is_indexable,
    is_one_shot,
    one_shot_error,
    shard,
    shard_indices,
)

__all__ = ["EchoLoader", "PipelineSettings", "build_pipeline"]

Augment = Callable[[Any, np.random.Generator], Any]
Collate = Callable[[list[Any]], Any]

_LOADER_OPTIONS = ("pin_memory", "prefetch_factor", "multiprocessing_context", "timeout")


@dataclasses.dataclass(frozen=True)
class PipelineSettings:
    """The settings of one `build_pipeline` pipeline, checked once when made: the one place
    that states their defaults.

    Attributes:
        batch_size: Examples per collated batch (an int >= 1).
        point: Echo insertion point (an `EchoPoint` or its string, kept as the `EchoPoint`).
            Default None: no echo.
        factor: Echo factor in ``[1, MAX_FACTOR]`` (fractional allowed). Default 1.0.
        shuffle_buffer: Shuffle buffer after the echo stage, in items at that point
            (examples, or batches for ``after_batch``). Default 0.
        num_workers: DataLoader worker processes. Default 0.
        seed: Seeds the source order, augmentation and echo draws. Default 0.
        shuffle: Read a sized source in a new seeded order each epoch. Default True.
        drop_last: Drop each worker's final partial batch (one per worker). Default False.
        rank: This process's distributed rank. Default None: ``torch.distributed``'s when a
            process group is initialised when the settings are made, else 0. Each rank reads
            its padded share of a sized source (like ``DistributedSampler``).
        world_size: Number of distributed processes. Default None (see ``rank``).

    Raises:
        ValueError: A bad field; the message names it and what is valid.
    """

    batch_size: int
    point: EchoPoint | str | None = None
    factor: float = 1.0
    shuffle_buffer: int = 0
    num_workers: int = 0
    seed: int = 0
    shuffle: bool = True
    drop_last: bool = False
    rank: int | None = None
    world_size: int | None = None

    def __post_init__(self) -> None:
        point = None if self.point is None else EchoPoint.parse(self.point)
        checked = {
            "batch_size": check_int(self.batch_size, "batch_size", minimum=1),
            "point": point,
            "factor": check_factor(self.factor),
            "shuffle_buffer": check_shuffle_buffer(self.shuffle_buffer),
            "num_workers": check_int(self.num_workers, "num_workers"),
            "seed": check_seed(self.seed),
            "shuffle": bool(self.shuffle),
            "drop_last": bool(self.drop_last),
        }
        checked["rank"], checked["world_size"] = resolve_rank(self.rank, self.world_size)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if point is None and (self.factor != 1.0 or self.shuffle_buffer):
            raise ValueError(
                f"factor={self.factor} / shuffle_buffer={self.shuffle_buffer} need an echo "
                f"point; pass point= one of {[p.value for p in EchoPoint]}"
            )

    def stream(self, *parts: object) -> tuple[object, ...]:
        """Names a random stream of this rank: rank 0 draws exactly as a single process does,
        other ranks add their rank."""
        return parts if self.rank == 0 else (*parts, "rank", self.rank)


_SETTINGS = tuple(field.name for field in dataclasses.fields(PipelineSettings))


class _Tagged(NamedTuple):
    """A batch as it leaves a worker: the worker's fresh-example count when it was made."""

    batch: Any
    worker: int
    fresh: int


def _identity(example: Any, rng: np.random.Generator) -> Any:
    return example


class _ExampleOnly:
    """Calls a one-argument (torchvision-style) ``augment(example)`` as ``(example, rng)``.

    A class, not a closure, so that the pipeline still pickles into spawned workers.
    """

    def __init__(self, augment: Callable[[Any], Any]) -> None:
        self.augment = augment

    def __call__(self, example: Any, rng: np.random.Generator) -> Any:
        return self.augment(example)


def _as_augment(augment: Callable[..., Any]) -> Augment:
    """``augment`` as ``(example, rng) -> example``, checked before the first batch
    (`echo.core.augment_takes_rng`): one that takes the example alone is called with it only.

    Raises:
        ValueError: ``augment`` is not callable, or takes neither ``(example, rng)`` nor
            ``(example)``.
    """
    return augment if augment_takes_rng(augment) else _ExampleOnly(augment)


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


def _own_torch_rng(batches: Iterator[_Tagged], seed: int) -> Iterator[_Tagged]:
    """Run ``batches`` on a torch generator of its own, seeded by ``seed``.

    In a DataLoader worker torch's global generator is already seeded per (epoch, worker);
    in the main process it belongs to training. This swaps the stage's own state in while a
    batch is read, augmented and collated (torchvision transforms draw from the global
    generator), and training's back before the batch is handed on, so both are reproducible.
    """
    state = torch.Generator().manual_seed(seed).get_state()
    while True:
        outer = torch.get_rng_state()
        torch.set_rng_state(state)
        try:
            tagged = next(batches, None)
        finally:
            state = torch.get_rng_state()
            torch.set_rng_state(outer)
        if tagged is None:
            return
        yield tagged


class _ExampleStages(IterableDataset):
    """What runs in each DataLoader worker: its shard of the source up to collated batches."""

    def __init__(self, read: Any, augment: Augment, collate: Collate, settings: PipelineSettings):
        self.read, self.augment, self.collate, self.settings = read, augment, collate, settings
        self.epoch = 0
        self._one_shot_read = False

    def _source(self, worker: int, num_workers: int) -> Iterator[Any]:
        settings = self.settings
        order = None
        if settings.shuffle and is_indexable(self.read):
            order = list(range(len(self.read)))
            stage_rng(settings.seed, "source", self.epoch).shuffle(order)
        return shard(self.read, worker, num_workers, order, settings.rank, settings.world_size)

    def __iter__(self) -> Iterator[_Tagged]:
        info = get_worker_info()
        if info is None and is_one_shot(self.read):
            if self._one_shot_read:
                raise one_shot_error("build_pipeline's read")
            self._one_shot_read = True
        worker, num_workers = (info.id, info.num_workers) if info else (0, 1)
        batches = self._batches(worker, num_workers)
        if info is None:
            seed = stage_rng(self.settings.seed, *self.settings.stream("torch", worker, self.epoch))
            batches = _own_torch_rng(batches, seed.getrandbits(63))
        return batches

    def _batches(self, worker: int, num_workers: int) -> Iterator[_Tagged]:
        settings, seed = self.settings, self.settings.seed
        source = EchoCounts()
        items = _counted(self._source(worker, num_workers), source)
        point, factor, buffer = settings.point, settings.factor, settings.shuffle_buffer
        if point is EchoPoint.BEFORE_AUGMENT:
            rng = stage_rng(seed, "echo", worker, self.epoch)
            items = echo_items(items, factor, buffer, rng, EchoCounts())
        augment_rng = np.random.default_rng(
            [seed, worker, self.epoch] + ([] if settings.rank == 0 else [settings.rank])
        )
        items = (self.augment(example, augment_rng) for example in items)
        if point is EchoPoint.AFTER_AUGMENT:
            rng = stage_rng(seed, "echo", worker, self.epoch)
            items = echo_items(items, factor, buffer, rng, EchoCounts())
        for chunk in _chunks(items, settings.batch_size, settings.drop_last):
            yield _Tagged(self.collate(chunk), worker, source.fresh)


class EchoLoader:
    """Batches for training, with the fresh examples behind them counted exactly.

    Built by `build_pipeline`. Each ``for`` loop over it is one epoch of the source.

    Attributes:
        settings: The pipeline's `PipelineSettings`.
        fresh_examples: Source examples read to produce every batch delivered so far: the
            sum, over workers, of what each worker had read when it made its latest
            delivered batch (examples waiting in a shuffle buffer count as read). Under DDP,
            this rank's (`echo.torch.sum_over_ranks` adds them up).
        steps: Batches delivered so far, echoes included.
        epoch: The epoch the next ``for`` loop runs.
    """

    def __init__(self, stages: _ExampleStages, settings: PipelineSettings, loader_options: dict):
        self._stages, self.settings, self._options = stages, settings, loader_options
        self.fresh_examples = 0
        self.steps = 0
        self.epoch = 0
        self._epoch_steps = 0
        self._epoch_base = 0
        self._resume: dict[str, int] | None = None

    @property
    def point(self) -> EchoPoint | None:
        """Where the echo stage sits (None: no echoing)."""
        return self.settings.point

    @property
    def factor(self) -> float:
        """The echo factor (1.0: no echoing)."""
        return self.settings.factor

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``for`` loop run ``epoch`` (source order and draws depend on it)."""
        self.epoch = check_int(epoch, "epoch")

    def batches_per_epoch(self, epoch: int | None = None) -> int:
        """Batches one epoch delivers on this rank, echoes included, exactly (e.g. for a
        learning-rate schedule's total steps).

        With an integer factor every epoch has the same count; with a fractional one it
        follows the epoch's seeded draws, which this replays without reading the source.

        Args:
            epoch: The epoch to count. Default None: the one the next ``for`` loop runs.

        Raises:
            TypeError: ``read`` is not sized and indexable (an iterable has no count until it
                has been read).
            ValueError: A bad ``epoch``.
        """
        read, settings = self._stages.read, self.settings
        epoch = self.epoch if epoch is None else check_int(epoch, "epoch")
        if not is_indexable(read):
            raise TypeError(
                "batches_per_epoch needs a sized, indexable read (a list or a map-style "
                f"Dataset), got a {type(read).__name__}: count the batches of the first epoch "
                "instead"
            )
        workers = max(1, settings.num_workers)
        size, point = settings.batch_size, settings.point
        total = 0
        for worker in range(workers):
            indices = range(len(read))
            items = len(shard_indices(indices, worker, workers, settings.rank, settings.world_size))
            if point in (EchoPoint.BEFORE_AUGMENT, EchoPoint.AFTER_AUGMENT):
                rng = stage_rng(settings.seed, "echo", worker, epoch)
                items = echoed_count(items, settings.factor, settings.shuffle_buffer, rng)
            total += items // size if settings.drop_last else -(-items // size)
        if point is EchoPoint.AFTER_BATCH:
            rng = stage_rng(settings.seed, "batch_echo", epoch)
            total = echoed_count(total, settings.factor, settings.shuffle_buffer, rng)
        return total

    def _dataloader(self, epoch: int) -> DataLoader:
        self._stages.epoch = epoch
        seed = stage_rng(self.settings.seed, *self.settings.stream("loader", epoch))
        generator = torch.Generator().manual_seed(seed.getrandbits(62))
        return DataLoader(
            self._stages,
            batch_size=None,
            collate_fn=_untouched,
            num_workers=self.settings.num_workers,
            generator=generator,
            **self._options,
        )

    def _fresh_batches(self, loader: DataLoader) -> Iterator[Any]:
        self._epoch_base = self.fresh_examples
        latest = [0] * max(1, self.settings.num_workers)
        for tagged in loader:
            latest[tagged.worker] = tagged.fresh
            self.fresh_examples = self._epoch_base + sum(latest)
            yield tagged.batch

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        batches = self._fresh_batches(self._dataloader(epoch))
        settings = self.settings
        if settings.point is EchoPoint.AFTER_BATCH:
            rng = stage_rng(settings.seed, "batch_echo", epoch)
            batches = echo_items(
                batches, settings.factor, settings.shuffle_buffer, rng, EchoCounts()
            )
        if self._resume is not None:
            batches = self._replayed(batches, self._resume)
        else:
            self._epoch_steps = 0
        for batch in batches:
            self.steps += 1
            self._epoch_steps += 1
            yield batch
        self._epoch_steps = 0

    def _replayed(self, batches: Iterator[Any], saved: dict[str, int]) -> Iterator[Any]:
        for _ in itertools.islice(batches, saved["position"]):
            pass
        self._epoch_base -= self.fresh_examples - saved["fresh"]
        self.fresh_examples, self.steps = saved["fresh"], saved["emitted"]
        self._epoch_steps, self._resume = saved["position"], None
        yield from batches

    def state_dict(self) -> dict[str, Any]:
        """Progress in the shared shape of `echo.state`: ``epoch`` in progress (or next),
        ``position`` (batches delivered in it), ``fresh`` (= ``fresh_examples``), ``emitted``
        (= ``steps``), and ``units`` (``fresh`` in examples, the others in batches)."""
        if self._resume is not None:
            return make_state("EchoLoader", **self._resume)
        in_epoch = self._epoch_steps > 0
        return make_state(
            "EchoLoader",
            self.epoch - 1 if in_epoch else self.epoch,
            self._epoch_steps,
            self.fresh_examples,
            self.steps,
        )

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume from `state_dict`. The next ``for`` loop re-runs the saved epoch (the
        pipeline is seeded, so it yields the same batches) and skips what was delivered;
        until then `state_dict` returns ``state``.

        Raises:
            ValueError: A key is missing or negative.
        """
        state = check_state(state, "EchoLoader")
        self.epoch, self.steps, self.fresh_examples = (
            state["epoch"],
            state["emitted"],
            state["fresh"],
        )
        self._epoch_steps = 0
        saved = {key: state[key] for key in ("epoch", "position", "fresh", "emitted")}
        self._resume = saved if saved["position"] else None

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
    settings: PipelineSettings | None = None,
    **options: Any,
) -> EchoLoader:
    """Build read -> [echo] -> augment -> [echo] -> collate -> [echo], echo at ``point``.

    Reading, augmentation and collation run in ``num_workers`` DataLoader workers (or in this
    process when 0); example echoing runs in the workers, batch echoing after the DataLoader.

    Args:
        read: Source examples, before augmentation: a sized, indexable collection (list or
            map-style Dataset; read in a seeded order per epoch when ``shuffle``, split across
            ranks and workers) or an iterable (an `IterableDataset` shards itself; any other
            iterable is split by position). A map-style Dataset without ``__len__`` is
            refused; a one-shot iterator read in this process raises on a second epoch.
        augment: ``augment(example, rng) -> example`` with ``rng`` a seeded
            `numpy.random.Generator`, or ``augment(example) -> example`` (a one-argument
            function or a torchvision transform, told apart by its signature when the
            pipeline is built). torch's global generator is seeded too, per (seed,
            epoch, worker), so torchvision transforms are reproducible; with
            ``num_workers=0`` it is swapped in only while a batch is made, so training's own
            torch draws are unaffected. Default: identity.
        collate: ``collate(list_of_examples) -> batch``. Default: torch's `default_collate`.
        settings: The pipeline's `PipelineSettings`. Default None: made from ``options``.
        **options: Without ``settings``, its fields by name: ``batch_size`` (required),
            ``point``, ``factor``, ``shuffle_buffer``, ``num_workers``, ``seed``, ``shuffle``,
            ``drop_last``, ``rank``, ``world_size`` (see `PipelineSettings` for each one's
            meaning and default). Also, passed to the DataLoader: ``pin_memory``,
            ``prefetch_factor``, ``multiprocessing_context``, ``timeout``.

    Returns:
        An `EchoLoader`.

    Raises:
        ValueError: A bad argument (also a non-iterable ``read`` or an ``augment`` that takes
            neither ``(example, rng)`` nor ``(example)``), or a setting given both in
            ``settings`` and by name; the message names it and what is valid.
        TypeError: Neither ``settings`` nor ``batch_size`` is given.
    """
    given = {name: value for name, value in options.items() if name in _SETTINGS}
    loader_options = {name: value for name, value in options.items() if name not in _SETTINGS}
    if settings is None:
        if "batch_size" not in given:
            raise TypeError("build_pipeline needs batch_size= (or settings=PipelineSettings(...))")
        settings = PipelineSettings(**given)
    elif given:
        raise ValueError(f"{sorted(given)} given beside settings=; set them in the settings")
    unknown = sorted(set(loader_options) - set(_LOADER_OPTIONS))
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown}; valid: the settings {list(_SETTINGS)} and the "
            f"loader options {list(_LOADER_OPTIONS)}"
        )
    check_source(read, "read")
    augment = _identity if augment is None else _as_augment(augment)
    stages = _ExampleStages(read, augment, collate or default_collate, settings)
    return EchoLoader(stages, settings, loader_options)
