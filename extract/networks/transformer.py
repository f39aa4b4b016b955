"""The transformer encoder layer shared by the BERT and ViT files (Vaswani et al., 2017).

Attention is written out (Q, K, V projections, Q·Kᵀ/√d, softmax, ·V, output projection)
rather than through `scaled_dot_product_attention`, so that the imported program has the
batch_matmul and softmax operators a real encoder runs, not one fused library call.
`pre_norm` selects ViT's LayerNorm-before-sublayer placement; BERT normalises after the
residual addition.
"""
from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention, no mask (every token attends to every token)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        return x.reshape(batch, tokens, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        batch, _, tokens, _ = context.shape
        return self.out(context.permute(0, 2, 1, 3).reshape(batch, tokens, -1))


class EncoderLayer(nn.Module):
    """Attention and a GELU feed-forward network, each with a residual and a LayerNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int, pre_norm: bool, eps: float):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = SelfAttention(hidden, heads)
        self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ffn(x))
