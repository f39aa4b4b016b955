"""TpuGraphs (google-research-datasets/tpu_graphs): npz reader/writer and raw-proto reader.

Collections and folders
-----------------------
Five collections: `tile:xla`, `layout:xla:random`, `layout:xla:default`,
`layout:nlp:random`, `layout:nlp:default`, laid out as the dataset's tarballs unpack::

    <root>/npz/tile/xla/{train,valid,test}/*.npz
    <root>/npz/layout/{xla,nlp}/{random,default}/{train,valid,test}/*.npz

`list_files(root, collection, split)` lists one folder (`root` may also be the `npz`
folder itself); `iter_collection` yields its samples one file at a time.

npz arrays (one graph with n nodes, m edges, c configs per file)
----------------------------------------------------------------
both kinds:
    node_feat     (n, 140) float32   node features (extract/hlo.py NODE_FEATURE_NAMES)
    node_opcode   (n,) uint8|int32   TpuGraphs opcode ids (extract/hlo.py OPCODE_IDS)
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

Every integer dtype that occurs in the wild is read; a file's dtypes and shapes are
kept in `meta["tpugraphs"]`, so `write_npz(read_npz(p))` reproduces the arrays exactly.
New files get the dtypes TpuGraphs' own extractor emits (uint8 opcodes, int64 ids and
runtimes). Arrays other than these are not read; `meta["tpugraphs"]["ignored_arrays"]`
lists them and a warning is logged.

As a GraphSample
----------------
* edges: `edge_index` reversed, so edges run producer (v) → consumer (u), as for
  every GraphSample.
* tile runtimes: `config_runtime / config_runtime_normalizers`, dimensionless (runtime
  relative to the default tile config measured on the same machine), not seconds.
  TpuGraphs trains on this ratio by default (`normalize_runtimes=True`) and ranks tile
  configs by it; raw nanoseconds from different machines are not comparable. The
  normalizers are kept, exactly, in `meta["runtime_normalizers_ns"]`.
* layout runtimes: `config_runtime` in seconds (TpuGraphs uses no normalizer for layout:
  whole-program runtimes vary little between machines).
* Unmeasured configs — runtime 0, or runtime arrays left out as in a split whose
  runtimes are withheld — get NaN; writing restores the 0s or leaves the arrays out.
* `node_splits` is kept as the list `meta["node_splits"]`.
* group and name: the file name without `.npz` (each file is one graph, and its configs
  are what get ranked); `meta` also holds collection, split and source.

Files are read lazily: `TpuGraphsFile(path)` reads only the npy headers; graph arrays
and config rows are read on request, and `sample(config_indices)` / `sample_configs(k)`
hold only the requested configs in memory (a compressed member is streamed up to the
last requested row and the rest dropped as it passes), so a 40k-node graph with
thousands of configs never sits in RAM whole. A truncated or corrupted file raises
ValueError naming the file (and the array).

Raw protos
----------
The records TpuGraphs built its npz files from (tpu_graphs/proto/tuning.proto; the
fields read are in extract/proto/): a `TuningData` holds one `ModuleTuningData` per
kernel with tile-config runs (tile collection), a `ModuleTuningData` holds one whole
program with layout-config runs (layout collections). `read_raw(path)` turns either into
the same GraphSamples as the npz reader, through the same arrays, following TpuGraphs'
extractor (tuning_data_iterator.cc): runs flagged `error`, without a profile or config,
or (tile) with runtime ≤ 1 ns are left out and counted in `meta["skipped_runs"]`; the
tile normalizer is the runtime of the run marked `is_default`.

    python -m extract.tpugraphs convert RAW.pb --out DIR   # raw protos → npz
    python -m extract.tpugraphs info FILE.npz …            # kind, sizes of npz files
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from extract import hlo, proto
from extract.sample import GraphSample

log = logging.getLogger(__name__)

COLLECTIONS = ("tile:xla", "layout:xla:random", "layout:xla:default",
               "layout:nlp:random", "layout:nlp:default")
SPLITS = ("train", "valid", "test")

TILE_CONFIG_FEATURES = 24
LAYOUT_CONFIG_FEATURES = 18
# Layout config vectors: up to 3 tensors (output, input, kernel) × 6 dims, -1 = unset.
_LAYOUT_TENSORS, _LAYOUT_DIMS, _LAYOUT_PADDING = 3, 6, -1

GRAPH_KEYS = ("node_feat", "node_opcode", "edge_index")
# Per-config arrays, the config-feature array first (it fixes the number of configs).
CONFIG_KEYS = {"tile": ("config_feat", "config_runtime", "config_runtime_normalizers"),
               "layout": ("node_config_feat", "config_runtime")}
# Runtime arrays may be absent (a split whose runtimes are withheld): read as NaN.
RUNTIME_KEYS = {"tile": ("config_runtime", "config_runtime_normalizers"),
                "layout": ("config_runtime",)}
REQUIRED_KEYS = {"tile": GRAPH_KEYS + ("config_feat",),
                 "layout": GRAPH_KEYS + ("node_config_ids", "node_config_feat")}
# What tpu_graphs' graph_features extractor emits; used when a sample has no source dtypes.
DEFAULT_DTYPES = {"node_feat": "<f4", "node_opcode": "|u1", "edge_index": "<i8",
                  "config_feat": "<f4", "config_runtime": "<i8",
                  "config_runtime_normalizers": "<i8", "node_config_ids": "<i8",
                  "node_config_feat": "<f4", "node_splits": "<i8"}
_NS_PER_SECOND = 1e9


# ---------------------------------------------------------------------------- folders

def collection_dir(root: Union[str, Path], collection: str, split: str) -> Path:
    """The folder of one split of a collection (see module docstring)."""
    if collection not in COLLECTIONS:
        raise ValueError(f"unknown TpuGraphs collection {collection!r}; one of {COLLECTIONS}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    root = Path(root).expanduser()
    if (root / "npz").is_dir():
        root = root / "npz"
    return root.joinpath(*collection.split(":"), split)


def list_files(root: Union[str, Path], collection: str, split: str) -> List[Path]:
    """The npz files of one split of a collection, sorted by name."""
    folder = collection_dir(root, collection, split)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; expected TpuGraphs' layout "
                                f"<root>/npz/{'/'.join(collection.split(':'))}/{split}/*.npz")
    return sorted(folder.glob("*.npz"))


def iter_collection(root: Union[str, Path], collection: str, split: str,
                    max_configs: Optional[int] = None, seed: int = 0) -> Iterator[GraphSample]:
    """One GraphSample per file, read one file at a time; with `max_configs`, a uniform
    random subset of at most that many configs per file."""
    rng = np.random.default_rng(seed)
    for path in list_files(root, collection, split):
        file = TpuGraphsFile(path, collection=collection, split=split)
        yield file.sample() if max_configs is None else file.sample_configs(max_configs, rng)


# ---------------------------------------------------------------------------- arrays ↔ sample

def detect_kind(keys: Sequence[str], source: str = "") -> str:
    """'tile' or 'layout', from which arrays a file holds."""
    kinds = [k for k, marker in (("tile", "config_feat"), ("layout", "node_config_feat"))
             if marker in keys]
    if len(kinds) != 1:
        raise ValueError(f"{source}: neither a TpuGraphs tile file (config_feat) nor a "
                         f"layout file (node_config_feat); arrays: {sorted(keys)}")
    missing = [k for k in REQUIRED_KEYS[kinds[0]] if k not in keys]
    if missing:
        raise ValueError(f"{source}: TpuGraphs {kinds[0]} file lacks arrays {missing}")
    return kinds[0]


def _check_integers(arrays: Dict[str, np.ndarray], keys: Sequence[str], source: str) -> None:
    for key in keys:
        if key in arrays and arrays[key].dtype.kind not in "iu":
            raise ValueError(f"{source}: {key} has dtype {arrays[key].dtype}, expected integers")


def sample_from_arrays(arrays: Dict[str, np.ndarray], name: str, group: Optional[str] = None,
                       source: str = "", meta: Optional[Dict[str, Any]] = None) -> GraphSample:
    """TpuGraphs arrays (npz keys, see module docstring) → GraphSample."""
    source = source or name
    kind = detect_kind(list(arrays), source)
    _check_integers(arrays, ("node_opcode", "edge_index", "config_runtime",
                             "config_runtime_normalizers", "node_config_ids", "node_splits"),
                    source)
    node_feat, node_opcode, edge_index = (arrays[k] for k in GRAPH_KEYS)
    num_nodes = node_opcode.shape[0]
    if node_opcode.ndim != 1 or node_feat.ndim != 2 or node_feat.shape[0] != num_nodes:
        raise ValueError(f"{source}: node_feat {node_feat.shape} and node_opcode "
                         f"{node_opcode.shape} do not describe the same nodes")
    if edge_index.ndim != 2 or edge_index.shape[1] != 2:
        raise ValueError(f"{source}: edge_index has shape {edge_index.shape}, expected (m, 2)")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"{source}: edge_index refers to nodes outside 0..{num_nodes - 1}")
    config_features = arrays[CONFIG_KEYS[kind][0]]
    num_configs = config_features.shape[0] if config_features.ndim else 0
    absent = [k for k in RUNTIME_KEYS[kind] if k not in arrays]
    runtime_arrays = {k: (np.zeros(num_configs, np.int64) if k in absent
                          else arrays[k].astype(np.int64)) for k in RUNTIME_KEYS[kind]}
    for key, values in runtime_arrays.items():
        if values.shape != (num_configs,):
            raise ValueError(f"{source}: {key} has shape {values.shape}, but {CONFIG_KEYS[kind][0]}"
                             f" {config_features.shape} has {num_configs} configs")
    runtime_ns = runtime_arrays["config_runtime"]
    if (runtime_ns < 0).any():
        raise ValueError(f"{source}: config_runtime {int(np.argmax(runtime_ns < 0))} is negative")
    measured = runtime_ns > 0
    info: Dict[str, Any] = {"kind": kind, "dtypes": {k: a.dtype.str for k, a in arrays.items()}}
    if absent:
        info["absent"] = absent
    # Arrays this format does not define are not carried over; say which.
    known = set(REQUIRED_KEYS[kind]) | set(CONFIG_KEYS[kind]) | {"node_splits"}
    ignored = sorted(set(arrays) - known)
    if ignored:
        info["ignored_arrays"] = ignored
        log.warning("%s: arrays %s are not TpuGraphs %s data; not read", source, ignored, kind)
    meta = dict(meta or {})
    fields: Dict[str, Any] = {}
    if kind == "tile":
        config_feat = config_features
        normalizers = runtime_arrays["config_runtime_normalizers"]
        if config_feat.ndim != 2:
            raise ValueError(f"{source}: config_feat has shape {config_feat.shape}, "
                             "expected (configs, 24)")
        unnormalizable = measured & (normalizers <= 0)
        if unnormalizable.any():
            raise ValueError(f"{source}: config {int(np.argmax(unnormalizable))} has a runtime "
                             "but no positive config_runtime_normalizers entry")
        runtimes = np.full(num_configs, np.nan)
        runtimes[measured] = runtime_ns[measured] / normalizers[measured]
        fields["config_features"] = config_feat
        meta["runtime_normalizers_ns"] = normalizers.tolist()
    else:
        node_config_feat = arrays["node_config_feat"]
        node_config_ids = arrays["node_config_ids"].astype(np.int64).reshape(-1)
        if node_config_feat.ndim != 3 or node_config_feat.shape[1] != node_config_ids.shape[0]:
            raise ValueError(f"{source}: node_config_feat {node_config_feat.shape} is not "
                             f"(configs, configurable nodes {node_config_ids.shape[0]}, 18)")
        if ((node_config_ids < 0) | (node_config_ids >= num_nodes)).any():
            raise ValueError(f"{source}: node_config_ids refer to nodes outside 0..{num_nodes - 1}")
        runtimes = np.full(num_configs, np.nan)
        runtimes[measured] = runtime_ns[measured] / _NS_PER_SECOND
        fields["node_config_ids"] = node_config_ids
        fields["node_config_features"] = node_config_feat
    if "node_splits" in arrays:  # layout files have it; kept on tile files too if present
        meta["node_splits"] = arrays["node_splits"].reshape(-1).tolist()
        info["node_splits_shape"] = list(arrays["node_splits"].shape)
    info["unmeasured_configs"] = int((~measured).sum())
    meta["tpugraphs"] = info
    meta.setdefault("source", source)
    return GraphSample(edges=np.ascontiguousarray(edge_index[:, ::-1]), node_features=node_feat,
                       node_types=node_opcode, runtimes=runtimes, group=group or name,
                       name=name, meta=meta, **fields)


def _cast(values: np.ndarray, dtype: str, key: str, name: str) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and values.size:
        limits = np.iinfo(dtype)
        if values.min() < limits.min or values.max() > limits.max:
            raise ValueError(f"{name}: {key} values {values.min()}..{values.max()} "
                             f"do not fit {dtype}")
    return np.ascontiguousarray(values, dtype=dtype)


def _runtime_ns(runtimes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Invert sample_from_arrays' division; exact for integer ns below ~2**52."""
    out = np.zeros(runtimes.shape[0], dtype=np.int64)
    measured = np.isfinite(runtimes)
    out[measured] = np.rint(runtimes[measured] * scale[measured]).astype(np.int64)
    return out


