"""Where training and scoring items come from: the `Source` protocol and data kinds.

A **source** is a sequence of items, one item = one graph with its config rows (a TVM
sample: one config; a TpuGraphs graph: all its configs). Everything the training loop,
evaluation and prediction need from data goes through these methods:

* `groups`: each item's group for ranking batches (None: every item is a group of its own);
* `batch(indices, rng, spec)`: a training batch of those items; a lazy source draws each
  graph's configs for this step with the loop's `rng` (so a resumed run draws the same);
* `score(scorer, batch_size)`: predictions for every config row, item by item, computed
  in chunks (`scorer` is a cost model: its `batch_spec` and `predict_batch`);
* `evaluate(scorer, batch_size)`: metrics of the measured configs, per group and mean;
* `rankings(scorer, batch_size)`: every group's configs in predicted order;
* `normalization(spec, seed)`: the training statistics (`simulator.data.statistics`);
* `model_info()`: what a model's shape depends on (`ModelInfo`, from the data);
* `subset(indices)`: the items at `indices`, as a source of the same kind (a run's parts;
  a distributed run's shard of a part to score, `simulator.distributed`).

Two implementations: `simulator.data.in_memory.SampleSource` (GraphSamples in memory:
TVM templates, MetaSchedule, HLO) and `simulator.data.tpugraphs.TpuGraphsSource`
(TpuGraphs npz files, read lazily). This module imports neither.

A **data kind** (`DataKind`) says how one kind of `--data` becomes sources: for a run
(split into train/val/test, `RunData`), for re-evaluation, for prediction targets, and
how its rankings are shown. `data_kind(config.data.data)` picks it; train, evaluate and
predict talk to it and to sources only, never to a concrete kind. Each kind registers
itself (`@register_data_kind(name)`) in its own module, listed once in the registration
list of `simulator/__init__.py`.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, runtime_checkable

import numpy as np

from extract.sample import SampleMeta
from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.registry import Registry, SimulatorError
from .batching import Batch, BatchSpec
from .collection import CollectionInfo
from .features import DEFAULT_FEATURES, named_columns, select_features


class Scorer(Protocol):
    """What a source needs of a model to score its items (a `CostModel` is one)."""

    @property
    def batch_spec(self) -> BatchSpec: ...

    def predict_batch(self, batch: Batch) -> np.ndarray:
        """Predicted log runtimes (float64), one per config row of `batch`."""


@dataclass
class Ranking:
    """One group's configs (a workload's, a graph's), ranked by predicted runtime."""

    key: str                      # the group (workload name; TpuGraphs: Kaggle ID)
    predicted: np.ndarray         # (c,) predicted log runtime of each config row
    measured: np.ndarray          # (c,) measured runtime (seconds; tile: ratio), NaN if unmeasured
    labels: List[str] = field(default_factory=list)      # each row's sample name, if any
    meta: List[SampleMeta] = field(default_factory=list)    # each row's sample meta

    @property
    def order(self) -> np.ndarray:
        """Row indices, fastest predicted first (ties in row order)."""
        return np.argsort(self.predicted, kind="stable")


@runtime_checkable
class Source(Protocol):
    """Items for training and scoring (see the module docstring)."""

    def __len__(self) -> int: ...

    @property
    def names(self) -> List[str]: ...

    @property
    def groups(self) -> Optional[np.ndarray]: ...

    def batch(self, indices: Sequence[int], rng: np.random.Generator, spec: BatchSpec) -> Batch: ...

    def score(self, scorer: Scorer, batch_size: int) -> Iterator[Tuple[int, np.ndarray]]: ...

    def evaluate(self, scorer: Scorer, batch_size: int) -> Dict[str, Dict]: ...

    def rankings(self, scorer: Scorer, batch_size: int) -> Iterator[Ranking]: ...

    def normalization(self, spec: BatchSpec, seed: int) -> Normalization: ...

    def model_info(self) -> ModelInfo: ...

    def subset(self, indices: Sequence[int]) -> "Source": ...


@dataclass
class RunData:
    """A run's data: the model info and a source per part ("train", "val", "test")."""

    info: ModelInfo
    parts: Dict[str, Source]
    summary: str                  # one line for the log

    @property
    def split(self) -> Dict[str, List[str]]:
        """Item names per part (saved in the checkpoint)."""
        return {part: list(source.names) for part, source in self.parts.items()}


@dataclass
class PredictOptions:
    """What `simulator.predict` was asked to rank, and how to show it."""

    targets: List[str]
    top_k: int = 5
    template: str = ""
    max_configs: int = 0
    seed: int = 0
    workers: int = 0
    cache_dir: Optional[str] = None
    kaggle_csv: Optional[str] = None
    data_root: Optional[str] = None
    split: str = "test"
    collection: Optional[str] = None


