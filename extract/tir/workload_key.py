"""Workload identity for MetaSchedule: what a PrimFunc computes, on what shapes, as a key.

MetaSchedule identifies a workload by the structural hash of its IRModule, which says
nothing to a reader and changes with block and buffer names; Relax names tasks by the
order operators were fused (`fused_conv2d13_add15_add16_relu8`), which changes with the
network. tpsim needs one key per computation that is the same in every run and every
network, so that records of one workload from two runs (or two networks) meet, and that
two different computations never share it. `workload_key(prim_func, target)` builds it
from the PrimFunc itself:

    conv2d.pad-mac-add-relu.1x64x56x56_64x64x3x3_1x64x1x1_1x64x56x56.float32.3fa91c0e.llvm-rocketlake-1c
    <kind>.<block chain>.<argument shapes, output last>.<dtype>.<computation digest>.<target>

* kind: the operator kind, from the computation (`classify`; the table of kinds and how
  each is recognised is in `docs/FEATURES.md`, "Operator kinds"): never from block names.
* block chain: one label per block in program order (pad, copy, mac, sum, max, add, mul,
  relu, clip, exp, erf, …), so that e.g. a conv with and without a fused ReLU differ.
* shapes and dtype of the function's arguments.
* computation digest (`computation_digest`): 8 hex digits of a hash of the whole function
  (argument buffers, loops, blocks, iteration domains, index arithmetic, values) with every
  name left out. Two programs whose shapes agree but whose padding, stride or index
  arithmetic differ get different digests; the same operator from two networks (other
  block, buffer and function names) gets the same one.
* the target's kind, CPU and core count.

`readable_name` is the key without digest and target, for tables; `extract.tvm_log`'s
report says when two different computations share one.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

CONV_KINDS = tuple(f"{group}conv{rank}d{transposed}" for group in ("", "depthwise_", "group_")
                   for rank in (1, 2, 3) for transposed in ("", "_transpose"))
KINDS = (*CONV_KINDS, "dense", "batch_matmul", "pool", "softmax", "log_softmax", "layer_norm",
         "rms_norm", "norm", "reduce", "elementwise", "other")
_REDUCERS = {"Add": "sum", "Max": "max", "Min": "min"}
_NAME_FIELDS = frozenset({"name", "name_hint"})   # what the digest leaves out, with source spans
DIGEST_CHARS = 8
KEY_VERSION = "workload-key-v2"  # part of the sample cache's key: groups are named by it


@dataclass(frozen=True)
class BlockInfo:
    """What the key needs to know about one block (a TIR `SBlock` with iteration variables)."""

    name: str
    spatial: Dict[str, int]      # data-parallel iteration variable → extent
    reduction: Dict[str, int]    # reduction iteration variable → extent
    label: str                   # pad, copy, mac, sum, max, add, relu, exp, …
    operands: Tuple[Tuple[FrozenSet[str], ...], ...]  # per read buffer: vars used by each index
    calls: FrozenSet[str]        # intrinsic calls in the stored value (exp, erf, rsqrt, …)
    outputs: int = 1             # values stored (a multi-output reduction stores several)
    flipped: FrozenSet[str] = frozenset()  # variables some read index subtracts (c − v)
    read_buffers: Tuple[int, ...] = ()     # the buffer of each read, as `operands` (`_identity`)
    write_buffers: Tuple[int, ...] = ()

    @property
    def iterations(self) -> int:
        total = 1
        for extent in (*self.spatial.values(), *self.reduction.values()):
            total *= extent
        return total

    def windowed(self, operand: int) -> bool:
        """Does some index of read `operand` mix an output axis with a reduction axis?"""
        return any(vars_ & self.spatial.keys() and vars_ & self.reduction.keys()
                   for vars_ in self.operands[operand])

    def window_rank(self, operand: int) -> int:
        """How many indices of read `operand` slide a window (output axis + reduction axis)."""
        return sum(bool(v & self.spatial.keys() and v & self.reduction.keys()) for v in self.operands[operand])


@dataclass(frozen=True)
class WorkloadKey:
    """The parts of a key; `str(WorkloadKey)` is the key."""

    kind: str
    chain: str
    shapes: Tuple[Tuple[int, ...], ...]
    dtype: str
    digest: str
    target: str

    @property
    def readable(self) -> str:
        """kind.chain.shapes.dtype: what a person reads in a table (not unique)."""
        shapes = "_".join("x".join(str(d) for d in shape) or "scalar" for shape in self.shapes)
        return f"{self.kind}.{self.chain}.{shapes}.{self.dtype}"

    def __str__(self) -> str:
        return f"{self.readable}.{self.digest}.{self.target}"


# ---------------------------------------------------------------- reading the PrimFunc
def _vars_in(expr) -> FrozenSet[str]:
    import tvm_ffi
    from tvm import tirx

    found: List[str] = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(v.name))])
    return frozenset(found)


def _calls_in(expr) -> FrozenSet[str]:
    import tvm_ffi
    from tvm.ir.expr import Call

    found: List[str] = []
    tvm_ffi.structural_walk(expr, [(Call, lambda c: found.append(str(c.op.name).split(".")[-1]))])
    return frozenset(found)


def _subtracted_vars(expr, negative: bool = False) -> FrozenSet[str]:
    """Variables that enter an index with a negative sign (`2 − v`: a flipped kernel)."""
    from tvm import tirx

    if isinstance(expr, tirx.Var):
        return frozenset({expr.name}) if negative else frozenset()
    if isinstance(expr, tirx.Add):
        return _subtracted_vars(expr.a, negative) | _subtracted_vars(expr.b, negative)
    if isinstance(expr, tirx.Sub):
        return _subtracted_vars(expr.a, negative) | _subtracted_vars(expr.b, not negative)
    if isinstance(expr, tirx.Mul):
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(factor, tirx.IntImm):
                return _subtracted_vars(other, negative != (int(factor.value) < 0))
    return frozenset()


def _identity(node) -> int:
    """The address of the object behind a TVM node (two Python wrappers of one buffer agree;
    names do not identify: TOPI names several buffers `T_reshape`)."""
    return int(node.__ctypes_handle__().value)


def _is_const(expr) -> bool:
    from tvm import tirx

    return isinstance(expr, (tirx.IntImm, tirx.FloatImm))


def _label(value, reduction: bool, calls: FrozenSet[str]) -> str:
    """One word for what a block computes (see the module docstring)."""
    from tvm import tirx
    from tvm.ir.expr import TensorLoad  # TVM 0.27's buffer load (tirx.BufferLoad builds one)

    def is_load(x) -> bool:
        return isinstance(x, TensorLoad) or (isinstance(x, tirx.Cast) and isinstance(x.value, TensorLoad))

    if reduction:  # a multiply-accumulate is a sum of products of two loads (not of (x-m)²)
        op = type(value).__name__
        if op == "Add" and any(isinstance(x, tirx.Mul) and is_load(x.a) and is_load(x.b)
                               for x in (value.a, value.b)):
            return "mac"
        return _REDUCERS.get(op, op.lower())
    if isinstance(value, TensorLoad):
        return "copy"
    if calls & {"if_then_else"} and len(calls) == 1:
        return "pad"
    for name in ("erf", "tanh", "exp", "rsqrt", "sqrt", "sigmoid", "log"):
        if name in calls:
            return name
    if isinstance(value, (tirx.Max, tirx.Min)):
        inner = value.a if _is_const(value.b) else value.b
        if isinstance(inner, (tirx.Max, tirx.Min)):
            return "clip"
        if isinstance(value, tirx.Max) and any(_is_const(x) and float(x.value) == 0.0 for x in (value.a, value.b)):
            return "relu"
        return "max" if isinstance(value, tirx.Max) else "min"
    return type(value).__name__.lower()  # add, sub, mul, div, cast, select, …


def _stores(body) -> List:
    """The values a block stores: one, or several for a multi-output reduction (whose
    values are bound by `let` first; the bound value stands in for the variable)."""
    import tvm_ffi
    from tvm import tirx

    stores: List = []
    lets: Dict = {}
    tvm_ffi.structural_walk(body, [(tirx.BufferStore, stores.append),
                                   (tirx.LetStmt, lambda s: lets.__setitem__(s.var.name, s.value))])
    return [lets.get(s.value.name, s.value) if isinstance(s.value, tirx.Var) else s.value for s in stores]


def _block_info(block) -> Optional[BlockInfo]:
    values = _stores(block.body)
    if not block.iter_vars or not values:
        return None
    spatial, reduction = {}, {}
    for iv in block.iter_vars:
        extent = int(iv.dom.extent)
        (reduction if int(iv.iter_type) == 2 else spatial)[iv.var.name] = extent
    operands = tuple(tuple(_vars_in(r.min) for r in read.region) for read in block.reads)
    flipped = frozenset().union(*(_subtracted_vars(r.min) for read in block.reads for r in read.region))
    calls = frozenset().union(*(_calls_in(v) for v in values))
    return BlockInfo(str(block.name_hint), spatial, reduction, _label(values[0], bool(reduction), calls),
                     operands, calls, len(values), flipped, tuple(_identity(r.source) for r in block.reads),
                     tuple(_identity(w.source) for w in block.writes))


def blocks_of(prim_func) -> List[BlockInfo]:
    """The computing blocks of `prim_func` in program order (the root block left out)."""
    import tvm_ffi
    from tvm import s_tir

    found: List = []
    tvm_ffi.structural_walk(prim_func.body, [(s_tir.SBlock, found.append)], order="pre")
    return [info for info in map(_block_info, found) if info is not None]


# ---------------------------------------------------------------- classification
def _conv_kind(anchor: BlockInfo, blocks: Sequence[BlockInfo]) -> str:
    """conv{1,2,3}d, depthwise or grouped when an output channel also indexes the input
    channels, `_transpose` when the kernel is read flipped (a transposed convolution)."""
    data = 0 if anchor.windowed(0) else 1
    data_vars = frozenset().union(*anchor.operands[data])
    weight_vars = frozenset().union(*anchor.operands[1 - data])
    # the sliding-window indices: an output axis the weight does not have (y, x) plus a
    # reduction axis; a grouped channel index (output channel + rc) is not one of them
    windows = [v for v in anchor.operands[data]
               if (v & anchor.spatial.keys()) - weight_vars and v & anchor.reduction.keys()]
    if len(windows) not in (1, 2, 3):
        return "other"
    conv = f"conv{len(windows)}d" + ("_transpose" if any(b.flipped for b in blocks if b is not anchor) else "")
    if not data_vars & weight_vars & anchor.spatial.keys():
        return conv
    window = frozenset().union(*windows)
    channel_reduction = 1
    for var, extent in anchor.reduction.items():
        if var not in window:
            channel_reduction *= extent
    return ("depthwise_" if channel_reduction == 1 else "group_") + conv


def _matmul_kind(anchor: BlockInfo) -> str:
    shared = frozenset().union(*anchor.operands[0]) & frozenset().union(*anchor.operands[1])
    batch = [v for v in shared & anchor.spatial.keys() if anchor.spatial[v] > 1]
    return "batch_matmul" if batch else "dense"


def _normalisation_kind(blocks: Sequence[BlockInfo], reductions: Sequence[BlockInfo]) -> str:
    """rms_norm: one sum (of squares); layer_norm: mean and variance, with a scale (if any)
    indexed only by the normalised axes; norm: other mean–variance normalisations (group,
    instance, batch statistics: the scale runs over channels that are not normalised)."""
    if sum(b.outputs for b in reductions if b.label in ("sum", "mac")) == 1:
        return "rms_norm"
    anchor = max(reductions, key=lambda b: b.iterations)
    source = anchor.read_buffers[0] if anchor.read_buffers else None
    reduced = [i for i, v in enumerate(anchor.operands[0]) if v & anchor.reduction.keys()]
    statistics = {name for b in reductions for name in b.write_buffers}
    for block in blocks:  # the mean from the sum, the variance from the sums, …
        if block.read_buffers and set(block.read_buffers) <= statistics:
            statistics.update(block.write_buffers)
    for block in blocks:
        if block.reduction or not block.calls & {"rsqrt", "sqrt"} or source not in block.read_buffers:
            continue
        position = block.read_buffers.index(source)
        normalised = frozenset().union(*(block.operands[position][i] for i in reduced))
        kept = frozenset().union(*block.operands[position]) - normalised
        scales = [frozenset().union(*idx) for idx, name in zip(block.operands, block.read_buffers)
                  if name != source and name not in statistics and idx]
        return "norm" if any(s & kept for s in scales) else "layer_norm"
    return "norm"


def classify(blocks: Sequence[BlockInfo]) -> str:
    """The operator kind of a fused PrimFunc, one of `KINDS` (see docs/FEATURES.md)."""
    reductions = [b for b in blocks if b.reduction]
    if not reductions:
        return "elementwise"
    anchor = max(reductions, key=lambda b: b.iterations)
    if anchor.label == "mac" and len(anchor.operands) >= 2:
        if anchor.windowed(0) or anchor.windowed(1):
            return _conv_kind(anchor, blocks)
        return _matmul_kind(anchor)
    if any(anchor.windowed(i) for i in range(len(anchor.operands))) and anchor.label in ("max", "sum"):
        return "pool"
    labels = {b.label for b in blocks} | {c for b in blocks for c in b.calls}
    reduced = {b.label for b in reductions}
    if "exp" in labels and "max" in reduced:
        return "log_softmax" if "log" in labels else "softmax"
    if labels & {"rsqrt", "sqrt"} and reduced <= {"sum", "mac"}:
        return _normalisation_kind(blocks, reductions)
    if reduced <= {"sum", "max", "min"} and not labels & {"exp", "log", "rsqrt", "sqrt"}:
        return "reduce"
    return "other"


def operator_kind(prim_func) -> str:
    """The operator kind of `prim_func` (a PrimFunc, or an IRModule with one)."""
    return classify(blocks_of(_main(prim_func)))


# ---------------------------------------------------------------- the computation digest
def _fields(node) -> List:
    info = type(node).__tvm_ffi_type_info__
    fields: List = []
    while info is not None:
        fields = list(info.fields) + fields
        info = info.parent_type_info
    return fields


def _canonical(node, ids: Dict[int, str]) -> str:
    """A text of `node` with every name replaced by its order of first appearance: the same
    for two programs that differ only in names, different when anything else differs."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return repr(node)
    if isinstance(node, (list, tuple)) or type(node).__name__ == "Array":
        return "[" + ",".join(_canonical(x, ids) for x in node) + "]"
    if type(node).__name__ == "Map":
        items = sorted((_canonical(k, ids), _canonical(v, ids)) for k, v in node.items())
        return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    info = getattr(type(node), "__tvm_ffi_type_info__", None)
    if info is None:
        return f"{type(node).__name__}:{node}"
    fields = _fields(node)
    head = info.type_key
    if any(f.name in _NAME_FIELDS for f in fields):   # a named definition: a variable, buffer, block
        handle = _identity(node)
        if handle in ids:
            return ids[handle]
        ids[handle] = head = f"{head}#{len(ids)}"
    inner = ",".join(f"{f.name}={_canonical(getattr(node, f.name), ids)}" for f in fields
                     if f.name not in _NAME_FIELDS and f.name != "span")
    return f"{head}({inner})"