def arrays_from_sample(sample: GraphSample) -> Dict[str, np.ndarray]:
    """GraphSample → TpuGraphs arrays, the inverse of `sample_from_arrays`."""
    info = sample.meta.get("tpugraphs", {})
    kind = info.get("kind") or ("tile" if sample.config_features is not None else
                                "layout" if sample.node_config_ids is not None else None)
    if kind not in ("tile", "layout"):
        raise ValueError(f"{sample.name}: not a TpuGraphs sample (no config_features, "
                         "no node_config_ids, no meta['tpugraphs']['kind'])")
    dtypes = {**DEFAULT_DTYPES, **info.get("dtypes", {})}
    num_configs = sample.num_configs
    values: Dict[str, np.ndarray] = {"node_feat": sample.node_features,
                                     "node_opcode": sample.node_types,
                                     "edge_index": sample.edges[:, ::-1]}
    if kind == "tile":
        normalizers = np.asarray(sample.meta.get("runtime_normalizers_ns", []), dtype=np.int64)
        if sample.config_features is None or normalizers.shape != (num_configs,):
            raise ValueError(f"{sample.name}: a tile sample needs config_features and "
                             f"meta['runtime_normalizers_ns'] with one entry per config "
                             f"({num_configs})")
        if sample.config_features.ndim != 2 or sample.config_features.shape[0] != num_configs:
            raise ValueError(f"{sample.name}: config_features {sample.config_features.shape} "
                             f"is not (configs {num_configs}, features)")
        values["config_feat"] = sample.config_features
        values["config_runtime"] = _runtime_ns(sample.runtimes, normalizers.astype(np.float64))
        values["config_runtime_normalizers"] = normalizers
    else:
        if sample.node_config_ids is None or sample.node_config_features is None:
            raise ValueError(f"{sample.name}: a layout sample needs node_config_ids and "
                             "node_config_features")
        features = sample.node_config_features
        expected = (num_configs, sample.node_config_ids.shape[0])
        if features.ndim != 3 or features.shape[:2] != expected:
            raise ValueError(f"{sample.name}: node_config_features {features.shape} is not "
                             f"(configs, configurable nodes, features) = {expected + ('k',)}")
        values["node_config_ids"] = sample.node_config_ids
        values["node_config_feat"] = features
        values["config_runtime"] = _runtime_ns(sample.runtimes,
                                               np.full(num_configs, _NS_PER_SECOND))
    if "node_splits" in sample.meta:
        shape = info.get("node_splits_shape") or [len(sample.meta["node_splits"])]
        values["node_splits"] = np.reshape(np.asarray(sample.meta["node_splits"], np.int64), shape)
    for key in info.get("absent", []):
        if values[key].any():
            raise ValueError(f"{sample.name}: {key} was absent from the source but the sample "
                             "now has runtimes; drop meta['tpugraphs']['absent'] to write them")
        del values[key]
    return {key: _cast(np.asarray(v), dtypes[key], key, sample.name) for key, v in values.items()}


