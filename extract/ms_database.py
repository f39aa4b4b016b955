"""MetaSchedule tuning databases → graph samples (issue 11, section 1).

    jobs, report = read_databases(["work_dir/"], report=LogReport())   # parse, validate, count
    samples, unknown = extract_many(jobs, workers=2)                     # replay, lower, walk
    samples = database_samples(db)                                       # any ms.database.Database

A database is what `ms.tune_tir`, the Relax integration and `extract.ms_measure` write: a
folder holding `database_workload.json` (one line per workload: its structural hash and
IRModule) and `database_tuning_record.json` (one line per measured candidate: the index of
its workload line, and `[trace, run_secs, target, args_info]`); either may be gzipped
(`.json.gz`, as committed in this repository). A folder whose subfolders hold databases
(a pass folder of issue 12's dataset, `pass1/{random,evolutionary}`, or the dataset's
whole work folder) stands for all of them (`find_databases`).

**Replaying a record.** A record keeps the candidate's *trace* (its schedule
instructions with their sampled decisions), not the scheduled program. The program is
made again by applying the trace, decisions included, to a fresh schedule of the
workload's IRModule (`replay`): `Trace.apply_json_to_schedule`, exactly what MetaSchedule
does itself when it loads a record (`TuningRecord::FromJSON`) and when it turns one back
into a candidate (`AsMeasureCandidate`, `apply_to_schedule(remove_postproc=False)`). The
trace stored is the candidate's whole trace, *postprocessing included*: the search
applies its postprocessors (parallel/vectorize/unroll rewriting, reduction
decomposition, …) to each candidate before the cost model scores it and before it is
built, and they act through schedule primitives that the trace records after an
`EnterPostproc` marker. So replaying the full trace gives the very module the cost model
saw and the builder compiled — the test suite checks it: every record of a real
`ms.tune_tir` run, replayed here, is structurally equal to a module the cost model was
asked to score in that run, while the same trace replayed with `remove_postproc=True`
(the design-space part only, what the search re-samples from) is not.

The replayed schedule goes through `extract.tvm_graph.extract_schedule` (lowering for
features, the TIR walk, and MetaSchedule's per-store rows for the xgb baseline; the
trace's decisions and the workload's shape become `vectors["knob"]`, what knob-xgb reads,
`extract.knob_features.trace_knobs`, with the values cut counted in `meta["knob_cut"]`), with y
from the record's `run_secs` (one entry per repeat, seconds; the sample's runtime is
their mean, as for AutoTVM records, and `meta` keeps their min and median). Groups are
`extract.ms_workload.workload_key(workload, record target)`: stable across runs and
networks. A sample is named `<group>/<structural hash of the scheduled module>`, so the
same schedule read twice (a database given twice, a record measured again) is one point
to `datasets.load_collection`'s deduplication.

**What is counted, never dropped silently** (in the caller's `LogReport`):
* error records — no `run_secs`, or MetaSchedule's 1e10 s that marks a candidate that did
  not build or run — per workload group;
* bad lines (not JSON, not a record, a workload index that is not in the workload file,
  a run time that is not a positive finite number, no target): `RecordFormatError`
  naming file:line, or, with `skip_bad`, a counted skip;
* a last line cut off without its newline (a writer was appending: the dataset's
  databases grow while it is measured): always a counted skip;
* a trace that no longer applies to its workload (another TVM, an edited workload):
  always a counted skip naming the record's line (`TraceJob.run` raises, and
  `extract.tvm_log.extract_logs` counts it).
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .records import MAX_COST_S, MIN_COST_S, RecordFormatError, is_number

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
FAILED_S = 1e10          # MetaSchedule's run_secs of a candidate that did not build or run
ERROR_NO_RUN_SECS = "no run_secs"
ERROR_FAILED = "failed to build or run (run_secs 1e10)"
CUT_OFF = "last line cut off (a writer was appending?)"


# ---------------------------------------------------------------- finding databases
def _file(folder: str, name: str) -> Optional[str]:
    """`folder/name`, or its `.gz`, if present."""
    for candidate in (os.path.join(folder, name), os.path.join(folder, name + ".gz")):
        if os.path.isfile(candidate):
            return candidate
    return None


def is_database_dir(path: str) -> bool:
    """A folder holding a MetaSchedule JSONDatabase (both files, plain or gzipped)."""
    return os.path.isdir(path) and _file(path, WORKLOAD_FILE) is not None and _file(path, RECORD_FILE) is not None


def database_of(path: str) -> Optional[str]:
    """The database folder a path names: the folder itself, or the folder of a
    `database_tuning_record.json[.gz]` / `database_workload.json[.gz]` named directly."""
    if os.path.isdir(path):
        return path if is_database_dir(path) else None
    name = os.path.basename(path).lower()
    if name in (WORKLOAD_FILE, WORKLOAD_FILE + ".gz", RECORD_FILE, RECORD_FILE + ".gz"):
        folder = os.path.dirname(path) or "."
        return folder if is_database_dir(folder) else None
    return None


def is_record_file(path: str) -> bool:
    """A database's record file (`database_tuning_record.json[.gz]`)."""
    return os.path.basename(path).lower() in (RECORD_FILE, RECORD_FILE + ".gz")


