"""A GNN that sees only what does not scale with the workload (issue 13): `gcn-inv`.

Trained on one workload, the plain `gcn` keys on node features whose values scale with
the workload's size — trip counts, bytes touched, buffer sizes, reuse counts (see
`benchmarks.transfer_analysis`): on another workload those values lie elsewhere, and the
model's ranking degrades, its top picks most. `gcn-inv` is the same network with
those columns left out: the encoder multiplies the standardised features by a 0/1 mask
(a buffer, so a checkpoint carries the choice), so the model ranks configs from
the node types, loop kinds and small extents (tile sizes), strides, and the
size-invariant, hardware-relative columns of the extractor (`extract.tir_context`:
share of the program's work, footprints against the caches, hits in registers / L1 /
L2, contiguity, vector fill, and the GPU launch structure).

Data without those columns (an older extractor) still trains; it then only loses the
absolute ones.
"""
from __future__ import annotations

from typing import List, Tuple

import torch

from .config import ModelInfo, TrainConfig
from .costmodel import GraphCostModel, register_cost_model
from .layers import NodeEncoder
from .model import GraphModel

# node-feature columns whose values scale with the workload's size
ABSOLUTE_COLUMNS: Tuple[str, ...] = ("outer_trips", "inner_trips", "bytes_touched", "reuse", "buffer_bytes",
                                     "stride_min", "stride_innermost")


class MaskedNodeEncoder(NodeEncoder):
    """`NodeEncoder` whose standardised features are multiplied by `feature_keep` (0/1)."""

    def __init__(self, feature_dim: int, num_types: int, width: int, type_dim: int, drop: List[int]):
        super().__init__(feature_dim, num_types, width, type_dim)
        keep = torch.ones(feature_dim)
        keep[drop] = 0.0
        self.register_buffer("feature_keep", keep)

    def first(self, x: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        x = (x - self.feature_mean) / self.feature_std * self.feature_keep
        return self.mlp[0](torch.cat([x, self.type_embedding(types)], dim=1))


@register_cost_model("gcn-inv")
class InvariantGCNCostModel(GraphCostModel):
    """GCN on the size-invariant node features (the absolute-size columns left out)."""

    PROPAGATION = "gcn"
    DROP: Tuple[str, ...] = ABSOLUTE_COLUMNS

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super(GraphCostModel, self).__init__(config, info)  # TorchCostModel: the net is built here
        m = config.model
        self.net = GraphModel(self.PROPAGATION, info.feature_dim, info.num_types, width=m.width, depth=m.depth,
                              type_dim=m.type_dim, dropout=m.dropout, residual=m.residual, norm=m.norm,
                              pooling=m.pooling, layer_options=m.layer_options, config_dim=info.config_dim,
                              node_config_dim=info.node_config_dim, join=m.join)
        self.net.encoder = MaskedNodeEncoder(info.feature_dim, info.num_types, m.width, m.type_dim,
                                             self.dropped_columns())

    def dropped_columns(self) -> List[int]:
        names = list(self.info.feature_names or [])
        return [names.index(n) for n in self.DROP if n in names]


@register_cost_model("mlp-inv")
class InvariantMLPCostModel(InvariantGCNCostModel):
    """The graph-free `mlp` (node states pooled, no message passing) on the same
    size-invariant node features."""

    PROPAGATION = "mlp"
