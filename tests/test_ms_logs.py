"""Append-only logs that survive kill -9 (extract.metaschedule.jsonl) and the progress line (extract.metaschedule.progress)."""
import io
import json

from extract.metaschedule.jsonl import JsonlLog, read_jsonl, repair_truncated
from extract.metaschedule.progress import Counts, Progress


def test_cut_off_line_is_ignored_then_repaired(tmp_path):
    path = str(tmp_path / "log.jsonl")
    with JsonlLog(path) as log:
        log.append({"a": 1})
        log.append({"a": 2})
    with open(path, "a") as f:
        f.write('{"a": 3, "b"')  # a kill in the middle of a write
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    with JsonlLog(path) as log:  # opening repairs before appending
        log.append({"a": 4})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 4}]
    assert repair_truncated(path) == 0
    assert [json.loads(l) for l in open(path)] == [{"a": 1}, {"a": 2}, {"a": 4}]


def test_a_damaged_line_is_named_and_a_gzipped_log_reads_the_same(tmp_path):
    import gzip

    import pytest
    path = str(tmp_path / "log.jsonl")
    with open(path, "w") as f:
        f.write('{"a": 1}\n{"a": 2\n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"log\.jsonl:2: not a JSON line"):
        read_jsonl(path)
    with gzip.open(path + ".gz", "wt") as f:
        f.write('{"a": 1}\n{"a": 2}\n{"a": 3')      # a cut-off last line, left out as in a plain log
    assert read_jsonl(path + ".gz") == [{"a": 1}, {"a": 2}]


def test_progress_lines_are_throttled_off_a_terminal():
    out = io.StringIO()
    progress = Progress(Counts(tasks_total=3, planned=10), stream=out, every_s=3600)
    progress.show()
    progress.add(4, 1)
    progress.show("softmax random 4/5")  # within every_s: not written
    progress.show(force=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert "records 4/10 (valid 3, errors 1)" in lines[1] and "ETA" in lines[1]


def test_warnings_are_rate_limited():
    out = io.StringIO()
    progress = Progress(Counts(), stream=out)
    for _ in range(3):
        progress.warning("measuring core busy: 90%", every_s=3600)
    progress.warning("another kind: x", every_s=3600)
    assert out.getvalue().count("measuring core busy") == 1 and "another kind" in out.getvalue()
