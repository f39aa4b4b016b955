"""Size-invariant and hardware-relative node features of a TIR graph, and the GPU
structure of lowered CUDA code.

The walk of `extract.tir.graph` (and its test oracle, tests/tir_reference.py) records,
while it builds the graph, these facts: every loop node (extent, kind,
thread tag), every memory access (the enclosing loop nodes, the |coefficient| of each
of their variables in the flat index, element and buffer bytes, memory scope) and every
allocation. `context_features` turns those records, the graph's tree and the target's
`Hardware` (`extract.tir.hardware`) into the columns `CONTEXT_NAMES`, appended to the
graph's node features. One implementation for the walk and its oracle, so they cannot
disagree.

Why: the graph's own magnitudes (trip counts, bytes touched, buffer sizes, strides)
scale with the workload, so a model trained on one workload sees values on another
that it never saw. These columns instead measure each node against the whole program
and against the machine:

  work_share       all nodes: executions of the stores in the node's subtree (of the
                   store a value expression belongs to) ÷ executions of all stores
  fits_l1, fits_l2 loops: min(1, cache ÷ bytes the loop body touches); accesses: the same
                   for the bytes the access touches over its whole nest (1: fits)
  hit_reg, hit_l1, hit_l2   accesses: 1 − 1/reuse, the share of the access's executions
                   that find their element in the vector register file / L1 / L2: reuse
                   (executions ÷ distinct elements) of the largest innermost part of its
                   loop nest whose footprint stays within that size (saturates: a reuse
                   of 1,000 or of 100,000 are both ≈ 1)
  contiguous       accesses: the innermost loop moves the index by exactly one element
  stride_lines     accesses: min(1, innermost stride in bytes ÷ cache line): the share of
                   a new cache line each innermost iteration needs
  vector_fill      vectorized loops: extent × element bits ÷ SIMD width (GPU: 0)
GPU (zero on a CPU), for each kernel (the subtree of the outermost thread binding), on
the root node (whole program: the largest kernel's values):
  threads_per_block  threads per block ÷ the target's maximum
  vthreads           log2 of virtual threads per block
  shared_per_block   shared-memory bytes per block ÷ the target's maximum
  regs_per_thread    estimated registers per thread (local bytes ÷ 4) ÷ 255
  occupancy          resident warps ÷ the multiprocessor's maximum (from threads, shared
                     memory and registers per block and the arch's limits)
  launch_invalid     1 when the kernel cannot launch (threads per block or per
                     dimension, or shared memory per block, over the target's limits)
and on accesses inside kernels:
  tx_stride          log2(1 + |coefficient of threadIdx.x|)
  coalesced          global accesses: neighbouring threads touch neighbouring (or the
                     same) elements (|coefficient of threadIdx.x| ≤ 1)
  bank_conflict      shared accesses: log2 of the bank-conflict degree of a warp,
                     gcd(stride in 4-byte words, 32) (0: none, or a broadcast)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .hardware import Hardware

CONTEXT_NAMES: Tuple[str, ...] = (
    "work_share", "fits_l1", "fits_l2", "hit_reg", "hit_l1", "hit_l2",
    "contiguous", "stride_lines", "vector_fill",
    "threads_per_block", "vthreads", "shared_per_block", "regs_per_thread", "occupancy", "launch_invalid",
    "tx_stride", "coalesced", "bank_conflict",
)
_C = {name: i for i, name in enumerate(CONTEXT_NAMES)}
REGISTER_FILE_BYTES = 16 * 32  # 16 SIMD registers of 256 bits (the footprint of hit_reg)


@dataclass
class AccessRecord:
    node: int
    loops: Tuple[int, ...]          # enclosing loop nodes, outermost first
    coefficients: Tuple[float, ...]  # |coefficient| of each of their variables in the index
    element_bytes: float
    buffer_bytes: float
    scope: str                      # global / local / shared
    is_store: bool


@dataclass
class Records:
    """What a walk records for `context_features`."""

    loops: Dict[int, Tuple[int, str, str]] = field(default_factory=dict)  # node → (extent, kind, tag)
    accesses: List[AccessRecord] = field(default_factory=list)
    allocs: List[Tuple[int, float, str]] = field(default_factory=list)  # (node, bytes, scope)

    def loop(self, node: int, extent: int, kind: str, tag: str = "") -> None:
        self.loops[node] = (int(extent), kind, tag)

    def access(self, node: int, loops: Sequence[int], coefficients: Sequence[float], element_bytes: float,
               buffer_bytes: float, scope: str, is_store: bool) -> None:
        self.accesses.append(AccessRecord(node, tuple(loops), tuple(abs(float(c)) for c in coefficients),
                                          float(element_bytes), float(buffer_bytes), scope, bool(is_store)))

    def alloc(self, node: int, nbytes: float, scope: str) -> None:
        self.allocs.append((node, float(nbytes), scope))


def _log(x: float) -> float:
    return math.log2(1.0 + abs(float(x)))


def _parents(num_nodes: int, edges: np.ndarray) -> np.ndarray:
    parent = np.full(num_nodes, -1, dtype=np.int64)
    if len(edges):
        parent[edges[:, 1]] = edges[:, 0]
    return parent


def _reuse_within(access: AccessRecord, extents: Sequence[int], limit: float) -> float:
    """Reuse (executions ÷ distinct elements) of the largest innermost part of the nest
    whose footprint stays within `limit` bytes."""
    touched = trips = 1.0
    best = 1.0
    for c, e in zip(reversed(access.coefficients), reversed(extents)):
        trips *= e
        if c != 0:
            touched *= e
        if touched * access.element_bytes > limit:
            break
        best = trips / touched
    return best


def context_features(num_nodes: int, edges: np.ndarray, records: Records, hw: Hardware) -> np.ndarray:
    """The `CONTEXT_NAMES` columns (float32, one row per node) from a walk's records."""
    out = np.zeros((num_nodes, len(CONTEXT_NAMES)), dtype=np.float64)
    parent = _parents(num_nodes, edges)
    extent_of = {n: e for n, (e, _, _) in records.loops.items()}

    # ---------------------------------------------------------------- work share
    trips = np.ones(num_nodes)
    for n in range(1, num_nodes):  # pre-order: a parent comes before its children
        p = parent[n]
        trips[n] = trips[p] * (extent_of.get(int(p), 1) if p >= 0 else 1)
    work = np.zeros(num_nodes)
    store_of = np.full(num_nodes, -1, dtype=np.int64)
    for a in records.accesses:
        if a.is_store:
            work[a.node] = trips[a.node]
            store_of[a.node] = a.node
    for n in range(1, num_nodes):  # value expressions take their store's executions
        p = parent[n]
        if store_of[n] < 0 and p >= 0 and store_of[p] >= 0:
            store_of[n] = store_of[p]
    subtree = work.copy()
    for n in range(num_nodes - 1, 0, -1):
        if parent[n] >= 0:
            subtree[parent[n]] += subtree[n]
    total = max(work.sum(), 1.0)
    share = np.where(store_of >= 0, work[np.maximum(store_of, 0)], subtree) / total
    out[:, _C["work_share"]] = np.minimum(share, 1.0)

    # ---------------------------------------------------------------- accesses
    body_bytes: Dict[int, float] = {}
    vector_bits: Dict[int, float] = {}
    for a in records.accesses:
        extents = [extent_of.get(n, 1) for n in a.loops]
        touched_nest = math.prod(e for c, e in zip(a.coefficients, extents) if c != 0)
        nest_bytes = min(touched_nest * a.element_bytes, a.buffer_bytes)
        row = out[a.node]
        if not hw.is_gpu:
            row[_C["fits_l1"]] = min(1.0, hw.l1_bytes / max(nest_bytes, 1.0))
            row[_C["fits_l2"]] = min(1.0, hw.l2_bytes / max(nest_bytes, 1.0))
            row[_C["hit_reg"]] = 1.0 - 1.0 / _reuse_within(a, extents, REGISTER_FILE_BYTES)
            row[_C["hit_l1"]] = 1.0 - 1.0 / _reuse_within(a, extents, hw.l1_bytes)
            row[_C["hit_l2"]] = 1.0 - 1.0 / _reuse_within(a, extents, hw.l2_bytes)
        inner = a.coefficients[-1] if a.coefficients else 0.0
        row[_C["contiguous"]] = float(inner == 1.0)
        row[_C["stride_lines"]] = min(1.0, inner * a.element_bytes / hw.line_bytes)
        # the bytes each enclosing loop's body touches through this access
        touched = 1.0
        for k in range(len(a.loops) - 1, -1, -1):
            if a.coefficients[k] != 0:
                touched *= extents[k]
            loop = a.loops[k]
            body_bytes[loop] = body_bytes.get(loop, 0.0) + min(touched * a.element_bytes, a.buffer_bytes)
        if a.loops and records.loops[a.loops[-1]][1] == "vectorized":
            vector_bits[a.loops[-1]] = max(vector_bits.get(a.loops[-1], 0.0), a.element_bytes * 8)
    for node, (extent, kind, _) in records.loops.items():
        if not hw.is_gpu:
            nbytes = max(body_bytes.get(node, 0.0), 1.0)
            out[node, _C["fits_l1"]] = min(1.0, hw.l1_bytes / nbytes)
            out[node, _C["fits_l2"]] = min(1.0, hw.l2_bytes / nbytes)
            if kind == "vectorized":
                out[node, _C["vector_fill"]] = extent * vector_bits.get(node, 32.0) / hw.vector_bits
    if hw.is_gpu:
        _gpu_features(out, parent, records, hw)
    return out.astype(np.float32)


