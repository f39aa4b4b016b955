"""Samples → tensors once (`prepare_graph`, `prepare`), then tensors → one batch
(`make_batch`, as a model's `BatchSpec` asks).

Graph preparation. TIR AST edges run parent → child. Every graph model sees the
graph with **reverse edges added** (child → parent), so information flows both up
and down the tree, and **a self-loop on every node**, so that GCN's normalised sum
D^-½ (A + I) D^-½ keeps each node's own state and no node has zero in-degree (which
DGL's GraphConv and GATConv refuse). With `--feature-transform log1p` node features,
vectors and tile config features go through sign(x)·log1p(|x|) here (`transform_features`,
in float32); the standardisation with training-set mean/std is part of the model
(buffers saved in its state dict), as is the target's (log runtime).

`make_batch` is the single place a batch is built. A batch holds B graphs and C ≥ B
target rows: row r belongs to graph `config_graph[r]`. TVM samples have one config
each (C = B). XLA samples (one graph, many configs) carry per-config features:

* tile: `config_x` (C, k), one vector per config row;
* layout: one (k,)-vector per (config row, configurable node): `node_config_x` (R, k)
  with `node_config_row` (R,) its config row and `node_config_node` (R,) its node in
  `graph`.

Two ways to give the model those features (`GraphModel`'s `join`):

* late join (`expand=False`): `graph` holds the B graphs once; the model pools each
  graph and joins the config features to the pooled row `pool_index[r]` = graph of r.
* early join (`expand=True`): `graph` holds one copy of its graph per config row (C
  copies), node i of the copies is base node `node_index[i]` (x and types stay the B
  graphs' rows; the model gathers them) of config row `node_row[i]`, and pooled row
  r is config row r. Memory grows with C × nodes, which is why layout graphs are
  pruned and batches are capped by node count (see `simulator.data.tpugraphs`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from extract.sample import GraphSample

from simulator.dgl_compat import dgl
from simulator.registry import SimulatorError


TRANSFORMS = ("none", "log1p")


def transform_features(values: np.ndarray, transform: str = "none") -> np.ndarray:
    """`values` as a new float32 array, transformed: "none" (a copy) or "log1p",
    sign(x)·log(1 + |x|), computed in float32 in place (one allocation: a 500k × 140
    array takes ~1 s this way, ~5–15 s through float64 temporaries)."""
    transform = transform or "none"
    if transform not in TRANSFORMS:
        raise SimulatorError(f"unknown feature transform {transform!r} (known: {', '.join(TRANSFORMS)})")
    out = np.array(values, dtype=np.float32, copy=True)
    if transform == "log1p":
        sign = np.signbit(out)
        np.abs(out, out=out)
        np.log1p(out, out=out)
        np.negative(out, out=out, where=sign)
    return out


def untransform_features(values: torch.Tensor, transform: str = "none") -> torch.Tensor:
    """The node features as they were before `transform_features` (its inverse, in torch)."""
    if (transform or "none") == "log1p":
        return torch.sign(values) * torch.expm1(values.abs())
    return values


@dataclass(frozen=True)
class BatchSpec:
    """What a model needs in a batch; asked of the model (`CostModel.batch_spec`)."""

    graph: bool = True              # the batched graph, node features and types
    vector: Optional[str] = None    # a `sample.vectors` entry (vector models)
    expand: bool = False            # one graph copy per config row (early join)
    layout_roles: bool = False      # layout rows widened with their role columns (layout_roles.py)

    def make(self, items: Sequence["Prepared"]) -> "Batch":
        return make_batch(items, with_graph=self.graph, with_vector=self.vector is not None and not self.graph,
                          expand=self.expand)


@dataclass
class Prepared:
    """One sample as tensors, ready to batch."""

    x: torch.Tensor              # (n, d) float32 node features (transformed)
    types: torch.Tensor          # (n,) int64, clamped into the model's vocabulary
    src: torch.Tensor            # (m',) int64: edges + reverse edges + self-loops
    dst: torch.Tensor
    y: torch.Tensor              # (c,) float32 natural log of runtime in seconds (NaN: unmeasured)
    group: int                   # index into the collection's sorted group names
    vector: Optional[torch.Tensor] = None  # (c, k) float32 a baseline's vector (transformed)
    config_x: Optional[torch.Tensor] = None       # (c, k) tile config features (transformed)
    node_config_x: Optional[torch.Tensor] = None  # (c, nc, k) layout per-node config features
    config_nodes: Optional[torch.Tensor] = None   # (nc,) int64 local ids of configurable nodes

    @property
    def num_nodes(self) -> int:
        return int(self.types.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.x, self.types, self.src, self.dst))


def khop_nodes(num_nodes: int, edges: np.ndarray, seeds: np.ndarray, hops: int) -> Optional[np.ndarray]:
    """Sorted ids of the nodes within `hops` undirected hops of a seed (seeds included);
    None (keep every node) when hops < 0 or there are no seeds."""
    seeds = np.asarray(seeds, np.int64).reshape(-1)
    if hops < 0 or seeds.size == 0:
        return None
    import scipy.sparse as sp
    reach = np.zeros(num_nodes, bool)
    reach[seeds] = True
    if hops and len(edges):
        ones = np.ones(len(edges), np.float32)
        adjacency = sp.csr_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(num_nodes, num_nodes))
        adjacency = (adjacency + adjacency.T).tocsr()
        frontier = reach.copy()
        for _ in range(hops):
            nxt = (adjacency @ frontier.astype(np.float32)) > 0
            frontier = nxt & ~reach
            if not frontier.any():
                break
            reach |= frontier
    return np.flatnonzero(reach)


def type_ids(node_types: np.ndarray, num_types: int, type_map: Optional[np.ndarray] = None) -> np.ndarray:
    """Node-type ids in the model's vocabulary: through `type_map` (data id → model id) when
    the data's vocabulary differs from the model's; ids outside 0…num_types-1 become the
    unknown slot num_types (the model's embedding has num_types + 1 rows)."""
    types = np.asarray(node_types, np.int64)
    if type_map is not None:
        known = (types >= 0) & (types < len(type_map))
        types = np.where(known, type_map[np.clip(types, 0, len(type_map) - 1)], num_types)
    return np.where((types >= 0) & (types < num_types), types, num_types).astype(np.int64)


def prepare_graph(node_features: np.ndarray, node_types: np.ndarray, edges: np.ndarray,
                  num_types: int, transform: str = "none", config_ids: Optional[np.ndarray] = None,
                  keep_hops: int = -1, group: int = 0, type_map: Optional[np.ndarray] = None,
                  name: str = "") -> Prepared:
    """A graph as a Prepared item without configs (y empty): pruned to the configurable
    nodes' `keep_hops` neighbourhood (layout; -1 keeps every node), features transformed,
    reverse edges and self-loops added; `config_nodes` are the configurable nodes' ids
    after pruning. The one place a graph becomes tensors. `name` (a sample's name or a
    file) is named by the error a graph without nodes gets."""
    n = int(node_types.shape[0])
    if n == 0:
        raise SimulatorError(f"{name or 'a graph'}: the graph has 0 nodes; there is nothing to embed "
                             f"(an empty program, or a damaged sample)")
    keep = khop_nodes(n, edges, config_ids, keep_hops) if config_ids is not None else None
    if keep is not None:
        new_id = np.full(n, -1, np.int64)
        new_id[keep] = np.arange(len(keep))
        mask = (new_id[edges[:, 0]] >= 0) & (new_id[edges[:, 1]] >= 0)
        edges = new_id[edges[mask]]
        node_features, node_types = node_features[keep], node_types[keep]
        config_ids = new_id[np.asarray(config_ids, np.int64)]
        n = len(keep)
    src, dst = graph_edges(edges, n)
    return Prepared(x=torch.from_numpy(transform_features(node_features, transform)),
                    types=torch.from_numpy(type_ids(node_types, num_types, type_map)), src=src, dst=dst,
                    y=torch.zeros(0), group=group,
                    config_nodes=None if config_ids is None else torch.from_numpy(
                        np.asarray(config_ids, np.int64).reshape(-1)))


@dataclass(frozen=True)
class Shapes:
    """The widths a model was built for (from its `ModelInfo`); None: not checked."""

    feature_dim: Optional[int] = None       # node features per node
    vector_dim: Optional[int] = None        # the vector `prepare` reads, per config
    config_dim: Optional[int] = None        # tile config features per config (0: none)
    node_config_dim: Optional[int] = None   # layout config features per node (0: none)


def _check_shapes(s: GraphSample, shapes: Shapes, vector_name: Optional[str]) -> None:
    """A clear error when a sample does not have the widths the model was built for
    (another extractor, another kind of data: TVM vs HLO/TpuGraphs, tile vs layout)."""
    def refuse(what: str, has: int, want: int) -> None:
        raise SimulatorError(f"{s.name}: {has} {what}, the model expects {want} (data of another kind "
                             f"or extractor version than the model was trained on?)")
    if shapes.feature_dim is not None and s.node_features.shape[1] != shapes.feature_dim:
        refuse("node features", s.node_features.shape[1], shapes.feature_dim)
    if shapes.vector_dim is not None and vector_name in s.vectors:
        width = int(np.asarray(s.vectors[vector_name]).reshape(s.num_configs, -1).shape[1])
        if width != shapes.vector_dim:
            refuse(f"values in vectors[{vector_name!r}] per config", width, shapes.vector_dim)
    if shapes.config_dim is not None:
        has = 0 if s.config_features is None else int(s.config_features.shape[1])
        if has != shapes.config_dim:
            refuse("config features per config", has, shapes.config_dim)
    if shapes.node_config_dim is not None:
        has = 0 if s.node_config_features is None else int(s.node_config_features.shape[-1])
        if has != shapes.node_config_dim:
            refuse("config features per configurable node", has, shapes.node_config_dim)


def prepare(samples: Sequence[GraphSample], group_index: Dict[str, int], num_types: int,
            vector_name: Optional[str] = None, feature_dim: Optional[int] = None,
            transform: str = "none", type_map: Optional[np.ndarray] = None,
            shapes: Optional[Shapes] = None, columns: Optional[np.ndarray] = None) -> List[Prepared]:
    """Tensors for each sample (`prepare_graph` plus its configs' log runtimes, vector
    `vector_name` and config features). `feature_dim` / `shapes`: check the node feature
    width / every width the model was built for (a one-line error naming the sample);
    `columns`: the node-feature columns the model reads (None: all; the width checked is
    the samples' own)."""
    out = []
    shapes = shapes or Shapes()
    if feature_dim is not None:
        shapes = Shapes(feature_dim, shapes.vector_dim, shapes.config_dim, shapes.node_config_dim)
    with np.errstate(divide="ignore", invalid="ignore"):  # once: entering it costs more than a small log
        log_runtimes = [np.log(s.runtimes).astype(np.float32) for s in samples]
    for s, y in zip(samples, log_runtimes):
        _check_shapes(s, shapes, vector_name)
        x = s.node_features if columns is None else s.node_features[:, columns]
        item = prepare_graph(x, s.node_types, s.edges, num_types, transform,
                             s.node_config_ids, -1, group_index[s.group], type_map, name=s.name)
        item.y = torch.from_numpy(y)
        if vector_name is not None:
            if vector_name not in s.vectors:
                raise SimulatorError(f"{s.name}: sample has no vectors[{vector_name!r}] "
                                     f"(has: {', '.join(sorted(s.vectors)) or 'none'})")
            item.vector = torch.from_numpy(transform_features(s.vectors[vector_name], transform)
                                           .reshape(s.num_configs, -1))
        fields = config_tensors(s.config_features, s.node_config_features, transform)
        item.config_x, item.node_config_x = fields["config_x"], fields["node_config_x"]
        out.append(item)
    return out


def config_tensors(config_features: Optional[np.ndarray], node_config_features: Optional[np.ndarray],
                   transform: str = "none") -> Dict[str, Optional[torch.Tensor]]:
    """Prepared's per-config fields (None where absent): `config_x`, tile sizes, transformed
    like the node features; `node_config_x`, layout rows as they are: their values are
    dimension indices (a permutation, -1 for none), not magnitudes a log would tame
    (log1p on them cost layout-sum 0.02–0.07 τ on held-out model families)."""
    def tensor(values, how):
        return None if values is None else torch.from_numpy(transform_features(values, how))
    return {"config_x": tensor(config_features, transform), "node_config_x": tensor(node_config_features, "none")}


def graph_edges(edges: np.ndarray, num_nodes: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(src, dst) of edges + reverse edges + a self-loop per node."""
    src, dst = edges[:, 0], edges[:, 1]
    loops = np.arange(num_nodes)
    return (torch.from_numpy(np.concatenate([src, dst, loops]).astype(np.int64)),
            torch.from_numpy(np.concatenate([dst, src, loops]).astype(np.int64)))


def forward_edges(graph: "dgl.DGLGraph") -> Tuple[torch.Tensor, torch.Tensor]:
    """(producer, consumer) of a batch graph's own edges, without the reverse edges and
    self-loops `graph_edges` added: each graph's edges come first in its block of them."""
    src, dst = graph.edges()
    nodes, edges = graph.batch_num_nodes(), graph.batch_num_edges()
    own = (edges - nodes) // 2
    skipped = (torch.cumsum(edges, 0) - edges) - (torch.cumsum(own, 0) - own)
    position = torch.repeat_interleave(skipped, own) + torch.arange(int(own.sum()), device=own.device)
    return src[position], dst[position]


@dataclass
class Batch:
    graph: Optional["dgl.DGLGraph"]   # B graphs batched into one; None for vector models
    x: Optional[torch.Tensor]          # (N, d)
    types: Optional[torch.Tensor]      # (N,)
    config_graph: torch.Tensor         # (C,) graph of each target row
    y: torch.Tensor                    # (C,) log runtime
    group: torch.Tensor                # (C,) group index of each row (ranking losses)
    vector: Optional[torch.Tensor] = None  # (C, k)
    config_x: Optional[torch.Tensor] = None          # (C, k) tile config features
    node_config_x: Optional[torch.Tensor] = None     # (R, k) layout: one row per (config, node)
    node_config_row: Optional[torch.Tensor] = None   # (R,) its config row
    node_config_node: Optional[torch.Tensor] = None  # (R,) its node in `graph`
    pool_index: Optional[torch.Tensor] = None        # (C,) pooled row of each config row
    node_index: Optional[torch.Tensor] = None        # early join: base node of each graph node
    node_row: Optional[torch.Tensor] = None          # early join: config row of each graph node

    @property
    def num_graphs(self) -> int:
        return int(self.config_graph.max()) + 1 if len(self.config_graph) else 0

    @property
    def expanded(self) -> bool:
        return self.node_index is not None

    def to(self, device: torch.device) -> "Batch":
        """This batch on `device` (the batch itself when it is there already)."""
        if self.y.device == torch.device(device):
            return self
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self) if getattr(self, f.name) is not None})


