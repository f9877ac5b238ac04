"""Image classification examples held in memory as uint8 arrays."""

from __future__ import annotations

import numpy as np
from torch.utils.data import Dataset

__all__ = ["ImageExamples"]


class ImageExamples(Dataset):
    """A map-style dataset of ``(image, label)`` pairs over in-memory arrays.

    Args:
        images: ``uint8`` array of shape ``(N, C, H, W)``.
        labels: Integer array of shape ``(N,)``.

    Raises:
        ValueError: The arrays' shapes do not match.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        if images.ndim != 4 or len(images) != len(labels):
            raise ValueError(
                f"images must be (N, C, H, W) with N == len(labels); got {images.shape} "
                f"and {len(labels)} labels"
            )
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.images[index], int(self.labels[index])
