"""MobileNetV3-Large (Howard et al., "Searching for MobileNetV3", 2019), 224×224 input.

Written from the paper's Table 1 (the fifteen bottlenecks: kernel, expansion size, output
channels, squeeze-excite, non-linearity, stride) and Section 5: hard-swish
h-swish(x) = x·ReLU6(x + 3)/6, squeeze-excite gated by hard-sigmoid ReLU6(x + 3)/6 with
the squeezed width a quarter of the expansion (rounded to a multiple of 8), and the
efficient last stage (1×1 conv to 960, global pool, 1×1 "conv" to 1280 with h-swish, no
batch norm, then the classifier). torch's `Hardswish`/`Hardsigmoid` import into Relax as
exactly these clip formulas, so nothing is rewritten. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from .layers import InvertedResidual, SqueezeExcite, conv_bn, make_divisible

INPUT_SHAPE = (1, 3, 224, 224)
# Table 1: (kernel, expansion size, output channels, squeeze-excite, h-swish, stride)
BLOCKS = ((3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
          (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
          (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
          (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
          (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1))


def bottleneck(cin: int, kernel: int, hidden: int, cout: int, se: bool, hswish: bool, stride: int) -> nn.Module:
    """One row of Table 1: ReLU or h-swish, squeeze-excite (hard-sigmoid gate) where marked."""
    gate = SqueezeExcite(hidden, make_divisible(hidden / 4), nn.ReLU, nn.Hardsigmoid) if se else None
    return InvertedResidual(cin, hidden, cout, kernel, stride, nn.Hardswish if hswish else nn.ReLU, gate)


class MobileNetV3Large(nn.Module):
    """3×3/2 stem (16, h-swish), the fifteen bottlenecks, 1×1 conv to 960 (h-swish),
    global average pool, 1×1 to 1280 (h-swish) and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = conv_bn(3, 16, 3, 2, act=nn.Hardswish)
        cin = 16
        for kernel, hidden, cout, se, hswish, stride in BLOCKS:
            layers.append(bottleneck(cin, kernel, hidden, cout, se, hswish, stride))
            cin = cout
        layers += conv_bn(cin, 960, 1, act=nn.Hardswish)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(960, 1280), nn.Hardswish(), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))