def make_batch(items: Sequence[Prepared], with_graph: bool = True, with_vector: bool = False,
               expand: bool = False) -> Batch:
    """Concatenate prepared samples into one batch (the one place batches are built).

    `expand`: one copy of each graph per config row (early join of config features,
    see the module docstring); without per-config features it changes nothing."""
    counts = torch.tensor([len(it.y) for it in items])
    config_graph = torch.repeat_interleave(torch.arange(len(items)), counts)
    y = torch.cat([it.y for it in items])
    group = torch.repeat_interleave(torch.tensor([it.group for it in items]), counts)
    config_x = torch.cat([it.config_x for it in items]) if _all_have(items, "config_x") else None
    layout = _all_have(items, "node_config_x")
    expand = expand and (config_x is not None or layout)
    graph = x = types = pool_index = node_index = node_row = None
    nc_x = nc_row = nc_node = None
    if with_graph:
        num_nodes = torch.tensor([len(it.types) for it in items])
        offsets = torch.cumsum(num_nodes, 0) - num_nodes
        num_edges = torch.tensor([len(it.src) for it in items])
        x = torch.cat([it.x for it in items])
        types = torch.cat([it.types for it in items])
        if expand:
            copy_nodes = num_nodes[config_graph]                 # (C,) nodes of each copy
            copy_offsets = torch.cumsum(copy_nodes, 0) - copy_nodes
            total = int(copy_nodes.sum())
            node_row = torch.repeat_interleave(torch.arange(len(config_graph)), copy_nodes)
            node_index = torch.arange(total) - copy_offsets[node_row] + offsets[config_graph][node_row]
            src, dst, row = [], [], 0
            for it, c in zip(items, counts.tolist()):
                o = copy_offsets[row:row + c, None]
                src.append((it.src[None, :] + o).reshape(-1))
                dst.append((it.dst[None, :] + o).reshape(-1))
                row += c
            graph = dgl.graph((torch.cat(src), torch.cat(dst)), num_nodes=total)
            graph.set_batch_num_nodes(copy_nodes)
            graph.set_batch_num_edges(num_edges[config_graph])
            pool_index = torch.arange(len(config_graph))
            node_base = copy_offsets                               # per config row
        else:
            src = torch.cat([it.src + o for it, o in zip(items, offsets.tolist())])
            dst = torch.cat([it.dst + o for it, o in zip(items, offsets.tolist())])
            graph = dgl.graph((src, dst), num_nodes=int(num_nodes.sum()))
            graph.set_batch_num_nodes(num_nodes)
            graph.set_batch_num_edges(num_edges)
            pool_index = config_graph
            node_base = offsets[config_graph]                      # per config row
        if layout:
            rows, nodes, feats, row = [], [], [], 0
            for it, c in zip(items, counts.tolist()):
                nc = len(it.config_nodes)
                feats.append(it.node_config_x.reshape(c * nc, -1))
                r = torch.arange(row, row + c).repeat_interleave(nc)
                rows.append(r)
                nodes.append(node_base[r] + it.config_nodes.repeat(c))
                row += c
            nc_x, nc_row, nc_node = torch.cat(feats), torch.cat(rows), torch.cat(nodes)
    vector = torch.cat([it.vector for it in items]) if with_vector else None
    return Batch(graph, x, types, config_graph, y, group, vector, config_x=config_x,
                 node_config_x=nc_x, node_config_row=nc_row, node_config_node=nc_node,
                 pool_index=pool_index, node_index=node_index, node_row=node_row)


