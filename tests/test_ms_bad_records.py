"""MetaSchedule databases: no measurement attached to the wrong program, no traceback.

Class 1 (a record's runtime attached to another program): databases joined with `cat`,
reordered workload lines, a tile decision TVM replaces on replay, a trace that schedules
nothing. Class 4 (tracebacks): a damaged or truncated `.gz` database, a malformed
workload line, a TVMScript file given as data. Every case is a counted skip naming
file:line with `--skip-bad`, a one-line error without it. Property-based (`hypothesis`)
where it fits: permutations of workload lines, any tile decision, any cut or flipped byte
of a gzipped database."""
import functools
import gzip
import json
import math
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import MS_SMALL, ROOT

from extract import tvm_log
from extract.autotvm.records import RecordFormatError
from extract.metaschedule.database import TraceError, _plain, read_databases

SMALL_RANDOM = os.path.join(MS_SMALL, "random")            # pool, conv 384→96, conv 960→320: 36 records
TINY_RANDOM = os.path.join(ROOT, "tests", "data", "networks_tiny", "pass1", "random")  # 3 others: 12 records
QUICK = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def lines_of(folder, name):
    with gzip.open(os.path.join(folder, name + ".json.gz"), "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def write_db(folder: Path, workloads, records, zipped=False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("database_workload.json", workloads), ("database_tuning_record.json", records)):
        data = "".join(line + "\n" for line in lines).encode()
        (folder / (name + ".gz" if zipped else name)).write_bytes(gzip.compress(data, mtime=0) if zipped else data)
    return folder


def extract(db, out, *flags):
    return tvm_log.main([str(db), "--out", str(out), "--workers", "1", "--no-per-store", *flags])


def one_error_line(capsys) -> str:
    """The one error line on stderr (after progress lines), no traceback."""
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1 and err[-1] == errors[0] and "Traceback" not in "\n".join(err), err
    return errors[0]


def record_index(job) -> int:
    """The workload index a job's record line holds (its position in the record file)."""
    return int(job.source.rpartition(":")[2])


# ---------------------------------------------------------------- class 1: joined, reordered
def test_two_databases_joined_with_cat_are_not_grouped_wrong(tmp_path, capsys):
    """`cat a/database_*.json b/database_*.json`: b's records point at a's workload lines.
    Before, every b record became a sample of a's groups. Now each is named (line 37 on),
    an error without --skip-bad and a counted skip with it; a's records are unchanged."""
    a_w, a_r = lines_of(SMALL_RANDOM, "database_workload"), lines_of(SMALL_RANDOM, "database_tuning_record")
    b_w, b_r = lines_of(TINY_RANDOM, "database_workload"), lines_of(TINY_RANDOM, "database_tuning_record")
    # and b's own workload lines rotated (b alone stays valid): conv records land on the other conv
    rotate = {0: 1, 1: 2, 2: 0}
    e_w = lines_of(os.path.join(MS_SMALL, "evolutionary"), "database_workload")
    e_r = lines_of(os.path.join(MS_SMALL, "evolutionary"), "database_tuning_record")
    e_w = [e_w[2], e_w[0], e_w[1]]
    e_r = [json.dumps([rotate[json.loads(r)[0]], json.loads(r)[1]]) for r in e_r]
    db = write_db(tmp_path / "joined", a_w + b_w + e_w, a_r + b_r + e_r)
    rec = db / "database_tuning_record.json"
    assert extract(db, tmp_path / "out") == 2
    assert re.match(rf"error: {re.escape(str(rec))}:37: ", one_error_line(capsys))
    assert not (tmp_path / "out" / "report.json").exists()

    assert extract(db, tmp_path / "out", "--skip-bad") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    skipped = {line: reason for _, line, reason in report["bad_lines"]}
    assert sorted(skipped) == list(range(37, 37 + len(b_r) + len(e_r)))
    assert all(("belongs to another workload" in r or "no longer applies" in r) for r in skipped.values())
    # the 384→96 conv's records now name the 960→320 conv's line: the trace applies, the arguments differ
    conv_on_conv = [skipped[37 + len(b_r) + n] for n, r in enumerate(e_r) if json.loads(r)[0] == 2]
    assert len(conv_on_conv) == 12 and all("belongs to another workload" in r for r in conv_on_conv)
    alone, _ = read_databases([SMALL_RANDOM])
    assert report["samples"] == {g: sum(j.group == g for j in alone) for g in {j.group for j in alone}}
    assert f"{db}: 1 database: {len(a_r) + len(b_r) + len(e_r)} records → 36 samples" in capsys.readouterr().out


@pytest.fixture(scope="module")
def six_workloads(tmp_path_factory):
    """One valid database of six workloads (ms_small's random and networks_tiny's random,
    re-indexed): its workload lines and record lines."""
    a_w, a_r = lines_of(SMALL_RANDOM, "database_workload"), lines_of(SMALL_RANDOM, "database_tuning_record")
    b_w, b_r = lines_of(TINY_RANDOM, "database_workload"), lines_of(TINY_RANDOM, "database_tuning_record")
    b_r = [json.dumps([json.loads(r)[0] + len(a_w), json.loads(r)[1]]) for r in b_r]
    return a_w + b_w, a_r + b_r


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(6)))
def test_reordered_workload_lines_never_give_a_record_another_program(tmp_path_factory, six_workloads, order):
    """Any order of the workload lines: a record whose index now names another workload is
    refused (TraceError: the runtime would be another program's); one whose workload did
    not move gives its schedule, as before (no false alarms)."""
    workloads, records = six_workloads
    db = write_db(tmp_path_factory.mktemp("reordered"), [workloads[i] for i in order], records)
    jobs, report = read_databases([str(db)])
    assert len(jobs) == len(records) and not report.bad_lines
    for job in jobs:
        index = json.loads(records[record_index(job) - 1])[0]
        if order[index] == index:
            job.schedule()
        else:
            with pytest.raises(TraceError, match="belongs to another workload|no longer applies"):
                job.schedule()


