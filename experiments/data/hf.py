"""Text corpora through HF ``datasets`` (imported on first use, so that a DataLoader worker
that never loads a corpus does not pay for it)."""

from __future__ import annotations

from itertools import islice
from typing import Any

from experiments.data.cache import cache_dir

__all__ = ["HUB", "hf_cache", "load_texts"]

HUB = "hub"
"""A ``--data-dir`` of this value loads a paper-scale corpus from the Hub by name."""


def hf_cache() -> str:
    """Where ``datasets`` keeps its Arrow files: ``hf-datasets/`` in the project's cache folder
    (``$ECHO_SHARE_CACHE`` or ``~/.cache/echo-share-suite``; a dataset folder given with
    ``--data-dir`` may be read-only, and ``~/.cache/huggingface`` is not the project's)."""
    return str(cache_dir(None) / "hf-datasets")


def load_texts(
    path: str,
    name: str | None = None,
    *,
    split: str = "train",
    streaming: bool = False,
    limit: int | None = None,
    **kwargs: Any,
) -> list[str]:
    """The ``text`` column of ``datasets.load_dataset(path, name, split=..., ...)``.

    Args:
        path: A packaged builder (``"text"``, ``"json"``) with ``data_files=``, or a Hub name.
        name: The dataset's configuration. Default None.
        split: The split (slicing such as ``"train[:100]"`` allowed unless streaming).
            Default ``"train"``.
        streaming: Iterate the files without converting them to Arrow first. Default False.
        limit: Take at most this many rows. Default None: all.
        **kwargs: Further ``load_dataset`` arguments (``data_files``, ``cache_dir`` ...).

    Returns:
        The texts, in file order.
    """
    import datasets

    datasets.disable_progress_bars()  # the harness has its own; one line per split is noise
    if not streaming:
        kwargs.setdefault("cache_dir", hf_cache())
    dataset = datasets.load_dataset(path, name, split=split, streaming=streaming, **kwargs)
    rows = dataset.select_columns(["text"]) if not streaming else dataset
    return [row["text"] for row in islice(rows, limit)]