def computation_digest(prim_func) -> str:
    """8 hex digits naming what `prim_func` computes: its argument buffers, loops, blocks,
    iteration domains, index arithmetic and values, without any name or function attribute."""
    func = _main(prim_func)
    ids: Dict[int, str] = {}
    text = _canonical(list(func.params), ids) + _canonical(func.body, ids)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


# ---------------------------------------------------------------- the key
def _main(func_or_mod):
    """The PrimFunc of an IRModule that holds one (MetaSchedule's tasks), or the PrimFunc."""
    import tvm

    if isinstance(func_or_mod, tvm.IRModule):
        funcs = [f for _, f in func_or_mod.functions.items()]
        if len(funcs) != 1:
            raise ValueError(f"expected one PrimFunc in the module, found {len(funcs)}")
        return funcs[0]
    return func_or_mod


def argument_shapes(prim_func) -> Tuple[Tuple[Tuple[int, ...], ...], Tuple[str, ...]]:
    """Shapes and dtypes of the function's buffer arguments, in argument order."""
    func = _main(prim_func)
    shapes, dtypes = [], []
    for param in func.params:  # TVM 0.27: the parameters are the buffers themselves
        buffer = func.buffer_map[param] if hasattr(func, "buffer_map") else param
        shapes.append(tuple(int(d) for d in buffer.shape))
        dtypes.append(str(buffer.dtype))
    return tuple(shapes), tuple(dtypes)


