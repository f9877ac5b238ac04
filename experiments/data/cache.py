"""Where acquired third-party data (and what is derived from it) is cached."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir"]

CACHE_ENV = "ECHO_SHARE_CACHE"


def cache_dir(data_dir: str | Path | None = None) -> Path:
    """The cache folder: ``data_dir`` when given, else ``$ECHO_SHARE_CACHE``, else
    ``~/.cache/echo-share-suite``. Created when missing."""
    if data_dir is not None:
        path = Path(data_dir)
    else:
        path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "echo-share-suite")
    path.mkdir(parents=True, exist_ok=True)
    return path
