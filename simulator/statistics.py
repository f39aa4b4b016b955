"""Normalisation statistics: the training set's mean/std of what a model standardises.

One definition (`Normalization`'s fields, the std floor) and two estimators:

* `normalization_of(items)`: exact, from prepared items held in memory (a list of
  samples' tensors) — the two-pass mean/std of all their rows;
* `RunningStats`: streaming sums, for a source that cannot hold its training set (the
  lazy TpuGraphs source feeds it a seeded subset of graphs and configs).

Either way: node features of every node; log runtimes of the measured configs (finite
ones); vectors and config features when the items carry them. A std below `STD_FLOOR`
(a constant column) is replaced by 1.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import torch

from .batching import Prepared
from .config import Normalization

STD_FLOOR = 1e-6
FIELDS = (("x", "feature"), ("vector", "vector"), ("config_x", "config"), ("node_config_x", "node_config"))


def _std(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    s = x.std(dim=dim, unbiased=False) if x.shape[dim] > 1 else torch.ones_like(x.mean(dim))
    return torch.where(s > STD_FLOOR, s, torch.ones_like(s))


def normalization_of(items: Sequence[Prepared]) -> Normalization:
    """Exact statistics of prepared items (see the module docstring)."""
    y = torch.cat([it.y for it in items]).double()
    y = y[torch.isfinite(y)]
    stats: Dict[str, object] = {"target_mean": float(y.mean()), "target_std": float(_std(y))}
    for attr, name in FIELDS:
        if getattr(items[0], attr) is None:
            continue
        rows = torch.cat([_rows(getattr(it, attr)) for it in items]).double()
        stats[f"{name}_mean"], stats[f"{name}_std"] = rows.mean(0).tolist(), _std(rows).tolist()
    return Normalization(**stats)  # type: ignore[arg-type]


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]) if t.ndim > 2 else t


class RunningStats:
    """Streaming mean/std per name (count, Σx, Σx² in float64); rows with a non-finite
    value are left out."""

    def __init__(self) -> None:
        self._acc: Dict[str, List] = {}

    def add(self, name: str, values: np.ndarray) -> None:
        values = np.asarray(values, np.float64)
        if values.ndim > 1:
            values = values.reshape(-1, values.shape[-1])
        values = values[np.all(np.isfinite(values.reshape(len(values), -1)), axis=1)]
        s = self._acc.setdefault(name, [0, 0.0, 0.0])
        s[0] += len(values)
        s[1] = s[1] + values.sum(0)
        s[2] = s[2] + (values ** 2).sum(0)

    def add_item(self, item: Prepared, nodes: bool = True) -> None:
        """An item's log runtimes, vectors and config features (and node features if `nodes`)."""
        self.add("target", item.y.numpy())
        for attr, name in FIELDS:
            if getattr(item, attr) is not None and (nodes or attr != "x"):
                self.add(name, getattr(item, attr).numpy())

    def count(self, name: str) -> int:
        return self._acc.get(name, [0])[0]

    def result(self) -> Normalization:
        stats: Dict[str, object] = {}
        for name, (count, total, squares) in self._acc.items():
            mean = total / count
            std = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
            std = np.where(std > STD_FLOOR, std, 1.0)
            if name == "target":
                stats["target_mean"], stats["target_std"] = float(mean), float(std)
            else:
                stats[f"{name}_mean"], stats[f"{name}_std"] = mean.tolist(), std.tolist()
        return Normalization(**stats)  # type: ignore[arg-type]
