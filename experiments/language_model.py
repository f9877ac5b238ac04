"""What the Transformer language-model workloads share: BPE windows as examples (HF
``tokenizers``, wrapped as a ``transformers`` tokenizer), a ``transformers`` causal LM
(`experiments.models.transformer_lm.CausalLM`), SGD with Nesterov momentum (or the
``optimizer`` hyper-parameter's choice, `experiments.optimizers`: ``adamw`` is the named
variant), next-token cross-entropy, the search spaces, and the hyper-parameters and budgets
but for what `lm_hparams` and `lm_budgets` take. A subclass names its corpora
(`LanguageModelWorkload.corpora`, `LanguageModelWorkload.cpu_documents`,
`LanguageModelWorkload.paper_documents`) and declares its targets.

Hyper-parameters used here: ``context``, ``d_model``, ``layers``, ``heads``, ``vocab_size``,
``eval_windows``, ``lr``, ``momentum`` (AdamW's beta1 where ``optimizer`` is ``adamw``),
``weight_decay``, ``optimizer``, and ``schedule`` with its parameters; at paper scale
``max_train_files`` and ``bpe_train_files``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch.nn import functional as F

from experiments.data.cache import cache_dir
from experiments.data.hf import HUB
from experiments.data.text import bpe_tokenizer, cached_windows
from experiments.models.transformer_lm import CausalLM
from experiments.optimizers import build_optimizer
from experiments.search import SCHEDULE
from experiments.workload import MOMENTUM, Budget, Dimension, SearchSpace, Workload

__all__ = ["HELD_OUT_EVERY", "LanguageModelWorkload", "lm_budgets", "lm_hparams"]

HELD_OUT_EVERY = 10
"""At cpu scale every 10th document of the corpus is held out for evaluation."""


def lm_hparams(max_train_files: int) -> dict[str, dict[str, Any]]:
    """The language models' ``default_hparams``, the same at each scale but for one number.

    Args:
        max_train_files: At paper scale, how many of the corpus's training files are read.

    Returns:
        ``{scale: {name: default}}`` for ``cpu`` and ``paper``.
    """
    return {
        "cpu": {
            # Nesterov momentum, as the paper trained its Transformers (weight decay 0, as at
            # paper scale); the rate is the best of a few constant-rate runs on LM1B's corpus.
            "batch_size": 32,
            "lr": 0.05,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "optimizer": "nesterov",
            "context": 64,
            "d_model": 64,
            "layers": 2,
            "heads": 4,
            "vocab_size": 1024,
            "eval_windows": 256,
        },
        "paper": {
            # Batch 1024, Nesterov momentum at a constant rate (a secondary summary of the
            # paper's v3). Not from the paper's text: the rate, and no weight decay (AdamW's
            # decoupled 0.01 would, as SGD's L2 term, shrink the weights by lr * 0.01 a step).
            "batch_size": 1024,
            "lr": 0.1,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "optimizer": "nesterov",
            "schedule": "constant",
            "context": 128,
            "d_model": 512,
            "layers": 6,
            "heads": 8,
            "vocab_size": 32000,
            "eval_windows": 4096,
            "max_train_files": max_train_files,
            "bpe_train_files": 1,
        },
    }


def lm_budgets(reference_fresh: int) -> dict[str, Budget]:
    """The language models' ``budgets``, the same at each scale but for one number.

    Args:
        reference_fresh: The cpu scale's `Budget.reference_fresh`, measured per workload.

    Returns:
        ``{scale: Budget}`` for ``cpu`` and ``paper``.
    """
    return {
        "cpu": Budget(max_fresh=40_000, eval_every_fresh=1_600, reference_fresh=reference_fresh),
        "paper": Budget(max_fresh=50_000_000, eval_every_fresh=500_000),
    }


class LanguageModelWorkload(Workload):
    """Base of the language-model workloads (not registered itself).

    Examples are windows of ``context + 1`` token ids over the concatenated texts (each text
    followed by ``<eos>``), tokenized with a byte-level BPE trained on the training text and
    cached in the cache folder; no augmentation. ``evaluate`` reports the mean next-token
    cross-entropy (nats per token) on the first ``eval_windows`` held-out windows.

    Class attributes a subclass sets, besides ``targets``, ``description``, and
    ``default_hparams`` and ``budgets`` from `lm_hparams` and `lm_budgets`:
        corpora: ``{scale: name}``: the corpus's name, which names its cached BPE
            (``<name>_bpe_<vocab_size>``).
        paper_held_out: The paper corpus's held-out split, as `paper_documents` names it.

    and the two readers `cpu_documents` and `paper_documents`.
    """

    # What the protocol study tunes (experiments.search): the learning rate log-uniform over
    # 1/5 to 5 times the default (at paper scale 1/10 to 10 times: its rate for Nesterov
    # momentum is a guess), 1 - momentum log-uniform (momentum 0.5 to 0.98), and at cpu scale
    # the schedule (constant, linear decay, warm-up plus decay, over each trial's budget).
    search_spaces: ClassVar[dict[str, SearchSpace]] = {
        "cpu": SearchSpace(
            {"lr": Dimension(0.01, 0.25), "momentum": MOMENTUM, "schedule": SCHEDULE}
        ),
        "paper": SearchSpace({"lr": Dimension(0.01, 1.0), "momentum": MOMENTUM}),
    }
    corpora: ClassVar[dict[str, str]] = {}
    paper_held_out: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._windows: dict[str, np.ndarray] = {}

    def cpu_documents(self, cache: Path) -> list[str]:
        """Every document of the cpu-scale corpus, in a fixed order.

        Args:
            cache: The cache folder to acquire the corpus into.
        """
        raise NotImplementedError

    def paper_documents(self, split: str, max_files: int) -> list[str]:
        """The documents of the paper corpus's ``split`` read from ``self.data_dir``.

        Args:
            split: ``"train"`` or `paper_held_out`.
            max_files: Read the first ``max_files`` files of the split only.
        """
        raise NotImplementedError

    def texts(self) -> tuple[list[str], list[str], list[str], str]:
        """``(training texts, held-out texts, BPE training texts, corpus name)``.

        At paper scale: the first ``max_train_files`` training files, the first held-out
        file, the BPE trained on the first ``bpe_train_files`` training files. At cpu scale:
        every `HELD_OUT_EVERY`-th document held out, the BPE trained on the others.
        """
        if self.scale == "paper":
            train = self.paper_documents("train", self.hp["max_train_files"])
            bpe = self.paper_documents("train", self.hp["bpe_train_files"])
            held_out = self.paper_documents(self.paper_held_out, 1)
            return train, held_out, bpe, self.corpora["paper"]
        documents = self.cpu_documents(cache_dir(self.data_dir))
        train = [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY]
        return train, documents[::HELD_OUT_EVERY], train, self.corpora["cpu"]

    def _prepare(self) -> None:
        train, held_out, bpe_text, name = self.texts()
        vocab, context = self.hp["vocab_size"], self.hp["context"]
        cache = cache_dir(None if str(self.data_dir) == HUB else self.data_dir)
        tokenizer = bpe_tokenizer(bpe_text, vocab, cache / f"{name}_bpe_{vocab}")
        windows = cached_windows(cache, tokenizer, {"train": train, "eval": held_out}, context)
        self._windows["train"] = windows["train"]
        self._windows["eval"] = windows["eval"][: self.hp["eval_windows"]]

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
        """SGD with Nesterov momentum unless the ``optimizer`` hyper-parameter names another."""
        return build_optimizer(model, self.hp, "nesterov")

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
