"""What the paths given to a reader stand for: one rule for every reader of tuning data.

    found = find_inputs("work/")   # .databases, .logs, .collections, .passed_over

`extract.tvm_log`, `datasets.load_collection` (so `simulator.train --data`, `simulator.predict`)
and `extract.metaschedule.database.find_databases` all find their inputs here, so a path gives the same
databases and logs through every command. Everything found is read, or named with the reason
it is not (`Found.passed_over`, printed by the commands and kept in `extract.tvm_log`'s
report.json):

* a MetaSchedule database: a folder holding `database_workload.json` and
  `database_tuning_record.json` (plain or .gz). Its subfolders are walked too: databases
  below a database are read. One of the two files without the other is passed over.
* an AutoTVM log: `*.json`, `*.jsonl`, `*.log`, or .gz of them, in any case.
* a sample collection: `*.npz` (`extract.tvm_log` passes them over: they are extracted
  samples, for `simulator.train --data`).
* a networks dataset folder (`datasets.networks`: a task table `tasks.json[.gz]` beside
  a `pass1/` folder): pass 1's databases only. Its other passes re-time schedules pass 1
  has (the noise ceiling), and its side files are no tuning data: passed over.
* a pass folder's sidecar and state (`records.jsonl`, `state.json` beside the folders of
  its databases, written by `extract.metaschedule.store`), the `report.json` that `extract.tvm_log`
  writes beside its collections, MetaSchedule's text logs (`logs/tvm.….meta_schedule.logging.….log`
  in its work folder), and a `.json` file holding one JSON document that is not a record
  (a summary, a config): passed over.
* anything else (README.md, a .tar, a checkpoint, a link to a folder): passed over.
* hidden files and folders (`.name`: a file another writer is making, a lock) are not
  looked at.

A file and its `.gz` twin in one folder (`log.jsonl` + `log.jsonl.gz`,
`database_workload.json` + `database_workload.json.gz`): when they hold the same bytes
(uncompressed) the plain one is read and the twin passed over; when they differ,
`InputError`, naming both — which one is current is not for a reader to guess.

A file named directly is read as what its name says, any other name as an AutoTVM log;
a database file names its database (its folder). A `.py` file is refused (a TVMScript
file is tuned with `simulator.tune`, not read as data).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .autotvm.records import GZIP_MAGIC, RecordFormatError, is_log_name, is_output_report

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
DATABASE_FILES = (WORKLOAD_FILE, RECORD_FILE)  # a MetaSchedule JSONDatabase in one folder
DATABASE_NAMES = {WORKLOAD_FILE, WORKLOAD_FILE + ".gz", RECORD_FILE, RECORD_FILE + ".gz"}
TASK_TABLE = "tasks.json"               # a networks dataset's task table (extract.metaschedule.tasks)
FIRST_PASS = "pass1"                    # a networks dataset's training data
SIDECAR = "records.jsonl"               # a pass folder's sidecar (extract.metaschedule.store)
PASS_STATE = "state.json"               # a pass folder's state (extract.metaschedule.store)

SAME_AS = "the same content as {}: read once"
OTHER_PASS = "a re-measuring pass of the networks dataset, for its noise ceiling; only pass1 is training data"
DATASET_FILE = "part of the networks dataset (task table, reference timings, summary), not tuning data"
PASS_FILE = "the sidecar or state of a measuring pass (extract.metaschedule.store), not a tuning log"
OUTPUT_REPORT = "a report of an earlier run, not a log"
TEXT_LOG = "MetaSchedule's text log of its tuning messages, not a tuning log"
JSON_DOCUMENT = "a JSON document, not a tuning log (one record per line)"
MAX_SNIFF_BYTES = 64 << 20   # a larger .json is taken for a log without looking
HALF_DATABASE = "half a MetaSchedule database: no {} beside it"
FOLDER_LINK = "a link to a folder: not followed (name the folder itself)"
NOT_DATA = "not a tuning log, database or sample collection (by its name)"


class InputError(RecordFormatError):
    """An input that cannot be read as given; the message names the path and why."""


@dataclass
class Found:
    """What one given path stands for."""

    path: str
    databases: List[str] = field(default_factory=list)     # database folders, in walk order
    logs: List[str] = field(default_factory=list)          # AutoTVM logs
    collections: List[str] = field(default_factory=list)   # sample collections (*.npz)
    passed_over: List[Tuple[str, str]] = field(default_factory=list)  # (path, why it is not read)
    already: int = 0    # databases, logs and collections read from an earlier path (`find_all`)

    @property
    def data_files(self) -> List[str]:
        """The files read: both files of every database, and the logs."""
        return [f for db in self.databases for f in database_files(db)] + self.logs


# ---------------------------------------------------------------- a file and its .gz twin
def _text_bytes(path: str):
    """The bytes of a file, gunzipped when it is gzip (told by its first bytes)."""
    raw = open(path, "rb")
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb")
    raw.seek(0)
    return raw


def same_content(a: str, b: str) -> bool:
    """Whether two files hold the same bytes once uncompressed (a damaged .gz: False)."""
    try:
        with _text_bytes(a) as fa, _text_bytes(b) as fb:
            while True:
                chunk_a, chunk_b = fa.read(1 << 20), fb.read(1 << 20)
                if chunk_a != chunk_b:
                    return False
                if not chunk_a:
                    return True
    except (EOFError, OSError, zlib.error):
        return False


def _twin_error(plain: str, zipped: str) -> InputError:
    return InputError(f"{os.path.dirname(plain) or '.'}: holds both {os.path.basename(plain)} and "
                      f"{os.path.basename(zipped)} with different contents; which one is current is not for "
                      f"a reader to guess: remove or rename one")


def untwin(folder: str, names: Sequence[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The names of a folder to read, and the .gz twins passed over (see the module
    docstring); InputError for twins whose contents differ."""
    by_lower = {n.lower(): n for n in names}
    keep, twins = [], []
    for name in names:
        plain = by_lower.get(name.lower()[:-3]) if name.lower().endswith(".gz") else None
        if plain is None:
            keep.append(name)
            continue
        a, b = os.path.join(folder, plain), os.path.join(folder, name)
        if not same_content(a, b):
            raise _twin_error(a, b)
        twins.append((b, SAME_AS.format(a)))
    return keep, twins


