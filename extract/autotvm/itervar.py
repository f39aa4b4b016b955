"""AutoTVM's loop-context "itervar" features of lowered TIR (`vectors["itervar"]`, what
`itervar-xgb` reads), written from their definition (AutoTVM's touch extractor,
`get_itervar_feature_flatten`; AutoTVM is gone from TVM 0.27).

Walk the lowered PrimFunc (`extract.tir.graph.lower_for_features`: flat buffers, loops still
carrying their kind). Every loop variable — a `For`, or a `thread_extent` /
`virtual_thread` attribute binding a thread — is an *itervar*, numbered by its first
occurrence. For each itervar:

  length       its extent
  nest_level   number of enclosing itervars, itself included
  topdown      product of the extents from the outermost loop down to it
  bottomup     max over the buffers it touches of count × reuse (−1: touches none)
  annotation   one-hot of 11: blockIdx.x/y/z, threadIdx.x/y/z, unrolled, vectorized,
               parallel, serial, virtual thread
  add/mul/div  float additions (and subtractions), multiplications, divisions (and
               modulos) directly in its body (statements whose innermost loop it is)

and, for each memory access below it (each access is a buffer of its own, named
`<buffer>_<k>` with k counting the accesses of that buffer, sorted by name):

  stride        |coefficient| of the itervar in the access's flat index (0: the access
                does not move with it)
  mod           −1 (AutoTVM never set it)
  count         product of the extents of the loops at or below the itervar that move
                the access: distinct elements touched by one iteration of the loop above
  reuse         product of the extents of the loops at or below it that do not
  thread_count, thread_reuse   for a loop directly below a parallel level (a thread
                axis under a block axis, a plain loop under a thread or parallel axis):
                count and reuse relative to the inner loops' at that level boundary

Numbers are log2(1 + x) (−log2(1 − x) for negative x), as AutoTVM's `take_log=True`.

Flattening: AutoTVM concatenated the rows of all itervars, which is a fixed width only
within one task (same loop structure). To compare programs of different workloads
the rows are kept positional and padded: `MAX_ITERVARS` itervars, each with its first
`MAX_TOUCHED` accesses (zeros where a program has fewer; more are cut), followed by
the `pragma_auto_unroll_max_step` and `pragma_unroll_explicit` found in the program —
AutoTVM appended the config's non-split knobs (the unroll options) to these features.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from extract.tir.graph import linear_coefficients

ANNOTATIONS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "unrolled", "vectorized", "parallel", "serial", "vthread")
_ANN = {name: i for i, name in enumerate(ANNOTATIONS)}
_FOR_KIND = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled"}
MAX_ITERVARS = 32
MAX_TOUCHED = 12
LOOP_FIELDS = ("length", "nest_level", "topdown", "bottomup", *(f"ann_{a}" for a in ANNOTATIONS),
               "add_ct", "mul_ct", "div_ct")
TOUCH_FIELDS = ("stride", "mod", "count", "reuse", "thread_count", "thread_reuse")
ROW = len(LOOP_FIELDS) + MAX_TOUCHED * len(TOUCH_FIELDS)
EXTRA_NAMES = ("pragma_auto_unroll_max_step", "pragma_unroll_explicit")
ITERVAR_NAMES: Tuple[str, ...] = tuple(
    [f"iv{i}.{f}" for i in range(MAX_ITERVARS)
     for f in (*LOOP_FIELDS, *(f"touch{j}.{t}" for j in range(MAX_TOUCHED) for t in TOUCH_FIELDS))]
    + list(EXTRA_NAMES))
WIDTH = len(ITERVAR_NAMES)

_LOADS = ("BufferLoad", "TensorLoad")
_LEAVES = ("Var", "SizeVar", "IntImm", "FloatImm", "StringImm")


def _trans(x: float) -> float:
    return -math.log2(1.0 - x) if x < 0 else math.log2(1.0 + x)


@dataclass
class _Touch:
    stride: float = 0.0
    mod: float = -1.0
    count: float = 1.0
    reuse: float = 1.0
    thread_count: float = 0.0
    thread_reuse: float = 0.0


@dataclass
class _Itervar:
    length: float
    nest_level: int
    ann: int
    topdown: float
    order: int
    bottomup: float = -1.0
    add_ct: int = 0
    mul_ct: int = 0
    div_ct: int = 0
    touch: Dict[str, _Touch] = field(default_factory=dict)


def _parallel_level(ann: int) -> int:
    name = ANNOTATIONS[ann]
    if name.startswith("blockIdx"):
        return 2
    if name.startswith("threadIdx") or name == "parallel":
        return 1
    return 0


def _const(e) -> Optional[float]:
    return float(e.value) if type(e).__name__ in ("IntImm", "FloatImm") else None


def _expr_children(e) -> list:
    name = type(e).__name__
    if name in _LEAVES:
        return []
    if name in _LOADS:
        return list(e.indices)
    if name == "Call":
        return list(e.args)
    if name == "Select":
        return [e.condition, e.true_value, e.false_value]
    if name in ("Cast", "Broadcast"):
        return [e.value]
    if name == "Not":
        return [e.a]
    if name == "Ramp":
        return [e.base, e.stride]
    if name == "Let":
        return [e.value, e.body]
    if hasattr(e, "a") and hasattr(e, "b"):
        return [e.a, e.b]
    return []


def _is_float(e) -> bool:
    dtype = str(getattr(e, "dtype", None) or getattr(e, "ty", ""))
    return dtype.startswith(("float", "bfloat"))


def _load_buffer(load):
    buffer = getattr(load, "buffer", None)
    return buffer if buffer is not None else load.source


class _Extractor:
    def __init__(self) -> None:
        self.itervars: List[_Itervar] = []       # in order of first occurrence
        self.stack: List[_Itervar] = []
        self.topdown = 1.0
        self.buffer_counter: Dict[str, int] = {}
        self.unroll_max_step = 0.0
        self.unroll_explicit = 0.0
        self._vars: List[object] = []             # loop variables of `stack`

    # ------------------------------------------------------------ loops
    def loop(self, extent: float, ann: int, body) -> None:
        self.topdown *= extent
        iv = _Itervar(extent, len(self.stack) + 1, ann, self.topdown, len(self.itervars))
        self.itervars.append(iv)
        self.stack.append(iv)
        self.stmt(body)
        self.exit_loop()

    def exit_loop(self) -> None:
        iv = self.stack[-1]
        for key, touch in iv.touch.items():  # count and reuse of every enclosing loop (and itself)
            for outer in self.stack:
                pattern = outer.touch[key]
                if touch.stride != 0:
                    pattern.count *= iv.length
                else:
                    pattern.reuse *= iv.length
        self.stack.pop()
        if iv.length:
            self.topdown /= iv.length
        iv.bottomup = max((t.count * t.reuse for t in iv.touch.values()), default=-1.0)
        level = _parallel_level(iv.ann)
        if self.stack and _parallel_level(self.stack[-1].ann) == level + 1:
            # the boundary of a parallel level: its base goes to the loops of the level above
            for key, touch in iv.touch.items():
                for outer in self.stack:
                    if _parallel_level(outer.ann) == level + 1:
                        outer.touch[key].thread_reuse = -touch.reuse
                        outer.touch[key].thread_count = -touch.count
        for touch in iv.touch.values():
            if touch.thread_count < 0:
                touch.thread_count = touch.count / -touch.thread_count
                touch.thread_reuse = touch.reuse / -touch.thread_reuse

    # ------------------------------------------------------------ accesses, arithmetic
    def access(self, buffer, indices) -> None:
        name = str(buffer.name)
        key = f"{name}_{self.buffer_counter.get(name, 0)}"
        self.buffer_counter[name] = self.buffer_counter.get(name, 0) + 1
        coefficients: Dict[object, float] = {}
        for index in indices:
            for v, c in linear_coefficients(index).items():
                coefficients[v] = coefficients.get(v, 0.0) + abs(c)
        for iv, var in zip(self.stack, self._vars):
            iv.touch[key] = _Touch(stride=coefficients.get(var, 0.0))

    def expr(self, e) -> None:
        name = type(e).__name__
        if name in _LEAVES:
            return
        if name in _LOADS:
            self.access(_load_buffer(e), e.indices)
        elif self.stack and _is_float(e):
            iv = self.stack[-1]
            if name in ("Add", "Sub"):
                iv.add_ct += 1
            elif name == "Mul":
                iv.mul_ct += 1
            elif name in ("Div", "FloorDiv", "TruncDiv", "Mod", "FloorMod", "TruncMod"):
                iv.div_ct += 1
        for child in _expr_children(e):
            self.expr(child)

    def _pragmas(self, annotations: Dict[str, object]) -> None:
        """The unroll pragmas (loop annotations, or attributes of lowered code)."""
        for key in ("pragma_auto_unroll_max_step", "pragma_unroll_explicit"):
            value = annotations.get(key)
            if value is None:
                continue
            value = _const(value) if hasattr(value, "dtype") else float(int(value))
            if value is None:
                continue
            if key == "pragma_auto_unroll_max_step":
                self.unroll_max_step = max(self.unroll_max_step, value)
            else:
                self.unroll_explicit = max(self.unroll_explicit, value)

    # ------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        if s is None:
            return
        name = type(s).__name__
        if name == "SeqStmt":
            for c in s.seq:
                self.stmt(c)
        elif name == "For":
            kind = _FOR_KIND.get(int(s.kind))
            if kind is None:  # thread-bound loop
                tag = str(s.thread_binding.thread_tag) if s.thread_binding is not None else ""
                kind = "vthread" if "vthread" in tag else (tag if tag in _ANN else "serial")
            self._pragmas(dict(s.annotations))
            self._vars.append(s.loop_var)
            self.loop(_const(s.extent) or 1.0, _ANN[kind], s.body)
            self._vars.pop()
        elif name == "AttrStmt":
            key = str(s.attr_key)
            if key in ("thread_extent", "virtual_thread"):
                tag = str(s.node.thread_tag)
                ann = _ANN["vthread"] if key == "virtual_thread" or "vthread" in tag else _ANN.get(tag, _ANN["serial"])
                self._vars.append(s.node.var)
                self.loop(_const(s.value) or 1.0, ann, s.body)
                self._vars.pop()
                return
            self._pragmas({key: s.value})
            self.stmt(s.body)
        elif name == "BufferStore":
            self.access(s.buffer, s.indices)
            self.expr(s.value)
        elif name == "IfThenElse":
            self.expr(s.condition)
            self.stmt(s.then_case)
            self.stmt(s.else_case)
        elif name in ("LetStmt", "Bind"):
            self.expr(s.value)
            self.stmt(getattr(s, "body", None))
        elif name == "Evaluate":
            self.expr(s.value)
        else:  # Allocate, DeclBuffer, Assert, While, …: their bodies
            self.stmt(getattr(s, "body", None))

    def run(self, func) -> "_Extractor":
        self.stmt(func.body)
        return self


def itervar_rows(func) -> List[List[float]]:
    """Each itervar's row (`LOOP_FIELDS`, then `TOUCH_FIELDS` of each access it touches,
    sorted by name), log-transformed, unpadded: AutoTVM's flattened features, by itervar."""
    return _rows(_Extractor().run(func))


def itervar_vector(func) -> np.ndarray:
    """The fixed-width itervar features (`ITERVAR_NAMES`) of a lowered PrimFunc."""
    ext = _Extractor().run(func)
    out = np.zeros(WIDTH, dtype=np.float32)
    for i, row in enumerate(_rows(ext)[:MAX_ITERVARS]):
        row = row[:ROW]
        out[i * ROW:i * ROW + len(row)] = row
    out[-2:] = [_trans(ext.unroll_max_step), ext.unroll_explicit]
    return out


def _rows(ext: _Extractor) -> List[List[float]]:
    rows = []
    for iv in sorted(ext.itervars, key=lambda v: v.order):
        row = [_trans(iv.length), float(iv.nest_level), _trans(iv.topdown), _trans(iv.bottomup)]
        row += [1.0 if i == iv.ann else 0.0 for i in range(len(ANNOTATIONS))]
        row += [_trans(iv.add_ct), _trans(iv.mul_ct), _trans(iv.div_ct)]
        for key in sorted(iv.touch):
            t = iv.touch[key]
            row += [_trans(t.stride), _trans(t.mod), _trans(t.count), _trans(t.reuse),
                    _trans(t.thread_count), _trans(t.thread_reuse)]
        rows.append(row)
    return rows
