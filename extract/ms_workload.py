"""Stable names for MetaSchedule workloads: what operator a PrimFunc computes, on what shapes.

MetaSchedule identifies a workload by the structural hash of its IRModule, which says
nothing to a reader and changes with TVM's printer/IR details; Relax names tasks by the
order operators were fused (`fused_conv2d13_add15_add16_relu8`), which changes with the
network. tpsim needs one name per computation that is the same in every run and every
network, so that records of one workload from two runs (or two networks) meet, and so
that splits by operator kind can be made. `workload_key(prim_func, target)` builds it
from the PrimFunc itself:

    conv2d.pad-mac-add-relu.1x64x56x56_64x64x3x3_1x64x1x1_1x64x56x56.float32.llvm-rocketlake-1c
    <kind>.<block chain>.<argument shapes, output last>.<dtype>.<target>

* kind: from the anchor block (the reduction with the most iterations) and how it reads
  its operands: conv2d / depthwise_conv2d / group_conv2d (a multiply-accumulate whose
  input index mixes an output axis with a reduction axis: a sliding window), dense and
  batch_matmul (a multiply-accumulate without a window; batch when both operands share an
  output axis longer than 1), pool (a max or sum reduction over a window), softmax (exp
  and a max reduction), layer_norm (rsqrt over sum reductions), reduce, or elementwise
  (no reduction: injective fused operators, copies, transposes).
* block chain: one label per block in program order (pad, copy, mac, sum, max, add, mul,
  relu, clip, exp, erf, …), so that e.g. a conv with and without a fused ReLU differ.
* shapes and dtype of the function's arguments; the target's kind, CPU and core count.

Block names from TOPI are not used for anything but the depthwise/grouped hint, so the
key survives renaming; it would change if TVM legalised an operator into different blocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

KINDS = ("conv2d", "depthwise_conv2d", "group_conv2d", "dense", "batch_matmul", "pool",
         "softmax", "layer_norm", "reduce", "elementwise")
_REDUCERS = {"Add": "sum", "Max": "max", "Min": "min"}


@dataclass(frozen=True)
class BlockInfo:
    """What the key needs to know about one block (a TIR `SBlock` with iteration variables)."""

    name: str
    spatial: Dict[str, int]      # data-parallel iteration variable → extent
    reduction: Dict[str, int]    # reduction iteration variable → extent
    label: str                   # pad, copy, mac, sum, max, add, relu, exp, …
    operands: Tuple[Tuple[FrozenSet[str], ...], ...]  # per read buffer: vars used by each index
    calls: FrozenSet[str]        # intrinsic calls in the stored value (exp, erf, rsqrt, …)

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


@dataclass(frozen=True)
class WorkloadKey:
    """The parts of a key; `str(WorkloadKey)` is the key."""

    kind: str
    chain: str
    shapes: Tuple[Tuple[int, ...], ...]
    dtype: str
    target: str

    def __str__(self) -> str:
        shapes = "_".join("x".join(str(d) for d in shape) or "scalar" for shape in self.shapes)
        return f"{self.kind}.{self.chain}.{shapes}.{self.dtype}.{self.target}"


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


def _is_const(expr) -> bool:
    from tvm import tirx

    return isinstance(expr, (tirx.IntImm, tirx.FloatImm))


def _label(store, reduction: bool, calls: FrozenSet[str]) -> str:
    """One word for what a block computes (see the module docstring)."""
    from tvm import tirx
    from tvm.ir.expr import TensorLoad  # TVM 0.27's buffer load (tirx.BufferLoad builds one)

    def is_load(x) -> bool:
        return isinstance(x, TensorLoad) or (isinstance(x, tirx.Cast) and isinstance(x.value, TensorLoad))

    value = store.value
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


def _block_info(block) -> Optional[BlockInfo]:
    from tvm import tirx

    if not block.iter_vars or not isinstance(block.body, tirx.BufferStore):
        return None
    spatial, reduction = {}, {}
    for iv in block.iter_vars:
        extent = int(iv.dom.extent)
        (reduction if int(iv.iter_type) == 2 else spatial)[iv.var.name] = extent
    operands = tuple(tuple(_vars_in(r.min) for r in read.region) for read in block.reads)
    calls = _calls_in(block.body.value)
    return BlockInfo(str(block.name_hint), spatial, reduction,
                     _label(block.body, bool(reduction), calls), operands, calls)


def blocks_of(prim_func) -> List[BlockInfo]:
    """The computing blocks of `prim_func` in program order (the root block left out)."""
    import tvm_ffi
    from tvm import s_tir

    found: List = []
    tvm_ffi.structural_walk(prim_func.body, [(s_tir.SBlock, found.append)], order="pre")
    return [info for info in map(_block_info, found) if info is not None]


# ---------------------------------------------------------------- classification
def _conv_kind(anchor: BlockInfo) -> str:
    """conv2d, or depthwise/group conv when an output channel also indexes the input."""
    data = 0 if anchor.windowed(0) else 1
    weight = 1 - data
    data_vars = frozenset().union(*anchor.operands[data])
    weight_vars = frozenset().union(*anchor.operands[weight])
    grouped = bool(data_vars & weight_vars & anchor.spatial.keys())
    if not grouped and "group" not in anchor.name and "depthwise" not in anchor.name:
        return "conv2d"
    # the sliding-window indices: an output axis the weight does not have (y, x) plus a
    # reduction axis; the grouped channel index (output channel + rc) is not one of them
    window = frozenset().union(*(v for v in anchor.operands[data]
                                 if (v & anchor.spatial.keys()) - weight_vars and v & anchor.reduction.keys()))
    channel_reduction = 1
    for var, extent in anchor.reduction.items():
        if var not in window:
            channel_reduction *= extent
    return "depthwise_conv2d" if channel_reduction == 1 else "group_conv2d"


def _matmul_kind(anchor: BlockInfo) -> str:
    shared = frozenset().union(*anchor.operands[0]) & frozenset().union(*anchor.operands[1])
    batch = [v for v in shared & anchor.spatial.keys() if anchor.spatial[v] > 1]
    return "batch_matmul" if batch else "dense"


def classify(blocks: Sequence[BlockInfo]) -> str:
    """The operator kind of a fused PrimFunc, one of `KINDS` (see the module docstring)."""
    reductions = [b for b in blocks if b.reduction]
    if not reductions:
        return "elementwise"
    anchor = max(reductions, key=lambda b: b.iterations)
    if anchor.label == "mac" and len(anchor.operands) >= 2:
        if anchor.windowed(0) or anchor.windowed(1):
            return _conv_kind(anchor)
        return _matmul_kind(anchor)
    if any(anchor.windowed(i) for i in range(len(anchor.operands))) and anchor.label in ("max", "sum"):
        return "pool"
    labels = {b.label for b in blocks}
    if "exp" in labels and "max" in {b.label for b in reductions}:
        return "softmax"
    if labels & {"rsqrt", "sqrt"} and "sum" in {b.label for b in reductions}:
        return "layer_norm"
    return "reduce"


def operator_kind(prim_func) -> str:
    """The operator kind of `prim_func` (a PrimFunc, or an IRModule with one)."""
    return classify(blocks_of(_main(prim_func)))


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
    """The parts of `workload_key` (kind, chain, shapes, dtype, target)."""
    blocks = blocks_of(_main(prim_func))
    shapes, dtypes = argument_shapes(prim_func)
    dtype = dtypes[0] if len(set(dtypes)) == 1 else "-".join(dtypes)
    return WorkloadKey(classify(blocks), "-".join(b.label for b in blocks) or "empty", shapes,
                       dtype, target_tag(target))


def workload_key(prim_func, target) -> str:
    """The stable name of a workload (see the module docstring); `prim_func` may be the
    IRModule MetaSchedule keeps for a task."""
    return str(describe(prim_func, target))


def parse_workload_key(key: str) -> WorkloadKey:
    """The parts of a key made by `workload_key`."""
    parts = key.split(".")
    if len(parts) != 5:
        raise ValueError(f"not a workload key (kind.chain.shapes.dtype.target): {key!r}")
    kind, chain, shapes, dtype, target = parts
    dims = tuple(() if s == "scalar" else tuple(int(d) for d in s.split("x")) for s in shapes.split("_"))
    return WorkloadKey(kind, chain, dims, dtype, target)
