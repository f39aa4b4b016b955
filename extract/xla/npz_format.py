"""The TpuGraphs npz format (google-research-datasets/tpu_graphs): folders, arrays,
runtimes, validation, lazy reading and writing — in this one module.

The converters that make such files are extract/xla/convert_hlo.py (XLA HLO modules, JAX
functions) and extract/xla/convert_tuning.py (TpuGraphs' raw tuning records);
`python -m extract.tpugraphs info FILE.npz …` prints a file's kind and sizes.

Collections and folders
-----------------------
Five collections: `tile:xla`, `layout:xla:random`, `layout:xla:default`,
`layout:nlp:random`, `layout:nlp:default`, laid out as the dataset's tarballs unpack::

    <root>/npz/tile/xla/{train,valid,test}/*.npz
    <root>/npz/layout/{xla,nlp}/{random,default}/{train,valid,test}/*.npz

A collection's folders are its name split at ':' (`collection_folders`), both ways:
`collection_dir(root, collection, split)` is one split's folder (`root` may also be
the `npz` folder itself), `collection_of_path(path)` the collection a file's folders
name. `list_files` lists one folder; `iter_collection` yields its samples one file at
a time.

npz arrays (one graph with n nodes, m edges, c configs per file)
----------------------------------------------------------------
both kinds:
    node_feat     (n, 140) float32   node features (extract/xla/hlo_graph.py NODE_FEATURE_NAMES)
    node_opcode   (n,) uint8|int32   TpuGraphs opcode ids (extract/xla/hlo_graph.py OPCODE_IDS)
    edge_index    (m, 2) int32|int64 (u, v): node u consumes the output of node v
tile (`config_feat` present; one config = tile sizes of the whole kernel):
    config_feat   (c, 24) float32    kernel/output/input bounds, each 6 + sum + product
    config_runtime             (c,) int64  runtime in ns
    config_runtime_normalizers (c,) int64  runtime in ns of the default tile config,
                                           measured alongside (machines differ)
layout (`node_config_feat` present; one config = a layout for each configurable node):
    node_config_ids  (nc,) int       positions of the configurable nodes
    node_config_feat (c, nc, 18) float32  output/input/kernel minor-to-major, -1 padded
    config_runtime   (c,) int        runtime of the whole program in ns
    node_splits      (k,) or (1, k) int   node offsets of major computations (optional)
  optional, this project's collector (extract/xla/collection) writes both or neither:
    node_config_roles   (nc, 18) int8  per configurable node and layout slot (output,
                                       first, second operand: 6 columns each, as in
                                       node_config_feat), the role of dimension d of that
                                       array in the node's operation, at column 6·slot + d:
                                       an index into LAYOUT_ROLES; -1 past the array's rank
    node_config_default (nc, 18) float32  XLA's own layout of those slots (the row
                                       node_config_feat has when no layout is pinned)

Every integer dtype that occurs in the wild is read. New files get the dtypes TpuGraphs'
own extractor emits (uint8 opcodes, int64 ids and runtimes; `DEFAULT_DTYPES`).
Arrays other than these are not read into samples.

Validation: nothing unchecked reaches a model
---------------------------------------------
`check_arrays(arrays, source)` validates a file's arrays — kinds, dtypes (integers
where ids and runtimes are, real numbers for features), shapes, at least one node, node
ids in range — and every value (`check_values`): features finite (no NaN, no ±inf),
opcodes in 0..255, runtimes and normalizers in 0..`MAX_RUNTIME_NS` (a day), and a
positive normalizer for every measured tile runtime (`check_runtime_pairs`). A bad
file raises one ValueError naming the file, the array and the first bad entry
(`<file>: node_feat has a non-finite value (nan) at node 3, feature 7`,
`<file>: config_runtime 2 is negative (-5)`). Every writer here calls it, and the lazy
reader applies the same checks to exactly what it reads (below), so the whole-file
reader and the chunked reads of training, evaluation and prediction refuse a file the
same way, with the same message.

The one runtime rule
--------------------
`config_runtimes(kind, rows)` (and `TpuGraphsFile.runtimes(rows)`), used by every
reader of this format:

* tile: `config_runtime / config_runtime_normalizers`, dimensionless (runtime relative
  to the default tile config measured on the same machine), not seconds. TpuGraphs
  trains on this ratio by default (`normalize_runtimes=True`) and ranks tile configs by
  it; raw nanoseconds from different machines are not comparable.
* layout: `config_runtime` in seconds (TpuGraphs uses no normalizer for layout:
  whole-program runtimes vary little between machines).
* Unmeasured configs — runtime 0, or runtime arrays left out as in a split whose
  runtimes are withheld — are NaN. Nothing else is: a negative or absurd runtime, or a
  tile runtime without a positive normalizer, is an error, never "unmeasured" (the
  rule itself refuses such rows, and `TpuGraphsFile.runtimes` refuses tile runtime rows
  read without the normalizers the file holds).

Reading lazily
--------------
`TpuGraphsFile(path)` reads only the npy headers; graph arrays and config rows are read
on request: `graph_arrays()`, `config_arrays(rows)` (a compressed member is streamed up
to the last requested row and the rest dropped as it passes), `iter_config_chunks(chunk)`
(every config, a chunk at a time, each member decompressed once), `runtimes(rows)`,
`measured_configs()`. So a 40k-node graph with thousands of configs never sits in RAM
whole. Opening checks the headers: dtypes, shapes, at least one node, and that each
header's shape accounts for its member's bytes (a damaged header never makes a reader
allocate what the data does not hold). Every read checks the values it read
(`check_values`, naming the config index), so a NaN feature or a negative runtime
raises when a training step, an evaluation chunk or a prediction meets it;
`validate()` reads the whole file once (O(chunk) memory) to find such a value up
front. A truncated or corrupted file raises ValueError naming the file (and the array).

Writing
-------
`write_arrays(path, arrays)` validates and writes one file atomically (compressed, as
the dataset ships), through `extract.fileio.atomic_write`. `tile_arrays` /
`layout_arrays` assemble a file's arrays from a graph's and its runs'; `NpzGraph` is one
such file before it is written, as the converters return them. The converters' command
lines write into their output folder through `extract.xla.npz_output.NpzOutput` (one
writer per folder, no npz files of an earlier run left beside the new ones).

As a GraphSample
----------------
A `GraphSample` is built only where one is wanted (`sample_from_arrays`,
`TpuGraphsFile.sample`, `read_npz`, `NpzGraph.sample`):

* edges: `edge_index` reversed, so edges run producer (v) → consumer (u), as for
  every GraphSample;
* runtimes: the runtime rule above; tile normalizers are kept, exactly, in
  `meta.extra["runtime_normalizers_ns"]`;
* `node_splits` is kept as the list `meta.extra["node_splits"]` (and `node_config_roles`,
  `node_config_default` as nested lists under their names); a file's dtypes and shapes
  in `meta.tpugraphs`, so `write_npz(read_npz(p))` reproduces the arrays exactly
  (runtime arrays absent from the source stay absent; unmeasured runtimes are written
  back as 0); arrays outside the format are listed in
  `meta.tpugraphs["ignored_arrays"]` and a warning is logged;
* group and name: the file name without `.npz` (each file is one graph, and its configs
  are what get ranked); `meta` also holds the source (and in `extra` collection and split).
"""
from __future__ import annotations

