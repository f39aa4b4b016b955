"""Lowered TIR → graph (A, F, G): the AST as nodes, loop context as node features.

Which TIR: the schedule's module run through TVM's own lowering passes up to
`FlattenBuffer` + `StmtSimplify` (`lower_for_features`), i.e. blocks gone, buffers
flat, but loops still carrying their kind (vectorize/unroll are not yet applied), so
the graph shows the schedule's decisions rather than their expansion.

Nodes (G, vocabulary `VOCABULARY`, version `EXTRACTOR_VERSION`):
  * the PrimFunc (root);
  * loops: `For.<kind>` for serial/parallel/vectorized/unrolled/thread-bound For nodes;
    a `thread_extent` AttrStmt (how lowered GPU code binds threads) is `For.thread`,
    a `virtual_thread` AttrStmt `For.vthread`;
  * `Allocate`, `IfThenElse`, `LetStmt`, `Evaluate`, `Assert`, `While`, other `Attr`;
  * `BufferStore`, `BufferLoad`;
  * value expressions: arithmetic, comparisons, `Select`, `Cast`, `Call`, `Ramp`,
    `Broadcast`, `Let`.
Index arithmetic (integer/boolean expressions that load nothing) is not made into nodes:
it is summarised in the features of the access that uses it (stride, bytes, reuse).
Leaves (variables, constants) and buffer declarations are not nodes either. A node
kind outside the vocabulary becomes `UNK` and is counted in `TirGraph.unknown`.

Edges: parent → child in the AST (statement → nested statement → its value
expression → operands); a SeqStmt is transparent (its items hang off its parent).
No reverse edges or self-loops are added here; the simulator adds them.

Features (F, one row per node, `FEATURE_NAMES`; magnitudes are log2(1 + x)), in the
spirit of AutoTVM's loop-context (itervar) features:
  depth               number of enclosing loops
  loop_extent         the loop's trip count (loops only)
  outer_trips         product of enclosing loop extents: how often the node runs
  inner_trips         loops: product of extents of the deepest loop chain inside
  kind_*              loops: serial / parallel / vectorized / unrolled / thread / vthread
  unroll_max_step     loops: `pragma_auto_unroll_max_step`; unroll_explicit likewise
  stride_innermost    accesses: |coefficient| of the innermost enclosing loop variable in
                      the flat index (0: invariant in that loop, i.e. reused)
  stride_min          accesses: smallest non-zero |coefficient| over enclosing loops
  bytes_touched       accesses: element bytes × product of extents of the enclosing
                      loops the index depends on (footprint of the whole nest), capped at
                      the buffer size
  reuse               accesses: executions / distinct elements touched
  buffer_bytes        accesses and allocations: size of the buffer
  scope_*             global / local / shared memory of the buffer
  accumulate          stores whose value reads the stored location (a reduction update)
  dtype_bits, lanes, is_float   of the node's value (stores: the stored value)
then the context columns `CONTEXT_NAMES` (`extract.tir.context`, computed after the walk
from what it records and the target's `Hardware`): share of the program's work, footprints
against the caches, register/L1/L2 hits, contiguity, vector fill, and for GPU code the
launch structure (threads, vthreads, shared memory, registers, occupancy, whether it can
launch at all) and coalescing / bank conflicts of accesses.
Division and modulo by constants are treated as scaling (x // c has coefficient 1/c,
x % c keeps x's coefficient): exact for the tiled layouts of the templates here.

One walk builds the graph: `tir_to_graph` (each TVM object read once; see "the walk"
below). Its specification, a plain walk that reads objects as often as it needs them, is
the test oracle `tests/tir_reference.py`; the tests compare the two bit for bit.
Featurizing many schedules at once, e.g. a MetaSchedule cost model's candidates, is
`extract.tir.featurize`.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from extract.sample import ExtractorInfo, register_extractor
from .context import CONTEXT_NAMES, Records, context_features
from .hardware import Hardware, hardware_of

EXTRACTOR_VERSION = "tir-ast-v2"

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread", "vthread")
VOCABULARY: Tuple[str, ...] = (
    "UNK", "PrimFunc",
    *(f"For.{k}" for k in LOOP_KINDS),
    "Allocate", "IfThenElse", "LetStmt", "Evaluate", "Assert", "While", "Attr",
    "BufferStore", "BufferLoad",
    "Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Compare", "Logical",
    "Select", "Cast", "Call", "Ramp", "Broadcast", "Let",
)
TYPE_ID = {name: i for i, name in enumerate(VOCABULARY)}
UNK = TYPE_ID["UNK"]

# the columns the walk fills in as it goes; then the context columns (`extract.tir.context`)
BASE_FEATURE_NAMES: Tuple[str, ...] = (
    "depth", "loop_extent", "outer_trips", "inner_trips",
    *(f"kind_{k}" for k in LOOP_KINDS),
    "unroll_max_step", "unroll_explicit",
    "stride_innermost", "stride_min", "bytes_touched", "reuse", "buffer_bytes",
    "scope_global", "scope_local", "scope_shared", "accumulate",
    "dtype_bits", "lanes", "is_float",
)
FEATURE_NAMES: Tuple[str, ...] = BASE_FEATURE_NAMES + CONTEXT_NAMES
COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}
# samples of the previous version: its columns are this one's first 24 (the same values),
# its vocabulary this one's; registered so that collections of it are named as such
register_extractor(ExtractorInfo("tir-ast-v1", VOCABULARY, BASE_FEATURE_NAMES))

# The "curve" baseline's fixed vector (after AutoTVM's buffer-curve features): for each
# access, the reuse it achieves as a function of the bytes it touches, growing the loop
# nest from the innermost loop outwards; each curve is sampled at fixed footprints
# (2^0 … 2^28.5 bytes) as log2(1 + best reuse within that footprint). Stores and loads
# are pooled separately (mean; loads also max), followed by loop-structure counts.
CURVE_POINTS = tuple(1.5 * i for i in range(20))
CURVE_NAMES: Tuple[str, ...] = (
    *(f"store_reuse_at_2^{p:g}B" for p in CURVE_POINTS),
    *(f"load_reuse_mean_at_2^{p:g}B" for p in CURVE_POINTS),
    *(f"load_reuse_max_at_2^{p:g}B" for p in CURVE_POINTS),
    *(f"loops_{k}" for k in LOOP_KINDS),
    "log_total_trips", "num_loads", "num_stores", "max_depth",
)

# expression class name → vocabulary name (TVM renames classes between releases, so
# dispatch is on names, not on Python classes)
_EXPR_TYPES = {
    "Add": "Add", "Sub": "Sub", "Mul": "Mul",
    "Div": "Div", "FloorDiv": "Div", "TruncDiv": "Div",
    "Mod": "Mod", "FloorMod": "Mod", "TruncMod": "Mod",
    "Min": "Min", "Max": "Max",
    "EQ": "Compare", "NE": "Compare", "LT": "Compare", "LE": "Compare", "GT": "Compare", "GE": "Compare",
    "And": "Logical", "Or": "Logical", "Not": "Logical",
    "Select": "Select", "Cast": "Cast", "Call": "Call", "Ramp": "Ramp", "Broadcast": "Broadcast",
    "Let": "Let", "TensorLoad": "BufferLoad", "BufferLoad": "BufferLoad",
}
_LEAVES = {"Var", "SizeVar", "IntImm", "FloatImm", "StringImm"}
_FOR_KIND = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread"}


def _log(x: float) -> float:
    return math.log2(1.0 + abs(float(x)))


@dataclass
class TirGraph:
    edges: np.ndarray          # (m, 2) parent → child
    node_types: np.ndarray     # (n,)
    node_features: np.ndarray  # (n, len(FEATURE_NAMES))
    unknown: Counter = field(default_factory=Counter)  # node kinds mapped to UNK
    curve: np.ndarray = field(default_factory=lambda: np.zeros(len(CURVE_NAMES), np.float32))


def _const(e) -> Optional[float]:
    name = type(e).__name__
    if name in ("IntImm", "FloatImm"):
        return float(e.value)
    return None


def linear_coefficients(expr) -> Dict[object, float]:
    """Coefficient of each variable in an index expression (see module docstring)."""
    name = type(expr).__name__
    if name in ("Var", "SizeVar"):
        return {expr: 1.0}
    if name in ("IntImm", "FloatImm"):
        return {}
    if name in ("Add", "Sub"):
        a, b = linear_coefficients(expr.a), linear_coefficients(expr.b)
        sign = 1.0 if name == "Add" else -1.0
        for v, c in b.items():
            a[v] = a.get(v, 0.0) + sign * c
        return a
    if name == "Mul":
        ca, cb = _const(expr.a), _const(expr.b)
        if cb is not None:
            return {v: c * cb for v, c in linear_coefficients(expr.a).items()}
        if ca is not None:
            return {v: c * ca for v, c in linear_coefficients(expr.b).items()}
    if name in ("FloorDiv", "Div", "TruncDiv"):
        cb = _const(expr.b)
        if cb:
            return {v: c / cb for v, c in linear_coefficients(expr.a).items()}
    if name in ("FloorMod", "Mod", "TruncMod"):
        return linear_coefficients(expr.a)
    if name == "Cast":
        return linear_coefficients(expr.value)
    if name == "Ramp":
        return linear_coefficients(expr.base)
    # anything else (min/max/select/loads in indices): depends on its variables with
    # unknown stride; report them with coefficient 1
    out: Dict[object, float] = {}
    for child in _children(expr):
        for v in linear_coefficients(child):
            out[v] = 1.0
    return out


def _children(expr) -> List[object]:
    name = type(expr).__name__
    if name in _LEAVES:
        return []
    if name in ("TensorLoad", "BufferLoad"):
        return list(expr.indices)
    return _children_of(expr, name)


def _dtype_info(dtype: str) -> Tuple[int, int, bool]:
    import tvm

    if dtype in ("handle", "void", ""):  # opaque calls (e.g. intrinsics returning handles)
        return 0, 0, False
    dt = tvm.DataType(dtype)
    return dt.bits, dt.lanes, dtype.startswith(("float", "bfloat"))


def _buffer_bytes(buffer) -> float:
    bits, lanes, _ = _dtype_info(str(buffer.dtype))
    size = 1.0
    for dim in buffer.shape:
        c = _const(dim)
        size *= c if c is not None else 1.0
    return size * bits * lanes / 8


def _scope(buffer) -> str:
    scope = buffer.scope()
    if scope.startswith("shared"):
        return "shared"
    if scope.startswith(("local", "warp", "wmma")):
        return "local"
    return "global"


def feature_passes() -> list:
    """TVM's lowering passes `lower_for_features` runs, in order (see module docstring)."""
    from tvm import s_tir, tirx

    return [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.StmtSimplify(),
    ]


