"""A MetaSchedule trace as a fixed-length sequence of primitive tokens: what `tlp` reads.

TLP (Zhai et al., "TLP: A Deep Learning-based Cost Model for Tensor Program Tuning",
ASPLOS 2023) ranks schedules by the schedule primitives that made them, not by the
program they make: each primitive of the schedule, with its arguments, is one token of a
sentence, and a self-attention model reads the sentence. A MetaSchedule record keeps
exactly such a sentence, its trace (`[instructions, decisions]`, each instruction
`[kind, inputs, attributes, outputs]`; the whole trace, postprocessing included, as the
database stores it). Each instruction, in trace order, becomes one token of
`TOKEN_WIDTH` values:

  0  kind        1 + the index of the instruction's kind in `INSTRUCTION_KINDS` (every
                 kind TVM 0.27 registers); `OTHER_KIND` for a kind not listed (another
                 TVM), counted; 0 marks padding
  1  annotation  Annotate / Unannotate: 1 + the index of its key in `ANNOTATION_KEYS`,
                 `OTHER_ANNOTATION` for another key; 0 for other instructions
  2  postproc    1 after the `EnterPostproc` marker (the postprocessors' rewriting), else 0
  3  stage       the stage its first block input names (none: its first block output):
                 1 + the order in which the trace first names that block (`GetSBlock`
                 by block name; a block another instruction returns is a stage of its
                 own); 0: no block
  4  loops       how many loop inputs
  5  axis        the first loop input's axis: 1 + its position among the loops of the
                 `GetLoops` it descends from (through `Split` and `Fuse`); 0: none
  6  part        the first loop input's part: 1 + its position among its `Split`'s
                 outputs; 0: not a split part
  7  outputs     how many random variables it defines
  8… values      up to `VALUE_SLOTS` numbers, each as sign(v)·log2(1 + |v|), in order:
                 its inputs' values (an expression variable resolved to what was sampled
                 for it: `Split`'s factors, the unroll step an `Annotate` sets; a loop of
                 `SampleComputeLocation`: the location chosen; number literals), its
                 numeric attributes (strings, lists and the rest left out), then its
                 decision (tile factors, the candidate chosen, the compute location)

Stage, axis and part are TLP's stage and iterator ids; the values are its numeric
arguments. A trace longer than `TRACE_LENGTH` instructions keeps the first ones, and an
instruction with more than `VALUE_SLOTS` values its first; what is cut is counted
(`TraceTokens.cut`, kept as the sample's `meta.extra["trace_cut"]`), as are instructions of an
unlisted kind (`meta.extra["trace_unknown"]`). On datasets/networks_rocketlake a trace has 13
to 76 instructions, of 22 kinds, and an instruction at most 6 values: nothing is cut.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

TRACE_TOKENS_VECTOR = "trace_tokens"
TRACE_TOKENS_VERSION = 1    # part of the extraction cache's key: a change here re-extracts
TRACE_LENGTH = 96           # tokens kept per trace
VALUE_SLOTS = 8
HEADER = ("kind", "annotation", "postproc", "stage", "loops", "axis", "part", "outputs")
TOKEN_WIDTH = len(HEADER) + VALUE_SLOTS
CATEGORICAL_COLUMNS = 2     # kind and annotation: indices, the model one-hots them

# every instruction kind TVM 0.27 registers (tests check each against tvm.s_tir.schedule.InstructionKind)
INSTRUCTION_KINDS: Tuple[str, ...] = (
    "GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks",
    "Split", "LoopPartition", "Fuse", "Merge", "Reorder", "ReorderBlockIterVar", "AddUnitLoop",
    "Parallel", "Vectorize", "Bind", "Unroll",
    "CacheRead", "CacheWrite", "ReindexCacheRead", "ReindexCacheWrite", "CacheInplace", "CacheIndex",
    "ReIndex", "ReadAt", "WriteAt", "SetScope", "UnsafeSetDType",
    "ComputeAt", "ReverseComputeAt", "ComputeInline", "ReverseComputeInline", "FuseReductionEpilogue",
    "Blockize", "Tensorize", "DecomposeReduction", "DecomposePadding", "RFactor", "StorageAlign",
    "Annotate", "Unannotate", "TransformLayout", "TransformBlockLayout", "PadEinsum", "RollingBuffer",
    "AnnotateBufferAccess", "UnsafeHideBufferAccess",
    "SampleCategorical", "SamplePerfectTile", "SamplePartitionedTile", "SampleComputeLocation",
    "EnterPostproc",
)
OTHER_KIND = len(INSTRUCTION_KINDS) + 1
ANNOTATION_KEYS: Tuple[str, ...] = (
    "meta_schedule.tiling_structure", "meta_schedule.parallel", "meta_schedule.vectorize",
    "meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit", "pragma_auto_unroll_max_step",
    "pragma_unroll_explicit", "meta_schedule.random_compute_producer", "schedule_rule",
    "meta_schedule.cooperative_fetch", "meta_schedule.auto_tensorize", "meta_schedule.layout_rewrite_preproc",
)
OTHER_ANNOTATION = len(ANNOTATION_KEYS) + 1
_KIND_INDEX = {k: i + 1 for i, k in enumerate(INSTRUCTION_KINDS)}
_ANNOTATION_INDEX = {k: i + 1 for i, k in enumerate(ANNOTATION_KEYS)}


@dataclass
class TraceTokens:
    """The (TRACE_LENGTH · TOKEN_WIDTH,) float32 tokens of a trace; how many of its
    instructions were cut (beyond TRACE_LENGTH, or values beyond VALUE_SLOTS); how many
    are of a kind not in INSTRUCTION_KINDS."""

    vector: np.ndarray
    cut: int = 0
    unknown: int = 0


@dataclass
class _Variables:
    """What the instructions so far defined: each random variable's stage (blocks),
    (axis, part) (loops) and values (sampled expressions, chosen compute locations)."""

    stages: Dict[str, int]
    block_names: Dict[str, int]
    loops: Dict[str, Tuple[int, int]]
    values: Dict[str, List[float]]


def _signed_log2(v: float) -> float:
    return math.copysign(math.log2(1.0 + abs(v)), v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _flat_numbers(attrs: Sequence[Any]) -> List[float]:
    """The numeric attributes, in order (strings, lists and nulls left out)."""
    return [float(a) for a in attrs if _is_number(a)]


def _decision_values(kind: str, attrs: Sequence[Any], decision: Any) -> List[float]:
    """A decision's numbers: tile factors, the candidate chosen (its value where the
    candidates are numbers), the compute location."""
    if decision is None:
        return []
    if kind == "SampleCategorical":
        try:
            return [float(attrs[0][int(decision)])]
        except (TypeError, ValueError, IndexError):
            return [float(decision)]
    values = decision if isinstance(decision, list) else [decision]
    return [float(v) for v in values if _is_number(v)]


def _define(kind: str, inst: List[Any], decided: List[float], first_loop: Tuple[int, int],
            known: _Variables) -> None:
    """Record what the instruction's outputs are."""
    _, _, attrs, outputs = inst
    for i, out in enumerate(outputs):
        if not isinstance(out, str):
            continue
        if out.startswith("b"):
            name = attrs[0] if kind == "GetSBlock" and attrs and isinstance(attrs[0], str) else None
            if name is not None and name in known.block_names:
                known.stages[out] = known.block_names[name]
            else:
                known.stages[out] = len(known.block_names) + 1
                known.block_names[name if name is not None else f"#{out}"] = known.stages[out]
        elif out.startswith("l"):
            if kind == "GetLoops":
                known.loops[out] = (i + 1, 0)
            elif kind == "Split":
                known.loops[out] = (first_loop[0], i + 1)
            else:
                known.loops[out] = (first_loop[0], 0)
            if kind == "SampleComputeLocation":
                known.values[out] = decided
        elif out.startswith("v"):
            if kind in ("SamplePerfectTile", "SamplePartitionedTile") and i < len(decided):
                known.values[out] = [decided[i]]
            elif len(outputs) == 1:
                known.values[out] = decided


