"""Append-only JSON-lines logs that survive `kill -9`, and repair of MetaSchedule's files.

The measurement's sidecar (`records.jsonl`), its reference timings (`reference.jsonl`) and
MetaSchedule's own `JSONDatabase` files all grow one line per event while a run may be
killed at any moment. Whole-file atomic replacement (`extract.fileio.atomic_write`) does
not suit files appended to thousands of times, so these logs follow the other rule that
makes a kill harmless: every line is written with one `write`, flushed and fsynced, and a
reader (or the next run, through `repair_truncated`) drops a last line that a kill cut off.
"""
from __future__ import annotations

import gzip
import json
import os
from typing import Dict, Iterator, List


def repair_truncated(path: str) -> int:
    """Cut a last line that has no newline (a write cut off by a kill); bytes removed."""
    if not os.path.exists(path):
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return len(data) - keep


class JsonlLog:
    """Append JSON objects as lines; the file is repaired when opened."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        repair_truncated(path)
        self._file = open(path, "a", encoding="utf-8")

    def append(self, row: Dict) -> None:
        self._file.write(json.dumps(row, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "JsonlLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_jsonl(path: str) -> List[Dict]:
    """Every complete line of a log (a cut-off last line is left out), gunzipped when its
    name ends in `.gz` (a shipped log); [] if missing."""
    return list(iter_jsonl(path))


def iter_jsonl(path: str) -> Iterator[Dict]:
    if not os.path.exists(path):
        return
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not a JSON line ({e.msg}); the log is damaged "
                                     f"there (only a cut-off last line is expected)") from None
