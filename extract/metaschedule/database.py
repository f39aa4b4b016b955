"""MetaSchedule tuning databases → graph samples.

    jobs, report = read_databases(["work_dir/"], report=LogReport())   # parse, validate, count
    samples, unknown = extract_many(jobs, workers=2)                     # replay, lower, walk
    samples = database_samples(db)                                       # any ms.database.Database

A database is what `ms.tune_tir`, the Relax integration and `extract.ms_measure` write: a
folder holding `database_workload.json` (one line per workload: its structural hash and
IRModule) and `database_tuning_record.json` (one line per measured candidate: the index of
its workload line, and `[trace, run_secs, target, args_info]`); either may be gzipped
(`.json.gz`, as committed in this repository). Which databases a path stands for is the
rule of every reader, `extract.inputs.find_inputs` (`find_databases`): a database folder
and every database below it (a pass folder of the networks dataset,
`pass1/{random,evolutionary}`); of the dataset's whole folder, pass 1's.

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

The replayed schedule goes through `extract.schedules.extract_schedule` (lowering for
features, the TIR walk, and MetaSchedule's per-store rows for the xgb baseline; the
trace's decisions and the workload's shape become `vectors["knob"]`, what knob-xgb reads,
`extract.autotvm.knob_features.trace_knobs`, with the values cut counted in `meta.extra["knob_cut"]`;
the trace's instructions as tokens, `vectors["trace_tokens"]`, what tlp reads,
`extract.metaschedule.trace_tokens`, with what is cut counted in `meta.extra["trace_cut"]`), with y
from the record's `run_secs` (one entry per repeat, seconds; the sample's runtime is
their mean, as for AutoTVM records, and `meta` keeps their min and median). Groups are
`extract.tir.workload_key.workload_key(workload, record target)`: stable across runs and
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
* a file damaged part-way (a truncated or corrupt .gz): the lines before the damage are
  read; the damage is `DamagedFile` naming file:line, or with `skip_bad` a counted skip
  (as `extract.autotvm.records` treats a damaged AutoTVM log);
* a record whose replay is not the program it measured (`TraceJob.schedule` raises
  `TraceError`; `extract.tvm_log.extract_logs` stops naming its file:line, or with
  `skip_bad` counts it): a trace that no longer applies to its workload (another TVM, an
  edited workload); arguments (`args_info`) other than the replayed program's — the
  record belongs to another workload, as in two databases joined with `cat` or reordered
  workload lines, where a record's workload index points at the wrong line; a decision
  that TVM replaced on replay (it silently re-samples a decision invalid for its loop,
  e.g. tile factors `[5, 5]` for an extent of 9), so the runtime is another program's and
  the knob vector would say otherwise; a trace that samples nothing and leaves the
  workload unchanged (an empty trace: the unscheduled program never was measured).
  These checks cost about 0.25 ms a record, ~5% of a replay (~1% of an extraction).
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import os
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from extract.autotvm.records import GZIP_MAGIC, MAX_COST_S, MIN_COST_S, RecordFormatError, is_number
from extract.inputs import DATABASE_NAMES, RECORD_FILE, WORKLOAD_FILE, database_files, find_inputs  # noqa: F401 (RECORD_FILE)
from .trace_tokens import TRACE_TOKENS_VECTOR, trace_tokens

FAILED_S = 1e10          # MetaSchedule's run_secs of a candidate that did not build or run
ERROR_NO_RUN_SECS = "no run_secs"
ERROR_FAILED = "failed to build or run (run_secs 1e10)"
CUT_OFF = "last line cut off (a writer was appending?)"
READER_VERSION = 2       # which records become samples (in cache keys): 2 checks each replay


# ---------------------------------------------------------------- finding databases
def find_databases(path: str) -> List[str]:
    """The databases a path stands for, by the one rule of every reader
    (`extract.inputs.find_inputs`): itself (a database folder, or one of its two files),
    and every database folder below it, in walk order; [] when it holds none."""
    if os.path.isfile(path) and os.path.basename(path).lower() not in DATABASE_NAMES:
        return []
    try:
        return find_inputs(path).databases
    except FileNotFoundError:
        return []


def holds_databases(path: str) -> bool:
    return bool(find_databases(path))


class DamagedFile(RecordFormatError):
    """A database file unreadable from some line on (a truncated or corrupt .gz, a bad
    disk block); `source` names file:line, `reason` says what happened."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = source, reason


