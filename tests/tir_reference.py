"""The test oracle of the TIR walk: `tir_to_graph_reference`, what `extract.tir.graph.tir_to_graph`
must give for a lowered PrimFunc, bit for bit (`tests/test_featurize.py` compares the two).

A plain walk of the AST, written for clarity: it reads TVM objects as often as it needs
them (an index once for its coefficients and again for its nodes, a value subtree at each
level of it), which the product's walk avoids (see its section comment). It shares the
product's vocabulary, columns, dtype and buffer helpers and context features
(`extract.tir.context`), and computes every float by the same operations in the same
order.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from extract.tir.context import Records
from extract.tir.graph import (
    _EXPR_TYPES, _FOR_KIND, _LEAVES, BASE_FEATURE_NAMES, COLUMN, CURVE_POINTS, LOOP_KINDS, TYPE_ID, UNK,
    TirGraph, _buffer_bytes, _children, _const, _dtype_info, _log, _scope, _with_context,
    linear_coefficients,
)
from extract.tir.hardware import Hardware


@dataclass
class _Loop:
    var: object
    extent: int
    node: int = -1   # its node in the graph


def _dtype(e) -> str:
    """An expression's dtype string (TVM 0.27 calls it `ty`, older releases `dtype`)."""
    return str(getattr(e, "dtype", None) or e.ty)


def _load_buffer(load):
    """The buffer a load reads (TVM 0.27's TensorLoad calls it `source`)."""
    buffer = getattr(load, "buffer", None)
    return buffer if buffer is not None else load.source


