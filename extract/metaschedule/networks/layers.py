"""Building blocks shared by the convolutional networks of this package.

`conv_bn` is the "convolution without bias, batch norm, activation" unit every CNN here
is made of (batch norm is folded into the convolution when the network is imported, as a
deployment compiles it). `InvertedResidual` is the block of MobileNetV2, MobileNetV3 and
EfficientNet; `SqueezeExcite` the channel gate of Hu et al. (2018) that the latter two put
in it.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, Union

import torch
from torch import nn

Kernel = Union[int, Tuple[int, int]]
Activation = Optional[Callable[[], nn.Module]]


def conv_bn(cin: int, cout: int, kernel: Kernel, stride: int = 1, groups: int = 1,
            act: Activation = None, eps: float = 1e-5, same: bool = True) -> List[nn.Module]:
    """Convolution without bias, batch norm, then `act()` when given. The convolution pads
    by half the kernel ("same", also for asymmetric kernels such as 1×7), or not at all
    when `same` is false ("valid")."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    padding = (kh // 2, kw // 2) if same else (0, 0)
    layers: List[nn.Module] = [nn.Conv2d(cin, cout, (kh, kw), stride, padding, groups=groups, bias=False),
                               nn.BatchNorm2d(cout, eps=eps)]
    return layers + [act()] if act is not None else layers


def make_divisible(channels: float, divisor: int = 8) -> int:
    """`channels` rounded to the nearest multiple of `divisor`, never below 90% of it (the
    rounding of the MobileNet and EfficientNet reference implementations)."""
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


class SqueezeExcite(nn.Module):
    """x · gate(W₂ act(W₁ mean_hw(x) + b₁) + b₂): global average pool, 1×1 reduce with
    `act`, 1×1 expand, `gate` (sigmoid or hard sigmoid), channel-wise scale of x.

    Parameters: `channels` of x, `squeezed` of the reduced vector."""

    def __init__(self, channels: int, squeezed: int, act: Callable[[], nn.Module],
                 gate: Callable[[], nn.Module]):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce, self.act = nn.Conv2d(channels, squeezed, 1), act()
        self.expand, self.gate = nn.Conv2d(squeezed, channels, 1), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


class InvertedResidual(nn.Module):
    """MobileNetV2's inverted residual (Sandler et al., 2018) and its squeeze-excite form
    (MobileNetV3, EfficientNet's MBConv): 1×1 expansion to `hidden` with `act` (skipped
    when hidden equals cin), k×k depthwise with `act` (carries the stride), `se` when
    given, linear 1×1 projection; plus x when the stride is 1 and the width is kept."""

    def __init__(self, cin: int, hidden: int, cout: int, kernel: int, stride: int,
                 act: Callable[[], nn.Module], se: Optional[nn.Module] = None):
        super().__init__()
        layers: List[nn.Module] = conv_bn(cin, hidden, 1, act=act) if hidden != cin else []
        layers += conv_bn(hidden, hidden, kernel, stride, hidden, act)
        layers += [se] if se is not None else []
        layers += conv_bn(hidden, cout, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)