def database_lines(path: str) -> Iterator[Tuple[int, str, bool]]:
    """(line number, text, ended by a newline) of each non-empty line, plain or gzip. A
    file damaged part-way gives the lines before the damage, then raises DamagedFile
    naming the first line it cannot read."""
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise DamagedFile(f"{path}:1", f"unreadable ({e.strerror or type(e).__name__})") from None
    n = 0
    try:
        with raw:
            zipped = raw.read(2) == GZIP_MAGIC or path.lower().endswith(".gz")  # a .gz that is not: damaged
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if zipped else raw
            raw.seek(0)
            for n, line in enumerate(stream, 1):
                text = line.decode("utf-8", errors="replace")
                if text.strip():
                    yield n, text.strip(), text.endswith("\n")
    except (EOFError, OSError, zlib.error) as e:
        raise DamagedFile(f"{path}:{n + 1}", f"file damaged after line {n} ({type(e).__name__}: {e}); "
                                             f"the rest is unreadable") from None


def _readable_lines(path: str, report, skip_bad: bool, counts=None) -> Iterator[Tuple[int, str, bool]]:
    """`database_lines`; the damage of a damaged file is the error, or with `skip_bad`
    one counted skip after the lines before it."""
    try:
        yield from database_lines(path)
    except DamagedFile as e:
        if not skip_bad:
            raise
        report.skip(e.source, e.reason)
        if counts is not None:
            counts["skipped"] += 1


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


def replay(mod, trace_json: Any, text: Optional[str] = None):
    """The scheduled program of a record: its whole trace (postprocessing included, with
    its decisions) applied to a fresh schedule of the workload, as MetaSchedule replays
    records (see the module docstring). `trace_json`: the trace as JSON (a Python object
    or its text; `text`: its text when `trace_json` is the parsed object). Raises when the
    trace does not apply (ValueError: `check_trace`)."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    if isinstance(trace_json, str):
        text, trace_json = trace_json, json.loads(trace_json)
    check_trace(trace_json, text)
    sch = Schedule(mod, seed=None, debug_mask=0, error_render_level="fast")
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


TILE_INSTRUCTIONS = ("SamplePerfectTile", "SamplePartitionedTile")
# attributes TVM takes as optional (null): any other null attribute crashes its replay
OPTIONAL_ATTRIBUTES = {"TransformLayout": (2,)}  # its pad_value


def _holds_null(value: Any) -> bool:
    return value is None or (isinstance(value, list) and any(map(_holds_null, value)))


def _null_attribute(inst: List[Any]) -> bool:
    optional = OPTIONAL_ATTRIBUTES.get(inst[0], ())
    return any(_holds_null(a) for i, a in enumerate(inst[2]) if not (a is None and i in optional))


def check_trace(trace: Any, text: Optional[str] = None) -> None:
    """ValueError for a trace JSON that TVM's replay would crash on rather than reject (a
    segfault or a division by zero, taking the process down): not [instructions,
    decisions]; a null attribute (other than an optional one) or decision; a decision of
    no instruction of the trace, or two of one; a tile decision that is not a list of
    positive integers. `text`: the JSON text the trace was read from, if at hand (no
    `null` in it: nothing to look for)."""
    if not (type(trace) is list and len(trace) == 2 and type(trace[0]) is list and type(trace[1]) is list):
        raise ValueError("the trace is not [instructions, decisions]")
    insts, decisions = trace
    nulls = text is None or "null" in text
    for i, inst in enumerate(insts):
        if not (type(inst) is list and len(inst) == 4 and type(inst[0]) is str and type(inst[1]) is list
                and type(inst[2]) is list and type(inst[3]) is list):
            raise ValueError(f"trace instruction {i} is not [kind, inputs, attributes, outputs]")
        if nulls and _null_attribute(inst):
            raise ValueError(f"trace instruction {i} ({inst[0]}) has a null attribute")
    seen = set()
    for entry in decisions:
        if not (type(entry) is list and len(entry) == 2 and type(entry[0]) is int
                and 0 <= entry[0] < len(insts) and entry[0] not in seen):
            raise ValueError(f"trace decision {str(entry)[:60]} is not [index, decision] of an instruction of "
                             f"the trace (0…{len(insts) - 1}) not decided before")
        seen.add(entry[0])
        kind, value = insts[entry[0]][0], entry[1]
        if nulls and _holds_null(value):
            raise ValueError(f"instruction {entry[0]} ({kind}): a null decision")
        if kind in TILE_INSTRUCTIONS and not (type(value) is list and value
                                              and all(type(f) is int and f >= 1 for f in value)):
            raise ValueError(f"instruction {entry[0]} ({kind}): the decision {str(value)[:60]} is not a list "
                             f"of positive tile factors")


@functools.lru_cache(maxsize=64)
def workload_hash(workload_json: str) -> str:
    """`extract.metaschedule.store.schedule_hash` of a workload line's unscheduled IRModule."""
    from .store import schedule_hash

    return schedule_hash(workload_module(workload_json))


