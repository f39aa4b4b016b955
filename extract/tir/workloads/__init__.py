"""Workloads: what is computed (see `base.Workload`), by kind, and named ones.

    parse_workload("C2") == parse_workload("1x64x56x56_64x3x3_s1_p1")
        == parse_workload("conv2d_1x64x56x56_64x3x3_s1_p1") == RESNET18["C2"]

A new operator kind is one new module here defining a `Workload` subclass registered
with `@register_workload`, plus its import line below.
"""
from .base import (
    NAMED, NAMED_SETS, WORKLOAD_KINDS, TensorSpec, Workload, parse_workload, parse_workloads, register_named,
    register_workload, workload_name,
)
from .conv2d import RESNET18, Conv2dWorkload  # registers the conv2d kind and ResNet-18's names
from .matmul import BatchMatmulWorkload, DenseWorkload  # registers dense and batch_matmul

__all__ = ["NAMED", "NAMED_SETS", "RESNET18", "WORKLOAD_KINDS", "BatchMatmulWorkload", "Conv2dWorkload",
           "DenseWorkload", "TensorSpec",
           "Workload", "parse_workload", "parse_workloads", "register_named", "register_workload",
           "workload_name"]
