"""The networks behind the torch cost models (see `simulator.models.costmodel`).

* `GraphModel`: encode → propagate × depth (any registered propagation layer: `gcn`,
  `sage`, `gat`, `cheb`, `mlp`) → pool → predict;
* `VectorMLP`: an MLP on one fixed-width vector per config (`curve-mlp`).

A network maps a `Batch` to one predicted log runtime (natural log of seconds) per
target row; `set_normalization` installs the training set's statistics into its
buffers (so a state dict carries them).
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional

import torch
from torch import nn

from simulator.config import Normalization
from simulator.data.batching import Batch
from simulator.registry import UnknownNameError
from .layers import POOLINGS, NodeEncoder, PredictHead, PropagationBlock, build_layer

JOINS = ("early", "late")


class GraphModel(nn.Module):
    """ŷ = Head(Pool_{v ∈ G}(Prop^L(G, Encode(x_v, t_v))))[config → graph].

    Per-config features (XLA/TpuGraphs samples; `config_dim`, `node_config_dim` > 0)
    are joined by `join`:

    * "early": onto the nodes before propagation. Tile: every node of the config's copy
      of the graph gets W_c·c (the first encoder layer sees [x ‖ E[t] ‖ c]); layout: each
      configurable node gets W_n·c_v + b_n (b_n marks it configurable), other nodes
      nothing. The batch holds one copy of the graph per config (`make_batch(expand=True)`),
      so propagation sees how each config changes every node within `depth` hops.
    * "late": onto the pooled graph embedding. Tile: ŷ = Head([h_G ‖ MLP(c)]); layout:
      ŷ = Head([h_G ‖ mean_{v configurable} MLP([h_v ‖ c_v])]). The graph is
      propagated once for all its configs: cheap, but configs cannot change messages.

    Config vectors are standardised with training-set mean/std buffers like x.
    """

    def __init__(self, propagation: str, feature_dim: int, num_types: int, width: int = 64,
                 depth: int = 3, type_dim: int = 32, dropout: float = 0.0, residual: bool = True,
                 norm: str = "layer", pooling: str = "mean",
                 layer_options: Optional[Mapping[str, Any]] = None,
                 config_dim: int = 0, node_config_dim: int = 0, join: str = "early"):
        super().__init__()
        if join not in JOINS:
            raise UnknownNameError(f"unknown join {join!r} (known: {', '.join(JOINS)})")
        self.encoder = NodeEncoder(feature_dim, num_types, width, type_dim)
        self.blocks = nn.ModuleList(
            PropagationBlock(build_layer(propagation, width, layer_options), width, residual, norm, dropout)
            for _ in range(depth))
        self.pool = POOLINGS.get(pooling)()
        self.config_dim, self.node_config_dim, self.join = config_dim, node_config_dim, join
        joined = 0
        for name, dim in (("config", config_dim), ("node_config", node_config_dim)):
            if not dim:
                continue
            self.register_buffer(f"{name}_mean", torch.zeros(dim))
            self.register_buffer(f"{name}_std", torch.ones(dim))
            if join == "early":  # the config part of the encoder's first layer
                setattr(self, f"{name}_in", nn.Linear(dim, width, bias=name == "node_config"))
            else:
                extra = width if name == "node_config" else 0  # [h_v ‖ c_v]
                setattr(self, f"{name}_late", nn.Sequential(nn.Linear(dim + extra, width), nn.ReLU(),
                                                            nn.Linear(width, width)))
                joined += 1
        self.head = PredictHead(width * (1 + joined), hidden=width, dropout=dropout)

    @property
    def expands(self) -> bool:
        """Whether batches need one graph copy per config (`make_batch(expand=...)`)."""
        return self.join == "early" and bool(self.config_dim or self.node_config_dim)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.head(self.embed(batch))

    def embed(self, batch: Batch) -> torch.Tensor:
        """z: the pooled graph embedding of each config row (with late-joined config
        features), what the head reads; (C, head width)."""
        pre = self.encoder.first(batch.x, batch.types)          # (N, W), before the ReLU
        if batch.expanded:
            pre = pre[batch.node_index]                          # one copy per config row
        elif self.expands:
            raise ValueError("early join needs make_batch(..., expand=True)")
        if self.join == "early" and self.config_dim:
            pre = pre + self.config_in(self._standard(batch.config_x, "config"))[batch.node_row]
        if self.join == "early" and self.node_config_dim:
            pre = pre.index_add(0, batch.node_config_node,
                                self.node_config_in(self._standard(batch.node_config_x, "node_config")))
        h = self.encoder.finish(pre)
        for block in self.blocks:
            h = block(batch.graph, h)
        hg = self.pool(batch.graph, h)            # one row per graph (per config when expanded)
        rows = batch.pool_index if batch.pool_index is not None else batch.config_graph
        z = hg[rows]
        if self.join == "late" and self.config_dim:       # late join: at the pooled embedding
            z = torch.cat([z, self.config_late(self._standard(batch.config_x, "config"))], dim=1)
        if self.join == "late" and self.node_config_dim:
            m = self.node_config_late(torch.cat(
                [h[batch.node_config_node], self._standard(batch.node_config_x, "node_config")], dim=1))
            total = torch.zeros(len(rows), m.shape[1], dtype=m.dtype, device=m.device).index_add(
                0, batch.node_config_row, m)
            count = torch.zeros(len(rows), dtype=m.dtype, device=m.device).index_add(
                0, batch.node_config_row, torch.ones_like(batch.node_config_row, dtype=m.dtype))
            z = torch.cat([z, total / count.clamp(min=1.0)[:, None]], dim=1)
        return z

    def _standard(self, c: Optional[torch.Tensor], name: str) -> torch.Tensor:
        if c is None:
            raise ValueError(f"the model joins {name} features, the batch has none")
        return (c - getattr(self, f"{name}_mean")) / getattr(self, f"{name}_std")

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        self.encoder.feature_mean.copy_(torch.tensor(stats.feature_mean))
        self.encoder.feature_std.copy_(torch.tensor(stats.feature_std))
        self.head.target_mean.fill_(stats.target_mean)
        self.head.target_std.fill_(stats.target_std)
        for name in ("config", "node_config"):
            mean, std = getattr(stats, f"{name}_mean"), getattr(stats, f"{name}_std")
            if getattr(self, f"{name}_dim") and mean is not None:
                getattr(self, f"{name}_mean").copy_(torch.tensor(mean))
                getattr(self, f"{name}_std").copy_(torch.tensor(std))


def relu_stack(in_dim: int, width: int, depth: int, dropout: float) -> nn.Sequential:
    """max(1, depth − 1) layers Linear → ReLU → Dropout, `in_dim` → `width` (the head is the depth-th)."""
    layers: List[nn.Module] = []
    dims = [in_dim] + [width] * max(1, depth - 1)
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers)


class VectorMLP(nn.Module):
    """ŷ = Head(MLP((v − μ) / σ)) on one fixed-width vector per config."""

    def __init__(self, vector_dim: int, width: int = 64, depth: int = 3, dropout: float = 0.0):
        super().__init__()
        self.mlp = relu_stack(vector_dim, width, depth, dropout)
        self.head = PredictHead(width, dropout=dropout)
        self.register_buffer("vector_mean", torch.zeros(vector_dim))
        self.register_buffer("vector_std", torch.ones(vector_dim))

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.head(self.mlp((batch.vector - self.vector_mean) / self.vector_std))

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        self.vector_mean.copy_(torch.tensor(stats.vector_mean))
        self.vector_std.copy_(torch.tensor(stats.vector_std))
        self.head.target_mean.fill_(stats.target_mean)
        self.head.target_std.fill_(stats.target_std)