def _plain(value: Any) -> Any:
    """A decision or argument description as plain JSON values (TVM's IntImm, Array → int, list)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "value"):
        return value.value
    return [_plain(v) for v in value]


def _replayed_decisions(trace) -> Dict[int, Any]:
    """instruction index → decision of a replayed schedule's trace."""
    out = {}
    for i, inst in enumerate(trace.insts):
        decision = trace.get_decision(inst)
        if decision is not None:
            out[i] = _plain(decision)
    return out


def _args_text(args: Any) -> str:
    """`float32 1x32x32, float32 32x32` of an args_info JSON."""
    try:
        return ", ".join(f"{a[1]} {'x'.join(map(str, a[2]))}" for a in args)
    except (TypeError, IndexError):
        return json.dumps(args)[:120]


def replay_mismatch(sch, digest: str, job: "TraceJob", trace: List[Any]) -> Optional[str]:
    """Why a record's replayed program is not the program it measured, or None: its
    arguments (`args_info`, as MetaSchedule took them from the measured program) differ
    from the replayed program's (the record belongs to another workload: databases joined
    with `cat`, workload lines reordered); a decision differs from the stored one (TVM
    replaces a decision that is invalid for its loop, e.g. tile factors that do not
    multiply to the extent, without a word); or the trace samples nothing and leaves the
    workload as it was (an empty or edited trace: no schedule was measured). `trace`: the
    job's trace, parsed."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    if job.args_info:
        measured = json.loads(job.args_info)
        made = _plain([a.as_json() for a in ArgInfo.from_entry_func(sch.mod, True)])
        if measured != made:
            line = f" (line {job.workload_line} of {WORKLOAD_FILE})" if job.workload_line else ""
            return (f"the record belongs to another workload (databases joined with cat? workload lines "
                    f"reordered?): measured with arguments {_args_text(measured)}, its trace makes "
                    f"{_args_text(made)} of its workload{line}")
    stored = {int(i): _plain(d) for i, d in trace[1]}
    replayed = _replayed_decisions(sch.trace)
    if stored != replayed:
        i = min(k for k in set(stored) | set(replayed) if stored.get(k) != replayed.get(k))
        kind = trace[0][i][0] if i < len(trace[0]) else "?"
        return (f"instruction {i} ({kind}): the stored decision {stored.get(i)} is not valid for the "
                f"workload and TVM replaced it with {replayed.get(i)} on replay; the runtime is not the "
                f"replayed program's")
    if not stored and digest == workload_hash(job.workload):
        return ("the trace schedules nothing: replayed, it leaves the workload unchanged (an empty or "
                "edited trace), so the runtime is of no schedule it describes")
    return None


@dataclass(frozen=True)
class TraceJob:
    """One successful record to replay and extract (an `extract.schedules.ExtractionJob`),
    self-contained: the workload and trace as JSON text, so a spawned worker needs
    nothing else (the jobs of one workload share one string: pickled once per chunk)."""

    workload: str                    # the workload line, [structural hash, IRModule]
    trace: str                       # the trace's JSON
    run_secs: Tuple[float, ...]      # per repeat, seconds
    target: str                      # the target's JSON config
    group: str                       # extract.tir.workload_key.workload_key
    source: str                      # file:line (or database:index), for errors
    meta: Tuple[Tuple[str, Any], ...] = ()
    args_info: str = ""              # the record's args_info JSON ("": it has none)
    workload_line: int = 0           # the workload's line in its file (1-based; 0: unknown)

    def schedule(self):
        """The record's program: its trace replayed on its workload (`replay`), checked
        against the record (`replay_mismatch`); TraceError when either fails."""
        return self.checked_schedule()[0]

    def checked_schedule(self):
        """(schedule, `extract.metaschedule.store.schedule_hash` of its module) of `schedule`."""
        from .store import schedule_hash

        trace = json.loads(self.trace)
        try:
            check_trace(trace, self.trace)
        except ValueError as e:
            raise TraceError(str(e)) from None
        try:
            sch = replay(workload_module(self.workload), trace, self.trace)
        except Exception as e:  # noqa: BLE001 - the caller counts it as this record's skip
            raise TraceError(f"trace no longer applies: {_short(e)}") from None
        digest = schedule_hash(sch.mod)
        problem = replay_mismatch(sch, digest, self, trace)
        if problem is not None:
            raise TraceError(problem)
        return sch, digest

    def run(self, per_store: bool):
        from extract.autotvm.knob_features import trace_knobs
        from extract.schedules import extract_schedule

        sch, digest = self.checked_schedule()
        knobs = trace_knobs(self.trace, self.group, workload_flops(self.workload))
        tokens = trace_tokens(self.trace)
        meta = {**dict(self.meta), "mod_hash": digest, "knob_cut": knobs.cut,
                **({"trace_cut": tokens.cut} if tokens.cut else {}),
                **({"trace_unknown": tokens.unknown} if tokens.unknown else {})}
        extraction = extract_schedule(sch, target_of(self.target), self.run_secs, self.group,
                                      f"{self.group}/{digest}", meta, per_store)
        # the trace's decisions and the workload's shape: what knob-xgb reads (extract.autotvm.knob_features)
        extraction.sample.vectors["knob"] = knobs.vector[None, :]
        # its primitives, one token each: what tlp reads (extract.metaschedule.trace_tokens)
        extraction.sample.vectors[TRACE_TOKENS_VECTOR] = tokens.vector[None, :]
        return extraction


class TraceError(RuntimeError):
    """A record's trace does not apply to its workload, or its replay is not the program
    the record measured."""


# ---------------------------------------------------------------- reading a database
@dataclass
class _Workloads:
    """The workload lines of one database, by index: (text, IRModule, line number), or
    the reason the line could not be read."""

    path: str
    entries: List[Any]
    keys: Dict[Tuple[int, str], str]

    def key(self, index: int, target_json: str) -> str:
        from extract.tir.workload_key import workload_key

        k = (index, target_json)
        if k not in self.keys:
            self.keys[k] = workload_key(self.entries[index][1], target_of(target_json))
        return self.keys[k]


def _read_workloads(path: str, report, skip_bad: bool) -> _Workloads:
    from tvm.s_tir import meta_schedule as ms

    entries: List[Any] = []
    for n, text, ended in _readable_lines(path, report, skip_bad):
        try:
            mod = ms.database.Workload.from_json(_workload_row(text)).mod
            entries.append((text, mod, n))
        except Exception as e:  # noqa: BLE001 - any failure to parse is this line's
            why = str(e) if isinstance(e, ValueError) else _short(e)
            reason = CUT_OFF if not ended else f"not a MetaSchedule workload: {why}"
            if ended and not skip_bad:
                raise RecordFormatError(f"{path}:{n}: {reason}") from None
            report.skip(f"{path}:{n}", reason)
            entries.append(f"its workload, line {n} of {path}, could not be read")
    return _Workloads(path, entries, {})


def _workload_row(text: str) -> List[Any]:
    """A workload line's JSON, `[structural hash, IRModule]`, its hash key checked (TVM
    takes any text for it, and a database's lookups go by it)."""
    row = json.loads(text)
    key = row[0] if isinstance(row, list) and len(row) == 2 else None
    if not (isinstance(key, str) and key.isascii() and key.isdigit() and int(key) < 2 ** 64):
        raise ValueError(f"its key {str(key)[:40]!r} is not a structural hash (an unsigned 64-bit integer)"
                         if isinstance(row, list) and len(row) == 2 else "not [structural hash, IRModule]")
    return row


