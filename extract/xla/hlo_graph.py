"""XLA HLO modules → TpuGraphs graph arrays: the featurizer behind every XLA graph.

`featurize_module(module)` turns an `HloModuleProto` into an `HloGraph`: the node, edge
and split arrays exactly as a TpuGraphs npz file stores them (format:
extract/xla/npz_format.py). `read_hlo_module(path)` reads a serialized `HloModuleProto`
(from `jax.jit(f).lower(...).compiler_ir("hlo").as_serialized_hlo_module_proto()` or
from `compiled.runtime_executable().hlo_modules()[i].as_serialized_hlo_module_proto()`)
or an `HloProto` (what `XLA_FLAGS=--xla_dump_hlo_as_proto` dumps: the module plus its
buffer assignment); `kernel_modules(module)` cuts a compiled module into the one-kernel
modules TpuGraphs' tile collection holds. The converters to npz files are
extract/xla/convert_hlo.py (HLO files, JAX functions) and extract/xla/convert_tuning.py (TpuGraphs' raw
tuning records); this module writes nothing.

Graph (identical to TpuGraphs' `HloEncoder`, tpu_graphs/process_data/xla/hlo_encoder.cc)
-----------------------------------------------------------------------------------------
* Nodes: every instruction of every computation, in the proto's order — computations
  callees-first, instructions operands-first — so node ids are topological within a
  computation. Node i of the npz is the i-th instruction met in that walk; every
  instruction appears exactly once.
* Node types: TpuGraphs' opcode ids (`OPCODE_IDS`, from hlo_opcode.h; ids are frozen
  there and 97/101 are retired opcodes). An opcode outside that vocabulary gets
  `UNKNOWN_OPCODE_ID` = 0, TpuGraphs' own id for unknown opcodes; such opcodes are
  counted per name (`HloGraph.unknown_opcodes`, sample `meta.extra["unknown_opcodes"]`) and
  printed by the CLI.
* Edges, `HloGraph.edge_index` as the npz stores them: (u, v) = "u consumes v": one per
  distinct operand of an instruction, plus (caller, root of callee) for each
  computation an instruction calls (fusion, while, reduce, …), sorted by (u, v).
  They stay in this orientation until a `GraphSample` is built from them
  (`extract.xla.npz_format.sample_from_arrays`), whose edges run producer → consumer.
* `node_splits`: node offsets where a computation whose name contains "cluster",
  "while" or "cond" ends, starting with 0 and ending with the node count.
* Node features: 140 float32 per node, named in `NODE_FEATURE_NAMES` (same order as the
  tpu_graphs README's "Node Features" list). A list-valued field (shape dimensions,
  window sizes, …) becomes its first k entries zero-padded, then its sum and product
  where the README lists them; the product of an empty list is 1, as TpuGraphs
  computes it (so a scalar has shape_dimensions_product = 1 and a non-window op has
  window_size_product = 1). Fields an opcode lacks are 0. Element types newer than
  TpuGraphs (F8*, S4, …) have an all-zero one-hot.

Checks
------
`module_problem(module)` says why a parsed module is not usable, or None; the
featurizer, `kernel_modules` and the readers refuse such a module with a ValueError
naming the file and the first problem. Besides the basics (computations, instructions,
opcodes, unique ids) everything the module declares must resolve: operands are earlier
instructions of the same computation, control predecessors instructions of the same
computation, called computations exist, have instructions and come before their caller
(XLA writes callees first), the entry computation named by `entry_computation_name` /
`entry_computation_id` is there, parameters are numbered 0..k-1, and program shapes
(`host_program_shape`, each computation's `program_shape`) declare as many parameters
as there are. A module cut short between two computations still parses — the wire
format has no end marker — but has lost its entry computation, which XLA writes last,
and is refused. A feature float32 cannot hold (a product of huge dimensions) is refused
too, naming the instruction and the feature: node_feat is always finite.

Kernels (tile graphs)
---------------------
TpuGraphs' tile samples are small modules holding one kernel: an entry computation
named after the kernel with one `parameter.i` per distinct operand, the kernel's
instruction as root, and the computations it calls (for a fusion, the fused computation
and its reducers etc.). `kernel_modules` cuts such a module out for every instruction
of the top-level computations (the entry and the bodies of while/conditional/call)
except parameters, constants, tuples, bitcasts and control flow: fusions, plus
standalone ops such as a copy or an unfused convolution — the raw TpuGraphs sample has
both kinds (fusion.191, copy.24). A computation called by several kernels (a reducer,
say) is copied into each. `is_fused(module)` says whether a module has been through
XLA's fusion pass at all: one that has not is not cut into kernels by the converter.
"""
from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Counter, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from extract.xla import proto

