"""The XGBoost baseline: what TVM's own tuners do, on TVM's own features.

Features: MetaSchedule's `PerStoreFeature` (one 164-wide row per store of the TIR),
pooled into one vector per config by the extractor and stored as
`sample.vectors["per_store"]`; the simulator only reads it. Parameters are those of
TVM's `XGBoostCostModel`/`XGBTuner` (max_depth 6, eta 0.3, gamma 1e-4,
min_child_weight 1), with early stopping on the validation set.

Objectives (`--xgb-objective`): `reg` fits the log runtime (`reg:squarederror`);
`rank` is `rank:pairwise` with each workload a query group, and its prediction, a
score, is returned negated as an (uncalibrated) log runtime; `auto` picks `rank` for a
ranking `--loss` and `reg` otherwise.

TpuGraphs layout data has no `per_store` vectors: there each config's vector is made
from the graph and its layout rows (`layout_vectors`): the program's opcode histogram
(log1p of each opcode's node count, over the graph the source prepares: pass
`--keep-hops -1` for the whole program) and the config's per-node layout features
pooled over its configurable nodes (mean, min, max of each column), as TpuGraphs'
XGBoost baseline reads an op-count histogram beside the config features. Train it on
every measured config of each graph: `--configs-per-graph` above the largest count.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from simulator.config import ModelInfo, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.data.sources import Source
from simulator.losses import LOSSES
from simulator.registry import SimulatorError
from simulator.sgd import RunContext
from .costmodel import UPDATE_STEPS, CostModel, Items, register_cost_model, require_vector

TVM_PARAMS = {"max_depth": 6, "gamma": 1e-4, "min_child_weight": 1, "subsample": 1.0,
              "lambda": 1.0, "alpha": 0.0}
OBJECTIVES = {"reg": ("reg:squarederror", "rmse"), "rank": ("rank:pairwise", "auc")}


class XGBEstimator:
    """XGBoost through its native API (`xgboost.train`; the sklearn wrappers would need
    scikit-learn) on arrays: equivalent to XGBRegressor / XGBRanker(objective="rank:pairwise")."""

    def __init__(self, objective: str = "reg", rounds: int = 500, eta: float = 0.3, early_stopping: int = 25,
                 threads: int = 1, seed: int = 0):
        if objective not in OBJECTIVES:
            raise SimulatorError(f"unknown xgb objective {objective!r} (reg, rank, auto)")
        self.objective = objective
        self.rounds, self.eta, self.early_stopping = rounds, eta, early_stopping
        self.threads, self.seed = threads, seed
        self.booster = None

    def _matrix(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray):
        """Rank objective: qid-sorted rows, label = −log runtime (faster = more relevant)."""
        import xgboost as xgb
        if self.objective == "rank":
            order = np.argsort(groups, kind="stable")
            return xgb.DMatrix(x[order], label=-y[order], qid=groups[order])
        return xgb.DMatrix(x, label=y)

    def fit(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray,
            val_x: Optional[np.ndarray] = None, val_y: Optional[np.ndarray] = None,
            val_groups: Optional[np.ndarray] = None) -> "XGBEstimator":
        """x: (n, k) features, y: (n,) log runtimes, groups: (n,) int workload ids."""
        import xgboost as xgb
        objective, metric = OBJECTIVES[self.objective]
        params = dict(TVM_PARAMS, objective=objective, eval_metric=metric, tree_method="hist",
                      eta=self.eta, nthread=self.threads, seed=self.seed, verbosity=0)
        train = self._matrix(x, y, groups)
        has_val = val_x is not None and len(val_x) > 0
        evals = [(self._matrix(val_x, val_y, val_groups), "val")] if has_val else []
        self.booster = xgb.train(params, train, num_boost_round=self.rounds, evals=evals, verbose_eval=False,
                                 early_stopping_rounds=self.early_stopping if has_val else None)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        import xgboost as xgb
        if self.booster is None:
            raise RuntimeError("XGBEstimator.predict before fit")
        best = getattr(self.booster, "best_iteration", None)
        out = self.booster.predict(xgb.DMatrix(x),
                                   iteration_range=(0, best + 1) if best is not None else (0, 0))
        return -out if self.objective == "rank" else out

    def to_json(self) -> str:
        return bytes(self.booster.save_raw("json")).decode()

    def load_json(self, text: str) -> "XGBEstimator":
        import xgboost as xgb
        self.booster = xgb.Booster()
        self.booster.load_model(bytearray(text.encode()))
        return self


def layout_vectors(batch: Batch, num_types: int) -> np.ndarray:
    """(C, num_types + 3k) per config row of a layout batch (not expanded): log1p of its
    graph's opcode counts, then the mean, min and max over its configurable nodes of each
    of the k layout features (zeros for a graph without configurable nodes)."""
    types = batch.types.numpy()
    nodes = batch.graph.batch_num_nodes().numpy()
    counts = np.zeros((len(nodes), num_types))
    np.add.at(counts, (np.repeat(np.arange(len(nodes)), nodes), types), 1.0)
    rows = len(batch.config_graph)
    feats, row = batch.node_config_x.numpy().astype(np.float64), batch.node_config_row.numpy()
    k = feats.shape[1]
    total, low, high = np.zeros((rows, k)), np.full((rows, k), np.inf), np.full((rows, k), -np.inf)
    np.add.at(total, row, feats)
    np.minimum.at(low, row, feats)
    np.maximum.at(high, row, feats)
    per_row = np.bincount(row, minlength=rows)[:, None]
    empty = per_row[:, 0] == 0
    low[empty], high[empty] = 0.0, 0.0
    pooled = np.hstack([total / np.maximum(per_row, 1), low, high])
    return np.hstack([np.log1p(counts)[batch.config_graph.numpy()], pooled]).astype(np.float32)


@register_cost_model("xgb")
class XGBCostModel(CostModel):
    """XGBoost on MetaSchedule's PerStoreFeature, pooled per config (TVM's own cost model).

    `update` refits on everything seen so far plus the new items (as MetaSchedule's
    `XGBModel.update` does); each update's groups are queries of their own."""

    VECTOR = "per_store"

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        # layout data's own vectors stand in for `per_store` only (knob-xgb / itervar-xgb read others)
        self.layout = self.VECTOR == "per_store" and bool(info.node_config_dim) and self.VECTOR not in info.vector_dims
        if not self.layout:
            require_vector(config, info, self.VECTOR)
        objective = config.model.xgb_objective
        if objective == "auto":
            objective = "rank" if LOSSES.get(config.fit.loss).ranking else "reg"
        fit = config.fit
        self.estimator = XGBEstimator(objective, fit.xgb_rounds, fit.xgb_eta, fit.xgb_early_stopping,
                                      config.threads, config.seed)
        self._seen: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def batch_spec(self) -> BatchSpec:
        if self.layout:  # the layout rows are built with the graph (`make_batch`)
            return BatchSpec(graph=True, expand=False)
        return BatchSpec(graph=False, vector=self.VECTOR)

    def vectors(self, batch: Batch) -> np.ndarray:
        """Each config row's feature vector: `per_store`, or `layout_vectors` on layout data."""
        if self.layout:
            return layout_vectors(batch, self.info.num_types + 1)
        return batch.vector.numpy()

    def arrays(self, source: Source) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(vectors, log runtimes, group ids) of every config row of `source`; a non-finite
        value is a one-line error naming its sample (XGBoost would take a NaN feature as
        missing and train on a NaN label)."""
        batch = source.batch(np.arange(len(source)), np.random.default_rng(self.config.seed), self.batch_spec)
        x, y, g = self.vectors(batch), batch.y.numpy(), batch.group.numpy()
        item = batch.config_graph.numpy()
        for what, values in (("log runtime", y), ("layout vector" if self.layout else f"vectors[{self.VECTOR!r}]", x)):
            bad = ~np.isfinite(values.reshape(len(values), -1)).all(1)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise SimulatorError(f"{source.names[int(item[row])]}: {what} holds a non-finite value; xgb "
                                     f"cannot train on it ({int(bad.sum())} of {len(values)} configs)")
        return x, y, g

    def fit(self, train: Source, val: Optional[Source] = None, run: Optional[RunContext] = None) -> Dict[str, Any]:
        if run is not None and run.resume is not None and run.resume.get("finished") and run.resume.get("xgb"):
            self.load_weights(run.resume)
            return run.resume.get("run", {})
        start = time.perf_counter()
        x, y, g = self.arrays(train)
        self.estimator.fit(x, y, g, *(self.arrays(val) if val else (None, None, None)))
        self._check_fit(x)
        seconds = time.perf_counter() - start
        print(f"xgb ({self.estimator.objective}): {len(x)} configs in {seconds:.1f} s, "
              f"{len(x) / seconds:.0f} configs/s", file=sys.stderr)
        self._seen = [(x, y, g)]
        best = getattr(self.estimator.booster, "best_iteration", None)
        summary = {"best_iteration": None if best is None else int(best)}
        if run is not None:
            run.save(dict(self.weights(), run=summary, finished=True))
        return summary

    def _check_fit(self, x: np.ndarray) -> None:
        """The fitted booster's predictions on its training rows are finite; else a one-line
        error (the SGD loop's non-finite-loss rule, for xgb)."""
        pred = self.estimator.predict(x)
        if not np.isfinite(pred).all():
            raise SimulatorError(f"xgb: the fitted booster predicts a non-finite value for "
                                 f"{int((~np.isfinite(pred)).sum())} of {len(pred)} training configs; stopping")

    def update(self, items: Items, steps: int = UPDATE_STEPS) -> None:
        x, y, g = self.arrays(self.source_of(items))
        offset = 1 + max((int(old[2].max()) for old in self._seen if len(old[2])), default=-1)
        self._seen.append((x, y, g + offset))
        self.estimator.fit(*(np.concatenate(parts) for parts in zip(*self._seen)))
        self._check_fit(x)

    def predict_batch(self, batch: Batch) -> np.ndarray:
        return self.estimator.predict(self.vectors(batch))

    def weights(self) -> Dict[str, Any]:
        return {"xgb": self.estimator.to_json()}

    def load_weights(self, state: Dict[str, Any], which: str = "best_model") -> None:
        if not state.get("xgb"):
            raise SimulatorError("checkpoint holds no trained XGBoost model")
        self.estimator.load_json(state["xgb"])