def _short(e: BaseException) -> str:
    from extract.schedules import one_line

    text, prefix = one_line(e, 200), f"{type(e).__name__}: "
    return text[len(prefix):] if text.startswith(prefix * 2) else text  # TVM's messages repeat the type


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


def _parse_record(text: str, workloads: _Workloads,
                  default_target: Optional[str]) -> Tuple[int, str, Any, str, str]:
    """(workload index, trace JSON text, run_secs as read, target JSON text, args_info JSON
    text or "") of one line."""
    row = json.loads(text)
    if not (isinstance(row, list) and len(row) == 2 and isinstance(row[1], list) and len(row[1]) >= 2):
        raise ValueError("not a tuning record ([workload index, [trace, run_secs, target, args_info]])")
    index, body = row
    if not (isinstance(index, int) and not isinstance(index, bool)) or not 0 <= index < len(workloads.entries):
        raise ValueError(f"workload index {index!r} is not a line of {os.path.basename(workloads.path)} "
                         f"({len(workloads.entries)} workloads)")
    if isinstance(workloads.entries[index], str):
        raise ValueError(workloads.entries[index])
    check_trace(body[0], text)
    target = body[2] if len(body) > 2 else None
    if target is None:
        if default_target is None:
            raise ValueError("the record names no target")
        target_text = default_target
    else:
        target_text = json.dumps(target, sort_keys=True)
        target_of(target_text)
    return index, json.dumps(body[0]), body[1], target_text, _args_json(body)


