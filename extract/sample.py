"""The one sample type every extractor produces and the simulator consumes.

A `GraphSample` is a program graph (A as an edge list, F, G) with the measured
runtime of one or more configurations of it:

* TVM: each config lowers to its own TIR, so a sample is one graph and one runtime
  (`runtimes.shape == (1,)`); `group` is the workload, and the configs of a group are
  what a ranking metric compares.
* XLA/TpuGraphs: one graph has many configs; tile configs are a per-config vector
  (`config_features`), layout configs are per-node vectors on the configurable nodes
  (`node_config_ids`, `node_config_features`).

Edges run src → dst: parent → child for TIR ASTs, producer → consumer for HLO. The
model adds reverse edges and self-loops itself (see simulator), so extractors do not.

Collections are stored as one compressed npz: the per-sample arrays concatenated, with
offsets, so that thousands of small graphs load in one read. A collection's `info`
names the extractor that made its samples (`ExtractorInfo`: keys `extractor`,
`vocabulary`, `feature_names`), so that a model trained on it takes its node
vocabulary and feature names from the data, not from whatever extractor is installed.

What a sample records beyond its arrays is a `SampleMeta`: typed fields for the facts
other modules read (the extractor, where the sample was read from, an AutoTVM config,
its task's networks and operator kind), and `extra` for what only the source that wrote
it reads. On disk it is one flat JSON object per sample (`SampleMeta.as_dict`), the form
collections have always had, so files written earlier load unchanged.
"""
from __future__ import annotations

import dataclasses
import json
import zipfile
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .fileio import atomic_write


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_names(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


# what each typed field of SampleMeta holds, as (check, description)
_META_TYPES = {"str": (lambda v: isinstance(v, str), "a string"), "int": (_is_int, "an integer"),
               "number": (_is_number, "a number"), "names": (_is_names, "a list of strings"),
               "dict": (lambda v: isinstance(v, dict), "a JSON object")}


def _typed(kind: str) -> Any:
    return field(default=None, metadata={"type": kind})


@dataclass(frozen=True, repr=False)
class SampleMeta:
    """What a `GraphSample` records beyond its arrays. Every typed field is optional
    (None: the source does not say); `as_dict` is the JSON object kept on disk, with
    the typed fields under their own names and `extra`'s keys beside them."""

    extractor: Optional[str] = _typed("str")
    """The version of the extractor that made the graph, e.g. "tir-ast-v2"
    (`extract.sample.EXTRACTORS`): a collection's vocabulary and feature names."""
    target: Optional[str] = _typed("str")
    """The target kind the program was featurized for, e.g. "llvm"."""
    source: Optional[str] = _typed("str")
    """The file (or label) the sample was read from, when no database and line say it."""
    format: Optional[str] = _typed("str")
    """The record format the sample came from: "metaschedule" for a tuning-database
    record (None: an AutoTVM log, or no record)."""
    database: Optional[str] = _typed("str")
    """The MetaSchedule database (its folder, or the name it was read under)."""
    line: Optional[int] = _typed("int")
    """The record's line in the database's record file (1-based), or its index."""
    template: Optional[str] = _typed("str")
    """The AutoTVM template of the config, e.g. "conv2d_NCHWc.x86"."""
    workload: Optional[str] = _typed("str")
    """The template's workload key (`extract.tir.workloads`), e.g. "conv2d_1x3x224x224_64x7x7_s2_p3"."""
    index: Optional[int] = _typed("int")
    """The config's index in the template's space: with `template` and the group, what
    makes two samples the same measurement point (`datasets.sample_key`)."""
    config: Optional[Dict[str, Any]] = _typed("dict")
    """The config's knob values by knob name (AutoTVM's `ConfigEntity`, as JSON)."""
    networks: Optional[Tuple[str, ...]] = _typed("names")
    """The networks whose task the sample's workload is (sorted), from a networks
    dataset's task table (`datasets.networks.annotate`): what leave-network-out splits."""
    kind: Optional[str] = _typed("str")
    """The operator kind of the sample's task, e.g. "dense" (`datasets.networks.annotate`)."""
    weight: Optional[float] = _typed("number")
    """How many times the networks call the sample's task (`datasets.networks.annotate`)."""
    tpugraphs: Optional[Dict[str, Any]] = _typed("dict")
    """The TpuGraphs npz layout of an HLO graph's sample (kind, dtypes, shapes;
    `extract.xla.npz_format`); set on every HLO sample, absent on TIR ones."""
    extra: Dict[str, Any] = field(default_factory=dict)
    """JSON-able facts that only the source that wrote them reads (counts of runs left
    out, MetaSchedule's mod_hash, a caller's own keys, …), by name; never a typed
    field's name."""

    def __post_init__(self) -> None:
        """Check each field's type (a ValueError naming the field), and keep `networks`
        as a tuple."""
        for f in _TYPED_FIELDS:
            value = getattr(self, f.name)
            if value is None:
                continue
            check, what = _META_TYPES[f.metadata["type"]]
            if not check(value):
                raise ValueError(f"meta field {f.name!r} must be {what}, not {value!r}")
        if self.networks is not None:
            object.__setattr__(self, "networks", tuple(self.networks))
        if not isinstance(self.extra, dict):
            raise ValueError(f"meta extra must be a JSON object, not {self.extra!r}")
        clash = sorted(set(self.extra) & _TYPED_NAMES)
        if clash:
            raise ValueError(f"meta extra holds {clash}, typed fields of SampleMeta: set them as fields")

    def __repr__(self) -> str:
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in _TYPED_FIELDS if getattr(self, f.name) is not None]
        return f"SampleMeta({', '.join(shown + ([f'extra={self.extra!r}'] if self.extra else []))})"

    def as_dict(self) -> Dict[str, Any]:
        """The JSON object of this meta: the typed fields that are set, and `extra`."""
        out: Dict[str, Any] = {}
        for f in _TYPED_FIELDS:
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if f.name == "networks" else value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SampleMeta":
        """A meta of its JSON object (`as_dict`'s form, which is also the free dict of
        earlier versions): the typed fields by name, every other key into `extra`; a
        typed field of the wrong type is a ValueError naming it."""
        if not isinstance(data, Mapping):
            raise ValueError(f"meta must be a JSON object, not {data!r}")
        typed = {k: v for k, v in data.items() if k in _TYPED_NAMES}
        return cls(**typed, extra={k: v for k, v in data.items() if k not in _TYPED_NAMES})

    @classmethod
    def of(cls, meta: "MetaLike") -> "SampleMeta":
        """`meta` itself, a dict read by `from_dict`, or an empty meta for None."""
        if isinstance(meta, SampleMeta):
            return meta
        return cls() if meta is None else cls.from_dict(meta)

    def with_extra(self, **extra: Any) -> "SampleMeta":
        """This meta with `extra` keys added (or replaced)."""
        return dataclasses.replace(self, extra={**self.extra, **extra})


