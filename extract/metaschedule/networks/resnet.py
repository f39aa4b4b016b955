"""ResNet-18/50/101 (He et al., "Deep Residual Learning for Image Recognition", 2015) and
ResNeXt-50 32×4d (Xie et al., "Aggregated Residual Transformations for Deep Neural
Networks", 2017), ImageNet layout, 224×224 input.

Written from He et al.'s Table 1 (18-, 50- and 101-layer columns: basic blocks of two 3×3
convolutions for 18 layers, 1×1–3×3–1×1 bottlenecks with 4× expansion for 50 and 101) and
Xie et al.'s Table 1 (ResNeXt-50: the bottleneck's 3×3 convolution grouped, 32 groups of 4
channels in the first stage, the bottleneck twice as wide as ResNet-50's). The stride sits
on the 3×3 convolution of each down-sampling bottleneck (the "v1.5" placement every
framework ships), so the conv2d shapes are those a deployed network runs. Random weights:
only the layer structure matters for tuning tasks, and nothing is downloaded.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

from .layers import conv_bn

INPUT_SHAPE = (1, 3, 224, 224)
STAGE_PLANES = (64, 128, 256, 512)   # the 3×3 convolutions' width in ResNet-50's stages
EXPANSION = 4


class ResidualBlock(nn.Module):
    """ReLU(body(x) + shortcut(x)); the shortcut is a strided 1×1 conv-bn projection where
    the block changes the resolution or the width, the identity otherwise."""

    def __init__(self, body: nn.Sequential, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = body
        needs_projection = stride != 1 or cin != cout
        self.shortcut = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if needs_projection else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class BasicBlock(ResidualBlock):
    """3×3 (carries the stride) → 3×3 (ResNet-18/34)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, groups: int = 1, width_per_group: int = 64):
        if groups != 1 or width_per_group != 64:
            raise ValueError("BasicBlock has no grouped or widened form")
        body = nn.Sequential(*conv_bn(cin, planes, 3, stride), nn.ReLU(), *conv_bn(planes, planes, 3))
        super().__init__(body, cin, planes, stride)


class Bottleneck(ResidualBlock):
    """1×1 reduce → 3×3 (carries the stride; `groups` groups for ResNeXt) → 1×1 expand.
    The 3×3 width is planes · width_per_group/64 · groups."""

    expansion = EXPANSION

    def __init__(self, cin: int, planes: int, stride: int, groups: int = 1, width_per_group: int = 64):
        width, cout = planes * width_per_group // 64 * groups, planes * EXPANSION
        body = nn.Sequential(*conv_bn(cin, width, 1), nn.ReLU(), *conv_bn(width, width, 3, stride, groups),
                             nn.ReLU(), *conv_bn(width, cout, 1))
        super().__init__(body, cin, cout, stride)


class ResNet(nn.Module):
    """Stem (7×7/2 conv, 3×3/2 max-pool), four stages of `depths[i]` blocks (the first of
    stages 2–4 halves the resolution), global average pool and the 1000-way classifier."""

    def __init__(self, block: type, depths: Sequence[int], groups: int = 1, width_per_group: int = 64,
                 num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for stage, (planes, blocks) in enumerate(zip(STAGE_PLANES, depths)):
            for i in range(blocks):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(block(cin, planes, stride, groups, width_per_group))
                cin = planes * block.expansion
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2))


def resnet50() -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3))


def resnet101() -> ResNet:
    return ResNet(Bottleneck, (3, 4, 23, 3))


def resnext50_32x4d() -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3), groups=32, width_per_group=4)
