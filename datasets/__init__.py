"""Datasets: the measurements shipped with the repo, and loading of a user's own data.

`load_dataset(data)` turns any of these into a list of `GraphSample`s:
  * "shipped" — ResNet-18's twelve conv2d workloads measured on this project's machines
    (`datasets/resnet18_x86/`, see its README); groups are named C1…C12;
  * AutoTVM log files or folders of them (any template `extract.autotvm.templates` knows);
  * MetaSchedule tuning databases: a database folder (`database_workload.json` +
    `database_tuning_record.json`, plain or .gz), or a folder of them (a pass folder of
    the MetaSchedule dataset); groups are `extract.tir.workload_key` workload keys;
  * a folder of sample collections (`*.npz` written by `extract.tvm_log --out`), or
    such files.
What a folder stands for is the rule of every reader (`extract.inputs.find_inputs`, as in
`extract.tvm_log`): every database and log found in it is read, and whatever else is found
is named in a `passed over …` line with the reason. Several paths may be given
("shipped" among them). Each path is read once, and samples that
repeat a (workload group, config) already read are dropped, with a count (`--data D D`
would otherwise double the samples and put one config on both sides of a split). A
folder holding both sample collections and logs is refused (give the one you mean);
file names match in any case (`.JSONL`, `.NPZ`, `.LOG.GZ`). What was read from each path
is said in one line per path (`Collection.read`; printed unless `progress=False`). A
folder written by `extract.tvm_log` is checked against its report.json (an interrupted
run, a stale or changed collection: `DatasetError`).

Samples extracted from logs and databases are cached on disk, keyed by a hash of their bytes and
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from extract.inputs import InputError, database_files, find_all, find_inputs, is_record_file, passed_over_lines
from extract.sample import ExtractorInfo, GraphSample, load_info, load_samples, save_samples
from extract.store_rows import STORE_ROWS_VERSION
from extract.tir.graph import EXTRACTOR_VERSION
from extract.tir.hardware import HARDWARE_VERSION

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
    read: List[str] = field(default_factory=list)  # what each path gave, one line each
    duplicates: int = 0                            # samples dropped as repeats

    @property
    def info(self) -> Dict[str, Any]:
        """The extractor as a collection's info keys: `extractor`, `vocabulary`, `feature_names`."""
        return self.extractor.as_info() if self.extractor else {}


def tir_extractor() -> ExtractorInfo:
    """The extractor AutoTVM logs are read with (extract.schedules's)."""
    from extract.schedules import TIR_EXTRACTOR
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
    files = list(files)
    digest = hashlib.sha256(EXTRACTOR_VERSION.encode())
    digest.update(f"store-rows-v{STORE_ROWS_VERSION}".encode())  # the samples' vectors, not only their graphs
    digest.update(f"hardware-v{HARDWARE_VERSION}".encode())  # what the context columns measure against
    if any(map(is_record_file, files)):  # MetaSchedule samples carry trace knobs and tokens too
        from extract.autotvm.knob_features import TRACE_KNOB_VERSION
        from extract.metaschedule.database import READER_VERSION
        from extract.metaschedule.trace_tokens import TRACE_TOKENS_VERSION
        from extract.tir.workload_key import KEY_VERSION
        digest.update(f"trace-knobs-v{TRACE_KNOB_VERSION}-reader-v{READER_VERSION}-{KEY_VERSION}".encode())
        digest.update(f"trace-tokens-v{TRACE_TOKENS_VERSION}".encode())
    for path in sorted(files):
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:20]


