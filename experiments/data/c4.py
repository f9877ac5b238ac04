"""C4 (the cleaned Common Crawl of Raffel et al. 2020) in its released file layout: gzipped
JSON lines with a ``"text"`` field, ``c4-train.*.json.gz`` and ``c4-validation.*.json.gz``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from experiments.data import MissingDataError

__all__ = ["PATTERNS", "load_c4"]

PATTERNS = {"train": "c4-train.*.json.gz", "validation": "c4-validation.*.json.gz"}


def load_c4(split: str, data_dir: str | Path, max_files: int | None = None) -> list[str]:
    """The documents of one C4 split (searched for recursively under ``data_dir``).

    Args:
        split: ``"train"`` or ``"validation"``.
        data_dir: A folder holding the shards (e.g. ``c4/en``), or a parent of it.
        max_files: Read only the first this many shards (sorted by name). Default None: all.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"validation"``.
        MissingDataError: No shard found; the message names the pattern expected.
    """
    if split not in PATTERNS:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(PATTERNS)}")
    shards = sorted(Path(data_dir).rglob(PATTERNS[split]))[:max_files]
    if not shards:
        raise MissingDataError(f"no C4 shards ({PATTERNS[split]}) under {data_dir}")
    texts = []
    for shard in shards:
        with gzip.open(shard, "rt", encoding="utf-8") as f:
            texts.extend(json.loads(line)["text"] for line in f if line.strip())
    return texts
