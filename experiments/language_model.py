"""What the Transformer language-model workloads share: BPE windows as examples (HF
``tokenizers``, wrapped as a ``transformers`` tokenizer), a ``transformers`` causal LM
(`experiments.models.transformer_lm.CausalLM`), AdamW (or the ``optimizer`` hyper-parameter's
choice, `experiments.optimizers`), next-token cross-entropy. A subclass only says where its
text comes from (`LanguageModelWorkload.texts`) and declares its targets, hyper-parameters and
budgets.

Hyper-parameters used here: ``context``, ``d_model``, ``layers``, ``heads``, ``vocab_size``,
``eval_windows``, ``lr``, ``momentum`` (AdamW's beta1), ``weight_decay``, and where given
``optimizer`` and ``schedule`` with its parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from experiments.data.cache import cache_dir
from experiments.data.hf import HUB
from experiments.data.text import bpe_tokenizer, token_windows
from experiments.models.transformer_lm import CausalLM
from experiments.optimizers import build_optimizer
from experiments.workload import Workload

__all__ = ["LanguageModelWorkload"]


class LanguageModelWorkload(Workload):
    """Base of the language-model workloads (not registered itself).

    Examples are windows of ``context + 1`` token ids over the concatenated texts (each text
    followed by ``<eos>``), tokenized with a byte-level BPE trained on the training text and
    cached in the cache folder; no augmentation. ``evaluate`` reports the mean next-token
    cross-entropy (nats per token) on the first ``eval_windows`` held-out windows.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._windows: dict[str, np.ndarray] = {}

    def texts(self) -> tuple[list[str], list[str], list[str], str]:
        """``(training texts, held-out texts, BPE training texts, cache name)``."""
        raise NotImplementedError

    def _prepare(self) -> None:
        train, held_out, bpe_text, name = self.texts()
        vocab, context = self.hp["vocab_size"], self.hp["context"]
        cache = cache_dir(None if str(self.data_dir) == HUB else self.data_dir)
        tokenizer = bpe_tokenizer(bpe_text, vocab, cache / f"{name}_bpe_{vocab}")
        self._windows["train"] = token_windows(train, tokenizer, context)
        held_out_windows = token_windows(held_out, tokenizer, context)
        self._windows["eval"] = held_out_windows[: self.hp["eval_windows"]]

    def read(self, split: str) -> np.ndarray:
        """Windows of ``context + 1`` token ids, one row per example (``int32``)."""
        if split not in ("train", "eval"):
            raise ValueError(f"split={split!r} is not valid; use 'train' or 'eval'")
        if not self._windows:
            self._prepare()
        return self._windows[split]

    def collate(self, examples: list[np.ndarray]) -> torch.Tensor:
        """Stack windows into one ``int64`` tensor of shape ``(batch, context + 1)``."""
        return torch.from_numpy(np.stack(examples)).long()

    def build_model(self) -> torch.nn.Module:
        hp = self.hp
        return CausalLM(hp["vocab_size"], hp["context"], hp["d_model"], hp["layers"], hp["heads"])

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """AdamW unless the ``optimizer`` hyper-parameter names another."""
        return build_optimizer(model, self.hp, "adamw")

    def loss(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        logits = model(batch[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    def evaluate(self, model: torch.nn.Module, device: torch.device) -> dict[str, float]:
        """Mean next-token cross-entropy (nats per token) on the held-out windows."""
        windows = self.read("eval")
        total, tokens = 0.0, 0
        for start in range(0, len(windows), 64):
            batch = self.collate(list(windows[start : start + 64])).to(device)
            logits = model(batch[:, :-1])
            targets = batch[:, 1:].flatten()
            total += F.cross_entropy(logits.flatten(0, 1), targets, reduction="sum").item()
            tokens += targets.numel()
        return {"cross_entropy": total / tokens}
