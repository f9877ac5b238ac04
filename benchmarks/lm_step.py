"""One training step of the cpu-scale language model: `experiments.models.CausalLM` (a
`transformers` GPT-2 causal LM, which the language-model workloads train) against the
hand-written `DecoderLM` (an ``nn.TransformerEncoder``, which they trained before), same size,
side by side in one process (steps interleaved, so machine noise hits both alike).

    python -m benchmarks.lm_step --out benchmarks/results/lm_step.csv

Both are pre-norm with learned positions, tied embeddings, ReLU and PyTorch's
scaled-dot-product attention. Each row is one model; ``ratio`` is its median step time over
`DecoderLM`'s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.common import machine_note, print_table, write_csv
from experiments.models.transformer_lm import CausalLM

__all__ = ["DecoderLM", "main", "models"]

COLUMNS = ("model", "parameters", "median_ms", "min_ms", "ratio", "steps", "threads")


class DecoderLM(nn.Module):
    """Causal Transformer over token ids.

    Args:
        vocab_size: Vocabulary size.
        context: Maximum sequence length.
        d_model: Model width. Default 64.
        layers: Transformer blocks. Default 2.
        heads: Attention heads. Default 4.
        ff: Feed-forward width. Default ``4 * d_model``.
        dropout: Dropout. Default 0.0.
    """

    def __init__(
        self,
        vocab_size: int,
        context: int,
        d_model: int = 64,
        layers: int = 2,
        heads: int = 4,
        ff: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Parameter(torch.zeros(context, d_model))
        block = nn.TransformerEncoderLayer(
            d_model, heads, ff or 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.position, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, length, vocab)`` for ids of shape ``(batch, length)``."""
        length = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        x = self.embed(tokens) + self.position[:length]
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.norm(x) @ self.embed.weight.T


def models(vocab: int, context: int, width: int, layers: int, heads: int) -> dict[str, Callable]:
    """Name -> a function making the model; both map ids ``(B, T)`` to logits ``(B, T, V)``."""
    return {
        "DecoderLM": lambda: DecoderLM(vocab, context, width, layers, heads),
        "CausalLM (transformers GPT2LMHeadModel)": lambda: CausalLM(
            vocab, context, width, layers, heads
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; writes one CSV row per model."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.lm_step", description=__doc__)
    p.add_argument("--steps", type=int, default=60, help="timed steps per model (default 60)")
    p.add_argument("--batch-size", type=int, default=32, help="windows per batch (default 32)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--out", required=True, help="CSV to write")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    vocab, context, width, layers, heads = 1024, 64, 64, 2, 4  # lm1b_transformer at cpu scale
    made = {}
    for name, make in models(vocab, context, width, layers, heads).items():
        torch.manual_seed(0)
        model = make()
        made[name] = (model, torch.optim.AdamW(model.parameters(), lr=5e-3), [])
    batch = torch.randint(0, vocab, (args.batch_size, context + 1))
    for step in range(args.steps + 5):  # 5 warm-up steps each
        for model, optimizer, times in made.values():
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            logits = model(batch[:, :-1])
            F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten()).backward()
            optimizer.step()
            if step >= 5:
                times.append(time.perf_counter() - start)
    base = statistics.median(made["DecoderLM"][2])
    rows = [
        {
            "model": name,
            "parameters": sum(p.numel() for p in model.parameters()),
            "median_ms": 1000 * statistics.median(times),
            "min_ms": 1000 * min(times),
            "ratio": statistics.median(times) / base,
            "steps": args.steps,
            "threads": args.threads,
        }
        for name, (model, _, times) in made.items()
    ]
    write_csv(rows, args.out)
    print(machine_note())
    print_table(rows, COLUMNS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
