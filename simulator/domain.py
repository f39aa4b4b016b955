"""Domain-adversarial training (`--domain-adapt dann`, issue 13): learn from the configs
of the workloads to be ranked, without their runtimes.

Trained on one workload, a graph model ranks another workload's configs from node
features whose distribution shifts between workloads, and extrapolates to config
families it never saw measured. When it is to rank a workload, the user has that
workload's configs — only not their runtimes. DANN (Ganin & Lempitsky, 2015) uses them:
a small domain classifier D reads the pooled graph embedding z of each config and
learns to tell the training workloads' configs (domain 0) from the target configs
(domain 1), while the encoder, through a gradient-reversal layer R_λ, learns to make
them indistinguishable. Each step takes the labelled batch as before and a batch of
target configs of the same size:

    loss = task(Head(z_s), y_s) + BCE(D(R_λ(z_s)), 0) + BCE(D(R_λ(z_t)), 1)   (BCE: mean over both)

R_λ is the identity forward and multiplies the gradient by −λ backward, so D descends
the domain loss and the encoder ascends it, scaled by λ. λ follows the schedule of the
paper over training progress p ∈ [0, 1] (epochs and steps done ÷ epochs asked):
λ_p = `--adapt-weight` · (2 / (1 + exp(−10 p)) − 1), from 0 up to the weight.

The target configs are the run's test part (`target_part`): in the transfer situation
the workloads to be ranked. Their runtimes are never read: the target batch's `y` is
replaced by NaN before the step (a read would make the loss NaN and stop the run), and
the tests train with NaN target runtimes. Only graph models have a pooled embedding
(`check_domain_adapt` refuses others); the domain classifier belongs to the network
(`GraphModel.domain`: trained, checkpointed and resumed with it) but `forward` — the
predict path — never calls it. `--domain-adapt none` (the default) builds nothing and
changes nothing. Online updates (`CostModel.update`) do not adapt.

Measured on the x86 one-workload transfer matrix (`benchmarks.transfer`, specs
`gcn-inv-arf-noext-lane-dann…`, docs/results/transfer_notes.md): it does not help there —
mean top-5 unchanged at λ ≤ 0.3, a worse worst pair, worse ranking at λ 1.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .registry import SimulatorError

NONE, DANN = "none", "dann"
CHOICES = (NONE, DANN)
GAMMA = 10.0  # the schedule's steepness (Ganin & Lempitsky's γ)


def check_domain_adapt(name: str, has_embedding: bool = True) -> str:
    """`name` if it is a known choice that applies to the model (`has_embedding`: it
    pools a graph embedding); else a `SimulatorError` saying why."""
    if name not in CHOICES:
        raise SimulatorError(f"unknown --domain-adapt {name!r} (known: {', '.join(CHOICES)})")
    if name != NONE and not has_embedding:
        raise SimulatorError(f"--domain-adapt {name} trains a domain classifier on the pooled graph embedding; "
                             f"this model has none (use a graph model: gcn, gcn-inv, sage, gat, …)")
    return name


def target_part(config, parts: Mapping[str, object]):
    """The unlabelled target configs of a run whose config asks for adaptation: the split's
    test part (None without adaptation). An empty test part is an error."""
    if config.fit.domain_adapt == NONE:
        return None
    target = parts.get("test")
    if target is None or not len(target):
        raise SimulatorError(f"--domain-adapt {config.fit.domain_adapt} learns from the test part's configs "
                             f"(without their runtimes); this split's test part is empty")
    return target


def schedule(progress: float, weight: float) -> float:
    """λ_p = weight · (2 / (1 + exp(−γ p)) − 1): 0 at p = 0, → weight as p → 1."""
    return weight * (2.0 / (1.0 + math.exp(-GAMMA * progress)) - 1.0)


class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, coeff: float) -> torch.Tensor:
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return -ctx.coeff * grad, None


def grad_reverse(x: torch.Tensor, coeff: float) -> torch.Tensor:
    """R_λ(x): x forward; the gradient times −`coeff` backward."""
    return _GradientReversal.apply(x, coeff)


class DomainClassifier(nn.Module):
    r"""The domain classifier of DANN: the logit that a config comes from the target domain.

    .. math:: d(z) = w_2^\top \operatorname{ReLU}(W_1 \hat z + b_1) + b_2,
              \quad \hat z = (z - \mu_B) / \sigma_B

    ẑ: z standardised per column over the batch (both domains; BatchNorm without
    affine parameters, its running estimates in eval mode). The pooled embedding's
    domain differences are small in absolute terms (trained on C1: column std 0.28,
    mean shift 0.04): without ẑ the classifier stayed at chance inside a run (AUC 0.50,
    C1 against the other workloads); on that model's frozen embeddings, 320 steps at the
    run's learning rate reach AUC 0.81 without ẑ and 0.97 with it.

    Parameters
    ----------
    in_dim : int
        Width of the pooled graph embedding z (the prediction head's input).
    hidden : int, default 64
        Hidden width.

    Shapes
    ------
    z : (C, in_dim), one row per config; the output is (C,) logits.
    """

    def __init__(self, in_dim: int, hidden: int = 64):
        super().__init__()
        self.standardise = nn.BatchNorm1d(in_dim, affine=False)
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def reset_parameters(self) -> None:
        self.standardise.reset_running_stats()
        for layer in self.mlp:
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.standardise(z)).squeeze(-1)


def domain_loss(classifier: DomainClassifier, z_source: torch.Tensor, z_target: torch.Tensor,
                coeff: float) -> torch.Tensor:
    """BCE of the classifier on both domains' embeddings (source 0, target 1; mean over
    all rows), each embedding through R_coeff."""
    z = grad_reverse(torch.cat([z_source, z_target]), coeff)
    labels = torch.cat([torch.zeros(len(z_source)), torch.ones(len(z_target))]).to(z)
    return F.binary_cross_entropy_with_logits(classifier(z), labels)


def target_batch(target, count: int, rng: np.random.Generator, spec):
    """`count` target configs drawn without replacement (all if fewer) with the loop's
    `rng`, as a batch whose runtimes are NaN (they are never read)."""
    idx = rng.choice(len(target), size=min(count, len(target)), replace=False)
    batch = target.batch(np.sort(idx), rng, spec)
    return dataclasses.replace(batch, y=torch.full_like(batch.y, float("nan")))


def adversarial_step(net: nn.Module, batch, target, loss_fn, optimizer: torch.optim.Optimizer,
                     grad_clip: float, coeff: float) -> Sequence[float]:
    """One optimizer step on the labelled `batch` and the unlabelled `target` batch:
    task loss + domain loss through R_coeff; (task loss, domain loss). A non-finite loss
    raises `sgd.NonFiniteLoss` before the step."""
    from .sgd import apply_loss
    z_source, z_target = net.embed(batch), net.embed(target)
    task = loss_fn(net.head(z_source), batch.y, batch.group)
    domain = domain_loss(net.domain, z_source, z_target, coeff)
    apply_loss(net, task + domain, optimizer, grad_clip)
    return task.item(), domain.item()


def require_domain_head(net: nn.Module, name: str) -> DomainClassifier:
    """The network's domain classifier (a clear error when it has none)."""
    head = getattr(net, "domain", None)
    if head is None:
        raise SimulatorError(f"--domain-adapt {name}: this network has no domain classifier (a graph model "
                             f"built with --domain-adapt {name} has one)")
    return head
