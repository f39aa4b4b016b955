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

INPUT_SHAPE = (1, 3, 224, 224)
# (expansion t, output channels c, repeats n, first stride s), Table 2 of the paper
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def conv_bn_relu6(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> List[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU6()]


class InvertedResidual(nn.Module):
    """Expand (skipped when t = 1) → depthwise → linear projection (+ input when shapes match)."""

    def __init__(self, cin: int, cout: int, stride: int, expansion: int):
        super().__init__()
        hidden = cin * expansion
        layers: List[nn.Module] = conv_bn_relu6(cin, hidden, 1) if expansion != 1 else []
        layers += conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden)
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """3×3/2 stem (32), the seventeen inverted residual blocks, 1×1 conv to 1280, global
    average pool and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = conv_bn_relu6(3, 32, 3, 2)
        cin = 32
        for t, c, n, s in BLOCKS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += conv_bn_relu6(cin, 1280, 1)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
