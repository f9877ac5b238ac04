"""A small ResNet of bottleneck blocks (He et al. 2016, the block ResNet-50 uses) for small
images: a strided 3x3 stem and three stages."""

from __future__ import annotations

import torch
from torch import nn

from experiments.models.resnet_cifar import shortcut

__all__ = ["SmallBottleneckResNet"]


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inputs: int, width: int, stride: int, bn_momentum: float):
        super().__init__()
        outputs = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(inputs, width, 1, bias=False),
            nn.BatchNorm2d(width, momentum=bn_momentum),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False),
            nn.BatchNorm2d(width, momentum=bn_momentum),
            nn.ReLU(),
            nn.Conv2d(width, outputs, 1, bias=False),
            nn.BatchNorm2d(outputs, momentum=bn_momentum),
        )
        self.shortcut = shortcut(inputs, outputs, stride, bn_momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class SmallBottleneckResNet(nn.Module):
    """Stem (3x3 conv, stride 2) and three stages of bottleneck blocks with widths ``width``,
    ``2 width``, ``4 width`` (outputs 4x those), the last two stages strided.

    Args:
        blocks: Bottleneck blocks per stage. Default ``(1, 1, 1)``.
        width: Bottleneck width of the first stage. Default 8.
        num_classes: Classes. Default 10.
        bn_momentum: Batch-norm running-statistics momentum (torch's convention). Default 0.1.
    """

    def __init__(
        self,
        blocks: tuple[int, ...] = (1, 1, 1),
        width: int = 8,
        num_classes: int = 10,
        bn_momentum: float = 0.1,
    ):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, width * 2, 3, 2, 1, bias=False),
            nn.BatchNorm2d(width * 2, momentum=bn_momentum),
            nn.ReLU(),
        ]
        inputs = width * 2
        for stage, count in enumerate(blocks):
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(_Bottleneck(inputs, width * 2**stage, stride, bn_momentum))
                inputs = width * 2**stage * _Bottleneck.expansion
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(inputs, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))
