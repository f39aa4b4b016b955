"""Large-graph figure: a synthetic 500,000-node HLO module, featurised and run through a
forward pass of the layout model. Goal: featurise + forward < 60 s and peak RSS < 8 GB.

    nice python -m benchmarks.large_graph [--nodes 500000] [--configs 8] [--threads 2]

Stages, each timed (wall clock) with the process RSS after it:

1. build: an `HloModuleProto` (extract/xla/proto) shaped like an XLA program — computations
   of ~200 instructions (parameters, constants, broadcasts, reshapes, transposes, 3×3
   convolutions with window and dimension numbers, dots, elementwise ops, slices, pads,
   reduces calling a reducer, fusions calling their own small fused computation), each
   consuming recent outputs, so the graph is long and narrow like real ones. Not part
   of the goal: real modules come from XLA, not from Python.
2. featurise: `extract.xla.hlo_graph.featurize_module` → TpuGraphs arrays (n × 140
   features, edges).
3. configs: the layout npz arrays (`extract.xla.npz_format.layout_arrays`, validated)
   with `--configs` random layout configs on `--config-nodes` configurable nodes
   (convolutions, dots, reshapes, transposes).
4. prepare: `simulator.data.batching.prepare_graph` on the whole graph (log1p, reverse
   edges, self-loops) and with the default pruning (configurable nodes + `--depth` hops).
5. forward: `GraphModel` (gcn, width 64, depth 3; torch.no_grad) over the whole graph:
   late join (the graph propagated once for all `--configs` configs) and early join
   (one graph copy per config; `--early-configs` 1: one 500k-node pass); and early join
   on the pruned graph with all configs, as training sees it.

The goal figure `featurise_plus_forward_s` sums featurise, configs, prepare (whole graph)
and both whole-graph forward passes (wall clock); `…_cpu_s` is the same in CPU seconds
of this process. The machine's load average is reported with them: on a shared
machine wall-clock figures grow with the CPU taken by other processes, CPU seconds much
less so (the featurizer is single-threaded; torch uses `--threads`).

Peak memory is the process's maximum RSS (VmHWM), which includes the
Python/torch/DGL runtime itself (reported as `baseline_rss_gb`). Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from extract.cli import COUNT, SEED, Int

MIN_NODES = 1000  # enough for computations with configurable (convolution, dot, reshape, transpose) nodes

def rss_gb() -> float:
    try:
        import psutil
        return psutil.Process().memory_info().rss / 2 ** 30
    except ImportError:  # pragma: no cover
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 30


def peak_rss_gb() -> float:
    from .common import peak_rss_mib
    return peak_rss_mib() / 1024


def _shape(shape, rng: np.random.Generator, rank: Optional[int] = None) -> None:
    rank = int(rng.integers(1, 5)) if rank is None else rank
    dims = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], size=rank)
    shape.element_type = int(rng.choice([11, 16, 4]))  # f32, bf16, s32
    shape.dimensions.extend(int(d) for d in dims)
    shape.layout.minor_to_major.extend(range(rank - 1, -1, -1))


# ---------------------------------------------------------------------------- the module

class _ModuleBuilder:
    """Adds computations and instructions (fresh ids, random shapes) to one module."""

    def __init__(self, name: str, rng: np.random.Generator):
        from extract.xla import proto
        self.module = proto.HloModuleProto(name=name)
        self.rng = rng
        self.last_id = 1
        self.count = 0  # instructions so far
        self.reducer_id = 0

    def new_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def computation(self, name: str):
        comp = self.module.computations.add()
        comp.name, comp.id = name, self.new_id()
        return comp

    def add(self, comp, opcode: str, operands: Sequence[int] = (), rank: Optional[int] = None):
        inst = comp.instructions.add()
        inst.id, inst.opcode, inst.name = self.new_id(), opcode, f"{opcode}.{self.last_id}"
        inst.operand_ids.extend(operands)
        _shape(inst.shape, self.rng, rank)
        self.count += 1
        return inst


# The body's ops, by a uniform draw: below FUSION a fusion (5 instructions with its fused
# computation), else the first op whose bound exceeds the draw, else an elementwise op.
FUSION = 0.06
ELEMENTWISE = ["add", "multiply", "subtract", "maximum", "exponential", "tanh", "convert", "select"]
Pick = Callable[[], int]  # a random recent instruction's id


def _convolution(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "convolution", [pick(), pick()], rank=4)
    for _ in range(2):
        d = inst.window.dimensions.add()
        d.size, d.stride, d.padding_low, d.padding_high = 3, 1, 1, 1
        d.window_dilation = d.base_dilation = 1
    cdn = inst.convolution_dimension_numbers
    cdn.input_batch_dimension, cdn.input_feature_dimension = 0, 3
    cdn.input_spatial_dimensions.extend([1, 2])
    cdn.kernel_input_feature_dimension, cdn.kernel_output_feature_dimension = 2, 3
    cdn.kernel_spatial_dimensions.extend([0, 1])
    cdn.output_batch_dimension, cdn.output_feature_dimension = 0, 3
    cdn.output_spatial_dimensions.extend([1, 2])
    inst.feature_group_count = inst.batch_group_count = 1
    return inst


def _transpose(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "transpose", [pick()], rank=3)
    inst.dimensions.extend([0, 2, 1])
    return inst


def _broadcast(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "broadcast", [pick()], rank=3)
    inst.dimensions.extend([0, 1])
    return inst


def _slice(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "slice", [pick()], rank=2)
    for _ in range(2):
        sl = inst.slice_dimensions.add()
        sl.start, sl.limit, sl.stride = 0, int(b.rng.integers(1, 64)), 1
    return inst


def _pad(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "pad", [pick(), first], rank=2)
    for _ in range(2):
        d = inst.padding_config.dimensions.add()
        d.edge_padding_low, d.edge_padding_high = 1, 1
    return inst


def _reduce(b: _ModuleBuilder, comp, pick: Pick, first: int):
    inst = b.add(comp, "reduce", [pick(), first], rank=1)
    inst.dimensions.extend([1])
    inst.called_computation_ids.append(b.reducer_id)
    return inst


def _elementwise(b: _ModuleBuilder, comp, pick: Pick, first: int):
    op = str(b.rng.choice(ELEMENTWISE))
    return b.add(comp, op, [pick() for _ in range(2 if op != "convert" else 1)])


BODY_OPS = [
    (0.14, _convolution),
    (0.20, lambda b, comp, pick, first: b.add(comp, "dot", [pick(), pick()], rank=2)),
    (0.28, lambda b, comp, pick, first: b.add(comp, "reshape", [pick()])),
    (0.34, _transpose), (0.40, _broadcast), (0.44, _slice), (0.47, _pad), (0.52, _reduce),
    (0.55, lambda b, comp, pick, first: b.add(comp, "constant", rank=1)),
]


def _add_reducer(b: _ModuleBuilder) -> None:
    reducer = b.computation("add_reducer")
    x, y = b.add(reducer, "parameter", rank=0), b.add(reducer, "parameter", rank=0)
    y.parameter_number = 1
    reducer.root_id = b.add(reducer, "add", [x.id, y.id], rank=0).id
    b.reducer_id = reducer.id


def _add_tail(b: _ModuleBuilder, index: int, num_nodes: int) -> None:
    """The last few instructions: a chain of elementwise ops."""
    comp = b.computation(f"cluster_tail.{index}")
    ids = [b.add(comp, "parameter").id]
    while b.count < num_nodes:
        ids.append(b.add(comp, "negate", [ids[-1]]).id)
    comp.root_id = ids[-1]


def _plan(rng: np.random.Generator, budget: int) -> List[float]:
    """The draws of one body's ops: 4 parameters, budget - 5 ops, a tuple root; a
    fusion costs 5 instructions (itself and its 4-instruction fused computation)."""
    kinds, used = [], 5
    while used < budget:
        kind = float(rng.random())
        if kind < FUSION and budget - used >= 5:
            used += 5
        else:
            kind = max(kind, FUSION)
            used += 1
        kinds.append(kind)
    return kinds


def _add_fused_computation(b: _ModuleBuilder) -> int:
    fused = b.computation(f"fused_computation.{b.last_id}")
    x = b.add(fused, "parameter")
    y = b.add(fused, "broadcast", [x.id])
    y.dimensions.extend([0])
    z = b.add(fused, "multiply", [x.id, y.id])
    fused.root_id = b.add(fused, "add", [z.id, x.id]).id
    return fused.id


def _add_body(b: _ModuleBuilder, index: int, kinds: Sequence[float]) -> None:
    """One computation of ~200 instructions, its fused computations before it."""
    fused_ids = [_add_fused_computation(b) for _ in range(sum(k < FUSION for k in kinds))]
    body = b.computation(f"{'while_body' if index % 3 else 'cluster'}.{index}")
    ids: List[int] = []
    for p in range(4):
        inst = b.add(body, "parameter")
        inst.parameter_number = p
        ids.append(inst.id)
    for kind in kinds:
        recent = ids[-6:]

        def pick() -> int:
            return int(b.rng.choice(recent))

        if kind < FUSION:
            inst = b.add(body, "fusion", [pick()])
            inst.fusion_kind = "kLoop"
            inst.called_computation_ids.append(fused_ids.pop())
        else:
            make = next((op for bound, op in BODY_OPS if kind < bound), _elementwise)
            inst = make(b, body, pick, ids[0])
        ids.append(inst.id)
    body.root_id = b.add(body, "tuple", ids[-3:]).id


def synthetic_module(num_nodes: int, seed: int = 0, per_computation: int = 200):
    """An HloModuleProto with exactly `num_nodes` instructions (see the module docstring)."""
    b = _ModuleBuilder(f"synthetic_{num_nodes}", np.random.default_rng(seed))
    _add_reducer(b)
    index = 0
    while b.count < num_nodes:
        budget = min(per_computation, num_nodes - b.count)
        if budget < 16:
            _add_tail(b, index, num_nodes)
            break
        _add_body(b, index, _plan(b.rng, budget))
        index += 1
    module = b.module
    module.entry_computation_name = module.computations[-1].name
    module.entry_computation_id = module.computations[-1].id
    return module


# ---------------------------------------------------------------------------- the run

class _Stopwatch:
    """Wall and CPU seconds and RSS after each stage, into `out`."""

    def __init__(self, out: Dict[str, Any]):
        self.out = out
        self.restart()

    def restart(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.out["seconds"][name] = round(now - self.wall, 3)
        self.out["cpu_seconds"][name] = round(cpu - self.cpu, 3)
        self.out["rss_gb_after"][name] = round(rss_gb(), 3)
        self.wall, self.cpu = now, cpu


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.large_graph", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=Int(MIN_NODES), default=500_000)
    ap.add_argument("--configs", type=COUNT, default=8, help="layout configs scored")
    ap.add_argument("--config-nodes", type=COUNT, default=2000, help="configurable nodes")
    ap.add_argument("--early-configs", type=COUNT, default=1,
                    help="configs in the whole-graph early-join pass (one 500k-node graph copy each)")
    ap.add_argument("--width", type=COUNT, default=64)
    ap.add_argument("--depth", type=COUNT, default=3)
    ap.add_argument("--threads", type=COUNT, default=2)
    ap.add_argument("--seed", type=SEED, default=0)
    return ap


def _layout_file_arrays(graph, args: argparse.Namespace) -> Dict[str, np.ndarray]:
    """The graph's layout npz arrays with `--configs` random layout configs (validated)."""
    from extract.xla.hlo_graph import OPCODE_IDS
    from extract.xla.npz_format import check_arrays, layout_arrays
    rng = np.random.default_rng(args.seed)
    kinds = [OPCODE_IDS[o] for o in ("convolution", "dot", "reshape", "transpose")]
    configurable = np.flatnonzero(np.isin(graph.node_opcode, kinds))
    ids = np.sort(rng.choice(configurable, size=min(args.config_nodes, len(configurable)), replace=False))
    feat = np.full((args.configs, len(ids), 18), -1, np.float32)
    for c in range(args.configs):
        feat[c, :, :4] = np.argsort(rng.random((len(ids), 4)), axis=1)
    arrays = layout_arrays(graph.arrays(), node_config_ids=ids.astype(np.int64), node_config_feat=feat,
                           config_runtime=rng.integers(10 ** 6, 10 ** 7, args.configs).astype(np.int64))
    check_arrays(arrays, "synthetic")
    return arrays


