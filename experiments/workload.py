"""The workload contract: what a training pipeline declares so the harness can run it.

A workload is one class in one file under ``experiments/workloads/``, registered with
`experiments.registry.register`. It gives the stages of the input pipeline (`Workload.read`,
`Workload.augment`, `Workload.collate`), the model, its loss, optimizer and learning-rate
schedule, `Workload.evaluate`, and, per scale, a declared `Target`, default hyper-parameters
and an evaluation `Budget`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch.utils.data import default_collate

from experiments.schedules import lr_scheduler
from experiments.search import Dimension, SearchSpace
from run_contract.identity import SCALES

__all__ = [
    "DIRECTIONS",
    "MOMENTUM",
    "SCALES",
    "SPLITS",
    "Budget",
    "Dimension",
    "SearchSpace",
    "Target",
    "Workload",
]

SPLITS: tuple[str, ...] = ("train", "eval")
"""The splits `Workload.read` is asked for: training examples, and held-out evaluation ones."""


DIRECTIONS: tuple[str, ...] = ("max", "min")
"""A target is reached when the metric is >= its value (``max``) or <= it (``min``)."""


@dataclass(frozen=True)
class Target:
    """A declared quality target: the run stops when ``metric`` first reaches ``value``.

    Args:
        metric: Name of a key in the dict `Workload.evaluate` returns.
        value: The threshold.
        direction: ``"max"`` (higher is better: reached when metric >= value) or ``"min"``
            (lower is better: reached when metric <= value). Declared, never guessed.

    Raises:
        ValueError: ``direction`` is not one of `DIRECTIONS`, or ``value`` is not finite.
    """

    metric: str
    value: float
    direction: str

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(
                f"direction={self.direction!r} is not valid; use one of {', '.join(DIRECTIONS)}"
            )
        if not isinstance(self.value, (int, float)) or not math.isfinite(self.value):
            raise ValueError(f"value must be a finite number, got {self.value!r}")

    def reached(self, metrics: dict[str, float]) -> bool:
        """Whether ``metrics[self.metric]`` meets the target.

        Raises:
            KeyError: ``metrics`` has no entry for the target's metric.
        """
        if self.metric not in metrics:
            raise KeyError(f"evaluate() returned no {self.metric!r}; it returned {list(metrics)}")
        measured = float(metrics[self.metric])
        return measured >= self.value if self.direction == "max" else measured <= self.value

    def as_dict(self) -> dict[str, Any]:
        """The target as a plain dict, as it appears in run records."""
        return {"metric": self.metric, "value": float(self.value), "direction": self.direction}


MOMENTUM = Dimension(0.5, 0.98, "one_minus_log")
"""The momentum dimension every workload's search shares: 1 - momentum log-uniform over
[0.02, 0.5] (for Adam-style optimizers, beta1)."""


@dataclass(frozen=True)
class Budget:
    """How long a run may train and how often it evaluates, both in fresh examples.

    Args:
        max_fresh: Stop (target not reached) once this many fresh examples were read.
        eval_every_fresh: Evaluate each time this many more fresh examples were read.
        reference_fresh: The unit of the protocol study's budgets: about the fresh examples
            the baseline (default hyper-parameters) needs to reach the target, measured by
            ``python -m benchmarks.workload_baselines`` (its median over seeds). A trial's cap
            (``budget_cap``) and the refined evaluation grid (``resolution``) are fractions
            of it. Default None: not measured at this scale (the protocol's budget fields are
            then refused).
    """

    max_fresh: int
    eval_every_fresh: int
    reference_fresh: int | None = None


class Workload:
    """Base class of a training workload. Subclass it in one file and register it.

    Class attributes a subclass sets:
        targets: ``{scale: Target}`` for each scale in `SCALES` it supports.
        default_hparams: ``{scale: {name: default}}``; must include ``batch_size`` and ``lr``.
            A run may override any of them by name; the run's values are ``self.hp``.
        budgets: ``{scale: Budget}``: default training budget and evaluation interval.
        search_spaces: ``{scale: SearchSpace}``: what the protocol study's searches tune
            (``lr`` log-uniform, ``momentum`` as 1 - momentum log-uniform, a schedule
            parameter where the workload has one); the scale's defaults lie inside it. Optional:
            a scale without one cannot run search trials.
        description: One line, shown by ``python -m experiments.check``.
        revision: The workload's code revision, default 1. Raise it with a change to the
            code that changes what a run trains (data, model, augmentation, loss, evaluation):
            records of another revision are then refused as stale, so the workflow retrains
            them, instead of being silently reused.

    The learning rate follows `Workload.schedule`, which the harness steps once after each
    optimizer step; by default it is built from the hyper-parameters ``schedule`` (one of
    `experiments.schedules.SCHEDULES`) and that schedule's parameters, and a run without a
    ``schedule`` (every cpu-scale one) trains at a constant rate.

    Args:
        scale: One of the scales in ``targets``. Default ``"cpu"``.
        data_dir: Where the data lives (needed by ``paper`` scale; ``cpu`` scale may use it as
            a cache). Default None.
        hparams: The hyper-parameters of this run, kept as ``self.hp`` (the scale's
            ``default_hparams`` when None).

    Raises:
        ValueError: ``scale`` is not one the workload declares.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    targets: ClassVar[dict[str, Target]] = {}
    default_hparams: ClassVar[dict[str, dict[str, Any]]] = {}
    budgets: ClassVar[dict[str, Budget]] = {}
    search_spaces: ClassVar[dict[str, SearchSpace]] = {}
    revision: ClassVar[int] = 1

    def __init__(
        self,
        scale: str = "cpu",
        data_dir: str | Path | None = None,
        hparams: dict[str, Any] | None = None,
    ):
        if scale not in self.targets:
            raise ValueError(
                f"scale={scale!r} is not declared by workload {self.name!r}; "
                f"valid: {', '.join(self.targets)}"
            )
        self.scale = scale
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.hp = dict(self.default_hparams[scale] if hparams is None else hparams)

    @property
    def hparams(self) -> dict[str, Any]:
        """Not the run's hyper-parameters: those are ``self.hp`` (this raises, saying so)."""
        raise AttributeError(
            f"{type(self).__name__}.hparams does not exist: this run's hyper-parameters are "
            "self.hp, the declared defaults default_hparams[scale]"
        )

    @property
    def target(self) -> Target:
        """The declared target at this scale."""
        return self.targets[self.scale]

    def read(self, split: str) -> Sequence[Any]:
        """Source examples of ``split`` (``"train"`` or ``"eval"``), before augmentation.

        Args:
            split: One of `SPLITS`: ``"train"`` or ``"eval"``.

        Returns:
            A sized, indexable collection (a list, an array or a map-style Dataset): the
            pipeline shuffles and shards it by index. Not a generator.
        """
        raise NotImplementedError

    def augment(self, example: Any, rng: np.random.Generator) -> Any:
        """A randomly augmented copy of one example. Default: the identity."""
        return example

    def collate(self, examples: list[Any]) -> Any:
        """One batch from a list of (augmented) examples. Default: torch's `default_collate`."""
        return default_collate(examples)

    def build_model(self) -> torch.nn.Module:
        """A freshly initialised model. The harness seeds torch with the run's seed first, so
        initialisation must draw from torch's global generator only."""
        raise NotImplementedError

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """The optimizer, from ``self.hp``. Default: SGD with ``lr`` and ``momentum`` (0.9).
        `experiments.optimizers.build_optimizer` picks one by an ``optimizer``
        hyper-parameter instead."""
        return torch.optim.SGD(
            model.parameters(), lr=self.hp["lr"], momentum=self.hp.get("momentum", 0.9)
        )

    def schedule(
        self, optimizer: torch.optim.Optimizer
    ) -> torch.optim.lr_scheduler.LRScheduler | None:
        """The learning-rate schedule over ``optimizer``, stepped by the harness once after
        each optimizer step; None: a constant rate. Default: from ``self.hp``'s ``schedule``
        and its parameters (`experiments.schedules.lr_scheduler`; None without one).

        Raises:
            ValueError: An unknown schedule or a missing or bad parameter, named.
        """
        return lr_scheduler(optimizer, self.hp)

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The training loss of one batch (already on the model's device)."""
        raise NotImplementedError

    def train_step(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Any
    ) -> torch.Tensor:
        """One optimisation step; returns the detached loss (no device sync)."""
        optimizer.zero_grad(set_to_none=True)
        loss = self.loss(model, batch)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def evaluate(self, model: torch.nn.Module, device: torch.device) -> dict[str, float]:
        """Metrics on the evaluation split; must include the target's metric."""
        raise NotImplementedError
