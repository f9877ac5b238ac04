"""C4 (the cleaned Common Crawl of Raffel et al. 2020) through HF ``datasets``, streamed.

From local files, the released layout: gzipped JSON lines with ``text``, ``url`` and
``timestamp``, ``c4-train.*.json.gz`` and ``c4-validation.*.json.gz``, read by the ``"json"``
builder with ``data_files=`` and ``streaming=True`` (shards are read as they are iterated,
never converted to Arrow first). From the Hub by name (``--data-dir hub``; needs network, not
run by this project's checks): ``datasets.load_dataset("allenai/c4", "en", streaming=True)``.
"""

from __future__ import annotations

from pathlib import Path

from experiments.data import MissingDataError
from experiments.data.hf import HUB, load_texts

__all__ = ["HUB_NAME", "PATTERNS", "load_c4"]

PATTERNS = {"train": "c4-train.*.json.gz", "validation": "c4-validation.*.json.gz"}

HUB_NAME = ("allenai/c4", "en")
"""The dataset's name and configuration on the Hub."""

_DOCUMENTS_PER_SHARD = {"train": 356_317, "validation": 45_576}


def load_c4(split: str, data_dir: str | Path, max_files: int | None = None) -> list[str]:
    """The documents of one C4 split (shards searched for recursively under ``data_dir``).

    Args:
        split: ``"train"`` or ``"validation"``.
        data_dir: A folder holding the shards (e.g. ``c4/en``), or a parent of it; ``"hub"``:
            the Hub's ``allenai/c4``.
        max_files: Read only the first this many shards (sorted by name). Default None: all.
            With the Hub, as many documents as that many released shards hold.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"validation"``.
        MissingDataError: No shard found; the message names the pattern expected.
    """
    if split not in PATTERNS:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(PATTERNS)}")
    if str(data_dir) == HUB:
        limit = None if max_files is None else max_files * _DOCUMENTS_PER_SHARD[split]
        return load_texts(*HUB_NAME, split=split, streaming=True, limit=limit)
    shards = sorted(Path(data_dir).rglob(PATTERNS[split]))[:max_files]
    if not shards:
        raise MissingDataError(f"no C4 shards ({PATTERNS[split]}) under {data_dir}")
    return load_texts("json", data_files=[str(s) for s in shards], streaming=True)
