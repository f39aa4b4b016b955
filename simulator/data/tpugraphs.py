"""TpuGraphs npz files as a lazy `Source`, and the `tpugraphs` data kind.

`python -m simulator.train --data tpugraphs:<collection> --data-root ROOT` trains the
same cost models with the same loop as the in-memory samples; what differs is only
where items come from. A `TpuGraphsSource` has one item per graph (npz file), each
graph a group of its own, and

* `batch(indices, rng, spec)` gives those graphs with `--configs-per-graph` of their
  measured configs each, drawn afresh every step (the loop's RNG, so a resumed run
  draws the same ones);
* `evaluate(model)` scores every measured config of every graph (TILE_METRICS or
  LAYOUT_METRICS per graph, mean over graphs);
* `rankings(model)` ranks every config of every graph, measured or not (the data kind
  writes them as a Kaggle CSV).

Memory strategy (large graphs)
------------------------------
TpuGraphs layout graphs reach tens of thousands of nodes with thousands of configs each
(c × nc × 18 floats); industrial graphs reach 500k nodes. Nothing holds a collection:

1. Lazy files: opening a split reads only npy headers (`extract.xla.npz_format.TpuGraphsFile`).
   A training step reads the graph arrays of its B graphs and just the k sampled config
   rows of each (`TpuGraphsFile.config_arrays(rows)`, streamed); evaluation streams each
   file's config rows once, a chunk at a time (`TpuGraphsFile.iter_config_chunks`).
2. Pruning to the configurable nodes' neighbourhood (layout): a graph is cut to its
   configurable nodes and every node within `--keep-hops` hops of one (undirected;
   default: the model's `--depth`, -1 keeps the whole graph). With early join, only
   nodes within `depth` hops of a configurable node can have config-dependent states,
   so the cut keeps all that distinguishes one config from another; what it drops is
   a per-graph constant, which ranking losses ignore. (Boundary nodes lose some
   neighbours, so GCN degrees differ a little from the full graph's.) Tile graphs
   (tens of nodes, one config for the whole kernel) are kept whole.
3. Per-step config sampling: `--configs-per-graph` k (default 16 tile, 8 layout) —
   an early-join batch holds B × k graph copies, so memory is O(B·k·pruned nodes), not
   O(configs).
4. Bounded caches and batches: prepared (pruned) graphs are kept in an LRU of
   `--graph-cache-mb` (default 1024 MB); evaluation/prediction batches are cut so that
   (graph copies × nodes) ≤ `--max-batch-nodes` (default 2,000,000), i.e. a 40k-node
   layout graph is scored 50 configs per forward pass under early join. Late join
   (`--join late`) propagates each graph once per batch whatever the config count.
5. Normalisation statistics come from a seeded subset of ≤ STATS_FILES training files
   (≤ STATS_CONFIGS configs each), not from a pass over the collection.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import torch

from extract.xla.npz_format import LAYOUT_CONTEXT_KEYS
from simulator.config import DataConfig, ModelInfo, Normalization, TrainConfig
from simulator.metrics import LAYOUT_METRICS, METRICS, TILE_METRICS, evaluate
from simulator.registry import SimulatorError
from .batching import Batch, BatchSpec, Prepared, config_tensors, prepare_graph
from .collection import hlo_collection_info
from .layout_roles import role_columns
from .sources import (
    DataKind, PredictOptions, Ranking, RunData, Scorer, check_predictions, model_info, register_data_kind,
)
from .statistics import RunningStats

PREFIX = "tpugraphs:"
STATS_FILES = 200
STATS_CONFIGS = 64
DEFAULTS = {  # per kind, for flags not given on the command line
    "tile": {"loss": "listmle", "batch_size": 8, "configs_per_graph": 16, "keep_hops": -1,
             "select_metric": "kaggle_score", "feature_transform": "log1p", "split": "official"},
    "layout": {"model": "layout-sum", "loss": "listmle", "batch_size": 2, "configs_per_graph": 8,
               "keep_hops": None, "select_metric": "kendall_tau", "feature_transform": "log1p",
               "split": "official"},
}
# a layout model's own recipe for the flags not given: the one it was judged with (docs/xla_collection.md)
LAYOUT_MODEL_DEFAULTS = {"layout-sum": {"loss": "pairwise-hinge", "members": 3, "keep_weights": "last"}}


def _tpugraphs():
    """The TpuGraphs collection helpers (`--data` specs, official splits, loose files, Kaggle CSV)."""
    from datasets import tpugraphs_collections
    return tpugraphs_collections


def _reraise(e: ValueError) -> SimulatorError:
    return SimulatorError(str(e))


class TpuGraphsSource:
    """The graphs of TpuGraphs npz files as a `Source` (see the module docstring).

    `collections`: each file's collection (for Kaggle IDs; default: the model's)."""

    groups = None  # every item is a group of its own: ranking losses compare its configs

    def __init__(self, files: Sequence[Any], config: DataConfig, info: ModelInfo, part: str = "",
                 collections: Optional[Sequence[str]] = None):
        self.files = list(files)
        self.part = part
        self.info = info
        self.kind = info.tpugraphs["kind"]
        self.collections = list(collections) if collections is not None else \
            [info.tpugraphs.get("collection")] * len(self.files)
        self.transform = config.feature_transform or "none"
        self.keep_hops = -1 if config.keep_hops is None else int(config.keep_hops)
        self.configs_per_graph = int(config.configs_per_graph or 16)
        self.max_batch_nodes = int(config.max_batch_nodes or 2_000_000)
        self.cache_bytes = int(float(1024 if config.graph_cache_mb is None else config.graph_cache_mb) * 2 ** 20)
        self._cache: "OrderedDict[int, Prepared]" = OrderedDict()
        self._cached_bytes = 0
        self._measured: Dict[int, np.ndarray] = {}
        self._context: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        for f in self.files:
            self._check(f)

    def _check(self, f: Any) -> None:
        if f.kind != self.kind:
            raise SimulatorError(f"{f.path}: a TpuGraphs {f.kind} file; the model is a {self.kind} model")
        if f.shape("node_feat")[1] != self.info.feature_dim:
            raise SimulatorError(f"{f.path}: {f.shape('node_feat')[1]} node features, the model "
                                 f"expects {self.info.feature_dim}")
        dim = f.shape("config_feat")[1] if self.kind == "tile" else f.shape("node_config_feat")[2]
        want = self.info.config_dim if self.kind == "tile" else self.info.node_config_dim
        if dim != want:
            raise SimulatorError(f"{f.path}: {dim} config features per "
                                 f"{'config' if self.kind == 'tile' else 'node'}, the model expects {want}")

    # ------------------------------------------------------------------ items
    def __len__(self) -> int:
        return len(self.files)

    @property
    def names(self) -> List[str]:
        return [f.name for f in self.files]

    def measured(self, i: int) -> np.ndarray:
        """Indices of graph i's measured configs."""
        if i not in self._measured:
            try:
                self._measured[i] = self.files[i].measured_configs()
            except ValueError as e:
                raise _reraise(e) from None
        return self._measured[i]

    def graph(self, i: int) -> Prepared:
        """Graph i prepared (pruned, transformed), from the LRU cache or its file."""
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        try:
            arrays = self.files[i].graph_arrays()  # checked; edges consumer → producer
        except ValueError as e:
            raise _reraise(e) from None
        if all(k in arrays for k in LAYOUT_CONTEXT_KEYS):   # read with the graph, checked with it
            self._context[i] = tuple(arrays[k] for k in LAYOUT_CONTEXT_KEYS)
        config_ids = arrays.get("node_config_ids")
        item = prepare_graph(arrays["node_feat"], arrays["node_opcode"],
                             np.ascontiguousarray(arrays["edge_index"][:, ::-1]),  # producer → consumer
                             self.info.num_types, self.transform,
                             None if config_ids is None else config_ids.astype(np.int64).reshape(-1),
                             self.keep_hops, group=i, name=str(self.files[i].path))
        if item.nbytes <= self.cache_bytes:
            self._cache[i] = item
            self._cached_bytes += item.nbytes
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= old.nbytes
        return item

    def layout_context(self, i: int) -> Tuple[np.ndarray, np.ndarray]:
        """Graph i's configurable nodes' roles and XLA's own layouts (`LAYOUT_CONTEXT_KEYS`);
        an error naming the file when it has none."""
        if i not in self._context:
            self.graph(i)   # kept beside the graph when it is read (`graph`)
        if i not in self._context:
            raise SimulatorError(f"{self.files[i].path}: no {' or '.join(LAYOUT_CONTEXT_KEYS)}; the model reads "
                                 f"the configurable nodes' roles (a collection of this project's collector: "
                                 f"python -m extract.xla_collect npz ROOT writes them into older files)")
        return self._context[i]

    def with_configs(self, i: int, rows: Dict[str, np.ndarray], roles: bool = False) -> Prepared:
        """Graph i with the given config rows (arrays of `TpuGraphsFile.config_arrays`);
        `roles`: layout rows widened with their `role_columns`."""
        graph = self.graph(i)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(self.files[i].runtimes(rows)) if "config_runtime" in rows else None
        feats = rows.get("config_feat") if self.kind == "tile" else rows.get("node_config_feat")
        y = np.full(len(feats), np.nan) if y is None else y
        if roles and self.kind == "layout":
            feats = np.concatenate([feats, role_columns(feats, *self.layout_context(i))], axis=2)
        fields = config_tensors(feats if self.kind == "tile" else None, feats if self.kind == "layout" else None,
                                self.transform)
        return dataclasses.replace(graph, y=torch.from_numpy(y.astype(np.float32)), **fields)

    def sample(self, i: int, rng: np.random.Generator, k: Optional[int] = None, roles: bool = False) -> Prepared:
        """Graph i with up to k (`configs_per_graph`) of its measured configs, drawn by `rng`
        (`roles`: as `with_configs`)."""
        measured = self.measured(i)
        k = min(k or self.configs_per_graph, len(measured))
        chosen = np.sort(rng.choice(measured, size=k, replace=False))
        try:
            rows = self.files[i].config_arrays(chosen)
        except ValueError as e:
            raise _reraise(e) from None
        return self.with_configs(i, rows, roles)

    def batch(self, indices: Sequence[int], rng: np.random.Generator, spec: BatchSpec) -> Batch:
        return spec.make([self.sample(int(i), rng, roles=spec.layout_roles) for i in indices])

    def trainable(self) -> "TpuGraphsSource":
        """This source without the graphs that have fewer than 2 measured configs (nothing
        to rank), e.g. a test split whose runtimes are withheld."""
        return self.subset([i for i in range(len(self)) if len(self.measured(i)) >= 2])

    def subset(self, indices: Sequence[int]) -> "TpuGraphsSource":
        """The graphs at `indices` (a cache of their own)."""
        keep = [int(i) for i in indices]
        out = TpuGraphsSource.__new__(TpuGraphsSource)
        out.__dict__.update(self.__dict__)
        out.files = [self.files[i] for i in keep]
        out.collections = [self.collections[i] for i in keep]
        out._measured = {j: self._measured[i] for j, i in enumerate(keep) if i in self._measured}
        out._context = {j: self._context[i] for j, i in enumerate(keep) if i in self._context}
        out._cache, out._cached_bytes = OrderedDict(), 0
        return out

    # ------------------------------------------------------------------ scoring
    def _chunk(self, i: int, spec: BatchSpec, batch_size: int) -> Tuple[int, int]:
        """(configs read per chunk, nodes one more config adds to a batch) for graph i: a
        graph copy (early join), its configurable nodes' rows (late join, layout), or one
        row (late join, tile)."""
        graph = self.graph(i)
        if spec.expand:
            per_config, cap = graph.num_nodes, batch_size
        elif self.kind == "layout":
            per_config, cap = max(1, len(graph.config_nodes)), self.max_batch_nodes
        else:
            per_config, cap = 0, max(batch_size, 4096)
        return max(1, min(cap, self.max_batch_nodes // max(per_config, 1))), per_config

    def score(self, scorer: Scorer, batch_size: int,
              indices: Optional[Sequence[int]] = None) -> Iterator[Tuple[int, np.ndarray]]:
        """(graph index, predicted log runtime of each of its configs) for every graph,
        reading configs in chunks, batches bounded by `max_batch_nodes` and `batch_size`
        configs."""
        spec = scorer.batch_spec
        feature_key = "config_feat" if self.kind == "tile" else "node_config_feat"
        pending: List[Tuple[int, Prepared]] = []
        load, rows_pending = 0, 0
        outputs: Dict[int, List[np.ndarray]] = {}
        remaining: Dict[int, int] = {}

        def flush() -> Iterator[Tuple[int, np.ndarray]]:
            pred = scorer.predict_batch(spec.make([it for _, it in pending]))
            check_predictions(pred, [str(self.files[i].path) for i, it in pending for _ in range(len(it.y))])
            row = 0
            for i, it in pending:
                outputs[i].append(pred[row:row + len(it.y)])
                row += len(it.y)
                remaining[i] -= len(it.y)
                if remaining[i] == 0:
                    yield i, np.concatenate(outputs.pop(i))
            pending.clear()

        for i in range(len(self)) if indices is None else indices:
            file = self.files[i]
            if file.num_configs == 0:
                yield i, np.zeros(0)
                continue
            outputs[i], remaining[i] = [], file.num_configs
            n = self.graph(i).num_nodes
            chunk, per_config = self._chunk(i, spec, batch_size)
            try:
                for _, rows in file.iter_config_chunks(chunk, [feature_key]):
                    item = self.with_configs(i, rows, spec.layout_roles)
                    cost = n + len(item.y) * per_config
                    if pending and (load + cost > self.max_batch_nodes or rows_pending + len(item.y) > batch_size):
                        yield from flush()
                        load, rows_pending = 0, 0
                    pending.append((i, item))
                    load, rows_pending = load + cost, rows_pending + len(item.y)
            except ValueError as e:
                raise _reraise(e) from None
        if pending:
            yield from flush()

    def runtimes(self, i: int) -> np.ndarray:
        """Graph i's measured runtime of every config (NaN: unmeasured)."""
        file = self.files[i]
        try:
            rows = {k: file.read(k) for k in ("config_runtime", "config_runtime_normalizers")
                    if k in file.config_keys}
        except ValueError as e:
            raise _reraise(e) from None
        if not rows:
            return np.full(file.num_configs, np.nan)
        return np.asarray(file.runtimes(rows), np.float64)

    def evaluate(self, scorer: Scorer, batch_size: int) -> Dict[str, Dict]:
        """Metrics per graph over all its measured configs; graphs without measured
        configs (withheld test runtimes) are skipped; {} when none is measured."""
        indices = [i for i in range(len(self)) if len(self.measured(i))]
        preds, trues, groups = [], [], []
        for i, pred in self.score(scorer, batch_size, indices):
            with np.errstate(divide="ignore", invalid="ignore"):
                true = np.log(self.runtimes(i))
            ok = ~np.isnan(true)  # NaN: unmeasured (the one runtime rule); anything else non-finite is an error
            preds.append(pred[ok])
            trues.append(true[ok])
            groups += [self.files[i].name] * int(ok.sum())
        if not groups:
            return {}
        names = TILE_METRICS if self.kind == "tile" else LAYOUT_METRICS
        return evaluate(np.concatenate(preds), np.concatenate(trues), groups, names)

    def rankings(self, scorer: Scorer, batch_size: int) -> Iterator[Ranking]:
        """Every graph's configs (config index = row) with predictions; key: its Kaggle ID."""
        for i, pred in self.score(scorer, batch_size):
            key = _tpugraphs().kaggle_id(self.collections[i], self.files[i].name)
            yield Ranking(key, pred, self.runtimes(i))

    # ------------------------------------------------------------------ statistics
    def normalization(self, spec: BatchSpec, seed: int) -> Normalization:
        """Training-set mean/std of node features (all, and the configurable nodes'), config
        features and log runtimes, from a seeded subset of ≤ STATS_FILES graphs and
        ≤ STATS_CONFIGS configs of each."""
        rng = np.random.default_rng([seed, 3])
        stats = RunningStats()
        for i in rng.permutation(len(self))[:STATS_FILES]:
            where = str(self.files[int(i)].path)
            graph = self.graph(int(i))
            stats.add("feature", graph.x.numpy(), where)
            if graph.config_nodes is not None:
                stats.add("configurable_feature", graph.x[graph.config_nodes].numpy(), where)
            if len(self.measured(int(i))):
                stats.add_item(self.sample(int(i), np.random.default_rng([seed, 4, int(i)]), STATS_CONFIGS,
                                           spec.layout_roles), nodes=False, where=where)
        if stats.count("target") == 0:
            raise SimulatorError(f"the {self.part or 'training'} graphs have no measured configs")
        return stats.result()

    def model_info(self) -> ModelInfo:
        return tpugraphs_model_info(self.collections[0], self.files)


def tpugraphs_model_info(collection: str, files: Sequence[Any]) -> ModelInfo:
    """What a model's shape depends on, for TpuGraphs files (HLO opcode vocabulary)."""
    kind = collection.split(":")[0]
    first = files[0]
    hlo = hlo_collection_info()
    return model_info(len(hlo.vocabulary), first.shape("node_feat")[1], hlo,
                      config_dim=int(first.shape("config_feat")[1]) if kind == "tile" else 0,
                      node_config_dim=int(first.shape("node_config_feat")[2]) if kind == "layout" else 0,
                      layout_roles=kind == "layout" and all(k in f.keys for f in files for k in LAYOUT_CONTEXT_KEYS),
                      tpugraphs={"collection": collection, "kind": kind})


def parse_collection(data) -> str:
    try:
        return _tpugraphs().parse_spec(data)
    except ValueError as e:
        raise _reraise(e) from None


def open_parts(config: TrainConfig, parts: Sequence[str] = ("train", "val", "test")) -> Dict[str, List[Any]]:
    """The TpuGraphsFiles of each part of the run's collection (headers only)."""
    collection = parse_collection(config.data.data)
    out = {}
    for part in parts:
        try:
            out[part] = _tpugraphs().open_split(config.data.data_root, collection, part)
        except ValueError as e:
            raise _reraise(e) from None
    return out


# ---------------------------------------------------------------------- data kind
@register_data_kind("tpugraphs")
class TpuGraphsData(DataKind):
    """`--data tpugraphs:<collection>` under `--data-root`: the official split's folders."""

    name = "tpugraphs"

    def matches(self, data: Sequence[str]) -> bool:
        return any(str(d).startswith(PREFIX) for d in data)

    def resolve(self, config: TrainConfig, given: Set[str]) -> TrainConfig:
        """Per-kind defaults for the flags not given on the command line; checks."""
        collection = parse_collection(config.data.data)
        kind = collection.split(":")[0]
        flat = config.to_dict()
        flat.update({k: v for k, v in DEFAULTS[kind].items() if k not in given})
        if kind == "layout":
            flat.update({k: v for k, v in LAYOUT_MODEL_DEFAULTS.get(flat["model"], {}).items() if k not in given})
        if flat["keep_hops"] is None:
            flat["keep_hops"] = flat["depth"]
        if flat["split"] != "official":
            raise SimulatorError(f"--split {flat['split']}: TpuGraphs collections use --split official "
                                 f"(the dataset's train/valid/test folders)")
        allowed = TILE_METRICS if kind == "tile" else LAYOUT_METRICS
        if flat["select_metric"] in METRICS and flat["select_metric"] not in allowed:
            raise SimulatorError(f"--select-metric {flat['select_metric']}: {collection} is scored with "
                                 f"{', '.join(allowed)}")
        for flag in ("train_fraction", "train_task_fraction"):
            if flat.get(flag, 1.0) < 1.0:
                raise SimulatorError(f"--{flag.replace('_', '-')} is not supported for TpuGraphs collections")
        return TrainConfig.from_dict(flat)

    def run_name(self, config: TrainConfig) -> str:
        return parse_collection(config.data.data).replace(":", "-")

    def open_run(self, config: TrainConfig, info: Optional[ModelInfo]) -> RunData:
        """One lazy source per part: the collection's train/valid/test folders."""
        collection = parse_collection(config.data.data)
        files = open_parts(config)
        info = info if info is not None else tpugraphs_model_info(collection, files["train"])
        parts = {part: TpuGraphsSource(f, config.data, info, part) for part, f in files.items()}
        train = parts["train"].trainable()
        if len(train) == 0:
            raise SimulatorError(f"{collection}: no training graph has two measured configs")
        skipped = len(parts["train"]) - len(train)
        if skipped:
            print(f"warning: {skipped} training graphs have fewer than 2 measured configs; not trained on",
                  file=sys.stderr)
        parts["train"] = train
        summary = (f"data: {config.data.data[0]} under {config.data.data_root}; train {len(train)}, "
                   f"val {len(parts['val'])}, test {len(parts['test'])} graphs (official split)")
        return RunData(info, parts, summary)

    def open_evaluation(self, config: TrainConfig, info: ModelInfo, data: Optional[List[str]],
                        saved_split: Optional[Dict[str, List[str]]]) -> Dict[str, TpuGraphsSource]:
        if data:
            raise SimulatorError("--data: a TpuGraphs run is evaluated on its own collection's valid/test "
                                 "folders (move them with --data-root)")
        return {part: TpuGraphsSource(files, config.data, info, part)
                for part, files in open_parts(config, ("val", "test")).items()}

    def open_targets(self, config: TrainConfig, info: ModelInfo, spec: BatchSpec,
                     options: PredictOptions) -> TpuGraphsSource:
        """The target files, each with its collection: `tpugraphs:COLLECTION` (its
        `options.split` folder) or npz files/folders (collection from their folders,
        else `options.collection`, else the run's); default: the run's test folder."""
        from extract.xla.npz_format import COLLECTIONS, collection_of_path, kind_of
        tg = _tpugraphs()
        run_collection, kind = info.tpugraphs["collection"], info.tpugraphs["kind"]
        if options.collection is not None and options.collection not in COLLECTIONS:
            raise SimulatorError(f"--collection {options.collection}: one of {', '.join(COLLECTIONS)}")
        part = "val" if options.split in ("valid", "val") else options.split
        files, collections = [], []
        try:
            for target in options.targets or [PREFIX + run_collection]:
                if target.startswith(PREFIX):
                    found = tg.open_split(options.data_root or config.data.data_root, tg.parse_spec(target), part)
                    files += found
                    collections += [tg.parse_spec(target)] * len(found)
                    continue
                for file in tg.open_paths([target]):
                    collection = (options.collection or collection_of_path(file.path) or
                                  (run_collection if file.kind == kind else None))
                    if collection is None:
                        raise SimulatorError(f"{file.path}: a {file.kind} file; which collection? (--collection)")
                    files.append(file)
                    collections.append(collection)
        except ValueError as e:
            raise SimulatorError(str(e)) from None
        for collection in dict.fromkeys(collections):
            if kind_of(collection) != kind:
                raise SimulatorError(f"{collection}: the model was trained on {run_collection}, a {kind} "
                                     f"collection; it cannot rank {kind_of(collection)} configs")
        return TpuGraphsSource(files, config.data, info, collections=collections)

    def present(self, rankings: Iterator[Ranking], options: PredictOptions) -> Dict[str, List[Dict[str, Any]]]:
        """One line per graph (top k, slowdown when measured); the Kaggle CSV if asked:
        the 5 best configs for tile (fewer if a kernel has fewer), all configs for layout."""
        tg = _tpugraphs()
        rows: Dict[str, List[Dict[str, Any]]] = {}
        kaggle: List[Tuple[str, List[int]]] = []
        k = options.top_k
        for r in rankings:
            order, measured = r.order, np.isfinite(r.measured)
            kind = r.key.split(":")[0]
            kaggle.append((r.key, [int(i) for i in (order[:tg.TILE_TOP] if kind == "tile" else order)]))
            rows[r.key] = [{"rank": rank, "config": int(c), "predicted": math.exp(float(r.predicted[c])),
                            "measured": float(r.measured[c]) if measured[c] else None}
                           for rank, c in enumerate(order[:k], 1)]
            note = ""
            chosen = [float(r.measured[c]) for c in order[:k] if measured[c]]
            if chosen:
                best = float(r.measured[measured].min())
                note = f"; top-{k} slowdown {100 * (min(chosen) - best) / best:.2f}%"
            print(f"{r.key}: {len(order)} configs ({int(measured.sum())} measured); "
                  f"top {min(k, len(order))}: {' '.join(str(int(c)) for c in order[:k])}{note}")
        if options.kaggle_csv:
            try:
                path = tg.write_kaggle_csv(options.kaggle_csv, kaggle)
            except (OSError, ValueError) as e:
                raise SimulatorError(f"{options.kaggle_csv}: cannot write ({e})") from None
            print(f"wrote {path} ({len(kaggle)} rows)", file=sys.stderr)
        return rows
