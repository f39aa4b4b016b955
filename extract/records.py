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
"""
from __future__ import annotations

import gzip
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

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


def _parse(obj: Dict[str, Any]) -> MeasureRecord:
    if "input" in obj:  # v0.2
        target, task_name, task_args = obj["input"][0], obj["input"][1], obj["input"][2]
        config = obj["config"]
        index, entity = config["index"], config["entity"]
        result = obj["result"]
    elif "i" in obj:  # v0.1
        target, task_name, task_args = obj["i"][0], obj["i"][1], obj["i"][2]
        config = obj["i"][5]
        index, entity = config["i"], config["e"]
        result = obj["r"]
    else:
        raise ValueError("neither v0.2 keys ('input', 'config', 'result') nor v0.1 ('i', 'r')")
    if not isinstance(task_name, str):
        raise ValueError(f"task name {task_name!r} is not a string")
    if not isinstance(entity, list):
        raise ValueError("config entity is not a list")
    costs, error_no, all_cost, timestamp = result
    if not isinstance(error_no, int):
        raise ValueError(f"error_no {error_no!r} is not an integer")
    costs = [float(c) if isinstance(c, (int, float)) else float("nan") for c in costs]
    if error_no == NO_ERROR and (not costs or any(not (c > 0) for c in costs)):
        raise ValueError(f"successful record with invalid costs {result[0]!r}")
    known = {"input", "config", "result", "version", "tvm_version", "i", "r", "v", "error_msg"}
    return MeasureRecord(target, task_name, list(task_args), int(index), entity, costs,
                         error_no, float(all_cost), float(timestamp), obj.get("error_msg", ""),
                         {k: v for k, v in obj.items() if k not in known})


def _open_text(path: str) -> io.TextIOBase:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_records(path: str, skip_bad: bool = False,
                 bad: Optional[List[Tuple[str, int, str]]] = None) -> Iterator[MeasureRecord]:
    """Yield the records of one log (plain or .gz). A bad line raises RecordFormatError
    naming file:line, or with skip_bad is appended to `bad` as (path, line, reason)."""
    try:
        with _open_text(path) as f:
            yield from _records_of(f, path, skip_bad, bad)
    except (EOFError, OSError, UnicodeDecodeError) as e:  # truncated .gz, binary junk
        raise RecordFormatError(f"{path}: unreadable log ({type(e).__name__}: {e})") from None


def _records_of(f, path: str, skip_bad: bool, bad) -> Iterator[MeasureRecord]:
    for line_no, line in enumerate(f, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            record = _parse(json.loads(line))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            reason = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
            if not skip_bad:
                raise RecordFormatError(f"{path}:{line_no}: not an AutoTVM record: {reason}") from None
            if bad is not None:
                bad.append((path, line_no, reason))
            continue
        record.source = f"{path}:{line_no}"
        yield record


def log_files(paths: List[str]) -> List[str]:
    """Expand folders into the log files they hold (*.json, *.jsonl, *.log, and .gz of them)."""
    suffixes = (".json", ".jsonl", ".log", ".json.gz", ".jsonl.gz", ".log.gz")
    files: List[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(root, name) for root, _, names in os.walk(path)
                           for name in names if name.endswith(suffixes))
            if not found:
                raise FileNotFoundError(f"{path}: folder holds no tuning logs ({', '.join(suffixes)})")
            files.extend(found)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such log file or folder")
    return files
