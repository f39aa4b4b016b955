"""A first-stage filter for `GNNCostModel`: scores from a candidate's trace decisions,
no lowering (for speed).

Featurizing a candidate for the GNN means lowering it (TVM's passes: 1.7 ms for a 512³
matmul, ~10 ms for a conv2d, see docs/ms_features.md). The decisions MetaSchedule sampled
to make the candidate are in its trace already, and reading them costs tens of µs:

* **features** (`trace_features`): for each instruction of the trace that carries a
  decision, in order — SamplePerfectTile (and any other sampled tile): log2 of each
  factor; SampleCategorical: the index chosen; SampleComputeLocation (and any other
  integer decision): its value;
* **sketch** (the key of a fixed-length vector): the kinds of the trace's instructions
  up to its last decision-carrying one (or up to EnterPostproc), with each decision's
  length — the design space the candidate was sampled from; postprocessing instructions,
  whose presence depends on the decisions, are not part of it.

`DecisionFilter` keeps, per (task, sketch), the feature vectors and GNN scores of the
candidates the GNN fully scored (the most recent `window`), and fits a small regressor to
them — a distillation of the GNN for that design space: `model="xgb"` (default) gradient
boosted trees (XGBoost, 100 trees of depth 4, one thread; ~0.1 s a fit), or
`model="ridge"`, a ridge regression on standardised features, their squares and pairwise
products. On a ResNet conv2d's fresh candidates (1,024 fitted, 512 rated) trees reached
Kendall τ 0.83 against the GNN and kept all of its top-64 in the best 25%; ridge τ 0.57,
81% (matmul: both τ ≈ 0.85, 100%). A
(task, sketch) is *ready* once `warmup` candidates have been fully scored; until then
`score` gives NaN for its candidates (everything goes to the GNN). It is refitted when
its data have grown by `refit` (share) since the last fit; the GNN changes as it is
fine-tuned, and the window follows it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

TILE_KINDS = ("SamplePerfectTile", "SamplePartitionedTile")
POSTPROC_MARK = "EnterPostproc"
WARMUP = 256        # fully scored candidates of a (task, sketch) before it filters
WINDOW = 2048       # most recent fully scored candidates it fits on
RIDGE = 0.01        # ridge penalty, per training sample (features standardised)
MAX_PAIRWISE = 48   # above this many features: linear + squares only (no pairwise products)

MODELS = ("xgb", "ridge")
XGB_PARAMS = {"max_depth": 4, "eta": 0.1, "nthread": 1, "objective": "reg:squarederror", "verbosity": 0}
XGB_TREES = 100

Sketch = Tuple[Any, ...]


def _ints(decision) -> List[int]:
    try:
        return [int(v) for v in decision]
    except TypeError:
        return [int(decision)]


def trace_features(item) -> Tuple[Sketch, np.ndarray]:
    """(sketch, decision features) of a MeasureCandidate, Schedule or Trace (see the
    module docstring)."""
    trace = getattr(getattr(item, "sch", item), "trace", item)
    decisions = trace.decisions
    kinds: List[str] = []
    sketch: Sketch = ()
    values: List[float] = []
    for inst in trace.insts:
        name = inst.kind.name
        if name == POSTPROC_MARK:
            break
        kinds.append(name)
        if inst in decisions:
            ints = _ints(decisions[inst])
            if name in TILE_KINDS:
                values.extend(math.log2(max(v, 1)) for v in ints)
            else:
                values.extend(float(v) for v in ints)
            kinds.append(len(ints))
            sketch = tuple(kinds)
    return sketch, np.asarray(values, dtype=np.float64)


def expand(x: np.ndarray) -> np.ndarray:
    """Features of the ridge regression: x, x², and x_i·x_j (i < j) while x is narrow."""
    d = x.shape[1]
    parts = [x, x * x]
    if 1 < d <= MAX_PAIRWISE:
        i, j = np.triu_indices(d, 1)
        parts.append(x[:, i] * x[:, j])
    return np.concatenate(parts, axis=1)


@dataclass
class _Group:
    """One (task, sketch): its training data and fitted model."""

    xs: List[np.ndarray] = field(default_factory=list)
    ys: List[float] = field(default_factory=list)
    total: int = 0                # fully scored candidates ever added
    fitted_at: int = 0            # `total` when last fitted
    mean: Optional[np.ndarray] = None
    scale: Optional[np.ndarray] = None
    coef: Optional[np.ndarray] = None
    zmean: Optional[np.ndarray] = None
    zscale: Optional[np.ndarray] = None
    intercept: float = 0.0
    booster: Any = None


class DecisionFilter:
    """Per-(task, sketch) regressors from trace decisions to GNN scores (see the
    module docstring)."""

    def __init__(self, warmup: int = WARMUP, window: int = WINDOW, ridge: float = RIDGE, refit: float = 0.25,
                 model: str = "xgb", seed: int = 0):
        if warmup < 2:
            raise ValueError(f"warmup must be at least 2, got {warmup}")
        if model not in MODELS:
            raise ValueError(f"unknown first-stage model {model!r} (known: {', '.join(MODELS)})")
        self.model, self.seed = model, int(seed)
        self.warmup, self.window, self.ridge, self.refit = int(warmup), int(window), float(ridge), float(refit)
        self.groups: Dict[Tuple[str, Sketch], _Group] = {}
        self.fits = 0

    def ready(self, task: str, sketch: Sketch) -> bool:
        g = self.groups.get((task, sketch))
        return g is not None and len(sketch) > 0 and g.total >= self.warmup

    def add(self, task: str, sketches: Sequence[Sketch], features: Sequence[np.ndarray],
            scores: Sequence[float]) -> None:
        """Candidates the GNN fully scored (their sketches, features and GNN scores)."""
        for sketch, x, y in zip(sketches, features, scores):
            if not len(sketch) or not math.isfinite(float(y)):
                continue
            g = self.groups.setdefault((task, sketch), _Group())
            g.xs.append(x)
            g.ys.append(float(y))
            g.total += 1
            if len(g.ys) > self.window:
                drop = len(g.ys) - self.window
                del g.xs[:drop], g.ys[:drop]

    def _fit(self, g: _Group) -> None:
        x = np.stack(g.xs)
        y = np.asarray(g.ys)
        if self.model == "xgb":
            import xgboost as xgb

            g.booster = xgb.train({**XGB_PARAMS, "seed": self.seed}, xgb.DMatrix(x, y), XGB_TREES)
            g.coef = np.zeros(0)  # fitted
            g.fitted_at = g.total
            self.fits += 1
            return
        g.mean, g.scale = x.mean(0), x.std(0)
        g.scale[g.scale < 1e-9] = 1.0
        z = expand((x - g.mean) / g.scale)
        g.zmean, g.zscale = z.mean(0), z.std(0)
        g.zscale[g.zscale < 1e-9] = 1.0
        z = (z - g.zmean) / g.zscale
        g.intercept = float(y.mean())
        a = z.T @ z + self.ridge * len(y) * np.eye(z.shape[1])
        g.coef = np.linalg.solve(a, z.T @ (y - g.intercept))
        g.fitted_at = g.total
        self.fits += 1

    def score(self, task: str, sketches: Sequence[Sketch], features: Sequence[np.ndarray]) -> np.ndarray:
        """Stage-1 scores (on the GNN's scale, higher = faster); NaN where the candidate's
        (task, sketch) is not ready."""
        out = np.full(len(sketches), np.nan)
        rows: Dict[Sketch, List[int]] = {}
        for i, sketch in enumerate(sketches):
            rows.setdefault(sketch, []).append(i)
        for sketch, idx in rows.items():
            if not self.ready(task, sketch):
                continue
            g = self.groups[(task, sketch)]
            if g.coef is None or g.total - g.fitted_at >= self.refit * len(g.ys):
                self._fit(g)
            x = np.stack([features[i] for i in idx])
            if g.booster is not None:
                import xgboost as xgb

                out[idx] = g.booster.predict(xgb.DMatrix(x))
                continue
            z = (expand((x - g.mean) / g.scale) - g.zmean) / g.zscale
            out[idx] = z @ g.coef + g.intercept
        return out


def filter_order(stage1: np.ndarray, keep: float, floor: int) -> np.ndarray:
    """Which candidates the GNN scores: every one whose stage-1 score is NaN (not ready),
    and of the others the best `max(ceil(keep × n), floor)` by stage-1 score (n: the
    ready ones). A boolean mask."""
    full = np.isnan(stage1)
    ready = np.flatnonzero(~full)
    count = min(len(ready), max(int(math.ceil(keep * len(ready))), int(floor)))
    if count < len(ready):
        best = ready[np.argsort(-stage1[ready], kind="stable")[:count]]
        full[best] = True
    else:
        full[ready] = True
    return full


def merge_scores(gnn: np.ndarray, full: np.ndarray, stage1: np.ndarray) -> np.ndarray:
    """One float64 per candidate: the GNN's score where it scored (`full`), and below
    every one of those, in stage-1 order, for the rest (spaced 1/n apart, starting 1
    below the lowest GNN score)."""
    n = len(full)
    out = np.empty(n, dtype=np.float64)
    out[full] = gnn
    rest = np.flatnonzero(~full)
    if len(rest):
        floor = float(np.min(gnn)) if len(gnn) else 0.0
        order = rest[np.argsort(-stage1[rest], kind="stable")]
        out[order] = floor - 1.0 - np.arange(len(order)) / max(n, 1)
    return out
