"""`config-mlp`: a configuration-only baseline for TpuGraphs layout data, what the
layout choices alone tell without the program.

    ŷ = Head(mean_{v configurable} φ((c_v − μ) / σ))

`c_v`: configurable node v's row of the config's `node_config_feat` (the layouts of its
output and operands, k = 18 values); μ, σ: the training set's mean and std of those rows;
φ: `depth` − 1 (at least 1) layers Linear → ReLU of `width`; Head: `PredictHead`. The
graph (node features, opcodes, edges) is never read: whatever a graph model adds over
this one comes from the program. The batch still holds the graph, because the layout
rows (`node_config_x`, `node_config_row`) are built with it (`make_batch`).
"""
from __future__ import annotations

import torch
from torch import nn

from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.registry import SimulatorError
from .costmodel import TorchCostModel, register_cost_model
from .layers import PredictHead
from .model import relu_stack


class ConfigMLP(nn.Module):
    """ŷ = Head(mean_v φ((c_v − μ) / σ)) over the configurable nodes v of each config row.

    Parameters: `config_dim` k (features per configurable node), `width` W, `depth`
    (φ has max(1, depth − 1) layers), `dropout`. Input: a layout `Batch`
    (`node_config_x` (R, k), `node_config_row` (R,)); output: (C,) log runtimes."""

    def __init__(self, config_dim: int, width: int = 64, depth: int = 3, dropout: float = 0.0):
        super().__init__()
        self.phi = relu_stack(config_dim, width, depth, dropout)
        self.head = PredictHead(width, dropout=dropout)
        self.register_buffer("node_config_mean", torch.zeros(config_dim))
        self.register_buffer("node_config_std", torch.ones(config_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.node_config_x is None:
            raise ValueError("config-mlp needs layout config rows (node_config_x) in the batch")
        rows = len(batch.config_graph)
        h = self.phi((batch.node_config_x - self.node_config_mean) / self.node_config_std)
        total = torch.zeros(rows, h.shape[1], dtype=h.dtype, device=h.device).index_add(0, batch.node_config_row, h)
        count = torch.zeros(rows, dtype=h.dtype, device=h.device).index_add(
            0, batch.node_config_row, torch.ones_like(batch.node_config_row, dtype=h.dtype))
        return self.head(total / count.clamp(min=1.0)[:, None])

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        self.head.target_mean.fill_(stats.target_mean)
        self.head.target_std.fill_(stats.target_std)
        if stats.node_config_mean is not None:
            self.node_config_mean.copy_(torch.tensor(stats.node_config_mean))
            self.node_config_std.copy_(torch.tensor(stats.node_config_std))


class LayoutRowsCostModel(TorchCostModel):
    """A cost model that reads the per-node layout rows of TpuGraphs layout data: other data
    is refused; each graph is batched once, its config rows beside it."""

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        if not info.node_config_dim:
            raise SimulatorError(f"--model {config.model.model} reads the per-node layout configs of "
                                 f"TpuGraphs layout data (tpugraphs:layout:…); this data has none")

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=True, expand=False)


@register_cost_model("config-mlp")
class ConfigMLPCostModel(LayoutRowsCostModel):
    """The configuration-only baseline (`ConfigMLP`) on TpuGraphs layout data."""

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        m = config.model
        self.net = ConfigMLP(info.node_config_dim, width=m.width, depth=m.depth, dropout=m.dropout)