def is_json_document(path: str) -> bool:
    """A file holding one JSON value that is not an AutoTVM record (a summary, a config,
    a task table), rather than a log of one record per line."""
    try:
        with _text_bytes(path) as f:
            data = f.read(MAX_SNIFF_BYTES + 1)
        if len(data) > MAX_SNIFF_BYTES:
            return False
        value = json.loads(data)
    except (OSError, EOFError, zlib.error, ValueError):  # unreadable, or not one JSON value: a log
        return False
    return not (isinstance(value, dict) and ("input" in value or "i" in value))


def pick_file(folder: str, name: str) -> Optional[str]:
    """`folder/name` or `folder/name.gz`, whichever exists (the plain one when both hold
    the same content; InputError when they differ); None when neither does."""
    plain, zipped = os.path.join(folder, name), os.path.join(folder, name + ".gz")
    if os.path.isfile(plain) and os.path.isfile(zipped):
        if not same_content(plain, zipped):
            raise _twin_error(plain, zipped)
        return plain
    return plain if os.path.isfile(plain) else zipped if os.path.isfile(zipped) else None


# ---------------------------------------------------------------- databases
def database_files(folder: str) -> Tuple[str, str]:
    """(workload file, record file) of a database folder (FileNotFoundError: it is none)."""
    workloads, records = pick_file(folder, WORKLOAD_FILE), pick_file(folder, RECORD_FILE)
    if workloads is None or records is None:
        raise FileNotFoundError(f"{folder}: not a MetaSchedule database (needs {WORKLOAD_FILE} and {RECORD_FILE})")
    return workloads, records


def is_database_dir(path: str) -> bool:
    """A folder holding a MetaSchedule JSONDatabase (both files, plain or gzipped)."""
    return (os.path.isdir(path) and pick_file(path, WORKLOAD_FILE) is not None
            and pick_file(path, RECORD_FILE) is not None)


def is_record_file(path: str) -> bool:
    """A database's record file (`database_tuning_record.json[.gz]`)."""
    return os.path.basename(path).lower() in (RECORD_FILE, RECORD_FILE + ".gz")


def is_networks_dataset(folder: str) -> bool:
    """A folder of the networks dataset's layout: a task table beside a first pass."""
    return (os.path.isdir(folder) and os.path.isdir(os.path.join(folder, FIRST_PASS))
            and any(os.path.isfile(os.path.join(folder, n)) for n in (TASK_TABLE, TASK_TABLE + ".gz")))


# ---------------------------------------------------------------- walking
def find_inputs(path: str) -> Found:
    """What `path` stands for (see the module docstring). FileNotFoundError for a path
    that does not exist; InputError for one that cannot be read as given."""
    found = Found(path)
    if os.path.isdir(path):
        _walk(path, found)
        found.logs.sort()
        found.collections.sort()
    elif os.path.isfile(path):
        _named_file(path, found)
    else:
        raise FileNotFoundError(f"{path}: no such log file or folder")
    return found