def _token(kind: str, inst: List[Any], decision: Any, postproc: bool, known: _Variables) -> Tuple[List[float], bool]:
    """(one token, whether values were cut), and the outputs recorded in `known`."""
    _, inputs, attrs, outputs = inst
    blocks = [known.stages.get(a, 0) for a in inputs if isinstance(a, str) and a.startswith("b")]
    loops = [known.loops.get(a, (0, 0)) for a in inputs if isinstance(a, str) and a.startswith("l")]
    values: List[float] = []
    for a in inputs:
        if _is_number(a):
            values.append(float(a))
        elif isinstance(a, str) and a in known.values:
            values += known.values[a]
    decided = _decision_values(kind, attrs, decision)
    values += _flat_numbers(attrs) + decided
    annotation = 0
    if kind in ("Annotate", "Unannotate") and attrs and isinstance(attrs[0], str):
        annotation = _ANNOTATION_INDEX.get(attrs[0], OTHER_ANNOTATION)
    first_loop = loops[0] if loops else (0, 0)
    _define(kind, inst, decided, first_loop, known)
    if not blocks:
        blocks = [known.stages[a] for a in outputs if isinstance(a, str) and a in known.stages]
    header = [_KIND_INDEX.get(kind, OTHER_KIND), annotation, float(postproc), blocks[0] if blocks else 0,
              len(loops), first_loop[0], first_loop[1], len(outputs)]
    kept = [_signed_log2(v) for v in values[:VALUE_SLOTS]]
    return header + kept + [0.0] * (VALUE_SLOTS - len(kept)), len(values) > VALUE_SLOTS


def trace_tokens(trace: Any) -> TraceTokens:
    """The tokens of a MetaSchedule trace: its JSON (`[instructions, decisions]`, as a
    database record or `Trace.as_json()` gives it) or that JSON's text (module docstring)."""
    if isinstance(trace, str):
        trace = json.loads(trace)
    insts, decisions = trace[0], trace[1]
    decided = {int(i): d for i, d in decisions}
    known = _Variables({}, {}, {}, {})
    tokens = np.zeros((TRACE_LENGTH, TOKEN_WIDTH), dtype=np.float32)
    postproc, cut, unknown = False, max(0, len(insts) - TRACE_LENGTH), 0
    for i, inst in enumerate(insts):
        kind = str(inst[0])
        unknown += kind not in _KIND_INDEX
        token, values_cut = _token(kind, inst, decided.get(i), postproc, known)
        postproc = postproc or kind == "EnterPostproc"
        if i < TRACE_LENGTH:
            tokens[i] = token
            cut += values_cut
    return TraceTokens(tokens.reshape(-1), cut, unknown)


def unpack_tokens(vectors: np.ndarray) -> np.ndarray:
    """Packed token vectors (n, TRACE_LENGTH · TOKEN_WIDTH) as (n, TRACE_LENGTH, TOKEN_WIDTH)."""
    return np.asarray(vectors).reshape(len(vectors), -1, TOKEN_WIDTH)