import contextlib
import logging
import math
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from extract.fileio import atomic_write
from extract.sample import GraphSample

log = logging.getLogger(__name__)

COLLECTIONS = ("tile:xla", "layout:xla:random", "layout:xla:default",
               "layout:nlp:random", "layout:nlp:default")
SPLITS = ("train", "valid", "test")
KINDS = ("tile", "layout")

TILE_CONFIG_FEATURES = 24
LAYOUT_CONFIG_FEATURES = 18

GRAPH_KEYS = ("node_feat", "node_opcode", "edge_index")
# Per-config arrays, the config-feature array first (it fixes the number of configs).
CONFIG_KEYS = {"tile": ("config_feat", "config_runtime", "config_runtime_normalizers"),
               "layout": ("node_config_feat", "config_runtime")}
# Runtime arrays may be absent (a split whose runtimes are withheld): read as NaN.
RUNTIME_KEYS = {"tile": ("config_runtime", "config_runtime_normalizers"),
                "layout": ("config_runtime",)}
REQUIRED_KEYS = {"tile": GRAPH_KEYS + ("config_feat",),
                 "layout": GRAPH_KEYS + ("node_config_ids", "node_config_feat")}
# What a dimension is to a dot or convolution (a convolution read as a matmul: the input's
# batch and the output's batch are left-free, the kernel's output feature right-free, both
# input features contracted): node_config_roles' values; "none" for every other operation.
LAYOUT_ROLES = ("none", "batch", "contracted", "left-free", "right-free", "spatial")
# Per configurable node, beside node_config_ids (optional, both or neither).
LAYOUT_CONTEXT_KEYS = ("node_config_roles", "node_config_default")
INTEGER_KEYS = ("node_opcode", "edge_index", "config_runtime", "config_runtime_normalizers",
                "node_config_ids", "node_splits", "node_config_roles")
# Float arrays: every value must be finite.
FEATURE_KEYS = ("node_feat", "config_feat", "node_config_feat", "node_config_default")
# Runtime arrays (ns): 0 (unmeasured) up to MAX_RUNTIME_NS; a measured tile runtime
# needs a positive normalizer.
RUNTIME_ARRAYS = ("config_runtime", "config_runtime_normalizers")
MAX_RUNTIME_NS = 86_400 * 10**9  # a day: no single run of one program takes longer
MAX_OPCODE = 255  # TpuGraphs stores opcode ids as uint8 (ids 0..120 are assigned)
# What tpu_graphs' graph_features extractor emits; used when a sample has no source dtypes.
DEFAULT_DTYPES = {"node_feat": "<f4", "node_opcode": "|u1", "edge_index": "<i8",
                  "config_feat": "<f4", "config_runtime": "<i8",
                  "config_runtime_normalizers": "<i8", "node_config_ids": "<i8",
                  "node_config_feat": "<f4", "node_splits": "<i8", "node_config_roles": "|i1",
                  "node_config_default": "<f4"}
NS_PER_SECOND = 1e9


# ---------------------------------------------------------------------------- folders

def collection_folders(collection: str) -> Tuple[str, ...]:
    """The folder names of a collection below `npz/`: its name split at ':'."""
    if collection not in COLLECTIONS:
        raise ValueError(f"unknown TpuGraphs collection {collection!r}; one of {COLLECTIONS}")
    return tuple(collection.split(":"))


def kind_of(collection: str) -> str:
    """'tile' or 'layout': the first part of the collection's name."""
    return collection_folders(collection)[0]


def collection_dir(root: Union[str, Path], collection: str, split: str) -> Path:
    """The folder of one split of a collection (see module docstring)."""
    folders = collection_folders(collection)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    root = Path(root).expanduser()
    if (root / "npz").is_dir():
        root = root / "npz"
    return root.joinpath(*folders, split)


def list_files(root: Union[str, Path], collection: str, split: str) -> List[Path]:
    """The npz files of one split of a collection, sorted by name (maybe none)."""
    folder = collection_dir(root, collection, split)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; expected TpuGraphs' layout "
                                f"<root>/npz/{'/'.join(collection_folders(collection))}/"
                                f"{{{','.join(SPLITS)}}}/*.npz")
    # `.NPZ` too: a file is not skipped for the case of its suffix.
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".npz" and p.is_file())


def collection_of_path(path: Union[str, Path]) -> Optional[str]:
    """The collection a file's folders name (…/tile/xla/<split>/f.npz,
    …/layout/<source>/<search>/<split>/f.npz), or None."""
    parents = Path(path).parts[:-2]  # without the split folder and the file
    for collection in COLLECTIONS:
        folders = collection_folders(collection)
        if parents[len(parents) - len(folders):] == folders:
            return collection
    return None


def iter_collection(root: Union[str, Path], collection: str, split: str,
                    max_configs: Optional[int] = None, seed: int = 0) -> Iterator[GraphSample]:
    """One GraphSample per file, read one file at a time; with `max_configs`, a uniform
    random subset of at most that many configs per file."""
    rng = np.random.default_rng(seed)
    for path in list_files(root, collection, split):
        file = TpuGraphsFile(path, collection=collection, split=split)
        yield file.sample() if max_configs is None else file.sample_configs(max_configs, rng)