def find_databases(path: str) -> List[str]:
    """The databases a path stands for: itself (a database folder, or one of its two
    files), else every database folder below it (sorted); [] when it holds none."""
    own = database_of(path)
    if own is not None:
        return [own]
    if not os.path.isdir(path):
        return []
    found = []
    for root, dirs, _ in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if is_database_dir(root):
            found.append(root)
    return found


def holds_databases(path: str) -> bool:
    return bool(find_databases(path))


def database_files(folder: str) -> Tuple[str, str]:
    """(workload file, record file) of a database folder."""
    workloads, records = _file(folder, WORKLOAD_FILE), _file(folder, RECORD_FILE)
    if workloads is None or records is None:
        raise FileNotFoundError(f"{folder}: not a MetaSchedule database (needs {WORKLOAD_FILE} and {RECORD_FILE})")
    return workloads, records


def database_lines(path: str) -> Iterator[Tuple[int, str, bool]]:
    """(line number, text, ended by a newline) of each non-empty line, plain or gzip."""
    with open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if raw.read(2) == b"\x1f\x8b" else None
        raw.seek(0)
        for n, line in enumerate(stream if stream is not None else raw, 1):
            text = line.decode("utf-8", errors="replace")
            if text.strip():
                yield n, text.strip(), text.endswith("\n")


# ---------------------------------------------------------------- replaying a record
@functools.lru_cache(maxsize=64)
def workload_module(workload_json: str):
    """The IRModule of a workload line (`[structural hash, IRModule]`), cached: the jobs
    of one workload share its text."""
    from tvm.s_tir import meta_schedule as ms

    return ms.database.Workload.from_json(json.loads(workload_json)).mod


@functools.lru_cache(maxsize=64)
def workload_flops(workload_json: str) -> Optional[float]:
    """TVM's FLOP estimate of a workload line's IRModule (None when TVM cannot estimate it)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(workload_module(workload_json)))
    except Exception:  # noqa: BLE001 - an estimate only; the knob vector's flops column is then 0
        return None


@functools.lru_cache(maxsize=16)
def target_of(target_json: str):
    from tvm.target import Target

    return Target(json.loads(target_json))


def replay(mod, trace_json: Any):
    """The scheduled program of a record: its whole trace (postprocessing included, with
    its decisions) applied to a fresh schedule of the workload, as MetaSchedule replays
    records (see the module docstring). `trace_json`: the trace as JSON (a Python object
    or its text). Raises when the trace does not apply."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    if isinstance(trace_json, str):
        trace_json = json.loads(trace_json)
    sch = Schedule(mod, seed=None, debug_mask=0, error_render_level="none")
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