def load_logs(paths: Sequence[str], skip_bad: bool = False, use_cache: bool = True,
              progress: bool = True, cache: Optional[str] = None,
              per_file: Optional[Dict[str, Dict[str, int]]] = None) -> List[GraphSample]:
    """Samples of AutoTVM logs and MetaSchedule databases (a database stands for itself
    by its folder or its record file), extracted once and cached (in `cache_dir(cache)`).
    `per_file`, if given, gets what was read from each log file (records, samples,
    errors, skipped; empty for a cache written before these were kept)."""
    from extract.tvm_log import extract_logs, input_files

    files = [f for found in find_all(paths) for f in _record_files(found.databases) + found.logs]
    databases = [f for f in files if is_record_file(f)]
    if databases and len(databases) < len(files):
        # AutoTVM logs and MetaSchedule databases: each cached on its own (their samples'
        # knob vectors differ in width, so one collection file cannot hold both)
        return [s for part in (databases, [f for f in files if f not in databases])
                for s in load_logs(part, skip_bad, use_cache, progress, cache, per_file)]
    cached = cache_dir(cache) / f"logs-{_logs_key(input_files(files))}.npz"
    if use_cache and cached.exists():
        if per_file is not None:
            per_file.update(_counts_of(files, load_info(str(cached)).get("per_file", {})))
        return load_samples(str(cached))
    by_group, report = extract_logs(files, skip_bad=skip_bad, progress=progress)
    if progress:
        print(report.table())
    samples = [s for group in sorted(by_group) for s in by_group[group]]
    if not samples:
        raise DatasetError(f"{', '.join(paths)}: no successful measurements in these logs")
    if per_file is not None:
        per_file.update({f: dict(c) for f, c in report.per_file.items()})
    if use_cache:
        counts = {os.path.realpath(f): dict(c) for f, c in report.per_file.items()}
        save_samples(str(cached), samples, info={"logs": files, "per_file": counts}, extractor=tir_extractor())
    return samples


def _counts_of(files: Sequence[str], stored: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, int]]:
    """A cache's per-file counts (kept by real path) for `files`: the same logs may be
    named by another path now (the cache is keyed by their names and bytes)."""
    by_name: Dict[str, List[Dict[str, int]]] = {}
    for path, counts in stored.items():
        by_name.setdefault(os.path.basename(path), []).append(counts)
    found = {}
    for f in files:
        counts = stored.get(os.path.realpath(f))
        if counts is None and len(by_name.get(os.path.basename(f), [])) == 1:
            counts = by_name[os.path.basename(f)][0]
        if counts is not None:
            found[f] = counts
    return found


def _shipped_samples_current() -> bool:
    return SHIPPED_SAMPLES.exists() and load_info(str(SHIPPED_SAMPLES)).get("extractor") == EXTRACTOR_VERSION


def load_shipped(progress: bool = True) -> List[GraphSample]:
    if not SHIPPED_LOG.exists():
        raise DatasetError(f"{SHIPPED_LOG}: the shipped dataset is missing from this checkout")
    if _shipped_samples_current():
        return load_samples(str(SHIPPED_SAMPLES))
    return load_logs([str(SHIPPED_LOG)], progress=progress)


def _record_files(databases: Sequence[str]) -> List[str]:
    """The record files of database folders: each names its database to the readers."""
    return [database_files(db)[1] for db in databases]


@dataclass
class _Source:
    """What one `--data` spec names: sample collection files and/or log files (a
    database's record file stands for it), and what was found there and not read."""

    spec: str
    sample_files: List[str]
    logs: List[str]
    passed_over: List[Tuple[str, str]] = field(default_factory=list)