def _args_json(body: List[Any]) -> str:
    """A record's args_info as JSON text ("" when it has none: MetaSchedule allows it)."""
    return json.dumps(body[3]) if len(body) > 3 and body[3] is not None else ""


def read_database(folder: str, report, skip_bad: bool = False, default_target=None) -> List[TraceJob]:
    """The successful records of one database folder as extraction jobs, in line order;
    error records, bad lines and a cut-off last line counted in `report` (a
    `extract.log_report.LogReport`, per workload group and per record file). A bad line
    raises RecordFormatError naming file:line, unless `skip_bad`. `default_target`: for
    records that name none (MetaSchedule allows it)."""
    wl_path, rec_path = database_files(folder)
    workloads = _read_workloads(wl_path, report, skip_bad)
    default = None if default_target is None else json.dumps(_target_config(default_target), sort_keys=True)
    counts = report.per_file[rec_path]
    jobs: List[TraceJob] = []
    for n, text, ended in _readable_lines(rec_path, report, skip_bad, counts):
        source = f"{rec_path}:{n}"
        try:
            index, trace, secs, target, args = _parse_record(text, workloads, default)
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
        wl_text, _, wl_line = workloads.entries[index]
        jobs.append(TraceJob(wl_text, trace, run_secs, target, group, source, meta, args, wl_line))
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
        from extract.log_report import LogReport
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
        from extract.log_report import LogReport
        report = LogReport()
    counts = report.per_file[name]
    workloads: Dict[int, Tuple[str, _Workloads]] = {}
    jobs: List[TraceJob] = []
    for i, record in enumerate(db.get_all_tuning_records()):
        body = _json_of(_ffi_record_json(record))
        wl_handle = record.workload.__chandle__()
        if wl_handle not in workloads:
            text = json.dumps(_json_of(_ffi_workload_json(record.workload)))
            workloads[wl_handle] = (text, _Workloads(name, [(text, record.workload.mod, 0)], {}))
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
        jobs.append(TraceJob(text, json.dumps(body[0]), run_secs, target, group, f"{name}:{i}", meta,
                             _args_json(body)))
    return jobs, report


def database_samples(db, name: str = "database", per_store: bool = False, workers: int = 1,
                     progress: bool = False):
    """The samples of a `ms.database.Database` object or a database folder (its successful
    records; a trace that does not apply is left out and counted in the report), and the
    report."""
    from extract.schedules import JobFailed, extract_many

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
