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
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

from extract.records import log_files
from extract.sample import GraphSample, load_info, load_samples, save_samples
from extract.tir_graph import EXTRACTOR_VERSION

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "resnet18_x86"
SHIPPED_LOG = SHIPPED / "pass1.jsonl.gz"          # the dataset
SHIPPED_REMEASURE = SHIPPED / "pass2.jsonl.gz"    # a re-measured subset: the noise ceiling
SHIPPED_SAMPLES = SHIPPED / "samples.npz"         # pass1 extracted, for a fast start


class DatasetError(ValueError):
    """A dataset that cannot be loaded; the message names the path."""


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
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp.npz")
        save_samples(str(tmp), samples, info={"extractor": EXTRACTOR_VERSION, "logs": files})
        os.replace(tmp, cached)
    return samples


def load_shipped(progress: bool = True) -> List[GraphSample]:
    if not SHIPPED_LOG.exists():
        raise DatasetError(f"{SHIPPED_LOG}: the shipped dataset is missing from this checkout")
    if SHIPPED_SAMPLES.exists() and load_info(str(SHIPPED_SAMPLES)).get("extractor") == EXTRACTOR_VERSION:
        return load_samples(str(SHIPPED_SAMPLES))
    return load_logs([str(SHIPPED_LOG)], progress=progress)


def _is_sample_file(path: Path) -> bool:
    return path.suffix == ".npz"


def load_dataset(data: Union[str, Sequence[str]] = "shipped", progress: bool = True,
                 cache: Optional[str] = None) -> List[GraphSample]:
    """See the module docstring for what `data` may be; `cache`: see `cache_dir`."""
    specs = [data] if isinstance(data, str) else list(data)
    if specs == ["shipped"]:
        return load_shipped(progress)
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
    samples: List[GraphSample] = []
    for f in sample_files:
        samples.extend(load_samples(f))
    if logs:
        try:
            samples.extend(load_logs(logs, progress=progress, cache=cache))
        except FileNotFoundError as e:
            raise DatasetError(str(e)) from None
    if not samples:
        raise DatasetError(f"{', '.join(specs)}: holds no samples")
    return samples


def rebuild_shipped_samples(progress: bool = True) -> Path:
    """Re-extract the shipped log into `samples.npz` (after an extractor change)."""
    samples = load_logs([str(SHIPPED_LOG)], use_cache=False, progress=progress)
    tmp = SHIPPED / "samples.tmp.npz"
    save_samples(str(tmp), samples, info={"extractor": EXTRACTOR_VERSION, "logs": [SHIPPED_LOG.name]})
    os.replace(tmp, SHIPPED_SAMPLES)
    return SHIPPED_SAMPLES
