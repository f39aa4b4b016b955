"""TpuGraphs' raw tuning records → TpuGraphs npz files: the converter behind

    python -m extract.tpugraphs convert RAW.pb --out DIR   # (command line: extract/xla/convert_tpugraphs.py)

The records TpuGraphs built its npz files from (tpu_graphs/proto/tuning.proto; the
fields read are in extract/xla/proto/): a `TuningData` holds one `ModuleTuningData` per
kernel with tile-config runs (tile collection), a `ModuleTuningData` holds one whole
program with layout-config runs (layout collections). `read_tuning_file(path)` turns
either into `NpzGraph`s — the npz arrays of each file (format: extract/xla/npz_format.py;
graphs: extract/xla/hlo_graph.py) — following TpuGraphs' extractor
(tuning_data_iterator.cc): runs flagged `error`, without a profile or config, or (tile)
with runtime ≤ 1 ns are left out and counted in `meta["skipped_runs"]`; the tile
normalizer is the runtime of the run marked `is_default`. `read_raw(path)` gives the
same as GraphSamples.

Bad values are counted, never kept or dropped silently: a run with a negative runtime
(`negative_runtime`), one longer than a day (`absurd_runtime`, see
extract/xla/npz_format.py MAX_RUNTIME_NS) or whose config features float32 cannot hold
or which has more tensor layouts than TpuGraphs has room for (`bad_config`) is left
out under that reason in `meta["skipped_runs"]`, which the command line prints. If the
default run is among them the kernel cannot be normalized: ValueError.

What a record declares is cross-checked, so a file cut short (the wire format has no
end marker) is refused rather than read as a smaller record: the module must hold
together (extract/xla/hlo_graph.py `module_problem`), a layout record needs runs, and every
run's layout must configure exactly the nodes `config_index_to_node` lists (each once,
each a node of the graph). One limit: a `TuningData` is a bare list of kernel records
with no count, so one cut exactly between two records reads as the records before the
cut — each complete and exact; the command line prints how many kernels it read.

Names: one tile file per kernel, `<file stem>.<kernel>` (kernel names repeat across
programs); one layout file per record, `<file stem>` (TpuGraphs names each layout npz
after its pb).
"""
from __future__ import annotations

import collections
import math
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from extract.sample import GraphSample
from extract.xla import proto
from extract.xla.hlo_graph import featurize_module, module_problem
from extract.xla.npz_format import (
    LAYOUT_CONFIG_FEATURES, MAX_RUNTIME_NS, TILE_CONFIG_FEATURES, NpzGraph, layout_arrays, tile_arrays,
)

# Layout config vectors: up to 3 tensors (output, input, kernel) × 6 dims, -1 = unset.
_LAYOUT_TENSORS, _LAYOUT_DIMS, _LAYOUT_PADDING = 3, 6, -1


def _bounds_features(values: Sequence[int]) -> List[int]:
    # TpuGraphs' FeaturizeTileSizeConfig: 6 values, sum, product (0 for an empty list).
    head = list(values[:6]) + [0] * (6 - min(len(values), 6))
    return head + [sum(values), math.prod(values) if len(values) else 0]


def tile_config_features(tile_size_config: Any) -> List[int]:
    """The 24 tile config features of a `TileSizeConfig` (README "Tile Config Features")."""
    return (_bounds_features(tile_size_config.kernel_bounds)
            + _bounds_features(tile_size_config.output_bounds)
            + _bounds_features(tile_size_config.input_bounds))


def layout_config_features(layout_config: Any, where: str) -> np.ndarray:
    """(nodes, 18) layout config features of a `LayoutConfig` (README "Layout Config Features")."""
    out = np.full((len(layout_config.nodes), _LAYOUT_TENSORS * _LAYOUT_DIMS), _LAYOUT_PADDING,
                  dtype=np.float32)
    for slot, node in enumerate(layout_config.nodes):
        if len(node.tensors) > _LAYOUT_TENSORS:
            raise ValueError(f"{where}: config slot {slot} has {len(node.tensors)} tensor "
                             f"layouts; TpuGraphs has room for {_LAYOUT_TENSORS}")
        for tensor_index, tensor in enumerate(node.tensors):
            dims = list(tensor.dims[:_LAYOUT_DIMS])
            start = tensor_index * _LAYOUT_DIMS
            out[slot, start:start + len(dims)] = dims
    return out


