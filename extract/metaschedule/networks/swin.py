"""Swin-T (Liu et al., "Swin Transformer: Hierarchical Vision Transformer using Shifted
Windows", 2021), 224×224 input.

Written from the paper's Section 3 and Table 7 (Swin-T: C = 96, blocks 2/2/6/2, heads
3/6/12/24, window 7×7, MLP ratio 4): 4×4 patch embedding, blocks alternating regular and
shifted windows (Section 3.2: the shift is a cyclic roll by ⌊7/2⌋ with an attention mask
that keeps windows made of non-adjacent pieces apart), attention with a learned relative
position bias (Section 3.2, Eq. 4), patch merging (2×2 neighbours concatenated, LayerNorm,
linear 4C → 2C) between stages, then LayerNorm, global pool and classifier. At the last
stage the 7×7 map is a single window, so it is not shifted (as in the released model).
The bias table lookup and the mask are constants of the program (folded when the network
is imported); the roll, window partition and attention are what runs. Random weights,
nothing downloaded.
"""
from __future__ import annotations

from typing import List, Optional

import torch
from torch import nn

from .transformer import SelfAttention

INPUT_SHAPE = (1, 3, 224, 224)
EMBED, DEPTHS, HEADS, WINDOW, PATCH = 96, (2, 2, 6, 2), (3, 6, 12, 24), 7, 4


def partition(x: torch.Tensor, window: int) -> torch.Tensor:
    """(B, H, W, C) → (B · windows, window², C), windows in row-major order per image."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, w // window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, window * window, c)


def merge(windows: torch.Tensor, window: int, h: int, w: int) -> torch.Tensor:
    """The inverse of `partition`: (B · windows, window², C) → (B, H, W, C)."""
    c = windows.shape[-1]
    x = windows.reshape(-1, h // window, w // window, window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, h, w, c)


def relative_position_index(window: int) -> torch.Tensor:
    """(window², window²) index into the (2·window − 1)² relative-offset bias table."""
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
    offsets = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
    return offsets[..., 0] * (2 * window - 1) + offsets[..., 1]


def shift_mask(size: int, window: int, shift: int) -> torch.Tensor:
    """(windows, window², window²) additive mask: −100 between tokens that the cyclic shift
    brought into one window from different regions of the image, 0 otherwise."""
    region = torch.zeros(1, size, size, 1)
    bounds = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
    for i, (rows, cols) in enumerate((r, c) for r in bounds for c in bounds):
        region[:, rows, cols, :] = i
    labels = partition(region, window).squeeze(-1)
    differs = labels[:, None, :] != labels[:, :, None]
    return torch.zeros(differs.shape).masked_fill(differs, -100.0)


class SwinBlock(nn.Module):
    """(Shifted-)window attention and the MLP, each pre-norm with a residual; x has shape
    (B, size², dim)."""

    def __init__(self, dim: int, heads: int, size: int, shift: int):
        super().__init__()
        self.size, self.window, self.shift = size, min(WINDOW, size), shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, heads, fused_qkv=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.bias_table = nn.Parameter(torch.randn((2 * self.window - 1) ** 2, heads) * 0.02)
        self.register_buffer("index", relative_position_index(self.window), persistent=False)
        mask: Optional[torch.Tensor] = shift_mask(size, self.window, shift) if shift else None
        self.register_buffer("mask", mask, persistent=False)

    def attention_bias(self, batch: int) -> torch.Tensor:
        """(heads, N, N) relative position bias, plus the shift mask per window (repeated
        for each image of the batch) when shifted."""
        bias = self.bias_table[self.index].permute(2, 0, 1)
        return bias if self.mask is None else (bias[None] + self.mask[:, None]).repeat(batch, 1, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, dim = x.shape
        h = self.norm1(x).reshape(batch, self.size, self.size, dim)
        if self.shift:
            h = torch.roll(h, (-self.shift, -self.shift), (1, 2))
        h = self.attention(partition(h, self.window), self.attention_bias(batch))
        h = merge(h, self.window, self.size, self.size)
        if self.shift:
            h = torch.roll(h, (self.shift, self.shift), (1, 2))
        x = x + h.reshape(batch, -1, dim)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    """(B, size², C) → (B, (size/2)², 2C): 2×2 neighbours concatenated, LayerNorm, linear."""

    def __init__(self, dim: int, size: int):
        super().__init__()
        self.size = size
        self.norm, self.reduction = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, dim = x.shape
        x = x.reshape(batch, self.size, self.size, dim)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return self.reduction(self.norm(x.reshape(batch, -1, 4 * dim)))


class SwinT(nn.Module):
    """Patch embedding, four stages of Swin blocks with patch merging between them, final
    LayerNorm, average over tokens and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.embed = nn.Conv2d(3, EMBED, PATCH, PATCH)
        self.embed_norm = nn.LayerNorm(EMBED)
        layers: List[nn.Module] = []
        dim, size = EMBED, INPUT_SHAPE[-1] // PATCH
        for stage, (depth, heads) in enumerate(zip(DEPTHS, HEADS)):
            if stage > 0:
                layers.append(PatchMerging(dim, size))
                dim, size = 2 * dim, size // 2
            shift = WINDOW // 2 if size > WINDOW else 0
            layers += [SwinBlock(dim, heads, size, shift if i % 2 else 0) for i in range(depth)]
        self.stages = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed_norm(self.embed(x).flatten(2).transpose(1, 2))
        return self.head(self.norm(self.stages(x)).mean(dim=1))