@dataclass(frozen=True)
class TraceJob:
    """One successful record to replay and extract (an `extract.tvm_graph.ExtractionJob`),
    self-contained: the workload and trace as JSON text, so a spawned worker needs
    nothing else (the jobs of one workload share one string: pickled once per chunk)."""

    workload: str                    # the workload line, [structural hash, IRModule]
    trace: str                       # the trace's JSON
    run_secs: Tuple[float, ...]      # per repeat, seconds
    target: str                      # the target's JSON config
    group: str                       # extract.ms_workload.workload_key
    source: str                      # file:line (or database:index), for errors
    meta: Tuple[Tuple[str, Any], ...] = ()

    def schedule(self):
        return replay(workload_module(self.workload), self.trace)

    def run(self, per_store: bool):
        from .knob_features import trace_knobs
        from .ms_store import schedule_hash
        from .tvm_graph import extract_schedule

        try:
            sch = self.schedule()
        except Exception as e:  # noqa: BLE001 - the caller counts it as this record's skip
            from .tvm_graph import one_line
            raise TraceError(f"trace no longer applies: {one_line(e)}") from None
        digest = schedule_hash(sch.mod)
        knobs = trace_knobs(self.trace, self.group, workload_flops(self.workload))
        meta = {**dict(self.meta), "mod_hash": digest, "knob_cut": knobs.cut}
        extraction = extract_schedule(sch, target_of(self.target), self.run_secs, self.group,
                                      f"{self.group}/{digest}", meta, per_store)
        # the trace's decisions and the workload's shape: what knob-xgb reads (extract.knob_features)
        extraction.sample.vectors["knob"] = knobs.vector[None, :]
        return extraction


class TraceError(RuntimeError):
    """A record's trace does not apply to its workload."""


# ---------------------------------------------------------------- reading a database
@dataclass
class _Workloads:
    """The workload lines of one database, by index: (text, IRModule), or the reason the
    line could not be read."""

    path: str
    entries: List[Any]
    keys: Dict[Tuple[int, str], str]

    def key(self, index: int, target_json: str) -> str:
        from .ms_workload import workload_key

        k = (index, target_json)
        if k not in self.keys:
            self.keys[k] = workload_key(self.entries[index][1], target_of(target_json))
        return self.keys[k]


def _read_workloads(path: str, report, skip_bad: bool) -> _Workloads:
    from tvm.s_tir import meta_schedule as ms

    entries: List[Any] = []
    for n, text, ended in database_lines(path):
        try:
            mod = ms.database.Workload.from_json(json.loads(text)).mod
            entries.append((text, mod))
        except Exception as e:  # noqa: BLE001 - any failure to parse is this line's
            reason = CUT_OFF if not ended else f"not a MetaSchedule workload: {_short(e)}"
            if ended and not skip_bad:
                raise RecordFormatError(f"{path}:{n}: {reason}") from None
            report.skip(f"{path}:{n}", reason)
            entries.append(f"its workload, line {n} of {path}, could not be read")
    return _Workloads(path, entries, {})


def _short(e: BaseException) -> str:
    from .tvm_graph import one_line
    return one_line(e, 200)


def _check_secs(run_secs: Any) -> Tuple[Optional[Tuple[float, ...]], Optional[str]]:
    """(run_secs, None) of a successful record, (None, error kind) of a failed one;
    ValueError for a value that is no measurement."""
    if run_secs is None or (isinstance(run_secs, list) and not run_secs):
        return None, ERROR_NO_RUN_SECS
    if not isinstance(run_secs, list) or not all(is_number(s) for s in run_secs):
        raise ValueError(f"run_secs {str(run_secs)[:80]} is not a list of numbers")
    if any(s >= FAILED_S for s in run_secs):
        return None, ERROR_FAILED
    bad = [s for s in run_secs if not (math.isfinite(s) and MIN_COST_S <= s <= MAX_COST_S)]
    if bad:
        raise ValueError(f"run_secs {bad[0]!r} is not a run time (must lie in [{MIN_COST_S:g}, {MAX_COST_S:g}] s)")
    return tuple(float(s) for s in run_secs), None


