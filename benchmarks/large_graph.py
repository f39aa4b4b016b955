"""Large-graph figure: a synthetic 500,000-node HLO module, featurised and run through a
forward pass of the layout model. Goal: featurise + forward < 60 s and peak RSS < 8 GB.

    nice python -m benchmarks.large_graph [--nodes 500000] [--configs 8] [--threads 2]

Stages, each timed (wall clock) with the process RSS after it:

1. build: an `HloModuleProto` (extract/proto) shaped like an XLA program — computations
   of ~200 instructions (parameters, constants, broadcasts, reshapes, transposes, 3×3
   convolutions with window and dimension numbers, dots, elementwise ops, slices, pads,
   reduces calling a reducer, fusions calling their own small fused computation), each
   consuming recent outputs, so the graph is long and narrow like real ones. Not part
   of the goal: real modules come from XLA, not from Python.
2. featurise: `extract.hlo.featurize_module` → TpuGraphs arrays (n × 140 features, edges).
3. sample: a layout GraphSample with `--configs` random layout configs on
   `--config-nodes` configurable nodes (convolutions, dots, reshapes, transposes).
4. prepare: `simulator.batching.prepare_graph` on the whole graph (log1p, reverse
   edges, self-loops) and with the default pruning (configurable nodes + `--depth` hops).
5. forward: `GraphModel` (gcn, width 64, depth 3; torch.no_grad) over the whole graph:
   late join (the graph propagated once for all `--configs` configs) and early join
   (one graph copy per config; `--early-configs` 1: one 500k-node pass); and early join
   on the pruned graph with all configs, as training sees it.

The goal figure `featurise_plus_forward_s` sums featurise, sample, prepare (whole graph)
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
from typing import Any, Dict, List, Optional, Sequence

import numpy as np


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


def synthetic_module(num_nodes: int, seed: int = 0, per_computation: int = 200):
    """An HloModuleProto with exactly `num_nodes` instructions (see the module docstring)."""
    from extract import proto
    rng = np.random.default_rng(seed)
    module = proto.HloModuleProto(name=f"synthetic_{num_nodes}")
    next_id = [1]
    count = [0]

    def new_id() -> int:
        next_id[0] += 1
        return next_id[0]

    def computation(name: str):
        comp = module.computations.add()
        comp.name, comp.id = name, new_id()
        return comp

    def add(comp, opcode: str, operands: Sequence[int] = (), rank: Optional[int] = None):
        inst = comp.instructions.add()
        inst.id, inst.opcode, inst.name = new_id(), opcode, f"{opcode}.{next_id[0]}"
        inst.operand_ids.extend(operands)
        _shape(inst.shape, rng, rank)
        count[0] += 1
        return inst

    reducer = computation("add_reducer")
    a, b = add(reducer, "parameter", rank=0), add(reducer, "parameter", rank=0)
    b.parameter_number = 1
    reducer.root_id = add(reducer, "add", [a.id, b.id], rank=0).id

    elementwise = ["add", "multiply", "subtract", "maximum", "exponential", "tanh", "convert", "select"]
    index = 0
    while count[0] < num_nodes:
        budget = min(per_computation, num_nodes - count[0])
        if budget < 16:  # the last few instructions: a chain of elementwise ops
            comp = computation(f"cluster_tail.{index}")
            ids = [add(comp, "parameter").id]
            while count[0] < num_nodes:
                ids.append(add(comp, "negate", [ids[-1]]).id)
            comp.root_id = ids[-1]
            break
        # plan the body: 4 parameters, budget - 5 ops, a tuple root; a fusion costs 5
        # instructions (itself and its 4-instruction fused computation)
        kinds, used = [], 5
        while used < budget:
            kind = float(rng.random())
            if kind < 0.06 and budget - used >= 5:
                used += 5
            else:
                kind = max(kind, 0.06)
                used += 1
            kinds.append(kind)
        fused_ids = []
        for _ in range(sum(k < 0.06 for k in kinds)):  # callees first, as XLA emits them
            fused = computation(f"fused_computation.{next_id[0]}")
            x = add(fused, "parameter")
            y = add(fused, "broadcast", [x.id])
            y.dimensions.extend([0])
            z = add(fused, "multiply", [x.id, y.id])
            fused.root_id = add(fused, "add", [z.id, x.id]).id
            fused_ids.append(fused.id)
        body = computation(f"{'while_body' if index % 3 else 'cluster'}.{index}")
        index += 1
        ids: List[int] = []
        for p in range(4):
            inst = add(body, "parameter")
            inst.parameter_number = p
            ids.append(inst.id)
        for kind in kinds:
            recent = ids[-6:]
            if kind < 0.06:
                inst = add(body, "fusion", [int(rng.choice(recent))])
                inst.fusion_kind = "kLoop"
                inst.called_computation_ids.append(fused_ids.pop())
            elif kind < 0.14:
                inst = add(body, "convolution", [int(rng.choice(recent)), int(rng.choice(recent))], rank=4)
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
            elif kind < 0.20:
                inst = add(body, "dot", [int(rng.choice(recent)), int(rng.choice(recent))], rank=2)
            elif kind < 0.28:
                inst = add(body, "reshape", [int(rng.choice(recent))])
            elif kind < 0.34:
                inst = add(body, "transpose", [int(rng.choice(recent))], rank=3)
                inst.dimensions.extend([0, 2, 1])
            elif kind < 0.40:
                inst = add(body, "broadcast", [int(rng.choice(recent))], rank=3)
                inst.dimensions.extend([0, 1])
            elif kind < 0.44:
                inst = add(body, "slice", [int(rng.choice(recent))], rank=2)
                for _ in range(2):
                    sl = inst.slice_dimensions.add()
                    sl.start, sl.limit, sl.stride = 0, int(rng.integers(1, 64)), 1
            elif kind < 0.47:
                inst = add(body, "pad", [int(rng.choice(recent)), ids[0]], rank=2)
                for _ in range(2):
                    d = inst.padding_config.dimensions.add()
                    d.edge_padding_low, d.edge_padding_high = 1, 1
            elif kind < 0.52:
                inst = add(body, "reduce", [int(rng.choice(recent)), ids[0]], rank=1)
                inst.dimensions.extend([1])
                inst.called_computation_ids.append(reducer.id)
            elif kind < 0.55:
                inst = add(body, "constant", rank=1)
            else:
                op = str(rng.choice(elementwise))
                inst = add(body, op, [int(rng.choice(recent)) for _ in range(2 if op != "convert" else 1)])
            ids.append(inst.id)
        body.root_id = add(body, "tuple", ids[-3:]).id
    module.entry_computation_name = module.computations[-1].name
    module.entry_computation_id = module.computations[-1].id
    return module


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.large_graph", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500_000)
    ap.add_argument("--configs", type=int, default=8, help="layout configs scored")
    ap.add_argument("--config-nodes", type=int, default=2000, help="configurable nodes")
    ap.add_argument("--early-configs", type=int, default=1,
                    help="configs in the whole-graph early-join pass (one 500k-node graph copy each)")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch
    torch.set_num_threads(args.threads)
    from extract import hlo, tpugraphs
    from simulator.batching import make_batch
    from simulator.dgl_compat import dgl  # noqa: F401  (import cost outside the timings)
    from simulator.model import GraphModel
    from simulator.batching import prepare_graph
    from simulator.config import Normalization

    out: Dict[str, Any] = {"nodes": args.nodes, "threads": args.threads, "width": args.width,
                           "depth": args.depth, "seconds": {}, "cpu_seconds": {}, "rss_gb_after": {},
                           "baseline_rss_gb": round(rss_gb(), 3)}
    clock = [time.perf_counter(), time.process_time()]

    def lap(name: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        out["seconds"][name] = round(now - clock[0], 3)
        out["cpu_seconds"][name] = round(cpu - clock[1], 3)
        out["rss_gb_after"][name] = round(rss_gb(), 3)
        clock[0], clock[1] = now, cpu

    module = synthetic_module(args.nodes, args.seed)
    lap("build_proto")
    out["proto_bytes"] = module.ByteSize()

    graph = hlo.featurize_module(module, source="synthetic")
    del module
    lap("featurise")
    out["edges"] = int(graph.edge_index.shape[0])
    assert graph.num_nodes == args.nodes, graph.num_nodes

    rng = np.random.default_rng(args.seed)
    configurable = np.flatnonzero(np.isin(graph.node_opcode, [hlo.OPCODE_IDS[o] for o in
                                                              ("convolution", "dot", "reshape", "transpose")]))
    ids = np.sort(rng.choice(configurable, size=min(args.config_nodes, len(configurable)), replace=False))
    feat = np.full((args.configs, len(ids), 18), -1, np.float32)
    for c in range(args.configs):
        feat[c, :, :4] = np.argsort(rng.random((len(ids), 4)), axis=1)
    sample = tpugraphs.layout_sample_from_graph(
        graph, source="synthetic", node_config_ids=ids.astype(np.int64), node_config_feat=feat,
        config_runtime=rng.integers(10 ** 6, 10 ** 7, args.configs).astype(np.int64))
    del graph
    lap("sample")
    out["configurable_nodes"] = int(len(ids))

    num_types = max(hlo.OPCODE_IDS.values()) + 1
    whole = prepare_graph(sample.node_features, sample.node_types, sample.edges, num_types, "log1p",
                          sample.node_config_ids, keep_hops=-1)
    lap("prepare_whole")
    pruned = prepare_graph(sample.node_features, sample.node_types, sample.edges, num_types, "log1p",
                           sample.node_config_ids, keep_hops=args.depth)
    lap("prepare_pruned")
    out["pruned_nodes"] = pruned.num_nodes

    import dataclasses
    from simulator.batching import config_tensors

    def with_configs(item, count):
        fields = config_tensors(None, sample.node_config_features[:count], "log1p")
        return dataclasses.replace(item, y=torch.zeros(count), **fields)

    def model(join: str) -> GraphModel:
        torch.manual_seed(0)
        m = GraphModel("gcn", 140, num_types, width=args.width, depth=args.depth, node_config_dim=18, join=join)
        with torch.no_grad():
            m.set_normalization(Normalization(feature_mean=whole.x.mean(0).tolist(), feature_std=whole.x.std(0).clamp(min=1e-6).tolist(),
                                              target_mean=0.0, target_std=1.0))
        return m.eval()

    results = {}
    for name, join, item, count in (("forward_late_whole", "late", whole, args.configs),
                                    ("forward_early_whole", "early", whole, args.early_configs),
                                    ("forward_early_pruned", "early", pruned, args.configs)):
        m = model(join)
        clock[0], clock[1] = time.perf_counter(), time.process_time()
        with torch.no_grad():
            batch = make_batch([with_configs(item, count)], expand=m.expands)
            pred = m(batch)
        lap(name)
        results[name] = {"configs": count, "graph_nodes": int(batch.graph.num_nodes()),
                         "finite": bool(torch.isfinite(pred).all())}
        del batch, pred, m
    out["passes"] = results
    goal_stages = ("featurise", "sample", "prepare_whole", "forward_late_whole", "forward_early_whole")
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