def lower_for_features(mod):
    """Run TVM's lowering up to flat buffers, keeping loop kinds (see module docstring)."""
    import tvm

    return tvm.ir.transform.Sequential(feature_passes())(mod)


def hardware_for(records: Records, hardware: Optional[Hardware] = None) -> Hardware:
    """`hardware` if given; else a GPU's (the target's defaults: `hardware_of({"kind":
    "cuda"})`) for code that binds GPU threads, this machine's CPU for other code."""
    if hardware is not None:
        return hardware
    gpu = any(tag.startswith(("threadIdx", "blockIdx")) for _, _, tag in records.loops.values())
    return hardware_of({"kind": "cuda"} if gpu else None)


def _with_context(edges: np.ndarray, features: np.ndarray, records: Records,
                  hardware: Optional[Hardware]) -> np.ndarray:
    """The walk's columns followed by the context columns (`extract.tir.context`)."""
    context = context_features(len(features), edges, records, hardware_for(records, hardware))
    return np.concatenate([features, context], axis=1)


# ====================================================================== the walk
# Reading a TVM object costs an FFI call per attribute, so the walk reads each one once
# (the plain walk of tests/tir_reference.py takes about 2.5× as long):
#   * an index is read once, by `_simple_coeffs`, which computes its coefficients and at
#     the same time finds whether `expr` would make any node of it (index arithmetic alone
#     makes none, so it is not walked again); a value is walked once, listing the loads it
#     meets for the accumulation check; only integer-typed value nodes look for loads
#     below them (`_has_load`: such a node computes data if it loads any);
#   * dtype strings (`str(e.ty)`, `tvm.DataType`) are cached per type object and per
#     dtype string;
#   * whether an accumulating store reads its own location: indices compared by
#     `structural_equal` (C++, ~2 µs; the same variables and structure print the same),
#     then as structures that print the same way (`_print_key`), printing (TVMScript,
#     ~12 µs per index) only where neither can decide;
#   * dicts keyed by TVM `Var`s (whose `__eq__` builds an expression) are keyed by
#     handle; reuse curves are a running maximum over footprints that only grow; feature
#     rows are Python lists, one numpy conversion at the end.
# Every float is computed by the same operations in the same order as the test oracle's.

