"""The run's configuration as typed dataclasses.

A run's configuration is a `TrainConfig`: what data (`DataConfig`), what model
(`ModelConfig`), how it is fitted (`FitConfig`), the seed and the thread count. It
crosses module boundaries as these objects; it is stored (checkpoint, metrics.json)
as one flat dict of plain values, `TrainConfig.to_dict()`, whose keys are the
command-line flags' names (`"model"`, `"loss"`, `"keep_hops"`, …), and read back with
`TrainConfig.from_dict` (older checkpoints' `heads` / `cheb_k` become
`layer_options`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Type, TypeVar

from .registry import SimulatorError

T = TypeVar("T")

SHIPPED = "shipped"
# options no run can be made with: a saved config that set one is refused rather than read
# without it (its model would see other inputs); their results: docs/results/transfer_notes.md
WITHDRAWN = {"workload_norm": "none", "domain_adapt": "none"}


@dataclass
class DataConfig:
    """Where the items come from and how they are split and prepared."""

    data: List[str] = field(default_factory=lambda: [SHIPPED])
    data_root: Optional[str] = None          # TpuGraphs: ROOT/npz/{tile,layout}/…
    cache_dir: Optional[str] = None          # extracted samples of AutoTVM logs
    split: str = "cross-workload"
    train_workloads: Optional[List[str]] = None
    test_workloads: Optional[List[str]] = None
    test_network: Optional[str] = None       # leave-network-out: the held-out network
    test_op_kind: Optional[str] = None       # leave-op-kind-out: the held-out operator kind
    val_fraction: float = 0.2
    feature_transform: str = "none"          # "none" | "log1p"
    train_fraction: float = 1.0              # seeded share of each training workload's configs
    train_task_fraction: float = 1.0         # seeded share of the training workloads
    configs_per_graph: Optional[int] = None  # TpuGraphs: configs drawn per graph and step
    keep_hops: Optional[int] = None          # TpuGraphs layout: pruning radius (-1: whole graph)
    max_batch_nodes: int = 2_000_000         # TpuGraphs scoring: graph-copy nodes per forward pass
    graph_cache_mb: float = 1024             # TpuGraphs: prepared graphs kept between steps


@dataclass
class ModelConfig:
    """The cost model's name and architecture."""

    model: str = "gcn"
    width: int = 64
    depth: int = 3
    type_dim: int = 32
    dropout: float = 0.0
    residual: bool = True
    norm: str = "layer"
    pooling: str = "mean"
    layer_options: Dict[str, Any] = field(default_factory=dict)  # validated by the layer
    join: str = "early"                      # XLA config features: "early" | "late"
    xgb_objective: str = "auto"              # xgb: "reg" | "rank" | "auto"
    features: Optional[str] = None           # node-feature columns read (simulator.data.features; None: the model's)
    members: int = 1                         # networks trained side by side, their mean predicted (ensemble.py)


@dataclass
class FitConfig:
    """How the model is fitted: loss, optimizer, schedule, early stopping, scoring."""

    loss: str = "huber"
    huber_delta: float = 1.0
    temperature: float = 1.0
    epochs: int = 60
    batch_size: int = 64
    group_size: int = 16
    lr: float = 2e-3
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    patience: int = 15
    keep_weights: str = "best"               # "best" (on validation; early stopping) | "last" (every epoch)
    select_metric: str = "kendall_tau"
    eval_batch_size: int = 256
    xgb_rounds: int = 500
    xgb_eta: float = 0.3
    xgb_early_stopping: int = 25


@dataclass
class TrainConfig:
    """A run: data, model, fit, seed and threads (same seed and threads → same numbers)."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    seed: int = 0
    threads: int = 1

    PARTS = ("data", "model", "fit")

    def to_dict(self) -> Dict[str, Any]:
        """One flat dict of plain values (the flags' names as keys)."""
        out: Dict[str, Any] = {"seed": self.seed, "threads": self.threads}
        for part in self.PARTS:
            out.update(dataclasses.asdict(getattr(self, part)))
        return out

    @classmethod
    def from_dict(cls, flat: Mapping[str, Any]) -> "TrainConfig":
        """From `to_dict()`'s form (or argparse's namespace as a dict); unknown keys are
        ignored, missing ones take their defaults."""
        flat = dict(flat)
        used = [f"--{k.replace('_', '-')} {flat[k]}" for k, off in WITHDRAWN.items() if flat.get(k, off) != off]
        if used:
            raise SimulatorError(f"this run was made with {', '.join(used)}, which no longer exists "
                                 f"(docs/results/transfer_notes.md); train it again without")
        if "layer_options" not in flat:  # checkpoints before layer options: --heads / --cheb-k
            flat["layer_options"] = legacy_layer_options(flat)
        parts = {part: _build(hint, flat) for part, hint in
                 (("data", DataConfig), ("model", ModelConfig), ("fit", FitConfig))}
        top = {k: flat[k] for k in ("seed", "threads") if flat.get(k) is not None}
        return cls(**parts, **top)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with flat keys changed (e.g. `replace(epochs=10, data_root=…)`)."""
        return TrainConfig.from_dict(dict(self.to_dict(), **changes))


def _build(cls: Type[T], flat: Mapping[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in flat.items() if k in names})


def legacy_layer_options(flat: Mapping[str, Any]) -> Dict[str, Any]:
    """Layer options of a config written before they were one dict."""
    if flat.get("model") == "gat" and flat.get("heads") is not None:
        return {"heads": int(flat["heads"])}
    if flat.get("model") == "cheb" and flat.get("cheb_k") is not None:
        return {"k": int(flat["cheb_k"])}
    return {}


@dataclass
class ModelInfo:
    """What the model's shape depends on, taken from the data and stored in the checkpoint."""

    num_types: int                           # node-type ids 0…num_types-1 (+1 unknown slot)
    feature_dim: int                         # node features per node
    vocabulary: Optional[List[str]] = None   # node-type names by id (the data's extractor's)
    feature_names: Optional[List[str]] = None
    extractor_version: Optional[str] = None
    vector_dims: Dict[str, int] = field(default_factory=dict)  # fixed-width vectors per config
    config_dim: int = 0                      # per-config features (TpuGraphs tile)
    node_config_dim: int = 0                 # per-(config, node) features (TpuGraphs layout)
    layout_roles: bool = False               # layout files with the nodes' roles (simulator.data.layout_roles)
    groups: List[str] = field(default_factory=list)
    tpugraphs: Optional[Dict[str, str]] = None  # {"collection", "kind"} of a TpuGraphs run

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ModelInfo":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Normalization:
    """Training-set mean/std of what the model standardises: log runtimes, node features,
    and (when the data has them) a baseline's vectors, XLA config features and the
    features of XLA layout data's configurable nodes."""

    target_mean: float
    target_std: float
    feature_mean: Optional[List[float]] = None
    feature_std: Optional[List[float]] = None
    vector_mean: Optional[List[float]] = None
    vector_std: Optional[List[float]] = None
    config_mean: Optional[List[float]] = None
    config_std: Optional[List[float]] = None
    node_config_mean: Optional[List[float]] = None
    node_config_std: Optional[List[float]] = None
    # the configurable nodes' features alone (layout data): a model reading only those nodes
    # standardises them with these, not with all nodes' (which another scale dominates)
    configurable_feature_mean: Optional[List[float]] = None
    configurable_feature_std: Optional[List[float]] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Normalization":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
