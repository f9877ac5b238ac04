"""Detection scenes composed from real object images with known boxes: Fashion-MNIST items
pasted at random sizes and places on a blank canvas (a cpu-scale stand-in for COCO)."""

from __future__ import annotations

import numpy as np
from PIL import Image

__all__ = ["compose_scenes"]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.maximum(0, np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2])).prod()
    union = (a[2:] - a[:2]).prod() + (b[2:] - b[:2]).prod() - inter
    return float(inter / union) if union > 0 else 0.0


def _paste(canvas: np.ndarray, item: np.ndarray, size: int, rng: np.random.Generator):
    resized = np.asarray(Image.fromarray(item).resize((size, size), Image.Resampling.BILINEAR))
    top, left = (int(v) for v in rng.integers(0, canvas.shape[0] - size + 1, size=2))
    ys, xs = np.nonzero(resized > 16)
    if len(ys) == 0:
        return None
    box = np.array([left + xs.min(), top + ys.min(), left + xs.max() + 1, top + ys.max() + 1])
    return top, left, resized, box.astype(np.float32)


def compose_scenes(
    images: np.ndarray,
    labels: np.ndarray,
    count: int,
    canvas: int,
    seed: int,
    max_objects: int = 3,
    sizes: tuple[int, int] = (24, 48),
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``count`` scenes of 1 to ``max_objects`` items, boxes overlapping by IoU < 0.3.

    Args:
        images: ``uint8`` items of shape ``(N, 1, h, w)`` (e.g. Fashion-MNIST).
        labels: Their classes, ``(N,)``.
        count: Scenes to make.
        canvas: Scene side in pixels.
        seed: Seeds the choice, size and place of the items.
        max_objects: Most items per scene. Default 3.
        sizes: Range of item sides in pixels. Default ``(24, 48)``.

    Returns:
        ``(image, boxes, classes)`` per scene: ``uint8 (3, canvas, canvas)``, ``float32
        (k, 4)`` boxes as ``x1, y1, x2, y2`` (tight around the item's visible pixels) and
        ``int64 (k,)`` classes (the item classes plus 1; 0 is the background).
    """
    rng = np.random.default_rng(seed)
    scenes = []
    for _ in range(count):
        pixels = np.zeros((canvas, canvas), dtype=np.uint8)
        boxes, classes = [], []
        for _ in range(int(rng.integers(1, max_objects + 1))):
            index = int(rng.integers(len(images)))
            placed = _paste(pixels, images[index][0], int(rng.integers(*sizes, endpoint=True)), rng)
            if placed is None or any(_iou(placed[3], b) >= 0.3 for b in boxes):
                continue
            top, left, item, box = placed
            window = pixels[top : top + item.shape[0], left : left + item.shape[1]]
            np.maximum(window, item, out=window)
            boxes.append(box)
            classes.append(int(labels[index]) + 1)
        scenes.append(
            (
                np.repeat(pixels[None], 3, axis=0),
                np.stack(boxes).astype(np.float32),
                np.asarray(classes, dtype=np.int64),
            )
        )
    return scenes
