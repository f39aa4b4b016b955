"""Encode, propagate, aggregate, predict: one small class per idea, registered by name.

A propagation layer maps node states (N, W) → (N, W) on a batched DGLGraph that
already has reverse edges and self-loops (see `simulator.data.batching`). Activation,
normalisation, dropout and the residual are added around it by `PropagationBlock`, so
a new layer is just the formula, in the manner of DGL's conv modules (a docstring with
the formula, its parameters and shapes; `reset_parameters`)::

    @register_propagation("gin")
    class GINLayer(PropagationLayer):
        r'''h'_v = MLP((1 + ε) h_v + Σ_{u ∈ N(v)} h_u) …'''
        OPTIONS = {"eps": 0.0}           # the layer's options and their defaults

        def __init__(self, width: int, eps: float = 0.0): ...
        def reset_parameters(self): ...
        def forward(self, graph, h): ...

and `--model gin [--layer-option eps=0.1]` then trains a graph model with it. Options
reach the layer as one keyword dict, checked by `PropagationLayer.resolve_options`: an
unknown option is an error naming the layer and its known options.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping, Optional

import torch
import torch.nn.functional as F
from torch import nn

from extract.cli import COUNT, Range
from simulator.dgl_compat import dglnn
from simulator.registry import Registry, SimulatorError

PROPAGATIONS: Registry = Registry("model/propagation layer")
POOLINGS: Registry = Registry("pooling")
register_propagation = PROPAGATIONS.register
register_pooling = POOLINGS.register


class PropagationLayer(nn.Module):
    """Base of the propagation layers: `OPTIONS` names the layer's options (beyond the
    width) with their defaults; `OPTION_RANGES` the allowed values of numeric ones
    (`extract.cli` ranges); `resolve_options` checks and completes a given dict."""

    OPTIONS: ClassVar[Dict[str, Any]] = {}
    OPTION_RANGES: ClassVar[Dict[str, Range]] = {}

    @classmethod
    def resolve_options(cls, given: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """`OPTIONS` updated with `given`, values cast to the defaults' types; an unknown
        option is a `SimulatorError` naming the layer and the options it knows."""
        name = getattr(cls, "registered_name", cls.__name__)
        out = dict(cls.OPTIONS)
        for key, value in (given or {}).items():
            if key not in cls.OPTIONS:
                known = ", ".join(cls.OPTIONS) or "none"
                raise SimulatorError(f"propagation layer {name!r} has no option {key!r} (known: {known})")
            default = cls.OPTIONS[key]
            try:
                out[key] = _cast(value, default)
            except (TypeError, ValueError):
                raise SimulatorError(f"propagation layer {name!r}: option {key}={value!r} is not "
                                     f"a {type(default).__name__}") from None
            allowed = cls.OPTION_RANGES.get(key)
            if allowed is not None and not (isinstance(out[key], (int, float)) and allowed.contains(out[key])):
                raise SimulatorError(f"propagation layer {name!r}: option {key}={value!r} is not "
                                     f"{allowed.describe()}")
        return out

    def reset_parameters(self) -> None:
        raise NotImplementedError

    def forward(self, graph, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def _cast(value: Any, default: Any) -> Any:
    """`value` (possibly a command-line string) as the type of the option's default."""
    if default is None:
        return value
    if isinstance(default, bool) and isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ValueError(value)
        return value.lower() in ("true", "1")
    return type(default)(value)


def build_layer(name: str, width: int, options: Optional[Mapping[str, Any]] = None) -> PropagationLayer:
    """The propagation layer `name` of `width`, its options checked."""
    cls = PROPAGATIONS.get(name)
    return cls(width, **cls.resolve_options(options))


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
class GCNLayer(PropagationLayer):
    r"""Graph convolution (Kipf & Welling, 2017).

    .. math:: H' = \tilde D^{-1/2} \hat A \tilde D^{-1/2} H W + b,
              \quad \hat A = A + A^\top + I

    (the graph's reverse edges and self-loops make Â; D̃ is its degree matrix).

    Parameters
    ----------
    width : int
        Node-state width W (input and output).

    Shapes
    ------
    graph : batched DGLGraph of N nodes, with reverse edges and a self-loop per node
    h : (N, width) node states in; the output is (N, width)
    """

    def __init__(self, width: int):
        super().__init__()
        self.conv = dglnn.GraphConv(width, width, norm="both")

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()

    def forward(self, graph, h):
        return self.conv(graph, h)


