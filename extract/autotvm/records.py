"""AutoTVM tuning-log records: read both JSON formats, write v0.2.

v0.2 (TVM ≥ 0.7)::

    {"input": [target, task_name, task_args, task_kwargs],
     "config": {"index": 7, "code_hash": null, "entity": [["tile_ic", "sp", [-1, 16]], ...]},
     "result": [[cost_s, ...], error_no, all_cost_s, timestamp], "version": 0.2, ...}

v0.1 (TVM 0.5/0.6)::

    {"i": [target, task_name, task_args, task_kwargs, workload, {"i": 7, "t": "", "c": null,
           "e": [...]}], "r": [[cost_s, ...], error_no, all_cost_s, timestamp], "v": 0.1}

`costs` holds one mean per repeat; an error record has error_no ≠ 0 (AutoTVM's
MeasureErrorNo) and its costs are a placeholder.

Every field is checked as it is read, and a record that fails a check is a bad line
(`RecordFormatError` naming file:line, or counted with `skip_bad`), never a record with
a wrong value: the target names a kind; the config index is a non-negative integer;
error_no a non-negative integer; all_cost and the timestamp finite non-negative numbers;
and a successful record's costs numbers (a JSON `true` is not 1 s) in
[`MIN_COST_S`, `MAX_COST_S`] (no NaN, Infinity, zero, negative, or AutoTVM's 1e9
placeholder). Whether the task args and the config entity make a workload and a config
of a template's space is checked by `extract.tvm_log.record_job`.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

# AutoTVM's MeasureErrorNo
NO_ERROR = 0
INSTANTIATION_ERROR = 1
COMPILE_HOST = 2
COMPILE_DEVICE = 3
RUNTIME_DEVICE = 4
WRONG_ANSWER = 5
BUILD_TIMEOUT = 6
RUN_TIMEOUT = 7
UNKNOWN_ERROR = 8
ERROR_NAMES = {0: "no error", 1: "instantiation error", 2: "compile error (host)",
               3: "compile error (device)", 4: "runtime error", 5: "wrong answer",
               6: "build timeout", 7: "run timeout", 8: "unknown error"}


@dataclass
class MeasureRecord:
    target: Any
    task_name: str
    task_args: List[Any]
    config_index: int
    entity: List[List[Any]]
    costs: List[float]
    error_no: int = NO_ERROR
    all_cost: float = 0.0
    timestamp: float = 0.0
    error_msg: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)
    source: str = ""  # "file:line" it was read from

    @property
    def ok(self) -> bool:
        return self.error_no == NO_ERROR

    def to_json(self) -> str:
        record = {
            "input": [self.target, self.task_name, self.task_args, {}],
            "config": {"index": self.config_index, "code_hash": None, "entity": self.entity},
            "result": [self.costs, self.error_no, self.all_cost, self.timestamp],
            "version": 0.2,
        }
        if self.error_msg:
            record["error_msg"] = self.error_msg
        record.update(self.extra)
        return json.dumps(record)


class RecordFormatError(ValueError):
    """A line that is not an AutoTVM record; the message names file and line."""


# A measured runtime outside these bounds is not a measurement: AutoTVM writes 1e9 s as
# an error's placeholder, and nothing runs in under a nanosecond.
MIN_COST_S = 1e-9
MAX_COST_S = 1e4
MAX_ALL_COST_S = 1e7     # seconds one measurement took (build + run), ~4 months
MAX_TIMESTAMP = 1e11     # Unix seconds, year ~5000


def is_number(value: Any) -> bool:
    """A JSON number: int or float, not a bool (`true` is not 1 s)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    if not is_number(value):
        raise ValueError(f"{what} {value!r} is not a number")
    value = float(value)
    if not math.isfinite(value) or (value <= lo if lo_open else value < lo) or value > hi:
        bounds = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise ValueError(f"{what} {value!r} is outside {bounds}")
    return value


def _list(value: Any, what: str, min_len: int = 0) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{what} is a {_json_type(value)}, not a list")
    if len(value) < min_len:
        raise ValueError(f"{what} has {len(value)} items, fewer than {min_len}")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number" if is_number(value) else type(value).__name__)


def target_kind(target: Any) -> str:
    """The kind of an AutoTVM record's target (`llvm`, `cuda`, …): of a target string
    (`"llvm -mcpu=znver3"`, `"cuda -arch=sm_80"`), its JSON form (`'{"kind": "llvm", …}'`,
    TVM ≥ 0.20) or a dict; ValueError for anything else."""
    if isinstance(target, str) and target.strip().startswith("{"):
        try:
            target = json.loads(target)
        except ValueError:
            raise ValueError(f"target {target[:60]!r} is not a target string or its JSON") from None
    if isinstance(target, dict):
        kind = target.get("kind")
        if isinstance(kind, dict):  # {"kind": {"name": "llvm"}} in some serialisations
            kind = kind.get("name")
    elif isinstance(target, str) and target.split():
        kind = target.split()[0]
    else:
        kind = None
    if not isinstance(kind, str) or not re.fullmatch(r"[A-Za-z][\w.-]*", kind):
        raise ValueError(f"target {str(target)[:60]!r} names no target kind")
    return kind


