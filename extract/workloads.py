"""Named conv2d workloads: ResNet-18's twelve distinct convolutions (NCHW, batch 1)."""
from __future__ import annotations

import re
from typing import Dict, List

from .templates import Conv2dWorkload

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
_ALIASES = {wl.key: name for name, wl in RESNET18.items()}

_SPEC = re.compile(r"^(?:conv2d_)?(\d+)x(\d+)x(\d+)x(\d+)_(\d+)x(\d+)x(\d+)_s(\d+)_p(\d+)$")


def workload_name(wl: Conv2dWorkload) -> str:
    """The short name of a known workload (C1…C12), else its key."""
    return _ALIASES.get(wl.key, wl.key)


def parse_workload(spec: str) -> Conv2dWorkload:
    """`C2`, or a key such as `conv2d_1x64x56x56_64x3x3_s1_p1` (N×C×H×W_O×KH×KW_sS_pP)."""
    if spec in RESNET18:
        return RESNET18[spec]
    m = _SPEC.match(spec)
    if not m:
        raise ValueError(f"unknown workload {spec!r}: give C1…C12 or N×C×H×W_O×KH×KW_sS_pP, "
                         f"e.g. 1x64x56x56_64x3x3_s1_p1")
    return Conv2dWorkload(*(int(g) for g in m.groups()))


def parse_workloads(specs: List[str]) -> Dict[str, Conv2dWorkload]:
    if specs == ["resnet18"]:
        return dict(RESNET18)
    return {workload_name(parse_workload(s)): parse_workload(s) for s in specs}