_REASONS = ("error", "no_profile", "no_config", "negative_runtime", "no_runtime",
            "absurd_runtime", "bad_config")


def _runs_to_keep(runs: Sequence[Any], config_problem: Callable[[Any], Optional[str]],
                  min_runtime_ns: int) -> Tuple[List[int], Dict[str, int]]:
    """Indices of usable runs and counts of the left-out ones, by reason (`_REASONS`):
    `config_problem(run)` is "no_config", "bad_config" or None."""
    kept, skipped = [], dict.fromkeys(_REASONS, 0)
    for index, run in enumerate(runs):
        runtime = run.profile.compute_time_ns
        if run.error:
            reason = "error"
        elif not run.HasField("profile"):
            reason = "no_profile"
        else:
            reason = config_problem(run)
            if reason != "no_config":
                reason = ("negative_runtime" if runtime < 0 else
                          "no_runtime" if runtime < min_runtime_ns else
                          "absurd_runtime" if runtime > MAX_RUNTIME_NS else reason)
        if reason:
            skipped[reason] += 1
        else:
            kept.append(index)
    return kept, {k: v for k, v in skipped.items() if v}


def _default_index(runs: Sequence[Any], kept: Sequence[int]) -> Optional[int]:
    return next((position for position, index in enumerate(kept) if runs[index].is_default), None)


def _run_meta(record: Any, kept: Sequence[int], skipped: Dict[str, int]) -> Dict[str, Any]:
    return {"fingerprint": int(record.fingerprint), "raw_runs": len(record.runs),
            "skipped_runs": skipped, "default_config_index": _default_index(record.runs, kept)}


def _tile_config_problem(run: Any) -> Optional[str]:
    if not run.op_config.HasField("tile_size_config"):
        return "no_config"
    return None if _fits_float32(tile_config_features(run.op_config.tile_size_config)) \
        else "bad_config"


def _fits_float32(values: Sequence[int]) -> bool:
    limit = float(np.finfo(np.float32).max)
    return all(abs(v) <= limit for v in values)


def tile_graphs(tuning_data: Any, source: str) -> List[NpzGraph]:
    """A `TuningData` (one kernel per `ModuleTuningData`) → one tile file per kernel."""
    stem = Path(source).name.removesuffix(".pb")
    graphs = []
    for module_index, record in enumerate(tuning_data.modules):
        where = f"{source}: modules[{module_index}] ({record.module.name or 'unnamed'})"
        graph = featurize_module(record.module, source=where)
        runs = record.runs
        if not runs:
            raise ValueError(f"{where}: the record has no runs")
        # TpuGraphs drops runs that failed or report ≤ 1 ns (tuning_data_iterator.cc).
        kept, skipped = _runs_to_keep(runs, _tile_config_problem, min_runtime_ns=2)
        meta = _run_meta(record, kept, skipped)
        default = meta["default_config_index"]
        if default is None:
            left_out = f" (runs left out: {skipped})" if skipped else ""
            raise ValueError(f"{where}: no usable run is marked is_default, so runtimes "
                             f"cannot be normalized{left_out}")
        runtime = np.array([runs[i].profile.compute_time_ns for i in kept], dtype=np.int64)
        config_feat = np.array([tile_config_features(runs[i].op_config.tile_size_config)
                                for i in kept], dtype=np.float32).reshape(-1, TILE_CONFIG_FEATURES)
        arrays = tile_arrays(graph.arrays(), config_feat=config_feat, config_runtime=runtime,
                             config_runtime_normalizers=np.full_like(runtime, runtime[default]))
        graphs.append(NpzGraph(name=f"{stem}.{graph.name}", arrays=arrays, source=source,
                               meta={"kernel": graph.name, **graph.meta(), **meta}))
    return graphs


def _layout_config_problem(run: Any) -> Optional[str]:
    if not run.module_config.HasField("layout_config"):
        return "no_config"
    nodes = run.module_config.layout_config.nodes
    return "bad_config" if any(len(node.tensors) > _LAYOUT_TENSORS for node in nodes) else None


