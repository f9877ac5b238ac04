"""What the ResNet image-classification workloads share: examples ``(uint8 CHW image, label)``
collated into a batch normalised by per-channel statistics, SGD with Nesterov momentum (or the
``optimizer`` hyper-parameter's choice, `experiments.optimizers`), cross-entropy, top-1
accuracy, the shape of their search spaces (`resnet_search_spaces`) and their paper-scale
optimizer and schedule (`nesterov_linear_decay`). A subclass reads and augments its images,
builds its model, gives its evaluation batches (`ResNetWorkload.eval_batches`) and declares
its targets, hyper-parameters and budgets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import torch
from torch.nn import functional as F

from experiments.optimizers import build_optimizer
from experiments.search import SCHEDULE
from experiments.workload import MOMENTUM, Dimension, SearchSpace, Workload

__all__ = ["ChannelStats", "ResNetWorkload", "nesterov_linear_decay", "resnet_search_spaces"]

ChannelStats = tuple[tuple[float, ...], tuple[float, ...]]
"""Per-channel ``(mean, std)`` of the training images, in [0, 1]."""


def resnet_search_spaces(
    cpu_lr: Dimension, paper_lr: Dimension, paper_decay_steps: Dimension
) -> dict[str, SearchSpace]:
    """What the protocol study tunes (`experiments.search`) for a ResNet: the learning rate
    log-uniform over 1/5 to 5 times the default, and 1 - momentum log-uniform (momentum 0.5
    to 0.98); at cpu scale also the schedule (`experiments.search.SCHEDULE`, over each
    trial's budget), at paper scale the linear decay's length, log-uniform over about 1/3 to
    3 times it.

    Args:
        cpu_lr: The learning rate's range at cpu scale.
        paper_lr: The learning rate's range at paper scale.
        paper_decay_steps: The range of ``decay_steps`` (the linear decay's length) at paper
            scale.

    Returns:
        ``{scale: SearchSpace}`` for ``cpu`` and ``paper``.
    """
    return {
        "cpu": SearchSpace({"lr": cpu_lr, "momentum": MOMENTUM, "schedule": SCHEDULE}),
        "paper": SearchSpace(
            {"lr": paper_lr, "momentum": MOMENTUM, "decay_steps": paper_decay_steps}
        ),
    }


def nesterov_linear_decay(decay_steps: int) -> dict[str, Any]:
    """The ResNets' paper-scale optimizer and schedule, as hyper-parameters: Nesterov momentum,
    the rate decayed linearly (a secondary summary of the paper's v3) over ``decay_steps``
    steps to 1% of the initial rate (the end is not from the paper's text).

    Args:
        decay_steps: The decay's length in optimizer steps.
    """
    return {
        "optimizer": "nesterov",
        "schedule": "linear_decay",
        "decay_steps": decay_steps,
        "final_lr_fraction": 0.01,
    }


class ResNetWorkload(Workload):
    """Base of the ResNet image-classification workloads (not registered itself).

    Class attributes a subclass sets, besides those of `Workload`:
        channel_stats: ``{scale: ChannelStats}``: what `collate` normalises by.
    """

    channel_stats: ClassVar[dict[str, ChannelStats]] = {}

    def collate(self, examples: list[tuple[np.ndarray, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Stack into a float batch normalised by ``channel_stats`` and a label tensor."""
        images = torch.from_numpy(np.stack([image for image, _ in examples]))
        labels = torch.tensor([label for _, label in examples], dtype=torch.int64)
        mean, std = (torch.tensor(s).view(1, -1, 1, 1) for s in self.channel_stats[self.scale])
        return (images.float() / 255 - mean) / std, labels

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """SGD with Nesterov momentum unless the ``optimizer`` hyper-parameter names another."""
        return build_optimizer(model, self.hp, "nesterov")

    def loss(
        self, model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels)

    def eval_batches(self) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        """The evaluation images as collated ``(images, labels)`` batches, on the CPU."""
        raise NotImplementedError

    def evaluate(self, model: torch.nn.Module, device: torch.device) -> dict[str, float]:
        """Top-1 accuracy and mean cross-entropy over `eval_batches`."""
        correct, loss, count = 0, 0.0, 0
        for images, labels in self.eval_batches():
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss += F.cross_entropy(logits, labels, reduction="sum").item()
            correct += (logits.argmax(1) == labels).sum().item()
            count += len(labels)
        return {"accuracy": correct / count, "loss": loss / count}