_LOADS = ("TensorLoad", "BufferLoad")
_VARS = ("Var", "SizeVar")
_IMMS = ("IntImm", "FloatImm")
_ADD_SUB = {"Add": 1.0, "Sub": -1.0}
_DIVS = ("FloorDiv", "Div", "TruncDiv")
_MODS = ("FloorMod", "Mod", "TruncMod")
_INDEX_TYPES = ("int", "uint", "bool")
_NUM_FEATURES = len(BASE_FEATURE_NAMES)
_C_DEPTH, _C_OUTER, _C_INNER = COLUMN["depth"], COLUMN["outer_trips"], COLUMN["inner_trips"]
_C_EXTENT = COLUMN["loop_extent"]
_C_KIND = {k: COLUMN[f"kind_{k}"] for k in LOOP_KINDS}
_C_SCOPE = {k: COLUMN[f"scope_{k}"] for k in ("global", "local", "shared")}
_C_BITS, _C_LANES, _C_FLOAT = COLUMN["dtype_bits"], COLUMN["lanes"], COLUMN["is_float"]
_C_STEP, _C_EXPLICIT = COLUMN["unroll_max_step"], COLUMN["unroll_explicit"]
_C_ACCUMULATE = COLUMN["accumulate"]
_C_STRIDE_IN, _C_STRIDE_MIN = COLUMN["stride_innermost"], COLUMN["stride_min"]
_C_TOUCHED, _C_REUSE, _C_BUFFER = COLUMN["bytes_touched"], COLUMN["reuse"], COLUMN["buffer_bytes"]
# operators whose printed form is fixed by the operator and its operands
_PRINT_OPS = frozenset(("Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "TruncDiv", "TruncMod",
                        "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not"))