# TpuGraphs' opcode vocabulary (tpu_graphs/process_data/xla/hlo_opcode.h).
OPCODE_IDS: Dict[str, int] = {
    "abs": 1, "add": 2, "add-dependency": 3, "after-all": 4, "all-reduce": 5,
    "all-to-all": 6, "atan2": 7, "batch-norm-grad": 8, "batch-norm-inference": 9,
    "batch-norm-training": 10, "bitcast": 11, "bitcast-convert": 12, "broadcast": 13,
    "call": 14, "ceil": 15, "cholesky": 16, "clamp": 17, "collective-permute": 18,
    "count-leading-zeros": 19, "compare": 20, "complex": 21, "concatenate": 22,
    "conditional": 23, "constant": 24, "convert": 25, "convolution": 26, "copy": 27,
    "copy-done": 28, "copy-start": 29, "cosine": 30, "custom-call": 31, "divide": 32,
    "domain": 33, "dot": 34, "dynamic-slice": 35, "dynamic-update-slice": 36,
    "exponential": 37, "exponential-minus-one": 38, "fft": 39, "floor": 40, "fusion": 41,
    "gather": 42, "get-dimension-size": 43, "set-dimension-size": 44,
    "get-tuple-element": 45, "imag": 46, "infeed": 47, "iota": 48, "is-finite": 49,
    "log": 50, "log-plus-one": 51, "and": 52, "not": 53, "or": 54, "xor": 55, "map": 56,
    "maximum": 57, "minimum": 58, "multiply": 59, "negate": 60, "outfeed": 61, "pad": 62,
    "parameter": 63, "partition-id": 64, "popcnt": 65, "power": 66, "real": 67,
    "recv": 68, "recv-done": 69, "reduce": 70, "reduce-precision": 71,
    "reduce-window": 72, "remainder": 73, "replica-id": 74, "reshape": 75, "reverse": 76,
    "rng": 77, "rng-get-and-update-state": 78, "rng-bit-generator": 79,
    "round-nearest-afz": 80, "rsqrt": 81, "scatter": 82, "select": 83,
    "select-and-scatter": 84, "send": 85, "send-done": 86, "shift-left": 87,
    "shift-right-arithmetic": 88, "shift-right-logical": 89, "sign": 90, "sine": 91,
    "slice": 92, "sort": 93, "sqrt": 94, "subtract": 95, "tanh": 96, "trace": 97,
    "transpose": 98, "triangular-solve": 99, "tuple": 100, "tuple-select": 101,
    "while": 102, "cbrt": 103, "all-gather": 104, "collective-permute-start": 105,
    "collective-permute-done": 106, "logistic": 107, "dynamic-reshape": 108,
    "all-reduce-start": 109, "all-reduce-done": 110, "reduce-scatter": 111,
    "all-gather-start": 112, "all-gather-done": 113, "opt-barrier": 114,
    "async-start": 115, "async-update": 116, "async-done": 117,
    "round-nearest-even": 118, "stochastic-convert": 119, "tan": 120,
}
UNKNOWN_OPCODE_ID = 0
OPCODE_NAMES: Dict[int, str] = {v: k for k, v in OPCODE_IDS.items()}

# The one-hot element types, in feature order, as xla.PrimitiveType numbers.
_ONE_HOT_TYPES = [("invalid_type", 0), ("pred", 1), ("s8", 2), ("s16", 3), ("s32", 4),
                  ("s64", 5), ("u8", 6), ("u16", 7), ("u32", 8), ("u64", 9), ("f16", 10),
                  ("f32", 11), ("f64", 12), ("bf16", 16), ("c64", 15), ("c128", 18),
                  ("tuple", 13), ("opaque_type", 14), ("token", 17)]