# ---------------------------------------------------------------- class 1: decisions, empty traces
@functools.lru_cache(maxsize=1)
def small_jobs():
    """The jobs of ms_small's random database (a function, not a fixture: hypothesis
    would print a fixture's value, thousands of characters, with each failing example)."""
    return read_databases([SMALL_RANDOM])[0]


def with_decision(job, inst: int, decision):
    trace = json.loads(job.trace)
    trace[1] = [[i, decision if i == inst else d] for i, d in trace[1]]
    return replace(job, trace=json.dumps(trace))


@st.composite
def tile_decisions(draw, extent: int, parts: int):
    """A factorisation of `extent` into `parts` (valid), or any `parts` small integers."""
    if draw(st.booleans()):
        left, factors = extent, []
        for _ in range(parts - 1):
            factor = draw(st.sampled_from([d for d in range(1, left + 1) if left % d == 0]))
            factors.append(factor)
            left //= factor
        return draw(st.permutations(factors + [left]))
    return draw(st.lists(st.integers(-2, 2 * extent + 2), min_size=parts, max_size=parts))


@QUICK
@given(data=st.data())
def test_a_tile_decision_is_kept_or_the_record_refused(data):
    """Any SamplePerfectTile decision of any record: a record is a sample only if its
    decision tiles the loop (positive factors whose product is the extent; the rest of
    the trace may still not apply to the new loops); anything else — which TVM would
    silently re-sample on replay, or crash on — is a TraceError."""
    jobs = [j for j in small_jobs() if '"SamplePerfectTile"' in j.trace]
    job = jobs[data.draw(st.integers(0, len(jobs) - 1))]
    trace = json.loads(job.trace)
    tiles = [(i, d) for i, d in trace[1] if trace[0][i][0] == "SamplePerfectTile"]
    inst, stored = data.draw(st.sampled_from(tiles))
    extent = math.prod(stored)
    decision = data.draw(tile_decisions(extent, len(stored)))
    valid = all(f >= 1 for f in decision) and math.prod(decision) == extent
    edited = with_decision(job, inst, list(decision))
    try:
        edited.schedule()
    except TraceError as e:
        assert not valid or "no longer applies" in str(e)
        assert valid or re.match(rf"instruction {inst} \(SamplePerfectTile\)|trace no longer applies", str(e))
    else:
        assert valid


DECISION_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 2 ** 40) | st.text(max_size=3),
                               lambda inner: st.lists(inner, max_size=5), max_leaves=6)


