"""AutoTVM's "knob" features: the config's knob values and the workload's shape, one
fixed-width vector per config (`vectors["knob"]`, what `knob-xgb` reads). Two producers:
AutoTVM-style templates (`knob_vector`, below) and MetaSchedule traces (`trace_knobs`, at
the end of this module).

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

**MetaSchedule traces** (`trace_knobs`, for every record of a MetaSchedule database,
`extract.metaschedule.database.TraceJob`): MetaSchedule has no knobs; what it samples are the
*decisions* of its trace, and they are the analogue. In trace order, every decision's
values, one column each:

  SamplePerfectTile / SamplePartitionedTile   log2 of every tile factor
  SampleCategorical                           log2(1 + the chosen candidate's value)
                                              (the unroll step: 0, 16, 64, 512 → 0 … 9)
  SampleComputeLocation                       log2(3 + location): inlined (−2) → 0,
                                              root (−1) → 1, loop i → log2(3 + i)
  any other decision                          sign · log2(1 + |value|) of each integer

padded with zeros to `DECISION_WIDTH` columns; then the workload's shape, log2(1 + d) of
every dimension of every argument in argument order (from the workload key,
`extract.tir.workload_key`), padded to `SHAPE_WIDTH`; then log2 of the workload's FLOPs (0
when unknown). Values beyond a width are cut, and the cut is counted, never silent
(`TraceKnobs.cut`, kept as the sample's `meta.extra["knob_cut"]`; `count_trace_cuts` counts a
database's). On datasets/networks_rocketlake a trace has at most 24 decision values and a
workload 20 argument dimensions: nothing is cut there.

Column i means different things across design spaces: the 5th decision value is a tile
factor of the channel loop for one conv2d sketch, of a batch loop for batch_matmul, and
the unroll step for a softmax. Within one sketch of one workload the columns line up (as
a template's knobs do); across sketches, and across operator kinds, they do not. That is
why knob features cannot transfer across operator kinds, and `knob-xgb` on the
leave-one-operator-kind-out split (`benchmarks.networks`) shows it.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.sample import SampleMeta
from extract.tir.workloads import Workload, parse_workload
from .space import SplitKnob
from .templates import get_template

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
    `Config.values` and a sample's `meta.config` hold them)."""
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


def knob_vector_of_meta(meta: SampleMeta) -> Optional[np.ndarray]:
    """`knob_vector` from a sample's meta (template, workload key, config); None when the
    meta does not name all three (a MetaSchedule record, a user's schedule)."""
    if meta.template is None or meta.workload is None or meta.config is None:
        return None
    return knob_vector(meta.template, parse_workload(meta.workload), meta.config)


def knob_matrix(metas: Sequence[SampleMeta]) -> np.ndarray:
    """`knob_vector_of_meta` of many samples, stacked (all must have knobs)."""
    rows = [knob_vector_of_meta(m) for m in metas]
    if any(r is None for r in rows):
        raise ValueError("knob features need each sample's template, workload and config in its meta")
    return np.stack(rows)  # type: ignore[arg-type]


# ---------------------------------------------------------------- MetaSchedule traces
DECISION_WIDTH = 32     # decision values kept per trace (networks_rocketlake: at most 24)
SHAPE_WIDTH = 24        # workload argument dimensions kept (networks_rocketlake: at most 20)
TRACE_KNOB_VERSION = 1  # the layout below; part of the extraction cache key of databases
TILE_INSTS = ("SamplePerfectTile", "SamplePartitionedTile")


@dataclasses.dataclass(frozen=True)
class TraceKnobs:
    """The knob vector of one MetaSchedule trace (`trace_knob_names` columns) and how many
    values did not fit (decision values beyond `DECISION_WIDTH` plus argument dimensions
    beyond `SHAPE_WIDTH`)."""

    vector: np.ndarray
    cut: int


