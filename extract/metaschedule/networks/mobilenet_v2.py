"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", 2018).

Written from the paper's Table 2 (width multiplier 1.0, 224×224 input): inverted residual
blocks of 1×1 expansion (ReLU6) → 3×3 depthwise (ReLU6) → 1×1 linear projection, with a
residual connection when stride is 1 and the channel count is kept. Gives the depthwise and
pointwise convolutions that ResNet-50 lacks. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from .layers import InvertedResidual, conv_bn

INPUT_SHAPE = (1, 3, 224, 224)
# (expansion t, output channels c, repeats n, first stride s), Table 2 of the paper
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    """3×3/2 stem (32), the seventeen inverted residual blocks, 1×1 conv to 1280, global
    average pool and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = conv_bn(3, 32, 3, 2, act=nn.ReLU6)
        cin = 32
        for t, c, n, s in BLOCKS:
            for i in range(n):
                layers.append(InvertedResidual(cin, cin * t, c, 3, s if i == 0 else 1, nn.ReLU6))
                cin = c
        layers += conv_bn(cin, 1280, 1, act=nn.ReLU6)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
