"""Losses on predicted log runtimes ŷ against measured log runtimes y, by `--loss` name.

Pointwise losses (`huber`, `l1`, `mse`) fit the log runtime itself. Ranking losses
(`listmle`, `pairwise-hinge`) compare only configs of the same group (workload) in a
batch, scored as s = −ŷ / T (faster = higher score; T is `--temperature`, as in
tpu_graphs/TF-Ranking); their predictions are right up to a per-workload shift, so
L1/MAPE of a ranking-trained model mean little. Training builds grouped batches for
them (`simulator.batching.batch_indices`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .registry import Registry

LOSSES: Registry = Registry("loss")
register_loss = LOSSES.register


class Loss(nn.Module):
    ranking = False

    def __init__(self, delta: float = 1.0, temperature: float = 1.0, **_):
        super().__init__()
        self.delta = delta
        self.temperature = temperature

    def terms(self, y: torch.Tensor, group: torch.Tensor) -> int:
        """How many terms the loss averages over on this batch (pointwise: rows). A
        distributed step weights each process's loss by its share of the global batch's
        terms (`simulator.distributed`)."""
        return int(y.numel())


@register_loss("huber")
class HuberLoss(Loss):
    """mean ½(ŷ−y)² where |ŷ−y| ≤ δ, else δ(|ŷ−y| − ½δ) (δ = `--huber-delta`, in log units)."""

    def forward(self, pred, y, group):
        return F.huber_loss(pred, y, delta=self.delta)


@register_loss("l1")
class L1Loss(Loss):
    """mean |ŷ − y|"""

    def forward(self, pred, y, group):
        return F.l1_loss(pred, y)


@register_loss("mse")
class MSELoss(Loss):
    """mean (ŷ − y)²"""

    def forward(self, pred, y, group):
        return F.mse_loss(pred, y)


@register_loss("listmle")
class ListMLELoss(Loss):
    """For each group, π = configs by measured runtime, fastest first, s = −ŷ/T:
    −log P(π | s) = Σ_i [log Σ_{j ≥ i} exp(s_π(j)) − s_π(i)], averaged over positions and
    groups (Xia et al., 2008)."""

    ranking = True

    def terms(self, y, group):
        """Groups with at least two configs."""
        _, counts = torch.unique(group, return_counts=True)
        return int((counts >= 2).sum())

    def forward(self, pred, y, group):
        losses = []
        for g in torch.unique(group):
            member = group == g
            if int(member.sum()) < 2:
                continue
            s = -pred[member] / self.temperature
            s = s[torch.argsort(y[member], stable=True)]
            # log Σ_{j ≥ i} exp(s_j): a reversed cumulative logsumexp
            tail = torch.logcumsumexp(s.flip(0), 0).flip(0)
            losses.append((tail - s).mean())
        return torch.stack(losses).mean() if losses else pred.sum() * 0.0


@register_loss("pairwise-hinge")
class PairwiseHingeLoss(Loss):
    """mean over pairs (i, j) of one group with y_i < y_j of max(0, 1 − (s_i − s_j)),
    s = −ŷ/T: a faster config must score a margin of 1 above a slower one."""

    ranking = True

    def terms(self, y, group):
        """Pairs of one group with y_i < y_j."""
        return int(((group[:, None] == group[None, :]) & (y[:, None] < y[None, :])).sum())

    def forward(self, pred, y, group):
        s = -pred / self.temperature
        pairs = (group[:, None] == group[None, :]) & (y[:, None] < y[None, :])
        if not bool(pairs.any()):
            return pred.sum() * 0.0
        margins = s[:, None] - s[None, :]
        return F.relu(1.0 - margins[pairs]).mean()


def build_loss(name: str, delta: float = 1.0, temperature: float = 1.0) -> Loss:
    return LOSSES.get(name)(delta=delta, temperature=temperature)