def write_npz(path: Union[str, Path], sample: GraphSample) -> Path:
    """Write one sample as a TpuGraphs npz file (compressed, as the dataset ships)."""
    path = Path(path)
    arrays = arrays_from_sample(sample)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename, so an interrupted write leaves no torn file.
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as out:
            np.savez_compressed(out, **arrays)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def read_npz(path: Union[str, Path], collection: Optional[str] = None,
             split: Optional[str] = None) -> GraphSample:
    """A whole TpuGraphs npz file (all configs) as one GraphSample."""
    return TpuGraphsFile(path, collection=collection, split=split).sample()


# ---------------------------------------------------------------------------- lazy file

_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error)
_SEEK_CHUNK_BYTES = 1 << 20


class TpuGraphsFile:
    """One npz file, opened lazily: headers on construction, arrays on request.

    The zip is reopened for every read, so thousands of these hold no file handles.
    """

    def __init__(self, path: Union[str, Path], collection: Optional[str] = None,
                 split: Optional[str] = None, cache_graph: bool = False) -> None:
        self.path = Path(path)
        self.name = self.path.name.removesuffix(".npz")
        self.collection, self.split = collection, split
        self.cache_graph = cache_graph
        self._graph_cache: Optional[Dict[str, np.ndarray]] = None
        # key → (shape, fortran_order, dtype, offset of the data in the member)
        self._headers: Dict[str, Tuple[Tuple[int, ...], bool, np.dtype, int]] = {}
        try:
            with zipfile.ZipFile(self.path) as archive:
                for member in archive.namelist():
                    if member.endswith(".npy"):
                        with archive.open(member) as stream:
                            self._headers[member[:-4]] = self._read_header(stream)
        except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
            raise ValueError(f"{self.path}: cannot open ({e.strerror or e})") from None
        except _READ_ERRORS as e:
            raise ValueError(f"{self.path}: not a readable npz file, truncated or corrupted "
                             f"({type(e).__name__}: {e})") from None
        self.kind = detect_kind(list(self._headers), str(self.path))
        self._check_shapes()

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
        else:
            problem = next((f"{key} {shape(key)} vs {first} {shape(first)}"
                            for key in self.config_keys
                            if shape(key)[:1] != shape(first)[:1]), None)
        if problem:
            raise ValueError(f"{self.path}: inconsistent array shapes: {problem}")

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
                    return array if rows is None else array[np.asarray(rows, dtype=np.int64)]
                return self._read_rows(stream, shape, dtype, offset, rows)
        except _READ_ERRORS as e:
            raise ValueError(f"{self.path}: array {key} is truncated or corrupted "
                             f"({type(e).__name__}: {e})") from None

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
        """The arrays that do not depend on the config (node/edge data, ids, splits)."""
        if self._graph_cache is not None:
            return self._graph_cache
        keys = [k for k in self._headers if k not in CONFIG_KEYS[self.kind]]
        arrays = {k: self.read(k) for k in keys}
        if self.cache_graph:
            self._graph_cache = arrays
        return arrays

    def config_arrays(self, config_indices: Optional[Sequence[int]] = None
                      ) -> Dict[str, np.ndarray]:
        """The per-config arrays, for all configs or the given ones (in that order)."""
        return {k: self.read(k, config_indices) for k in self.config_keys}

    def runtimes_ns(self) -> np.ndarray:
        """config_runtime (0 = unmeasured), cheap to read: choose configs by it before
        reading their features."""
        if "config_runtime" not in self._headers:
            return np.zeros(self.num_configs, np.int64)
        return self.read("config_runtime").astype(np.int64)

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
        rng = rng if rng is not None else np.random.default_rng()
        chosen = (np.arange(self.num_configs) if self.num_configs <= max_configs
                  else np.sort(rng.choice(self.num_configs, size=max_configs, replace=False)))
        return self.sample(chosen)

    def __repr__(self) -> str:
        extra = f", {self.num_config_nodes} configurable nodes" if self.kind == "layout" else ""
        return (f"TpuGraphsFile({str(self.path)!r}: {self.kind}, {self.num_nodes} nodes, "
                f"{self.num_edges} edges, {self.num_configs} configs{extra})")