_ONE_HOT_POSITION = {number: i for i, (_, number) in enumerate(_ONE_HOT_TYPES)}


def _sequence_names(prefix: str, width: int, tail: Sequence[str] = ("sum", "product")) -> List[str]:
    return [f"{prefix}_{i}" for i in range(width)] + [f"{prefix}_{t}" for t in tail]


NODE_FEATURE_NAMES: List[str] = (
    ["is_root", "element_size_in_bits"]
    + [f"shape_element_type_is_{name}" for name, _ in _ONE_HOT_TYPES]
    + _sequence_names("shape_dimensions", 6)
    + ["shape_tuple_shapes_size", "parameter_number"]
    + _sequence_names("dimensions", 6, tail=())
    + [n for part in ("size", "stride", "padding_low", "padding_high", "window_dilation",
                      "base_dilation") for n in _sequence_names(f"window_{part}", 6)]
    + _sequence_names("window_window_reversal", 6, tail=("true_count", "false_count"))
    + ["convolution_dim_numbers_input_batch_dim", "convolution_dim_numbers_input_feature_dim"]
    + _sequence_names("convolution_dim_numbers_input_spatial_dims", 4, tail=())
    + ["convolution_dim_numbers_kernel_input_feature_dim",
       "convolution_dim_numbers_kernel_output_feature_dim"]
    + _sequence_names("convolution_dim_numbers_kernel_spatial_dims", 4, tail=())
    + ["convolution_dim_numbers_output_batch_dim", "convolution_dim_numbers_output_feature_dim",
       "feature_group_count", "batch_group_count"]
    + [n for part in ("start", "stride", "limit") for n in _sequence_names(f"slice_dims_{part}", 2)]
    + _sequence_names("dynamic_slice_sizes", 2)
    + _sequence_names("padding_config_edge_padding_low", 2)
    + _sequence_names("padding_config_edge_padding_high", 2)
    + ["is_stable"]
    + _sequence_names("layout_minor_to_major", 6, tail=()))
NODE_FEATURE_INDEX: Dict[str, int] = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}
NUM_NODE_FEATURES = 140
assert len(NODE_FEATURE_NAMES) == NUM_NODE_FEATURES

# Computations TpuGraphs starts a new node split after (hlo_encoder.cc).
_SPLIT_COMPUTATION_MARKERS = ("cluster", "while", "cond")


def _head(values: Sequence[int], width: int) -> List[int]:
    values = list(values[:width])
    return values + [0] * (width - len(values))


def _head_sum_product(values: Sequence[int], width: int) -> List[int]:
    return _head(values, width) + [sum(values), math.prod(values)]


# Features of absent fields: an empty sequence is 0s, sum 0 and product 1 (TpuGraphs').
_NO_WINDOW = ([0] * 6 + [0, 1]) * 6 + [0] * 8  # six sequences, then the reversal bools
_NO_SLICE = [0, 0, 0, 1] * 3
_NO_PADDING = [0, 0, 0, 1] * 2