# ---------------------------------------------------------------------------- validation

def detect_kind(keys: Sequence[str], source: str = "") -> str:
    """'tile' or 'layout', from which arrays a file holds (its required arrays checked)."""
    kinds = [k for k, marker in (("tile", "config_feat"), ("layout", "node_config_feat"))
             if marker in keys]
    if len(kinds) != 1:
        raise ValueError(f"{source}: neither a TpuGraphs tile file (config_feat) nor a "
                         f"layout file (node_config_feat); arrays: {sorted(keys)}")
    missing = [k for k in REQUIRED_KEYS[kinds[0]] if k not in keys]
    if missing:
        raise ValueError(f"{source}: TpuGraphs {kinds[0]} file lacks arrays {missing}")
    return kinds[0]


def check_dtypes(dtypes: Mapping[str, np.dtype], source: str = "") -> None:
    """Integer arrays hold integers, feature arrays real numbers (what a file's npy
    headers say, before any data is read)."""
    for key, dtype in dtypes.items():
        dtype = np.dtype(dtype)
        if key in INTEGER_KEYS and dtype.kind not in "iu":
            raise ValueError(f"{source}: {key} has dtype {dtype}, expected integers")
        if key in FEATURE_KEYS and dtype.kind not in "fiu":
            raise ValueError(f"{source}: {key} has dtype {dtype}, expected real numbers")


def _position(key: str, index: Tuple[int, ...], rows: Optional[np.ndarray]) -> str:
    """Where element `index` of array `key` (of its rows `rows`, if given) is, in words."""
    index = tuple(int(i) for i in index)
    if key == "node_feat" and len(index) == 2:
        return f"node {index[0]}, feature {index[1]}"
    config = int(rows[index[0]]) if rows is not None else index[0]
    if key == "config_feat" and len(index) == 2:
        return f"config {config}, feature {index[1]}"
    if key == "node_config_feat" and len(index) == 3:
        return f"config {config}, configurable node {index[1]}, feature {index[2]}"
    if key == "node_config_default" and len(index) == 2:
        return f"configurable node {index[0]}, column {index[1]}"
    return f"index {index}"


def check_values(key: str, values: np.ndarray, source: str = "",
                 rows: Optional[Sequence[int]] = None) -> None:
    """The values of one array (or of its rows `rows`, which name the configs in
    messages): features finite, runtimes and normalizers in 0..MAX_RUNTIME_NS, opcodes in
    0..MAX_OPCODE. Raises ValueError naming `source`, the array and the first bad entry."""
    if values.size == 0:
        return
    rows = None if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    if key in FEATURE_KEYS:
        finite = np.isfinite(values)
        if not finite.all():
            where = np.unravel_index(int(np.argmin(finite)), values.shape)
            raise ValueError(f"{source}: {key} has a non-finite value ({values[where]}) at "
                             f"{_position(key, where, rows)}")
    elif key in RUNTIME_ARRAYS:
        bad = (values < 0) | (values > MAX_RUNTIME_NS)
        if bad.any():
            first = int(np.argmax(bad))
            config = int(rows[first]) if rows is not None else first
            value = int(values[first])
            what = "is negative" if value < 0 else \
                f"is more than a day ({MAX_RUNTIME_NS} ns), not a measured runtime"
            raise ValueError(f"{source}: {key} {config} {what} ({value})")
    elif key == "node_opcode":
        bad = (values < 0) | (values > MAX_OPCODE)
        if bad.any():
            first = int(np.argmax(bad))
            raise ValueError(f"{source}: node_opcode of node {first} is {int(values[first])}, "
                             f"outside TpuGraphs' opcode ids 0..{MAX_OPCODE}")


def check_runtime_pairs(kind: str, rows: Mapping[str, np.ndarray], source: str = "",
                        indices: Optional[Sequence[int]] = None) -> None:
    """Tile: every config with a runtime has a positive normalizer (the runtime rule
    cannot be applied otherwise). `indices` name the rows' configs in messages."""
    runtime = rows.get("config_runtime")
    if kind != "tile" or runtime is None or not runtime.size:
        return
    normalizers = rows.get("config_runtime_normalizers")
    unnormalizable = (runtime > 0) & (normalizers <= 0 if normalizers is not None else True)
    if np.any(unnormalizable):
        first = int(np.argmax(unnormalizable))
        config = int(np.asarray(indices)[first]) if indices is not None else first
        raise ValueError(f"{source}: config {config} has a runtime but no positive "
                         "config_runtime_normalizers entry")


def check_graph_arrays(arrays: Mapping[str, np.ndarray], source: str = "") -> int:
    """Validate the graph arrays (dtypes, node/edge shapes, node ids, values); the node
    count (at least 1)."""
    check_dtypes({k: a.dtype for k, a in arrays.items()}, source)
    node_feat, node_opcode, edge_index = (arrays[k] for k in GRAPH_KEYS)
    num_nodes = node_opcode.shape[0] if node_opcode.ndim else 0
    if node_opcode.ndim != 1 or node_feat.ndim != 2 or node_feat.shape[0] != num_nodes:
        raise ValueError(f"{source}: node_feat {node_feat.shape} and node_opcode "
                         f"{node_opcode.shape} do not describe the same nodes")
    if num_nodes == 0:
        raise ValueError(f"{source}: the graph has 0 nodes (node_opcode is empty)")
    if edge_index.ndim != 2 or edge_index.shape[1] != 2:
        raise ValueError(f"{source}: edge_index has shape {edge_index.shape}, expected (m, 2)")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"{source}: edge_index refers to nodes outside 0..{num_nodes - 1}")
    ids = arrays.get("node_config_ids")
    if ids is not None and ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{source}: node_config_ids refer to nodes outside 0..{num_nodes - 1}")
    for key in ("node_feat", "node_opcode"):
        check_values(key, arrays[key], source)
    check_layout_context(arrays, source)
    return num_nodes


