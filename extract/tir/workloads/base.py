"""The workload notion: what is computed, independently of how it is scheduled.

A `Workload` is one operator instance (kind, shapes, dtype). It has

* a stable, readable `key` (e.g. ``conv2d_1x64x56x56_64x3x3_s1_p1``) that names it in
  logs, sample groups and on the command line, and parses back (`parse_workload`);
* the unscheduled computation, `prim_func()` (a TVM PrimFunc: what a schedule, a
  template or MetaSchedule transforms);
* where measuring needs it, the shapes of its inputs (`inputs()`) and a NumPy reference
  (`reference(*inputs)`) that `extract.measure` checks every built program against.

A new operator kind is one subclass, registered with `@register_workload`; its key
prefix (`kind`) is how `parse_workload` dispatches a spec to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np

@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one argument of a workload's PrimFunc."""

    shape: Tuple[int, ...]
    dtype: str = "float32"

class Workload:
    """Base class of the workload kinds (see module docstring). Subclasses are frozen
    dataclasses (hashable: caches and job sets key on them) and fill in the methods."""

    kind: ClassVar[str] = ""           # key prefix, e.g. "conv2d"
    spec_help: ClassVar[str] = ""      # how a spec of this kind reads, for error messages

    @property
    def key(self) -> str:
        """A readable, unique, stable name that `from_spec` parses back."""
        raise NotImplementedError

    @classmethod
    def from_spec(cls, spec: str) -> Optional["Workload"]:
        """The workload a spec names (with or without the ``<kind>_`` prefix), or None
        when the spec is not of this kind."""
        raise NotImplementedError

    def prim_func(self):
        """The unscheduled computation as a `tvm.tirx.PrimFunc`."""
        raise NotImplementedError

    def inputs(self) -> List[TensorSpec]:
        """The PrimFunc's input arguments, in order (its outputs follow them)."""
        raise NotImplementedError(f"workload kind {self.kind!r} has no inputs for measuring")

    def reference(self, *inputs: np.ndarray) -> Sequence[np.ndarray]:
        """The expected outputs (NumPy), in argument order, for the given inputs."""
        raise NotImplementedError(f"workload kind {self.kind!r} has no reference implementation")

    @property
    def measurable(self) -> bool:
        """Whether `inputs` and `reference` are implemented (measuring checks outputs)."""
        return type(self).reference is not Workload.reference

W = TypeVar("W", bound=Workload)
WORKLOAD_KINDS: Dict[str, Type[Workload]] = {}
# named workloads (e.g. ResNet-18's C1…C12) and named sets of them (e.g. "resnet18")
NAMED: Dict[str, Workload] = {}
NAMED_SETS: Dict[str, Dict[str, Workload]] = {}
_NAME_OF: Dict[Workload, str] = {}

def register_workload(cls: Type[W]) -> Type[W]:
    """Class decorator: make a workload kind known to `parse_workload`."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__}: a workload kind needs a `kind`")
    if WORKLOAD_KINDS.get(cls.kind, cls) is not cls:
        raise ValueError(f"workload kind {cls.kind!r} registered twice")
    WORKLOAD_KINDS[cls.kind] = cls
    return cls

def register_named(set_name: str, workloads: Dict[str, Workload]) -> None:
    """Short names for workloads (`C2`), and a name for the set (`resnet18`)."""
    for name, wl in workloads.items():
        if NAMED.get(name, wl) != wl:
            raise ValueError(f"workload name {name!r} registered twice")
        NAMED[name] = wl
        _NAME_OF.setdefault(wl, name)
    NAMED_SETS[set_name] = dict(workloads)

def workload_name(wl: Workload) -> str:
    """The short name of a named workload (C1…C12), else its key."""
    return _NAME_OF.get(wl, wl.key)

def parse_workload(spec: str) -> Workload:
    """A workload from a name (`C2`) or a key of any registered kind
    (`conv2d_1x64x56x56_64x3x3_s1_p1`; a kind may also accept its key unprefixed)."""
    if spec in NAMED:
        return NAMED[spec]
    kinds: List[Type[Workload]] = [k for name, k in WORKLOAD_KINDS.items() if spec.startswith(name + "_")]
    kinds += [k for k in WORKLOAD_KINDS.values() if k not in kinds]
    for kind in kinds:
        try:
            wl = kind.from_spec(spec)
        except ValueError as e:  # the spec's form, but not a workload (e.g. stride 0)
            raise ValueError(f"workload {spec!r}: {e}") from None
        if wl is not None:
            return wl
    names = "…".join([next(iter(NAMED)), list(NAMED)[-1]]) if NAMED else ""
    forms = "; ".join(k.spec_help for k in WORKLOAD_KINDS.values() if k.spec_help)
    raise ValueError(f"unknown workload {spec!r}: give {names + ' or ' if names else ''}{forms}")

def parse_workloads(specs: Sequence[str]) -> Dict[str, Workload]:
    """{name: workload} of specs; one spec may name a set (`resnet18`)."""
    if len(specs) == 1 and specs[0] in NAMED_SETS:
        return dict(NAMED_SETS[specs[0]])
    return {workload_name(parse_workload(s)): parse_workload(s) for s in specs}
