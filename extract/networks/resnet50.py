"""ResNet-50 (He et al., "Deep Residual Learning for Image Recognition", 2015), ImageNet layout.

Written from the paper's Table 1 (50-layer column) with the stride on the 3×3 convolution of
each down-sampling bottleneck (the "v1.5" placement every framework ships), so the conv2d
shapes are those a deployed ResNet-50 runs. Random weights: only the layer structure matters
for tuning tasks, and nothing is downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 224, 224)
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)
EXPANSION = 4


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> List[nn.Module]:
    """Convolution without bias followed by batch norm (the paper's "BN after each conv")."""
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    """1×1 reduce → 3×3 (carries the stride) → 1×1 expand, plus the (projected) shortcut."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * EXPANSION
        self.body = nn.Sequential(*conv_bn(cin, width, 1), nn.ReLU(),
                                  *conv_bn(width, width, 3, stride), nn.ReLU(),
                                  *conv_bn(width, cout, 1))
        needs_projection = stride != 1 or cin != cout
        self.shortcut = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if needs_projection else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    """Stem (7×7/2 conv, 3×3/2 max-pool), four bottleneck stages [3, 4, 6, 3], global
    average pool and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for width, blocks, stride in STAGES:
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * EXPANSION
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))
