"""Datasets: the measurements shipped with the repo, and loading of a user's own data.

`load_dataset(data)` turns any of these into a list of `GraphSample`s:
  * "shipped" — ResNet-18's twelve conv2d workloads measured on this project's machines
    (`datasets/resnet18_x86/`, see its README); groups are named C1…C12;
  * AutoTVM log files or folders of them (any template `extract.templates` knows);
  * a folder of sample collections (`*.npz` written by `extract.tvm_log --out`), or
    such files.
Samples extracted from logs are cached on disk, keyed by a hash of the logs' bytes and
the extractor version, so a changed extractor rebuilds the cache. The shipped data
comes with its extracted samples (`samples.npz`), used while the extractor version
matches.

`load_collection(data)` also gives the extractor that made the samples, with its node
vocabulary and feature names (`Collection.extractor`, an `extract.sample.ExtractorInfo`;
as a collection's info keys `extractor`, `vocabulary`, `feature_names`: `Collection.info`),
which a model trained on them keeps.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from extract.records import log_files
from extract.sample import ExtractorInfo, GraphSample, load_info, load_samples, save_samples
from extract.tir_graph import EXTRACTOR_VERSION

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "resnet18_x86"
SHIPPED_LOG = SHIPPED / "pass1.jsonl.gz"          # the dataset
SHIPPED_REMEASURE = SHIPPED / "pass2.jsonl.gz"    # a re-measured subset: the noise ceiling
SHIPPED_SAMPLES = SHIPPED / "samples.npz"         # pass1 extracted, for a fast start


class DatasetError(ValueError):
    """A dataset that cannot be loaded; the message names the path."""


@dataclass
class Collection:
    """Samples, and the extractor that made them (None: none named, e.g. synthetic data)."""

    samples: List[GraphSample]
    extractor: Optional[ExtractorInfo] = None

    @property
    def info(self) -> Dict[str, Any]:
        """The extractor as a collection's info keys: `extractor`, `vocabulary`, `feature_names`."""
        return self.extractor.as_info() if self.extractor else {}


def tir_extractor() -> ExtractorInfo:
    """The extractor AutoTVM logs are read with (extract.tvm_graph's)."""
    from extract.tvm_graph import TIR_EXTRACTOR
    return TIR_EXTRACTOR


def shared_extractor(infos: Sequence[Dict[str, Any]], names: Sequence[str]) -> Optional[ExtractorInfo]:
    """The extractor (`extractor`, `vocabulary`, `feature_names` of their infos) shared by
    collections; None when they name none. A collection of the TVM extractor written
    before infos carried the vocabulary gets it from that extractor. Collections of
    different extractors cannot be mixed (their node types mean different things)."""
    found = {}
    for info, name in zip(infos, names):
        ext = ExtractorInfo.from_info(info)
        if ext is None and info.get("extractor") == EXTRACTOR_VERSION:
            ext = tir_extractor()
        if ext is not None:
            found[name] = ext
    if len(set(found.values())) > 1:
        kinds = ", ".join(f"{n} ({e.extractor})" for n, e in found.items())
        raise DatasetError(f"collections made by different extractors cannot be mixed: {kinds}")
    if found and len(found) < len(infos):
        missing = [n for n in names if n not in found]
        raise DatasetError(f"{', '.join(missing)}: no extractor info, unlike the other collections")
    return next(iter(found.values())) if found else None


def cache_dir(override: Optional[str] = None) -> Path:
    """Where extracted logs are cached: `override`, else $TPSIM_CACHE, else ~/.cache/tpsim."""
    return Path(override or os.environ.get("TPSIM_CACHE", Path.home() / ".cache" / "tpsim"))


def _logs_key(files: Iterable[str]) -> str:
    digest = hashlib.sha256(EXTRACTOR_VERSION.encode())
    for path in sorted(files):
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:20]


