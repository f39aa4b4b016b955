"""Losses on predicted log runtimes ŷ against measured log runtimes y, by `--loss` name.

Pointwise losses (`huber`, `l1`, `mse`) fit the log runtime itself. Ranking losses
(`listmle`, `pairwise-hinge`, `lambdarank`) compare only configs of the same group (workload) in a
batch, scored as s = −ŷ / T (faster = higher score; T is `--temperature`, as in
tpu_graphs/TF-Ranking); `group-huber` fits log runtimes centred per group (each
group's mean taken out of ŷ and of y), i.e. the per-task normalised target. Their
predictions are right up to a per-workload shift, so L1/MAPE of a model trained with
them mean little. Training builds grouped batches for them
(`simulator.data.batching.batch_indices`): every loss with `ranking = True`.
"""
from __future__ import annotations

import math

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


class GroupwiseLoss(Loss):
    """A ranking loss computed per group of ≥ 2 configs from its scores s = −ŷ/T and log
    runtimes y (`group_loss`), averaged over the groups."""

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
            losses.append(self.group_loss(-pred[member] / self.temperature, y[member].to(pred.dtype)))
        return torch.stack(losses).mean() if losses else pred.sum() * 0.0

    @staticmethod
    def group_loss(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@register_loss("listmle")
class ListMLELoss(GroupwiseLoss):
    """For each group, π = configs by measured runtime, fastest first, s = −ŷ/T:
    −log P(π | s) = Σ_i [log Σ_{j ≥ i} exp(s_π(j)) − s_π(i)], averaged over positions and
    groups (Xia et al., 2008)."""

    @staticmethod
    def group_loss(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = s[torch.argsort(y, stable=True)]
        # log Σ_{j ≥ i} exp(s_j): a reversed cumulative logsumexp
        tail = torch.logcumsumexp(s.flip(0), 0).flip(0)
        return (tail - s).mean()


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


@register_loss("lambdarank")
class LambdaRankLoss(GroupwiseLoss):
    """LambdaRank (Burges 2010) in the LambdaLoss form of MetaSchedule's MLPModel and TenSet's MLP:
    per group, relevance r_i = min_g t / t_i (the config's throughput normalised to the group's
    fastest, ∈ (0, 1]; t = exp(y)), gain G_i = (2^r_i − 1) / maxDCG, D_k = log2(1 + k) at the
    predicted rank k (by s = −ŷ/T, best first), and

        loss_g = −Σ_{r_i > r_j} |1/D_{k_i} − 1/D_{k_j}| · |G_i − G_j| · log2 σ(s_i − s_j),

    a pairwise logistic loss weighted by how much NDCG swapping the pair would change (Wang et
    al., "The LambdaLoss Framework", 2018), summed over pairs, averaged over groups of ≥ 2 configs."""

    @staticmethod
    def group_loss(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One group's loss from scores s (higher: faster) and log runtimes y."""
        relevance = torch.exp(y.min() - y)                     # t_best / t
        order = torch.argsort(s.detach(), descending=True)
        s, relevance = s[order], relevance[order]              # by predicted rank
        discount = torch.log2(torch.arange(2, len(s) + 2, dtype=s.dtype, device=s.device))
        ideal = torch.sort(relevance, descending=True).values
        max_dcg = ((2.0 ** ideal - 1.0) / discount).sum().clamp(min=1e-10)
        gain = (2.0 ** relevance - 1.0) / max_dcg
        weight = (1.0 / discount[:, None] - 1.0 / discount[None, :]).abs() * (gain[:, None] - gain[None, :]).abs()
        better = relevance[:, None] > relevance[None, :]
        log_prob = F.logsigmoid(s[:, None] - s[None, :]) / math.log(2.0)
        return -(weight * log_prob)[better].sum()


def group_centred(values: torch.Tensor, group: torch.Tensor):
    """(values − the mean of their group, each row's group position, rows per group)."""
    _, inverse, counts = torch.unique(group, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=values.dtype, device=values.device).index_add(0, inverse, values)
    return values - (sums / counts.to(values.dtype))[inverse], inverse, counts


@register_loss("group-huber")
class GroupHuberLoss(Loss):
    """Huber (δ = `--huber-delta`) between ŷ and y each centred on its group's mean in the
    batch: mean over rows of groups with ≥ 2 configs of
    huber((ŷ_i − mean_g ŷ) − (y_i − mean_g y)). The per-task normalised target: a task's
    scale (its mean log runtime, which spans orders of magnitude across tasks) is taken
    out, only the differences between configs of one task are fitted."""

    ranking = True

    def terms(self, y, group):
        """Rows of groups with at least two configs."""
        _, inverse, counts = torch.unique(group, return_inverse=True, return_counts=True)
        return int((counts[inverse] >= 2).sum())

    def forward(self, pred, y, group):
        target, inverse, counts = group_centred(y.to(pred.dtype), group)
        centred, _, _ = group_centred(pred, group)
        keep = counts[inverse] >= 2
        if not bool(keep.any()):
            return pred.sum() * 0.0
        return F.huber_loss(centred[keep], target[keep], delta=self.delta)


def build_loss(name: str, delta: float = 1.0, temperature: float = 1.0) -> Loss:
    return LOSSES.get(name)(delta=delta, temperature=temperature)
