"""AutoTVM's own XGBoost cost models, on AutoTVM's own features (the transfer study's baselines).

* `knob-xgb`: XGBoost on the config's knob values and the workload's shape
  (`sample.vectors["knob"]`, `extract.autotvm.knob_features`): AutoTVM's `XGBTuner(feature_type="knob")`.
* `itervar-xgb`: XGBoost on the loop-context "itervar" features of the lowered TIR
  (`sample.vectors["itervar"]`, `extract.autotvm.itervar`): AutoTVM's default
  `XGBTuner(feature_type="itervar")`.

Both are `simulator.models.xgb.XGBCostModel` with another input vector: the same TVM
parameters, early stopping on the validation set, `--xgb-objective reg|rank|auto`
(`rank`: `rank:pairwise` with each workload a query group; AutoTVM's tuner used
`rank`), checkpoints and `update`.
"""
from __future__ import annotations

from .costmodel import register_cost_model
from .xgb import XGBCostModel


@register_cost_model("knob-xgb")
class KnobXGBCostModel(XGBCostModel):
    """XGBoost on the config's knob values and the workload's shape (AutoTVM "knob")."""

    VECTOR = "knob"


@register_cost_model("itervar-xgb")
class ItervarXGBCostModel(XGBCostModel):
    """XGBoost on AutoTVM's loop-context itervar features of the lowered TIR."""

    VECTOR = "itervar"
