"""Fashion-MNIST (Xiao et al. 2017; MIT licence) from Debian's ``dataset-fashion-mnist``."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from experiments.data import MissingDataError

__all__ = ["DEBIAN_DIR", "INSTALL", "load_fashion_mnist"]

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL = "apt-get install -y dataset-fashion-mnist"
_FILES = {"train": "train", "test": "t10k"}


def _read_idx(path: Path, header: int) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header)


def load_fashion_mnist(split: str, root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one Fashion-MNIST split.

    Args:
        split: ``"train"`` (60,000 images) or ``"test"`` (10,000).
        root: Folder holding the four ``*-ubyte.gz`` files. Default: `DEBIAN_DIR`.

    Returns:
        ``(images, labels)``: ``uint8`` of shape ``(N, 1, 28, 28)`` and ``int64`` of ``(N,)``.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"test"``.
        MissingDataError: The files are not in ``root``; the message gives the install command.
    """
    if split not in _FILES:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(_FILES)}")
    root = Path(root) if root is not None else DEBIAN_DIR
    images = root / f"{_FILES[split]}-images-idx3-ubyte.gz"
    labels = root / f"{_FILES[split]}-labels-idx1-ubyte.gz"
    for path in (images, labels):
        if not path.is_file():
            raise MissingDataError(f"Fashion-MNIST file {path} not found; install it: {INSTALL}")
    pixels = _read_idx(images, 16)
    return pixels.reshape(-1, 1, 28, 28), _read_idx(labels, 8).astype(np.int64)