# ---------------------------------------------------------------------------- raw protos

def _bounds_features(values: Sequence[int]) -> List[int]:
    # TpuGraphs' FeaturizeTileSizeConfig: 6 values, sum, product (0 for an empty list).
    head = list(values[:6]) + [0] * (6 - min(len(values), 6))
    return head + [sum(values), math.prod(values) if len(values) else 0]


def tile_config_features(tile_size_config: Any) -> List[int]:
    """The 24 tile config features of a `TileSizeConfig` (README "Tile Config Features")."""
    return (_bounds_features(tile_size_config.kernel_bounds)
            + _bounds_features(tile_size_config.output_bounds)
            + _bounds_features(tile_size_config.input_bounds))


def layout_config_features(layout_config: Any, where: str) -> np.ndarray:
    """(nodes, 18) layout config features of a `LayoutConfig` (README "Layout Config Features")."""
    out = np.full((len(layout_config.nodes), _LAYOUT_TENSORS * _LAYOUT_DIMS), _LAYOUT_PADDING,
                  dtype=np.float32)
    for slot, node in enumerate(layout_config.nodes):
        if len(node.tensors) > _LAYOUT_TENSORS:
            raise ValueError(f"{where}: config slot {slot} has {len(node.tensors)} tensor "
                             f"layouts; TpuGraphs has room for {_LAYOUT_TENSORS}")
        for tensor_index, tensor in enumerate(node.tensors):
            dims = list(tensor.dims[:_LAYOUT_DIMS])
            start = tensor_index * _LAYOUT_DIMS
            out[slot, start:start + len(dims)] = dims
    return out


