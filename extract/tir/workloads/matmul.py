"""Dense and batch-matmul workloads (float32), named as `simulator.tune` takes them.

    dense_128x768x3072         data 128×768 · weight 3072×768 → 128×3072 (M×K×N; TOPI's
                               dense layout: the weight is N×K, as a Linear layer's)
    batch_matmul_12x128x64x128 x 12×128×64 · y 12×128×64 → 12×128×128 (B×M×K×N; y is
                               B×N×K, TOPI's `transpose_b` default)

The prefix is required (an unprefixed `128x768x3072` is not taken for a dense).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar, List, Optional

import numpy as np

from .base import TensorSpec, Workload, register_workload

MAX_ELEMENTS = 2**31 - 1


def _check(kind: str, values: dict, shapes: dict) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{kind} {name} {value!r} is not an integer ≥ 1")
    for what, shape in shapes.items():
        if math.prod(shape) > MAX_ELEMENTS:
            raise ValueError(f"{kind} {what} of shape {'x'.join(map(str, shape))} has more than 2^31 - 1 elements")


@register_workload
@dataclass(frozen=True)
class DenseWorkload(Workload):
    """out[m, n] = Σ_k data[m, k] · weight[n, k]  (`topi.nn.dense`), float32."""

    kind = "dense"
    spec_help = "dense_M×K×N, e.g. dense_128x768x3072"
    _SPEC: ClassVar = re.compile(r"^dense_(\d+)x(\d+)x(\d+)$")

    m: int
    k: int
    n: int

    def __post_init__(self) -> None:
        _check("dense", vars(self), {"data": (self.m, self.k), "weight": (self.n, self.k),
                                     "output": (self.m, self.n)})

    @property
    def key(self) -> str:
        return f"dense_{self.m}x{self.k}x{self.n}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n

    @classmethod
    def from_spec(cls, spec: str) -> Optional["DenseWorkload"]:
        match = cls._SPEC.match(spec)
        return cls(*(int(g) for g in match.groups())) if match else None

    def prim_func(self):
        from tvm import te, topi

        data = te.placeholder((self.m, self.k), name="data")
        weight = te.placeholder((self.n, self.k), name="weight")
        return te.create_prim_func([data, weight, topi.nn.dense(data, weight, out_dtype="float32")])

    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec((self.m, self.k)), TensorSpec((self.n, self.k))]

    def reference(self, data: np.ndarray, weight: np.ndarray) -> List[np.ndarray]:
        return [(data @ weight.T).astype("float32")]


@register_workload
@dataclass(frozen=True)
class BatchMatmulWorkload(Workload):
    """out[b, m, n] = Σ_k x[b, m, k] · y[b, n, k]  (`topi.nn.batch_matmul`), float32."""

    kind = "batch_matmul"
    spec_help = "batch_matmul_B×M×K×N, e.g. batch_matmul_12x128x64x128"
    _SPEC: ClassVar = re.compile(r"^batch_matmul_(\d+)x(\d+)x(\d+)x(\d+)$")

    b: int
    m: int
    k: int
    n: int

    def __post_init__(self) -> None:
        _check("batch_matmul", vars(self), {"x": (self.b, self.m, self.k), "y": (self.b, self.n, self.k),
                                            "output": (self.b, self.m, self.n)})

    @property
    def key(self) -> str:
        return f"batch_matmul_{self.b}x{self.m}x{self.k}x{self.n}"

    @property
    def flops(self) -> int:
        return 2 * self.b * self.m * self.k * self.n

    @classmethod
    def from_spec(cls, spec: str) -> Optional["BatchMatmulWorkload"]:
        match = cls._SPEC.match(spec)
        return cls(*(int(g) for g in match.groups())) if match else None

    def prim_func(self):
        from tvm import te, topi

        x = te.placeholder((self.b, self.m, self.k), name="x")
        y = te.placeholder((self.b, self.n, self.k), name="y")
        return te.create_prim_func([x, y, topi.nn.batch_matmul(x, y, out_dtype="float32")])

    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec((self.b, self.m, self.k)), TensorSpec((self.b, self.n, self.k))]

    def reference(self, x: np.ndarray, y: np.ndarray) -> List[np.ndarray]:
        return [np.einsum("bmk,bnk->bmn", x, y).astype("float32")]
