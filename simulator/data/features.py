"""Which node-feature columns a model reads: its feature set (`--features`).

The TIR extractor's samples carry more columns than most models read: `tir-ast-v2` is
`tir-ast-v1`'s 24 columns (what the walk fills in, bit for bit the same values) followed
by the 18 context columns of `extract.tir.context` (share of the program's work,
footprints against the caches, GPU launch structure). Every model names the columns it
reads, and the data path hands it exactly those, by name, whatever else the samples
carry:

  base        every column but the context columns (`extract.tir.context.CONTEXT_NAMES`):
              on TIR data tir-ast-v1's columns; on any other data (HLO, synthetic) every
              column. The default of every model but the size-invariant ones, except on
              MetaSchedule records.
  all         every column.
  full        every column and every derived column the data can give (`DERIVED`): the
              default on MetaSchedule records (`METASCHEDULE_FEATURES`; docs/COSTMODEL.md:
              the best of the sets on networks and operator kinds the model never saw).
  invariant   every column but those whose values scale with the workload's size
              (`ABSOLUTE_COLUMNS`: trip counts, bytes, buffer sizes, strides): the
              default of `gcn-inv` / `mlp-inv` (`simulator.models.invariant`).

A set may be followed by changes, comma-separated: `all,-work_share` (leave a column
out), `base,+fits_l2` (add one); an unknown column name is an error.

Derived columns (`DERIVED`) are computed, when a model names one (`+acc_reg_fill`), from
columns the data already has, so no data has to be extracted again; no set holds them
by default but `full`:

  acc_reg_fill  accumulating stores (`accumulate`): log2(1 + the accumulator's bytes ÷ the
                vector register file's bytes, `extract.tir.context.REGISTER_FILE_BYTES`);
                0 elsewhere. The register tile's size on a scale every workload shares:
                the tile extents that make it (tile_oc × tile_ow × tile_oh) are divisors of
                each workload's own extents, so one workload's space lacks some of another's,
                but their product's fill of the register file is covered by every space.
  acc_lane_share  accumulating stores: one row's bytes ÷ the accumulator's bytes, a row
                being the vector the nearest enclosing vectorized loop fills (its
                `vector_fill` × 32 B; one element where no loop is vectorized); 0 elsewhere.
                The register tile's shape: 1 when the whole accumulator lies along the
                vector lanes (tile_oc 32 × tile_ow 1), 1/7 for 7 rows (8 × 7).

`--features` unset means the model's own default (`CostModel.FEATURES`), else the data's
(`full` on data holding MetaSchedule records, `base` on any other); `validate`
writes the resolved name into the run's config, and the columns it gave into the
run's `ModelInfo.feature_names` (a checkpoint reads those columns from any data that
has them, by name: a model trained on tir-ast-v1 reads tir-ast-v2 samples unchanged).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from simulator.registry import SimulatorError

if TYPE_CHECKING:
    from simulator.config import ModelInfo, TrainConfig

FEATURE_SETS = ("base", "all", "full", "invariant")
DEFAULT_FEATURES = "base"
METASCHEDULE_FEATURES = "full"  # measured: docs/COSTMODEL.md
# each registered cost model's own feature set (`CostModel.FEATURES`) by --model name, as
# `register_cost_model` records it; any other model (a GNN named by its layer) reads the default
MODEL_FEATURES: Dict[str, str] = {}

# node-feature columns whose values scale with the workload's size (extract.tir.graph's names)
ABSOLUTE_COLUMNS = ("outer_trips", "inner_trips", "bytes_touched", "reuse", "buffer_bytes",
                    "stride_min", "stride_innermost")

# extractor versions whose columns, by name, hold the same values as an older one's
# (tir-ast-v2 = tir-ast-v1's walk + context columns; tests/test_features.py)
REPRODUCES = {"tir-ast-v2": ("tir-ast-v1",)}


@dataclass(frozen=True)
class DerivedColumn:
    """A node-feature column computed from columns `inputs` of the same nodes and, with
    `enclosing` = (marker, columns), from `columns` of each node's nearest enclosing node
    (AST ancestor, by the sample's edges) whose `marker` column is non-zero (zeros where
    there is none): `compute` gets (nodes, len(inputs) + len(columns)). `gate`: an input
    column outside whose non-zero rows the column is 0, so only those rows are computed
    (what keeps scoring a tuner's candidates fast: few nodes are accumulating stores)."""

    inputs: Tuple[str, ...]
    compute: Callable[[np.ndarray], np.ndarray]  # (nodes, len(inputs) [+ len(enclosing columns)]) → (nodes,)
    enclosing: Optional[Tuple[str, Tuple[str, ...]]] = None
    gate: Optional[str] = None

    @property
    def needs(self) -> Tuple[str, ...]:
        """Every column of the data this one is computed from."""
        if self.enclosing is None:
            return self.inputs
        return self.inputs + (self.enclosing[0],) + self.enclosing[1]


def nearest_enclosing(edges: np.ndarray, marked: np.ndarray, nodes: Optional[np.ndarray] = None) -> np.ndarray:
    """For each of `nodes` (default: every node), its nearest proper ancestor (edges: (m, 2)
    parent → child) with `marked` true, or -1."""
    parent = np.full(marked.shape[0], -1, dtype=np.int64)
    if len(edges):
        parent[edges[:, 1]] = edges[:, 0]
    parent, marked = parent.tolist(), marked.tolist()
    found = []
    for node in (range(len(marked)) if nodes is None else nodes.tolist()):
        cur = parent[node]
        while cur >= 0 and not marked[cur]:
            cur = parent[cur]
        found.append(cur)
    return np.asarray(found, dtype=np.int64)


def _accumulator_register_fill(columns: np.ndarray) -> np.ndarray:
    """log2(1 + accumulator bytes ÷ register-file bytes) on accumulating stores (columns:
    accumulate, buffer_bytes = log2(1 + bytes) as the TIR walk writes it)."""
    from extract.tir.context import REGISTER_FILE_BYTES
    accumulate, buffer_bytes = columns[:, 0], columns[:, 1]
    fill = np.log2(1.0 + np.expm1(buffer_bytes * np.log(2.0)) / REGISTER_FILE_BYTES)
    return np.where(accumulate > 0, fill, 0.0)


def _accumulator_lane_share(columns: np.ndarray) -> np.ndarray:
    """One row's bytes ÷ the accumulator's bytes on accumulating stores, 0 elsewhere (columns:
    accumulate, buffer_bytes = log2(1 + bytes), dtype_bits, then the enclosing vectorized
    loop's vector_fill). A row is the vector the enclosing vectorized loop fills
    (vector_fill × one register's bytes), or one element where no loop is vectorized."""
    from extract.tir.context import REGISTER_FILE_BYTES
    accumulate, buffer_bytes, dtype_bits, vector_fill = columns.T
    register_bytes = REGISTER_FILE_BYTES / 16
    row = np.where(vector_fill > 0, vector_fill * register_bytes, dtype_bits / 8.0)
    acc = np.expm1(buffer_bytes * np.log(2.0))
    share = np.minimum(1.0, row / np.maximum(acc, 1e-12))
    return np.where((accumulate > 0) & (acc > 0), share, 0.0)


DERIVED: Dict[str, DerivedColumn] = {
    "acc_reg_fill": DerivedColumn(("accumulate", "buffer_bytes"), _accumulator_register_fill, gate="accumulate"),
    "acc_lane_share": DerivedColumn(("accumulate", "buffer_bytes", "dtype_bits"), _accumulator_lane_share,
                                    enclosing=("kind_vectorized", ("vector_fill",)), gate="accumulate"),
}


def derivable(names: Sequence[str]) -> List[str]:
    """The derived columns data with columns `names` lacks and can give (inputs present)."""
    return [d for d, column in DERIVED.items() if d not in names and all(n in names for n in column.needs)]


def _derived_inputs(column: DerivedColumn, node_features: np.ndarray, where: Dict[str, int],
                    edges: Optional[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The inputs of `column` on nodes `rows`."""
    own = node_features[rows][:, [where[n] for n in column.inputs]].astype(np.float64)
    if column.enclosing is None:
        return own
    if edges is None:
        raise SimulatorError("a derived column that reads an enclosing node needs the sample's edges")
    marker, names = column.enclosing
    anc = nearest_enclosing(np.asarray(edges, dtype=np.int64).reshape(-1, 2), node_features[:, where[marker]] > 0,
                            rows)
    theirs = node_features[np.maximum(anc, 0)][:, [where[n] for n in names]].astype(np.float64)
    theirs[anc < 0] = 0.0
    return np.concatenate([own, theirs], axis=1)


def derived_column(column: DerivedColumn, node_features: np.ndarray, where: Dict[str, int],
                   edges: Optional[np.ndarray] = None) -> np.ndarray:
    """`column`'s values on every node (0 outside its gate, computed on the rest)."""
    n = node_features.shape[0]
    rows = np.arange(n) if column.gate is None else np.flatnonzero(node_features[:, where[column.gate]] != 0)
    out = np.zeros(n, dtype=np.float64)
    if len(rows):
        out[rows] = column.compute(_derived_inputs(column, node_features, where, edges, rows))
    return out


def with_derived(node_features: np.ndarray, names: Sequence[str], derived: Sequence[str],
                 edges: Optional[np.ndarray] = None) -> np.ndarray:
    """`node_features` (columns `names`) followed by the derived columns `derived` (`edges`:
    the sample's, for those that read an enclosing node)."""
    if not derived:
        return node_features
    where = {n: i for i, n in enumerate(names)}
    extra = [derived_column(DERIVED[d], node_features, where, edges) for d in derived]
    return np.concatenate([node_features, np.stack(extra, axis=1).astype(node_features.dtype)], axis=1)


def context_names() -> Sequence[str]:
    try:
        from extract.tir.context import CONTEXT_NAMES
    except ImportError:  # pragma: no cover - the extractors are part of the package
        return ()
    return CONTEXT_NAMES


def check_spec(spec: str) -> str:
    """`spec` if it is a feature set (with changes); else a clear error."""
    base, *changes = [part.strip() for part in str(spec).split(",")]
    if base not in FEATURE_SETS:
        raise SimulatorError(f"--features {spec!r}: unknown feature set {base!r} (known: {', '.join(FEATURE_SETS)})")
    for change in changes:
        if len(change) < 2 or change[0] not in "+-":
            raise SimulatorError(f"--features {spec!r}: {change!r} is not +COLUMN or -COLUMN")
    return spec


def select_features(names: Sequence[str], spec: str) -> List[str]:
    """The columns of data named `names` that feature set `spec` reads, in data order
    (then the derived columns it adds, `DERIVED`)."""
    base, *changes = [part.strip() for part in check_spec(spec).split(",")]
    derived = derivable(names)
    names = list(names) + derived
    drop = {"base": set(context_names()), "all": set(), "full": set(), "invariant": set(ABSOLUTE_COLUMNS)}[base]
    if base != "full":  # the one set that reads the derived columns unasked
        drop |= set(derived)
    keep = {n for n in names if n not in drop}
    for change in changes:
        sign, name = change[0], change[1:]
        if name not in names:
            raise SimulatorError(f"--features {spec!r}: the data has no column {name!r} "
                                 f"(has: {', '.join(names)})")
        (keep.add if sign == "+" else keep.discard)(name)
    if not keep:
        raise SimulatorError(f"--features {spec!r} leaves no node-feature column")
    return [n for n in names if n in keep]


def feature_set(config: "TrainConfig", metaschedule: bool = False) -> str:
    """The feature set a run reads: `--features`, else its model's default, else the
    data's (`metaschedule`: the data are MetaSchedule records)."""
    data_default = METASCHEDULE_FEATURES if metaschedule else DEFAULT_FEATURES
    return config.model.features or MODEL_FEATURES.get(config.model.model, data_default)


def named_columns(names: Optional[Sequence[str]], width: int) -> Optional[List[str]]:
    """`names` if they name `width` columns (a collection's info may name another
    extractor's columns than its samples carry, e.g. synthetic samples); else None."""
    return list(names) if names and len(names) == width else None


def column_map(data_names: Optional[Sequence[str]], width: int, info: "ModelInfo") -> Optional[np.ndarray]:
    """Indices of the model's columns (`info.feature_names`) in data of `width` columns
    named `data_names`; None when they are the same columns, or either side has no names
    (the width is then checked as it is). A column the model reads that the data lacks
    is a clear error."""
    data_names = named_columns(data_names, width)
    wanted = info.feature_names
    if data_names is None or not wanted or list(wanted) == data_names:
        return None
    where = {n: i for i, n in enumerate(data_names)}
    missing = [n for n in wanted if n not in where]
    if missing:
        raise SimulatorError(f"the model reads node-feature columns the data lacks: {', '.join(missing)} "
                             f"(model trained on extractor {info.extractor_version}; the data has "
                             f"{width} columns)")
    return np.array([where[n] for n in wanted], np.int64)


def same_columns(model_extractor: Optional[str], data_extractor: Optional[str]) -> bool:
    """True when data of `data_extractor` hold, under a model's column names, the values
    a model trained on `model_extractor` saw."""
    if model_extractor == data_extractor:
        return True
    # one reproduces the other's columns (those the model reads that the data lacks are refused)
    return (model_extractor in REPRODUCES.get(data_extractor or "", ())
            or data_extractor in REPRODUCES.get(model_extractor or "", ()))