def _all_have(items: Sequence[Prepared], key: str) -> bool:
    """Whether the items have the optional field `key`: all of them, or none."""
    present = [getattr(it, key) is not None for it in items]
    if any(present) and not all(present):
        raise SimulatorError(f"a batch mixes samples with and without {key}")
    return bool(present) and all(present)


def batch_indices(num_items: int, batch_size: int, rng: np.random.Generator,
                  groups: Optional[np.ndarray] = None, group_size: int = 16) -> Iterator[np.ndarray]:
    """Shuffled index batches for one epoch.

    Without `groups`: a random permutation in chunks of `batch_size`. With `groups`
    (ranking losses, which compare configs of one workload): each workload's items are
    shuffled and cut into runs of `group_size`, and batch_size // group_size runs of
    (usually different) workloads make one batch.
    """
    if groups is None:
        order = rng.permutation(num_items)
        for start in range(0, num_items, batch_size):
            yield order[start:start + batch_size]
        return
    runs = []
    for g in np.unique(groups):
        members = rng.permutation(np.flatnonzero(groups == g))
        runs.extend(members[i:i + group_size] for i in range(0, len(members), group_size))
    order = rng.permutation(len(runs))
    per_batch = max(1, batch_size // group_size)
    for start in range(0, len(order), per_batch):
        yield np.concatenate([runs[i] for i in order[start:start + per_batch]])
