"""CIFAR-10 (Krizhevsky 2009) in its "python version" layout, read from a user's folder.

The folder holds ``data_batch_1`` ... ``data_batch_5`` and ``test_batch`` (or a
``cifar-10-batches-py`` subfolder with them), as extracted from ``cifar-10-python.tar.gz``.
Each file is a pickled dict with ``b"data"`` (``N x 3072`` uint8, channel-major) and
``b"labels"``. Only open files you obtained from a source you trust: unpickling runs code.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from experiments.data import MissingDataError

__all__ = ["SUBFOLDER", "load_cifar10"]

SUBFOLDER = "cifar-10-batches-py"
_FILES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}


def _folder(data_dir: Path) -> Path:
    if (data_dir / SUBFOLDER / "test_batch").is_file():
        return data_dir / SUBFOLDER
    return data_dir


def load_cifar10(split: str, data_dir: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one CIFAR-10 split.

    Args:
        split: ``"train"`` (the five data batches) or ``"test"``.
        data_dir: The folder with the batch files, or its parent.

    Returns:
        ``(images, labels)``: ``uint8`` of shape ``(N, 3, 32, 32)`` and ``int64`` of ``(N,)``.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"test"``.
        MissingDataError: A batch file is missing; the message names it and the layout.
    """
    if split not in _FILES:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(_FILES)}")
    folder = _folder(Path(data_dir))
    images, labels = [], []
    for name in _FILES[split]:
        path = folder / name
        if not path.is_file():
            raise MissingDataError(
                f"CIFAR-10 file {path} not found; --data-dir must hold the extracted "
                f"cifar-10-python.tar.gz ({SUBFOLDER}/data_batch_1..5, test_batch)"
            )
        with path.open("rb") as f:
            batch = pickle.load(f, encoding="bytes")
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)