def load_logs(paths: Sequence[str], skip_bad: bool = False, use_cache: bool = True,
              progress: bool = True, cache: Optional[str] = None) -> List[GraphSample]:
    """Samples of AutoTVM logs, extracted once and cached (in `cache_dir(cache)`)."""
    from extract.tvm_log import extract_logs

    files = log_files(list(paths))
    cached = cache_dir(cache) / f"logs-{_logs_key(files)}.npz"
    if use_cache and cached.exists():
        return load_samples(str(cached))
    by_group, report = extract_logs(files, skip_bad=skip_bad, progress=progress)
    if progress:
        print(report.table())
    samples = [s for group in sorted(by_group) for s in by_group[group]]
    if not samples:
        raise DatasetError(f"{', '.join(paths)}: no successful measurements in these logs")
    if use_cache:
        save_samples(str(cached), samples, info={"logs": files}, extractor=tir_extractor())
    return samples


def _shipped_samples_current() -> bool:
    return SHIPPED_SAMPLES.exists() and load_info(str(SHIPPED_SAMPLES)).get("extractor") == EXTRACTOR_VERSION


def load_shipped(progress: bool = True) -> List[GraphSample]:
    if not SHIPPED_LOG.exists():
        raise DatasetError(f"{SHIPPED_LOG}: the shipped dataset is missing from this checkout")
    if _shipped_samples_current():
        return load_samples(str(SHIPPED_SAMPLES))
    return load_logs([str(SHIPPED_LOG)], progress=progress)


def _is_sample_file(path: Path) -> bool:
    return path.suffix == ".npz"


def _split_specs(specs: Sequence[str]):
    """(sample collection files, logs) named by `--data` specs."""
    sample_files: List[str] = []
    logs: List[str] = []
    for spec in specs:
        path = Path(spec)
        if not path.exists():
            raise DatasetError(f"{spec}: no such file or folder (give 'shipped', AutoTVM logs, "
                               f"or a folder of extracted .npz samples)")
        if path.is_dir():
            npz = sorted(str(p) for p in path.rglob("*.npz"))
            if npz:
                sample_files.extend(npz)
            else:
                logs.append(str(path))
        elif _is_sample_file(path):
            sample_files.append(str(path))
        else:
            logs.append(str(path))
    return sample_files, logs


def load_collection(data: Union[str, Sequence[str]] = "shipped", progress: bool = True,
                    cache: Optional[str] = None) -> Collection:
    """The samples `data` names (see the module docstring) and their extractor info."""
    specs = [data] if isinstance(data, str) else list(data)
    if specs == ["shipped"]:
        samples = load_shipped(progress)
        info = load_info(str(SHIPPED_SAMPLES)) if _shipped_samples_current() else tir_extractor().as_info()
        return Collection(samples, shared_extractor([info], [str(SHIPPED_SAMPLES)]))
    sample_files, logs = _split_specs(specs)
    samples: List[GraphSample] = []
    infos, names = [], []
    for f in sample_files:
        samples.extend(load_samples(f))
        infos.append(load_info(f))
        names.append(f)
    if logs:
        try:
            samples.extend(load_logs(logs, progress=progress, cache=cache))
        except FileNotFoundError as e:
            raise DatasetError(str(e)) from None
        infos.append(tir_extractor().as_info())
        names.append(", ".join(logs))
    if not samples:
        raise DatasetError(f"{', '.join(specs)}: holds no samples")
    return Collection(samples, shared_extractor(infos, names))


def load_dataset(data: Union[str, Sequence[str]] = "shipped", progress: bool = True,
                 cache: Optional[str] = None) -> List[GraphSample]:
    """See the module docstring for what `data` may be; `cache`: see `cache_dir`."""
    return load_collection(data, progress, cache).samples


def rebuild_shipped_samples(progress: bool = True) -> Path:
    """Re-extract the shipped log into `samples.npz` (after an extractor change)."""
    samples = load_logs([str(SHIPPED_LOG)], use_cache=False, progress=progress)
    save_samples(str(SHIPPED_SAMPLES), samples, info={"logs": [SHIPPED_LOG.name]}, extractor=tir_extractor())
    return SHIPPED_SAMPLES
