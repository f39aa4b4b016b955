"""The template interface and its registry.

A template is a schedule family for one workload kind (`workload_type`, see
`extract.tir.workloads`): it names the AutoTVM tasks it answers to, turns a task's
arguments into a workload, defines the knob space for a workload, and applies one
config as a `tvm.s_tir.Schedule`. Templates are one producer of schedules among others
(`extract.schedules.sample_from_schedule` takes a schedule from anywhere). Register a
new one with `@register_template` (one file here plus its import in `__init__.py`) and
every CLI (measure, tvm_log, simulator --data) knows it.
"""
from __future__ import annotations

import functools
from typing import Any, ClassVar, Dict, Generic, List, Sequence, Tuple, Type, TypeVar

from extract.autotvm.space import Config, ConfigSpace
from extract.tir.workloads import Workload

W = TypeVar("W", bound=Workload)


class Template(Generic[W]):
    """Schedule family for one workload kind; subclasses fill in the methods."""

    name: str = ""
    task_names: Tuple[str, ...] = ()  # AutoTVM task names this template reads
    target_kind: str = "llvm"
    workload_type: ClassVar[Type[Workload]] = Workload  # the kind it schedules

    def check_workload(self, workload: Workload) -> W:
        """The workload, if it is of the kind this template schedules; else TypeError."""
        if not isinstance(workload, self.workload_type):
            raise TypeError(f"template {self.name!r} schedules {self.workload_type.kind} workloads, "
                            f"not {getattr(workload, 'key', workload)!r}")
        return workload  # type: ignore[return-value]

    def parse_task_args(self, args: Sequence[Any]) -> W:
        raise NotImplementedError

    def task_args(self, workload: W) -> List[Any]:
        raise NotImplementedError

    def space(self, workload: W) -> ConfigSpace:
        raise NotImplementedError

    def default_values(self, workload: W) -> Dict[str, Any]:
        """Values for knobs an older log may lack (AutoTVM's fixed choice)."""
        return {}

    def schedule(self, workload: W, config: Config):
        """Return a `tvm.s_tir.Schedule` with the config applied."""
        raise NotImplementedError

    def make_target(self, num_cores: int = 1):
        """The `tvm.target.Target` configs are built for (`num_cores`: runtime threads)."""
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