class _Builder:
    def __init__(self) -> None:
        self.types: List[int] = []
        self.rows: List[np.ndarray] = []
        self.edges: List[Tuple[int, int]] = []
        self.unknown: Counter = Counter()
        self.curves: List[Tuple[bool, np.ndarray]] = []  # (is_store, sampled curve)
        self.loop_counts: Counter = Counter()
        self.total_trips = 0.0
        self.records = Records()  # for the context columns (extract.tir.context)

    def add(self, kind: str, parent: Optional[int], loops: List[_Loop]) -> Tuple[int, np.ndarray]:
        node = len(self.types)
        type_id = TYPE_ID.get(kind, UNK)
        if type_id == UNK:
            self.unknown[kind] += 1
        self.types.append(type_id)
        row = np.zeros(len(BASE_FEATURE_NAMES), dtype=np.float32)
        row[COLUMN["depth"]] = len(loops)
        row[COLUMN["outer_trips"]] = _log(math.prod(l.extent for l in loops))
        self.rows.append(row)
        if parent is not None:
            self.edges.append((parent, node))
        return node, row

    # ---------------------------------------------------------------- statements
    def stmt(self, s, parent: int, loops: List[_Loop]) -> int:
        """Add a statement subtree; return the product of its deepest loop chain."""
        name = type(s).__name__
        if name == "SeqStmt":
            return max((self.stmt(c, parent, loops) for c in s.seq), default=1)
        if name == "DeclBuffer":
            return 1
        if name == "For":
            extent = int(_const(s.extent) or 1)
            kind = _FOR_KIND.get(int(s.kind), "serial")
            if kind == "thread" and s.thread_binding is not None and "vthread" in str(s.thread_binding.thread_tag):
                kind = "vthread"
            node, row = self.add(f"For.{kind}", parent, loops)
            self._loop_row(row, extent, kind, dict(s.annotations))
            self.loop_counts[kind] += 1
            tag = str(s.thread_binding.thread_tag) if s.thread_binding is not None else ""
            self.records.loop(node, extent, kind, tag)
            inner = self.stmt(s.body, node, loops + [_Loop(s.loop_var, extent, node)])
            row[COLUMN["inner_trips"]] = _log(inner)
            return extent * inner
        if name == "AttrStmt":
            key = str(s.attr_key)
            if key in ("thread_extent", "virtual_thread"):
                extent = int(_const(s.value) or 1)
                kind = "thread" if key == "thread_extent" else "vthread"
                node, row = self.add(f"For.{kind}", parent, loops)
                self._loop_row(row, extent, kind, {})
                self.loop_counts[kind] += 1
                self.records.loop(node, extent, kind, str(s.node.thread_tag))
                inner = self.stmt(s.body, node, loops + [_Loop(s.node.var, extent, node)])
                row[COLUMN["inner_trips"]] = _log(inner)
                return extent * inner
            node, row = self.add("Attr", parent, loops)
            value = _const(s.value)
            if key == "pragma_auto_unroll_max_step" and value is not None:
                row[COLUMN["unroll_max_step"]] = _log(value)
            if key == "pragma_unroll_explicit" and value is not None:
                row[COLUMN["unroll_explicit"]] = value
            return self.stmt(s.body, node, loops)
        if name in ("AllocBuffer", "Allocate"):
            node, row = self.add("Allocate", parent, loops)
            buffer = s.buffer
            row[COLUMN["buffer_bytes"]] = _log(_buffer_bytes(buffer))
            row[COLUMN[f"scope_{_scope(buffer)}"]] = 1
            self.records.alloc(node, _buffer_bytes(buffer), _scope(buffer))
            body = getattr(s, "body", None)
            return self.stmt(body, node, loops) if body is not None else 1
        if name == "BufferStore":
            node, row = self.add("BufferStore", parent, loops)
            self._access_row(row, s.buffer, s.indices, loops, is_store=True)
            self.total_trips += math.prod(l.extent for l in loops)
            bits, lanes, is_float = _dtype_info(_dtype(s.value))
            row[COLUMN["dtype_bits"]], row[COLUMN["lanes"]], row[COLUMN["is_float"]] = bits, lanes, is_float
            row[COLUMN["accumulate"]] = float(self._reads_location(s.value, s.buffer, s.indices))
            self.expr(s.value, node, loops)
            return 1
        if name == "IfThenElse":
            node, _ = self.add("IfThenElse", parent, loops)
            self.expr(s.condition, node, loops)
            inner = self.stmt(s.then_case, node, loops)
            if s.else_case is not None:
                inner = max(inner, self.stmt(s.else_case, node, loops))
            return inner
        if name in ("LetStmt", "Bind"):
            node, _ = self.add("LetStmt", parent, loops)
            self.expr(s.value, node, loops)
            return self.stmt(s.body, node, loops) if hasattr(s, "body") else 1
        if name == "Evaluate":
            node, _ = self.add("Evaluate", parent, loops)
            self.expr(s.value, node, loops)
            return 1
        if name == "AssertStmt":
            node, _ = self.add("Assert", parent, loops)
            return self.stmt(s.body, node, loops) if hasattr(s, "body") else 1
        if name == "While":
            node, _ = self.add("While", parent, loops)
            return self.stmt(s.body, node, loops)
        node, _ = self.add(name, parent, loops)  # → UNK, counted
        body = getattr(s, "body", None)
        return self.stmt(body, node, loops) if body is not None else 1

    def _loop_row(self, row: np.ndarray, extent: int, kind: str, annotations: dict) -> None:
        row[COLUMN["loop_extent"]] = _log(extent)
        row[COLUMN[f"kind_{kind}"]] = 1
        step = annotations.get("pragma_auto_unroll_max_step")
        if step is not None:
            row[COLUMN["unroll_max_step"]] = _log(int(step))
        explicit = annotations.get("pragma_unroll_explicit")
        if explicit is not None:
            row[COLUMN["unroll_explicit"]] = float(int(explicit))

    # ---------------------------------------------------------------- expressions
    def expr(self, e, parent: int, loops: List[_Loop]) -> None:
        name = type(e).__name__
        if name in _LEAVES:
            return
        kind = _EXPR_TYPES.get(name)
        is_load = kind == "BufferLoad"
        # index arithmetic stays out of the graph (summarised by the accesses using it)
        if kind is not None and not is_load and kind != "Call" and not _is_value(e):
            for child in _children(e):
                self.expr(child, parent, loops)
            return
        node, row = self.add(kind or name, parent, loops)
        bits, lanes, is_float = _dtype_info(_dtype(e))
        row[COLUMN["dtype_bits"]], row[COLUMN["lanes"]], row[COLUMN["is_float"]] = bits, lanes, is_float
        if is_load:
            self._access_row(row, _load_buffer(e), e.indices, loops)
            for index in e.indices:  # indirect indexing: loads inside indices
                self.expr(index, node, loops)
            return
        for child in _children(e):
            self.expr(child, node, loops)

    def _access_row(self, row: np.ndarray, buffer, indices, loops: List[_Loop],
                    is_store: bool = False) -> None:
        coefficients: Dict[object, float] = {}
        for index in indices:
            for v, c in linear_coefficients(index).items():
                coefficients[v] = coefficients.get(v, 0.0) + abs(c)
        bits, lanes, _ = _dtype_info(str(buffer.dtype))
        element_bytes = bits * lanes / 8
        innermost = abs(coefficients.get(loops[-1].var, 0.0)) if loops else 0.0
        strides = [abs(coefficients.get(l.var, 0.0)) for l in loops]
        nonzero = [s for s in strides if s > 0]
        touched = math.prod(l.extent for l in loops if coefficients.get(l.var, 0.0) != 0)
        buffer_bytes = _buffer_bytes(buffer)
        row[COLUMN["stride_innermost"]] = _log(innermost)
        row[COLUMN["stride_min"]] = _log(min(nonzero)) if nonzero else 0.0
        row[COLUMN["bytes_touched"]] = _log(min(touched * element_bytes, buffer_bytes))
        row[COLUMN["reuse"]] = _log(math.prod(l.extent for l in loops) / max(touched, 1))
        row[COLUMN["buffer_bytes"]] = _log(buffer_bytes)
        row[COLUMN[f"scope_{_scope(buffer)}"]] = 1
        self.curves.append((is_store, _reuse_curve(loops, coefficients, element_bytes)))
        self.records.access(len(self.rows) - 1, [l.node for l in loops], strides, element_bytes, buffer_bytes,
                            _scope(buffer), is_store)

    def curve_vector(self, depth: int) -> np.ndarray:
        stores = [c for is_store, c in self.curves if is_store] or [np.zeros(len(CURVE_POINTS))]
        loads = [c for is_store, c in self.curves if not is_store] or [np.zeros(len(CURVE_POINTS))]
        counts = [_log(self.loop_counts[k]) for k in LOOP_KINDS]
        return np.concatenate([np.mean(stores, 0), np.mean(loads, 0), np.max(loads, 0), counts,
                               [_log(self.total_trips), _log(len(loads)), _log(len(stores)), depth]
                               ]).astype(np.float32)

    def _reads_location(self, value, buffer, indices) -> bool:
        stack = [value]
        while stack:
            e = stack.pop()
            if type(e).__name__ in ("TensorLoad", "BufferLoad") and _load_buffer(e).same_as(buffer) \
                    and all(str(a) == str(b) for a, b in zip(e.indices, indices)):
                return True
            stack.extend(_children(e))
        return False


