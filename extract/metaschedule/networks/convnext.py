"""ConvNeXt-T (Liu et al., "A ConvNet for the 2020s", 2022), 224×224 input.

Written from the paper's Section 2 and Figure 4 (the ConvNeXt block: 7×7 depthwise
convolution, LayerNorm, 1×1 expansion to 4× width, GELU, 1×1 projection, layer scale,
residual) and its Table 9 (ConvNeXt-T: channels 96/192/384/768, blocks 3/3/9/3; a 4×4/4
"patchify" stem with LayerNorm; LayerNorm then 2×2/2 convolution between stages; global
pool, LayerNorm and classifier). The 1×1 convolutions run as linear layers on
channels-last tensors, as the paper's reference code does; the channels-first LayerNorms
of stem and downsampling layers permute to channels-last and back, so they import as one
layer_norm operator. LayerNorm eps 1e-6. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 224, 224)
DIMS = (96, 192, 384, 768)
DEPTHS = (3, 3, 9, 3)
EPS = 1e-6


class ChannelsFirstLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    """x + γ · Linear(GELU(Linear(LN(dwconv7×7(x))))), the linears on channels-last."""

    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=EPS)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mlp(self.norm(self.dwconv(x).permute(0, 2, 3, 1)))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


class ConvNeXtT(nn.Module):
    """Stem, four stages (downsampling before stages 2–4), pool, LayerNorm, classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = [nn.Conv2d(3, DIMS[0], 4, 4), ChannelsFirstLayerNorm(DIMS[0], eps=EPS)]
        for i, (dim, depth) in enumerate(zip(DIMS, DEPTHS)):
            if i > 0:
                layers += [ChannelsFirstLayerNorm(DIMS[i - 1], eps=EPS), nn.Conv2d(DIMS[i - 1], dim, 2, 2)]
            layers += [ConvNeXtBlock(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = nn.LayerNorm(DIMS[-1], eps=EPS)
        self.head = nn.Linear(DIMS[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.flatten(self.pool(self.features(x)), 1)))