def check_layout_context(arrays: Mapping[str, np.ndarray], source: str = "") -> None:
    """The optional per-configurable-node arrays (`LAYOUT_CONTEXT_KEYS`): both or neither,
    in a layout file, (nc, 18) each; roles in -1..len(LAYOUT_ROLES) − 1, layouts finite."""
    present = [k for k in LAYOUT_CONTEXT_KEYS if k in arrays]
    if not present:
        return
    if len(present) != len(LAYOUT_CONTEXT_KEYS) or "node_config_ids" not in arrays:
        missing = [k for k in LAYOUT_CONTEXT_KEYS + ("node_config_ids",) if k not in arrays]
        raise ValueError(f"{source}: has {', '.join(present)} but not {', '.join(missing)} "
                         f"(the configurable nodes' roles and XLA's layouts come together)")
    want = (arrays["node_config_ids"].reshape(-1).shape[0], LAYOUT_CONFIG_FEATURES)
    for key in present:
        if arrays[key].shape != want:
            raise ValueError(f"{source}: {key} has shape {arrays[key].shape}, expected "
                             f"(configurable nodes, {LAYOUT_CONFIG_FEATURES}) = {want}")
    roles = arrays["node_config_roles"]
    bad = (roles < -1) | (roles >= len(LAYOUT_ROLES))
    if bad.any():
        node, column = np.unravel_index(int(np.argmax(bad)), roles.shape)
        raise ValueError(f"{source}: node_config_roles is {int(roles[node, column])} at configurable "
                         f"node {node}, column {column}; roles are -1..{len(LAYOUT_ROLES) - 1} "
                         f"({', '.join(LAYOUT_ROLES)})")
    check_values("node_config_default", arrays["node_config_default"], source)


def check_config_arrays(kind: str, arrays: Mapping[str, np.ndarray], source: str = "") -> int:
    """Validate the per-config arrays of a `kind` file (dtypes, shapes, values, runtimes);
    the config count."""
    check_dtypes({k: a.dtype for k, a in arrays.items()}, source)
    first = CONFIG_KEYS[kind][0]
    features = arrays[first]
    num_configs = features.shape[0] if features.ndim else 0
    for key in RUNTIME_KEYS[kind]:
        if key in arrays and arrays[key].shape != (num_configs,):
            raise ValueError(f"{source}: {key} has shape {arrays[key].shape}, but {first}"
                             f" {features.shape} has {num_configs} configs")
    if kind == "tile":
        if features.ndim != 2:
            raise ValueError(f"{source}: config_feat has shape {features.shape}, "
                             "expected (configs, 24)")
    else:
        ids = arrays["node_config_ids"].reshape(-1)
        if features.ndim != 3 or features.shape[1] != ids.shape[0]:
            raise ValueError(f"{source}: node_config_feat {features.shape} is not "
                             f"(configs, configurable nodes {ids.shape[0]}, 18)")
    for key in CONFIG_KEYS[kind]:
        if key in arrays:
            check_values(key, arrays[key], source)
    check_runtime_pairs(kind, arrays, source)
    return num_configs


def check_arrays(arrays: Mapping[str, np.ndarray], source: str = "") -> str:
    """Validate one file's arrays (see module docstring); its kind."""
    kind = detect_kind(list(arrays), source)
    check_graph_arrays(arrays, source)
    check_config_arrays(kind, arrays, source)
    return kind


# ---------------------------------------------------------------------------- runtimes

def config_runtimes(kind: str, rows: Mapping[str, np.ndarray], source: str = "") -> np.ndarray:
    """The one runtime rule (module docstring): float64 runtimes of the config rows
    `rows` (per-config arrays of a `kind` file, all of the same length), NaN where
    unmeasured: tile runtime / normalizer, layout seconds. A negative or absurd runtime,
    or (tile) a runtime without a positive normalizer, is an error, never NaN."""
    if not rows:
        raise ValueError(f"{source or 'config_runtimes'}: no config rows given")
    out = np.full(len(next(iter(rows.values()))), np.nan)
    runtime = rows.get("config_runtime")
    if runtime is None:
        return out
    for key in RUNTIME_KEYS[kind]:
        if key in rows:
            check_values(key, rows[key], source or "config rows")
    check_runtime_pairs(kind, rows, source or "config rows")
    runtime = runtime.astype(np.float64)
    measured = runtime > 0
    if kind == "tile":
        normalizers = rows.get("config_runtime_normalizers")
        if normalizers is None:
            return out
        measured &= normalizers > 0
        out[measured] = runtime[measured] / normalizers[measured].astype(np.float64)
    else:
        out[measured] = runtime[measured] / NS_PER_SECOND
    return out


# ---------------------------------------------------------------------------- building files

