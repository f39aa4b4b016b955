"""GraphSamples in memory as a `Source` (TVM templates, MetaSchedule, HLO), and their data kind.

`SampleSource` holds a list of `extract.sample.GraphSample`s — one item per sample —
and prepares them into tensors once per kind of batch (graph models; a vector model's
`vectors[name]`). A run's parts are `subset`s of one source, so samples are prepared once.

Node types are mapped into the model's vocabulary by name when the samples' collection
names a different vocabulary than the one the model was trained with
(`simulator.data.sources.type_map`).

The data kind `samples` (any `--data` that is not claimed by another kind: the shipped
dataset, AutoTVM logs or folders of them, folders of .npz sample collections) splits the
samples by workload (`simulator.data.splits`), ranks a workload's configs per group for
`simulator.predict`, and enumerates a workload's whole config space when asked to rank
a workload by name.
"""
from __future__ import annotations

import copy
import json
import math
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from extract.sample import GraphSample

from simulator.config import SHIPPED, ModelInfo, Normalization, TrainConfig
from simulator.metrics import evaluate
from simulator.registry import SimulatorError
from .batching import Batch, BatchSpec, Prepared, Shapes, prepare
from .collection import CollectionInfo, collection_info, enumerate_workload, samples_and_info
from .features import column_map, derivable, feature_set, named_columns, same_columns, with_derived
from .sources import (
    DEFAULT_KIND, DataKind, PredictOptions, Ranking, RunData, Scorer, check_predictions, model_info,
    register_data_kind, type_map,
)
from .splits import group_tags, make_split
from .statistics import normalization_of


