"""The one adapter between the simulator and the extractors/datasets (`extract`, `datasets`).

Everything the simulator needs from outside `simulator/` goes through these functions,
so a change of those interfaces is fixed here only:

* `samples_and_info(paths)` -> (samples, CollectionInfo): the samples and the node-type
                               vocabulary, feature names and extractor of their
                               collection (datasets.load_collection)
* `load_data(paths)`        -> the samples only
* `collection_info(samples)`-> that info, from the samples themselves
* `hlo_collection_info()`   -> the same for HLO graphs (TpuGraphs; extract.xla.hlo_graph)
* `extractor_info()`        -> the installed TIR extractor's (extract.tir.graph)
* `canonical_workload(name)`-> the group name a workload spec answers to (C2, keys…)
* `enumerate_workload(spec)`-> samples (runtimes NaN) for every config of a workload's
                               space (extract.schedules.extract_configs)
* `is_tpugraphs(data)`      -> whether `--data` is `tpugraphs:<collection>`, read lazily
                               (datasets.tpugraphs_collections) by simulator.data.tpugraphs
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

import datasets
from extract.sample import EXTRACTORS, ExtractorInfo, GraphSample

from simulator.config import SHIPPED
from simulator.registry import SimulatorError

DEFAULT_TEMPLATE = "conv2d_NCHWc.x86"


def is_tpugraphs(data: Union[str, Sequence[str], None]) -> bool:
    """Whether `--data` names a TpuGraphs collection (`tpugraphs:tile:xla`, …)."""
    if data is None:
        return False
    items = [data] if isinstance(data, str) else list(data)
    return any(str(d).startswith("tpugraphs:") for d in items)


def _refuse_tpugraphs_files(paths: Sequence[str]) -> None:
    """TpuGraphs npz files are not sample collections: say how to use them."""
    from extract.xla.npz_format import is_tpugraphs_npz
    for path in paths:
        found = (sorted(glob.glob(os.path.join(path, "**", "*.npz"), recursive=True))[:1]
                 if os.path.isdir(path) else [path])
        for f in found:
            if f.endswith(".npz") and is_tpugraphs_npz(f):
                raise SimulatorError(f"{f}: a TpuGraphs npz file, not a sample collection: train with "
                                     f"--data tpugraphs:<collection> --data-root ROOT, rank with "
                                     f"python -m simulator.predict RUN {path}")


@dataclass
class CollectionInfo:
    """What made a collection's node types and features: names by id, and the extractor."""

    vocabulary: Optional[List[str]] = None     # node-type name of each id
    feature_names: Optional[List[str]] = None  # name of each node-feature column
    extractor: Optional[str] = None            # extractor version

    @classmethod
    def of(cls, extractor: "ExtractorInfo") -> "CollectionInfo":
        return cls(list(extractor.vocabulary), list(extractor.feature_names), extractor.extractor)


