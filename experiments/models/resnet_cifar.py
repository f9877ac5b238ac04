"""The CIFAR-style ResNet of He et al. 2016 (section 4.2): three stages of basic blocks."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CifarResNet", "shortcut"]


def shortcut(inputs: int, outputs: int, stride: int, bn_momentum: float) -> nn.Module:
    """A residual block's shortcut: identity, or a 1x1 convolution + batch norm where the
    block changes the shape (option B of He et al.)."""
    if stride == 1 and inputs == outputs:
        return nn.Identity()
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 1, stride, bias=False),
        nn.BatchNorm2d(outputs, momentum=bn_momentum),
    )


class _BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int, bn_momentum: float):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs, momentum=bn_momentum)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs, momentum=bn_momentum)
        self.shortcut = shortcut(inputs, outputs, stride, bn_momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for small images: widths ``width``, ``2 width``, ``4 width``.

    ResNet-32 is ``blocks_per_stage=5, width=16``. Shortcuts that change shape are 1x1
    convolutions (the paper's option B) rather than zero padding.

    Args:
        blocks_per_stage: Basic blocks in each of the three stages (``n``).
        width: Channels of the first stage. Default 16.
        in_channels: Image channels. Default 3.
        num_classes: Classes. Default 10.
        bn_momentum: Batch-norm running-statistics momentum (torch's convention: weight of
            the newest batch). Default 0.1. Short runs with a large learning rate evaluate more
            stably with a larger value, since the running statistics lag the weights less.
    """

    def __init__(
        self,
        blocks_per_stage: int,
        width: int = 16,
        in_channels: int = 3,
        num_classes: int = 10,
        bn_momentum: float = 0.1,
    ):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, width, 3, 1, 1, bias=False),
            nn.BatchNorm2d(width, momentum=bn_momentum),
            nn.ReLU(),
        ]
        inputs = width
        for stage in range(3):
            outputs = width * 2**stage
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(_BasicBlock(inputs, outputs, stride, bn_momentum))
                inputs = outputs
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(inputs, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))
