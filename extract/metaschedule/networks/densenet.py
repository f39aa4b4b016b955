"""DenseNet-121 (Huang et al., "Densely Connected Convolutional Networks", 2017), 224×224.

Written from the paper's Table 1 (DenseNet-121 column: dense blocks of 6, 12, 24 and 16
layers) and Section 3: growth rate k = 32, each layer is the "DenseNet-B" bottleneck
BN-ReLU-1×1 conv (4k channels)-BN-ReLU-3×3 conv (k channels) applied to the concatenation
of all earlier feature maps of its block, transitions BN-ReLU-1×1 conv halving the
channels (compression θ = 0.5) then 2×2 average pool. Batch norm comes before each
convolution (pre-activation), so only the second one of a layer folds into the 1×1
convolution; the others become scale-and-shift operators fused with the ReLU, as a
deployment runs them. Every layer of a block reads a different channel count, which gives
many distinct 1×1 convolution shapes. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from .layers import conv_bn

INPUT_SHAPE = (1, 3, 224, 224)
GROWTH = 32
BLOCKS = (6, 12, 24, 16)
BOTTLENECK = 4      # the 1×1 convolution's width is BOTTLENECK · GROWTH


def bn_relu_conv(cin: int, cout: int, kernel: int) -> List[nn.Module]:
    """The pre-activation unit: batch norm, ReLU, convolution without bias."""
    return [nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, kernel, 1, kernel // 2, bias=False)]


class DenseLayer(nn.Module):
    """BN-ReLU-1×1 conv → BN-ReLU-3×3 conv; the k new channels are appended to the input."""

    def __init__(self, cin: int):
        super().__init__()
        self.body = nn.Sequential(*bn_relu_conv(cin, BOTTLENECK * GROWTH, 1),
                                  *bn_relu_conv(BOTTLENECK * GROWTH, GROWTH, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], dim=1)


class DenseNet121(nn.Module):
    """7×7/2 conv-BN-ReLU stem, 3×3/2 max pool, four dense blocks with transitions between
    them, final BN-ReLU, global average pool and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = [*conv_bn(3, 64, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1)]
        channels = 64
        for i, depth in enumerate(BLOCKS):
            for _ in range(depth):
                layers.append(DenseLayer(channels))
                channels += GROWTH
            if i + 1 < len(BLOCKS):
                layers += [*bn_relu_conv(channels, channels // 2, 1), nn.AvgPool2d(2, 2)]
                channels //= 2
        layers += [nn.BatchNorm2d(channels), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
