"""Text to training examples: a byte-level BPE tokenizer trained locally with HF ``tokenizers``
and wrapped as a ``transformers.PreTrainedTokenizerFast`` (saved in the cache, reloadable with
``PreTrainedTokenizerFast.from_pretrained(folder)``), and fixed-length windows of token ids
(kept in the cache too, `cached_windows`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from experiments.data.cache import build_once

__all__ = ["EOS", "bpe_tokenizer", "cached_windows", "token_windows"]

EOS = "<eos>"


def _train_bpe(texts: Sequence[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

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
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS)


def bpe_tokenizer(texts: Sequence[str], vocab_size: int, folder: Path | None = None):
    """A byte-level BPE tokenizer trained on ``texts``, as a ``PreTrainedTokenizerFast``.

    Args:
        texts: Training text.
        vocab_size: Vocabulary size, including the ``<eos>`` token.
        folder: Where the tokenizer is saved (``save_pretrained``) after training, and loaded
            from (``from_pretrained``) when it is there; made with `build_once` (saved in a
            temporary folder and renamed: never half a tokenizer, and processes training it at
            once all load the one saved first). Default None: no cache.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` whose ``eos_token`` is ``<eos>``.

    Raises:
        MissingDataError: ``folder`` exists without a ``tokenizer.json`` (the message says to
            delete it).
    """
    from transformers import PreTrainedTokenizerFast

    if folder is None:
        return _train_bpe(texts, vocab_size)
    saved = build_once(
        folder,
        lambda path: _train_bpe(texts, vocab_size).save_pretrained(str(path)),
        lambda path: (path / "tokenizer.json").is_file(),
    )
    return PreTrainedTokenizerFast.from_pretrained(str(saved))


def token_windows(texts: Sequence[str], tokenizer, length: int) -> np.ndarray:
    """Non-overlapping windows of ``length + 1`` token ids (inputs and next-token targets) over
    the texts, each followed by ``<eos>``, concatenated; the incomplete tail is dropped.

    Returns:
        ``int32`` array of shape ``(N, length + 1)``.
    """
    eos = tokenizer.convert_tokens_to_ids(EOS)
    stream: list[int] = []
    for encoding in tokenizer.backend_tokenizer.encode_batch(list(texts)):
        stream.extend(encoding.ids)
        stream.append(eos)
    count = len(stream) // (length + 1)
    return np.asarray(stream[: count * (length + 1)], dtype=np.int32).reshape(count, length + 1)


def cached_windows(
    folder: Path | None, tokenizer, splits: Mapping[str, Sequence[str]], length: int
) -> dict[str, np.ndarray]:
    """`token_windows` of each split's texts, kept in ``folder`` so that a run does not
    tokenize its corpus again (seconds per language-model run at cpu scale).

    The entry's name digests everything the windows are made of: the tokenizer (its JSON),
    ``length`` and every split's texts. Another corpus, tokenizer or length is another entry,
    so a stale one is never read. It is made with `build_once` (never half a file; processes
    making it at once all read the one published first). It takes the windows' own size on
    disk (4 bytes a token: a few MB at cpu scale, GBs for a paper-scale corpus, which takes
    minutes to tokenize).

    Args:
        folder: The cache folder. None: no cache, the windows are made each call.
        tokenizer: A ``PreTrainedTokenizerFast`` with an ``<eos>`` token (`bpe_tokenizer`).
        splits: Split name -> its texts.
        length: As for `token_windows`.

    Returns:
        Split name -> its windows, exactly `token_windows`'.
    """

    def make() -> dict[str, np.ndarray]:
        return {name: token_windows(texts, tokenizer, length) for name, texts in splits.items()}

    if folder is None:
        return make()
    digest = hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode())
    digest.update(f"length={length}".encode())
    for name in sorted(splits):
        digest.update(f"split={name} texts={len(splits[name])}".encode())
        for text in splits[name]:
            data = text.encode()
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    dest = Path(folder) / f"windows-{digest.hexdigest()[:32]}.npz"
    saved = build_once(dest, lambda path: np.savez(path, **make()), Path.is_file)
    with np.load(saved) as stored:
        return {name: stored[name] for name in splits}
