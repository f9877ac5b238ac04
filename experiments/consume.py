"""Training from a shared loader: the producer side (a workload's pipeline to serve) and the
consumer side (the harness's batch source when ``--consume ENDPOINT`` is given).

Serve a workload's input pipeline once for several training processes::

    python -m sharing serve --loader experiments.consume:workload_loader \\
        --loader-kwargs '{"workload": "cifar10_resnet", "num_workers": 2}' --epochs 0
    python -m experiments.run --workload cifar10_resnet --consume unix:@... --lr 0.05 --out a.json
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from echo import EchoCounts, check_factor, echo_items
from echo.core import stage_rng
from experiments import registry
from experiments.pipeline import workload_pipeline
from experiments.upstream import TimedBatch, UpstreamCost
from run_contract.identity import CONSUMER_ECHO_POINTS, RunSpec
from sharing import Consumer, StreamEnded
from sharing.layout import first_dim

__all__ = ["CONSUMER_ECHO_POINTS", "ConsumedBatches", "workload_loader"]


class _Batches:
    """The plain batches of a harness pipeline (its `TimedBatch` wrappers removed)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        for timed in self.loader:
            yield timed.batch


def workload_loader(
    workload: str,
    scale: str = "cpu",
    seed: int = 0,
    batch_size: int | None = None,
    num_workers: int = 0,
    data_dir: str | None = None,
    upstream_latency_ms: float = 0.0,
    upstream_latency_per: str = "example",
    upstream_cpu_ms: float = 0.0,
) -> _Batches:
    """A workload's training pipeline (read -> augment -> collate, no echo) for a producer.

    Args:
        workload: Registered workload name.
        scale: ``"cpu"`` or ``"paper"``. Default ``"cpu"``.
        seed: Seeds the data order and augmentation. Default 0.
        batch_size: Examples per batch. Default None: the workload's.
        num_workers: DataLoader worker processes. Default 0.
        data_dir: The workload's data folder. Default None.
        upstream_latency_ms, upstream_latency_per, upstream_cpu_ms: The harness's slow-upstream
            knobs (see ``python -m experiments.run --help``). Default: none.

    Raises:
        ValueError: An unknown workload or hyper-parameter.
    """
    spec = RunSpec(workload=workload, scale=scale, batch_size=batch_size)
    hparams = spec.resolve(registry.defaults(workload, scale))["hparams"]
    instance = registry.get(workload)(scale=scale, data_dir=data_dir, hparams=hparams)
    cost = UpstreamCost(upstream_latency_ms, upstream_latency_per, upstream_cpu_ms)
    return _Batches(workload_pipeline(instance, seed=seed, upstream=cost, num_workers=num_workers))


class ConsumedBatches:
    """The harness's batch source when training from a producer.

    Each ``for`` loop is one epoch of the producer's stream, optionally batch-echoed. Fresh
    examples are the examples received from the producer (each was read once for all its
    consumers); batches arrive as `TimedBatch` without upstream time, which the producer spent.

    Args:
        endpoint: The producer's endpoint.
        echo_point: ``"none"`` or ``"after_batch"``.
        echo_factor: Batch echo factor. Default 1.
        shuffle_buffer: Batches in the echo shuffle buffer. Default 0.
        seed: Seeds the echo draws. Default 0.
        batch_size: This consumer's batch size (any size: batches are re-cut across the
            producer's, zero-copy where one lies inside a producer batch).
            Default None: the producer's.

    Raises:
        ValueError: An echo point other than none/after_batch, or a bad batch size.
        ConnectionError: No producer at ``endpoint``.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        echo_point: str = "none",
        echo_factor: float = 1.0,
        shuffle_buffer: int = 0,
        seed: int = 0,
        batch_size: int | None = None,
    ) -> None:
        if echo_point not in CONSUMER_ECHO_POINTS:
            raise ValueError(
                f"echo_point={echo_point!r} cannot be applied by a consumer, which receives "
                f"augmented batches; valid: {', '.join(CONSUMER_ECHO_POINTS)}"
            )
        self.echo_point, self.factor = echo_point, check_factor(echo_factor)
        self.shuffle_buffer, self.seed = shuffle_buffer, seed
        self.consumer = Consumer(endpoint, batch_size=batch_size)
        self.fresh_examples = self.steps = self.epoch = 0

    def _received(self) -> Iterator[Any]:
        try:
            for batch in self.consumer:
                self.fresh_examples += first_dim(batch) or 0
                yield batch
        except StreamEnded:  # before this epoch's first batch: an empty epoch ends `endless`
            return

    def __iter__(self) -> Iterator[TimedBatch]:
        batches = self._received()
        if self.echo_point == "after_batch":
            rng = stage_rng(self.seed, "consume", self.epoch)
            batches = echo_items(batches, self.factor, self.shuffle_buffer, rng, EchoCounts())
        self.epoch += 1
        for batch in batches:
            self.steps += 1
            yield TimedBatch(batch, None)