@register_propagation("sage")
class SAGELayer(PropagationLayer):
    r"""GraphSAGE with the mean aggregator (Hamilton et al., 2017).

    .. math:: h'_v = W_1 h_v + W_2 \operatorname{mean}_{u \in N(v)} h_u + b

    Parameters
    ----------
    width : int
        Node-state width W (input and output).

    Shapes
    ------
    graph : batched DGLGraph of N nodes, with reverse edges and a self-loop per node
    h : (N, width) node states in; the output is (N, width)
    """

    def __init__(self, width: int):
        super().__init__()
        self.conv = dglnn.SAGEConv(width, width, "mean")

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()

    def forward(self, graph, h):
        return self.conv(graph, h)


@register_propagation("gat")
class GATLayer(PropagationLayer):
    r"""Graph attention (Veličković et al., 2018), K heads of width W/K concatenated.

    .. math:: h'_i = \Big\Vert_{k=1}^{K} \sum_{j \in N(i)} \alpha^k_{ij} W^k h_j,
              \quad \alpha^k_{ij} = \operatorname{softmax}_j
              \operatorname{LeakyReLU}(a_k^\top [W^k h_i \Vert W^k h_j])

    Parameters
    ----------
    width : int
        Node-state width W (input and output); a multiple of `heads`.
    heads : int, default 4
        Attention heads K (`--heads`).

    Shapes
    ------
    graph : batched DGLGraph of N nodes, with reverse edges and a self-loop per node
    h : (N, width) node states in; the output is (N, width)
    """

    OPTIONS = {"heads": 4}
    OPTION_RANGES = {"heads": COUNT}

    def __init__(self, width: int, heads: int = 4):
        super().__init__()
        if heads < 1 or width % heads:
            raise SimulatorError(f"propagation layer 'gat': width {width} is not a multiple of heads {heads}")
        self.conv = dglnn.GATConv(width, width // heads, heads)

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()

    def forward(self, graph, h):
        return self.conv(graph, h).flatten(1)


@register_propagation("cheb")
class ChebLayer(PropagationLayer):
    r"""Chebyshev spectral convolution (Defferrard et al., 2016).

    .. math:: H' = \sum_{k<K} T_k(\tilde L) H W_k + b, \quad
              \tilde L = 2L/\lambda_{max} - I = -\tilde D^{-1/2} \hat A \tilde D^{-1/2}

    with λ_max = 2, T_0 = I, T_1 = L̃, T_k = 2 L̃ T_{k−1} − T_{k−2}.

    Parameters
    ----------
    width : int
        Node-state width W (input and output).
    k : int, default 3
        Polynomial order K (`--cheb-k`).

    Shapes
    ------
    graph : batched DGLGraph of N nodes, with reverse edges and a self-loop per node
    h : (N, width) node states in; the output is (N, width)
    """

    OPTIONS = {"k": 3}
    OPTION_RANGES = {"k": COUNT}

    def __init__(self, width: int, k: int = 3):
        super().__init__()
        if k < 1:
            raise SimulatorError(f"propagation layer 'cheb': k {k} must be at least 1")
        self.conv = dglnn.ChebConv(width, width, k, activation=None)

    def reset_parameters(self) -> None:
        self.conv.linear.reset_parameters()  # DGL's ChebConv: one Linear over the K stacked terms

    def forward(self, graph, h):
        return self.conv(graph, h, lambda_max=[2.0] * graph.batch_size)


@register_propagation("mlp")
class NodeMLPLayer(PropagationLayer):
    r"""No messages: nodes share information only after pooling (a baseline).

    .. math:: h'_v = W h_v + b

    Parameters
    ----------
    width : int
        Node-state width W (input and output).

    Shapes
    ------
    graph : batched DGLGraph of N nodes, with reverse edges and a self-loop per node
    h : (N, width) node states in; the output is (N, width)
    """

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def reset_parameters(self) -> None:
        self.linear.reset_parameters()

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
