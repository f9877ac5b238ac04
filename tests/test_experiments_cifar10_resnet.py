"""The CIFAR-10-like workload: data readers, augmentation, cpu scale to target, paper scale on a
tiny CIFAR-10 fixture in the real file format."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from data_marks import needs_fashion_mnist

from experiments.data import MissingDataError
from experiments.data.cifar10 import load_cifar10
from experiments.data.fashion_mnist import INSTALL, load_fashion_mnist
from experiments.record import validate
from experiments.run import main
from experiments.workloads.cifar10_resnet import Cifar10ResNet


def run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "record.json"
    assert main(["--workload", "cifar10_resnet", "--threads", "1", *args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


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


def test_paper_scale_without_data_exits_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "--workload",
                "cifar10_resnet",
                "--scale",
                "paper",
                "--data-dir",
                str(tmp_path),
                "--out",
                str(tmp_path / "r.json"),
            ]
        )
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data_batch_1" in err


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


def test_paper_scale_trains_on_a_cifar10_fixture(tmp_path):
    write_cifar_fixture(tmp_path)
    record = run(
        tmp_path,
        "--scale",
        "paper",
        "--data-dir",
        str(tmp_path),
        "--device",
        "cpu",
        "--hparam",
        "blocks_per_stage=1",
        "--hparam",
        "width=4",
        "--batch-size",
        "4",
        "--max-fresh",
        "20",
        "--eval-every-fresh",
        "8",
        "--echo-point",
        "before_augment",
        "--echo-factor",
        "2",
    )
    validate(record)
    assert record["scale"] == "paper" and record["target"]["metric"] == "accuracy"
    assert record["final"] == {**record["final"], "fresh_examples": 20, "steps": 10}
    assert record["hparams"]["pad"] == 4


@needs_fashion_mnist
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    record = run(
        tmp_path,
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
def test_cpu_scale_baseline_reaches_its_target(tmp_path):
    """The declared cpu target at e=1 (calibrated: 250-400 steps over 5 seeds, ~30 s)."""
    record = run(tmp_path, "--seed", "0", "--device", "cpu")
    assert record["reached"] is True
    assert record["eval_curve"][-1]["metric"] >= 0.78
    assert 100 <= record["steps_to_target"] <= 600
