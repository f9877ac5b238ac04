"""Train one workload configuration to its target and build its run record.

read -> [echo] -> augment -> [echo] -> collate -> [echo] comes from `echo.torch.build_pipeline`.
The model is evaluated every ``eval_every_fresh`` *fresh* examples (counted exactly at the
source by the pipeline), so configurations with different echo factors are compared at the
same amount of data read. The run stops at the first evaluation that meets the target, or once
``max_fresh`` fresh examples were read (then ``reached`` is false: a result, not an error), or
at an evaluation where the training loss is no longer finite (``diverged``, a search's
hopeless trial).
Wall times count training only: evaluation time is recorded apart (``timing.eval_s``).

With a ``resolution`` (the protocol study), the model's weights are also kept every
``reference_fresh / resolution`` fresh examples between evaluations. When an evaluation first
reaches the target, the kept models since the previous evaluation are evaluated by bisection,
assuming that within one evaluation interval the metric, once at the target, stays there, to
find the first kept model that reaches it: the record's ``refined`` crossing, located to that
spacing at the cost of about log2(kept models) extra evaluations instead of an evaluation at
every kept point.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from echo.torch import EchoLoader
from experiments import registry
from experiments.devices import describe, resolve_device, to_device
from experiments.pipeline import endless, workload_pipeline
from experiments.upstream import TimedBatch, UpstreamCost
from run_contract import numerics
from run_contract.censoring import Incumbent, stops
from run_contract.identity import RunOptions, RunSpec, identity_hash
from run_contract.record import git_revision, machine, package_versions

__all__ = ["Run", "RunConfig", "run"]


@dataclass(frozen=True)
class RunConfig:
    """One run: what it is and how it executes.

    Args:
        spec: The run's identity (`run_contract.identity.RunSpec`).
        options: Device, threads, data folder. Default: `RunOptions` defaults.
        incumbent: The best of the earlier trials of the run's search, which it is censored
            against (`run_contract.censoring`). Default None: trained to its target or budget.
    """

    spec: RunSpec
    options: RunOptions = field(default_factory=RunOptions)
    incumbent: Incumbent | None = None


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
        spec, options = config.spec, config.options
        self.config, self.spec = config, spec
        defaults = registry.defaults(spec.workload, spec.scale)
        self.identity = spec.resolve(defaults)
        self.refine_every = spec.refine_every_fresh(defaults)
        self.hp = self.identity["hparams"]
        self.max_fresh = self.identity["budget"]["max_fresh"]
        self.eval_every = self.identity["budget"]["eval_every_fresh"]
        self.device = resolve_device(options.device)
        torch.set_num_threads(options.threads)
        numerics.check()
        cls = registry.get(spec.workload)
        self.workload = cls(scale=spec.scale, data_dir=options.data_dir, hparams=self.hp)
        if spec.consume is not None:
            from experiments.consume import ConsumedBatches

            self.loader: EchoLoader | ConsumedBatches = ConsumedBatches(
                spec.consume,
                echo_point=spec.echo_point,
                echo_factor=spec.echo_factor,
                shuffle_buffer=spec.shuffle_buffer,
                seed=spec.seed,
                batch_size=self.hp["batch_size"],
            )
        else:
            self.loader = workload_pipeline(
                self.workload,
                seed=spec.seed,
                upstream=UpstreamCost(
                    spec.upstream_latency_ms, spec.upstream_latency_per, spec.upstream_cpu_ms
                ),
                num_workers=spec.num_workers,
                point=None if spec.echo_point == "none" else spec.echo_point,
                factor=spec.echo_factor,
                shuffle_buffer=spec.shuffle_buffer,
                pin_memory=self.device.type == "cuda",
            )
        torch.manual_seed(spec.seed)
        self.model = self.workload.build_model().to(self.device)
        self.optimizer = self.workload.optimizer(self.model)
        self.schedule = self.workload.schedule(self.optimizer)
        self.meter, self.curve, self.reached_row = _Meter(), [], None
        self.kept: list[dict[str, Any]] = []  # models kept since the last evaluation
        self.last_loss: torch.Tensor | None = None
        self.diverged = False
        self.censored: dict[str, int] | None = None
        self.refined: dict[str, Any] | None = None
        self._eval_model: torch.nn.Module | None = None

    def _metrics(self, model: torch.nn.Module) -> dict[str, float]:
        start = time.perf_counter()
        model.eval()
        with torch.no_grad():
            metrics = self.workload.evaluate(model, self.device)
        model.train()
        self.meter.eval_s += time.perf_counter() - start
        return {key: float(value) for key, value in metrics.items()}

    def keep(self) -> None:
        """Keep the current weights for `refine` (time counted as evaluation time)."""
        start = time.perf_counter()
        weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.kept.append(
            {
                "fresh_examples": self.loader.fresh_examples,
                "steps": self.loader.steps,
                "wall_s": self.meter.train_s,
                "weights": weights,
            }
        )
        self.meter.eval_s += time.perf_counter() - start

    def refine(self, reached_row: dict[str, Any]) -> dict[str, Any]:
        """The first kept model since the last evaluation that reaches the target (bisection
        over the kept models, ``reached_row`` being the known reached end; at the first
        evaluation, a bisection that ends there is followed by the untried kept models, in
        order)."""
        if self._eval_model is None and self.kept:
            self._eval_model = copy.deepcopy(self.model)
        candidates = [*self.kept, None]  # None: the evaluation that reached it
        low, high, found = 0, len(self.kept), dict(reached_row)
        tried: set[int] = set()
        while low < high:
            middle = (low + high) // 2
            tried.add(middle)
            reached = self._kept_reaches(candidates[middle])
            if reached is not None:
                high, found = middle, reached
            else:
                low = middle + 1
        below_first = len(self.curve) == 2 and high == len(self.kept) and bool(self.kept)
        if below_first:
            for index in sorted(set(range(len(self.kept))) - tried):
                tried.add(index)
                reached = self._kept_reaches(self.kept[index])
                if reached is not None:
                    found = reached
                    break
        return {
            "every_fresh": self.refine_every,
            "fresh_examples_to_target": found["fresh_examples"],
            "steps_to_target": found["steps"],
            "wall_s_to_target": found["wall_s"],
            "metric": found["metric"],
            "evaluations": len(tried),
            **({"below_first": True} if below_first else {}),
        }

    def _kept_reaches(self, kept: dict[str, Any]) -> dict[str, Any] | None:
        """Evaluate a kept model: its crossing row when it reaches the target, else None."""
        self._eval_model.load_state_dict(kept["weights"])
        metrics = self._metrics(self._eval_model)
        if not self.workload.target.reached(metrics):
            return None
        found = {k: kept[k] for k in ("fresh_examples", "steps", "wall_s")}
        return {**found, "metric": metrics[self.workload.target.metric]}

    def _refined_or_none(self) -> dict[str, Any]:
        if self.refined is not None:
            return self.refined
        none = dict.fromkeys(("fresh_examples_to_target", "steps_to_target", "wall_s_to_target"))
        return {"every_fresh": self.refine_every, **none, "metric": None, "evaluations": 0}

    def evaluate(self) -> dict[str, Any]:
        metrics = self._metrics(self.model)
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
            if self.refine_every is not None:
                self.refined = self.refine(row)
        self.kept.clear()
        return row

    def train_one_step(self, batches: Iterator[TimedBatch]) -> None:
        tick = time.perf_counter()
        timed = next(batches)
        got = time.perf_counter()
        batch = to_device(timed.batch, self.device)
        self.last_loss = self.workload.train_step(self.model, self.optimizer, batch)
        if self.schedule is not None:
            self.schedule.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.meter.step(tick, got, time.perf_counter(), timed.take_upstream())

    def execute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train until the target, the fresh-example budget or censoring; return the run record.

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
        next_eval, batches = self.eval_every, endless(loader)
        every = self.refine_every
        next_keep = every if every is not None else None
        with tqdm(total=self.max_fresh, unit="ex", file=sys.stderr, disable=not show) as bar:
            stop = self.spec.stop_at_target
            while not (stop and self.reached_row) and loader.fresh_examples < self.max_fresh:
                try:
                    self.train_one_step(batches)
                except StopIteration:  # a producer's stream ended before target or budget
                    break
                bar.update(loader.fresh_examples - bar.n)
                fresh = loader.fresh_examples
                if fresh >= min(next_eval, self.max_fresh):
                    # A non-finite training loss ends the run: it diverged (a result; the
                    # model is not evaluated, so the record holds no NaN).
                    loss = self.last_loss
                    self.diverged = loss is not None and not bool(torch.isfinite(loss).all())
                    if self.diverged:
                        break
                    row = self.evaluate()
                    next_eval = (fresh // self.eval_every + 1) * self.eval_every
                    bar.set_postfix({metric: f"{row['metric']:.4g}"})
                    incumbent = self.config.incumbent
                    if fresh < self.max_fresh and stops(fresh, bool(self.reached_row), incumbent):
                        self.censored = {"at_fresh": fresh, **incumbent.as_dict()}
                        break
                elif next_keep is not None and fresh >= next_keep and not self.reached_row:
                    self.keep()
                if next_keep is not None and fresh >= next_keep:
                    next_keep = (fresh // every + 1) * every

    def record(self, total_s: float) -> dict[str, Any]:
        row = self.reached_row
        return {
            "schema_version": 1,
            **self.identity,
            "target": self.workload.target.as_dict(),
            "reached": row is not None,
            **({"diverged": True} if self.diverged else {}),
            **({"censored": self.censored} if self.censored else {}),
            "fresh_examples_to_target": row and row["fresh_examples"],
            "steps_to_target": row and row["steps"],
            "wall_s_to_target": row and row["wall_s"],
            **({} if self.refine_every is None else {"refined": self._refined_or_none()}),
            "eval_curve": self.curve,
            "final": {
                "fresh_examples": self.loader.fresh_examples,
                "steps": self.loader.steps,
                "wall_s": self.meter.train_s,
            },
            "timing": self.meter.summary(total_s),
            "device": describe(self.device),
            "machine": machine(),
            "numerics": numerics.stamp(),
            "threads": self.config.options.threads,
            "versions": package_versions(),
            "git_revision": git_revision(Path(__file__).parent),
            "config_hash": identity_hash(self.identity),
        }


def run(config: RunConfig, *, progress: bool | None = None) -> dict[str, Any]:
    """Set up ``config`` and train it until its target or budget; return the run record.

    Args:
        config: The configuration.
        progress: Show a progress bar on stderr. Default None: only when stderr is a terminal.

    Returns:
        The run record (see ``run_contract/schemas/run_record.schema.json``).
    """
    return Run(config).execute(progress)