@QUICK
@given(data=st.data(), value=DECISION_VALUES)
def test_any_decision_value_is_a_sample_or_a_trace_error(data, value):
    """Any JSON value as the decision of any sampling instruction (tile, categorical,
    compute location), or a decision naming no instruction: the record's schedule, with
    exactly the stored decisions, or a TraceError — never a crash of the process (TVM's
    replay segfaults on a null decision and divides by zero on a tile factor of 0)."""
    job = small_jobs()[data.draw(st.integers(0, len(small_jobs()) - 1))]
    trace = json.loads(job.trace)
    inst = data.draw(st.sampled_from([i for i, _ in trace[1]] + [-1, len(trace[0]), 0]))
    trace[1] = [[i, d] for i, d in trace[1] if i != inst] + [[inst, value]]
    edited = replace(job, trace=json.dumps(trace))
    try:
        sch = edited.schedule()
    except TraceError:
        return
    replayed = {i: d for i, d in _plain(sch.trace.as_json())[1]}
    assert replayed == {i: d for i, d in trace[1]}


def test_issue_examples_of_replaced_decisions_and_empty_traces(tmp_path, capsys):
    """[5, 5] for an extent of 9 (TVM replaces it with [1, 9]), [0, 9] (a factor of 0);
    an empty trace, and one of nothing but the postprocessing marker (the unscheduled
    program): a one-line error naming file:line, or counted skips with --skip-bad."""
    pool = next(j for j in small_jobs() if "pool" in j.group and '"SamplePerfectTile"' in j.trace)
    trace = json.loads(pool.trace)
    inst = next(i for i, d in trace[1] if trace[0][i][0] == "SamplePerfectTile" and math.prod(d) == 9)
    assert str(with_decision(pool, inst, [3, 3]).schedule().trace)  # valid: kept
    workloads, records = lines_of(SMALL_RANDOM, "database_workload"), lines_of(SMALL_RANDOM, "database_tuning_record")
    row = json.loads(records[record_index(pool) - 1])
    edits = {1: with_decision(pool, inst, [5, 5]).trace, 2: with_decision(pool, inst, [0, 9]).trace,
             3: json.dumps([[], []]), 4: json.dumps([[["EnterPostproc", [], [], []]], []])}
    for line, new_trace in edits.items():
        records[line - 1] = json.dumps([row[0], [json.loads(new_trace), *row[1][1:]]])
    db = write_db(tmp_path / "db", workloads, records[:1] + records[4:16])  # few: no worker processes
    assert extract(db, tmp_path / "out") == 2
    assert re.match(rf"error: {re.escape(str(db))}/database_tuning_record.json:1: .*stored decision \[5, 5\] "
                    rf"is not valid .* replaced it with \[1, 9\]", one_error_line(capsys))
    import datasets
    with pytest.raises(ValueError, match=r"database_tuning_record.json:1: .*\[5, 5\]"):
        datasets.load_collection([str(db)], progress=False, cache=str(tmp_path / "cache"))
    db = write_db(tmp_path / "db", workloads, records)
    assert extract(db, tmp_path / "out") == 2
    assert re.match(rf"error: {re.escape(str(db))}/database_tuning_record.json:2: .*the decision \[0, 9\] is not "
                    rf"a list of positive tile factors", one_error_line(capsys))
    assert extract(db, tmp_path / "out", "--skip-bad") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    skipped = {line: reason for _, line, reason in report["bad_lines"]}
    assert sorted(skipped) == [1, 2, 3, 4] and sum(report["samples"].values()) == 32
    assert "replaced it with [1, 9]" in skipped[1] and "[0, 9]" in skipped[2]
    assert all("schedules nothing" in skipped[i] for i in (3, 4))


# ---------------------------------------------------------------- class 4: damaged .gz
SMALL_GZ = Path(SMALL_RANDOM) / "database_tuning_record.json.gz"
WORKLOADS_GZ = Path(SMALL_RANDOM) / "database_workload.json.gz"


def jobs_and_bad(db):
    jobs, report = read_databases([str(db)], skip_bad=True)
    return [(j.source.rpartition(":")[2], j.trace, j.run_secs) for j in jobs], report.bad_lines


@pytest.fixture(scope="module")
def intact():
    return jobs_and_bad(SMALL_RANDOM)[0]


def damaged_copy(tmp_path_factory, records: bytes, workloads: bytes = None) -> Path:
    db = tmp_path_factory.mktemp("damaged")
    (db / "database_tuning_record.json.gz").write_bytes(records)
    (db / "database_workload.json.gz").write_bytes(workloads if workloads is not None else WORKLOADS_GZ.read_bytes())
    return db


