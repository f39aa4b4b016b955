"""The template interface and its registry.

A template is a schedule family for one operator: it names the AutoTVM tasks it answers
to, turns a task's arguments into a `Conv2dWorkload`, defines the knob space for a
workload, and applies one config as a `tvm.s_tir.Schedule`. Register a new one with
`@register_template` and every CLI (measure, tvm_log, simulator --data) knows it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from ..space import Config, ConfigSpace


@dataclass(frozen=True)
class Conv2dWorkload:
    """A 2-D convolution, NCHW data and OIHW kernel, symmetric padding, no dilation."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int
    padding: int

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


class Template:
    """Schedule family for one operator; subclasses fill in the four methods."""

    name: str = ""
    task_names: Tuple[str, ...] = ()  # AutoTVM task names this template reads
    target_kind: str = "llvm"

    def parse_task_args(self, args: Sequence[Any]) -> Conv2dWorkload:
        raise NotImplementedError

    def task_args(self, workload: Conv2dWorkload) -> List[Any]:
        raise NotImplementedError

    def space(self, workload: Conv2dWorkload) -> ConfigSpace:
        raise NotImplementedError

    def default_values(self, workload: Conv2dWorkload) -> Dict[str, Any]:
        """Values for knobs an older log may lack (AutoTVM's fixed choice)."""
        return {}

    def schedule(self, workload: Conv2dWorkload, config: Config):
        """Return a `tvm.s_tir.Schedule` with the config applied."""
        raise NotImplementedError

    def make_target(self):
        raise NotImplementedError


class Unchecked:
    """A view of a `tvm.s_tir.Schedule` whose primitives skip TVM's per-call Python type
    checks (`_type_checker.type_checked`), ~40% of the time to apply a config. Templates
    pass arguments they built themselves, and the C++ primitives still validate them."""

    def __init__(self, sch) -> None:
        self._sch = sch

    def __getattr__(self, name: str):
        raw = getattr(getattr(type(self._sch), name, None), "__wrapped__", None)
        return functools.partial(raw, self._sch) if raw is not None else getattr(self._sch, name)


TEMPLATES: Dict[str, Template] = {}


def register_template(cls):
    template = cls()
    for task_name in (template.name,) + tuple(template.task_names):
        if task_name in TEMPLATES:
            raise ValueError(f"task name {task_name!r} registered twice")
        TEMPLATES[task_name] = template
    return cls


class UnknownTemplateError(KeyError):
    def __str__(self) -> str:
        known = ", ".join(sorted(TEMPLATES))
        return f"no template for AutoTVM task {self.args[0]!r} (known: {known})"


def get_template(task_name: str) -> Template:
    try:
        return TEMPLATES[task_name]
    except KeyError:
        raise UnknownTemplateError(task_name) from None