def _config_nodes(record: Any, num_nodes: int, source: str) -> np.ndarray:
    """`config_index_to_node` as int64 node ids, checked against the graph and the runs
    (every run's layout configures exactly these nodes)."""
    listed = list(record.config_index_to_node)
    if listed and max(listed) >= num_nodes:  # (uint64: compared before any conversion)
        raise ValueError(f"{source}: config_index_to_node names node {max(listed)}, "
                         f"but the module has {num_nodes} instructions")
    for index, run in enumerate(record.runs):
        if run.module_config.HasField("layout_config") and \
                len(run.module_config.layout_config.nodes) != len(listed):
            raise ValueError(f"{source}: runs[{index}] configures "
                             f"{len(run.module_config.layout_config.nodes)} nodes, "
                             f"config_index_to_node lists {len(listed)}"
                             + (" (a file cut short before it?)" if not listed else ""))
    counts = collections.Counter(listed)
    twice = next((node for node in listed if counts[node] > 1), None)
    if twice is not None:
        raise ValueError(f"{source}: config_index_to_node lists node {twice} twice")
    return np.array(listed, dtype=np.int64)


def layout_graph(record: Any, source: str) -> NpzGraph:
    """A `ModuleTuningData` with layout runs → one layout file, named after the source."""
    if not record.runs:
        raise ValueError(f"{source}: the record has no runs (a file cut short after its "
                         "module?)")
    problem = module_problem(record.module)
    if problem is not None:
        raise ValueError(f"{source}: {problem}")
    # The cheap cross-checks before the featurizer's work.
    num_nodes = sum(len(c.instructions) for c in record.module.computations)
    node_config_ids = _config_nodes(record, num_nodes, source)
    graph = featurize_module(record.module, source=source)
    runs = record.runs
    kept, skipped = _runs_to_keep(runs, _layout_config_problem, min_runtime_ns=1)
    features = [layout_config_features(runs[index].module_config.layout_config,
                                       where=f"{source}: runs[{index}]") for index in kept]
    node_config_feat = (np.stack(features) if features else
                        np.zeros((0, node_config_ids.shape[0], LAYOUT_CONFIG_FEATURES), np.float32))
    runtime = np.array([runs[i].profile.compute_time_ns for i in kept], dtype=np.int64)
    arrays = layout_arrays(graph.arrays(), node_config_ids=node_config_ids,
                           node_config_feat=node_config_feat, config_runtime=runtime)
    return NpzGraph(name=Path(source).name.removesuffix(".pb"), arrays=arrays, source=source,
                    meta={**graph.meta(), **_run_meta(record, kept, skipped)})


def _record_problem(record: Any, config_field: str) -> Optional[str]:
    """Why a parsed ModuleTuningData does not look like one, or None."""
    problem = module_problem(record.module)
    if problem is None and record.runs and not any(r.HasField(config_field) for r in record.runs):
        problem = f"no run has a {config_field}"
    return problem


def read_tuning_file(path: Union[str, Path]) -> List[NpzGraph]:
    """A raw TpuGraphs proto file → its npz files' arrays: a `TuningData` file gives one
    tile file per kernel, a `ModuleTuningData` file one layout file. Both messages start
    with a length-delimited field 1, so each reading is tried and the consistent one is
    used; otherwise ValueError naming the file and why neither fits."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{source}: cannot read ({e.strerror or e})") from None
    reasons = []
    try:
        tuning = proto.parse(proto.TuningData, data, name=source)
    except ValueError as e:
        reasons.append("as TuningData: " + str(e).removeprefix(source + ": "))
    else:
        problems = [f"modules[{i}]: {problem}" for i, m in enumerate(tuning.modules)
                    if (problem := _record_problem(m, "op_config"))]
        if tuning.modules and not problems:
            return tile_graphs(tuning, source)
        reasons.append("as TuningData: " + (problems[0] if problems else "no modules"))
    try:
        record = proto.parse(proto.ModuleTuningData, data, name=source)
    except ValueError as e:
        reasons.append("as ModuleTuningData: " + str(e).removeprefix(source + ": "))
    else:
        problem = _record_problem(record, "module_config")
        if problem is None:
            return [layout_graph(record, source)]
        reasons.append("as ModuleTuningData: " + problem)
    raise ValueError(f"{source}: not a TpuGraphs TuningData or ModuleTuningData file "
                     f"({'; '.join(reasons)})")


def read_raw(path: Union[str, Path]) -> List[GraphSample]:
    """`read_tuning_file(path)` as GraphSamples (group and name: the file's name)."""
    return [graph.sample() for graph in read_tuning_file(path)]