@QUICK
@given(cut=st.integers(1, SMALL_GZ.stat().st_size - 1))
def test_a_database_cut_anywhere_keeps_the_records_before_the_cut(tmp_path_factory, intact, cut):
    db = damaged_copy(tmp_path_factory, SMALL_GZ.read_bytes()[:cut])
    jobs, bad = jobs_and_bad(db)
    assert jobs == intact[:len(jobs)]
    assert len(bad) == 1 and f"file damaged after line {len(jobs)}" in bad[0][2] and bad[0][1] == len(jobs) + 1
    with pytest.raises(RecordFormatError, match=rf"^{re.escape(str(db))}/database_tuning_record.json.gz:"
                                                rf"{len(jobs) + 1}: file damaged after line"):
        read_databases([str(db)])


@QUICK
@given(cut=st.integers(1, WORKLOADS_GZ.stat().st_size - 1))
def test_a_workload_file_cut_anywhere_is_named_and_its_records_counted(tmp_path_factory, intact, cut):
    db = damaged_copy(tmp_path_factory, SMALL_GZ.read_bytes(), WORKLOADS_GZ.read_bytes()[:cut])
    jobs, bad = jobs_and_bad(db)
    assert "database_workload.json.gz" in bad[0][0] and "file damaged after line" in bad[0][2]
    assert len(jobs) + len(bad) - 1 == len(intact) and set(jobs) <= set(intact)
    with pytest.raises(RecordFormatError, match=r"database_workload.json.gz:\d+: file damaged after line"):
        read_databases([str(db)])


@QUICK
@given(position=st.integers(0, SMALL_GZ.stat().st_size - 1), mask=st.integers(1, 255))
def test_a_flipped_byte_in_a_gz_database_is_harmless_or_reported(tmp_path_factory, intact, position, mask):
    """Never a traceback; either the very records of the intact file, or the damage (or
    a bad line it made) is named — never a silently different set of records."""
    data = bytearray(SMALL_GZ.read_bytes())
    data[position] ^= mask
    jobs, bad = jobs_and_bad(damaged_copy(tmp_path_factory, bytes(data)))
    assert jobs == intact or bad


def test_a_truncated_gz_database_through_the_cli(tmp_path, capsys):
    data = SMALL_GZ.read_bytes()
    db = tmp_path / "db"
    db.mkdir()
    (db / "database_tuning_record.json.gz").write_bytes(data[: len(data) * 2 // 3])
    (db / "database_workload.json.gz").write_bytes(WORKLOADS_GZ.read_bytes())
    assert extract(db, tmp_path / "out") == 2
    assert re.match(rf"error: {re.escape(str(db))}/database_tuning_record.json.gz:\d+: file damaged after line \d+ "
                    rf"\(EOFError: ", one_error_line(capsys))
    assert extract(db, tmp_path / "out", "--skip-bad") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (_, line, reason), = report["bad_lines"]
    assert f"damaged after line {line - 1}" in reason and sum(report["samples"].values()) == line - 1 > 0


# ---------------------------------------------------------------- class 4: malformed lines, TVMScript
@pytest.mark.parametrize("key", ["abc", "-5", str(2 ** 64), 12345])
def test_a_malformed_workload_key_is_one_line(tmp_path, capsys, key):
    workloads = lines_of(SMALL_RANDOM, "database_workload")
    workloads[1] = json.dumps([key, json.loads(workloads[1])[1]])
    db = write_db(tmp_path / "db", workloads, lines_of(SMALL_RANDOM, "database_tuning_record"))
    assert extract(db, tmp_path / "out") == 2
    line = one_error_line(capsys)
    assert re.match(rf"error: {re.escape(str(db))}/database_workload.json:2: not a MetaSchedule workload: ", line)
    assert "structural hash" in line or "convert" in line
    assert extract(db, tmp_path / "out", "--skip-bad") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["bad_lines"]) == 1 + 12  # the line, and each record of its workload
    assert sum(report["samples"].values()) == 24


def test_a_tvmscript_file_given_as_data_is_one_line(tmp_path, capsys):
    import datasets
    script = tmp_path / "dense.py"
    script.write_text("from tvm.script import tir as T\n@T.prim_func\ndef main(A: T.Buffer((4,), 'float32')):\n  T.evaluate(0\n")
    assert tvm_log.main([str(script), "--out", str(tmp_path / "out")]) == 2
    assert "a Python (TVMScript) file, not a tuning log" in one_error_line(capsys)
    with pytest.raises(datasets.DatasetError, match="dense.py: a Python .TVMScript. file"):
        datasets.load_collection([str(script)], progress=False, cache=str(tmp_path / "cache"))
