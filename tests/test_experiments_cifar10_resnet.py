"""The CIFAR-10-like workload: data readers, augmentation, cpu scale to target, paper scale on a
tiny CIFAR-10 fixture in the real file format (`PAPER_SCALE`, checked by
``test_experiments_workloads``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from data_marks import needs_fashion_mnist
from workload_checks import PaperScale, run_workload

from experiments.data import MissingDataError
from experiments.data.cifar10 import load_cifar10
from experiments.data.fashion_mnist import INSTALL, load_fashion_mnist
from experiments.workloads.cifar10_resnet import Cifar10ResNet
from run_contract.record import validate


def write_cifar_fixture(root: Path, per_batch: int = 4) -> np.ndarray:
    """The CIFAR-10 python layout with ``per_batch`` images per file; returns batch 1's pixels."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    first = None
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = [int(x) for x in rng.integers(0, 10, per_batch)]
        with (folder / name).open("wb") as f:
            pickle.dump({b"data": data, b"labels": labels, b"batch_label": b"x"}, f)
        first = data if first is None else first
    return first


def check_paper_record(record: dict, folder: Path) -> None:
    """Accuracy is the target, and CIFAR-10's images are padded by 4 as in the paper."""
    assert record["target"]["metric"] == "accuracy"
    assert record["hparams"]["pad"] == 4


PAPER_SCALE = PaperScale(
    write_cifar_fixture,
    batch_size=4,
    max_fresh=20,
    eval_every_fresh=8,
    steps=10,
    missing="data_batch_1",
    hparams={"blocks_per_stage": 1, "width": 4},
    echo=("before_augment", 2),
    check=check_paper_record,
)


def test_cifar10_reader_keeps_the_channel_major_layout(tmp_path):
    pixels = write_cifar_fixture(tmp_path)
    images, labels = load_cifar10("train", tmp_path)
    assert images.shape == (20, 3, 32, 32) and images.dtype == np.uint8 and labels.shape == (20,)
    assert np.array_equal(images[0, 0].ravel(), pixels[0, :1024])  # red plane first
    assert np.array_equal(images[0, 2].ravel(), pixels[0, 2048:])
    assert load_cifar10("test", tmp_path / "cifar-10-batches-py")[0].shape == (4, 3, 32, 32)


def test_missing_sources_name_what_provides_them(tmp_path):
    with pytest.raises(MissingDataError, match=INSTALL):
        load_fashion_mnist("train", tmp_path)
    with pytest.raises(MissingDataError, match=r"data_batch_1.*cifar-10-python\.tar\.gz"):
        load_cifar10("train", tmp_path)


def test_augmentation_pads_crops_and_flips():
    workload = Cifar10ResNet("cpu")
    # Odd pixel values (never 0), all different along a row: padding and flips are visible.
    image = (np.arange(28 * 28).reshape(1, 28, 28) % 128 * 2 + 1).astype(np.uint8)
    rng = np.random.default_rng(0)
    outputs = [workload.augment((image, 3), rng) for _ in range(200)]
    assert all(out.shape == image.shape and label == 3 for out, label in outputs)
    shifted = [out for out, _ in outputs if not (out == 0).any()]
    assert 0 < len(shifted) < 200  # some crops keep the whole image, most reach the zero pad
    flipped = sum(np.array_equal(out, image[:, :, ::-1]) for out, _ in outputs)
    unchanged = sum(np.array_equal(out, image) for out, _ in outputs)
    assert flipped > 0 and unchanged > 0
    again = [workload.augment((image, 3), np.random.default_rng(0))[0] for _ in range(2)]
    assert np.array_equal(again[0], outputs[0][0]) and np.array_equal(again[1], outputs[0][0])


@needs_fashion_mnist
@pytest.mark.slow
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    record = run_workload(
        tmp_path,
        "cifar10_resnet",
        "--max-fresh",
        "256",
        "--eval-every-fresh",
        "128",
        "--batch-size",
        "32",
        "--echo-point",
        "after_batch",
        "--echo-factor",
        "2",
    )
    validate(record)
    assert record["reached"] is False
    assert [r["fresh_examples"] for r in record["eval_curve"]] == [0, 128, 256]
    assert record["final"]["steps"] == 2 * 256 // 32 - 1
    assert 0 <= record["eval_curve"][-1]["metric"] <= 1


@needs_fashion_mnist
@pytest.mark.slow
def test_cpu_scale_baseline_reaches_its_target(tmp_path):
    """The declared cpu target at e=1 (calibrated: 250-400 steps over 5 seeds, ~30 s)."""
    record = run_workload(tmp_path, "cifar10_resnet", "--seed", "0", "--device", "cpu")
    assert record["reached"] is True
    assert record["eval_curve"][-1]["metric"] >= 0.78
    assert 100 <= record["steps_to_target"] <= 600
