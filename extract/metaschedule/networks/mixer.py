"""One MLP-Mixer layer (Tolstikhin et al., "MLP-Mixer: An all-MLP Architecture for
Vision", 2021), Mixer-S/16 sizes: 196 tokens (14×14 patches of a 224² image), 512
channels, token-mixing MLP 256, channel-mixing MLP 2048, GELU, pre-LayerNorm (eps 1e-6).

Written from the paper's Section 2 and Table 1: token mixing
x + W2ᵀ GELU(W1ᵀ LN(x)ᵀ)ᵀ mixes across the 196 patches (a dense over the token axis of
the transposed tensor), then channel mixing x + MLP(LN(x)) across channels. Written for
the whole-network tuning benchmark as a network no tuning dataset holds: its dense
shapes (512×196 → 256 → 196 over tokens) occur in none of them. Random weights.
"""
from __future__ import annotations

import torch
from torch import nn

INPUT_SHAPE = (1, 196, 512)
TOKENS, CHANNELS, TOKEN_MLP, CHANNEL_MLP = 196, 512, 256, 2048
EPS = 1e-6


class MixerLayer(nn.Module):
    """Token mixing then channel mixing, each a pre-norm residual MLP (Figure 1)."""

    def __init__(self, tokens: int = TOKENS, channels: int = CHANNELS, token_mlp: int = TOKEN_MLP,
                 channel_mlp: int = CHANNEL_MLP):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels, eps=EPS)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, token_mlp), nn.GELU(), nn.Linear(token_mlp, tokens))
        self.norm2 = nn.LayerNorm(channels, eps=EPS)
        self.channel_mlp = nn.Sequential(nn.Linear(channels, channel_mlp), nn.GELU(), nn.Linear(channel_mlp, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))
