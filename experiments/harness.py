"""Train one workload configuration to its target and build its run record.

read -> [echo] -> augment -> [echo] -> collate -> [echo] comes from `echo.torch.build_pipeline`.
The model is evaluated every ``eval_every_fresh`` *fresh* examples (counted exactly at the
source by the pipeline), so configurations with different echo factors are compared at the
same amount of data read. The run stops at the first evaluation that meets the target, or once
``max_fresh`` fresh examples were read (then ``reached`` is false: a result, not an error).
Wall times count training only: evaluation time is recorded apart (``timing.eval_s``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from echo.torch import EchoLoader, build_pipeline
from experiments import registry
from experiments.devices import describe, resolve_device, to_device
from experiments.record import config_hash, git_revision, package_versions
from experiments.upstream import TimedBatch, UpstreamCost, timed_stages
from experiments.workload import Workload

__all__ = ["Run", "RunConfig", "merge_hparams", "run"]


@dataclass(frozen=True)
class RunConfig:
    """One configuration of one workload.

    Args:
        workload: Registered workload name.
        scale: ``"cpu"`` or ``"paper"``. Default ``"cpu"``.
        echo_point: ``"none"`` or an `echo.EchoPoint` value. Default ``"none"``.
        echo_factor: Echo factor >= 1. Default 1.0.
        shuffle_buffer: Shuffle buffer after the echo stage. Default 0.
        seed: Seeds data order, augmentation, echo draws and model initialisation. Default 0.
        hparams: Overrides of the workload's hyper-parameters (e.g. ``batch_size``, ``lr``).
            Default: none.
        max_fresh: Fresh-example budget. Default None: the workload's budget.
        eval_every_fresh: Evaluation interval in fresh examples. Default None: the workload's.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``. Default ``"auto"``.
        threads: torch intra-op threads. Default 1.
        num_workers: DataLoader worker processes. Default 0.
        upstream: Simulated upstream cost. Default: none.
        data_dir: Data folder for the workload (required at paper scale). Default None.
        consume: Train on the batches a `sharing.Producer` serves at this endpoint instead of
            a pipeline of this process's own (echo point ``none`` or ``after_batch``).
            Default None.
        stop_at_target: Stop at the first evaluation that reaches the target. False: train on
            to the fresh-example budget (the "no harm" study: best quality within a budget).
            Default True.
    """

    workload: str
    scale: str = "cpu"
    echo_point: str = "none"
    echo_factor: float = 1.0
    shuffle_buffer: int = 0
    seed: int = 0
    hparams: dict[str, Any] = field(default_factory=dict)
    max_fresh: int | None = None
    eval_every_fresh: int | None = None
    device: str = "auto"
    threads: int = 1
    num_workers: int = 0
    upstream: UpstreamCost = field(default_factory=UpstreamCost)
    data_dir: str | None = None
    consume: str | None = None
    stop_at_target: bool = True


def merge_hparams(cls: type[Workload], scale: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The workload's default hyper-parameters at ``scale`` with ``overrides`` applied.

    Raises:
        ValueError: An override names no hyper-parameter of the workload, or its type differs
            from the default's (an int is accepted for a float).
    """
    defaults = cls.hparams[scale]
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise ValueError(
            f"hparam {unknown[0]!r} is not a hyper-parameter of {cls.name!r}; "
            f"valid: {', '.join(sorted(defaults))}"
        )
    for key, value in overrides.items():
        kind = type(defaults[key])
        ok = isinstance(value, kind) or (kind is float and isinstance(value, int))
        if not ok or isinstance(value, bool) != isinstance(defaults[key], bool):
            raise ValueError(
                f"hparam {key}={value!r} must be of type {kind.__name__} like its default "
                f"{defaults[key]!r}"
            )
    return {**defaults, **overrides}


class _Meter:
    """Training wall time and per-batch upstream, downstream and waiting times."""

    def __init__(self) -> None:
        self.upstream = self.downstream = self.wait = self.train_s = self.eval_s = 0.0
        self.fresh_batches = self.steps = 0

    def step(self, tick: float, got: float, done: float, upstream: float | None) -> None:
        if upstream is not None:
            self.upstream += upstream
            self.fresh_batches += 1
        self.wait += got - tick
        self.downstream += done - got
        self.train_s += done - tick
        self.steps += 1

    def summary(self, total_s: float) -> dict[str, Any]:
        up = self.upstream / self.fresh_batches if self.fresh_batches else None
        down = self.downstream / self.steps if self.steps else None
        return {
            "upstream_s_per_batch": up,
            "downstream_s_per_step": down,
            "wait_s_per_step": self.wait / self.steps if self.steps else None,
            "R": up / down if up is not None and down else None,
            "fresh_batches": self.fresh_batches,
            "eval_s": self.eval_s,
            "total_s": total_s,
        }


