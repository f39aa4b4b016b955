"""Samples → tensors once (`prepare`), then tensors → one batch (`make_batch`).

Graph preparation. TIR AST edges run parent → child. Every graph model sees the
graph with **reverse edges added** (child → parent), so information flows both up
and down the tree, and **a self-loop on every node**, so that GCN's normalised sum
D^-½ (A + I) D^-½ keeps each node's own state and no node has zero in-degree (which
DGL's GraphConv and GATConv refuse). Node features go through sign(x)·log1p(|x|)
(loop extents span 1…10⁶) here; the standardisation with training-set mean/std is part
of the model (buffers saved in its state dict), as is the target's (log runtime).

`make_batch` is the single place a batch is built. A batch holds B graphs and C ≥ B
target rows: row r belongs to graph `config_graph[r]`. TVM samples have one config
each (C = B); XLA samples (one graph, many configs) will add per-config features here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch

from extract.sample import GraphSample

from .dgl_compat import dgl
from .registry import SimulatorError


TRANSFORMS = {
    "none": lambda x: x,
    "log1p": lambda x: np.sign(x) * np.log1p(np.abs(x)),   # sign(x)·log(1 + |x|)
}


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


def prepare(samples: Sequence[GraphSample], group_index: Dict[str, int], num_types: int,
            vector_name: Optional[str] = None, feature_dim: Optional[int] = None,
            transform: str = "none") -> List[Prepared]:
    """Tensors for each sample. Type ids outside 0…num_types-1 map to the unknown slot
    num_types (the model's embedding has num_types + 1 rows)."""
    if transform not in TRANSFORMS:
        raise SimulatorError(f"unknown feature transform {transform!r} (known: {', '.join(TRANSFORMS)})")
    fn = TRANSFORMS[transform]
    out = []
    for s in samples:
        if s.config_features is not None or s.node_config_features is not None:
            raise SimulatorError(f"{s.name}: per-config features (XLA/TpuGraphs samples) are not "
                                 f"supported by this model yet")
        if feature_dim is not None and s.node_features.shape[1] != feature_dim:
            raise SimulatorError(f"{s.name}: {s.node_features.shape[1]} node features, the model "
                                 f"expects {feature_dim} (different extractor version?)")
        n = s.num_nodes
        types = np.where((s.node_types >= 0) & (s.node_types < num_types), s.node_types, num_types)
        src, dst = s.edges[:, 0], s.edges[:, 1]
        loops = np.arange(n)
        all_src = np.concatenate([src, dst, loops])
        all_dst = np.concatenate([dst, src, loops])
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(s.runtimes)
        vector = None
        if vector_name is not None:
            if vector_name not in s.vectors:
                raise SimulatorError(f"{s.name}: sample has no vectors[{vector_name!r}] "
                                     f"(has: {', '.join(sorted(s.vectors)) or 'none'})")
            vector = torch.from_numpy(fn(np.asarray(s.vectors[vector_name], np.float64))
                                      .astype(np.float32).reshape(s.num_configs, -1))
        out.append(Prepared(
            x=torch.from_numpy(fn(s.node_features.astype(np.float64)).astype(np.float32)),
            types=torch.from_numpy(types.astype(np.int64)),
            src=torch.from_numpy(all_src.astype(np.int64)), dst=torch.from_numpy(all_dst.astype(np.int64)),
            y=torch.from_numpy(y.astype(np.float32)), group=group_index[s.group], vector=vector))
    return out


@dataclass
class Batch:
    graph: Optional["dgl.DGLGraph"]   # B graphs batched into one; None for vector models
    x: Optional[torch.Tensor]          # (N, d)
    types: Optional[torch.Tensor]      # (N,)
    config_graph: torch.Tensor         # (C,) graph of each target row
    y: torch.Tensor                    # (C,) log runtime
    group: torch.Tensor                # (C,) group index of each row (ranking losses)
    vector: Optional[torch.Tensor] = None  # (C, k)

    @property
    def num_graphs(self) -> int:
        return int(self.config_graph.max()) + 1 if len(self.config_graph) else 0


def make_batch(items: Sequence[Prepared], with_graph: bool = True, with_vector: bool = False) -> Batch:
    """Concatenate prepared samples into one batch (the one place batches are built)."""
    counts = torch.tensor([len(it.y) for it in items])
    config_graph = torch.repeat_interleave(torch.arange(len(items)), counts)
    y = torch.cat([it.y for it in items])
    group = torch.repeat_interleave(torch.tensor([it.group for it in items]), counts)
    graph = x = types = None
    if with_graph:
        num_nodes = torch.tensor([len(it.types) for it in items])
        offsets = torch.cumsum(num_nodes, 0) - num_nodes
        src = torch.cat([it.src + o for it, o in zip(items, offsets.tolist())])
        dst = torch.cat([it.dst + o for it, o in zip(items, offsets.tolist())])
        graph = dgl.graph((src, dst), num_nodes=int(num_nodes.sum()))
        graph.set_batch_num_nodes(num_nodes)
        graph.set_batch_num_edges(torch.tensor([len(it.src) for it in items]))
        x = torch.cat([it.x for it in items])
        types = torch.cat([it.types for it in items])
    vector = torch.cat([it.vector for it in items]) if with_vector else None
    return Batch(graph, x, types, config_graph, y, group, vector)


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
