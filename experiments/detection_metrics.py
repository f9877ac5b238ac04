"""COCO-style detection metrics with pycocotools (the reference implementation)."""

from __future__ import annotations

import contextlib
import io

import torch

__all__ = ["coco_map"]


def coco_map(
    truths: list[dict[str, torch.Tensor]], detections: list[dict[str, torch.Tensor]], size: int
) -> dict[str, float]:
    """COCO AP over IoU 0.50:0.95 (``map``) and at IoU 0.5 (``map_50``).

    Args:
        truths: Per image, ``boxes`` (k, 4) as ``x1, y1, x2, y2`` and ``labels`` (k,).
        detections: Per image, ``boxes``, ``scores`` and ``labels``.
        size: Image side in pixels.
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images, annotations, results, classes = [], [], [], set()
    for image_id, (truth, found) in enumerate(zip(truths, detections, strict=True), start=1):
        images.append({"id": image_id, "width": size, "height": size})
        for box, label in zip(truth["boxes"].tolist(), truth["labels"].tolist(), strict=True):
            w, h = box[2] - box[0], box[3] - box[1]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": label,
                    "bbox": [box[0], box[1], w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
            classes.add(label)
        for box, score, label in zip(
            found["boxes"].tolist(), found["scores"].tolist(), found["labels"].tolist(), strict=True
        ):
            results.append(
                {
                    "image_id": image_id,
                    "category_id": label,
                    "score": score,
                    "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
                }
            )
    if not results:
        return {"map": 0.0, "map_50": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        truth = COCO()
        truth.dataset = {
            "images": images,
            "annotations": annotations,
            "categories": [{"id": c} for c in sorted(classes)],
        }
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return {"map": float(evaluation.stats[0]), "map_50": float(evaluation.stats[1])}