def tile_arrays(graph: Mapping[str, np.ndarray], config_feat: Optional[np.ndarray] = None,
                config_runtime: Optional[np.ndarray] = None,
                config_runtime_normalizers: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """A tile file's arrays: a graph's (`GRAPH_KEYS`; tile files have no node_splits)
    and its runs' (without runs: zero configs)."""
    no_runs = np.zeros(0, np.int64)
    return {**{k: graph[k] for k in GRAPH_KEYS},
            "config_feat": (np.zeros((0, TILE_CONFIG_FEATURES), np.float32)
                            if config_feat is None else config_feat),
            "config_runtime": no_runs if config_runtime is None else config_runtime,
            "config_runtime_normalizers": (no_runs if config_runtime_normalizers is None
                                           else config_runtime_normalizers)}


def layout_arrays(graph: Mapping[str, np.ndarray], node_config_ids: Optional[np.ndarray] = None,
                  node_config_feat: Optional[np.ndarray] = None,
                  config_runtime: Optional[np.ndarray] = None,
                  context: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
    """A layout file's arrays: a graph's (`GRAPH_KEYS` and node_splits if it has them)
    and its runs'; `context`: the configurable nodes' `LAYOUT_CONTEXT_KEYS` arrays, if
    known. Without runs the file has no configs and no configurable nodes:
    which nodes the TPU compiler offers layout choices for is not in the HLO."""
    ids = np.zeros(0, np.int64) if node_config_ids is None else node_config_ids
    arrays = {**{k: graph[k] for k in GRAPH_KEYS}, "node_config_ids": ids,
              "node_config_feat": (np.zeros((0, ids.shape[0], LAYOUT_CONFIG_FEATURES), np.float32)
                                   if node_config_feat is None else node_config_feat),
              "config_runtime": np.zeros(0, np.int64) if config_runtime is None else config_runtime}
    if "node_splits" in graph:
        arrays["node_splits"] = graph["node_splits"]
    for key in LAYOUT_CONTEXT_KEYS if context else ():
        arrays[key] = np.asarray(context[key], DEFAULT_DTYPES[key])
    return arrays


def write_arrays(path: Union[str, Path], arrays: Mapping[str, np.ndarray], source: str = "") -> Path:
    """Validate `arrays` (`check_arrays`) and write them as one TpuGraphs npz file
    (compressed, as the dataset ships), atomically."""
    path = Path(path)
    check_arrays(arrays, source or str(path))
    with atomic_write(path, "wb") as out:
        np.savez_compressed(out, **arrays)
    return path


@dataclass
class NpzGraph:
    """One TpuGraphs file's arrays before they are written: what the converters make.

    `meta` is what a GraphSample of it records beyond the arrays (runs left out,
    unknown opcodes, …); `source` names where it came from, for messages."""
    name: str
    arrays: Dict[str, np.ndarray]
    source: str = ""
    meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return detect_kind(list(self.arrays), self.source or self.name)

    @property
    def num_nodes(self) -> int:
        return int(self.arrays["node_opcode"].shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.arrays["edge_index"].shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.arrays[CONFIG_KEYS[self.kind][0]].shape[0])

    def write(self, path: Union[str, Path]) -> Path:
        return write_arrays(path, self.arrays, source=self.source or self.name)

    def sample(self) -> GraphSample:
        return sample_from_arrays(self.arrays, name=self.name, source=self.source,
                                  meta=self.meta)


# ---------------------------------------------------------------------------- GraphSample

def sample_from_arrays(arrays: Mapping[str, np.ndarray], name: str, group: Optional[str] = None,
                       source: str = "", meta: Optional[Dict[str, Any]] = None) -> GraphSample:
    """TpuGraphs arrays (npz keys, see module docstring) → GraphSample."""
    source = source or name
    kind = check_arrays(arrays, source)
    rows = {k: arrays[k] for k in CONFIG_KEYS[kind] if k in arrays}
    runtimes = config_runtimes(kind, rows)
    num_configs = runtimes.shape[0]
    info: Dict[str, Any] = {"kind": kind, "dtypes": {k: a.dtype.str for k, a in arrays.items()}}
    absent = [k for k in RUNTIME_KEYS[kind] if k not in arrays]
    if absent:
        info["absent"] = absent
    # Arrays this format does not define are not carried over; say which.
    known = set(REQUIRED_KEYS[kind]) | set(CONFIG_KEYS[kind]) | {"node_splits"} | \
        (set(LAYOUT_CONTEXT_KEYS) if kind == "layout" else set())
    ignored = sorted(set(arrays) - known)
    if ignored:
        info["ignored_arrays"] = ignored
        log.warning("%s: arrays %s are not TpuGraphs %s data; not read", source, ignored, kind)
    meta = dict(meta or {})
    fields: Dict[str, Any] = {}
    if kind == "tile":
        fields["config_features"] = arrays["config_feat"]
        normalizers = arrays.get("config_runtime_normalizers")
        meta["runtime_normalizers_ns"] = (np.zeros(num_configs, np.int64) if normalizers is None
                                          else normalizers.astype(np.int64)).tolist()
    else:
        fields["node_config_ids"] = arrays["node_config_ids"].astype(np.int64).reshape(-1)
        fields["node_config_features"] = arrays["node_config_feat"]
    if "node_splits" in arrays:  # layout files have it; kept on tile files too if present
        meta["node_splits"] = arrays["node_splits"].reshape(-1).tolist()
        info["node_splits_shape"] = list(arrays["node_splits"].shape)
    for key in LAYOUT_CONTEXT_KEYS if kind == "layout" else ():
        if key in arrays:
            meta[key] = arrays[key].tolist()
    info["unmeasured_configs"] = int(np.isnan(runtimes).sum())
    meta["tpugraphs"] = info
    meta.setdefault("source", source)
    return GraphSample(edges=np.ascontiguousarray(arrays["edge_index"][:, ::-1]),
                       node_features=arrays["node_feat"], node_types=arrays["node_opcode"],
                       runtimes=runtimes, group=group or name, name=name, meta=meta, **fields)


def _cast(values: np.ndarray, dtype: str, key: str, name: str) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and values.size:
        limits = np.iinfo(dtype)
        if values.min() < limits.min or values.max() > limits.max:
            raise ValueError(f"{name}: {key} values {values.min()}..{values.max()} "
                             f"do not fit {dtype}")
    return np.ascontiguousarray(values, dtype=dtype)


def _runtime_ns(runtimes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Invert the runtime rule for a GraphSample's runtimes; exact for integer ns below ~2**52."""
    out = np.zeros(runtimes.shape[0], dtype=np.int64)
    measured = np.isfinite(runtimes)
    out[measured] = np.rint(runtimes[measured] * scale[measured]).astype(np.int64)
    return out


def _sample_config_arrays(sample: GraphSample, kind: str) -> Dict[str, np.ndarray]:
    """The per-config arrays (and node_config_ids) of a GraphSample of `kind`."""
    num_configs = sample.num_configs
    if kind == "tile":
        normalizers = np.asarray(sample.meta.extra.get("runtime_normalizers_ns", []), dtype=np.int64)
        if sample.config_features is None or normalizers.shape != (num_configs,):
            raise ValueError(f"{sample.name}: a tile sample needs config_features and "
                             f"meta.extra['runtime_normalizers_ns'] with one entry per config "
                             f"({num_configs})")
        if sample.config_features.ndim != 2 or sample.config_features.shape[0] != num_configs:
            raise ValueError(f"{sample.name}: config_features {sample.config_features.shape} "
                             f"is not (configs {num_configs}, features)")
        return {"config_feat": sample.config_features,
                "config_runtime": _runtime_ns(sample.runtimes, normalizers.astype(np.float64)),
                "config_runtime_normalizers": normalizers}
    if sample.node_config_ids is None or sample.node_config_features is None:
        raise ValueError(f"{sample.name}: a layout sample needs node_config_ids and "
                         "node_config_features")
    features = sample.node_config_features
    expected = (num_configs, sample.node_config_ids.shape[0])
    if features.ndim != 3 or features.shape[:2] != expected:
        raise ValueError(f"{sample.name}: node_config_features {features.shape} is not "
                         f"(configs, configurable nodes, features) = {expected + ('k',)}")
    return {"node_config_ids": sample.node_config_ids, "node_config_feat": features,
            "config_runtime": _runtime_ns(sample.runtimes, np.full(num_configs, NS_PER_SECOND))}


def arrays_from_sample(sample: GraphSample) -> Dict[str, np.ndarray]:
    """GraphSample → TpuGraphs arrays, the inverse of `sample_from_arrays`."""
    info = sample.meta.tpugraphs or {}
    kind = info.get("kind") or ("tile" if sample.config_features is not None else
                                "layout" if sample.node_config_ids is not None else None)
    if kind not in KINDS:
        raise ValueError(f"{sample.name}: not a TpuGraphs sample (no config_features, "
                         "no node_config_ids, no meta.tpugraphs['kind'])")
    dtypes = {**DEFAULT_DTYPES, **info.get("dtypes", {})}
    values: Dict[str, np.ndarray] = {"node_feat": sample.node_features,
                                     "node_opcode": sample.node_types,
                                     "edge_index": sample.edges[:, ::-1],
                                     **_sample_config_arrays(sample, kind)}
    splits = sample.meta.extra.get("node_splits")
    if splits is not None:
        shape = info.get("node_splits_shape") or [len(splits)]
        values["node_splits"] = np.reshape(np.asarray(splits, np.int64), shape)
    for key in LAYOUT_CONTEXT_KEYS if kind == "layout" else ():
        if key in sample.meta.extra:
            values[key] = np.asarray(sample.meta.extra[key]).reshape(-1, LAYOUT_CONFIG_FEATURES)
    for key in info.get("absent", []):
        if values[key].any():
            raise ValueError(f"{sample.name}: {key} was absent from the source but the sample "
                             "now has runtimes; drop meta.tpugraphs['absent'] to write them")
        del values[key]
    return {key: _cast(np.asarray(v), dtypes[key], key, sample.name) for key, v in values.items()}


def write_npz(path: Union[str, Path], sample: GraphSample) -> Path:
    """Write one GraphSample as a TpuGraphs npz file (`write_arrays`)."""
    return write_arrays(path, arrays_from_sample(sample), source=sample.name)


def read_npz(path: Union[str, Path], collection: Optional[str] = None,
             split: Optional[str] = None) -> GraphSample:
    """A whole TpuGraphs npz file (all configs) as one GraphSample."""
    return TpuGraphsFile(path, collection=collection, split=split).sample()


def is_tpugraphs_npz(path: Union[str, Path]) -> bool:
    """Whether `path` is a TpuGraphs npz (has node_feat), not another npz (a sample collection)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return "node_feat.npy" in archive.namelist()
    except _READ_ERRORS:
        return False


# ---------------------------------------------------------------------------- lazy file

# What a damaged npz makes zipfile and numpy raise (an unsupported compression method or
# zip version, a "password-protected" member, a header that does not tokenize, …).
_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error,
                NotImplementedError, RuntimeError, SyntaxError, tokenize.TokenError,
                struct.error, OverflowError, TypeError)
_SEEK_CHUNK_BYTES = 1 << 20


class TpuGraphsFile:
    """One npz file, opened lazily: headers on construction, arrays on request.

    The zip is reopened for every read, so thousands of these hold no file handles.
    """

    def __init__(self, path: Union[str, Path], collection: Optional[str] = None,
                 split: Optional[str] = None, cache_graph: bool = False) -> None:
        self.path = Path(path)
        self.name = self.path.name[:-4] if self.path.suffix.lower() == ".npz" else self.path.name
        self.collection, self.split = collection, split
        self.cache_graph = cache_graph
        self._graph_cache: Optional[Dict[str, np.ndarray]] = None
        # key → (shape, fortran_order, dtype, offset of the data in the member)
        self._headers: Dict[str, Tuple[Tuple[int, ...], bool, np.dtype, int]] = {}
        try:
            with zipfile.ZipFile(self.path) as archive:
                for info in archive.infolist():
                    if info.filename.endswith(".npy"):
                        with archive.open(info) as stream:
                            header = self._read_header(stream)
                        self._check_member_size(info.filename[:-4], header, info.file_size)
                        self._headers[info.filename[:-4]] = header
        except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
            raise ValueError(f"{self.path}: cannot open ({e.strerror or e})") from None
        except _READ_ERRORS as e:
            raise ValueError(f"{self.path}: not a readable npz file, truncated or corrupted "
                             f"({type(e).__name__}: {e})") from None
        self.kind = detect_kind(list(self._headers), str(self.path))
        check_dtypes({k: h[2] for k, h in self._headers.items()}, str(self.path))
        self._check_shapes()

    def _check_member_size(self, key: str, header: Tuple[Tuple[int, ...], bool, np.dtype, int],
                           member_size: int) -> None:
        """The npy header's shape and dtype account for the member's bytes exactly (a
        damaged header must not make a reader allocate or read past the data)."""
        shape, _, dtype, offset = header
        expected = offset + math.prod(shape) * dtype.itemsize
        if expected != member_size:
            raise ValueError(f"array {key}: its header says {shape} {dtype} ({expected} bytes "
                             f"with the header), the archive member holds {member_size} bytes")

    @staticmethod
    def _read_header(stream: Any) -> Tuple[Tuple[int, ...], bool, np.dtype, int]:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"npy format version {version} is not supported")
        if dtype.hasobject:
            raise ValueError("object arrays are not TpuGraphs data")
        return tuple(shape), fortran_order, dtype, stream.tell()

    def shape(self, key: str) -> Tuple[int, ...]:
        return self._headers[key][0]

    @property
    def keys(self) -> List[str]:
        return sorted(self._headers)

    @property
    def num_nodes(self) -> int:
        return self.shape("node_opcode")[0]

    @property
    def num_edges(self) -> int:
        return self.shape("edge_index")[0]

    @property
    def num_configs(self) -> int:
        return self.shape(CONFIG_KEYS[self.kind][0])[0]

    @property
    def config_keys(self) -> List[str]:
        """The per-config arrays this file holds (runtimes may be withheld)."""
        return [k for k in CONFIG_KEYS[self.kind] if k in self._headers]

    @property
    def num_config_nodes(self) -> int:
        return self.shape("node_config_ids")[0] if self.kind == "layout" else 0

    def _check_shapes(self) -> None:
        """Shapes agree (from the headers alone, before any data is read)."""
        shape, problem = self.shape, None
        first = CONFIG_KEYS[self.kind][0]
        if len(shape("node_opcode")) != 1 or len(shape("node_feat")) != 2 or \
                shape("node_feat")[0] != shape("node_opcode")[0]:
            problem = f"node_feat {shape('node_feat')} vs node_opcode {shape('node_opcode')}"
        elif len(shape("edge_index")) != 2 or shape("edge_index")[1] != 2:
            problem = f"edge_index {shape('edge_index')} is not (m, 2)"
        elif len(shape(first)) != (2 if self.kind == "tile" else 3):
            problem = f"{first} {shape(first)} has the wrong number of dimensions"
        elif self.kind == "layout" and shape(first)[1:2] != shape("node_config_ids")[:1]:
            problem = f"{first} {shape(first)} vs node_config_ids {shape('node_config_ids')}"
        elif self.kind == "layout" and any(shape(k)[:1] != shape("node_config_ids")[:1]
                                           for k in LAYOUT_CONTEXT_KEYS if k in self._headers):
            problem = (f"{', '.join(f'{k} {shape(k)}' for k in LAYOUT_CONTEXT_KEYS if k in self._headers)} "
                       f"vs node_config_ids {shape('node_config_ids')}")
        else:
            problem = next((f"{key} {shape(key)} vs {first} {shape(first)}"
                            for key in self.config_keys
                            if shape(key)[:1] != shape(first)[:1]), None)
        if problem:
            raise ValueError(f"{self.path}: inconsistent array shapes: {problem}")
        if shape("node_opcode")[0] == 0:
            raise ValueError(f"{self.path}: the graph has 0 nodes (node_opcode is empty)")

    def read(self, key: str, rows: Optional[Sequence[int]] = None) -> np.ndarray:
        """Array `key`, or only its rows `rows` (streamed: memory O(len(rows)))."""
        if key not in self._headers:
            raise KeyError(f"{self.path}: no array {key!r}; arrays: {self.keys}")
        shape, fortran_order, dtype, offset = self._headers[key]
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(key + ".npy") as stream:
                # Seeking forward in a member reads and drops the bytes in between, by
                # default 16 MiB at a time; 1 MiB keeps skipping over configs cheap in RAM.
                stream.MAX_SEEK_READ = _SEEK_CHUNK_BYTES
                if rows is None or fortran_order or not shape:
                    stream.seek(offset)
                    array = self._read_exact(stream, math.prod(shape) * dtype.itemsize, dtype,
                                             shape[::-1] if fortran_order else shape)
                    array = array.T if fortran_order else array
                    if rows is not None:
                        array = array[np.asarray(rows, dtype=np.int64)]
                else:
                    array = self._read_rows(stream, shape, dtype, offset, rows)
        except _READ_ERRORS as e:
            raise self._corrupted(key, e) from None
        check_values(key, array, str(self.path), rows)
        return array

    def _read_rows(self, stream: Any, shape: Tuple[int, ...], dtype: np.dtype, offset: int,
                   rows: Sequence[int]) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
            raise IndexError(f"{self.path}: rows outside 0..{shape[0] - 1}")
        row_bytes = math.prod(shape[1:]) * dtype.itemsize
        # Read each wanted row once, in file order: a deflated member can only be
        # streamed forward (seeking back restarts decompression from the top).
        unique_rows, where = np.unique(rows, return_inverse=True)
        picked = np.empty((unique_rows.size,) + shape[1:], dtype=dtype)
        for position, row in enumerate(unique_rows):
            stream.seek(offset + int(row) * row_bytes)
            picked[position] = self._read_exact(stream, row_bytes, dtype, shape[1:])
        return picked[where.reshape(-1)]

    @staticmethod
    def _read_exact(stream: Any, size: int, dtype: np.dtype, shape: Tuple[int, ...]) -> np.ndarray:
        buffer = bytearray(size)  # writable, unlike np.frombuffer over bytes
        view, filled = memoryview(buffer), 0
        while filled < size:
            count = stream.readinto(view[filled:])
            if not count:
                raise EOFError(f"data ends {size - filled} bytes early")
            filled += count
        return np.frombuffer(buffer, dtype=dtype).reshape(shape)

    def graph_arrays(self) -> Dict[str, np.ndarray]:
        """The arrays that do not depend on the config (node/edge data, ids, splits),
        validated (`check_graph_arrays`); edges as the file stores them (consumer,
        producer)."""
        if self._graph_cache is not None:
            return self._graph_cache
        keys = [k for k in self._headers if k not in CONFIG_KEYS[self.kind]]
        arrays = {k: self.read(k) for k in keys}
        check_graph_arrays(arrays, str(self.path))
        if self.cache_graph:
            self._graph_cache = arrays
        return arrays

    def config_arrays(self, config_indices: Optional[Sequence[int]] = None,
                      keys: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """The per-config arrays (`keys`, default all this file holds), for all configs
        or the given ones (in that order), their values checked (`check_values`,
        `check_runtime_pairs`: errors name the file, the array and the config)."""
        rows = {k: self.read(k, config_indices) for k in (keys or self.config_keys)}
        check_runtime_pairs(self.kind, self._with_normalizers(rows, config_indices),
                            str(self.path), config_indices)
        return rows

    def _with_normalizers(self, rows: Dict[str, np.ndarray],
                          config_indices: Optional[Sequence[int]]) -> Dict[str, np.ndarray]:
        """`rows`, plus the tile normalizers of the same configs when `rows` has runtimes
        but not them (a runtime is only valid with its normalizer)."""
        if self.kind == "tile" and "config_runtime" in rows and \
                "config_runtime_normalizers" not in rows and \
                "config_runtime_normalizers" in self._headers:
            return {**rows, "config_runtime_normalizers":
                    self.read("config_runtime_normalizers", config_indices)}
        return rows

    def iter_config_chunks(self, chunk: int, keys: Optional[Sequence[str]] = None
                           ) -> Iterator[Tuple[int, Dict[str, np.ndarray]]]:
        """All configs, in order, `chunk` at a time: (index of the first, {key: rows}).

        Each per-config array is streamed once from the start of its zip member, so
        memory is O(chunk) and the file is decompressed once (reading chunk after chunk
        with `read(key, rows)` would restart decompression for every chunk)."""
        keys = list(keys or self.config_keys)
        if int(chunk) < 1:
            raise ValueError(f"{self.path}: config chunks of {chunk} rows; give at least 1")
        chunk = int(chunk)
        # A runtime is only valid with its normalizer: stream them together.
        if self.kind == "tile" and "config_runtime" in keys and \
                "config_runtime_normalizers" not in keys and \
                "config_runtime_normalizers" in self._headers:
            keys.append("config_runtime_normalizers")
            wanted = keys[:-1]
        else:
            wanted = keys
        total = self.num_configs
        if total == 0:
            return
        with contextlib.ExitStack() as stack:
            streams = {key: self._open_stream(stack, key) for key in keys}
            for start in range(0, total, chunk):
                count = min(chunk, total - start)
                rows = {key: self._next_rows(streams[key], key, start, count) for key in keys}
                indices = np.arange(start, start + count)
                for key in keys:
                    check_values(key, rows[key], str(self.path), indices)
                check_runtime_pairs(self.kind, rows, str(self.path), indices)
                yield start, {k: rows[k] for k in wanted}

    def _corrupted(self, key: str, error: Exception) -> ValueError:
        return ValueError(f"{self.path}: array {key} is truncated or corrupted "
                          f"({type(error).__name__}: {error})")

    def _open_stream(self, stack: contextlib.ExitStack, key: str) -> Any:
        """Member `key` opened at its first row (kept open by `stack`), or the whole
        array for a Fortran-ordered one (never written so)."""
        _, fortran_order, _, offset = self._headers[key]
        if fortran_order:
            return self.read(key)
        try:
            archive = stack.enter_context(zipfile.ZipFile(self.path))
            stream = stack.enter_context(archive.open(key + ".npy"))
            stream.seek(offset)
        except _READ_ERRORS as e:
            raise self._corrupted(key, e) from None
        return stream

    def _next_rows(self, source: Any, key: str, start: int, count: int) -> np.ndarray:
        """Rows start..start+count of `key` from `_open_stream`'s result (read in order)."""
        if isinstance(source, np.ndarray):
            return source[start:start + count]
        shape, _, dtype, _ = self._headers[key]
        row_shape = tuple(shape[1:])
        try:
            return self._read_exact(source, count * math.prod(row_shape) * dtype.itemsize,
                                    dtype, (count,) + row_shape)
        except _READ_ERRORS as e:
            raise self._corrupted(key, e) from None

    def runtimes(self, config_rows: Mapping[str, np.ndarray]) -> np.ndarray:
        """Runtimes of config rows read from this file (`config_arrays`,
        `iter_config_chunks`), by the one runtime rule (`config_runtimes`): tile
        runtime / normalizer, layout seconds, NaN where unmeasured or withheld. Tile rows
        with runtimes but without the normalizers this file holds are an error (they
        would read as unmeasured), as are bad runtimes (`check_values`)."""
        if self.kind == "tile" and "config_runtime" in config_rows and \
                "config_runtime_normalizers" not in config_rows and \
                "config_runtime_normalizers" in self._headers:
            raise ValueError(f"{self.path}: tile runtimes need their config_runtime_normalizers "
                             "rows too (read both: config_arrays(rows))")
        return config_runtimes(self.kind, config_rows, source=str(self.path))

    def validate(self, chunk: int = 4096) -> "TpuGraphsFile":
        """Read every array of the file once (config rows `chunk` at a time, memory
        O(chunk)) and check every value: what a lazy reader would otherwise only meet
        when it reads the bad row. Raises ValueError naming the file, array and row."""
        self.graph_arrays()
        for _ in self.iter_config_chunks(chunk):
            pass
        return self

    def runtimes_ns(self) -> np.ndarray:
        """config_runtime (0 = unmeasured), cheap to read: choose configs by it before
        reading their features."""
        if "config_runtime" not in self._headers:
            return np.zeros(self.num_configs, np.int64)
        return self.read("config_runtime").astype(np.int64)

    def measured_configs(self) -> np.ndarray:
        """Indices of the configs with a runtime by the runtime rule (withheld or
        0-runtime configs have none)."""
        keys = [k for k in RUNTIME_KEYS[self.kind] if k in self._headers]
        if not keys:
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.isfinite(self.runtimes(self.config_arrays(keys=keys))))

    def sample(self, config_indices: Optional[Sequence[int]] = None) -> GraphSample:
        """GraphSample with all configs, or with the given ones in that order."""
        arrays = {**self.graph_arrays(), **self.config_arrays(config_indices)}
        meta: Dict[str, Any] = {"source": str(self.path)}
        if self.collection:
            meta["collection"] = self.collection
        if self.split:
            meta["split"] = self.split
        if config_indices is not None:
            meta["config_indices"] = [int(i) for i in config_indices]
        return sample_from_arrays(arrays, name=self.name, source=str(self.path), meta=meta)

    def sample_configs(self, max_configs: int, rng: Optional[np.random.Generator] = None
                       ) -> GraphSample:
        """GraphSample with a uniform random subset of at most `max_configs` configs."""
        if max_configs < 0:
            raise ValueError(f"{self.path}: at most {max_configs} configs; give a count ≥ 0")
        rng = rng if rng is not None else np.random.default_rng()
        chosen = (np.arange(self.num_configs) if self.num_configs <= max_configs
                  else np.sort(rng.choice(self.num_configs, size=max_configs, replace=False)))
        return self.sample(chosen)

    def __repr__(self) -> str:
        extra = f", {self.num_config_nodes} configurable nodes" if self.kind == "layout" else ""
        return (f"TpuGraphsFile({str(self.path)!r}: {self.kind}, {self.num_nodes} nodes, "
                f"{self.num_edges} edges, {self.num_configs} configs{extra})")


