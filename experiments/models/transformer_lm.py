"""The Transformer language model: a ``transformers`` causal LM built from a config (no
pretrained weights), with GPT-2's architecture (pre-norm blocks, learned positions, input and
output embeddings tied) and the original Transformer's ReLU feed-forward, no dropout."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CausalLM"]


class CausalLM(nn.Module):
    """A ``transformers.GPT2LMHeadModel`` that maps token ids to next-token logits.

    Args:
        vocab_size: Vocabulary size.
        context: Maximum sequence length.
        d_model: Model width. Default 64.
        layers: Transformer blocks. Default 2.
        heads: Attention heads. Default 4.
        ff: Feed-forward width. Default ``4 * d_model``.

    Attributes:
        model: The ``transformers`` model (its ``config`` says the size).
    """

    def __init__(
        self,
        vocab_size: int,
        context: int,
        d_model: int = 64,
        layers: int = 2,
        heads: int = 4,
        ff: int | None = None,
    ):
        from transformers import GPT2Config, GPT2LMHeadModel

        super().__init__()
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=context,
            n_embd=d_model,
            n_layer=layers,
            n_head=heads,
            n_inner=ff or 4 * d_model,
            activation_function="relu",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=None,
        )
        self.model = GPT2LMHeadModel(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, length, vocab)`` for ids of shape ``(batch, length)``."""
        return self.model(input_ids=tokens, use_cache=False).logits