_TYPED_FIELDS = tuple(f for f in fields(SampleMeta) if "type" in f.metadata)
_TYPED_NAMES = frozenset(f.name for f in _TYPED_FIELDS)
MetaLike = Union[SampleMeta, Mapping[str, Any], None]  # what `SampleMeta.of` takes


@dataclass
class GraphSample:
    edges: np.ndarray          # (m, 2) int64, [src, dst]
    node_features: np.ndarray  # (n, d) float32: F
    node_types: np.ndarray     # (n,) int64: G, ids of a versioned vocabulary
    runtimes: np.ndarray       # (c,) float64, one per config: y — seconds (mean of repeats);
                               # TpuGraphs tile: runtime / its normaliser (a ratio)
    group: str                 # configs of one group are ranked against each other
    name: str = ""             # unique within a collection, e.g. "C2/1571"
    runtime_std: Optional[np.ndarray] = None           # (c,) spread of the repeats
    config_features: Optional[np.ndarray] = None       # (c, k) per-config vector (tile)
    node_config_ids: Optional[np.ndarray] = None       # (nc,) configurable node ids (layout)
    node_config_features: Optional[np.ndarray] = None  # (c, nc, k) per-node config vectors
    # fixed-width per-config vectors for the non-graph baselines, by feature-set name,
    # e.g. {"curve": (c, k), "per_store": (c, 164)}
    vectors: Dict[str, np.ndarray] = field(default_factory=dict)
    # what else the sample records (a dict is read as `SampleMeta.from_dict` reads one)
    meta: SampleMeta = field(default_factory=SampleMeta)

    def __post_init__(self) -> None:
        """Check the sample: a ValueError naming it (and the array) for a graph of no
        nodes, an edge outside the graph, a negative node type, a non-finite feature or
        vector, a runtime that is infinite or not positive (NaN: unmeasured), or a
        negative or infinite spread, rather than a shape error or NaN weights later."""
        label = self.name or self.group or "<unnamed sample>"
        try:
            self.meta = SampleMeta.of(self.meta)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{label}: {e}") from None
        self.edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        with np.errstate(over="ignore"):  # beyond float32: inf, refused below
            self.node_features = np.asarray(self.node_features, dtype=np.float32)
        self.node_types = np.asarray(self.node_types, dtype=np.int64)
        self.runtimes = np.atleast_1d(np.asarray(self.runtimes, dtype=np.float64))
        n = self.num_nodes
        if self.node_types.ndim != 1 or n == 0:
            raise ValueError(f"{label}: a graph of no nodes (node_types shape {self.node_types.shape})")
        if self.node_features.ndim != 2 or self.node_features.shape[0] != n:
            raise ValueError(f"{label}: node_features shape {self.node_features.shape} "
                             f"does not match {n} node types")
        if self.edges.size and (self.edges.min() < 0 or self.edges.max() >= n):
            raise ValueError(f"{label}: edge endpoint outside 0..{n - 1}")
        if self.node_types.min() < 0:
            raise ValueError(f"{label}: negative node type {int(self.node_types.min())}")
        _check_finite(label, "node_features", self.node_features)
        measured = self.runtimes[~np.isnan(self.runtimes)]
        if measured.size and not (np.isfinite(measured).all() and (measured > 0).all()):
            bad = float(measured[~(np.isfinite(measured) & (measured > 0))][0])
            raise ValueError(f"{label}: runtime {bad!r} is not a positive finite number (NaN: unmeasured)")
        if self.runtime_std is not None:
            self.runtime_std = np.atleast_1d(np.asarray(self.runtime_std, dtype=np.float64))
            spread = self.runtime_std[~np.isnan(self.runtime_std)]
            if spread.size and not (np.isfinite(spread).all() and (spread >= 0).all()):
                raise ValueError(f"{label}: runtime_std holds a negative or infinite value")
        for key in ("config_features", "node_config_features"):
            value = getattr(self, key)
            if value is not None:
                _check_finite(label, key, np.asarray(value))
        for key, value in self.vectors.items():
            _check_finite(label, f"vectors[{key!r}]", np.asarray(value))

    @property
    def num_nodes(self) -> int:
        return int(self.node_types.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.runtimes.shape[0])


