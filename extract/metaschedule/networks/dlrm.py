"""The MLPs and feature interaction of DLRM (Naumov et al., "Deep Learning Recommendation
Model for Personalization and Recommendation Systems", 2019, Section 2 and Figure 1),
sized as the MLPerf DLRM benchmark on Criteo Terabyte: 13 dense features through the
bottom MLP 512-256-128, 26 embedding vectors of 128, pairwise dot products of the 27
vectors (the 351 below the diagonal) concatenated with the bottom MLP's output (479
features), top MLP 1024-1024-512-256-1, sigmoid.

The embedding tables (tens of gigabytes, sharded and read by memory-bound gathers) are
not part of the program: it takes the 26 looked-up vectors as its second input, so the
tasks are the MLPs and the interaction. Random weights, nothing downloaded.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

DENSE, SPARSE, EMBED = 13, 26, 128
BOTTOM, TOP = (512, 256, EMBED), (1024, 1024, 512, 256, 1)
INPUT_SHAPES = ((1, DENSE), (1, SPARSE, EMBED))


def mlp(cin: int, widths: Sequence[int], last: nn.Module) -> nn.Sequential:
    """Linear layers of `widths`, ReLU between them and `last` after the final one."""
    layers: List[nn.Module] = []
    for i, cout in enumerate(widths):
        layers += [nn.Linear(cin, cout), nn.ReLU() if i + 1 < len(widths) else last]
        cin = cout
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """(dense (B, 13), embeddings (B, 26, 128)) → click probability (B, 1)."""

    def __init__(self):
        super().__init__()
        self.bottom = mlp(DENSE, BOTTOM, nn.ReLU())
        vectors = SPARSE + 1
        rows, cols = torch.tril_indices(vectors, vectors, offset=-1)
        self.register_buffer("pairs", rows * vectors + cols, persistent=False)
        self.top = mlp(EMBED + len(rows), TOP, nn.Sigmoid())

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        vectors = torch.cat([x[:, None], embeddings], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2)).flatten(1)
        return self.top(torch.cat([x, dots.index_select(1, self.pairs)], dim=1))