def _reuse_curve(loops: List[_Loop], coefficients: Dict[object, float], element_bytes: float) -> np.ndarray:
    footprints, reuses = [], []
    touched, trips = 1.0, 1.0
    for loop in reversed(loops):  # innermost outwards
        trips *= loop.extent
        if coefficients.get(loop.var, 0.0) != 0:
            touched *= loop.extent
        footprints.append(math.log2(touched * element_bytes))
        reuses.append(_log(trips / touched))
    curve = np.zeros(len(CURVE_POINTS))
    for i, point in enumerate(CURVE_POINTS):
        within = [r for f, r in zip(footprints, reuses) if f <= point]
        curve[i] = max(within) if within else 0.0
    return curve


def _is_value(e) -> bool:
    """True for expressions computing data (float) or loading it, false for index math."""
    dtype = _dtype(e)
    if not dtype.startswith(("int", "uint", "bool")):
        return True
    stack = list(_children(e))
    while stack:
        c = stack.pop()
        if type(c).__name__ in ("TensorLoad", "BufferLoad"):
            return True
        stack.extend(_children(c))
    return False


def tir_to_graph_reference(func, hardware: Optional[Hardware] = None) -> TirGraph:
    """What `extract.tir.graph.tir_to_graph` must give, bit for bit."""
    builder = _Builder()
    root, _ = builder.add("PrimFunc", None, [])
    builder.stmt(func.body, root, [])
    edges = np.asarray(builder.edges, dtype=np.int64).reshape(-1, 2)
    features = np.stack(builder.rows).astype(np.float32)
    depth = float(features[:, COLUMN["depth"]].max())
    return TirGraph(edges, np.asarray(builder.types, dtype=np.int64),
                    _with_context(edges, features, builder.records, hardware), builder.unknown,
                    builder.curve_vector(depth))