def _check_finite(label: str, what: str, array: np.ndarray) -> None:
    if array.dtype.kind in "fc" and not np.isfinite(array).all():
        where = np.argwhere(~np.isfinite(array))
        raise ValueError(f"{label}: {what} holds {len(where)} non-finite values "
                         f"(first {float(array[tuple(where[0])].real)!r} at {tuple(int(i) for i in where[0])})")


_OPTIONAL = ("runtime_std", "config_features", "node_config_ids", "node_config_features")


@dataclass(frozen=True)
class ExtractorInfo:
    """What a collection's samples mean: the extractor (and its version) that made them,
    the node-type vocabulary (`node_types` index it) and the names of the feature columns."""

    extractor: str
    vocabulary: Tuple[str, ...]
    feature_names: Tuple[str, ...]

    def as_info(self) -> Dict[str, Any]:
        return {"extractor": self.extractor, "vocabulary": list(self.vocabulary),
                "feature_names": list(self.feature_names)}

    @classmethod
    def from_info(cls, info: Dict[str, Any]) -> Optional["ExtractorInfo"]:
        """The extractor a collection's info names, if it names one completely."""
        if not all(info.get(k) for k in ("extractor", "vocabulary", "feature_names")):
            return None
        return cls(str(info["extractor"]), tuple(info["vocabulary"]), tuple(info["feature_names"]))


EXTRACTORS: Dict[str, ExtractorInfo] = {}  # by version; extractors register themselves


def register_extractor(extractor: ExtractorInfo) -> ExtractorInfo:
    if EXTRACTORS.get(extractor.extractor, extractor) != extractor:
        raise ValueError(f"extractor {extractor.extractor!r} registered twice, differently")
    EXTRACTORS[extractor.extractor] = extractor
    return extractor


