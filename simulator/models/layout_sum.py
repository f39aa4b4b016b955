"""`layout-sum`: a program's runtime under a layout config as a sum of what each
configurable node's layout costs, for TpuGraphs layout data.

    ŷ = μ_y + σ_y · Σ_{v configurable} [ψ(z_v)₀ + n · s_v · ψ(z_v)₁],
    z_v = [(x_v − μ_x) / σ_x ‖ E[t_v] ‖ mean_{u ∈ out(v)} h_C(u, v) ‖ mean_{u ∈ in(v)} h_P(u, v)
           ‖ (c_v − μ_c) / σ_c ‖ mean_{w configurable, w ≠ v} ρ_w],
    h_C(u, v) = [E_C[t_u] ‖ 1[u configurable] ‖ log(1 + |u|) − log(1 + |v|)],   s_v = |v| / Σ_u |u|

`x_v`: configurable node v's node features (its opcode's shape, dimensions, …), `t_v` its
opcode, `E` a learned opcode embedding; out(v) / in(v): v's consumers / producers in the
program's graph (h_P like h_C with its own embedding E_P; a mean over none is 0); `c_v`: v's
row of the config's `node_config_feat` (the layouts of its output and operands), and, where
the files carry the nodes' roles (`node_config_roles`, this project's collections), its
`role_columns`: what the most-minor dimensions are to the operation and whether XLA would
have put them there (simulator/data/layout_roles.py); ρ_w: those role columns of the same
config's row of another configurable node w of the program, standardised as c (none where
the files carry no roles; a mean over none is 0); μ, σ: the training set's means and stds — of the
configurable nodes' features for x (every node's would leave them on another scale: measured
τ 0.47 → 0.37 on held-out families), of the layout rows for c; ψ: `depth` − 1 (at least 1)
layers Linear → ReLU of `width`, then Linear → 2; |v|: v's elements (node feature
`shape_dimensions_product`), s_v its share of the configurable nodes' elements and n their
number (n · s_v averages 1). Of the rest of the graph only v's neighbours are read.

Why a sum over the configurable nodes rather than a graph network's pooled embedding: a
layout changes the program only at the nodes it constrains (a copy, a slower kernel), so
runtime differences between configs add up node by node; a graph network pools every node
of the (pruned) graph, where the few config-dependent states are diluted. Why the second,
size-weighted term: what a layout costs at a node (a transposing copy, strided reads) grows
with the elements it touches, and the log runtime moves by that against the program's
whole; ψ₁ is a cost per element that carries over between programs of other sizes, which
the node's size as one more input did not (measured: held-out τ 0.51 → 0.56 on the
`random` search). Why the neighbours: what a layout costs depends on who reads the result
(a dot takes a transposed operand in its stride, an elementwise consumer needs a copy) and
whether that reader's layout is configured too (measured: τ 0.587 → 0.595 on `random`). Why
the other nodes' roles: a layout's cost at one node depends on the layouts the config gives
the others (a transpose is free where it relabels its producer's layout, a copy where it
does not); the mean of their roles and moved flags lets ψ read which of them the config
moves, where their raw dimension indices, which mean something else at every node, did not
(measured: τ 0.595 → 0.605 on `random`, in every seed; with their raw rows too, 0.596).
Measured against the graph networks and the configuration-only MLP on the XLA layout
collection's programs, a model family held out at a time: docs/xla_collection.md.

Its recipe on layout data, where the flags are not given (`simulator.data.tpugraphs`'s
`LAYOUT_MODEL_DEFAULTS`): the pairwise hinge, an ensemble of 3 (`--members`,
simulator/models/ensemble.py) and the last epoch's weights (`--keep-weights last`): a
validation set of one held-out family chose worse epochs than the last, and the mean of
three networks ranks held-out programs better than one (measured in the same document).
"""
from __future__ import annotations

import torch
from torch import nn

from extract.xla.hlo_graph import NODE_FEATURE_INDEX
from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec, forward_edges, untransform_features
from simulator.data.layout_roles import ROLE_COLUMNS
from simulator.registry import SimulatorError
from .config_mlp import LayoutRowsCostModel
from .costmodel import register_cost_model
from .ensemble import ensemble_of
from .model import relu_stack


