"""Inception-v3 (Szegedy et al., "Rethinking the Inception Architecture for Computer
Vision", 2016), 299×299 input.

Written from the paper's Table 1 (the outline: a stem of plain convolutions, three
Figure 5 modules at 35×35, a grid reduction (Figure 10), four Figure 6 modules at 17×17
with n = 7 — 7×7 convolutions factorised into asymmetric 1×7 and 7×1 ones — a second grid
reduction and two Figure 7 modules at 8×8 with their 1×3 / 3×1 branches side by side,
then pool and classifier) and Section 7 (batch-normalised convolutions, BN eps 0.001).
The branch widths, which Table 1 does not list, are those of the authors' released
model. The auxiliary classifier only runs in training and is left out. Random weights,
nothing downloaded.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

from .layers import Kernel, conv_bn

INPUT_SHAPE = (1, 3, 299, 299)


def unit(cin: int, cout: int, kernel: Kernel, stride: int = 1, same: bool = True) -> List[nn.Module]:
    """Inception's basic unit: convolution, batch norm (eps 0.001), ReLU."""
    return conv_bn(cin, cout, kernel, stride, act=nn.ReLU, eps=1e-3, same=same)


def branch(cin: int, convs: Sequence[tuple]) -> nn.Sequential:
    """A chain of units, each `(cout, kernel[, stride, same])`, starting from `cin` channels."""
    layers: List[nn.Module] = []
    for cout, *rest in convs:
        layers += unit(cin, cout, *rest)
        cin = cout
    return nn.Sequential(*layers)


class Concat(nn.Module):
    """Runs each branch on the same input and concatenates their outputs' channels."""

    def __init__(self, *branches: nn.Module):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], dim=1)


def pooled(cin: int, cout: int) -> nn.Sequential:
    """3×3/1 average pool then a 1×1 unit (the pool branch of Figures 5–7)."""
    return nn.Sequential(nn.AvgPool2d(3, 1, 1), *unit(cin, cout, 1))


def module_35(cin: int, pool_features: int) -> Concat:
    """Figure 5 (the 5×5 branch kept as one 5×5 as in the released model): 64 + 64 + 96 + pool."""
    return Concat(branch(cin, [(64, 1)]), branch(cin, [(48, 1), (64, 5)]),
                  branch(cin, [(64, 1), (96, 3), (96, 3)]), pooled(cin, pool_features))


def reduction_35(cin: int) -> Concat:
    """Figure 10 grid reduction 35 → 17: stride-2 convolutions beside a stride-2 max pool."""
    return Concat(branch(cin, [(384, 3, 2, False)]), branch(cin, [(64, 1), (96, 3), (96, 3, 2, False)]),
                  nn.MaxPool2d(3, 2))


def module_17(c7: int) -> Concat:
    """Figure 6 with n = 7 on 768 channels (`c7` the inner width): 4 × 192 outputs."""
    return Concat(branch(768, [(192, 1)]), branch(768, [(c7, 1), (c7, (1, 7)), (192, (7, 1))]),
                  branch(768, [(c7, 1), (c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))]),
                  pooled(768, 192))


def reduction_17() -> Concat:
    """Grid reduction 17 → 8 (768 → 1280 channels)."""
    return Concat(branch(768, [(192, 1), (320, 3, 2, False)]),
                  branch(768, [(192, 1), (192, (1, 7)), (192, (7, 1)), (192, 3, 2, False)]),
                  nn.MaxPool2d(3, 2))


def side_by_side_1x3_3x1() -> Concat:
    """Figure 7's expanded filter bank: a 1×3 and a 3×1 unit on the same 384 channels."""
    return Concat(branch(384, [(384, (1, 3))]), branch(384, [(384, (3, 1))]))


def module_8(cin: int) -> Concat:
    """Figure 7: 320 + (384 ‖ 384) + (384 ‖ 384) + 192 = 2048 channels."""
    return Concat(branch(cin, [(320, 1)]), nn.Sequential(branch(cin, [(384, 1)]), side_by_side_1x3_3x1()),
                  nn.Sequential(branch(cin, [(448, 1), (384, 3)]), side_by_side_1x3_3x1()), pooled(cin, 192))


class InceptionV3(nn.Module):
    """Stem (299 → 35), 3 × Figure 5, reduction, 4 × Figure 6, reduction, 2 × Figure 7,
    global average pool and the 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        stem = [*unit(3, 32, 3, 2, False), *unit(32, 32, 3, same=False), *unit(32, 64, 3), nn.MaxPool2d(3, 2),
                *unit(64, 80, 1), *unit(80, 192, 3, same=False), nn.MaxPool2d(3, 2)]
        self.features = nn.Sequential(
            *stem, module_35(192, 32), module_35(256, 64), module_35(288, 64), reduction_35(288),
            module_17(128), module_17(160), module_17(160), module_17(192), reduction_17(),
            module_8(1280), module_8(2048))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))
