"""Generated stand-ins for the paper-scale datasets, written in each one's released layout, so
the paper-scale workloads read them through their own readers (no download).

The content is random (labels, boxes and words carry no signal): it is for running the
paper-scale models and pipelines, not for reaching their targets.
"""

from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.jpeg_training import write_jpeg_folder
from experiments.data.cifar10 import SUBFOLDER
from experiments.data.lm1b import FOLDERS

__all__ = ["WRITERS", "write_c4", "write_cifar10", "write_coco", "write_imagenet", "write_lm1b"]


def write_cifar10(root: Path, images: int) -> None:
    """CIFAR-10's python batches: five training files of ``images // 5`` and a test file."""
    folder = root / SUBFOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, count in [(f"data_batch_{i}", images // 5) for i in range(1, 6)] + [
        ("test_batch", max(1, images // 10))
    ]:
        data = rng.integers(0, 256, (count, 3072), dtype=np.uint8)
        labels = [int(x) for x in rng.integers(0, 10, count)]
        with (folder / name).open("wb") as f:
            pickle.dump({b"data": data, b"labels": labels}, f)


def write_imagenet(root: Path, images: int) -> None:
    """``train/`` and ``val/`` ImageFolder trees of generated JPEG files (val: a tenth)."""
    write_jpeg_folder(root / "train", images, classes=100)
    write_jpeg_folder(root / "val", max(1, images // 10), classes=100, seed=1)


def write_coco(root: Path, images: int) -> None:
    """COCO 2017's layout: ``annotations/instances_<split>2017.json`` and JPEG files under
    ``<split>2017/``, one to four boxes of COCO category ids per image (val: a tenth)."""
    rng = np.random.default_rng(0)
    (root / "annotations").mkdir(parents=True)
    for split, count in (("train", images), ("val", max(1, images // 10))):
        (root / f"{split}2017").mkdir()
        entries, annotations = [], []
        for image_id in range(1, count + 1):
            width, height = int(rng.integers(320, 641)), int(rng.integers(240, 481))
            name = f"{image_id:012d}.jpg"
            pixels = rng.integers(0, 256, (height // 8, width // 8, 3), dtype=np.uint8)
            image = Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR)
            image.save(root / f"{split}2017" / name, quality=90)
            entries.append({"id": image_id, "file_name": name, "width": width, "height": height})
            for _ in range(int(rng.integers(1, 5))):
                w, h = rng.uniform(0.1, 0.6) * width, rng.uniform(0.1, 0.6) * height
                x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
                annotations.append(
                    {
                        "id": len(annotations) + 1,
                        "image_id": image_id,
                        "category_id": int(rng.integers(1, 91)),
                        "bbox": [x, y, w, h],
                        "area": w * h,
                        "iscrowd": 0,
                    }
                )
        categories = [{"id": i, "name": str(i)} for i in range(1, 91)]
        dataset = {"images": entries, "annotations": annotations, "categories": categories}
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(dataset))


def _sentences(count: int, seed: int) -> list[str]:
    """Sentences of 5-30 pseudo-words drawn from a Zipf-like vocabulary of 5,000."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, int(rng.integers(2, 10)))) for _ in range(5000)]
    weights = 1 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    return [
        " ".join(rng.choice(vocabulary, int(rng.integers(5, 31)), p=weights)) + " ."
        for _ in range(count)
    ]


def write_lm1b(root: Path, sentences: int) -> None:
    """LM1B's release layout: two training shards and one held-out shard (a tenth)."""
    for split, folder in FOLDERS.items():
        path = root / "1-billion-word-language-modeling-benchmark-r13output" / folder
        path.mkdir(parents=True)
        shards = 2 if split == "train" else 1
        count = sentences // 2 if split == "train" else max(1, sentences // 10)
        for shard in range(shards):
            name = (
                f"news.en-{shard:05d}-of-00100"
                if split == "train"
                else f"news.en.heldout-{shard:05d}-of-00050"
            )
            text = "\n".join(_sentences(count, seed=10 * shard + len(split)))
            (path / name).write_text(text + "\n")


def write_c4(root: Path, documents: int) -> None:
    """C4's released files: two gzipped JSON-lines training shards and one validation shard."""
    folder = root / "c4" / "en"
    folder.mkdir(parents=True)
    for split, shards, count in (("train", 2, documents // 2), ("validation", 1, documents // 10)):
        for shard in range(shards):
            sentences = _sentences(8 * max(1, count), seed=100 + 10 * shard + len(split))
            lines = [
                json.dumps({"text": " ".join(sentences[i : i + 8]), "url": "generated"})
                for i in range(0, len(sentences), 8)
            ]
            name = f"c4-{split}.{shard:05d}-of-01024.json.gz"
            with gzip.open(folder / name, "wt", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")


WRITERS: dict[str, Callable[[Path, int], None]] = {
    "imagenet_resnet": write_imagenet,
    "coco_ssd": write_coco,
    "lm1b_transformer": write_lm1b,
    "common_crawl_transformer": write_c4,
    "cifar10_resnet": write_cifar10,
}
"""Workload name -> ``writer(root, examples)``: that workload's data, generated under ``root``.
Most important on a GPU first, so a run cut short by a time limit loses the least: ResNet-50
(the largest model and step, the one a GPU is for), SSD300, the two Transformers, then
ResNet-32 (small enough for a CPU)."""