def _classify(spec: str) -> _Source:
    """What one spec names, by the rule of every reader (`extract.inputs.find_inputs`). A
    folder holding both sample collections and logs or databases is refused: which of
    them the user means is not for us to guess."""
    if spec == "shipped":
        if not SHIPPED_LOG.exists():
            raise DatasetError(f"{SHIPPED_LOG}: the shipped dataset is missing from this checkout")
        if _shipped_samples_current():
            return _Source(spec, [str(SHIPPED_SAMPLES)], [])
        return _Source(spec, [], [str(SHIPPED_LOG)])
    if not Path(spec).exists():
        raise DatasetError(f"{spec}: no such file or folder (give 'shipped', AutoTVM logs, "
                           f"or a folder of extracted .npz samples)")
    try:
        found = find_inputs(spec)
    except (InputError, FileNotFoundError) as e:
        raise DatasetError(str(e)) from None
    npz, databases, logs = found.collections, _record_files(found.databases), found.logs
    if npz and databases:
        raise DatasetError(f"{spec}: holds both sample collections ({len(npz)} .npz, e.g. {npz[0]}) and "
                           f"MetaSchedule databases (e.g. {os.path.dirname(databases[0])}); give the "
                           f"collections' folder or the databases themselves")
    if npz and logs:
        raise DatasetError(f"{spec}: holds both sample collections ({len(npz)} .npz, e.g. {npz[0]}) and "
                           f"tuning logs ({len(logs)}, e.g. {logs[0]}); give the collections' folder or "
                           f"the logs themselves")
    if not (npz or databases or logs):
        raise DatasetError(f"{spec}: holds no sample collections (.npz), tuning logs (*.json, *.jsonl, "
                           f"*.log, or .gz of them) or MetaSchedule databases"
                           + (f" ({len(found.passed_over)} files passed over)" if found.passed_over else ""))
    return _Source(spec, npz, databases + logs, found.passed_over)


def _check_reports(sample_files: Sequence[str], whole_folders: Sequence[str]) -> None:
    """Collections in an extract.tvm_log output folder must be those its report.json
    lists: a folder read whole must hold exactly them; a named file must be one of them."""
    from extract.tvm_log import OutputFolderError, check_output

    by_folder: Dict[str, List[str]] = {}
    for f in sample_files:
        by_folder.setdefault(os.path.dirname(os.path.abspath(f)), []).append(os.path.basename(f))
    whole = {os.path.abspath(f) for f in whole_folders}
    try:
        for folder, names in by_folder.items():
            check_output(folder, None if folder in whole or any(
                folder.startswith(w + os.sep) for w in whole) else names)
    except OutputFolderError as e:
        raise DatasetError(str(e)) from None


def sample_key(sample: GraphSample) -> Tuple:
    """What makes two samples the same measurement point: the workload group and the
    config (a template's config index), else the group and the sample's name. A sample
    of neither (no index, no name) is its own."""
    if sample.meta.index is not None:
        return (sample.group, sample.meta.template or "", str(sample.meta.index))
    if sample.name:
        return (sample.group, sample.name)
    return (id(sample),)


def deduplicate(samples: Sequence[GraphSample]) -> Tuple[List[GraphSample], int]:
    """The samples without repeats of a (workload group, config) already seen (the first
    is kept: a config measured twice, or data given twice, must not land on both sides
    of a train/validation split); and how many were dropped."""
    seen = set()
    kept = []
    for s in samples:
        key = sample_key(s)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    return kept, len(samples) - len(kept)


