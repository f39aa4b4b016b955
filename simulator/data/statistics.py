"""Normalisation statistics: the training set's mean/std of what a model standardises.

One definition (`Normalization`'s fields, the std floor) and two estimators:

* `normalization_of(items)`: exact, from prepared items held in memory (a list of
  samples' tensors) — the two-pass mean/std of all their rows;
* `RunningStats`: streaming sums, for a source that cannot hold its training set (the
  lazy TpuGraphs source feeds it a seeded subset of graphs and configs).

Either way: node features of every node (and, on layout data, of the configurable nodes
alone); log runtimes of the measured configs; vectors and config features when the items
carry them. A std below `STD_FLOOR` (a constant column) is replaced by 1.

What cannot be standardised is an error (`SimulatorError`, one line), never a NaN
buried in the model's buffers: a non-finite value in any of them (naming the item and
the column), no measured runtime at all, and log runtimes without any variance (every
training runtime the same: nothing to learn a ranking or a scale from).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from simulator.config import Normalization
from simulator.registry import SimulatorError
from .batching import Prepared

STD_FLOOR = 1e-6
FIELDS = (("x", "feature"), ("vector", "vector"), ("config_x", "config"), ("node_config_x", "node_config"))


def _std(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    s = x.std(dim=dim, unbiased=False) if x.shape[dim] > 1 else torch.ones_like(x.mean(dim))
    return torch.where(s > STD_FLOOR, s, torch.ones_like(s))


WHAT = {"target": "log runtime", "feature": "node feature", "configurable_feature": "configurable node feature",
        "vector": "vector entry", "config": "config feature", "node_config": "per-node config feature"}


def _refuse_non_finite(name: str, values: torch.Tensor, names: Optional[Sequence[str]] = None,
                       owner: Optional[torch.Tensor] = None) -> None:
    """A one-line error at the first row of `values` holding a NaN/inf (`owner[row]`: its
    item, named by `names`)."""
    rows = values.reshape(len(values), -1)
    bad = ~torch.isfinite(rows)
    if not bool(bad.any()):
        return
    row = int(torch.nonzero(bad.any(1))[0])
    column = int(torch.nonzero(bad[row])[0])
    where = f"{names[int(owner[row])]}: " if names is not None and owner is not None else ""
    at = f" (column {column})" if values.ndim > 1 else ""
    raise SimulatorError(f"{where}{WHAT[name]} {rows[row, column].item()}{at} is not finite; the normalisation "
                         f"statistics cannot be computed")


def check_target(count: int, std: float, mean: float = 0.0) -> None:
    """The training log runtimes can be standardised: some, and not all the same."""
    if count == 0:
        raise SimulatorError("no measured runtime in the training data; nothing to normalise or learn from")
    if count > 1 and not std > 1e-9 * (1 + abs(mean)):
        raise SimulatorError(f"all {count} training runtimes are the same ({math.exp(mean):.6g} s): the log "
                             f"runtimes have no variance, so there is nothing to learn (check the data)")


def normalization_of(items: Sequence[Prepared], names: Optional[Sequence[str]] = None) -> Normalization:
    """Exact statistics of prepared items (see the module docstring); `names`: each item's
    name, for the error a non-finite value gets."""
    owners = {attr: torch.repeat_interleave(torch.arange(len(items)),
                                            torch.tensor([len(_rows(getattr(it, attr))) for it in items]))
              for attr in ("y", "x", "vector", "config_x", "node_config_x") if getattr(items[0], attr) is not None}
    y = torch.cat([it.y for it in items]).double()
    measured = ~torch.isnan(y)   # NaN: unmeasured (not in a training set; allowed in an update's items)
    _refuse_non_finite("target", y[measured], names, owners["y"][measured])
    y = y[measured]
    check_target(len(y), float(y.std(unbiased=False)) if len(y) > 1 else 1.0, float(y.mean()) if len(y) else 0.0)
    stats: Dict[str, object] = {"target_mean": float(y.mean()), "target_std": float(_std(y))}
    for attr, name in FIELDS:
        if getattr(items[0], attr) is None:
            continue
        rows = torch.cat([_rows(getattr(it, attr)) for it in items]).double()
        _refuse_non_finite(name, rows, names, owners[attr])
        stats[f"{name}_mean"], stats[f"{name}_std"] = rows.mean(0).tolist(), _std(rows).tolist()
    if items[0].config_nodes is not None:
        rows = torch.cat([it.x[it.config_nodes] for it in items]).double()  # x: checked finite above
        stats["configurable_feature_mean"], stats["configurable_feature_std"] = \
            rows.mean(0).tolist(), _std(rows).tolist()
    return Normalization(**stats)  # type: ignore[arg-type]


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]) if t.ndim > 2 else t


class RunningStats:
    """Streaming mean/std per name (count, Σx, Σx² in float64). A non-finite value is an
    error (`add(…, where=…)` names its source); NaN log runtimes (unmeasured configs) are
    left out of "target"."""

    def __init__(self) -> None:
        self._acc: Dict[str, List] = {}

    def add(self, name: str, values: np.ndarray, where: str = "") -> None:
        values = np.asarray(values, np.float64)
        if values.ndim > 1:
            values = values.reshape(-1, values.shape[-1])
        if name == "target":
            values = values[~np.isnan(values)]
        finite = np.all(np.isfinite(values.reshape(len(values), -1)), axis=1)
        if not finite.all():
            row = values.reshape(len(values), -1)[int(np.flatnonzero(~finite)[0])]
            raise SimulatorError(f"{where + ': ' if where else ''}{WHAT.get(name, name)} "
                                 f"{row[~np.isfinite(row)][0]} is not finite; the normalisation statistics "
                                 f"cannot be computed")
        s = self._acc.setdefault(name, [0, 0.0, 0.0])
        s[0] += len(values)
        s[1] = s[1] + values.sum(0)
        s[2] = s[2] + (values ** 2).sum(0)

    def add_item(self, item: Prepared, nodes: bool = True, where: str = "") -> None:
        """An item's log runtimes, vectors and config features (and node features if `nodes`)."""
        self.add("target", item.y.numpy(), where)
        for attr, name in FIELDS:
            if getattr(item, attr) is not None and (nodes or attr != "x"):
                self.add(name, getattr(item, attr).numpy(), where)

    def count(self, name: str) -> int:
        return self._acc.get(name, [0])[0]

    def result(self) -> Normalization:
        stats: Dict[str, object] = {}
        for name, (count, total, squares) in self._acc.items():
            mean = total / count
            std = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
            std = np.where(std > STD_FLOOR, std, 1.0)
            if name == "target":
                check_target(int(count), float(np.sqrt(max(float(squares / count - mean ** 2), 0.0))), float(mean))
                stats["target_mean"], stats["target_std"] = float(mean), float(std)
            else:
                stats[f"{name}_mean"], stats[f"{name}_std"] = mean.tolist(), std.tolist()
        return Normalization(**stats)  # type: ignore[arg-type]