_PRINT_TYPED = ("Cast", "Ramp", "Broadcast")  # … and their dtype

_DTYPE_INFO: Dict[str, Tuple[int, int, bool]] = {}
_TYPE_STRINGS: Dict[int, Tuple[object, str]] = {}  # type object handle → (the object, its string)
_HAS_DTYPE: Dict[type, bool] = {}                  # class → whether it has a `dtype` attribute
_BINARY: Dict[type, bool] = {}                     # class → whether it has operands a and b
_HAS_BUFFER: Dict[type, bool] = {}                 # load class → whether it has `buffer`
_LOOP_KIND_NAMES = {k: f"For.{k}" for k in LOOP_KINDS}


def _dtype_info_cached(dtype: str) -> Tuple[int, int, bool]:
    info = _DTYPE_INFO.get(dtype)
    if info is None:
        info = _DTYPE_INFO[dtype] = _dtype_info(dtype)
    return info


def _dtype(e) -> str:
    """An expression's dtype string (TVM 0.27 calls it `ty`, older releases `dtype`),
    cached per type object (TVM interns them; the cache holds a reference, so no other
    object can take a cached handle while it is cached)."""
    cls = type(e)
    has_dtype = _HAS_DTYPE.get(cls)
    if has_dtype is None:
        has_dtype = _HAS_DTYPE[cls] = hasattr(cls, "dtype")
    if has_dtype:
        d = getattr(e, "dtype", None)
        if d:
            return str(d)
    ty = e.ty
    hit = _TYPE_STRINGS.get(ty.__chandle__())
    if hit is None:
        if len(_TYPE_STRINGS) > 4096:
            _TYPE_STRINGS.clear()
        hit = _TYPE_STRINGS[ty.__chandle__()] = (ty, str(ty))
    return hit[1]


def _children_of(e, name: str) -> list:
    """`_children` of a non-leaf, non-load expression."""
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
    cls = type(e)
    binary = _BINARY.get(cls)
    if binary is None:
        binary = _BINARY[cls] = hasattr(e, "a") and hasattr(e, "b")
    return [e.a, e.b] if binary else []


def _coeffs_ffi(e) -> Dict[int, float]:
    """`linear_coefficients(e)`, keyed by variable handle."""
    name = type(e).__name__
    if name in _VARS:
        return {e.__chandle__(): 1.0}
    if name in _IMMS:
        return {}
    sign = _ADD_SUB.get(name)
    if sign is not None:
        a, b = _coeffs_ffi(e.a), _coeffs_ffi(e.b)
        for v, c in b.items():
            a[v] = a.get(v, 0.0) + sign * c
        return a
    if name == "Mul":
        ea, eb = e.a, e.b
        ca, cb = _const(ea), _const(eb)
        if cb is not None:
            return {v: c * cb for v, c in _coeffs_ffi(ea).items()}
        if ca is not None:
            return {v: c * ca for v, c in _coeffs_ffi(eb).items()}
    if name in _DIVS:
        cb = _const(e.b)
        if cb:
            return {v: c / cb for v, c in _coeffs_ffi(e.a).items()}
    if name in _MODS:
        return _coeffs_ffi(e.a)
    if name == "Cast":
        return _coeffs_ffi(e.value)
    if name == "Ramp":
        return _coeffs_ffi(e.base)
    if name in _LEAVES:
        children = []
    elif name in _LOADS:
        children = list(e.indices)
    else:
        children = _children_of(e, name)
    out: Dict[int, float] = {}
    for child in children:
        for v in _coeffs_ffi(child):
            out[v] = 1.0
    return out