def target_tag(target) -> str:
    """`llvm-rocketlake-1c`: the target's kind, CPU (or arch) and core count."""
    attrs = target.attrs
    parts = [str(target.kind.name)]
    for name in ("mcpu", "arch"):
        if name in attrs and str(attrs[name]):
            parts.append(str(attrs[name]))
    if "num-cores" in attrs and int(attrs["num-cores"]) > 0:
        parts.append(f"{int(attrs['num-cores'])}c")
    return "-".join(parts)


def describe(prim_func, target) -> WorkloadKey:
    """The parts of `workload_key` (kind, chain, shapes, dtype, digest, target)."""
    func = _main(prim_func)
    blocks = blocks_of(func)
    shapes, dtypes = argument_shapes(func)
    dtype = dtypes[0] if len(set(dtypes)) == 1 else "-".join(dtypes)
    return WorkloadKey(classify(blocks), "-".join(b.label for b in blocks) or "empty", shapes,
                       dtype, computation_digest(func), target_tag(target))


def workload_key(prim_func, target) -> str:
    """The stable name of a workload (see the module docstring); `prim_func` may be the
    IRModule MetaSchedule keeps for a task."""
    return str(describe(prim_func, target))


def computation(key: str) -> str:
    """A workload key without its target part: the same computation on any machine."""
    return key.rsplit(".", 1)[0]


