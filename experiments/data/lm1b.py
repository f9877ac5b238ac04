"""The One Billion Word benchmark (LM1B; Chelba et al. 2013) through HF ``datasets``.

From local files, the release layout: one tokenized sentence per line, training shards under
``training-monolingual.tokenized.shuffled`` and held-out shards under
``heldout-monolingual.tokenized.shuffled``, read by the ``"text"`` builder with
``data_files=``. From the Hub by name (``--data-dir hub``; needs network, not run by this
project's checks): ``datasets.load_dataset("lm1b")``.
"""

from __future__ import annotations

from pathlib import Path

from experiments.data import MissingDataError
from experiments.data.hf import HUB, load_texts

__all__ = ["FOLDERS", "HUB_NAME", "load_lm1b"]

FOLDERS = {
    "train": "training-monolingual.tokenized.shuffled",
    "test": "heldout-monolingual.tokenized.shuffled",
}

HUB_NAME = "lm1b"
"""The dataset's name on the Hub (splits ``train`` and ``test``, column ``text``)."""


def _root(data_dir: Path) -> Path:
    nested = data_dir / "1-billion-word-language-modeling-benchmark-r13output"
    return nested if nested.is_dir() else data_dir


def load_lm1b(split: str, data_dir: str | Path, max_files: int | None = None) -> list[str]:
    """The sentences of one LM1B split, through ``datasets.load_dataset``.

    Args:
        split: ``"train"`` or ``"test"`` (the held-out shards).
        data_dir: The extracted release folder, or its parent; ``"hub"``: the Hub's ``lm1b``.
        max_files: Read only the first this many shards (sorted by name). Default None: all.
            With the Hub, the first ``max_files`` x 300,000 sentences (a shard's size).

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"test"``.
        MissingDataError: No shard found; the message names the folder expected.
    """
    if split not in FOLDERS:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(FOLDERS)}")
    if str(data_dir) == HUB:
        part = split if max_files is None else f"{split}[:{max_files * 300_000}]"
        return load_texts(HUB_NAME, split=part)
    folder = _root(Path(data_dir)) / FOLDERS[split]
    shards = sorted(folder.glob("news.en*"))[:max_files]
    if not shards:
        raise MissingDataError(
            f"no LM1B shards (news.en*) in {folder}; --data-dir must hold the extracted "
            f"1-billion-word-language-modeling-benchmark-r13output release (or be 'hub')"
        )
    texts = load_texts("text", data_files=[str(s) for s in shards])
    return [t.strip() for t in texts if t.strip()]