def _simple_coeffs(e) -> Optional[Dict[int, float]]:
    """`linear_coefficients(e)` keyed by handle if `_Builder.expr` makes no node of any
    part of `e` (index arithmetic: integer/boolean operators of a known kind, no call,
    no load); None otherwise."""
    name = type(e).__name__
    if name in _VARS:
        return {e.__chandle__(): 1.0}
    if name in _LEAVES:
        return {}
    kind = _EXPR_TYPES.get(name)
    if kind is None or kind == "BufferLoad" or kind == "Call" or not _dtype(e).startswith(_INDEX_TYPES):
        return None
    sign = _ADD_SUB.get(name)
    if sign is not None:
        a = _simple_coeffs(e.a)
        if a is None:
            return None
        b = _simple_coeffs(e.b)
        if b is None:
            return None
        for v, c in b.items():
            a[v] = a.get(v, 0.0) + sign * c
        return a
    if name == "Mul":
        ea, eb = e.a, e.b
        ca, cb = _const(ea), _const(eb)
        if cb is not None:  # eb is a constant: a leaf
            a = _simple_coeffs(ea)
            return None if a is None else {v: c * cb for v, c in a.items()}
        if ca is not None:
            b = _simple_coeffs(eb)
            return None if b is None else {v: c * ca for v, c in b.items()}
    elif name in _DIVS:
        cb = _const(e.b)
        if cb:
            a = _simple_coeffs(e.a)
            return None if a is None else {v: c / cb for v, c in a.items()}
    elif name in _MODS:
        a = _simple_coeffs(e.a)
        return None if a is None or _simple_coeffs(e.b) is None else a
    elif name == "Cast":
        return _simple_coeffs(e.value)
    elif name == "Ramp":
        a = _simple_coeffs(e.base)
        return None if a is None or _simple_coeffs(e.stride) is None else a
    out: Dict[int, float] = {}
    for child in _children_of(e, name):
        c = _simple_coeffs(child)
        if c is None:
            return None
        for v in c:
            out[v] = 1.0
    return out


def _has_load(e) -> bool:
    """Whether a load is below `e` (an integer-typed expression that loads computes data)."""
    for child in _children_of(e, type(e).__name__):
        name = type(child).__name__
        if name in _LOADS:
            return True
        if name not in _LEAVES and _has_load(child):
            return True
    return False


def _load_parts(e, cls):
    """A load's buffer (TVM 0.27's TensorLoad calls it `source`) and indices."""
    has_buffer = _HAS_BUFFER.get(cls)
    if has_buffer is None:
        has_buffer = _HAS_BUFFER[cls] = hasattr(cls, "buffer")
    buffer = getattr(e, "buffer", None) if has_buffer else None
    if buffer is None:
        buffer = e.source
    return buffer, list(e.indices)


def _print_key(e, names: Dict[str, int]):
    """A value equal for two index expressions exactly when `str()` prints them the same,
    or None where that is not certain (then the caller prints). `names`: variable name →
    handle seen so far (two variables of one name would print with a suffix: None)."""
    name = type(e).__name__
    if name in _VARS:
        var_name = e.name
        if not var_name.isidentifier() or names.setdefault(var_name, e.__chandle__()) != e.__chandle__():
            return None
        return var_name
    if name == "IntImm":
        return ("I", _dtype(e), int(e.value))
    if name in _PRINT_OPS:
        keys = [_print_key(c, names) for c in _children_of(e, name)]
        return None if any(k is None for k in keys) else (name, *keys)
    if name in _PRINT_TYPED:
        keys = [_print_key(c, names) for c in _children_of(e, name)]
        return None if any(k is None for k in keys) else (name, _dtype(e), *keys)
    return None


def _same_print(a, b) -> bool:
    """`str(a) == str(b)` for two index expressions, printing only where the structure
    cannot decide. Structurally equal with the same variables (the usual case: a
    reduction's load and store, ~2 µs in C++) prints the same."""
    import tvm_ffi

    if tvm_ffi.structural_equal(a, b):
        return True
    ka, kb = _print_key(a, {}), _print_key(b, {})
    if ka is None or kb is None:
        return str(a) == str(b)
    return ka == kb


