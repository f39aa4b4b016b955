"""`layout-sum`: a program's runtime under a layout config as a sum of what each
configurable node's layout costs, for TpuGraphs layout data.

    ŷ = μ_y + σ_y · Σ_{v configurable} ψ([(x_v − μ_x) / σ_x ‖ E[t_v] ‖ (c_v − μ_c) / σ_c])

`x_v`: configurable node v's node features (its opcode's shape, dimensions, …), `t_v` its
opcode, `E` a learned opcode embedding; `c_v`: v's row of the config's `node_config_feat`
(the layouts of its output and operands), and, where the files carry the nodes' roles
(`node_config_roles`, this project's collections), its `role_columns`: what the most-minor
dimensions are to the operation and whether XLA would have put them there
(simulator/data/layout_roles.py); μ, σ: the training set's means and stds — of the
configurable nodes' features for x (every node's would leave them on another scale: measured
τ 0.47 → 0.37 on held-out families), of the layout rows for c; ψ: `depth` − 1 (at least 1)
layers Linear → ReLU of `width`, then Linear → 1. The rest of the graph is not read.

Why a sum over the configurable nodes rather than a graph network's pooled embedding: a
layout changes the program only at the nodes it constrains (a copy, a slower kernel), so
runtime differences between configs add up node by node; a graph network pools every node
of the (pruned) graph, where the few config-dependent states are diluted. Measured against
the graph networks and the configuration-only MLP on the XLA layout collection's programs,
a model family held out at a time: docs/xla_collection.md.
"""
from __future__ import annotations

import torch
from torch import nn

from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.data.layout_roles import ROLE_COLUMNS
from simulator.registry import SimulatorError
from .config_mlp import LayoutRowsCostModel
from .costmodel import register_cost_model
from .model import relu_stack


class LayoutSum(nn.Module):
    """ŷ = μ_y + σ_y · Σ_v ψ([x̂_v ‖ E[t_v] ‖ ĉ_v]) over the configurable nodes v of each config row.

    Parameters: `feature_dim` d (node features), `num_types` (opcode vocabulary; row
    `num_types` is the unknown opcode), `config_dim` k (layout features per node), `width`
    W, `depth` (ψ has max(1, depth − 1) hidden layers), `type_dim`, `dropout`. Input: a
    layout `Batch` (`x` (N, d), `types` (N,), `node_config_x` (R, k), `node_config_node`
    (R,) the node of each row, `node_config_row` (R,) its config row); output: (C,) log
    runtimes."""

    def __init__(self, feature_dim: int, num_types: int, config_dim: int, width: int = 64, depth: int = 3,
                 type_dim: int = 16, dropout: float = 0.0):
        super().__init__()
        self.type_embedding = nn.Embedding(num_types + 1, type_dim)
        self.psi = nn.Sequential(relu_stack(feature_dim + type_dim + config_dim, width, depth, dropout),
                                 nn.Linear(width, 1))
        for name, dim in (("feature", feature_dim), ("node_config", config_dim)):
            self.register_buffer(f"{name}_mean", torch.zeros(dim))
            self.register_buffer(f"{name}_std", torch.ones(dim))
        self.register_buffer("target_mean", torch.zeros(()))
        self.register_buffer("target_std", torch.ones(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.type_embedding.weight)  # an opcode never trained on adds nothing
        for module in self.psi.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.node_config_x is None:
            raise ValueError("layout-sum needs layout config rows (node_config_x) in the batch")
        node = batch.node_config_node
        x = (batch.x[node] - self.feature_mean) / self.feature_std
        c = (batch.node_config_x - self.node_config_mean) / self.node_config_std
        cost = self.psi(torch.cat([x, self.type_embedding(batch.types[node]), c], dim=1)).squeeze(-1)
        total = torch.zeros(len(batch.config_graph), dtype=cost.dtype, device=cost.device)
        return self.target_mean + self.target_std * total.index_add(0, batch.node_config_row, cost)

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        if stats.configurable_feature_mean is None:
            raise SimulatorError("layout-sum standardises the configurable nodes' features; these statistics "
                                 "have none (data without layout configs?)")
        self.target_mean.fill_(stats.target_mean)
        self.target_std.fill_(stats.target_std)
        self.feature_mean.copy_(torch.tensor(stats.configurable_feature_mean))
        self.feature_std.copy_(torch.tensor(stats.configurable_feature_std))
        if stats.node_config_mean is not None:
            self.node_config_mean.copy_(torch.tensor(stats.node_config_mean))
            self.node_config_std.copy_(torch.tensor(stats.node_config_std))


@register_cost_model("layout-sum")
class LayoutSumCostModel(LayoutRowsCostModel):
    """The per-configurable-node additive model (`LayoutSum`) on TpuGraphs layout data; it
    reads the nodes' role columns where the data has them (`ModelInfo.layout_roles`)."""

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        m = config.model
        config_dim = info.node_config_dim + (ROLE_COLUMNS if info.layout_roles else 0)
        self.net = LayoutSum(info.feature_dim, info.num_types, config_dim, width=m.width,
                             depth=m.depth, dropout=m.dropout)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=True, expand=False, layout_roles=self.info.layout_roles)