def _named_file(path: str, found: Found) -> None:
    name = os.path.basename(path).lower()
    if name in DATABASE_NAMES:
        folder = os.path.dirname(path) or "."
        other = RECORD_FILE if name.startswith(WORKLOAD_FILE) else WORKLOAD_FILE
        if pick_file(folder, other) is None or pick_file(folder, name.rsplit(".gz", 1)[0]) is None:
            raise InputError(f"{path}: {HALF_DATABASE.format(other + '[.gz]')}")
        found.databases.append(folder)
    elif name.endswith(".npz"):
        found.collections.append(path)
    elif is_output_report(path):
        raise InputError(f"{path}: a report written by extract.tvm_log, not a tuning log")
    elif name.endswith(".py"):
        raise InputError(f"{path}: a Python (TVMScript) file, not a tuning log, database or sample "
                         f"collection; simulator.tune tunes the PrimFuncs of a TVMScript file")
    else:
        found.logs.append(path)


def _walk(folder: str, found: Found) -> None:
    entries = sorted((e for e in os.scandir(folder) if not e.name.startswith(".")), key=lambda e: e.name)
    links = [e for e in entries if e.is_symlink() and e.is_dir()]
    found.passed_over += [(e.path, FOLDER_LINK) for e in links]
    dirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
    if is_networks_dataset(folder):
        for e in entries:
            if e.name == FIRST_PASS and e in dirs:
                _walk(e.path, found)
            elif e not in links:
                found.passed_over.append((e.path, OTHER_PASS if e in dirs and re.fullmatch(r"pass\d+", e.name)
                                          else DATASET_FILE))
        return
    names, twins = untwin(folder, [e.name for e in entries if e.is_file()])
    found.passed_over += twins
    is_database = is_database_dir(folder)
    if is_database:
        found.databases.append(folder)
    is_pass_folder = any(is_database_dir(d.path) for d in dirs)
    for name in names:
        _found_file(os.path.join(folder, name), name.lower(), is_database, is_pass_folder, found)
    for d in dirs:
        _walk(d.path, found)


def _found_file(path: str, name: str, in_database: bool, in_pass_folder: bool, found: Found) -> None:
    if name in DATABASE_NAMES:
        if not in_database:
            other = RECORD_FILE if name.startswith(WORKLOAD_FILE) else WORKLOAD_FILE
            found.passed_over.append((path, HALF_DATABASE.format(other + "[.gz]")))
    elif in_pass_folder and name in (SIDECAR, SIDECAR + ".gz", PASS_STATE):
        found.passed_over.append((path, PASS_FILE))
    elif name.endswith(".npz"):
        found.collections.append(path)
    elif is_log_name(name):
        if is_output_report(path):
            found.passed_over.append((path, OUTPUT_REPORT))
        elif re.fullmatch(r"tvm\..*meta_schedule\.logging\..*\.log", name):
            found.passed_over.append((path, TEXT_LOG))
        elif name.endswith((".json", ".json.gz")) and is_json_document(path):
            found.passed_over.append((path, JSON_DOCUMENT))
        else:
            found.logs.append(path)
    else:
        found.passed_over.append((path, NOT_DATA))


def find_all(paths: Sequence[str]) -> List[Found]:
    """`find_inputs` of each path, each database, log and collection in the first path
    that finds it only (a path given twice, a file inside a folder also given)."""
    seen = set()
    out = []
    for path in paths:
        found = find_inputs(path)
        for kind in ("databases", "logs", "collections"):
            kept = []
            for p in getattr(found, kind):
                real = os.path.realpath(p)
                if real not in seen:
                    seen.add(real)
                    kept.append(p)
            found.already += len(getattr(found, kind)) - len(kept)
            setattr(found, kind, kept)
        out.append(found)
    return out


def passed_over_lines(items: Sequence[Tuple[str, str]], limit: int = 3) -> List[str]:
    """One line per reason: `passed over PATH: why`, `passed over A, B, C (and 2 more): why`."""
    by_reason: Dict[str, List[str]] = {}
    for path, why in items:
        by_reason.setdefault(why, []).append(path)
    lines = []
    for why, paths in by_reason.items():
        more = f" (and {len(paths) - limit} more)" if len(paths) > limit else ""
        lines.append(f"passed over {', '.join(paths[:limit])}{more}: {why}")
    return lines