def _extractor_of(samples: Sequence[GraphSample]) -> Optional[ExtractorInfo]:
    """The registered extractor named by the samples' `meta.extractor`, if they agree."""
    versions = {s.meta.extractor for s in samples}
    if len(versions) > 1:
        raise ValueError(f"samples of extractors {sorted(map(str, versions))} in one collection")
    return EXTRACTORS.get(versions.pop()) if versions else None


def collection_arrays(samples: Sequence[GraphSample], path: str = "") -> Dict[str, np.ndarray]:
    """The per-sample arrays concatenated, with offsets (the npz's arrays but the header)."""
    arrays: Dict[str, np.ndarray] = {}
    for key in ("edges", "node_features", "node_types", "runtimes") + _OPTIONAL:
        parts = [getattr(s, key) for s in samples]
        if key == "node_config_features":  # (c, nc, k) with nc varying: store (c·nc, k) rows
            parts = [p if p is None else p.reshape(-1, p.shape[-1]) for p in parts]
        present = [p is not None for p in parts]
        if not any(present):
            continue
        if not all(present):
            raise ValueError(f"{path}: {key} is set on some samples and not on others")
        arrays[key] = np.concatenate(parts, axis=0)
        arrays[key + "_offsets"] = np.cumsum([0] + [len(p) for p in parts])
    vector_names = sorted(samples[0].vectors)
    for name in vector_names:
        if any(name not in s.vectors for s in samples):
            raise ValueError(f"{path}: vector {name!r} is set on some samples and not on others")
        parts = [np.asarray(s.vectors[name], dtype=np.float32) for s in samples]
        arrays["vector:" + name] = np.concatenate(parts, axis=0)
        arrays["vector:" + name + "_offsets"] = np.cumsum([0] + [len(p) for p in parts])
    return arrays


def save_samples(path: str, samples: Sequence[GraphSample], info: Optional[Dict[str, Any]] = None,
                 extractor: Optional[ExtractorInfo] = None) -> None:
    """Write a collection as one compressed npz (see module docstring), atomically.

    The info gets the extractor's `extractor`, `vocabulary` and `feature_names`:
    `extractor` if given, else the registered extractor the samples' `meta.extractor`
    names (none for samples of no known extractor, e.g. synthetic ones)."""
    if not samples:
        raise ValueError(f"{path}: no samples to write")
    arrays = collection_arrays(samples, path)
    extractor = extractor or _extractor_of(samples)
    info = dict(info or {})
    if extractor is not None:
        clash = [k for k, v in extractor.as_info().items() if info.get(k, v) != v]
        if clash:
            raise ValueError(f"{path}: info {clash} contradict extractor {extractor.extractor!r}")
        info = {**extractor.as_info(), **info}
    header = {"groups": [s.group for s in samples], "names": [s.name for s in samples],
              "meta": [s.meta.as_dict() for s in samples], "info": info}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    with atomic_write(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def load_samples(path: str) -> List[GraphSample]:
    """Read a collection written by `save_samples`; a damaged file names itself."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        header = json.loads(bytes(data.pop("header")).decode())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{path}: not a readable sample collection ({type(e).__name__}: {e})") from None
    count = len(header["names"])

    def part(key: str, i: int) -> Optional[np.ndarray]:
        if key not in data:
            return None
        off = data[key + "_offsets"]
        return data[key][off[i]:off[i + 1]]

    def node_config_features(i: int) -> Optional[np.ndarray]:
        rows = part("node_config_features", i)
        if rows is None:
            return None
        return rows.reshape(-1, len(part("node_config_ids", i)), rows.shape[-1])

    def sample(i: int) -> GraphSample:
        try:
            return GraphSample(edges=part("edges", i), node_features=part("node_features", i),
                               node_types=part("node_types", i), runtimes=part("runtimes", i),
                               group=header["groups"][i], name=header["names"][i],
                               meta=header["meta"][i],
                               **{k: part(k, i) for k in _OPTIONAL if k != "node_config_features"},
                               node_config_features=node_config_features(i),
                               vectors={k[len("vector:"):]: part(k, i) for k in data
                                        if k.startswith("vector:") and not k.endswith("_offsets")})
        except (ValueError, IndexError, KeyError, TypeError) as e:  # a bad value, inconsistent arrays
            reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            raise ValueError(f"{path}: sample {i}: {reason}") from None

    return [sample(i) for i in range(count)]


def load_info(path: str) -> Dict[str, Any]:
    with np.load(path, allow_pickle=False) as z:
        return json.loads(bytes(z["header"]).decode())["info"]