def instruction_features(inst: Any, computation_root_id: int) -> List[int]:
    """The 140 TpuGraphs features of one `HloInstructionProto` (see NODE_FEATURE_NAMES),
    as integers (every feature is an integer; the caller makes them float32)."""
    shape = inst.shape
    one_hot = [0] * len(_ONE_HOT_TYPES)
    if shape.element_type in _ONE_HOT_POSITION:
        one_hot[_ONE_HOT_POSITION[shape.element_type]] = 1
    # Most instructions have no window, slice or padding; skip building empty sequences.
    window_dims = inst.window.dimensions
    if window_dims:
        window = [d for d in window_dims]
        reversal = [int(d.window_reversal) for d in window]
        window_features = (
            _head_sum_product([d.size for d in window], 6)
            + _head_sum_product([d.stride for d in window], 6)
            + _head_sum_product([d.padding_low for d in window], 6)
            + _head_sum_product([d.padding_high for d in window], 6)
            + _head_sum_product([d.window_dilation for d in window], 6)
            + _head_sum_product([d.base_dilation for d in window], 6)
            + _head(reversal, 6) + [sum(reversal), len(reversal) - sum(reversal)])
    else:
        window_features = _NO_WINDOW
    slices = inst.slice_dimensions
    slice_features = (_head_sum_product([s.start for s in slices], 2)
                      + _head_sum_product([s.stride for s in slices], 2)
                      + _head_sum_product([s.limit for s in slices], 2)) if slices else _NO_SLICE
    padding = inst.padding_config.dimensions
    padding_features = (_head_sum_product([p.edge_padding_low for p in padding], 2)
                        + _head_sum_product([p.edge_padding_high for p in padding], 2)
                        ) if padding else _NO_PADDING
    conv = inst.convolution_dimension_numbers
    return ([int(inst.id == computation_root_id), 0] + one_hot
            + _head_sum_product(shape.dimensions, 6)
            + [len(shape.tuple_shapes), inst.parameter_number]
            + _head(inst.dimensions, 6)
            + window_features
            + [conv.input_batch_dimension, conv.input_feature_dimension]
            + _head(conv.input_spatial_dimensions, 4)
            + [conv.kernel_input_feature_dimension, conv.kernel_output_feature_dimension]
            + _head(conv.kernel_spatial_dimensions, 4)
            + [conv.output_batch_dimension, conv.output_feature_dimension,
               inst.feature_group_count, inst.batch_group_count]
            + slice_features
            + _head_sum_product(inst.dynamic_slice_sizes, 2)
            + padding_features
            + [int(inst.is_stable)]
            + _head(shape.layout.minor_to_major, 6))


@dataclass
class HloGraph:
    """One module's graph as TpuGraphs stores it (npz keys and orientation)."""
    name: str
    node_opcode: np.ndarray   # (n,) uint8 TpuGraphs opcode ids
    node_feat: np.ndarray     # (n, 140) float32
    edge_index: np.ndarray    # (m, 2) int64, (u, v) = u consumes v's output
    node_splits: np.ndarray   # (k,) int64
    node_names: List[str]     # instruction names, for messages and debugging
    unknown_opcodes: Counter = field(default_factory=collections.Counter)

    @property
    def num_nodes(self) -> int:
        return int(self.node_opcode.shape[0])

    def arrays(self) -> Dict[str, np.ndarray]:
        """The graph's npz arrays (extract/xla/npz_format.py)."""
        return {"node_feat": self.node_feat, "node_opcode": self.node_opcode,
                "edge_index": self.edge_index, "node_splits": self.node_splits}

    def meta(self) -> Dict[str, Any]:
        """What a sample of this graph records about it: opcodes typed UNK, if any."""
        return {"unknown_opcodes": dict(self.unknown_opcodes)} if self.unknown_opcodes else {}


def featurize_module(module: Any, source: str = "") -> HloGraph:
    """An `HloModuleProto` → its TpuGraphs graph (see the module docstring).

    Raises ValueError naming `source` and the first problem when the module does not
    hold together (`module_problem`: a reference that does not resolve, an entry
    computation it does not hold, …) or when a feature does not fit float32.
    """
    label = source or module.name or "<module>"
    problem = module_problem(module)
    if problem is not None:
        raise ValueError(f"{label}: {problem}")
    computation_roots = {c.id: c.root_id for c in module.computations}
    node_of_instruction: Dict[int, int] = {}
    for computation in module.computations:
        for inst in computation.instructions:
            node_of_instruction[inst.id] = len(node_of_instruction)

    opcodes: List[int] = []
    features: List[List[int]] = []
    edges: set = set()
    names: List[str] = []
    unknown: Counter = collections.Counter()
    splits = [0]
    for computation in module.computations:
        for inst in computation.instructions:
            node = len(opcodes)
            opcode_id = OPCODE_IDS.get(inst.opcode, UNKNOWN_OPCODE_ID)
            if opcode_id == UNKNOWN_OPCODE_ID:
                unknown[inst.opcode] += 1
            opcodes.append(opcode_id)
            features.append(instruction_features(inst, computation.root_id))
            names.append(inst.name)
            for operand in inst.operand_ids:
                edges.add((node, node_of_instruction[operand]))
            for called in inst.called_computation_ids:
                edges.add((node, node_of_instruction[computation_roots[called]]))
        if any(marker in computation.name for marker in _SPLIT_COMPUTATION_MARKERS):
            splits.append(len(opcodes))
    if splits[-1] < len(opcodes):
        splits.append(len(opcodes))
    edge_index = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    return HloGraph(name=module.name, node_opcode=np.array(opcodes, dtype=np.uint8),
                    node_feat=_feature_array(features, names, label), edge_index=edge_index,
                    node_splits=np.array(splits, dtype=np.int64), node_names=names,
                    unknown_opcodes=unknown)


