"""A reference that learns nothing, for the measured XLA layout collection: a program's
configs ranked by how many elements they move off the most-minor dimension XLA chose.

    score(c) = Σ_v |v| · [m2m_c(v)[0] ≠ m2m_XLA(v)[0]]

v over the program's configurable nodes; |v| the elements of v's output (TpuGraphs'
`shape_dimensions_product` in `node_feat`); m2m_c(v) the minor-to-major order of v's output
under config c (the first 6 columns of `node_config_feat`); XLA's order is that of the
search's config `""` (nothing constrained). A lower score is predicted faster; equal scores
keep the collection's order, so among the configs that keep every minor dimension XLA's own
comes first (it is never predicted to lose to them).

Why this rule: on a CPU, a result whose minor dimension is not the one XLA chose costs a
transposing copy, or strided reads, of every element; reordering the outer dimensions
mostly does not. It is what a user has without any model, so a model must beat it to be
worth training (measured in docs/xla_collection.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

RULE_NAME = "minor-dim-rule"


def minor_dim_scores(node_config_feat: np.ndarray, elements: np.ndarray, reference: int) -> np.ndarray:
    """score(c) for every config c: `node_config_feat` (C, nc, 18), `elements` (nc,) the
    configurable nodes' output elements, `reference` the row of XLA's own config."""
    moved = node_config_feat[:, :, 0] != node_config_feat[reference, None, :, 0]
    return (moved * elements[None, :].astype(np.float64)).sum(axis=1)


def rule_metrics(npz: Path, reference: int, metrics: Sequence[str]) -> Dict[str, Optional[float]]:
    """The rule's `metrics` (simulator.metrics names) on one program's npz, whose config
    `reference` is XLA's own."""
    from extract.xla.hlo_graph import NODE_FEATURE_INDEX
    from extract.xla.npz_format import TpuGraphsFile
    from simulator.metrics import evaluate

    file = TpuGraphsFile(npz)
    graph, rows = file.graph_arrays(), file.config_arrays()
    elements = graph["node_feat"][graph["node_config_ids"], NODE_FEATURE_INDEX["shape_dimensions_product"]]
    if not 0 <= reference < file.num_configs:
        raise SystemExit(f"{npz}: XLA's own config is row {reference}, but the file has {file.num_configs} configs")
    scores = minor_dim_scores(rows["node_config_feat"], np.maximum(elements, 0.0), reference)
    runtime = file.runtimes(rows)
    result = evaluate(np.log1p(scores), np.log(runtime), [npz.stem] * len(scores), names=list(metrics))
    return {m: result[m]["per_workload"][npz.stem] for m in metrics}
