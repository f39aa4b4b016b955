"""GNNs that see only what does not scale with the workload: `gcn-inv`, `mlp-inv`.

Trained on one workload, the plain `gcn` keys on node features whose values scale with
the workload's size — trip counts, bytes touched, buffer sizes, reuse counts (see
`benchmarks.transfer.analysis`): on another workload those values lie elsewhere, and the
model's ranking degrades, its top picks most. `gcn-inv` is the same network reading
feature set `invariant` (`simulator.data.features`): those columns left out, the
size-invariant, hardware-relative context columns of the extractor
(`extract.tir.context`: share of the program's work, footprints against the caches,
hits in registers / L1 / L2, contiguity, vector fill, and the GPU launch structure)
added. So it ranks configs from the node types, loop kinds and small extents (tile
sizes), and those columns.

`--features` still overrides the set (e.g. `--model gcn-inv --features invariant,-work_share`).
Data without the context columns (an older extractor) still trains; it then only loses
the absolute ones.
"""
from __future__ import annotations

from .costmodel import GraphCostModel, register_cost_model


@register_cost_model("gcn-inv")
class InvariantGCNCostModel(GraphCostModel):
    """GCN on the size-invariant node features (feature set `invariant`)."""

    PROPAGATION = "gcn"
    FEATURES = "invariant"


@register_cost_model("mlp-inv")
class InvariantMLPCostModel(InvariantGCNCostModel):
    """The graph-free `mlp` (node states pooled, no message passing) on the same
    size-invariant node features."""

    PROPAGATION = "mlp"
