"""What the GPU benchmarks share: a generated ImageFolder of JPEG files, ImageNet-style training
crops of it made on the CPU, and one training step of a torchvision classifier on a device.

The crops are the ``imagenet_resnet`` workload's own augmentation (PIL decode, then
random-resized-crop and a horizontal flip); batches stay ``uint8`` on the CPU and are
normalised on the device, so what the CPU spends is decoding and cropping.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from experiments.data.image_folder import JpegFolder
from experiments.workloads.imagenet_resnet import ImagenetResNet

__all__ = ["JpegCrops", "TrainStep", "jpeg_loader", "write_jpeg_folder"]

_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255


def _write_one(job: tuple[Path, int, int, int, int]) -> None:
    path, width, height, label, seed = job
    rng = np.random.default_rng(seed)
    # Smooth colour fields plus noise: compresses like a photograph (not like pure noise,
    # which is far slower to decode than real images).
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    scale = rng.uniform(20, 80, 3)
    channels = [
        127 + 80 * np.sin(x / scale[c] + phase[c]) * np.cos(y / scale[(c + 1) % 3] + label)
        for c in range(3)
    ]
    pixels = np.stack(channels, axis=-1) + rng.normal(0, 12, (height, width, 3))
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)


def write_jpeg_folder(
    root: str | Path,
    count: int,
    *,
    classes: int = 10,
    sizes: tuple[int, int] = (320, 500),
    seed: int = 0,
    processes: int | None = None,
) -> Path:
    """Write ``count`` generated JPEG files as an ImageFolder tree ``root/<class>/<n>.jpg``.

    Args:
        root: The tree's root (created).
        count: Images in all.
        classes: Class folders, images spread evenly. Default 10.
        sizes: Range of the longer side in pixels (the other is 3/4 of it, as most ImageNet
            photographs). Default (320, 500).
        seed: Seeds sizes and content. Default 0.
        processes: Worker processes writing them. Default None: one per CPU.

    Returns:
        ``root``.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    jobs = []
    for index in range(count):
        label = index % classes
        folder = root / f"class_{label:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        long_side = int(rng.integers(sizes[0], sizes[1] + 1))
        width, height = (long_side, long_side * 3 // 4)
        if rng.random() < 0.3:
            width, height = height, width
        jobs.append((folder / f"{index:06d}.jpg", width, height, label, seed * 1_000_003 + index))
    with mp.get_context("fork").Pool(processes) as pool:
        pool.map(_write_one, jobs, chunksize=16)
    return root


class JpegCrops(Dataset):
    """``(uint8 (3, size, size) tensor, class index)``: a JPEG of an ImageFolder tree decoded,
    random-resized-cropped and flipped as the ``imagenet_resnet`` workload does it.

    Randomness comes from torch's generator, which a DataLoader seeds in each worker.

    Args:
        root: The ImageFolder tree.
        image_size: Side of the crops. Default 224.
    """

    def __init__(self, root: str | Path, image_size: int = 224) -> None:
        self.folder = JpegFolder(root)
        hparams = {**ImagenetResNet.default_hparams["paper"], "image_size": image_size}
        self.workload = ImagenetResNet("paper", hparams=hparams)

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(int(torch.randint(2**62, ())))
        crop, label = self.workload.augment(self.folder[index], rng)
        return torch.from_numpy(crop), label


def jpeg_loader(
    dataset: Dataset, batch_size: int, workers: int, *, pin_memory: bool = False
) -> DataLoader:
    """A shuffling DataLoader of full batches with ``workers`` persistent worker processes."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        persistent_workers=workers > 0,
        prefetch_factor=2 if workers else None,
        pin_memory=pin_memory,
    )


class TrainStep:
    """One SGD step of a torchvision classifier on ``(uint8 images, labels)`` batches.

    Images are moved to ``device`` (if not there already), normalised there and laid out
    channels-last; on CUDA the forward pass runs under bf16 autocast. Steps are queued
    asynchronously: call `finish` before reading a clock.

    Args:
        arch: A torchvision classification model name, e.g. ``"resnet18"``, ``"resnet50"``.
        device: Where to train.
        classes: Output classes. Default 1000.
    """

    def __init__(self, arch: str, device: str | torch.device, classes: int = 1000) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        if cuda:
            torch.backends.cudnn.benchmark = True
        model = torchvision.models.get_model(arch, weights=None, num_classes=classes)
        self.model = model.to(self.device, memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda)
        self.mean, self.std = _MEAN.to(self.device), _STD.to(self.device)

    def __call__(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        pinned = images.device.type == "cpu" and images.is_pinned()
        images = images.to(self.device, non_blocking=pinned)
        labels = labels.to(self.device, non_blocking=pinned)
        images = ((images.float() - self.mean) / self.std).contiguous(
            memory_format=torch.channels_last
        )
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            loss = F.cross_entropy(self.model(images), labels)
        loss.backward()
        self.optimizer.step()

    def finish(self) -> None:
        """Wait until every queued step has run on the device."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def seconds_per_step(self, batch: tuple[torch.Tensor, torch.Tensor], steps: int) -> float:
        """Mean seconds of one step on ``batch`` already in memory (no input pipeline), after
        three warm-up steps."""
        for _ in range(3):
            self(batch)
        self.finish()
        start = time.perf_counter()
        for _ in range(steps):
            self(batch)
        self.finish()
        return (time.perf_counter() - start) / steps
