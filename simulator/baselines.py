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
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from .losses import LOSSES

TVM_PARAMS = {"max_depth": 6, "gamma": 1e-4, "min_child_weight": 1, "subsample": 1.0,
              "lambda": 1.0, "alpha": 0.0}
OBJECTIVES = {"reg": ("reg:squarederror", "rmse"), "rank": ("rank:pairwise", "auc")}


class XGBModel:
    """XGBoost through its native API (`xgboost.train`; the sklearn wrappers would need
    scikit-learn): equivalent to XGBRegressor / XGBRanker(objective="rank:pairwise")."""

    uses_graph = False
    vector_name = "per_store"

    def __init__(self, config: Dict[str, Any]):
        objective = config.get("xgb_objective", "auto")
        if objective == "auto":
            objective = "rank" if LOSSES.get(config.get("loss", "huber")).ranking else "reg"
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown xgb objective {objective!r} (reg, rank, auto)")
        self.objective = objective
        self.config = config
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
            val_groups: Optional[np.ndarray] = None) -> "XGBModel":
        """x: (n, k) features, y: (n,) log runtimes, groups: (n,) int workload ids."""
        import xgboost as xgb
        objective, metric = OBJECTIVES[self.objective]
        params = dict(TVM_PARAMS, objective=objective, eval_metric=metric, tree_method="hist",
                      eta=self.config.get("xgb_eta", 0.3), nthread=self.config.get("threads", 1),
                      seed=self.config.get("seed", 0), verbosity=0)
        train = self._matrix(x, y, groups)
        has_val = val_x is not None and len(val_x) > 0
        evals = [(self._matrix(val_x, val_y, val_groups), "val")] if has_val else []
        self.booster = xgb.train(params, train, num_boost_round=self.config.get("xgb_rounds", 500),
                                 evals=evals, verbose_eval=False,
                                 early_stopping_rounds=self.config.get("xgb_early_stopping", 25) if has_val else None)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        import xgboost as xgb
        if self.booster is None:
            raise RuntimeError("XGBModel.predict before fit")
        best = getattr(self.booster, "best_iteration", None)
        out = self.booster.predict(xgb.DMatrix(x),
                                   iteration_range=(0, best + 1) if best is not None else (0, 0))
        return -out if self.objective == "rank" else out

    def to_json(self) -> str:
        return bytes(self.booster.save_raw("json")).decode()

    def load_json(self, text: str) -> "XGBModel":
        import xgboost as xgb
        self.booster = xgb.Booster()
        self.booster.load_model(bytearray(text.encode()))
        return self
