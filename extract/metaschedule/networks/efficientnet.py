"""EfficientNet-B0 (Tan & Le, "EfficientNet: Rethinking Model Scaling for Convolutional
Neural Networks", 2019), 224×224 input.

Written from the paper's Table 1 (stages of MBConv blocks: expansion, kernel, channels,
layers, stride) and Section 4: MBConv is MobileNetV2's inverted residual with
squeeze-excite (squeezed to a quarter of the block's input channels) and swish
x·sigmoid(x) (torch's SiLU) as the non-linearity throughout. Stem 3×3/2 to 32, head 1×1
to 1280, global pool, classifier. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from .layers import InvertedResidual, SqueezeExcite, conv_bn

INPUT_SHAPE = (1, 3, 224, 224)
# Table 1: (expansion, kernel, output channels, layers, first stride)
STAGES = ((1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2),
          (6, 5, 112, 3, 1), (6, 5, 192, 4, 2), (6, 3, 320, 1, 1))


def mbconv(cin: int, cout: int, kernel: int, stride: int, expansion: int) -> nn.Module:
    """MBConv: inverted residual with swish and squeeze-excite to a quarter of `cin`."""
    hidden = cin * expansion
    return InvertedResidual(cin, hidden, cout, kernel, stride, nn.SiLU,
                            SqueezeExcite(hidden, max(1, cin // 4), nn.SiLU, nn.Sigmoid))


class EfficientNetB0(nn.Module):
    """Stem, the sixteen MBConv blocks of Table 1, 1×1 head to 1280, pool, classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = conv_bn(3, 32, 3, 2, act=nn.SiLU)
        cin = 32
        for expansion, kernel, cout, repeats, stride in STAGES:
            for i in range(repeats):
                layers.append(mbconv(cin, cout, kernel, stride if i == 0 else 1, expansion))
                cin = cout
        layers += conv_bn(cin, 1280, 1, act=nn.SiLU)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
