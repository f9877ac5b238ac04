"""The COCO-like detection workload: composed scenes, box-aware augmentation, pycocotools mAP,
cpu scale end to end, the COCO 2017 reader, and the paper-scale data path on a tiny COCO fixture
(`PAPER_SCALE`, checked by ``test_experiments_workloads``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from data_marks import needs_fashion_mnist
from PIL import Image
from workload_checks import PaperScale, run_workload

from experiments.data import MissingDataError
from experiments.data.coco import CocoDetections
from experiments.data.scenes import compose_scenes
from experiments.detection_metrics import coco_map
from experiments.workloads.coco_ssd import CocoSsd
from run_contract.record import validate


def write_coco_fixture(root: Path) -> None:
    rng = np.random.default_rng(0)
    (root / "annotations").mkdir(parents=True)
    for split in ("train", "val"):
        (root / f"{split}2017").mkdir()
        images, annotations = [], []
        for image_id in range(1, 5):
            name = f"{image_id:012d}.jpg"
            pixels = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"{split}2017" / name)
            images.append({"id": image_id, "file_name": name, "width": 80, "height": 60})
            for crowd in (0, 1):
                annotations.append(
                    {
                        "id": len(annotations) + 1,
                        "image_id": image_id,
                        "category_id": 18,
                        "bbox": [10.0, 5.0, 30.0, 40.0],
                        "area": 1200.0,
                        "iscrowd": crowd,
                    }
                )
        images.append({"id": 99, "file_name": "none.jpg", "width": 80, "height": 60})
        dataset = {"images": images, "annotations": annotations, "categories": [{"id": 18}]}
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(dataset))


def check_paper_record(record: dict, folder: Path) -> None:
    """mAP is the target, and every evaluation's mAP lies in [0, 1]."""
    assert record["target"]["metric"] == "map"
    assert all(0 <= row["metric"] <= 1 for row in record["eval_curve"])


PAPER_SCALE = PaperScale(
    write_coco_fixture,
    batch_size=2,
    max_fresh=4,
    eval_every_fresh=2,
    steps=2,
    missing="instances_train2017.json",
    hparams={"model": "small", "size": 64},  # the paper's SSD300-VGG16 is too slow on a CPU
    check=check_paper_record,
)


def test_scenes_hold_items_inside_their_boxes():
    items = np.zeros((3, 1, 28, 28), dtype=np.uint8)
    items[:, :, 4:24, 8:20] = 200
    scenes = compose_scenes(items, np.array([0, 5, 9]), 30, 96, seed=0)
    for image, boxes, classes in scenes:
        assert image.shape == (3, 96, 96) and 1 <= len(boxes) == len(classes) <= 3
        assert set(classes.tolist()) <= {1, 6, 10}
        mask = np.zeros((96, 96), dtype=bool)
        for x1, y1, x2, y2 in boxes.astype(int):
            assert image[0, y1:y2, x1:x2].max() > 16
            mask[y1:y2, x1:x2] = True
        assert image[0][~mask].max() <= 16  # only faint item edges (<= 16) lie outside boxes


def test_coco_map_is_one_for_perfect_detections_and_drops_for_misses():
    truths = [{"boxes": torch.tensor([[10.0, 10, 40, 50]]), "labels": torch.tensor([3])}] * 4
    perfect = [{**t, "scores": torch.tensor([0.9])} for t in truths]
    assert coco_map(truths, perfect, 96)["map"] == pytest.approx(1.0)
    shifted = [{**p, "boxes": p["boxes"] + 25} for p in perfect]
    assert coco_map(truths, shifted, 96)["map"] == pytest.approx(0.0)


def test_augmentation_moves_boxes_with_the_pixels():
    workload = CocoSsd("cpu")
    image = np.zeros((3, 96, 96), dtype=np.uint8)
    image[:, 20:60, 30:50] = 255
    scene = (image, np.array([[30.0, 20, 50, 60]], dtype=np.float32), np.array([4]))
    for seed in range(10):
        pixels, target = workload.augment(scene, np.random.default_rng(seed))
        assert pixels.shape == (3, 96, 96)
        for x1, y1, x2, y2 in target["boxes"].round().int().tolist():
            inside = pixels[0, y1 + 1 : y2 - 1, x1 + 1 : x2 - 1]
            assert inside.float().mean() > 200  # the box still covers the object


def test_coco_reader_skips_crowds_and_images_without_boxes(tmp_path):
    write_coco_fixture(tmp_path)
    data = CocoDetections(tmp_path, "train")
    pixels, boxes, classes = data[0]
    assert len(data) == 4 and pixels.shape == (3, 60, 80)
    assert boxes.tolist() == [[10.0, 5.0, 40.0, 45.0]] and classes.tolist() == [18]
    with pytest.raises(MissingDataError, match=r"instances_train2017\.json"):
        CocoDetections(tmp_path / "missing", "train")


@needs_fashion_mnist
@pytest.mark.slow
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    record = run_workload(
        tmp_path,
        "coco_ssd",
        "--max-fresh",
        "64",
        "--eval-every-fresh",
        "64",
        "--batch-size",
        "16",
        "--echo-point",
        "after_augment",
        "--echo-factor",
        "2",
    )
    validate(record)
    assert record["final"]["steps"] == 8 and len(record["eval_curve"]) == 2
    assert set(record["eval_curve"][-1]["metrics"]) == {"map", "map_50"}
