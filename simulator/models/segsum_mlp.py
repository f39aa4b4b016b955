"""`segsum-mlp`: the segment-sum MLP of TenSet and of MetaSchedule's `MLPModel`.

Both rank schedules with the same network over MetaSchedule's `PerStoreFeature` rows (one
164-wide row per buffer store of the scheduled program, computed by TVM in C++): an
MLP encodes every row, the encodings of a program's rows are summed (the "segment sum"),
two residual layers and a linear decoder give one score. Their recipes differ only in
hyper-parameters, not in kind, so one model serves both (docs/COSTMODEL.md):

* labels: both train on the normalised throughput r = t_best / t of each record (t_best:
  its task's fastest), with a LambdaRank loss — `--loss lambdarank` here, where the
  best is the fastest of the task's configs in the batch and pairs never cross tasks
  (MetaSchedule's and TenSet's batches mix tasks, comparing normalised throughputs of
  different tasks too);
* TenSet (`mlp_model.py`): hidden 256, Adam lr 7e-4, weight decay 1e-6, batch 512,
  gradient clip 0.5, 10 workload-embedding inputs beside the 164;
* MetaSchedule (`mlp_model.py`): hidden 256, Adam lr 7e-4, weight decay 1e-6, batch 128,
  gradient clip 0.5, step decay ×0.8 every tenth of the epochs, 8 workload inputs.

The rows arrive as `sample.vectors["per_store_rows"]` (`extract.store_rows`: slots of a
presence flag and a row), made by the one extraction path with the other vectors and
cached with them. Inputs are divided per feature by the largest |value| over the training
rows (TenSet's `fea_norm_vec`, MetaSchedule's `SegmentDataLoader` norm).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch
from torch import nn

from extract.store_rows import SLOT_WIDTH, STORE_ROW_WIDTH, STORE_ROWS_VECTOR

from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.data.sources import Source
from simulator.sgd import RunContext

from .costmodel import UPDATE_STEPS, TorchCostModel, register_cost_model, require_packed


class SegmentSumMLP(nn.Module):
    r"""A score per program from its store rows x_1 … x_S (S ≤ `slots`, present ones only):

    .. math::
        e_s = \mathrm{ReLU}(W_2\,\mathrm{ReLU}(W_1 (x_s / m) + b_1) + b_2), \quad
        h_0 = \sum_s e_s, \quad h_{k+1} = h_k + \mathrm{ReLU}(U_k h_k + c_k)\ (k = 0, 1), \quad
        \hat y = \mu_y + \sigma_y (w^\top h_2 + b)

    m: per-feature largest |x| over the training rows (`row_scale`, a buffer set by
    `set_row_scale`; 1 until then); μ_y, σ_y: the training log runtimes' mean and std.
    ŷ is a log runtime (lower: faster), as every cost model here predicts.

    Parameters
    ----------
    slots : int
        Row slots per program in the packed vector (`extract.store_rows.STORE_SLOTS`).
    width : int
        Hidden width (TenSet and MetaSchedule: 256).

    Shapes
    ------
    batch.vector: (C, slots · (1 + 164)), slot s = [presence flag, row]; output: (C,).
    """

    def __init__(self, slots: int, width: int = 256):
        super().__init__()
        self.slots = slots
        self.encoder = nn.Sequential(nn.Linear(STORE_ROW_WIDTH, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.residual = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(2)])
        self.decoder = nn.Linear(width, 1)
        self.register_buffer("row_scale", torch.ones(STORE_ROW_WIDTH))
        self.register_buffer("target_mean", torch.zeros(()))
        self.register_buffer("target_std", torch.ones(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()

    def forward(self, batch: Batch) -> torch.Tensor:
        slots = batch.vector.reshape(len(batch.vector), self.slots, SLOT_WIDTH)
        present = (slots[:, :, :1] > 0).to(slots.dtype)
        h = (self.encoder(slots[:, :, 1:] / self.row_scale) * present).sum(1)
        for layer in self.residual:
            h = h + layer(h)
        return self.target_mean + self.target_std * self.decoder(h).squeeze(-1)

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        """The target's mean/std; the rows are scaled by `row_scale` instead of the vector's
        per-column statistics (a slot's columns mix whichever stores land in it)."""
        self.target_mean.fill_(stats.target_mean)
        self.target_std.fill_(stats.target_std)

    @torch.no_grad()
    def set_row_scale(self, vectors: torch.Tensor) -> None:
        """`row_scale` = per-feature max |x| over the present rows of `vectors` (0 → 1)."""
        slots = vectors.reshape(len(vectors), self.slots, SLOT_WIDTH)
        rows = slots[:, :, 1:][slots[:, :, 0] > 0]
        scale = rows.abs().amax(0) if len(rows) else torch.ones(STORE_ROW_WIDTH)
        self.row_scale.copy_(torch.where(scale > 0, scale, torch.ones_like(scale)))


@register_cost_model("segsum-mlp")
class SegmentSumCostModel(TorchCostModel):
    """TenSet's / MetaSchedule's segment-sum MLP on the unpooled PerStoreFeature rows."""

    VECTOR = STORE_ROWS_VECTOR

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        slots = require_packed(config, info, self.VECTOR, SLOT_WIDTH, "store slots")
        self.net = SegmentSumMLP(slots, config.model.width)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=False, vector=self.VECTOR)

    def fit(self, train: Source, val: Optional[Source] = None, run: Optional[RunContext] = None) -> Dict[str, Any]:
        self._scale_rows(train)
        return super().fit(train, val, run)

    def update(self, items, steps: int = UPDATE_STEPS) -> None:
        if self.normalization is None:  # cold: the first items measured set the scale
            self._scale_rows(self.source_of(items))
        super().update(items, steps)

    def _scale_rows(self, source: Source) -> None:
        batch = source.batch(np.arange(len(source)), np.random.default_rng(self.config.seed), self.batch_spec)
        self.net.set_row_scale(batch.vector)