def _graph_meta(graph: hlo.HloGraph) -> Dict[str, Any]:
    return {"unknown_opcodes": dict(graph.unknown_opcodes)} if graph.unknown_opcodes else {}


def tile_sample_from_graph(graph: hlo.HloGraph, name: str, group: str, source: str,
                           config_feat: Optional[np.ndarray] = None,
                           config_runtime: Optional[np.ndarray] = None,
                           config_runtime_normalizers: Optional[np.ndarray] = None,
                           meta: Optional[Dict[str, Any]] = None) -> GraphSample:
    """A featurized kernel (extract/hlo.py) plus its tile runs → GraphSample (without
    runs: zero configs)."""
    no_runs = np.zeros(0, np.int64)
    arrays = {**graph.arrays(),
              "config_feat": (np.zeros((0, TILE_CONFIG_FEATURES), np.float32)
                              if config_feat is None else config_feat),
              "config_runtime": no_runs if config_runtime is None else config_runtime,
              "config_runtime_normalizers": (no_runs if config_runtime_normalizers is None
                                             else config_runtime_normalizers)}
    del arrays["node_splits"]  # tile files do not have it
    return sample_from_arrays(arrays, name=name, group=group, source=source,
                              meta={"kernel": graph.name, **_graph_meta(graph), **(meta or {})})