def parse_workload_key(key: str) -> WorkloadKey:
    """The parts of a key made by `workload_key` (a ValueError names what is wrong)."""
    parts = key.split(".")
    if len(parts) != 6:
        raise ValueError(f"not a workload key (kind.chain.shapes.dtype.digest.target): {key!r}")
    kind, chain, shapes, dtype, digest, target = parts
    try:
        dims = tuple(() if s == "scalar" else tuple(int(d) for d in s.split("x")) for s in shapes.split("_"))
    except ValueError:
        raise ValueError(f"not a workload key: shapes {shapes!r} are not NxM_… in {key!r}") from None
    if len(digest) != DIGEST_CHARS or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"not a workload key: {digest!r} is not a {DIGEST_CHARS}-digit digest in {key!r}")
    return WorkloadKey(kind, chain, dims, dtype, digest, target)


def shared_readable_names(keys) -> Dict[str, List[str]]:
    """Readable name → the digests of the different computations that share it, for the
    names that several of `keys` share (other strings among `keys` are left out)."""
    by_name: Dict[str, set] = {}
    for key in keys:
        try:
            parts = parse_workload_key(key)
        except ValueError:
            continue
        by_name.setdefault(f"{parts.readable}.{parts.target}", set()).add(parts.digest)
    return {name: sorted(d) for name, d in sorted(by_name.items()) if len(d) > 1}