def _parse_record(text: str, workloads: _Workloads, default_target: Optional[str]) -> Tuple[int, str, Any, str]:
    """(workload index, trace JSON text, run_secs as read, target JSON text) of one line."""
    row = json.loads(text)
    if not (isinstance(row, list) and len(row) == 2 and isinstance(row[1], list) and len(row[1]) >= 2):
        raise ValueError("not a tuning record ([workload index, [trace, run_secs, target, args_info]])")
    index, body = row
    if not (isinstance(index, int) and not isinstance(index, bool)) or not 0 <= index < len(workloads.entries):
        raise ValueError(f"workload index {index!r} is not a line of {os.path.basename(workloads.path)} "
                         f"({len(workloads.entries)} workloads)")
    if isinstance(workloads.entries[index], str):
        raise ValueError(workloads.entries[index])
    if not isinstance(body[0], list):
        raise ValueError("the trace is not a JSON list")
    target = body[2] if len(body) > 2 else None
    if target is None:
        if default_target is None:
            raise ValueError("the record names no target")
        target_text = default_target
    else:
        target_text = json.dumps(target, sort_keys=True)
        target_of(target_text)
    return index, json.dumps(body[0]), body[1], target_text


def read_database(folder: str, report, skip_bad: bool = False, default_target=None) -> List[TraceJob]:
    """The successful records of one database folder as extraction jobs, in line order;
    error records, bad lines and a cut-off last line counted in `report` (a
    `extract.tvm_log.LogReport`, per workload group and per record file). A bad line
    raises RecordFormatError naming file:line, unless `skip_bad`. `default_target`: for
    records that name none (MetaSchedule allows it)."""
    wl_path, rec_path = database_files(folder)
    workloads = _read_workloads(wl_path, report, skip_bad)
    default = None if default_target is None else json.dumps(_target_config(default_target), sort_keys=True)
    counts = report.per_file[rec_path]
    jobs: List[TraceJob] = []
    for n, text, ended in database_lines(rec_path):
        source = f"{rec_path}:{n}"
        try:
            index, trace, secs, target = _parse_record(text, workloads, default)
            group = workloads.key(index, target)
            run_secs, error = _check_secs(secs)
        except Exception as e:  # noqa: BLE001 - any failure to validate is this record's
            reason = CUT_OFF if not ended else (str(e) if isinstance(e, ValueError) else _short(e))
            if ended and not skip_bad:
                raise RecordFormatError(f"{source}: {reason}") from None
            report.skip(source, reason)
            counts["skipped"] += 1
            continue
        counts["records"] += 1
        if error is not None:
            report.errors[group][error] += 1
            counts["errors"] += 1
            continue
        report.measured[group] += 1
        counts["samples"] += 1
        meta = (("format", "metaschedule"), ("database", os.path.abspath(folder)), ("line", n),
                ("min", min(run_secs)), ("median", _median(run_secs)))
        jobs.append(TraceJob(workloads.entries[index][0], trace, run_secs, target, group, source, meta))
    return jobs


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def _target_config(target) -> Dict[str, Any]:
    from tvm.target import Target

    target = target if isinstance(target, Target) else Target(target)
    return json.loads(json.dumps(dict(target.export()), default=str))


def read_databases(paths: Sequence[str], skip_bad: bool = False, report=None,
                   default_target=None) -> Tuple[List[TraceJob], Any]:
    """The extraction jobs of every database the paths stand for (`find_databases`),
    each database read once; `report`: a LogReport (made if not given)."""
    if report is None:
        from .tvm_log import LogReport
        report = LogReport()
    jobs: List[TraceJob] = []
    seen = set()
    for path in paths:
        folders = find_databases(path)
        if not folders:
            raise FileNotFoundError(f"{path}: holds no MetaSchedule database ({WORKLOAD_FILE} + {RECORD_FILE})")
        for folder in folders:
            real = os.path.realpath(folder)
            if real not in seen:
                seen.add(real)
                jobs.extend(read_database(folder, report, skip_bad, default_target))
    return jobs, report


# ---------------------------------------------------------------- any ms.database.Database
def _ffi_record_json(record):
    from tvm.s_tir.meta_schedule import _ffi_api

    return _ffi_api.TuningRecordAsJSON(record)  # pylint: disable=no-member