def _parse(obj: Any) -> MeasureRecord:
    """One record, every field checked (see the module docstring)."""
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {_json_type(obj)}, not an object")
    if "input" in obj:  # v0.2
        inputs = _list(obj["input"], "input", 3)
        config = obj.get("config")
        if not isinstance(config, dict):
            raise ValueError(f"config is a {_json_type(config)}, not an object")
        index, entity = config.get("index"), config.get("entity")
        result = obj.get("result")
    elif "i" in obj:  # v0.1
        inputs = _list(obj["i"], "i (input)", 6)
        config = inputs[5]
        if not isinstance(config, dict):
            raise ValueError(f"i[5] (config) is a {_json_type(config)}, not an object")
        index, entity = config.get("i"), config.get("e")
        result = obj.get("r")
    else:
        raise ValueError("neither v0.2 keys ('input', 'config', 'result') nor v0.1 ('i', 'r')")
    target, task_name, task_args = inputs[0], inputs[1], inputs[2]
    target_kind(target)
    if not isinstance(task_name, str):
        raise ValueError(f"task name {task_name!r} is not a string")
    _list(task_args, "task args")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"config index {index!r} is not a non-negative integer")
    _list(entity, "config entity")
    result = _list(result, "result", 4)
    if len(result) != 4:
        raise ValueError(f"result has {len(result)} items, not [costs, error_no, all_cost, timestamp]")
    costs, error_no, all_cost, timestamp = result
    costs = _list(costs, "costs")
    if not isinstance(error_no, int) or isinstance(error_no, bool) or error_no < 0:
        raise ValueError(f"error_no {error_no!r} is not a non-negative integer")
    all_cost = _number(all_cost, "all_cost", 0.0, MAX_ALL_COST_S)
    timestamp = _number(timestamp, "timestamp", 0.0, MAX_TIMESTAMP)
    if error_no == NO_ERROR:
        if not costs:
            raise ValueError("successful record with no costs")
        costs = [_number(c, "cost", MIN_COST_S, MAX_COST_S) for c in costs]
    else:  # an error's costs are a placeholder (a number, or the exception's text)
        costs = [float(c) if is_number(c) else float("nan") for c in costs]
    error_msg = obj.get("error_msg", "")
    known = {"input", "config", "result", "version", "tvm_version", "i", "r", "v", "error_msg"}
    return MeasureRecord(target, task_name, list(task_args), index, entity, costs,
                         error_no, all_cost, timestamp, error_msg if isinstance(error_msg, str) else str(error_msg),
                         {k: v for k, v in obj.items() if k not in known})


GZIP_MAGIC = b"\x1f\x8b"


def _open_binary(path: str) -> IO[bytes]:
    """The log's bytes: gzip-compressed (known by its magic bytes, whatever the suffix) or plain."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise RecordFormatError(f"{path}: unreadable log ({e.strerror or type(e).__name__})") from None
    if f.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=f, mode="rb")  # closing it leaves f open: closed by the caller
    return f


def read_records(path: str, skip_bad: bool = False,
                 bad: Optional[List[Tuple[str, int, str]]] = None) -> Iterator[MeasureRecord]:
    """Yield the records of one log (plain or gzip). A bad line raises RecordFormatError
    naming file:line, or with skip_bad is appended to `bad` as (path, line, reason).
    A log damaged part-way (a truncated or corrupt .gz, an unreadable disk block) ends
    there: the records before the damage are kept under skip_bad (the damage is one
    entry of `bad`), else it is an error naming file:line."""
    stream = _open_binary(path)
    raw = stream if not isinstance(stream, gzip.GzipFile) else stream.fileobj
    line_no = 0
    try:
        lines = iter(stream)
        while True:
            try:
                data = next(lines)
            except StopIteration:
                return
            except (EOFError, OSError, zlib.error) as e:  # damaged .gz, I/O error mid-file
                reason = f"log damaged after line {line_no} ({type(e).__name__}: {e}); the rest is unreadable"
                if not skip_bad:
                    raise RecordFormatError(f"{path}:{line_no + 1}: {reason}") from None
                if bad is not None:
                    bad.append((path, line_no + 1, reason))
                return
            line_no += 1
            record = _record_of_line(data, path, line_no, skip_bad, bad)
            if record is not None:
                yield record
    finally:
        stream.close()
        raw.close()


def _record_of_line(data: bytes, path: str, line_no: int, skip_bad: bool, bad) -> Optional[MeasureRecord]:
    try:
        line = data.decode("utf-8").strip()
        if not line or line.startswith("#"):
            return None
        record = _parse(json.loads(line))
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
        reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        if not skip_bad:
            raise RecordFormatError(f"{path}:{line_no}: not an AutoTVM record: {reason}") from None
        if bad is not None:
            bad.append((path, line_no, reason))
        return None
    record.source = f"{path}:{line_no}"
    return record


LOG_SUFFIXES = (".json", ".jsonl", ".log")
REPORT_NAME = "report.json"  # what extract.tvm_log writes beside its collections


def is_log_name(name: str) -> bool:
    """A tuning log's file name: *.json, *.jsonl, *.log, or .gz of them, in any case;
    not a hidden file (e.g. a `.x.partial` another writer is making)."""
    name = name.lower()
    if name.startswith("."):
        return False
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(LOG_SUFFIXES)


def is_output_report(path: str) -> bool:
    """Whether `path` is a report.json that extract.tvm_log wrote (not a tuning log)."""
    if os.path.basename(path).lower() != REPORT_NAME:
        return False
    try:
        with open(path, "r", encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and (obj.get("tool") == "extract.tvm_log"
                                      or {"extractor", "samples", "errors"} <= set(obj))
