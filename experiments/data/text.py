"""Text to training examples: a byte-level BPE tokenizer trained locally with HF ``tokenizers``,
and fixed-length windows of token ids."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["EOS", "bpe_tokenizer", "token_windows"]

EOS = "<eos>"


def bpe_tokenizer(texts: Sequence[str], vocab_size: int, path: Path | None = None):
    """A byte-level BPE tokenizer trained on ``texts`` (loaded from ``path`` when it exists,
    saved there after training).

    Args:
        texts: Training text.
        vocab_size: Vocabulary size, including the ``<eos>`` token.
        path: JSON file caching the trained tokenizer. Default None: no cache.

    Returns:
        A `tokenizers.Tokenizer`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if path is not None and path.is_file():
        return Tokenizer.from_file(str(path))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tokenizer.save(str(tmp))
        tmp.replace(path)
    return tokenizer


def token_windows(texts: Sequence[str], tokenizer, length: int) -> np.ndarray:
    """Non-overlapping windows of ``length + 1`` token ids (inputs and next-token targets) over
    the texts, each followed by ``<eos>``, concatenated; the incomplete tail is dropped.

    Returns:
        ``int32`` array of shape ``(N, length + 1)``.
    """
    eos = tokenizer.token_to_id(EOS)
    stream: list[int] = []
    for encoding in tokenizer.encode_batch(list(texts)):
        stream.extend(encoding.ids)
        stream.append(eos)
    count = len(stream) // (length + 1)
    return np.asarray(stream[: count * (length + 1)], dtype=np.int32).reshape(count, length + 1)
