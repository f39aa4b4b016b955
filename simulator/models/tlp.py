"""`tlp`: TLP's cost model, self-attention over the schedule's primitives.

TLP (Zhai et al., "TLP: A Deep Learning-based Cost Model for Tensor Program Tuning",
ASPLOS 2023) reads no program at all: it reads the sequence of schedule primitives that
made the program, each with its arguments, as a sentence. Here the sentence is the
MetaSchedule trace of each record, one token per instruction (kind, annotation key,
stage and loop ids, its numeric arguments and decision; `extract.metaschedule.trace_tokens`),
as `sample.vectors["trace_tokens"]`: a linear embedding of each token (its kind and
annotation one-hot), a learned position embedding, a stack of Transformer encoder
layers over the present tokens, the mean over them, and an MLP to one score.

TLP trains with LambdaRank within each task; `--loss lambdarank` here (pairs never cross
tasks; `benchmarks.networks` trains `tlp` with it, `RIVAL_SPECS`). The paper reads
Ansor's transform steps (crop 25 for CPU); a MetaSchedule trace is longer (13–76
instructions on the networks dataset, postprocessing included), so the sequence holds
`TRACE_LENGTH` tokens and each batch is cut to its longest trace. As in TLP, the
workload's shapes reach the model only through the split factors.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from extract.metaschedule.trace_tokens import (ANNOTATION_KEYS, CATEGORICAL_COLUMNS, INSTRUCTION_KINDS,
                                               TOKEN_WIDTH, TRACE_TOKENS_VECTOR)

from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.registry import SimulatorError

from .costmodel import TorchCostModel, register_cost_model, require_packed
from .layers import PredictHead

KIND_CLASSES = len(INSTRUCTION_KINDS) + 2        # padding, the kinds, another kind
ANNOTATION_CLASSES = len(ANNOTATION_KEYS) + 2    # none, the keys, another key
VALUE_COLUMNS = TOKEN_WIDTH - CATEGORICAL_COLUMNS
POOLINGS = ("mean", "sum")
HEADS = 4


class TraceAttention(nn.Module):
    r"""One embedding per program from the tokens t_1 … t_T of its trace:

    .. math::
        e_i = W_e\,[\mathrm{onehot}(k_i) \,\|\, \mathrm{onehot}(a_i) \,\|\, x_i \oslash m] + b_e + p_i,
        \qquad H^{l+1} = \mathrm{Encoder}_l(H^l),\ H^0 = (e_i)_{i \in P},
        \qquad z = \tfrac{1}{|P|} \textstyle\sum_{i \in P} H^L_i
        \ (\text{pooling "sum"}: \textstyle\sum_{i \in P} H^L_i)

    k_i: the token's instruction kind (0: padding), a_i: its annotation key, x_i: its
    other columns (`extract.metaschedule.trace_tokens`); m: their per-column scale
    (buffer `value_scale`, set by `set_value_scale`; 1 until then); p_i: a learned
    embedding of position i; P: the present tokens (k_i > 0). Encoder_l: a pre-norm
    Transformer encoder layer — multi-head self-attention over P (`heads` heads) and a
    feed-forward network of width 2W, each added back to its input.

    Parameters
    ----------
    length : int
        Tokens per trace, T.
    width : int
        W, the embedding width (a multiple of `heads`).
    depth : int
        Encoder layers, L (≥ 1).
    heads : int
        Attention heads.
    dropout : float
        Dropout of the encoder layers, 0 ≤ p < 1.
    pooling : str
        "mean" or "sum" over the present tokens.

    Shapes
    ------
    tokens: (C, T, TOKEN_WIDTH); output: (C, W).
    """

    def __init__(self, length: int, width: int, depth: int, heads: int = HEADS, dropout: float = 0.0,
                 pooling: str = "mean"):
        super().__init__()
        if width % heads or depth < 1 or pooling not in POOLINGS or not 0.0 <= dropout < 1.0:
            raise SimulatorError(f"tlp: width {width} must be a multiple of its {heads} heads, depth {depth} ≥ 1, "
                                 f"dropout {dropout} in [0, 1), pooling {pooling!r} one of {', '.join(POOLINGS)}")
        self.length, self.pooling = length, pooling
        self.embed = nn.Linear(KIND_CLASSES + ANNOTATION_CLASSES + VALUE_COLUMNS, width)
        self.position = nn.Embedding(length, width)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=dropout,
                                       batch_first=True, norm_first=True) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.register_buffer("value_scale", torch.ones(VALUE_COLUMNS))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.embed.reset_parameters()
        nn.init.normal_(self.position.weight, std=0.02)
        for layer in self.layers:
            for module in layer.modules():
                if isinstance(module, (nn.Linear, nn.LayerNorm)):
                    module.reset_parameters()
            layer.self_attn._reset_parameters()
        self.norm.reset_parameters()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        kinds = tokens[:, :, 0].long()
        present = kinds > 0
        used = int(present.any(0).nonzero().max()) + 1 if present.any() else 1  # the batch's longest trace
        tokens, kinds, present = tokens[:, :used], kinds[:, :used], present[:, :used]
        x = torch.cat([F.one_hot(kinds.clamp(0, KIND_CLASSES - 1), KIND_CLASSES).to(tokens.dtype),
                       F.one_hot(tokens[:, :, 1].long().clamp(0, ANNOTATION_CLASSES - 1),
                                 ANNOTATION_CLASSES).to(tokens.dtype),
                       tokens[:, :, CATEGORICAL_COLUMNS:] / self.value_scale], dim=-1)
        h = self.embed(x) + self.position.weight[:used]
        for layer in self.layers:
            h = layer(h, src_key_padding_mask=~present)
        h = self.norm(h) * present[:, :, None].to(h.dtype)
        total = h.sum(1)
        return total if self.pooling == "sum" else total / present.sum(1, keepdim=True).clamp(min=1)

    @torch.no_grad()
    def set_value_scale(self, vector_mean: torch.Tensor, vector_std: torch.Tensor) -> None:
        """`value_scale`: per value column, the largest root mean square over the token
        positions, √(μ² + σ²) of the packed vector's statistics (below 1 → 1)."""
        shape = (self.length, TOKEN_WIDTH)
        mean, std = vector_mean.reshape(shape)[:, CATEGORICAL_COLUMNS:], vector_std.reshape(shape)[:, CATEGORICAL_COLUMNS:]
        scale = (mean ** 2 + std ** 2).sqrt().amax(0)
        self.value_scale.copy_(scale.clamp(min=1.0).to(self.value_scale.dtype))


