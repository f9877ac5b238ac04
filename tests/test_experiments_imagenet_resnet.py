"""The ImageNet-like workload: JPEG ImageFolder reading, random-resized-crop, cpu scale end to
end, paper scale (ResNet-50) on a tiny ImageFolder fixture of generated JPEGs (`PAPER_SCALE`,
checked by ``test_experiments_workloads``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from data_marks import needs_fashion_mnist
from PIL import Image
from workload_checks import PaperScale, run_workload

from experiments.data import MissingDataError
from experiments.data.image_folder import JpegFolder
from experiments.workloads.imagenet_resnet import ImagenetResNet, random_resized_box
from run_contract.record import validate


def write_image_folder(root: Path, per_class: int = 4) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for name in ("n01440764", "n01443537"):
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, (40 + 8 * i, 56, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / name / f"{name}_{i}.JPEG")


PAPER_SCALE = PaperScale(
    write_image_folder,
    batch_size=4,
    max_fresh=8,
    eval_every_fresh=4,
    steps=2,
    missing="ImageFolder tree",
    hparams={"image_size": 32},
)


def test_random_resized_boxes_stay_inside_with_the_allowed_area_and_ratio():
    rng = np.random.default_rng(1)
    for _ in range(500):
        left, top, right, bottom = random_resized_box(64, 48, rng, 0.35)
        assert 0 <= left < right <= 64 and 0 <= top < bottom <= 48
        w, h = right - left, bottom - top
        assert w * h >= 0.3 * 64 * 48 and 0.7 <= w / h <= 1.45


def test_jpeg_folder_decodes_rgb_images_with_sorted_class_indices(tmp_path):
    write_image_folder(tmp_path)
    folder = JpegFolder(tmp_path / "train")
    image, label = folder[len(folder) - 1]
    assert len(folder) == 8 and label == 1
    assert image.mode == "RGB" and image.size == (56, 64)
    with pytest.raises(MissingDataError, match="ImageFolder tree"):
        JpegFolder(tmp_path / "missing")


def test_augment_crops_to_the_configured_size():
    workload = ImagenetResNet("cpu")
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), np.uint8))
    crops = [workload.augment((image, 7), np.random.default_rng(s)) for s in range(20)]
    assert all(c.shape == (3, 32, 32) and c.dtype == np.uint8 and y == 7 for c, y in crops)
    assert len({c.tobytes() for c, _ in crops}) == 20


@needs_fashion_mnist
@pytest.mark.slow
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    record = run_workload(
        tmp_path,
        "imagenet_resnet",
        "--max-fresh",
        "128",
        "--eval-every-fresh",
        "64",
        "--batch-size",
        "32",
        "--echo-point",
        "before_augment",
        "--echo-factor",
        "2",
        "--num-workers",
        "1",
    )
    validate(record)
    assert [r["fresh_examples"] for r in record["eval_curve"]] == [0, 64, 128]
    assert record["final"]["steps"] == 8
    assert record["timing"]["upstream_s_per_batch"] > 0