def _feature_array(features: List[List[int]], names: List[str], label: str) -> np.ndarray:
    """The integer features as float32 (via float64: exact for integers below 2**53, then
    one rounding); a value float32 cannot hold (a product of huge dimensions, say) is a
    ValueError naming the instruction and the feature."""
    try:
        with np.errstate(over="ignore"):
            node_feat = np.array(features, dtype=np.float64).astype(np.float32)
        if np.isfinite(node_feat).all():
            return node_feat
    except OverflowError:  # an integer beyond float64
        pass
    limit = float(np.finfo(np.float32).max)
    for node, row in enumerate(features):
        for column, value in enumerate(row):
            if abs(value) > limit:
                text = str(value)
                text = text if len(text) <= 24 else f"{text[:8]}… ({len(text)} digits)"
                raise ValueError(f"{label}: instruction {names[node]} (node {node}) has "
                                 f"{NODE_FEATURE_NAMES[column]} {text}, more than float32 "
                                 "holds (not a plausible module)")
    raise AssertionError(f"{label}: a feature overflowed float32, but none is out of range")


# ---------------------------------------------------------------------------- checking

def _declared_parameters(program_shape: Any) -> Optional[int]:
    """How many parameters a ProgramShapeProto declares, or None where it is absent."""
    if not (program_shape.parameters or program_shape.parameter_names
            or program_shape.HasField("result")):
        return None
    return len(program_shape.parameters)


def _computation_problem(computation: Any, index: int, position: Dict[int, int],
                         module_ids: set) -> Optional[str]:
    """Why the `index`-th computation does not hold together, or None: its root, each
    instruction's operands (earlier instructions of the same computation), control
    predecessors (of the same computation) and callees (earlier computations;
    `position`: computation id → index), its parameter numbers and program shape."""
    name = computation.name
    ids = {inst.id for inst in computation.instructions}
    if computation.instructions and computation.root_id not in ids:
        return (f"computation {name!r} has root id {computation.root_id}, which is none of "
                "its instructions")
    earlier: set = set()
    parameters: List[int] = []
    for inst in computation.instructions:
        for operand in inst.operand_ids:
            if operand not in earlier:
                why = ("comes after it" if operand in ids else "is in another computation"
                       if operand in module_ids else "the module does not contain")
                return (f"instruction {inst.name} (id {inst.id}) in {name!r} has operand id "
                        f"{operand}, which {why}")
        for predecessor in inst.control_predecessor_ids:
            if predecessor not in ids:
                return (f"instruction {inst.name} (id {inst.id}) in {name!r} has control "
                        f"predecessor id {predecessor}, which is none of {name!r}'s instructions")
        for called in inst.called_computation_ids:
            if position.get(called, index) >= index:
                why = ("the module does not contain" if called not in position else
                       "does not come before its caller (XLA writes callees first)")
                return (f"instruction {inst.name} (id {inst.id}) in {name!r} calls computation "
                        f"id {called}, which {why}")
        if inst.opcode == "parameter":
            parameters.append(inst.parameter_number)
        earlier.add(inst.id)
    if sorted(parameters) != list(range(len(parameters))):
        return (f"computation {name!r} has parameters numbered {sorted(parameters)[:8]}, "
                f"not 0..{len(parameters) - 1}")
    declared = _declared_parameters(computation.program_shape)
    if declared is not None and declared != len(parameters):
        return (f"computation {name!r} declares {declared} parameters in its program shape "
                f"but has {len(parameters)} parameter instructions")
    return None