def _ffi_workload_json(workload):
    from tvm.s_tir.meta_schedule import _ffi_api

    return _ffi_api.WorkloadAsJSON(workload)  # pylint: disable=no-member


def _json_of(obj):
    """A record's or workload's JSON (TVM containers → Python), as JSONDatabase writes it:
    MetaSchedule's own `TuningRecord.as_json` raises on the `IndexMap` that a
    `TransformLayout` instruction keeps in its trace (layout rewriting), which the C++
    writer saves as a TVM JSON graph string (`tvm.ir.save_json`); so do we."""
    import tvm
    from tvm_ffi import Array, Map

    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        return obj.value
    if isinstance(obj, Array):
        return [_json_of(i) for i in obj]
    if isinstance(obj, Map):
        return {_json_of(k): _json_of(v) for k, v in obj.items()}
    return tvm.ir.save_json(obj)


def database_jobs(db, name: str = "database", report=None) -> Tuple[List[TraceJob], Any]:
    """Jobs of any `ms.database.Database` (a JSONDatabase, a MemoryDatabase, one of the
    user's own), its records in the order it gives them (sources `name:index`)."""
    if report is None:
        from .tvm_log import LogReport
        report = LogReport()
    counts = report.per_file[name]
    workloads: Dict[int, Tuple[str, _Workloads]] = {}
    jobs: List[TraceJob] = []
    for i, record in enumerate(db.get_all_tuning_records()):
        body = _json_of(_ffi_record_json(record))
        wl_handle = record.workload.__chandle__()
        if wl_handle not in workloads:
            text = json.dumps(_json_of(_ffi_workload_json(record.workload)))
            workloads[wl_handle] = (text, _Workloads(name, [(text, record.workload.mod)], {}))
        text, table = workloads[wl_handle]
        target = json.dumps(body[2], sort_keys=True) if len(body) > 2 and body[2] is not None else None
        if target is None:
            report.skip(f"{name}:{i}", "the record names no target")
            counts["skipped"] += 1
            continue
        group = table.key(0, target)
        counts["records"] += 1
        try:
            run_secs, error = _check_secs(body[1])
        except ValueError as e:
            report.skip(f"{name}:{i}", str(e))
            counts["records"] -= 1
            counts["skipped"] += 1
            continue
        if error is not None:
            report.errors[group][error] += 1
            counts["errors"] += 1
            continue
        report.measured[group] += 1
        counts["samples"] += 1
        meta = (("format", "metaschedule"), ("database", name), ("line", i),
                ("min", min(run_secs)), ("median", _median(run_secs)))
        jobs.append(TraceJob(text, json.dumps(body[0]), run_secs, target, group, f"{name}:{i}", meta))
    return jobs, report


def database_samples(db, name: str = "database", per_store: bool = False, workers: int = 1,
                     progress: bool = False):
    """The samples of a `ms.database.Database` object or a database folder (its successful
    records; a trace that does not apply is left out and counted in the report), and the
    report."""
    from .tvm_graph import JobFailed, extract_many

    if isinstance(db, (str, os.PathLike)):
        jobs, report = read_databases([str(db)], skip_bad=True)
    else:
        jobs, report = database_jobs(db, name)
    failed: List[JobFailed] = []
    samples, report.unknown_nodes = extract_many(jobs, workers, progress, per_store, failed=failed)
    count_failures(jobs, failed, report)
    return samples, report


def count_failures(jobs: Sequence[Any], failed: Sequence[Any], report) -> None:
    """Move the jobs whose extraction failed (`JobFailed`) from the samples to the skips."""
    by_source = {job.source: job for job in jobs}
    for failure in failed:
        job = by_source[failure.source]
        report.skip(failure.source, failure.reason if isinstance(job, TraceJob)
                    else f"extraction failed: {failure.reason}")
        report.measured[job.group] -= 1
        counts = report.per_file[failure.source.rpartition(":")[0]]
        counts["samples"] -= 1
        counts["skipped"] += 1
