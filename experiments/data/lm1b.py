"""The One Billion Word benchmark (LM1B; Chelba et al. 2013) in its release layout: one
tokenized sentence per line, training shards under ``training-monolingual.tokenized.shuffled``
and held-out shards under ``heldout-monolingual.tokenized.shuffled``."""

from __future__ import annotations

from pathlib import Path

from experiments.data import MissingDataError

__all__ = ["FOLDERS", "load_lm1b"]

FOLDERS = {
    "train": "training-monolingual.tokenized.shuffled",
    "test": "heldout-monolingual.tokenized.shuffled",
}


def _root(data_dir: Path) -> Path:
    nested = data_dir / "1-billion-word-language-modeling-benchmark-r13output"
    return nested if nested.is_dir() else data_dir


def load_lm1b(split: str, data_dir: str | Path, max_files: int | None = None) -> list[str]:
    """The sentences of one LM1B split.

    Args:
        split: ``"train"`` or ``"test"`` (the held-out shards).
        data_dir: The extracted release folder, or its parent.
        max_files: Read only the first this many shards (sorted by name). Default None: all.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"test"``.
        MissingDataError: No shard found; the message names the folder expected.
    """
    if split not in FOLDERS:
        raise ValueError(f"split={split!r} is not valid; use one of {', '.join(FOLDERS)}")
    folder = _root(Path(data_dir)) / FOLDERS[split]
    shards = sorted(folder.glob("news.en*"))[:max_files]
    if not shards:
        raise MissingDataError(
            f"no LM1B shards (news.en*) in {folder}; --data-dir must hold the extracted "
            f"1-billion-word-language-modeling-benchmark-r13output release"
        )
    sentences = []
    for shard in shards:
        with shard.open(encoding="utf-8") as f:
            sentences.extend(line.strip() for line in f if line.strip())
    return sentences