def load_collection(data: Union[str, Sequence[str]] = "shipped", progress: bool = True,
                    cache: Optional[str] = None) -> Collection:
    """The samples `data` names (see the module docstring) and their extractor info.

    Each path is read once (a path given twice, or a file inside a folder also given, is
    not read again); samples repeating a (workload group, config) already read are
    dropped (`Collection.duplicates`); `Collection.read` says what each path gave, one
    line each (printed with `progress`)."""
    specs = [data] if isinstance(data, str) else list(data)
    if not specs:
        raise DatasetError("no dataset given")
    if specs == ["shipped"]:
        samples = load_shipped(progress)
        info = load_info(str(SHIPPED_SAMPLES)) if _shipped_samples_current() else tir_extractor().as_info()
        collection = Collection(samples, shared_extractor([info], [str(SHIPPED_SAMPLES)]),
                                read=[f"shipped: {len(samples)} samples"])
        return _finish(collection, progress)
    sources = [_classify(spec) for spec in specs]
    _check_reports([f for s in sources for f in s.sample_files],
                   [s.spec for s in sources if os.path.isdir(s.spec) and s.sample_files])
    samples: List[GraphSample] = []
    infos, names, read = [], [], []
    taken = set()
    for source in sources:
        files = [f for f in source.sample_files if os.path.realpath(f) not in taken]
        taken.update(os.path.realpath(f) for f in files)
        count = 0
        for f in files:
            part = load_samples(f)
            count += len(part)
            samples.extend(part)
            infos.append(load_info(f))
            names.append(f)
        if source.sample_files:
            read.append(f"{source.spec}: {len(files)} sample collection{'s' * (len(files) != 1)}, "
                        f"{count} samples" + _already(len(source.sample_files) - len(files)))
    logs = [s for s in sources if s.logs]
    if logs:
        from extract.log_report import describe_counts

        per_file: Dict[str, Dict[str, int]] = {}
        all_logs = [f for s in logs for f in s.logs]
        try:
            samples.extend(load_logs(all_logs, progress=progress, cache=cache, per_file=per_file))
        except FileNotFoundError as e:
            raise DatasetError(str(e)) from None
        infos.append(tir_extractor().as_info())
        names.append(", ".join(s.spec for s in logs))
        for source in logs:
            files = [f for f in source.logs if os.path.realpath(f) not in taken]
            taken.update(os.path.realpath(f) for f in files)
            if per_file or not files:
                counts: Dict[str, int] = {}
                for f in files:
                    for k, v in per_file.get(f, {}).items():
                        counts[k] = counts.get(k, 0) + v
                noun = "database" if files and all(map(is_record_file, files)) else "log"
                read.append(f"{source.spec}: {describe_counts(counts, len(files), noun)}"
                            + _already(len(source.logs) - len(files)))
            else:  # a cache written before per-file counts were kept
                read.append(f"{source.spec}: {len(files)} logs (extracted earlier, from the cache)")
    if not samples:
        raise DatasetError(f"{', '.join(specs)}: holds no samples")
    read.extend(passed_over_lines([item for source in sources for item in source.passed_over]))
    read.extend(_tag_networks(samples, specs))
    return _finish(Collection(samples, shared_extractor(infos, names), read=read), progress)


def _tag_networks(samples: Sequence[GraphSample], specs: Sequence[str]) -> List[str]:
    """Tag the samples with the networks and operator kind of their task, from the task
    tables of the networks dataset folders among `specs` (`datasets.networks.annotate`);
    a line saying how many were tagged (none when no spec is such a folder)."""
    from .networks import NetworkDataError, annotate, is_dataset, merge_tags, read_tasks, task_tags

    folders = [s for s in specs if s != "shipped" and is_dataset(s)]
    if not folders:
        return []
    try:
        tags = merge_tags([task_tags(read_tasks(f)) for f in folders])
    except NetworkDataError as e:
        raise DatasetError(str(e)) from None
    untagged = annotate(samples, tags)
    return [f"tagged {len(samples) - untagged} samples with their networks and operator kind "
            f"({len(tags)} tasks); {untagged} samples of no task in the table"]


def _already(count: int) -> str:
    return f" ({count} already read from an earlier path)" if count else ""


def _finish(collection: Collection, progress: bool) -> Collection:
    """Drop repeated (group, config) samples, and say what was read."""
    collection.samples, collection.duplicates = deduplicate(collection.samples)
    if collection.duplicates:
        collection.read.append(f"dropped {collection.duplicates} samples repeating a (workload group, config) "
                               f"already read (the first kept)")
    if progress:
        for line in collection.read:
            print(line)
    return collection

def load_dataset(data: Union[str, Sequence[str]] = "shipped", progress: bool = True,
                 cache: Optional[str] = None) -> List[GraphSample]:
    """See the module docstring for what `data` may be; `cache`: see `cache_dir`."""
    return load_collection(data, progress, cache).samples


def rebuild_shipped_samples(progress: bool = True) -> Path:
    """Re-extract the shipped log into `samples.npz` (after an extractor change)."""
    samples = load_logs([str(SHIPPED_LOG)], use_cache=False, progress=progress)
    save_samples(str(SHIPPED_SAMPLES), samples, info={"logs": [SHIPPED_LOG.name]}, extractor=tir_extractor())
    return SHIPPED_SAMPLES