def _forward_passes(args: argparse.Namespace, arrays: Dict[str, np.ndarray], whole, pruned,
                    num_types: int, watch: _Stopwatch) -> Dict[str, Any]:
    """Time the three forward passes (module docstring, stage 5)."""
    import dataclasses
    import torch
    from simulator.data.batching import config_tensors, make_batch
    from simulator.config import Normalization
    from simulator.models.model import GraphModel

    def with_configs(item, count):
        fields = config_tensors(None, arrays["node_config_feat"][:count], "log1p")
        return dataclasses.replace(item, y=torch.zeros(count), **fields)

    def model(join: str) -> GraphModel:
        torch.manual_seed(0)
        m = GraphModel("gcn", 140, num_types, width=args.width, depth=args.depth,
                       node_config_dim=18, join=join)
        with torch.no_grad():
            m.set_normalization(Normalization(feature_mean=whole.x.mean(0).tolist(),
                                              feature_std=whole.x.std(0).clamp(min=1e-6).tolist(),
                                              target_mean=0.0, target_std=1.0))
        return m.eval()

    results = {}
    for name, join, item, count in (("forward_late_whole", "late", whole, args.configs),
                                    ("forward_early_whole", "early", whole, args.early_configs),
                                    ("forward_early_pruned", "early", pruned, args.configs)):
        m = model(join)
        watch.restart()
        with torch.no_grad():
            batch = make_batch([with_configs(item, count)], expand=m.expands)
            pred = m(batch)
        watch.lap(name)
        results[name] = {"configs": count, "graph_nodes": int(batch.graph.num_nodes()),
                         "finite": bool(torch.isfinite(pred).all())}
        del batch, pred, m
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    from extract.xla.hlo_graph import OPCODE_IDS, featurize_module
    from simulator.dgl_compat import dgl  # noqa: F401  (import cost outside the timings)
    from simulator.data.batching import prepare_graph

    out: Dict[str, Any] = {"nodes": args.nodes, "threads": args.threads, "width": args.width,
                           "depth": args.depth, "seconds": {}, "cpu_seconds": {}, "rss_gb_after": {},
                           "baseline_rss_gb": round(rss_gb(), 3)}
    watch = _Stopwatch(out)
    module = synthetic_module(args.nodes, args.seed)
    watch.lap("build_proto")
    out["proto_bytes"] = module.ByteSize()

    graph = featurize_module(module, source="synthetic")
    del module
    watch.lap("featurise")
    out["edges"] = int(graph.edge_index.shape[0])
    assert graph.num_nodes == args.nodes, graph.num_nodes

    arrays = _layout_file_arrays(graph, args)
    del graph
    watch.lap("configs")
    out["configurable_nodes"] = int(len(arrays["node_config_ids"]))

    num_types = max(OPCODE_IDS.values()) + 1
    # prepare_graph takes edges producer → consumer (a GraphSample's orientation); the
    # npz stores (consumer, producer).
    edges = arrays["edge_index"][:, ::-1]
    whole = prepare_graph(arrays["node_feat"], arrays["node_opcode"], edges, num_types, "log1p",
                          arrays["node_config_ids"], keep_hops=-1)
    watch.lap("prepare_whole")
    pruned = prepare_graph(arrays["node_feat"], arrays["node_opcode"], edges, num_types, "log1p",
                           arrays["node_config_ids"], keep_hops=args.depth)
    watch.lap("prepare_pruned")
    out["pruned_nodes"] = pruned.num_nodes

    out["passes"] = _forward_passes(args, arrays, whole, pruned, num_types, watch)
    goal_stages = ("featurise", "configs", "prepare_whole", "forward_late_whole", "forward_early_whole")
    out["featurise_plus_forward_s"] = round(sum(out["seconds"][k] for k in goal_stages), 3)
    out["featurise_plus_forward_cpu_s"] = round(sum(out["cpu_seconds"][k] for k in goal_stages), 3)
    out["peak_rss_gb"] = round(peak_rss_gb(), 3)
    out["load_average_1min"] = round(os.getloadavg()[0], 2)
    out["goal"] = {"seconds": 60, "peak_rss_gb": 8}
    out["meets_goal"] = out["featurise_plus_forward_s"] < 60 and out["peak_rss_gb"] < 8
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