def _declared_entry(module: Any, position: Dict[int, int]) -> Any:
    """The entry computation the module names (by id and/or name), None when it names
    none, or a string saying why the one it names is not there."""
    count = len(module.computations)
    if module.entry_computation_id:
        if module.entry_computation_id not in position:
            return (f"its entry computation id {module.entry_computation_id} is none of its "
                    f"{count} computations (a file cut short?)")
        entry = module.computations[position[module.entry_computation_id]]
        if module.entry_computation_name and entry.name != module.entry_computation_name:
            return (f"its entry computation id {module.entry_computation_id} names "
                    f"{entry.name!r}, its entry_computation_name {module.entry_computation_name!r}")
        return entry
    if not module.entry_computation_name:
        return None
    entry = next((c for c in module.computations if c.name == module.entry_computation_name),
                 None)
    if entry is None:
        return (f"its entry computation {module.entry_computation_name!r} is none of its "
                f"{count} computations (a file cut short?)")
    return entry


def module_problem(module: Any) -> Optional[str]:
    """Why `module` is not a usable, complete HloModuleProto, or None.

    Besides the basics (computations, instructions, opcodes, unique ids), everything the
    module declares must resolve: every operand is an earlier instruction of the same
    computation, every control predecessor one of the same computation, every called
    computation exists, has instructions and comes before its caller, the entry
    computation named by `entry_computation_name` / `entry_computation_id` is there,
    parameters are numbered 0..k-1 and program shapes declare as many. A module cut
    short between two computations parses (the wire format has no end marker) but loses
    its entry computation, which XLA writes last, and fails here."""
    if not module.computations:
        return "it has no computations"
    if not any(c.instructions for c in module.computations):
        return "its computations have no instructions"
    position: Dict[int, int] = {}
    module_ids: set = set()
    for index, computation in enumerate(module.computations):
        if computation.id in position:
            return f"two computations share id {computation.id}"
        position[computation.id] = index
        for inst in computation.instructions:
            if not inst.opcode:
                return f"instruction {inst.name!r} (id {inst.id}) has no opcode"
            if inst.id in module_ids:
                return f"instruction id {inst.id} ({inst.name}) occurs twice"
            module_ids.add(inst.id)
    entry = _declared_entry(module, position)
    if isinstance(entry, str):
        return entry
    for index, computation in enumerate(module.computations):
        problem = _computation_problem(computation, index, position, module_ids)
        if problem is not None:
            return problem
    called = {c for computation in module.computations for inst in computation.instructions
              for c in inst.called_computation_ids}
    empty = next((c for c in module.computations if c.id in called and not c.instructions), None)
    if empty is not None:
        return f"computation {empty.name!r} (id {empty.id}) is called but has no instructions"
    declared = _declared_parameters(module.host_program_shape)
    if entry is not None and declared is not None:
        parameters = sum(inst.opcode == "parameter" for inst in entry.instructions)
        if declared != parameters:
            return (f"its program shape declares {declared} parameters, its entry "
                    f"computation {entry.name!r} has {parameters}")
    return None


# ---------------------------------------------------------------------------- reading

def read_hlo_module(source: Union[str, Path, bytes], name: str = "") -> Any:
    """Parse a serialized `HloModuleProto`, or an `HloProto` (XLA dump) wrapping one.

    Both messages start with a length-delimited field 1 (the module's name, or the
    wrapped module), so each reading is tried and checked; the error names the file.
    """
    data, label = proto.read_source(source, name)
    reasons = []
    for message_class, unwrap in ((proto.HloModuleProto, lambda m: m),
                                  (proto.HloProto, lambda m: m.hlo_module)):
        try:
            module = unwrap(proto.parse(message_class, data, name=label))
        except ValueError as e:
            reasons.append(str(e).removeprefix(label + ": "))
            continue
        problem = module_problem(module)
        if problem is None:
            return module
        reasons.append(f"read as {message_class.DESCRIPTOR.full_name}, {problem}")
    raise ValueError(f"{label}: not a serialized HloModuleProto or HloProto "
                     f"({'; '.join(reasons)})")


# ---------------------------------------------------------------------------- kernels

