"""A small decoder-only Transformer language model (pre-norm, learned positions, tied output)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DecoderLM"]


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
