"""JPEG images in an ImageFolder tree (``root/<class>/<image>.jpg``), decoded with PIL, and a
cpu-scale tree made from Fashion-MNIST.

The reader decodes at read time, so in the echo pipeline decoding is part of the source:
echoing before augmentation repeats the augmentation but not the decode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from torch.utils.data import Dataset
from torchvision.datasets import ImageFolder

from experiments.data import MissingDataError
from experiments.data.cache import build_once
from experiments.data.fashion_mnist import load_fashion_mnist

__all__ = ["FASHION_CLASSES", "JpegFolder", "fashion_jpeg_tree"]

FASHION_CLASSES = (
    "tshirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
)


class JpegFolder(Dataset):
    """``(PIL RGB image, class index)`` pairs of an ImageFolder tree, decoded on access.

    Args:
        root: The tree's root (one folder per class, sorted names give the class indices).

    Raises:
        MissingDataError: ``root`` holds no class folders with images.
    """

    def __init__(self, root: str | Path):
        root = Path(root)
        try:
            samples = ImageFolder(str(root), allow_empty=False).samples
        except (FileNotFoundError, RuntimeError) as error:
            raise MissingDataError(
                f"no ImageFolder tree at {root} (expected {root}/<class>/<image>.jpg): {error}"
            ) from None
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Image.Image, int]:
        path, label = self.samples[index]
        with Image.open(path) as image:
            return image.convert("RGB"), label


def _write_split(images: np.ndarray, labels: np.ndarray, folder: Path, size: int) -> None:
    for name in FASHION_CLASSES:
        (folder / name).mkdir(parents=True)
    for index, (pixels, label) in enumerate(zip(images, labels, strict=True)):
        image = Image.fromarray(pixels[0]).resize((size, size), Image.Resampling.BILINEAR)
        image.save(folder / FASHION_CLASSES[label] / f"{index:05d}.jpg", quality=90)


def fashion_jpeg_tree(cache: Path, size: int, train: int, val: int) -> Path:
    """An ImageFolder tree of Fashion-MNIST images upscaled to ``size`` and stored as JPEG
    (``train/`` from the first ``train`` training images, ``val/`` from the first ``val`` test
    images), made once in ``cache`` and reused (`build_once`: processes that make it at the
    same time get the one tree published first, and a complete tree is never removed).

    Args:
        cache: The cache folder.
        size: Side of the stored images in pixels.
        train: Training images stored (the first ones of Fashion-MNIST's training split).
        val: Validation images stored (the first ones of its test split).

    Returns:
        The tree's root, ``cache/fashion_mnist_jpeg_<size>px_<train>_<val>``, holding
        ``train/``, ``val/`` and the marker file ``complete``.

    Raises:
        MissingDataError: Fashion-MNIST is not installed (the message gives the command), or
            the root exists without its ``complete`` marker (the message says to delete it).
    """

    def build(root: Path) -> None:
        for split, count, folder in (("train", train, "train"), ("test", val, "val")):
            images, labels = load_fashion_mnist(split)
            _write_split(images[:count], labels[:count], root / folder, size)
        (root / "complete").touch()

    root = cache / f"fashion_mnist_jpeg_{size}px_{train}_{val}"
    return build_once(root, build, lambda path: (path / "complete").is_file())