def _callees(module: Any, computation_ids: Iterable[int]) -> List[Any]:
    """The computations `computation_ids` call, transitively (themselves included), in
    the module's order (callees first)."""
    by_id = {c.id: c for c in module.computations}
    seen: set = set()
    stack = list(computation_ids)
    while stack:
        cid = stack.pop()
        if cid in seen or cid not in by_id:
            continue
        seen.add(cid)
        stack.extend(c for inst in by_id[cid].instructions for c in inst.called_computation_ids)
    return [c for c in module.computations if c.id in seen]


# Instructions that call computations as control flow: the callees' instructions run
# as kernels of their own. Every other caller (fusion, reduce, sort, map, …) applies
# its callees inside one kernel.
_CONTROL_FLOW_OPCODES = frozenset({"while", "conditional", "call", "async-start",
                                   "async-update", "async-done"})
# Top-level instructions that launch no kernel of their own.
_NO_KERNEL_OPCODES = _CONTROL_FLOW_OPCODES | {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "add-dependency", "opt-barrier", "partition-id", "replica-id", "domain"}


def _entry_computation(module: Any) -> Any:
    """The entry computation of a module `module_problem` accepts."""
    entry = _declared_entry(module, {c.id: k for k, c in enumerate(module.computations)})
    return entry if entry is not None else module.computations[-1]  # XLA writes it last


def kernel_modules(module: Any, fusions_only: bool = False, source: str = "") -> List[Any]:
    """One TpuGraphs-style kernel module per kernel of `module` (see module docstring).

    Kernels are the instructions of the top-level computations (the entry and what
    it reaches through control flow) other than parameters, constants, tuples,
    bitcasts and control flow: fusions, and standalone ops such as a copy or an
    unfused convolution (TpuGraphs' tile collection has both kinds). With
    `fusions_only`, only fusion instructions. A module `module_problem` refuses is a
    ValueError naming `source` (default: the module's name).
    """
    problem = module_problem(module)
    if problem is not None:
        raise ValueError(f"{source or module.name or '<module>'}: {problem}")
    by_id = {c.id: c for c in module.computations}
    top_level, stack = [], [_entry_computation(module).id]
    while stack:
        cid = stack.pop()
        if cid in top_level or cid not in by_id:
            continue
        top_level.append(cid)
        stack.extend(c for inst in by_id[cid].instructions
                     if inst.opcode in _CONTROL_FLOW_OPCODES for c in inst.called_computation_ids)
    shape_of = {inst.id: inst.shape for comp in module.computations for inst in comp.instructions}
    next_id = max(shape_of) + 1
    kernels = []
    for computation in module.computations:
        if computation.id not in top_level:
            continue
        for inst in computation.instructions:
            if inst.opcode in _NO_KERNEL_OPCODES or (fusions_only and inst.opcode != "fusion"):
                continue
            callees = _callees(module, inst.called_computation_ids)
            # TpuGraphs' kernels reuse the instruction id for the entry computation.
            entry_id = inst.id
            if any(c.id == entry_id for c in callees):
                entry_id, next_id = next_id, next_id + 1
            kernel = proto.HloModuleProto(name=inst.name, entry_computation_name=inst.name,
                                          id=module.id, entry_computation_id=entry_id)
            kernel.computations.extend(callees)
            entry = kernel.computations.add(name=inst.name, id=entry_id, root_id=inst.id)
            parameter_of: Dict[int, int] = {}
            for operand in inst.operand_ids:
                if operand in parameter_of:
                    continue
                number = len(parameter_of)
                parameter_of[operand] = next_id
                parameter = entry.instructions.add(
                    name=f"parameter.{number}", opcode="parameter", id=next_id,
                    parameter_number=number)
                parameter.shape.CopyFrom(shape_of[operand])
                next_id += 1
            root = entry.instructions.add()
            root.CopyFrom(inst)
            root.ClearField("operand_ids")
            root.operand_ids.extend(parameter_of[o] for o in inst.operand_ids)
            # Its control predecessors are instructions of the computation it was cut from.
            root.ClearField("control_predecessor_ids")
            kernels.append(kernel)
    return kernels


def is_fused(module: Any) -> bool:
    """Whether `module` has fusion instructions, i.e. has been through XLA's
    optimization: only such a module is cut into kernels (an unfused module, one lowered
    but not compiled, would have every op pose as its own kernel)."""
    return any(inst.opcode == "fusion" for c in module.computations for inst in c.instructions)