def samples_and_info(paths: Union[str, Sequence[str]] = SHIPPED,
                     cache_dir: Optional[str] = None) -> Tuple[List[GraphSample], CollectionInfo]:
    """Samples from the shipped dataset, AutoTVM logs / folders, or `.npz` collections, and
    the info of their collection: the extractor its info names (`datasets.load_collection`),
    else what the samples say (`collection_info`).

    Any failure (missing path, unreadable file, unknown template) is a `SimulatorError`
    whose message names the culprit.
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    if not paths:
        raise SimulatorError("no dataset given")
    if is_tpugraphs(paths):
        raise SimulatorError(f"{' '.join(paths)}: TpuGraphs collections are read lazily by "
                             f"simulator.train/evaluate/predict, not loaded whole")
    for p in paths:
        if p != SHIPPED and not os.path.exists(p):
            raise SimulatorError(f"{p}: no such dataset file or folder")
    _refuse_tpugraphs_files([p for p in paths if p != SHIPPED])
    try:  # datasets.load_collection refuses an empty result itself
        collection = datasets.load_collection(paths[0] if len(paths) == 1 else paths, cache=cache_dir)
    except (OSError, ValueError, KeyError) as e:  # DatasetError, RecordFormatError, unknown template
        raise SimulatorError(str(e)) from None
    if collection.extractor is not None:
        return collection.samples, CollectionInfo.of(collection.extractor)
    return collection.samples, collection_info(collection.samples)


def load_data(paths: Union[str, Sequence[str]] = SHIPPED, cache_dir: Optional[str] = None) -> List[GraphSample]:
    """The samples of `samples_and_info`."""
    return samples_and_info(paths, cache_dir)[0]


def extractor_info() -> CollectionInfo:
    """The installed TIR extractor's vocabulary, feature names and version (None parts
    when unknown)."""
    try:
        from extract.tir import graph as tir_graph
    except ImportError:
        return CollectionInfo()
    version = getattr(tir_graph, "EXTRACTOR_VERSION", None)
    return CollectionInfo(list(getattr(tir_graph, "VOCABULARY", None) or []) or None,
                          list(getattr(tir_graph, "FEATURE_NAMES", None) or []) or None,
                          None if version is None else str(version))


def hlo_collection_info() -> CollectionInfo:
    """HLO graphs (TpuGraphs, `extract.xla.hlo_graph`): the opcode table as the vocabulary."""
    from extract.xla import hlo_graph as hlo
    num_types = max(hlo.OPCODE_IDS.values()) + 1
    vocabulary = [hlo.OPCODE_NAMES.get(i, "unknown" if i == hlo.UNKNOWN_OPCODE_ID else f"retired-{i}")
                  for i in range(num_types)]
    return CollectionInfo(vocabulary, list(getattr(hlo, "NODE_FEATURE_NAMES", []) or []) or None, None)


def collection_info(samples: Sequence[GraphSample]) -> CollectionInfo:
    """What the samples themselves say made them, for a collection whose info names no
    extractor (samples made in memory, synthetic data): HLO samples (they carry
    `meta.tpugraphs`) the HLO opcode table; samples naming a registered extractor
    (`meta.extractor`, `extract.sample.EXTRACTORS`) that one; else the installed TIR
    extractor's vocabulary, with the extractor version the samples record."""
    if samples and all(s.meta.tpugraphs is not None for s in samples):
        return hlo_collection_info()
    try:
        from extract.tir import graph as tir_graph  # noqa: F401  (registers the TIR extractor's earlier versions)
    except ImportError:
        pass
    versions = {s.meta.extractor for s in samples}
    version = versions.pop() if len(versions) == 1 else None
    if version in EXTRACTORS:
        return CollectionInfo.of(EXTRACTORS[version])
    info = extractor_info()
    if version is not None:  # what made these samples, if they say
        info.extractor = str(version)
    return info


def canonical_workload(name: str) -> str:
    """The group name a workload spec answers to: `C2` and its key
    `conv2d_1x64x56x56_64x3x3_s1_p1` are one workload; other names pass through."""
    try:
        from extract.tir.workloads import parse_workload, workload_name
        return workload_name(parse_workload(name))
    except (ImportError, ValueError):
        return name


def enumerate_workload(spec: str, template: str = DEFAULT_TEMPLATE, max_configs: int = 0,
                       seed: int = 0, vector_name: Optional[str] = None,
                       workers: int = 0) -> Tuple[str, List[GraphSample]]:
    """Samples (runtimes NaN) for a workload's config space: all of it, or a seeded subset
    of `max_configs` indices, extracted in `workers` processes (0: one per core).
    `vector_name` "per_store" also computes MetaSchedule's features (slower), which only
    the xgb model reads. Returns (workload name, samples)."""
    try:
        from extract.autotvm.templates import get_template
        from extract.schedules import extract_configs
        from extract.tir.workloads import parse_workload, workload_name
    except ImportError as e:
        raise SimulatorError(f"enumerating a config space needs the extractors ({e})") from None
    try:
        workload = parse_workload(spec)
        space = get_template(template).space(get_template(template).check_workload(workload))
    except (ValueError, KeyError, TypeError) as e:
        raise SimulatorError(str(e)) from None
    indices = np.arange(len(space))
    if max_configs and max_configs < len(indices):
        indices = np.sort(np.random.default_rng(seed).choice(indices, max_configs, replace=False))
    from simulator.engine import stderr_is_terminal
    samples = extract_configs(template, workload, indices, per_store=vector_name == "per_store", workers=workers,
                              progress=stderr_is_terminal())
    return workload_name(workload), samples