class DataKind(abc.ABC):
    """How one kind of `--data` becomes sources (see the module docstring)."""

    name = ""

    @abc.abstractmethod
    def matches(self, data: Sequence[str]) -> bool:
        """Whether `--data` names this kind of data."""

    def resolve(self, config: TrainConfig, given: Set[str]) -> TrainConfig:
        """The config with this kind's defaults for the flags not `given`; checks."""
        return config

    @abc.abstractmethod
    def run_name(self, config: TrainConfig) -> str:
        """The data part of a run's default folder name."""

    @abc.abstractmethod
    def open_run(self, config: TrainConfig, info: Optional[ModelInfo]) -> RunData:
        """The run's split (`info`: a resumed run's saved model info)."""

    @abc.abstractmethod
    def open_evaluation(self, config: TrainConfig, info: ModelInfo, data: Optional[List[str]],
                        saved_split: Optional[Dict[str, List[str]]]) -> Dict[str, Source]:
        """Sources to re-evaluate a saved run on: its own val/test parts, or all of `data`."""

    @abc.abstractmethod
    def open_targets(self, config: TrainConfig, info: ModelInfo, spec: BatchSpec,
                     options: PredictOptions) -> Source:
        """What `simulator.predict` ranks."""

    @abc.abstractmethod
    def present(self, rankings: Iterator[Ranking], options: PredictOptions) -> Dict[str, List[Dict[str, Any]]]:
        """Print the rankings (and write what `options` asks for); the rows shown, by group."""


DATA_KINDS: Registry = Registry("data kind")
register_data_kind = DATA_KINDS.register
DEFAULT_KIND = "samples"


def data_kind(data: Sequence[str]) -> DataKind:
    """The data kind `--data` names (GraphSamples unless another kind claims it)."""
    data = [data] if isinstance(data, str) else list(data or [])
    for name in DATA_KINDS.names():
        kind = DATA_KINDS.get(name)()
        if name != DEFAULT_KIND and kind.matches(data):
            return kind
    return DATA_KINDS.get(DEFAULT_KIND)()


def check_predictions(pred: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """`pred` (one per config row; `labels`: each row's sample or file), if every value is
    finite; else a one-line `SimulatorError` naming the first row's label: a non-finite
    prediction never reaches a metric or a ranking."""
    pred = np.asarray(pred)
    bad = ~np.isfinite(pred)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        where = labels[first] if first < len(labels) else f"row {first}"
        raise SimulatorError(f"{where}: the model predicts {pred[first]} ({int(bad.sum())} of {len(pred)} configs "
                             f"in this batch); its weights are damaged or its training diverged")
    return pred


def model_info(num_types: int, feature_dim: int, collection: CollectionInfo, features: Optional[str] = None,
               **shapes: Any) -> ModelInfo:
    """The one way a `ModelInfo` is made: the data's collection info (vocabulary, feature
    names, extractor) and its shapes. `num_types` (the largest type id + 1) is used when
    the collection names no vocabulary. `features`: the model's feature set
    (`simulator.data.features`): the columns it reads of data whose `feature_dim` columns
    the collection names (default `base`); data with unnamed columns are read whole."""
    vocabulary = collection.vocabulary
    names = named_columns(collection.feature_names, int(feature_dim))
    if names is not None:
        names = select_features(names, features or DEFAULT_FEATURES)
    elif features and ("," in features or features.strip() not in ("base", "all")):
        raise SimulatorError(f"--features {features!r} reads columns by name; this data's node features are "
                             f"unnamed (or named for another width than its {feature_dim} columns)")
    return ModelInfo(num_types=len(vocabulary) if vocabulary else int(num_types),
                     feature_dim=len(names) if names is not None else int(feature_dim),
                     vocabulary=list(vocabulary) if vocabulary else None,
                     feature_names=names if names is not None else
                     (list(collection.feature_names) if collection.feature_names else None),
                     extractor_version=collection.extractor, **shapes)


def type_map(data_vocabulary: Optional[Sequence[str]], info: ModelInfo) -> Optional[np.ndarray]:
    """Data node-type id → the model's id, by name, when the data's vocabulary differs from
    the one the model was trained with (ids the model never saw → its unknown slot);
    None when they agree or either is unknown."""
    if not data_vocabulary or not info.vocabulary or list(data_vocabulary) == list(info.vocabulary):
        return None
    model_ids = {name: i for i, name in enumerate(info.vocabulary)}
    return np.array([model_ids.get(name, info.num_types) for name in data_vocabulary], np.int64)
