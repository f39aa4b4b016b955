"""TpuGraphs collections in the simulator: lazy item sources for the one training loop.

`python -m simulator.train --data tpugraphs:<collection> --data-root ROOT` trains the
same `GraphModel` with the same loop as the TVM data; what differs is only where items
come from. A `TpuGraphsSource` stands in for the list of prepared items: one item per
graph (npz file), its group is the graph, and

* `sample(i, rng)` gives graph i with `--configs-per-graph` of its measured configs,
  drawn afresh every step (the loop's RNG, so a resumed run draws the same ones);
* `evaluate(model)` scores every measured config of every graph (TILE_METRICS or
  LAYOUT_METRICS per graph, mean over graphs);
* `predict(model)` ranks every config of every graph, measured or not (Kaggle CSV).

Memory strategy (large graphs)
------------------------------
TpuGraphs layout graphs reach tens of thousands of nodes with thousands of configs each
(c × nc × 18 floats); industrial graphs reach 500k nodes. Nothing holds a collection:

1. Lazy files: opening a split reads only npy headers (`extract.tpugraphs_npz.TpuGraphsFile`).
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
import sys
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .batching import TRANSFORMS, Prepared, config_tensors, graph_edges, make_batch
from .metrics import LAYOUT_METRICS, TILE_METRICS, evaluate
from .registry import SimulatorError

STATS_FILES = 200
STATS_CONFIGS = 64
DEFAULTS = {  # per kind, for flags not given on the command line
    "tile": {"loss": "listmle", "batch_size": 8, "configs_per_graph": 16, "keep_hops": -1,
             "select_metric": "kaggle_score", "feature_transform": "log1p", "split": "official"},
    "layout": {"loss": "listmle", "batch_size": 2, "configs_per_graph": 8, "keep_hops": None,
               "select_metric": "kendall_tau", "feature_transform": "log1p", "split": "official"},
}


def _tpugraphs():
    """datasets.tpugraphs_collections, errors as SimulatorError."""
    from datasets import tpugraphs_collections
    return tpugraphs_collections


def _reraise(e: ValueError) -> SimulatorError:
    return SimulatorError(str(e))


def khop_nodes(num_nodes: int, edges: np.ndarray, seeds: np.ndarray, hops: int) -> Optional[np.ndarray]:
    """Sorted ids of the nodes within `hops` undirected hops of a seed (seeds included);
    None (keep every node) when hops < 0 or there are no seeds."""
    seeds = np.asarray(seeds, np.int64).reshape(-1)
    if hops < 0 or seeds.size == 0:
        return None
    import scipy.sparse as sp
    reach = np.zeros(num_nodes, bool)
    reach[seeds] = True
    if hops and len(edges):
        ones = np.ones(len(edges), np.float32)
        adjacency = sp.csr_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(num_nodes, num_nodes))
        adjacency = (adjacency + adjacency.T).tocsr()
        frontier = reach.copy()
        for _ in range(hops):
            nxt = (adjacency @ frontier.astype(np.float32)) > 0
            frontier = nxt & ~reach
            if not frontier.any():
                break
            reach |= frontier
    return np.flatnonzero(reach)


def prepare_graph(node_features: np.ndarray, node_types: np.ndarray, edges: np.ndarray,
                  num_types: int, transform: str = "log1p", config_ids: Optional[np.ndarray] = None,
                  keep_hops: int = -1, group: int = 0) -> Prepared:
    """A graph as a Prepared item without configs (y empty): pruned to the configurable
    nodes' `keep_hops` neighbourhood (layout), features transformed, reverse edges and
    self-loops added; `config_nodes` are the configurable nodes' ids after pruning."""
    n = int(node_types.shape[0])
    keep = khop_nodes(n, edges, config_ids, keep_hops) if config_ids is not None else None
    if keep is not None:
        new_id = np.full(n, -1, np.int64)
        new_id[keep] = np.arange(len(keep))
        mask = (new_id[edges[:, 0]] >= 0) & (new_id[edges[:, 1]] >= 0)
        edges = new_id[edges[mask]]
        node_features, node_types = node_features[keep], node_types[keep]
        config_ids = new_id[np.asarray(config_ids, np.int64)]
        n = len(keep)
    types = np.where((node_types >= 0) & (node_types < num_types), node_types, num_types)
    src, dst = graph_edges(edges, n)
    return Prepared(x=torch.from_numpy(transform32(node_features, transform)),
                    types=torch.from_numpy(types.astype(np.int64)), src=src, dst=dst,
                    y=torch.zeros(0), group=group,
                    config_nodes=None if config_ids is None else torch.from_numpy(
                        np.asarray(config_ids, np.int64)))


