"""The transformer layer shared by the BERT, ViT, GPT-2 and Swin files (Vaswani et al., 2017).

Attention is written out (Q, K, V projections, Q·Kᵀ/√d + bias, softmax, ·V, output
projection) rather than through `scaled_dot_product_attention`, so that the imported
program has the batch_matmul and softmax operators a real transformer runs, not one fused
library call. `pre_norm` selects the LayerNorm-before-sublayer placement of ViT and GPT-2;
BERT normalises after the residual addition. `causal_context` > 0 adds GPT's mask (a token
attends to itself and earlier tokens only) as an additive −∞ bias on the scores, kept as a
(context × context) buffer and sliced to the sequence as GPT-2 does (so the mask is a
constant of the imported program; built inside `forward` it would need Relax's `full`,
which TVM 0.27 fails to legalise); `fused_qkv` computes Q, K and V with one
hidden → 3·hidden projection, as GPT-2 and Swin do.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention over x of shape (batch, tokens, hidden):
    softmax(Q·Kᵀ/√d + bias)·V per head, then the output projection. `bias` (broadcast to
    (batch, heads, tokens, tokens)) carries masks and relative position biases."""

    def __init__(self, hidden: int, heads: int, fused_qkv: bool = False):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        self.heads, self.head_dim = heads, hidden // heads
        if fused_qkv:
            self.qkv = nn.Linear(hidden, 3 * hidden)
        else:
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        return x.reshape(batch, tokens, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def projections(self, x: torch.Tensor):
        if hasattr(self, "qkv"):
            return (self.split(part) for part in self.qkv(x).chunk(3, dim=-1))
        return self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        q, k, v = self.projections(x)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if bias is not None:
            scores = scores + bias
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        batch, _, tokens, _ = context.shape
        return self.out(context.permute(0, 2, 1, 3).reshape(batch, tokens, -1))


def causal_bias(tokens: int) -> torch.Tensor:
    """(tokens, tokens) additive mask: 0 on and below the diagonal, −∞ above it."""
    return torch.full((tokens, tokens), float("-inf")).triu(diagonal=1)


class TransformerLayer(nn.Module):
    """Attention and a feed-forward network (hidden → ffn → hidden with `activation`), each
    with a residual and a LayerNorm; x and the output have shape (batch, tokens, hidden)."""

    def __init__(self, hidden: int, heads: int, ffn: int, pre_norm: bool, eps: float,
                 causal_context: int = 0, fused_qkv: bool = False,
                 activation: Callable[[], nn.Module] = nn.GELU):
        super().__init__()
        self.pre_norm = pre_norm
        mask = causal_bias(causal_context) if causal_context else None
        self.register_buffer("causal_mask", mask, persistent=False)
        self.attention = SelfAttention(hidden, heads, fused_qkv)
        self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), activation(), nn.Linear(ffn, hidden))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        if self.causal_mask is None:
            return self.attention(x)
        tokens = x.shape[1]
        return self.attention(x, self.causal_mask[:tokens, :tokens])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attend(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.attend(x))
        return self.norm2(x + self.ffn(x))