def layout_sample_from_graph(graph: hlo.HloGraph, source: str, name: Optional[str] = None,
                             node_config_ids: Optional[np.ndarray] = None,
                             node_config_feat: Optional[np.ndarray] = None,
                             config_runtime: Optional[np.ndarray] = None,
                             meta: Optional[Dict[str, Any]] = None) -> GraphSample:
    """A featurized module (extract/hlo.py) plus its layout runs → GraphSample.

    Without runs the sample has no configs and no configurable nodes: which nodes the
    TPU compiler offers layout choices for is not in the HLO.
    """
    ids = np.zeros(0, np.int64) if node_config_ids is None else node_config_ids
    arrays = {**graph.arrays(), "node_config_ids": ids,
              "node_config_feat": (np.zeros((0, ids.shape[0], LAYOUT_CONFIG_FEATURES), np.float32)
                                   if node_config_feat is None else node_config_feat),
              "config_runtime": np.zeros(0, np.int64) if config_runtime is None else config_runtime}
    name = name or graph.name
    return sample_from_arrays(arrays, name=name, group=name, source=source,
                              meta={**_graph_meta(graph), **(meta or {})})


def _runs_to_keep(runs: Sequence[Any], has_config: Any, min_runtime_ns: int
                  ) -> Tuple[List[int], Dict[str, int]]:
    """Indices of usable runs and counts of the left-out ones, by reason."""
    kept, skipped = [], {"error": 0, "no_profile": 0, "no_config": 0, "no_runtime": 0}
    for index, run in enumerate(runs):
        reason = ("error" if run.error else "no_profile" if not run.HasField("profile")
                  else "no_config" if not has_config(run)
                  else "no_runtime" if run.profile.compute_time_ns < min_runtime_ns else None)
        if reason:
            skipped[reason] += 1
        else:
            kept.append(index)
    return kept, {k: v for k, v in skipped.items() if v}