class SampleSource:
    """A list of GraphSamples as a `Source` (see the module docstring).

    `info`: the model's (a trained model's, or None: this data's own `model_info()`, for
    a model reading feature set `features`, `simulator.data.features`); `collection`: what
    made the samples (default: `data.collection_info(samples)`).
    The node-feature columns the model reads (`info.feature_names`) are taken from the
    samples by name (`simulator.data.features.column_map`), as node types are mapped by name;
    derived columns it reads (`simulator.data.features.DERIVED`) are computed here.

    A runtime is NaN (unmeasured: a config to rank) or a positive finite number of
    seconds; anything else is refused here, naming the sample. Training and scoring
    need measured samples (`require_measured`). Samples whose widths differ from the
    model's (`info`) are refused when they are prepared, naming the sample."""

    def __init__(self, samples: Sequence[GraphSample], info: Optional[ModelInfo] = None,
                 transform: str = "none", collection: Optional[CollectionInfo] = None,
                 features: Optional[str] = None):
        self.samples = list(samples)
        if not self.samples:
            raise SimulatorError("no samples")
        check_runtimes(self.samples)
        self.transform = transform or "none"
        self.collection = collection if collection is not None else collection_info(self.samples)
        self.group_index = {g: i for i, g in enumerate(sorted({s.group for s in self.samples}))}
        self.features = features
        self.info = info if info is not None else self.model_info()
        self._type_map = type_map(self.collection.vocabulary, self.info)
        width = int(self.samples[0].node_features.shape[1])
        data_names = self._data_names = named_columns(self.collection.feature_names, width)
        self._derived = [n for n in self.info.feature_names or () if data_names and n in derivable(data_names)]
        self._width = width + len(self._derived)  # the data's columns, then the derived ones the model reads
        self._columns = column_map(data_names + self._derived if data_names else self.collection.feature_names,
                                   self._width, self.info)
        self._prepared: Dict[Optional[str], List[Prepared]] = {}
        self._root, self._indices = self, None

    def subset(self, indices: Sequence[int]) -> "SampleSource":
        """The samples at `indices`, sharing this source's prepared tensors."""
        out = SampleSource.__new__(SampleSource)
        out.__dict__.update(self.__dict__)
        out.samples = [self.samples[int(i)] for i in indices]
        out._root, out._indices = self._root, [self._position(int(i)) for i in indices]
        return out

    def _position(self, i: int) -> int:
        return i if self._indices is None else self._indices[i]

    # ------------------------------------------------------------------ items
    def __len__(self) -> int:
        return len(self.samples)

    @property
    def names(self) -> List[str]:
        return [s.name for s in self.samples]

    @property
    def groups(self) -> np.ndarray:
        return np.array([self.group_index[s.group] for s in self.samples])

    def items(self, spec: BatchSpec) -> List[Prepared]:
        """The samples as tensors for batches of `spec` (prepared once, by the root source)."""
        root = self._root
        if spec.vector not in root._prepared:
            info = root.info
            width = info.feature_dim if root._columns is None else root._width  # the data's, before selection
            shapes = (Shapes(width, None, info.config_dim, info.node_config_dim) if spec.vector is None
                      else Shapes(vector_dim=info.vector_dims.get(spec.vector)))
            root._prepared[spec.vector] = prepare(
                root._model_samples(), root.group_index, info.num_types, spec.vector,
                transform=root.transform, type_map=root._type_map, shapes=shapes, columns=root._columns)
        every = root._prepared[spec.vector]
        return every if self._indices is None else [every[i] for i in self._indices]

    def _model_samples(self) -> List[GraphSample]:
        """The samples as the model reads them: the derived columns it names appended
        (`simulator.data.features.DERIVED`)."""
        if not self._derived:
            return self.samples
        out = []
        for s in self.samples:
            features = with_derived(s.node_features, self._data_names, self._derived, s.edges)
            if not np.isfinite(features[:, -len(self._derived):]).all():
                raise SimulatorError(f"{s.name}: a derived column ({', '.join(self._derived)}) is not finite")
            # a shallow copy with the columns appended, not a new GraphSample: the sample's
            # checks ran when it was made, and running them again doubled the cost of
            # preparing a tuner's candidates
            model_sample = copy.copy(s)
            model_sample.node_features = features
            out.append(model_sample)
        return out

    def batch(self, indices: Sequence[int], rng: np.random.Generator, spec: BatchSpec) -> Batch:
        items = self.items(spec)
        return spec.make([items[int(i)] for i in indices])

    # ------------------------------------------------------------------ scoring
    def score(self, scorer: Scorer, batch_size: int) -> Iterator[Tuple[int, np.ndarray]]:
        """(sample index, predicted log runtime of each of its configs), `batch_size`
        samples per forward pass, in order."""
        spec = scorer.batch_spec
        items = self.items(spec)
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            pred = scorer.predict_batch(spec.make(chunk))
            check_predictions(pred, [self.samples[start + j].name for j, it in enumerate(chunk)
                                     for _ in range(len(it.y))])
            row = 0
            for j, it in enumerate(chunk):
                yield start + j, pred[row:row + len(it.y)]
                row += len(it.y)

    def predict(self, scorer: Scorer, batch_size: int) -> np.ndarray:
        """Predicted log runtimes, one per config row, in sample order."""
        parts = [p for _, p in self.score(scorer, batch_size)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def require_measured(self, part: str = "") -> "SampleSource":
        """This source, if every sample is measured (a clear error naming the first that is not)."""
        unmeasured = [s for s in self.samples if np.isnan(np.asarray(s.runtimes, np.float64)).any()]
        if unmeasured:
            raise SimulatorError(f"{unmeasured[0].name}: unmeasured (runtime NaN), in the "
                                 f"{part + ' part of the ' if part else ''}data to train or score on "
                                 f"({len(unmeasured)} such samples); rank unmeasured configs with "
                                 f"simulator.predict instead")
        return self

    def evaluate(self, scorer: Scorer, batch_size: int) -> Dict[str, Dict]:
        """Metrics per workload (sample.group) and their mean (every sample measured)."""
        self.require_measured()
        pred = self.predict(scorer, batch_size)
        true = np.concatenate([it.y.double().numpy() for it in self.items(scorer.batch_spec)])
        groups = [s.group for s in self.samples for _ in range(s.num_configs)]
        return evaluate(pred, true, groups)

    def rankings(self, scorer: Scorer, batch_size: int) -> Iterator[Ranking]:
        """Each workload's configs (in sample order) with their predictions."""
        pred = self.predict(scorer, batch_size)
        rows = [(s, c) for s in self.samples for c in range(s.num_configs)]
        for group in sorted(self.group_index):
            members = [k for k, (s, _) in enumerate(rows) if s.group == group]
            if not members:
                continue
            yield Ranking(group, pred[members], np.array([rows[k][0].runtimes[rows[k][1]] for k in members]),
                          labels=[rows[k][0].name for k in members], meta=[rows[k][0].meta for k in members])

    # ------------------------------------------------------------------ statistics
    def normalization(self, spec: BatchSpec, seed: int = 0) -> Normalization:
        return normalization_of(self.items(spec), self.names)

    def model_info(self) -> ModelInfo:
        """Shapes of these samples, the columns of feature set `features` (the model's);
        the vocabulary of their collection."""
        first = self.samples[0]
        max_type = max((int(s.node_types.max()) for s in self.samples if s.num_nodes), default=-1)
        return model_info(
            max_type + 1, first.node_features.shape[1], self.collection, self.features,
            vector_dims={name: int(np.asarray(v).reshape(first.num_configs, -1).shape[1])
                         for name, v in first.vectors.items()},
            config_dim=0 if first.config_features is None else int(first.config_features.shape[1]),
            node_config_dim=0 if first.node_config_features is None else int(first.node_config_features.shape[-1]),
            groups=sorted(self.group_index))


def check_runtimes(samples: Sequence[GraphSample]) -> None:
    """Every runtime is NaN (unmeasured) or a positive finite number of seconds; else a
    one-line error naming the sample (and how many more there are)."""
    bad = []
    for s in samples:
        r = np.asarray(s.runtimes, np.float64).reshape(-1)
        wrong = ~np.isnan(r) & ~(np.isfinite(r) & (r > 0))
        if wrong.any():
            bad.append((s, r[wrong][0]))
    if bad:
        s, value = bad[0]
        more = f" ({len(bad)} samples have such runtimes)" if len(bad) > 1 else ""
        raise SimulatorError(f"{s.name}: runtime {value} is not a positive finite number of seconds{more}")


def warn_extractor(info: ModelInfo, source: SampleSource, where: str) -> None:
    """Warn when the samples come from another extractor than the model was trained on."""
    now, then = source.collection.extractor, info.extractor_version
    if now is not None and then is not None and not same_columns(then, now):
        print(f"warning: {where} was trained on extractor version {then}, these samples come from "
              f"{now}; node features may differ", file=sys.stderr)


# ---------------------------------------------------------------------- data kind
def is_metaschedule(data: Sequence[str]) -> bool:
    """Whether `--data` holds MetaSchedule records (the networks dataset, database
    folders, folders of them), with or without other data; told from the files, nothing
    is read."""
    from extract.inputs import find_inputs

    paths = [p for p in ([data] if isinstance(data, str) else list(data or [])) if p != SHIPPED]
    try:
        return any(os.path.exists(p) and find_inputs(p).databases for p in paths)
    except (OSError, ValueError):  # an unreadable input: loading the data reports it
        return False


@register_data_kind(DEFAULT_KIND)
class SampleData(DataKind):
    """GraphSample collections: the shipped dataset, AutoTVM logs, .npz sample folders."""

    name = DEFAULT_KIND

    def matches(self, data: Sequence[str]) -> bool:
        return True

    def resolve(self, config: TrainConfig, given: Set[str]) -> TrainConfig:
        """Data with MetaSchedule records defaults to their feature set (`features.feature_set`)."""
        if config.model.features is None and is_metaschedule(config.data.data):
            config = config.replace(features=feature_set(config, metaschedule=True))
        return config

    def run_name(self, config: TrainConfig) -> str:
        held = config.data.test_network or config.data.test_op_kind  # a leave-one-out split's
        return config.data.split + (f"-{held}" if held else "")

    def _split(self, config: TrainConfig, samples: Sequence[GraphSample]) -> Dict[str, np.ndarray]:
        d = config.data
        return make_split([s.group for s in samples], d.split, config.seed, d.train_workloads, d.test_workloads,
                          d.val_fraction, d.train_fraction, group_tags(samples), d.test_network, d.test_op_kind,
                          d.train_task_fraction)

    def open_run(self, config: TrainConfig, info: Optional[ModelInfo]) -> RunData:
        samples, collection = samples_and_info(config.data.data, config.data.cache_dir)
        parts = self._split(config, samples)
        source = SampleSource(samples, info, config.data.feature_transform, collection, feature_set(config))
        summary = (f"data: {len(samples)} samples, {len(source.group_index)} workloads; train {len(parts['train'])}, "
                   f"val {len(parts['val'])}, test {len(parts['test'])} ({config.data.split})")
        return RunData(source.info, {part: source.subset(idx).require_measured(part) for part, idx in parts.items()},
                       summary)

    def open_evaluation(self, config: TrainConfig, info: ModelInfo, data: Optional[List[str]],
                        saved_split: Optional[Dict[str, List[str]]]) -> Dict[str, SampleSource]:
        samples, collection = samples_and_info(data or config.data.data, config.data.cache_dir)
        source = SampleSource(samples, info, config.data.feature_transform, collection)
        warn_extractor(info, source, "the model")
        if data:
            return {"data": source}
        parts = self._split(config, samples)
        if saved_split is not None and any(sorted(saved_split[k]) != sorted(samples[i].name for i in parts[k])
                                           for k in parts):
            print("warning: the data no longer gives the split this run was trained with "
                  "(samples added or removed?)", file=sys.stderr)
        return {part: source.subset(parts[part]) for part in ("val", "test") if len(parts[part])}

    def open_targets(self, config: TrainConfig, info: ModelInfo, spec: BatchSpec,
                     options: PredictOptions) -> SampleSource:
        if options.kaggle_csv:
            raise SimulatorError("--kaggle-csv: the model was not trained on a TpuGraphs collection (train one "
                                 "with --data tpugraphs:<collection>)")
        targets = options.targets
        if not targets:
            raise SimulatorError("give the data (log files/folders, .npz folders) or a workload to rank")
        collection = None
        if all(os.path.exists(t) for t in targets):
            samples, collection = samples_and_info(targets, options.cache_dir)
        elif len(targets) == 1:
            name, samples = enumerate_workload(targets[0], options.template, options.max_configs, options.seed,
                                               vector_name=spec.vector, workers=options.workers)
            if not samples:
                raise SimulatorError(f"workload {targets[0]!r}: its config space is empty")
            print(f"{name}: ranking {len(samples)} configs of {options.template}", file=sys.stderr)
        else:
            missing = [t for t in targets if not os.path.exists(t)]
            raise SimulatorError(f"{missing[0]}: no such file or folder")
        source = SampleSource(samples, info, config.data.feature_transform, collection)
        warn_extractor(info, source, "the model")
        return source

    def present(self, rankings: Iterator[Ranking], options: PredictOptions) -> Dict[str, List[Dict[str, Any]]]:
        rows: Dict[str, List[Dict[str, Any]]] = {}
        counts: Dict[str, int] = {}
        for r in rankings:
            rows[r.key] = [{"rank": rank, "name": r.labels[i], "predicted_ms": math.exp(float(r.predicted[i])) * 1e3,
                            "measured_ms": float(r.measured[i]) * 1e3 if math.isfinite(r.measured[i]) else None,
                            "meta": r.meta[i].as_dict()} for rank, i in enumerate(r.order[:options.top_k], 1)]
            measured = r.measured[np.isfinite(r.measured)]
            if measured.size:
                rows[r.key].append({"rank": None, "name": "best measured", "predicted_ms": None,
                                    "measured_ms": float(measured.min()) * 1e3, "meta": {}})
            counts[r.key] = len(r.predicted)
        print_ranking(rows, counts)
        return rows


def _describe(meta: Dict[str, Any]) -> str:
    for key in ("entity", "config", "knobs"):
        if key in meta:
            return json.dumps(meta[key], separators=(",", ":"))
    return ""


def print_ranking(rows: Dict[str, List[Dict[str, Any]]], counts: Dict[str, int]) -> None:
    for group, ranked in rows.items():
        print(f"\n{group}: top {sum(r['rank'] is not None for r in ranked)} of {counts[group]} configs")
        print(f"{'rank':>4}  {'predicted ms':>12}  {'measured ms':>11}  config")
        for r in ranked:
            rank = "" if r["rank"] is None else str(r["rank"])
            pred = "" if r["predicted_ms"] is None else f"{r['predicted_ms']:.4f}"
            meas = "-" if r["measured_ms"] is None else f"{r['measured_ms']:.4f}"
            print(f"{rank:>4}  {pred:>12}  {meas:>11}  {r['name']}  {_describe(r['meta'])}")