def transform32(values: np.ndarray, transform: str) -> np.ndarray:
    """TRANSFORMS[transform] in float32 with one allocation: sign(x)·log1p(|x|) of a
    500k × 140 array takes ~1 s this way, ~5–15 s through float64 temporaries."""
    out = np.array(values, dtype=np.float32, copy=True)
    if (transform or "none") == "none":
        return out
    if transform != "log1p":
        return TRANSFORMS[transform](out.astype(np.float64)).astype(np.float32)
    sign = np.signbit(out)
    np.abs(out, out=out)
    np.log1p(out, out=out)
    np.negative(out, out=out, where=sign)
    return out


def _nbytes(item: Prepared) -> int:
    return sum(t.numel() * t.element_size() for t in (item.x, item.types, item.src, item.dst))


class TpuGraphsSource:
    """The graphs of one split as training/evaluation items (see the module docstring)."""

    item_groups = None  # every item is a group of its own: ranking losses compare its configs

    def __init__(self, files: Sequence[Any], config: Dict[str, Any], info: Dict[str, Any],
                 part: str = ""):
        self.files = list(files)
        self.part = part
        self.kind = info["tpugraphs"]["kind"]
        self.collection = info["tpugraphs"].get("collection")
        self.num_types = info["num_types"]
        self.feature_dim = info["feature_dim"]
        self.transform = config.get("feature_transform") or "none"
        self.keep_hops = config.get("keep_hops", -1)
        self.keep_hops = -1 if self.keep_hops is None else int(self.keep_hops)
        self.configs_per_graph = int(config.get("configs_per_graph") or 16)
        self.max_batch_nodes = int(config.get("max_batch_nodes") or 2_000_000)
        self.eval_batch = int(config.get("eval_batch_size") or 256)
        self.cache_bytes = int(float(config.get("graph_cache_mb") or 1024) * 2 ** 20)
        self._cache: "OrderedDict[int, Prepared]" = OrderedDict()
        self._cached_bytes = 0
        self._measured: Dict[int, np.ndarray] = {}
        for f in self.files:
            if f.kind != self.kind:
                raise SimulatorError(f"{f.path}: a TpuGraphs {f.kind} file; the model is a {self.kind} model")
            if f.shape("node_feat")[1] != self.feature_dim:
                raise SimulatorError(f"{f.path}: {f.shape('node_feat')[1]} node features, the model "
                                     f"expects {self.feature_dim}")
            dim = f.shape("config_feat")[1] if self.kind == "tile" else f.shape("node_config_feat")[2]
            want = info.get("config_dim") if self.kind == "tile" else info.get("node_config_dim")
            if dim != want:
                raise SimulatorError(f"{f.path}: {dim} config features per "
                                     f"{'config' if self.kind == 'tile' else 'node'}, the model expects {want}")

    # ------------------------------------------------------------------ sequence protocol
    def __len__(self) -> int:
        return len(self.files)

    @property
    def names(self) -> List[str]:
        return [f.name for f in self.files]

    def measured(self, i: int) -> np.ndarray:
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
        file = self.files[i]
        try:
            sample = file.sample([])  # graph arrays, checked; no config rows
        except ValueError as e:
            raise _reraise(e) from None
        item = prepare_graph(sample.node_features, sample.node_types, sample.edges, self.num_types,
                             self.transform, sample.node_config_ids, self.keep_hops, group=i)
        size = _nbytes(item)
        if size <= self.cache_bytes:
            self._cache[i] = item
            self._cached_bytes += size
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= _nbytes(old)
        return item

    def with_configs(self, i: int, rows: Dict[str, np.ndarray]) -> Prepared:
        """Graph i with the given config rows (arrays of `TpuGraphsFile.config_arrays`)."""
        graph = self.graph(i)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(self.files[i].runtimes(rows)) if "config_runtime" in rows else None
        feats = rows.get("config_feat") if self.kind == "tile" else rows.get("node_config_feat")
        n = len(feats)
        y = np.full(n, np.nan) if y is None else y
        fields = config_tensors(feats if self.kind == "tile" else None,
                                feats if self.kind == "layout" else None,
                                graph.config_nodes.numpy() if self.kind == "layout" else None, self.transform)
        if self.kind == "layout":
            fields.pop("config_nodes")
        return dataclasses.replace(graph, y=torch.from_numpy(y.astype(np.float32)), **fields)

    def sample(self, i: int, rng: np.random.Generator, k: Optional[int] = None) -> Prepared:
        """Graph i with up to k (`configs_per_graph`) of its measured configs, drawn by `rng`."""
        measured = self.measured(i)
        k = min(k or self.configs_per_graph, len(measured))
        chosen = np.sort(rng.choice(measured, size=k, replace=False))
        try:
            rows = self.files[i].config_arrays(chosen)
        except ValueError as e:
            raise _reraise(e) from None
        return self.with_configs(i, rows)

    def trainable(self) -> "TpuGraphsSource":
        """This source without the graphs that have fewer than 2 measured configs (nothing
        to rank), e.g. a test split whose runtimes are withheld."""
        keep = [i for i in range(len(self)) if len(self.measured(i)) >= 2]
        out = TpuGraphsSource.__new__(TpuGraphsSource)
        out.__dict__.update(self.__dict__)
        out.files = [self.files[i] for i in keep]
        out._measured = {j: self._measured[i] for j, i in enumerate(keep)}
        out._cache, out._cached_bytes = OrderedDict(), 0
        return out

    # ------------------------------------------------------------------ all configs
    def predict_all(self, model, indices: Optional[Sequence[int]] = None) -> Iterator[Tuple[int, np.ndarray]]:
        """(graph index, predicted log runtime of each of its configs) for every graph,
        scoring configs in chunks and batches bounded by `max_batch_nodes`."""
        indices = range(len(self)) if indices is None else indices
        expand = bool(getattr(model, "expands", False))
        feature_key = "config_feat" if self.kind == "tile" else "node_config_feat"
        model.eval()
        pending: List[Tuple[int, Prepared]] = []
        load = [0]
        outputs: Dict[int, List[np.ndarray]] = {}
        remaining: Dict[int, int] = {}

        def flush() -> Iterator[Tuple[int, np.ndarray]]:
            if not pending:
                return
            with torch.no_grad():
                pred = model(make_batch([it for _, it in pending], expand=expand)).double().numpy()
            row = 0
            for i, it in pending:
                outputs[i].append(pred[row:row + len(it.y)])
                row += len(it.y)
                remaining[i] -= len(it.y)
                if remaining[i] == 0:
                    yield i, np.concatenate(outputs.pop(i))
            pending.clear()
            load[0] = 0

        for i in indices:
            file = self.files[i]
            n = self.graph(i).num_nodes
            outputs[i], remaining[i] = [], file.num_configs
            if file.num_configs == 0:
                outputs.pop(i)
                yield i, np.zeros(0)
                continue
            # cost of one more config in a batch: a graph copy (early join), its
            # configurable nodes' rows (late join, layout), or one row (late join, tile)
            if expand:
                per_config, cap = n, self.eval_batch
            elif self.kind == "layout":
                per_config, cap = max(1, len(self.graph(i).config_nodes)), self.max_batch_nodes
            else:
                per_config, cap = 0, max(self.eval_batch, 4096)
            chunk = max(1, min(cap, self.max_batch_nodes // max(per_config, 1)))
            try:
                for _, rows in file.iter_config_chunks(chunk, [feature_key]):
                    item = self.with_configs(i, rows)
                    cost = n + len(item.y) * per_config
                    if pending and (load[0] + cost > self.max_batch_nodes or
                                    sum(len(it.y) for _, it in pending) + len(item.y) > self.eval_batch):
                        yield from flush()
                    pending.append((i, item))
                    load[0] += cost
            except ValueError as e:
                raise _reraise(e) from None
        yield from flush()

    def true_log(self, i: int) -> np.ndarray:
        file = self.files[i]
        try:
            rows = {k: file.read(k) for k in ("config_runtime", "config_runtime_normalizers")
                    if k in file.config_keys}
        except ValueError as e:
            raise _reraise(e) from None
        if not rows:
            return np.full(file.num_configs, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(file.runtimes(rows))

    def evaluate(self, model, batch_size: Optional[int] = None) -> Dict[str, Dict]:
        """Metrics per graph over all its measured configs; graphs without measured
        configs (withheld test runtimes) are skipped."""
        if batch_size:
            self.eval_batch = int(batch_size)
        indices = [i for i in range(len(self)) if len(self.measured(i))]
        preds, trues, groups = [], [], []
        for i, pred in self.predict_all(model, indices):
            true = self.true_log(i)
            ok = np.isfinite(true)
            preds.append(pred[ok])
            trues.append(true[ok])
            groups += [self.files[i].name] * int(ok.sum())
        names = TILE_METRICS if self.kind == "tile" else LAYOUT_METRICS
        if not groups:
            return {}  # nothing measured (withheld runtimes): nothing to score
        return evaluate(np.concatenate(preds), np.concatenate(trues), groups, names)

    # ------------------------------------------------------------------ statistics
    def normalization_stats(self, seed: int) -> Dict[str, Any]:
        """Training-set mean/std of node features, config features and log runtimes, from
        a seeded subset of ≤ STATS_FILES graphs and ≤ STATS_CONFIGS configs of each."""
        rng = np.random.default_rng([seed, 3])
        order = rng.permutation(len(self))[:STATS_FILES]
        acc: Dict[str, List] = {}

        def add(name: str, values: np.ndarray) -> None:
            values = np.asarray(values, np.float64).reshape(-1, values.shape[-1]) if values.ndim > 1 \
                else np.asarray(values, np.float64)
            values = values[np.all(np.isfinite(values.reshape(len(values), -1)), axis=1)]
            s = acc.setdefault(name, [0, 0.0, 0.0])
            s[0] += len(values)
            s[1] = s[1] + values.sum(0)
            s[2] = s[2] + (values ** 2).sum(0)

        for i in order:
            graph = self.graph(int(i))
            add("feature", graph.x.numpy())
            measured = self.measured(int(i))
            if len(measured) == 0:
                continue
            item = self.sample(int(i), np.random.default_rng([seed, 4, int(i)]), STATS_CONFIGS)
            add("target", item.y.numpy())
            if item.config_x is not None:
                add("config", item.config_x.numpy())
            if item.node_config_x is not None:
                add("node_config", item.node_config_x.numpy())
        if "target" not in acc or acc["target"][0] == 0:
            raise SimulatorError(f"the {self.part or 'training'} graphs have no measured configs")
        stats: Dict[str, Any] = {}
        for name, (count, total, squares) in acc.items():
            mean = total / count
            std = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
            std = np.where(std > 1e-6, std, 1.0)
            if name == "target":
                stats["target_mean"], stats["target_std"] = float(mean), float(std)
            else:
                stats[f"{name}_mean"], stats[f"{name}_std"] = mean.tolist(), std.tolist()
        return stats


# ---------------------------------------------------------------------- runs
def resolve_config(config: Dict[str, Any], given: Dict[str, Any]) -> Dict[str, Any]:
    """Per-kind defaults for the flags not given on the command line; checks the split."""
    collection = parse_collection(config["data"])
    kind = collection.split(":")[0]
    config = dict(config)
    for key, value in DEFAULTS[kind].items():
        if key not in given:
            config[key] = value
    if config.get("keep_hops") is None:
        config["keep_hops"] = config["depth"]
    if config["split"] != "official":
        raise SimulatorError(f"--split {config['split']}: TpuGraphs collections use --split official "
                             f"(the dataset's train/valid/test folders)")
    from .metrics import METRICS
    allowed = TILE_METRICS if kind == "tile" else LAYOUT_METRICS
    if config["select_metric"] in METRICS and config["select_metric"] not in allowed:
        raise SimulatorError(f"--select-metric {config['select_metric']}: {collection} is scored with "
                             f"{', '.join(allowed)}")
    if config["model"] in ("xgb", "curve-mlp"):
        raise SimulatorError(f"--model {config['model']} reads TVM feature vectors; TpuGraphs data "
                             f"needs a graph model (gcn, sage, gat, cheb, mlp)")
    if config.get("train_fraction", 1.0) < 1.0:
        raise SimulatorError("--train-fraction is not supported for TpuGraphs collections")
    return config


def parse_collection(data) -> str:
    try:
        return _tpugraphs().parse_spec(data)
    except ValueError as e:
        raise _reraise(e) from None


def model_info(collection: str, files: Sequence[Any]) -> Dict[str, Any]:
    """What the model's shape depends on, for TpuGraphs data (HLO opcode vocabulary)."""
    from extract import hlo_graph as hlo
    kind = collection.split(":")[0]
    num_types = max(hlo.OPCODE_IDS.values()) + 1
    first = files[0]
    info: Dict[str, Any] = {
        "vocabulary": [hlo.OPCODE_NAMES.get(i, "unknown" if i == hlo.UNKNOWN_OPCODE_ID else f"retired-{i}")
                       for i in range(num_types)],
        "feature_names": list(getattr(hlo, "NODE_FEATURE_NAMES", []) or []) or None,
        "extractor_version": None, "num_types": num_types,
        "feature_dim": int(first.shape("node_feat")[1]), "vector_dims": {},
        "config_dim": int(first.shape("config_feat")[1]) if kind == "tile" else 0,
        "node_config_dim": int(first.shape("node_config_feat")[2]) if kind == "layout" else 0,
        "tpugraphs": {"collection": collection, "kind": kind},
    }
    return info


def open_parts(config: Dict[str, Any], parts: Sequence[str] = ("train", "val", "test")) -> Dict[str, List[Any]]:
    """The TpuGraphsFiles of each part of the run's collection (headers only)."""
    collection = parse_collection(config["data"])
    out = {}
    for part in parts:
        try:
            out[part] = _tpugraphs().open_split(config.get("data_root"), collection, part)
        except ValueError as e:
            raise _reraise(e) from None
    return out


def load_run_data(config: Dict[str, Any], state: Optional[Dict[str, Any]]):
    """(names per part, sources per part, info, normalization) of a TpuGraphs run."""
    collection = parse_collection(config["data"])
    files = open_parts(config)
    info = state["info"] if state is not None else model_info(collection, files["train"])
    sources = {part: TpuGraphsSource(f, config, info, part) for part, f in files.items()}
    train = sources["train"].trainable()
    if len(train) == 0:
        raise SimulatorError(f"{collection}: no training graph has two measured configs")
    skipped = len(sources["train"]) - len(train)
    if skipped:
        print(f"warning: {skipped} training graphs have fewer than 2 measured configs; not trained on",
              file=sys.stderr)
    sources["train"] = train
    normalization = state["normalization"] if state is not None else train.normalization_stats(config["seed"])
    names = {part: s.names for part, s in sources.items()}
    return names, sources, info, normalization


def rank_configs(model, source: TpuGraphsSource) -> List[Tuple[Any, np.ndarray, np.ndarray, np.ndarray]]:
    """(file, config indices fastest-predicted first, predicted log runtimes, measured log
    runtimes or NaN) for every graph of `source`."""
    out = []
    for i, pred in source.predict_all(model):
        order = np.argsort(pred, kind="stable")
        out.append((source.files[i], order, pred, source.true_log(i)))
    return out