class LayoutSum(nn.Module):
    """ŷ = μ_y + σ_y · Σ_v [ψ(z_v)₀ + n·s_v·ψ(z_v)₁] over the configurable nodes v of each config row.

    Parameters: `feature_dim` d (node features), `num_types` (opcode vocabulary; row
    `num_types` is the unknown opcode), `config_dim` k (layout features per node),
    `element_column` (the node feature holding a node's elements, as `feature_transform`
    left it), `role_dim` (the last `role_dim` of the k layout columns are role columns, ρ;
    0 where the data has none), `width` W, `depth` (ψ has max(1, depth − 1) hidden layers),
    `type_dim` (E, E_C and E_P), `dropout`. Input: a layout `Batch` (`x` (N, d), `types` (N,),
    `node_config_x` (R, k), `node_config_node` (R,) the node of each row, `node_config_row`
    (R,) its config row, `graph` (its edges: `forward_edges`)); output: (C,) log runtimes."""

    def __init__(self, feature_dim: int, num_types: int, config_dim: int, element_column: int,
                 feature_transform: str = "none", role_dim: int = 0, width: int = 64, depth: int = 3,
                 type_dim: int = 16, dropout: float = 0.0):
        super().__init__()
        if not 0 <= element_column < feature_dim:
            raise SimulatorError(f"layout-sum: element column {element_column} is not one of the "
                                 f"{feature_dim} node features")
        if not 0 <= role_dim <= config_dim:
            raise SimulatorError(f"layout-sum: {role_dim} role columns of {config_dim} layout columns")
        self.element_column, self.feature_transform, self.role_dim = element_column, feature_transform, role_dim
        self.type_embedding = nn.Embedding(num_types + 1, type_dim)
        self.consumer_embedding = nn.Embedding(num_types + 1, type_dim)
        self.producer_embedding = nn.Embedding(num_types + 1, type_dim)
        context_dim = 2 * (type_dim + 2)
        in_dim = feature_dim + type_dim + context_dim + config_dim + role_dim
        self.psi = nn.Sequential(relu_stack(in_dim, width, depth, dropout),
                                 nn.Linear(width, 2))
        for name, dim in (("feature", feature_dim), ("node_config", config_dim)):
            self.register_buffer(f"{name}_mean", torch.zeros(dim))
            self.register_buffer(f"{name}_std", torch.ones(dim))
        self.register_buffer("target_mean", torch.zeros(()))
        self.register_buffer("target_std", torch.ones(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for embedding in (self.type_embedding, self.consumer_embedding, self.producer_embedding):
            nn.init.zeros_(embedding.weight)  # an opcode never trained on adds nothing
        for module in self.psi.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.node_config_x is None:
            raise ValueError("layout-sum needs layout config rows (node_config_x) in the batch")
        node, row = batch.node_config_node, batch.node_config_row
        x = (batch.x[node] - self.feature_mean) / self.feature_std
        c = (batch.node_config_x - self.node_config_mean) / self.node_config_std
        context = self.neighbour_context(batch)[node]
        others = self.other_nodes_roles(c[:, c.shape[1] - self.role_dim:], row, len(batch.config_graph))
        terms = self.psi(torch.cat([x, self.type_embedding(batch.types[node]), context, c, others], dim=1))
        cost = terms[:, 0] + self.element_weights(batch) * terms[:, 1]
        total = torch.zeros(len(batch.config_graph), dtype=cost.dtype, device=cost.device)
        return self.target_mean + self.target_std * total.index_add(0, row, cost)

    def neighbour_context(self, batch: Batch) -> torch.Tensor:
        """(N, 2 · (type_dim + 2)): per node, the mean h_C over its consumers ‖ the mean h_P
        over its producers (zeros where it has none)."""
        producer, consumer = forward_edges(batch.graph)
        n, like = len(batch.types), batch.x
        configurable = like.new_zeros(n, 1)
        configurable[batch.node_config_node] = 1.0
        elements = untransform_features(batch.x[:, self.element_column], self.feature_transform).clamp(min=0)
        size = torch.log1p(elements).unsqueeze(1)

        def mean_at(index, values):
            total = like.new_zeros(n, values.shape[1]).index_add(0, index, values)
            count = like.new_zeros(n).index_add(0, index, torch.ones_like(values[:, 0]))
            return total / count.clamp(min=1.0).unsqueeze(1)

        def neighbours(embedding, node, other):   # h(other, node) for each edge, averaged at node
            h = torch.cat([embedding(batch.types[other]), configurable[other], size[other] - size[node]], dim=1)
            return mean_at(node, h)

        return torch.cat([neighbours(self.consumer_embedding, producer, consumer),
                          neighbours(self.producer_embedding, consumer, producer)], dim=1)

    @staticmethod
    def other_nodes_roles(roles: torch.Tensor, row: torch.Tensor, num_rows: int) -> torch.Tensor:
        """(R, role_dim): per layout row, the mean of `roles` over the other layout rows of
        its config row (zeros where it is the only one)."""
        total = roles.new_zeros(num_rows, roles.shape[1]).index_add(0, row, roles)
        count = roles.new_zeros(num_rows).index_add(0, row, roles.new_ones(len(roles)))
        return (total[row] - roles) / (count[row] - 1).clamp(min=1.0).unsqueeze(1)

    def element_weights(self, batch: Batch) -> torch.Tensor:
        """n · s_v per layout row: its node's share of the elements of its config row's
        configurable nodes, times their number."""
        node, row = batch.node_config_node, batch.node_config_row
        elements = untransform_features(batch.x[node, self.element_column], self.feature_transform).clamp(min=0)
        per_row = torch.zeros(len(batch.config_graph), dtype=elements.dtype, device=elements.device)
        nodes = per_row.index_add(0, row, torch.ones_like(elements))
        return nodes[row] * elements / per_row.index_add(0, row, elements)[row].clamp(min=1.0)

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
    reads the nodes' role columns where the data has them (`ModelInfo.layout_roles`);
    `--members K`: an ensemble of K (`Ensemble`)."""

    ENSEMBLES = True

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        m = config.model
        config_dim = info.node_config_dim + (ROLE_COLUMNS if info.layout_roles else 0)
        self.net = ensemble_of(lambda: LayoutSum(info.feature_dim, info.num_types, config_dim,
                                                 NODE_FEATURE_INDEX["shape_dimensions_product"],
                                                 config.data.feature_transform,
                                                 role_dim=ROLE_COLUMNS if info.layout_roles else 0,
                                                 width=m.width, depth=m.depth, dropout=m.dropout), m.members)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=True, expand=False, layout_roles=self.info.layout_roles)