class _Buffer:
    __slots__ = ("obj", "element_bytes", "bytes", "log_bytes", "scope", "scope_column")

    def __init__(self, buffer) -> None:
        self.obj = buffer
        bits, lanes, _ = _dtype_info_cached(str(buffer.dtype))
        self.element_bytes = bits * lanes / 8
        self.bytes = _buffer_bytes(buffer)
        self.log_bytes = _log(self.bytes)
        self.scope = _scope(buffer)
        self.scope_column = _C_SCOPE[self.scope]


class _Builder:
    """The walk: nodes, edges, feature rows and the curve vector of one PrimFunc, each
    TVM object read once (see the section comment)."""

    def curve_vector(self, depth: float) -> np.ndarray:
        """The curve baseline's vector (`CURVE_NAMES`): stores' and loads' reuse curves
        pooled, then the loop-structure counts."""
        points = len(CURVE_POINTS)
        curves = np.array([c for _, c in self.curves], dtype=np.float64).reshape(-1, points)
        is_store = np.array([s for s, _ in self.curves], dtype=bool)
        stores = curves[is_store] if is_store.any() else np.zeros((1, points))
        loads = curves[~is_store] if not is_store.all() else np.zeros((1, points))
        counts = [_log(self.loop_counts[k]) for k in LOOP_KINDS]
        return np.concatenate([np.mean(stores, 0), np.mean(loads, 0), np.max(loads, 0), counts,
                               [_log(self.total_trips), _log(len(loads)), _log(len(stores)), depth]
                               ]).astype(np.float32)

    def __init__(self) -> None:
        self.types: List[int] = []
        self.rows: List[List[float]] = []
        self.edges: List[Tuple[int, int]] = []
        self.unknown: Counter = Counter()
        self.curves: List[Tuple[bool, List[float]]] = []
        self.loop_counts: Counter = Counter()
        self.total_trips = 0.0
        self.buffers: Dict[int, _Buffer] = {}
        # the enclosing loops (variable handles, extents) and, per depth, the product of
        # their extents (an exact int) and its log
        self.loop_vars: List[int] = []
        self.extents: List[int] = []
        self.trips: List[int] = [1]
        self.log_trips: List[float] = [_log(1)]
        self.loop_nodes: List[int] = []    # the enclosing loops' nodes
        self.records = Records()

    def add(self, kind: str, parent: Optional[int]) -> Tuple[int, List[float]]:
        node = len(self.types)
        type_id = TYPE_ID.get(kind, UNK)
        if type_id == UNK:
            self.unknown[kind] += 1
        self.types.append(type_id)
        row = [0.0] * _NUM_FEATURES
        depth = len(self.extents)
        row[_C_DEPTH] = depth
        row[_C_OUTER] = self.log_trips[depth]
        self.rows.append(row)
        if parent is not None:
            self.edges.append((parent, node))
        return node, row

    def buffer(self, obj) -> _Buffer:
        handle = obj.__chandle__()
        info = self.buffers.get(handle)
        if info is None:
            info = self.buffers[handle] = _Buffer(obj)
        return info

    # ---------------------------------------------------------------- statements
    def loop(self, kind: str, extent: int, var, body, parent: int, annotations, tag: str = "") -> int:
        node, row = self.add(_LOOP_KIND_NAMES[kind], parent)
        row[_C_EXTENT] = _log(extent)
        row[_C_KIND[kind]] = 1
        if annotations:
            step = annotations.get("pragma_auto_unroll_max_step")
            if step is not None:
                row[_C_STEP] = _log(int(step))
            explicit = annotations.get("pragma_unroll_explicit")
            if explicit is not None:
                row[_C_EXPLICIT] = float(int(explicit))
        self.loop_counts[kind] += 1
        self.records.loop(node, extent, kind, tag)
        trips = self.trips[-1] * extent
        self.loop_nodes.append(node)
        self.loop_vars.append(var.__chandle__())
        self.extents.append(extent)
        self.trips.append(trips)
        self.log_trips.append(_log(trips))
        inner = self.stmt(body, node)
        del self.loop_vars[-1], self.extents[-1], self.trips[-1], self.log_trips[-1], self.loop_nodes[-1]
        row[_C_INNER] = _log(inner)
        return extent * inner

    def stmt(self, s, parent: int) -> int:
        """Add a statement subtree; return the product of its deepest loop chain."""
        name = type(s).__name__
        if name == "SeqStmt":
            return max((self.stmt(c, parent) for c in s.seq), default=1)
        if name == "DeclBuffer":
            return 1
        if name == "For":
            extent = int(_const(s.extent) or 1)
            kind = _FOR_KIND.get(int(s.kind), "serial")
            if kind == "thread" and s.thread_binding is not None and "vthread" in str(s.thread_binding.thread_tag):
                kind = "vthread"
            annotations = s.annotations
            binding = s.thread_binding
            return self.loop(kind, extent, s.loop_var, s.body, parent,
                             dict(annotations) if len(annotations) else None,
                             str(binding.thread_tag) if binding is not None else "")
        if name == "BufferStore":
            return self.store(s, parent)
        if name == "AttrStmt":
            key = str(s.attr_key)
            if key in ("thread_extent", "virtual_thread"):
                extent = int(_const(s.value) or 1)
                kind = "thread" if key == "thread_extent" else "vthread"
                return self.loop(kind, extent, s.node.var, s.body, parent, None, str(s.node.thread_tag))
            node, row = self.add("Attr", parent)
            value = _const(s.value)
            if key == "pragma_auto_unroll_max_step" and value is not None:
                row[_C_STEP] = _log(value)
            if key == "pragma_unroll_explicit" and value is not None:
                row[_C_EXPLICIT] = value
            return self.stmt(s.body, node)
        if name in ("AllocBuffer", "Allocate"):
            node, row = self.add("Allocate", parent)
            info = self.buffer(s.buffer)
            row[_C_BUFFER] = info.log_bytes
            row[info.scope_column] = 1
            self.records.alloc(node, info.bytes, info.scope)
            body = getattr(s, "body", None)
            return self.stmt(body, node) if body is not None else 1
        if name == "IfThenElse":
            node, _ = self.add("IfThenElse", parent)
            self.expr(s.condition, node, None)
            inner = self.stmt(s.then_case, node)
            if s.else_case is not None:
                inner = max(inner, self.stmt(s.else_case, node))
            return inner
        if name in ("LetStmt", "Bind"):
            node, _ = self.add("LetStmt", parent)
            self.expr(s.value, node, None)
            return self.stmt(s.body, node) if hasattr(s, "body") else 1
        if name == "Evaluate":
            node, _ = self.add("Evaluate", parent)
            self.expr(s.value, node, None)
            return 1
        if name == "AssertStmt":
            node, _ = self.add("Assert", parent)
            return self.stmt(s.body, node) if hasattr(s, "body") else 1
        if name == "While":
            node, _ = self.add("While", parent)
            return self.stmt(s.body, node)
        node, _ = self.add(name, parent)  # → UNK, counted
        body = getattr(s, "body", None)
        return self.stmt(body, node) if body is not None else 1

    def store(self, s, parent: int) -> int:
        node, row = self.add("BufferStore", parent)
        info = self.buffer(s.buffer)
        indices = list(s.indices)
        self.access_row(row, info, [_coeffs_ffi(i) for i in indices], is_store=True)
        self.total_trips += self.trips[-1]
        value = s.value
        bits, lanes, is_float = _dtype_info_cached(_dtype(value))
        row[_C_BITS], row[_C_LANES], row[_C_FLOAT] = bits, lanes, is_float
        loads: List[Tuple[int, list]] = []
        self.expr(value, node, loads)
        handle = info.obj.__chandle__()
        row[_C_ACCUMULATE] = float(any(  # `_reads_location`
            buffer == handle and all(_same_print(a, b) for a, b in zip(load_indices, indices))
            for buffer, load_indices in loads))
        return 1

    # ---------------------------------------------------------------- expressions
    def expr(self, e, parent: int, loads: Optional[List[Tuple[int, list]]]) -> None:
        """Add an expression subtree, in one pass: an index that is index arithmetic alone (no
        node of it would enter the graph, see `_simple_coeffs`) is not walked again.
        Every load met is listed in `loads` (buffer handle, indices), if given."""
        cls = type(e)
        name = cls.__name__
        if name in _LEAVES:
            return
        kind = _EXPR_TYPES.get(name)
        is_load = kind == "BufferLoad"
        dtype = None
        if kind is not None and not is_load and kind != "Call":
            dtype = _dtype(e)
            if dtype.startswith(_INDEX_TYPES) and not _has_load(e):  # not `_is_value`
                for child in _children_of(e, name):
                    self.expr(child, parent, loads)
                return
        node, row = self.add(kind or name, parent)
        bits, lanes, is_float = _dtype_info_cached(dtype or _dtype(e))
        row[_C_BITS], row[_C_LANES], row[_C_FLOAT] = bits, lanes, is_float
        if not is_load:
            for child in _children_of(e, name):
                self.expr(child, node, loads)
            return
        buffer, indices = _load_parts(e, cls)
        coeffs = [_simple_coeffs(i) for i in indices]
        simple = all(c is not None for c in coeffs)
        if not simple:  # indirect indexing, calls, float math: coefficients of it all, walk it
            coeffs = [_coeffs_ffi(i) for i in indices]
        self.access_row(row, self.buffer(buffer), coeffs)
        if loads is not None:
            loads.append((buffer.__chandle__(), indices))
        if not simple:
            for index in indices:
                self.expr(index, node, loads)

    def access_row(self, row: List[float], info: _Buffer, index_coeffs: List[Dict[int, float]],
                   is_store: bool = False) -> None:
        """An access's columns (strides, bytes touched, reuse, buffer size and scope) and
        reuse curve, from each index's coefficients."""
        coefficients: Dict[int, float] = {}
        for coeffs in index_coeffs:
            for v, c in coeffs.items():
                coefficients[v] = coefficients.get(v, 0.0) + abs(c)
        extents = self.extents
        cs = [coefficients.get(v, 0.0) for v in self.loop_vars]
        nonzero = [abs(c) for c in cs if abs(c) > 0]
        touched = math.prod(e for c, e in zip(cs, extents) if c != 0)
        element_bytes = info.element_bytes
        row[_C_STRIDE_IN] = _log(abs(cs[-1]) if cs else 0.0)
        row[_C_STRIDE_MIN] = _log(min(nonzero)) if nonzero else 0.0
        row[_C_TOUCHED] = _log(min(touched * element_bytes, info.bytes))
        row[_C_REUSE] = _log(self.trips[-1] / max(touched, 1))
        row[_C_BUFFER] = info.log_bytes
        row[info.scope_column] = 1
        self.curves.append((is_store, _reuse_curve(cs, extents, element_bytes)))
        self.records.access(len(self.rows) - 1, self.loop_nodes, cs, element_bytes, info.bytes, info.scope, is_store)