def _forever(loader: Any) -> Iterator[TimedBatch]:
    """Epoch after epoch; ends if an epoch is empty (a producer's stream that has ended)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return


class Run:
    """One run, set up and ready to train: workload, pipeline, model and optimizer.

    Args:
        config: The configuration.

    Raises:
        ValueError: A bad configuration value; the message names it and what is valid.
        RuntimeError: ``device="cuda"`` without a CUDA device.
        experiments.data.MissingDataError: The workload's data source is not installed.
    """

    def __init__(self, config: RunConfig):
        cls = registry.get(config.workload)
        self.config, self.hp = config, merge_hparams(cls, config.scale, config.hparams)
        budget = cls.budgets[config.scale]
        self.max_fresh = config.max_fresh or budget.max_fresh
        self.eval_every = config.eval_every_fresh or budget.eval_every_fresh
        self.device = resolve_device(config.device)
        torch.set_num_threads(config.threads)
        self.workload = cls(scale=config.scale, data_dir=config.data_dir, hparams=self.hp)
        if config.consume is not None:
            from experiments.consume import ConsumedBatches

            self.loader: EchoLoader | ConsumedBatches = ConsumedBatches(
                config.consume,
                echo_point=config.echo_point,
                echo_factor=config.echo_factor,
                shuffle_buffer=config.shuffle_buffer,
                seed=config.seed,
                batch_size=self.hp["batch_size"],
            )
        else:
            self.loader = self._own_pipeline(config)
        torch.manual_seed(config.seed)
        self.model = self.workload.build_model(config.seed).to(self.device)
        self.optimizer = self.workload.optimizer(self.model)
        self.meter, self.curve, self.reached_row = _Meter(), [], None

    def _own_pipeline(self, config: RunConfig) -> EchoLoader:
        read, augment, collate = timed_stages(
            self.workload.read("train", config.seed),
            self.workload.augment,
            self.workload.collate,
            config.upstream,
            self.hp["batch_size"],
        )
        return build_pipeline(
            read,
            augment,
            collate,
            point=None if config.echo_point == "none" else config.echo_point,
            factor=config.echo_factor,
            shuffle_buffer=config.shuffle_buffer,
            batch_size=self.hp["batch_size"],
            num_workers=config.num_workers,
            seed=config.seed,
            pin_memory=self.device.type == "cuda",
        )

    def evaluate(self) -> dict[str, Any]:
        start = time.perf_counter()
        self.model.eval()
        with torch.no_grad():
            metrics = self.workload.evaluate(self.model, self.device)
        self.model.train()
        self.meter.eval_s += time.perf_counter() - start
        metrics = {key: float(value) for key, value in metrics.items()}
        target = self.workload.target
        reached = target.reached(metrics)
        row = {
            "fresh_examples": self.loader.fresh_examples,
            "steps": self.loader.steps,
            "wall_s": self.meter.train_s,
            "metric": metrics[target.metric],
            "metrics": metrics,
        }
        self.curve.append(row)
        if reached and self.reached_row is None:
            self.reached_row = row
        return row

    def train_one_step(self, batches: Iterator[TimedBatch]) -> None:
        tick = time.perf_counter()
        timed = next(batches)
        got = time.perf_counter()
        self.workload.train_step(self.model, self.optimizer, to_device(timed.batch, self.device))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.meter.step(tick, got, time.perf_counter(), timed.take_upstream())

    def execute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train until the target or the fresh-example budget; return the run record.

        Args:
            progress: Show a progress bar on stderr. Default None: only when stderr is a
                terminal.
        """
        started = time.perf_counter()
        self.train(sys.stderr.isatty() if progress is None else progress)
        return self.record(time.perf_counter() - started)

    def train(self, show: bool) -> None:
        loader, metric = self.loader, self.workload.target.metric
        self.evaluate()
        next_eval, batches = self.eval_every, _forever(loader)
        with tqdm(total=self.max_fresh, unit="ex", file=sys.stderr, disable=not show) as bar:
            stop = self.config.stop_at_target
            while not (stop and self.reached_row) and loader.fresh_examples < self.max_fresh:
                try:
                    self.train_one_step(batches)
                except StopIteration:  # a producer's stream ended before target or budget
                    break
                bar.update(loader.fresh_examples - bar.n)
                if loader.fresh_examples >= min(next_eval, self.max_fresh):
                    row = self.evaluate()
                    next_eval = (loader.fresh_examples // self.eval_every + 1) * self.eval_every
                    bar.set_postfix({metric: f"{row['metric']:.4g}"})

    def experiment(self) -> dict[str, Any]:
        """The fields that define the experiment (hashed into ``config_hash``)."""
        config = self.config
        return {
            "workload": config.workload,
            "scale": config.scale,
            "echo_point": config.echo_point,
            "echo_factor": float(config.echo_factor),
            "shuffle_buffer": config.shuffle_buffer,
            "seed": config.seed,
            "batch_size": self.hp["batch_size"],
            "hparams": self.hp,
            "budget": {"max_fresh": self.max_fresh, "eval_every_fresh": self.eval_every},
            "upstream": dataclasses.asdict(config.upstream),
            "num_workers": config.num_workers,
            **({"consume": config.consume} if config.consume else {}),
            **({} if config.stop_at_target else {"stop_at_target": False}),
        }

    def record(self, total_s: float) -> dict[str, Any]:
        experiment, row = self.experiment(), self.reached_row
        return {
            "schema_version": 1,
            **experiment,
            "target": self.workload.target.as_dict(),
            "reached": row is not None,
            "fresh_examples_to_target": row and row["fresh_examples"],
            "steps_to_target": row and row["steps"],
            "wall_s_to_target": row and row["wall_s"],
            "eval_curve": self.curve,
            "final": {
                "fresh_examples": self.loader.fresh_examples,
                "steps": self.loader.steps,
                "wall_s": self.meter.train_s,
            },
            "timing": self.meter.summary(total_s),
            "device": describe(self.device),
            "threads": self.config.threads,
            "versions": package_versions(),
            "git_revision": git_revision(Path(__file__).parent),
            "config_hash": config_hash(experiment),
        }


def run(config: RunConfig, *, progress: bool | None = None) -> dict[str, Any]:
    """Set up ``config`` and train it until its target or budget; return the run record.

    Args:
        config: The configuration.
        progress: Show a progress bar on stderr. Default None: only when stderr is a terminal.

    Returns:
        The run record (see ``experiments/schemas/run_record.schema.json``).
    """
    return Run(config).execute(progress)
