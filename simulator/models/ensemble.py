"""`Ensemble`: K copies of one network, each initialised on its own, trained side by side.

    ŷ = (1/K) Σ_k f_k(batch)

Why: a network trained on few programs ranks held-out ones differently from seed to seed
(on the XLA layout collection a held-out program's τ has a std of ~0.04 over seeds), and the
mean of K such networks varies less than one of them. Trained side by side — the same batches,
each member its own loss (`simulator.sgd.batch_loss` averages the members' losses) —
rather than as one network on the mean's loss, so that each member learns as if alone and
their errors stay independent (only the gradient-norm clip, `--grad-clip`, is taken over all
members together). Measured: docs/xla_collection.md.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from simulator.config import Normalization
from simulator.data.batching import Batch
from simulator.registry import SimulatorError


class Ensemble(nn.Module):
    """The mean of `members` networks made by `build`.

    Parameters: `build` (a callable returning one member; a member has
    `set_normalization(stats)` and `reset_parameters()`), `members` K ≥ 2. Input: a `Batch`
    as the member reads it; output: while training (C, K), every member's prediction (the
    training step averages their losses), in eval mode (C,), their mean."""

    def __init__(self, build: Callable[[], nn.Module], members: int):
        super().__init__()
        if members < 2:
            raise SimulatorError(f"an ensemble has at least 2 members, not {members}")
        self.members = nn.ModuleList(build() for _ in range(members))
        for member in self.members:
            for method in ("set_normalization", "reset_parameters"):
                if not callable(getattr(member, method, None)):
                    raise SimulatorError(f"{type(member).__name__} has no {method}(); it cannot be an "
                                         f"ensemble member")

    def reset_parameters(self) -> None:
        for member in self.members:
            member.reset_parameters()

    def forward(self, batch: Batch) -> torch.Tensor:
        predictions = torch.stack([member(batch) for member in self.members], dim=1)
        return predictions if self.training else predictions.mean(dim=1)

    @torch.no_grad()
    def set_normalization(self, stats: Normalization) -> None:
        for member in self.members:
            member.set_normalization(stats)


def ensemble_of(build: Callable[[], nn.Module], members: int) -> nn.Module:
    """One network from `build` (members = 1: no wrapper, the weights keep their names),
    else an `Ensemble` of `members` of them."""
    if members < 1:
        raise SimulatorError(f"--members {members}: a model has at least one member")
    return build() if members == 1 else Ensemble(build, members)