def _reuse_curve(cs: List[float], extents: List[int], element_bytes: float) -> List[float]:
    """The reuse an access achieves within each footprint of `CURVE_POINTS`, growing the
    loop nest from the innermost loop outwards (`cs`: each enclosing loop's coefficient,
    `extents`: its trip count). Footprints only grow outwards, so the reuses within a
    footprint are a prefix: a running maximum (should they ever not grow, every point
    scans them all)."""
    log2 = math.log2
    footprints, reuses = [], []
    touched, trips = 1.0, 1.0
    ordered, last = True, -math.inf
    for i in range(len(extents) - 1, -1, -1):  # innermost outwards
        extent = extents[i]
        trips *= extent
        if cs[i] != 0:
            touched *= extent
        footprint = log2(touched * element_bytes)
        ordered = ordered and footprint >= last
        last = footprint
        footprints.append(footprint)
        reuses.append(log2(1.0 + trips / touched))  # _log (trips / touched: a positive float)
    if not ordered:
        curve = []
        for point in CURVE_POINTS:
            within = [r for f, r in zip(footprints, reuses) if f <= point]
            curve.append(max(within) if within else 0.0)
        return curve
    curve, k, n, best = [], 0, len(footprints), 0.0
    for point in CURVE_POINTS:
        while k < n and footprints[k] <= point:
            if k == 0 or reuses[k] > best:
                best = reuses[k]
            k += 1
        curve.append(best if k else 0.0)
    return curve


def tir_to_graph(func, hardware: Optional[Hardware] = None) -> TirGraph:
    """Graph of one lowered PrimFunc (see module docstring). `hardware`: what the context
    columns measure against (the target's, `extract.tir.hardware.hardware_of`; None: see
    `hardware_for`)."""
    builder = _Builder()
    root, _ = builder.add("PrimFunc", None)
    builder.stmt(func.body, root)
    edges = np.asarray(builder.edges, dtype=np.int64).reshape(-1, 2)
    features = np.array(builder.rows, dtype=np.float32)
    depth = float(features[:, COLUMN["depth"]].max())
    return TirGraph(edges, np.asarray(builder.types, dtype=np.int64),
                    _with_context(edges, features, builder.records, hardware), builder.unknown,
                    builder.curve_vector(depth))
