"""Encode, propagate, aggregate, predict: one small class per idea, registered by name.

A propagation layer maps node states (N, W) → (N, W) on a batched DGLGraph that
already has reverse edges and self-loops (see `simulator.batching`). Activation,
normalisation, dropout and the residual are added around it by `PropagationBlock`, so
a new layer is just the formula::

    @register_propagation("mine")
    class MyLayer(nn.Module):
        def __init__(self, width, **options): ...
        def forward(self, graph, h): ...

and `--model mine` then trains a graph model with it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dgl_compat import dglnn
from .registry import Registry

PROPAGATIONS: Registry = Registry("model/propagation layer")
POOLINGS: Registry = Registry("pooling")
register_propagation = PROPAGATIONS.register
register_pooling = POOLINGS.register


# ---------------------------------------------------------------- encode
class NodeEncoder(nn.Module):
    """h⁰_v = MLP([(x_v − μ) / σ ‖ E[t_v]]): standardised features joined with a learned
    embedding of the node type t_v (row `num_types` is the unknown type); μ, σ are the
    training set's, kept as buffers so that a checkpoint carries them."""

    def __init__(self, feature_dim: int, num_types: int, width: int, type_dim: int = 32):
        super().__init__()
        self.type_embedding = nn.Embedding(num_types + 1, type_dim)
        self.mlp = nn.Sequential(nn.Linear(feature_dim + type_dim, width), nn.ReLU(), nn.Linear(width, width))
        self.register_buffer("feature_mean", torch.zeros(feature_dim))
        self.register_buffer("feature_std", torch.ones(feature_dim))

    def forward(self, x: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return self.finish(self.first(x, types))

    # The MLP split at its first activation, so that an early join can add W_c·c_v (the
    # first layer's weights for joined config features) to W·[x ‖ E[t]] before the ReLU:
    # together, the first layer of MLP([x ‖ E[t] ‖ c]).
    def first(self, x: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        x = (x - self.feature_mean) / self.feature_std
        return self.mlp[0](torch.cat([x, self.type_embedding(types)], dim=1))

    def finish(self, pre: torch.Tensor) -> torch.Tensor:
        return self.mlp[2](self.mlp[1](pre))


# ---------------------------------------------------------------- propagate
@register_propagation("gcn")
class GCNLayer(nn.Module):
    """H' = D^-½ Â D^-½ H W (Kipf & Welling), Â = A + Aᵀ + I (reverse edges, self-loops)."""

    def __init__(self, width: int, **_):
        super().__init__()
        self.conv = dglnn.GraphConv(width, width, norm="both")

    def forward(self, graph, h):
        return self.conv(graph, h)


@register_propagation("sage")
class SAGELayer(nn.Module):
    """h'_v = W₁ h_v + W₂ mean_{u ∈ N(v)} h_u (GraphSAGE, mean aggregator)."""

    def __init__(self, width: int, **_):
        super().__init__()
        self.conv = dglnn.SAGEConv(width, width, "mean")

    def forward(self, graph, h):
        return self.conv(graph, h)


@register_propagation("gat")
class GATLayer(nn.Module):
    """h'_i = ‖_k Σ_j α^k_ij W^k h_j, α^k_ij = softmax_j LeakyReLU(a_kᵀ [W^k h_i ‖ W^k h_j])
    (GAT; `heads` heads of width/heads concatenated)."""

    def __init__(self, width: int, heads: int = 4, **_):
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.conv = dglnn.GATConv(width, width // heads, heads)

    def forward(self, graph, h):
        return self.conv(graph, h).flatten(1)


@register_propagation("cheb")
class ChebLayer(nn.Module):
    """H' = Σ_{k<K} T_k(L̃) H W_k (Chebyshev), L̃ = 2L/λ_max − I with λ_max = 2, i.e.
    L̃ = −D^-½ Â D^-½; T_0 = I, T_1 = L̃, T_k = 2L̃T_{k−1} − T_{k−2}."""

    def __init__(self, width: int, cheb_k: int = 3, **_):
        super().__init__()
        self.conv = dglnn.ChebConv(width, width, cheb_k, activation=None)

    def forward(self, graph, h):
        return self.conv(graph, h, lambda_max=[2.0] * graph.batch_size)


@register_propagation("mlp")
class NodeMLPLayer(nn.Module):
    """h'_v = W h_v: no messages; nodes share information only after pooling (baseline)."""

    def __init__(self, width: int, **_):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, graph, h):
        return self.linear(h)


class PropagationBlock(nn.Module):
    """h ← h + Dropout(ReLU(Norm(layer(G, h)))) (the `h +` only with residuals)."""

    def __init__(self, layer: nn.Module, width: int, residual: bool = True, norm: str = "layer",
                 dropout: float = 0.0):
        super().__init__()
        self.layer = layer
        self.norm = nn.LayerNorm(width) if norm == "layer" else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.residual = residual

    def forward(self, graph, h):
        out = self.dropout(F.relu(self.norm(self.layer(graph, h))))
        return h + out if self.residual else out


# ---------------------------------------------------------------- aggregate
@register_pooling("mean")
class MeanPooling(dglnn.AvgPooling):
    """h_G = (1/|V|) Σ_v h_v"""


@register_pooling("sum")
class SumPooling(dglnn.SumPooling):
    """h_G = Σ_v h_v"""


@register_pooling("max")
class MaxPooling(dglnn.MaxPooling):
    """h_G = max_v h_v (elementwise)"""


# ---------------------------------------------------------------- predict
class PredictHead(nn.Module):
    """ŷ = μ_y + σ_y · (W₂ ReLU(W₁ h + b₁) + b₂): a 2-layer MLP to one scalar, the log runtime;
    μ_y, σ_y (training log runtimes) are buffers, so the MLP learns a standardised target."""

    def __init__(self, width: int, hidden: int = 0, dropout: float = 0.0):
        super().__init__()
        hidden = hidden or width  # width: of the input (the pooled row, joined features)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 1))
        self.register_buffer("target_mean", torch.zeros(()))
        self.register_buffer("target_std", torch.ones(()))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.target_mean + self.target_std * self.mlp(h).squeeze(-1)
