"""`curve-mlp`: an MLP on AutoTVM-style context-relation ("curve") features of each config
(`sample.vectors["curve"]`, made by the TIR walk: `extract.tir.graph.CURVE_NAMES`)."""
from __future__ import annotations

from .costmodel import VectorCostModel, register_cost_model


@register_cost_model("curve-mlp")
class CurveMLPCostModel(VectorCostModel):
    """AutoTVM-style context-relation ("curve") features of each config, MLP predictor."""

    VECTOR = "curve"