def _decision_items(trace: Any) -> List[Tuple[str, Any, Any]]:
    """(instruction kind, its attributes, its decision) of every decision of a trace, in
    trace order; `trace`: its JSON ([instructions, decisions]) or JSON text, a
    `tvm.s_tir.schedule.Trace` or a Schedule (its trace)."""
    if isinstance(trace, str):
        trace = json.loads(trace)
    if isinstance(trace, (list, tuple)):
        insts, decisions = trace[0], trace[1]
        return [(str(insts[i][0]), insts[i][2] if len(insts[i]) > 2 else None, d)
                for i, d in sorted(((int(i), d) for i, d in decisions), key=lambda x: x[0])]
    trace = getattr(trace, "trace", trace)
    out = []
    for inst in trace.insts:
        if inst in trace.decisions:
            attrs = [[_number(v) for v in a] if hasattr(a, "__len__") and not isinstance(a, str) else a
                     for a in inst.attrs]
            decision = trace.decisions[inst]
            out.append((inst.kind.name, attrs, [int(v) for v in decision] if hasattr(decision, "__len__")
                        else int(decision)))
    return out


def _number(v: Any) -> Any:
    value = getattr(v, "value", v)
    return value if isinstance(value, (int, float)) else str(value)


def _ints(decision: Any) -> List[int]:
    return [int(v) for v in decision] if isinstance(decision, (list, tuple)) else [int(decision)]


def _signed_log2_1p(v: float) -> float:
    return math.copysign(_log2_1p(v), v)


def _decision_values(kind: str, attrs: Any, decision: Any) -> List[float]:
    ints = _ints(decision)
    if kind in TILE_INSTS:
        return [math.log2(max(v, 1)) for v in ints]
    if kind == "SampleCategorical":
        try:
            return [_log2_1p(float(attrs[0][ints[0]]))]
        except (TypeError, ValueError, IndexError, KeyError):
            return [_log2_1p(ints[0])]   # candidates not plain numbers: the index chosen
    if kind == "SampleComputeLocation":
        return [math.log2(3 + max(ints[0], -2))]
    return [_signed_log2_1p(v) for v in ints]


def trace_decisions(trace: Any) -> List[float]:
    """Every decision value of a trace, in trace order (see the module docstring for the
    transform of each kind); `trace`: its JSON text, JSON, a Trace or a Schedule."""
    out: List[float] = []
    for kind, attrs, decision in _decision_items(trace):
        out += _decision_values(kind, attrs, decision)
    return out


def _fit(values: Sequence[float], width: int) -> Tuple[List[float], int]:
    kept = list(values[:width])
    return kept + [0.0] * (width - len(kept)), max(0, len(values) - width)


def trace_knobs(trace: Any, workload_key: str, flops: Optional[float] = None,
                decision_width: int = DECISION_WIDTH, shape_width: int = SHAPE_WIDTH) -> TraceKnobs:
    """The knob vector of a MetaSchedule trace of the workload `workload_key`
    (`extract.tir.workload_key.workload_key`, a MetaSchedule sample's group): decisions,
    argument shapes, log2 FLOPs (module docstring)."""
    from extract.tir.workload_key import parse_workload_key

    decisions, cut_d = _fit(trace_decisions(trace), decision_width)
    dims = [_log2_1p(d) for shape in parse_workload_key(workload_key).shapes for d in shape]
    shape, cut_s = _fit(dims, shape_width)
    tail = [math.log2(flops) if flops and flops > 0 else 0.0]
    return TraceKnobs(np.asarray(decisions + shape + tail, dtype=np.float32), cut_d + cut_s)


def trace_knob_names(decision_width: int = DECISION_WIDTH, shape_width: int = SHAPE_WIDTH) -> Tuple[str, ...]:
    """Column names of `trace_knobs` vectors."""
    return (tuple(f"decision[{i}]" for i in range(decision_width))
            + tuple(f"workload_dim[{i}]" for i in range(shape_width)) + ("workload_flops",))


def count_trace_cuts(record_lines: Any, decision_width: int = DECISION_WIDTH) -> Dict[str, int]:
    """How many traces of a MetaSchedule database's record lines (its
    `database_tuning_record.json` lines, text) have decision values cut, and how many values
    (shapes are counted per workload by `trace_knobs`): {"records", "cut_records",
    "cut_values", "max_values"}."""
    out = {"records": 0, "cut_records": 0, "cut_values": 0, "max_values": 0}
    for line in record_lines:
        if not line.strip() or not line.endswith("\n"):  # blank, or cut off by a writer appending
            continue
        n = len(trace_decisions(json.loads(line)[1][0]))
        out["records"] += 1
        out["max_values"] = max(out["max_values"], n)
        if n > decision_width:
            out["cut_records"] += 1
            out["cut_values"] += n - decision_width
    return out