def _gpu_features(out: np.ndarray, parent: np.ndarray, records: Records, hw: Hardware) -> None:
    """Kernel-level features on the root, coalescing and bank conflicts on accesses."""
    tags = {n: tag for n, (_, kind, tag) in records.loops.items() if kind in ("thread", "vthread")}
    kernels: Dict[int, List[int]] = {}  # outermost thread binding → the thread bindings below it
    for n in sorted(tags):
        p, top = parent[n], n
        while p >= 0:
            if int(p) in tags:
                top = int(p)
            p = parent[p]
        kernels.setdefault(top, []).append(n)

    def kernel_of(node: int) -> Optional[int]:
        p = node
        while p >= 0:
            if int(p) in kernels:
                return int(p)
            p = parent[p]
        return None

    shared: Dict[int, float] = {}
    local: Dict[int, float] = {}
    for node, nbytes, scope in records.allocs:
        k = kernel_of(node)
        if k is not None and scope == "shared":
            shared[k] = shared.get(k, 0.0) + nbytes
        elif k is not None and scope == "local":
            local[k] = local.get(k, 0.0) + nbytes
    root = out[0]
    for k, members in kernels.items():
        dims: Dict[str, int] = {}
        vthreads = 1
        for n in members:
            extent, kind, tag = records.loops[n]
            if kind == "vthread" or tag.startswith("vthread"):
                vthreads *= extent
            elif tag.startswith("threadIdx"):
                dims[tag] = max(dims.get(tag, 1), extent)
        threads = math.prod(dims.values()) if dims else 1
        smem = shared.get(k, 0.0)
        regs = local.get(k, 0.0) / 4
        invalid = threads > hw.max_threads_per_block or smem > hw.max_shared_per_block or any(
            dims.get(f"threadIdx.{d}", 1) > limit for d, limit in zip("xyz", hw.max_thread_xyz))
        occupancy = 0.0 if invalid else _occupancy(threads, smem, regs, hw)
        values = {"threads_per_block": threads / hw.max_threads_per_block, "vthreads": _log(vthreads),
                  "shared_per_block": smem / hw.max_shared_per_block,
                  "regs_per_thread": regs / hw.max_regs_per_thread, "launch_invalid": float(invalid)}
        for name, v in values.items():
            root[_C[name]] = max(root[_C[name]], v)
        root[_C["occupancy"]] = occupancy if root[_C["occupancy"]] == 0 else min(root[_C["occupancy"]], occupancy)
    for a in records.accesses:
        k = kernel_of(a.node)
        if k is None:
            continue
        tx = [c for n, c in zip(a.loops, a.coefficients) if records.loops[n][2] == "threadIdx.x"]
        stride = tx[-1] if tx else 0.0
        row = out[a.node]
        row[_C["tx_stride"]] = _log(stride)
        if a.scope == "global":
            row[_C["coalesced"]] = float(stride <= 1.0)
        elif a.scope == "shared" and stride > 0:
            words = stride * a.element_bytes / hw.bank_bytes
            degree = math.gcd(int(round(words)), hw.shared_banks) if words >= 1 and words == int(words) else 1
            row[_C["bank_conflict"]] = math.log2(degree)


def _occupancy(threads: int, smem: float, regs: float, hw: Hardware) -> float:
    warps = -(-threads // hw.warp_size)
    limits = [hw.max_blocks_per_sm, hw.max_threads_per_sm // (warps * hw.warp_size)]
    if smem > 0:
        limits.append(int(hw.shared_per_sm // smem))
    regs = min(max(regs, 16.0), hw.max_regs_per_thread)
    limits.append(int(hw.regs_per_sm // (regs * warps * hw.warp_size)))
    blocks = max(0, min(limits))
    return min(1.0, blocks * warps * hw.warp_size / hw.max_threads_per_sm)