def _default_index(runs: Sequence[Any], kept: Sequence[int]) -> Optional[int]:
    return next((position for position, index in enumerate(kept) if runs[index].is_default), None)


def tile_samples_from_tuning_data(tuning_data: Any, source: str) -> List[GraphSample]:
    """A `TuningData` (one kernel per `ModuleTuningData`) → one tile GraphSample per
    kernel, named `<file stem>.<kernel>` (kernel names repeat across programs)."""
    stem = Path(source).name.removesuffix(".pb")
    samples = []
    for module_index, record in enumerate(tuning_data.modules):
        where = f"{source}: modules[{module_index}] ({record.module.name or 'unnamed'})"
        graph = hlo.featurize_module(record.module, source=where)
        runs = record.runs
        # TpuGraphs drops runs that failed or report ≤ 1 ns (tuning_data_iterator.cc).
        kept, skipped = _runs_to_keep(
            runs, lambda run: run.op_config.HasField("tile_size_config"), min_runtime_ns=2)
        default = _default_index(runs, kept)
        if default is None:
            raise ValueError(f"{where}: no usable run is marked is_default, so runtimes "
                             "cannot be normalized")
        runtime = np.array([runs[i].profile.compute_time_ns for i in kept], dtype=np.int64)
        config_feat = np.array([tile_config_features(runs[i].op_config.tile_size_config)
                                for i in kept], dtype=np.float32).reshape(-1, TILE_CONFIG_FEATURES)
        samples.append(tile_sample_from_graph(
            graph, name=f"{stem}.{graph.name}", group=f"{stem}.{graph.name}", source=source,
            config_feat=config_feat,
            config_runtime=runtime,
            config_runtime_normalizers=np.full_like(runtime, runtime[default]),
            meta={"fingerprint": int(record.fingerprint), "raw_runs": len(runs),
                  "skipped_runs": skipped, "default_config_index": default}))
    return samples


def layout_sample_from_module_tuning_data(record: Any, source: str) -> GraphSample:
    """A `ModuleTuningData` with layout runs → one layout GraphSample, named after the
    file (TpuGraphs names each layout npz after its pb)."""
    graph = hlo.featurize_module(record.module, source=source)
    node_config_ids = np.array(record.config_index_to_node, dtype=np.int64)
    if node_config_ids.size and node_config_ids.max() >= graph.num_nodes:
        raise ValueError(f"{source}: config_index_to_node names node {node_config_ids.max()}, "
                         f"but the module has {graph.num_nodes} instructions")
    runs = record.runs
    kept, skipped = _runs_to_keep(
        runs, lambda run: run.module_config.HasField("layout_config"), min_runtime_ns=1)
    features = []
    for index in kept:
        config = layout_config_features(runs[index].module_config.layout_config,
                                        where=f"{source}: runs[{index}]")
        if config.shape[0] != node_config_ids.shape[0]:
            raise ValueError(f"{source}: runs[{index}] configures {config.shape[0]} nodes, "
                             f"config_index_to_node lists {node_config_ids.shape[0]}")
        features.append(config)
    node_config_feat = (np.stack(features) if features else
                        np.zeros((0, node_config_ids.shape[0], LAYOUT_CONFIG_FEATURES), np.float32))
    runtime = np.array([runs[i].profile.compute_time_ns for i in kept], dtype=np.int64)
    return layout_sample_from_graph(
        graph, source=source, name=Path(source).name.removesuffix(".pb"),
        node_config_ids=node_config_ids, node_config_feat=node_config_feat,
        config_runtime=runtime,
        meta={"fingerprint": int(record.fingerprint), "raw_runs": len(runs),
              "skipped_runs": skipped, "default_config_index": _default_index(runs, kept)})


