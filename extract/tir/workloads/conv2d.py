"""2-D convolution workloads (NCHW data, OIHW kernel) and ResNet-18's twelve of them."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional

import numpy as np

from .base import TensorSpec, Workload, register_named, register_workload

_SPEC = re.compile(r"^(?:conv2d_)?(\d+)x(\d+)x(\d+)x(\d+)_(\d+)x(\d+)x(\d+)_s(\d+)_p(\d+)$")


@register_workload
@dataclass(frozen=True)
class Conv2dWorkload(Workload):
    """A 2-D convolution, NCHW data and OIHW kernel, symmetric padding, no dilation, float32."""

    kind = "conv2d"
    spec_help = "N×C×H×W_O×KH×KW_sS_pP, e.g. 1x64x56x56_64x3x3_s1_p1"

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int
    padding: int

    # int32 indexing: a tensor of more elements than this would overflow TVM's indices
    MAX_ELEMENTS: ClassVar[int] = 2**31 - 1

    def __post_init__(self) -> None:
        """Refuse shapes no convolution has (a clear ValueError here, not a
        ZeroDivisionError or a TVM InternalError when it is scheduled)."""
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"conv2d {name} {value!r} is not an integer")
            if value < (0 if name == "padding" else 1):
                raise ValueError(f"conv2d {name} {value} is not {'≥ 0' if name == 'padding' else '≥ 1'}")
        if self.height + 2 * self.padding < self.kernel_h or self.width + 2 * self.padding < self.kernel_w:
            raise ValueError(f"conv2d kernel {self.kernel_h}x{self.kernel_w} is larger than the padded "
                             f"input {self.height + 2 * self.padding}x{self.width + 2 * self.padding}")
        for what, shape in (("data", (self.batch, self.in_channels, self.height, self.width)),
                            ("kernel", (self.out_channels, self.in_channels, self.kernel_h, self.kernel_w)),
                            ("output", (self.batch, self.out_channels, self.out_height, self.out_width))):
            if math.prod(shape) > self.MAX_ELEMENTS:
                raise ValueError(f"conv2d {what} of shape {'x'.join(map(str, shape))} has more than "
                                 f"2^31 - 1 elements")

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.padding - self.kernel_h) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.padding - self.kernel_w) // self.stride + 1

    @property
    def flops(self) -> int:
        return (2 * self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels * self.kernel_h * self.kernel_w)

    @property
    def key(self) -> str:
        """A readable, unique name, e.g. ``conv2d_1x64x56x56_64x3x3_s1_p1``."""
        return (f"conv2d_{self.batch}x{self.in_channels}x{self.height}x{self.width}"
                f"_{self.out_channels}x{self.kernel_h}x{self.kernel_w}_s{self.stride}_p{self.padding}")

    @classmethod
    def from_spec(cls, spec: str) -> Optional["Conv2dWorkload"]:
        m = _SPEC.match(spec)
        return cls(*(int(g) for g in m.groups())) if m else None

    def prim_func(self):
        """`topi.nn.conv2d_nchw`: a `pad_temp` stage, then the reduction."""
        from tvm import te, topi

        data = te.placeholder((self.batch, self.in_channels, self.height, self.width), name="data")
        kernel = te.placeholder((self.out_channels, self.in_channels, self.kernel_h, self.kernel_w),
                                name="kernel")
        conv = topi.nn.conv2d_nchw(data, kernel, self.stride, self.padding, dilation=1,
                                   out_dtype="float32")
        return te.create_prim_func([data, kernel, conv])

    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec((self.batch, self.in_channels, self.height, self.width)),
                TensorSpec((self.out_channels, self.in_channels, self.kernel_h, self.kernel_w))]

    def reference(self, data: np.ndarray, kernel: np.ndarray) -> List[np.ndarray]:
        p, s = self.padding, self.stride
        padded = np.pad(data, ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (self.kernel_h, self.kernel_w), axis=(2, 3))
        windows = windows[:, :, ::s, ::s]  # n, c, oh, ow, kh, kw
        return [np.einsum("ncyxhw,ochw->noyx", windows, kernel, optimize=True).astype("float32")]


# name: (in_channels, size, out_channels, kernel, stride, padding)
_RESNET18 = {
    "C1": (3, 224, 64, 7, 2, 3),
    "C2": (64, 56, 64, 3, 1, 1),
    "C3": (64, 56, 64, 1, 1, 0),
    "C4": (64, 56, 128, 3, 2, 1),
    "C5": (64, 56, 128, 1, 2, 0),
    "C6": (128, 28, 128, 3, 1, 1),
    "C7": (128, 28, 256, 3, 2, 1),
    "C8": (128, 28, 256, 1, 2, 0),
    "C9": (256, 14, 256, 3, 1, 1),
    "C10": (256, 14, 512, 3, 2, 1),
    "C11": (256, 14, 512, 1, 2, 0),
    "C12": (512, 7, 512, 3, 1, 1),
}
RESNET18: Dict[str, Conv2dWorkload] = {
    name: Conv2dWorkload(1, ci, hw, hw, co, k, k, s, p)
    for name, (ci, hw, co, k, s, p) in _RESNET18.items()
}
register_named("resnet18", RESNET18)
