"""U-Net (Ronneberger et al., "U-Net: Convolutional Networks for Biomedical Image
Segmentation", 2015), one-channel 256×256 input, two classes.

Written from the paper's Section 2 and Figure 1: a contracting path of two 3×3
convolutions + ReLU per level (64, 128, 256, 512, 1024 channels) with 2×2 max pooling
between levels, and an expansive path whose every step is an "up-convolution" halving
the channels, concatenation with the contracting path's feature map of the same level,
and two 3×3 convolutions + ReLU; a final 1×1 convolution gives the class scores. The
convolutions are padded (the output keeps the input's size and the skip needs no crop),
as the implementations in use do; the image is 256×256 rather than the paper's 572×572
tiles. Two forms of the up-convolution, both deployed:

* "transposed": a 2×2 stride-2 transposed convolution (conv2d_transpose);
* "bilinear": bilinear 2× upsampling followed by the paper's 2×2 convolution (padded by
  one row and column at the bottom and right).

Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

INPUT_SHAPE = (1, 1, 256, 256)
WIDTHS = (64, 128, 256, 512, 1024)
UPSAMPLING = ("transposed", "bilinear")


def double_conv(cin: int, cout: int) -> nn.Sequential:
    """Two 3×3 convolutions (padded, with bias), each followed by ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


def up_convolution(cin: int, upsampling: str) -> nn.Module:
    """Doubles the resolution and halves the channels (see the module docstring)."""
    if upsampling == "transposed":
        return nn.ConvTranspose2d(cin, cin // 2, 2, 2)
    if upsampling == "bilinear":
        return nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                             nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(cin, cin // 2, 2))
    raise ValueError(f"unknown upsampling {upsampling!r}; known: {', '.join(UPSAMPLING)}")


class UNet(nn.Module):
    """Contracting path, bottleneck (1024 channels at 1/16 resolution), expansive path with
    skip concatenations, 1×1 classifier."""

    def __init__(self, upsampling: str = "transposed", in_channels: int = 1, num_classes: int = 2):
        super().__init__()
        self.down = nn.ModuleList([double_conv(cin, cout) for cin, cout in
                                   zip((in_channels, *WIDTHS[:-2]), WIDTHS[:-1])])
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(WIDTHS[-2], WIDTHS[-1])
        self.up = nn.ModuleList([up_convolution(c, upsampling) for c in reversed(WIDTHS[1:])])
        self.decode = nn.ModuleList([double_conv(c, c // 2) for c in reversed(WIDTHS[1:])])
        self.classifier = nn.Conv2d(WIDTHS[0], num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips: List[torch.Tensor] = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, decode, skip in zip(self.up, self.decode, reversed(skips)):
            x = decode(torch.cat([skip, up(x)], dim=1))
        return self.classifier(x)
