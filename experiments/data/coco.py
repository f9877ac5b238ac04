"""COCO 2017 detection data in its released layout: ``annotations/instances_<split>2017.json``
and the images under ``<split>2017/``, decoded with PIL when read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from torch.utils.data import Dataset

from experiments.data import MissingDataError

__all__ = ["CocoDetections"]


class CocoDetections(Dataset):
    """``(image uint8 (3, H, W), boxes float32 (k, 4) xyxy, classes int64 (k,))`` per image.

    Crowd annotations are skipped, and so are images left without boxes.

    Args:
        data_dir: The COCO folder (holding ``annotations/`` and ``<split>2017/``).
        split: ``"train"`` or ``"val"``.

    Raises:
        MissingDataError: The annotation file is missing; the message names it.
    """

    def __init__(self, data_dir: str | Path, split: str):
        from pycocotools.coco import COCO

        root = Path(data_dir)
        annotations = root / "annotations" / f"instances_{split}2017.json"
        if not annotations.is_file():
            raise MissingDataError(
                f"COCO annotations {annotations} not found; --data-dir must hold annotations/ "
                f"and {split}2017/ from the COCO 2017 release"
            )
        self.folder = root / f"{split}2017"
        self.coco = COCO(str(annotations))
        self.ids = [
            i
            for i in sorted(self.coco.imgs)
            if any(not a["iscrowd"] for a in self.coco.imgToAnns[i])
        ]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        image_id = self.ids[index]
        info = self.coco.imgs[image_id]
        with Image.open(self.folder / info["file_name"]) as image:
            pixels = np.asarray(image.convert("RGB"), dtype=np.uint8).transpose(2, 0, 1).copy()
        found = [a for a in self.coco.imgToAnns[image_id] if not a["iscrowd"]]
        boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in found)])
        classes = np.array([a["category_id"] for a in found], dtype=np.int64)
        return pixels, boxes.astype(np.float32).reshape(-1, 4), classes
