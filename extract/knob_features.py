"""AutoTVM's "knob" features: the config's knob values and the workload's shape, one
fixed-width vector per config of a template (`vectors["knob"]`, what `knob-xgb` reads).

AutoTVM's XGBoost tuner with `feature_type="knob"` fed the config's flattened knob
values to XGBoost and nothing else. Here, for a template's knobs in its space's order:

  split knob  (AutoTVM `define_split`)  log2 of every factor, the implied outer one
                                         filled in (`SplitKnob.sizes`): [-1, 8] of 64 → 3, 3
  option knob (AutoTVM `define_knob`)   log2(1 + value) (booleans as 0 / 1)

then the workload's shape: log2(1 + x) of every integer field of the workload (conv2d:
batch, in_channels, height, width, out_channels, kernel_h, kernel_w, stride, padding)
and log2 of its FLOPs where it has them. A knob a workload's space lacks (conv2d x86:
`unroll_kw` for 1×1 kernels) is 0. The layout is fixed per template (`knob_names`),
taken from the space of a probe workload of the template's kind that has every knob,
so that vectors of different workloads line up column by column; a kind without a probe
(an operator added later) takes its layout from the workload's own space.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .space import SplitKnob
from .templates import get_template
from .workloads import Workload, parse_workload

# a workload of each kind whose spaces hold every knob a template of that kind defines
PROBES: Dict[str, str] = {"conv2d": "conv2d_1x64x56x56_64x3x3_s1_p1"}


def _log2_1p(x: float) -> float:
    return math.log2(1.0 + abs(float(x)))


def _layout(template_name: str, workload: Workload) -> Tuple[Tuple[str, str, int], ...]:
    """(knob name, "sp"/"ot", columns) of a template, in its space's order: the space of
    the probe workload of `workload`'s kind, else of `workload` itself."""
    probe = PROBES.get(workload.kind)
    return _layout_of(template_name, parse_workload(probe) if probe else workload)


@functools.lru_cache(maxsize=None)
def _layout_of(template_name: str, workload: Workload) -> Tuple[Tuple[str, str, int], ...]:
    template = get_template(template_name)
    space = template.space(template.check_workload(workload))
    return tuple((k.name, k.kind, len(k.options[0]) if isinstance(k, SplitKnob) else 1) for k in space.knobs)


def _shape_fields(workload: Workload) -> List[Tuple[str, float]]:
    out = [(f.name, _log2_1p(getattr(workload, f.name))) for f in dataclasses.fields(workload)
           if isinstance(getattr(workload, f.name), (int, float))]
    flops = getattr(workload, "flops", None)
    if flops:
        out.append(("flops", math.log2(float(flops))))
    return out


def knob_names(template_name: str, workload: Workload) -> Tuple[str, ...]:
    """Column names of `knob_vector` for a template and a workload of its kind."""
    names: List[str] = []
    for name, kind, width in _layout(get_template(template_name).name, workload):
        names += [f"{name}[{i}]" for i in range(width)] if kind == "sp" else [name]
    return tuple(names) + tuple(f"workload_{n}" for n, _ in _shape_fields(workload))


def knob_vector(template_name: str, workload: Workload, values: Dict[str, Any]) -> np.ndarray:
    """The knob features (`knob_names`) of one config (`values`: knob name → value, as
    `Config.values` and a sample's `meta["config"]` hold them)."""
    template = get_template(template_name)
    space = template.space(template.check_workload(workload))
    row: List[float] = []
    for name, kind, width in _layout(template.name, workload):
        knob = space.by_name.get(name)
        if name not in values or knob is None:
            row += [0.0] * width
        elif kind == "sp":
            row += [math.log2(f) for f in knob.sizes(list(values[name]))]  # type: ignore[attr-defined]
        else:
            row.append(_log2_1p(float(values[name])))
    row += [v for _, v in _shape_fields(workload)]
    return np.asarray(row, dtype=np.float32)


def knob_vector_of_meta(meta: Dict[str, Any]) -> Optional[np.ndarray]:
    """`knob_vector` from a sample's meta (template, workload key, config); None when the
    meta does not name all three (a MetaSchedule record, a user's schedule)."""
    if not all(k in meta for k in ("template", "workload", "config")):
        return None
    return knob_vector(meta["template"], parse_workload(meta["workload"]), meta["config"])


def knob_matrix(metas: Sequence[Dict[str, Any]]) -> np.ndarray:
    """`knob_vector_of_meta` of many samples, stacked (all must have knobs)."""
    rows = [knob_vector_of_meta(m) for m in metas]
    if any(r is None for r in rows):
        raise ValueError("knob features need each sample's template, workload and config in its meta")
    return np.stack(rows)  # type: ignore[arg-type]
