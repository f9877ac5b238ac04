"""A small SSD (Liu et al. 2016) built from torchvision's `SSD` with a light convolutional
backbone, for small images."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn
from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
from torchvision.models.detection.ssd import SSD

__all__ = ["small_ssd"]


def _stage(inputs: int, outputs: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False),
        nn.BatchNorm2d(outputs),
        nn.ReLU(),
        nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False),
        nn.BatchNorm2d(outputs),
        nn.ReLU(),
    )


class _Backbone(nn.Module):
    """Feature maps at strides 8, 16 and 32."""

    def __init__(self, width: int):
        super().__init__()
        self.stem = nn.Sequential(_stage(3, width, 2), _stage(width, width, 2))
        self.stages = nn.ModuleList(
            [
                _stage(width, 2 * width, 2),
                _stage(2 * width, 4 * width, 2),
                _stage(4 * width, 4 * width, 2),
            ]
        )
        self.out_channels = [2 * width, 4 * width, 4 * width]

    def forward(self, x: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        x = self.stem(x)
        features = OrderedDict()
        for index, stage in enumerate(self.stages):
            x = stage(x)
            features[str(index)] = x
        return features


def small_ssd(num_classes: int, size: int, width: int = 16) -> SSD:
    """torchvision `SSD` on a 3-map backbone (strides 8, 16, 32), no pretrained weights.

    Args:
        num_classes: Classes including the background (index 0).
        size: Input side in pixels (images are resized to it; pass images of that size).
        width: Backbone channels of the first stage. Default 16.
    """
    anchors = DefaultBoxGenerator([[2], [2, 3], [2]], min_ratio=0.2, max_ratio=0.9)
    return SSD(
        _Backbone(width),
        anchors,
        (size, size),
        num_classes,
        image_mean=[0.0, 0.0, 0.0],
        image_std=[1.0, 1.0, 1.0],
        score_thresh=0.01,
        detections_per_img=50,
        topk_candidates=100,
    )