class TLPNet(nn.Module):
    """ŷ = μ_y + σ_y · MLP(TraceAttention(tokens)): a log runtime per program (lower: faster)."""

    def __init__(self, length: int, width: int, depth: int, dropout: float = 0.0, pooling: str = "mean"):
        super().__init__()
        self.length = length
        self.encoder = TraceAttention(length, width, depth, dropout=dropout, pooling=pooling)
        self.head = PredictHead(width, dropout=dropout)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.head(self.encoder(batch.vector.reshape(len(batch.vector), self.length, TOKEN_WIDTH)))

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        """The target's mean/std; the token values scaled per column (`set_value_scale`)."""
        self.head.target_mean.fill_(stats.target_mean)
        self.head.target_std.fill_(stats.target_std)
        self.encoder.set_value_scale(torch.tensor(stats.vector_mean), torch.tensor(stats.vector_std))


@register_cost_model("tlp")
class TLPCostModel(TorchCostModel):
    """TLP: self-attention over the trace's primitive tokens (`vectors["trace_tokens"]`)."""

    VECTOR = TRACE_TOKENS_VECTOR

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        length = require_packed(config, info, self.VECTOR, TOKEN_WIDTH, "tokens")
        if config.data.feature_transform != "none":
            raise SimulatorError(f"--model tlp reads instruction kinds as indices: --feature-transform "
                                 f"{config.data.feature_transform} would change them; leave it at none")
        m = config.model
        self.net = TLPNet(length, m.width, m.depth, m.dropout, m.pooling)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=False, vector=self.VECTOR)