def _record_problem(record: Any, config_field: str) -> Optional[str]:
    """Why a parsed ModuleTuningData does not look like one, or None."""
    problem = hlo.module_problem(record.module)
    if problem is None and record.runs and not any(r.HasField(config_field) for r in record.runs):
        problem = f"no run has a {config_field}"
    return problem


def read_raw(path: Union[str, Path]) -> List[GraphSample]:
    """Raw TpuGraphs protos → GraphSamples: a `TuningData` file gives one tile sample per
    kernel, a `ModuleTuningData` file one layout sample. Both messages start with a
    length-delimited field 1, so each reading is tried and the consistent one is used;
    otherwise ValueError naming the file and why neither fits."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{source}: cannot read ({e.strerror or e})") from None
    reasons = []
    try:
        tuning = proto.parse(proto.TuningData, data, name=source)
    except ValueError as e:
        reasons.append("as TuningData: " + str(e).removeprefix(source + ": "))
    else:
        problems = [f"modules[{i}]: {problem}" for i, m in enumerate(tuning.modules)
                    if (problem := _record_problem(m, "op_config"))]
        if tuning.modules and not problems:
            return tile_samples_from_tuning_data(tuning, source)
        reasons.append("as TuningData: " + (problems[0] if problems else "no modules"))
    try:
        record = proto.parse(proto.ModuleTuningData, data, name=source)
    except ValueError as e:
        reasons.append("as ModuleTuningData: " + str(e).removeprefix(source + ": "))
    else:
        problem = _record_problem(record, "module_config")
        if problem is None:
            return [layout_sample_from_module_tuning_data(record, source)]
        reasons.append("as ModuleTuningData: " + problem)
    raise ValueError(f"{source}: not a TpuGraphs TuningData or ModuleTuningData file "
                     f"({'; '.join(reasons)})")


def convert_raw(path: Union[str, Path], out_dir: Union[str, Path]) -> List[Path]:
    """Write the npz files of a raw proto file as `<out_dir>/<sample name>.npz`: one per
    kernel (`<stem>.<kernel>.npz`) for a TuningData, `<stem>.npz` for a ModuleTuningData."""
    return [write_npz(Path(out_dir) / f"{s.name}.npz", s) for s in read_raw(path)]


# ---------------------------------------------------------------------------- CLI

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extract.tpugraphs",
                                     description="TpuGraphs npz files and raw protos")
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="raw TuningData/ModuleTuningData → npz")
    convert.add_argument("files", nargs="+", type=Path)
    convert.add_argument("--out", type=Path, required=True)
    info = commands.add_parser("info", help="kind and sizes of npz files")
    info.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    failed = 0
    for path in args.files:
        try:
            if args.command == "info":
                print(repr(TpuGraphsFile(path)))
                continue
            for sample in read_raw(path):
                target = write_npz(args.out / f"{sample.name}.npz", sample)  # as convert_raw
                notes = [f"{sample.num_nodes} nodes", f"{len(sample.edges)} edges",
                         f"{sample.num_configs} configs"]
                if sample.meta.get("skipped_runs"):
                    notes.append(f"runs left out: {sample.meta['skipped_runs']}")
                if sample.meta.get("unknown_opcodes"):
                    notes.append(f"UNK opcodes: {sample.meta['unknown_opcodes']}")
                print(f"{path} → {target} ({', '.join(notes)})")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
