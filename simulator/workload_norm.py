"""Node features normalised within each workload's own config pool (`--workload-norm`, issue 13).

Trained on one workload, a graph model meets, on another workload, loop extents (register
tiles) that the training workload's config space never holds: split factors are divisors
of the workload's own extents. It extrapolates to them and may rank such an unseen tile
family first. The configs of the workload being ranked are all known at ranking time,
only their runtimes are not — so each node-feature column can be normalised within each
workload's pool of configs, on training and test workloads alike (the idea of AdaBN, or
per-domain standardisation). "The larger of this workload's tile choices" then means the
same on every workload.

Statistics are taken per (workload, node type, column) over every node of that type in
all of the workload's configs (a sample's `group`) in the data handed to the model:

  none      the features as they are (the default).
  zscore    (x − mean) / std; a column constant within the pool gives 0.
  quantile  the mid-rank of x among the pool's values, in [0, 1] (ties share their
            middle rank; a constant column gives 0.5): robust to the pool's outliers.

It changes node features only (graph models; `check_workload_norm` refuses it for a
model that reads none), and only for data held in memory (`SampleSource`): the pool is
the samples of each workload given to training, evaluation or ranking. A checkpoint
records the option (`DataConfig.workload_norm`), so it ranks with the normalisation it
was trained with.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Callable, Dict, List, Sequence

import numpy as np

from extract.sample import GraphSample

from .registry import SimulatorError

NONE = "none"


def _zscore(pool: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(values − mean) / std of each column of `pool`; 0 where the column is constant."""
    mean, std = pool.mean(axis=0), pool.std(axis=0)
    safe = np.where(std > 0, std, 1.0)
    return np.where(std > 0, (values - mean) / safe, 0.0)


def _quantile(pool: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The mid-rank of each value among its column of `pool`, as a share of the pool."""
    out = np.empty(values.shape, np.float64)
    for col in range(pool.shape[1]):
        ordered = np.sort(pool[:, col])
        below = np.searchsorted(ordered, values[:, col], side="left")
        upto = np.searchsorted(ordered, values[:, col], side="right")
        out[:, col] = (below + upto) / (2.0 * len(ordered))
    return out


WORKLOAD_NORMS: Dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "zscore": _zscore,
    "quantile": _quantile,
}
CHOICES = (NONE, *WORKLOAD_NORMS)


def check_workload_norm(name: str, reads_graph: bool = True) -> str:
    """`name` if it is a known normalisation that applies; else a clear error."""
    if name not in CHOICES:
        raise SimulatorError(f"unknown --workload-norm {name!r} (known: {', '.join(CHOICES)})")
    if name != NONE and not reads_graph:
        raise SimulatorError(f"--workload-norm {name}: the model reads no node features")
    return name


def normalise_workloads(samples: Sequence[GraphSample], name: str) -> List[GraphSample]:
    """`samples` with their node features normalised by `name` within each workload's
    pool (per workload, node type and column; see the module docstring); `none`: as given."""
    check_workload_norm(name)
    if name == NONE:
        return list(samples)
    by_group: Dict[str, List[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_group[s.group].append(i)
    features: Dict[int, np.ndarray] = {}
    for members in by_group.values():
        pool = [samples[i] for i in members]
        features.update(zip(members, _normalised_pool(pool, WORKLOAD_NORMS[name])))
    return [dataclasses.replace(s, node_features=features[i]) for i, s in enumerate(samples)]


def _normalised_pool(pool: Sequence[GraphSample],
                     norm: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> List[np.ndarray]:
    """The node features of `pool` (one workload's samples), normalised per node type."""
    stacked = np.concatenate([s.node_features for s in pool]).astype(np.float64)
    types = np.concatenate([s.node_types for s in pool])
    out = np.empty_like(stacked)
    for node_type in np.unique(types):
        rows = types == node_type
        out[rows] = norm(stacked[rows], stacked[rows])
    return np.split(out.astype(np.float32), np.cumsum([s.num_nodes for s in pool])[:-1])
