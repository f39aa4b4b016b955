"""docs/RELIABILITY.md on the TVM side: bad AutoTVM records are a clear error naming file:line, or one
counted skip with --skip-bad — never a sample with a wrong value, never an exception from
deep inside a library, never a lost file.

Property-based where it fits: `hypothesis` garbles records (any field replaced by any JSON
value) and cuts gzip logs at any byte."""
import copy
import gzip
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extract import tvm_log
from extract import schedules as tvm_graph
from extract.autotvm.records import MAX_COST_S, MIN_COST_S, RecordFormatError, read_records
from extract.autotvm.templates import get_template

DATA = Path(__file__).parent / "data"
V02, V01 = DATA / "autotvm_v02.jsonl", DATA / "autotvm_v01.log"
LINES = V02.read_text().splitlines()
FIRST = json.loads(LINES[0])      # conv2d_NCHWc.x86, C3 (1x1 kernel), measured
C12 = json.loads(LINES[3])        # conv2d_NCHWc.x86, C12 (3x3 kernel), measured
QUICK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def write_log(path: Path, records) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def with_line2(tmp_path, record, name="bad.jsonl") -> Path:
    """A log of three good records with `record` as line 2."""
    return write_log(tmp_path / name, [LINES[0], record, LINES[1]])


# ---------------------------------------------------------------- class 1: numbers
def set_result(record, costs=None, error_no=None, all_cost=None, timestamp=None):
    record = copy.deepcopy(record)
    for i, value in enumerate((costs, error_no, all_cost, timestamp)):
        if value is not None:
            record["result"][i] = value
    return record


BAD_NUMBERS = {
    "cost Infinity": dict(costs=[float("inf")]),
    "cost NaN": dict(costs=[0.001, float("nan")]),
    "cost negative": dict(costs=[-0.001]),
    "cost zero": dict(costs=[0.0]),
    "cost true": dict(costs=[True]),
    "cost string": dict(costs=["0.001"]),
    "cost placeholder 1e9": dict(costs=[1e9]),
    "cost below a nanosecond": dict(costs=[1e-12]),
    "costs not a list": dict(costs=0.001),
    "no costs": dict(costs=[]),
    "error_no true": dict(error_no=True),
    "error_no negative": dict(error_no=-1),
    "all_cost string": dict(all_cost="fast"),
    "all_cost NaN": dict(all_cost=float("nan")),
    "timestamp Infinity": dict(timestamp=float("inf")),
    "timestamp null": dict(timestamp=None),
}


@pytest.mark.parametrize("case", sorted(BAD_NUMBERS))
def test_bad_numbers_are_rejected_with_file_and_line(tmp_path, case):
    record = set_result(FIRST, **{k: v for k, v in BAD_NUMBERS[case].items()})
    if case == "timestamp null":
        record["result"][3] = None
    log = with_line2(tmp_path, json.dumps(record))  # Python's json writes Infinity / NaN
    with pytest.raises(RecordFormatError, match=rf"^{re.escape(str(log))}:2: not an AutoTVM record: .+"):
        list(read_records(str(log)))
    bad = []
    records = list(read_records(str(log), skip_bad=True, bad=bad))
    assert len(records) == 2 and [(b[0], b[1]) for b in bad] == [(str(log), 2)]
    assert all(np.isfinite(r.costs).all() for r in records)


def test_cli_bad_number_is_one_line_error_or_counted_skip(tmp_path, capsys):
    log = with_line2(tmp_path, json.dumps(set_result(FIRST, costs=[float("inf")])))
    out = tmp_path / "out"
    assert tvm_log.main([str(log), "--out", str(out), "--workers", "1", "--no-per-store"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {log}:2:") and "inf" in err[0]
    assert not list(out.glob("*.npz"))
    assert tvm_log.main([str(log), "--out", str(out), "--workers", "1", "--no-per-store", "--skip-bad"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert [b[:2] for b in report["bad_lines"]] == [[str(log), 2]] and report["samples"] == {"C3": 2}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)


@QUICK
@given(field=st.integers(0, 3), value=JSON_VALUES, cost_at=st.integers(0, 2))
def test_any_value_in_result_is_a_valid_record_or_a_bad_line(tmp_path, field, value, cost_at):
    record = copy.deepcopy(FIRST)
    if field == 0:
        record["result"][0][cost_at] = value
    else:
        record["result"][field] = value
    log = write_log(tmp_path / "fuzz.jsonl", [record])
    try:
        records = list(read_records(str(log)))
    except RecordFormatError as e:
        assert str(e).startswith(f"{log}:1: not an AutoTVM record: ") and "\n" not in str(e)
        return
    (r,) = records
    if r.ok:  # a successful record holds only plausible runtimes, never a bool read as 1 s
        assert all(MIN_COST_S <= c <= MAX_COST_S and type(c) is float for c in r.costs)
        raw = record["result"][0]
        assert isinstance(raw, list) and not any(isinstance(c, bool) for c in raw)
    assert math.isfinite(r.all_cost) and math.isfinite(r.timestamp)


# ---------------------------------------------------------------- class 5: full validation
def paths_of(obj, prefix=()):
    """Every path to a value inside a JSON object (lists and dicts)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths_of(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths_of(v, prefix + (i,))


RECORD_PATHS = [p for p in paths_of(C12) if p]


def replaced(record, path, value):
    record = copy.deepcopy(record)
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return record


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(RECORD_PATHS), value=JSON_VALUES)
def test_any_garbled_field_is_a_job_or_a_clear_error(tmp_path, path, value):
    """Whatever a field of a record is replaced by, reading it gives a validated job or a
    RecordFormatError naming file:line (counted under skip_bad) — nothing else raises."""
    log = write_log(tmp_path / "garbled.jsonl", [replaced(C12, path, value)])
    try:
        jobs, report = tvm_log.read_jobs([str(log)])
    except RecordFormatError as e:
        assert str(e).startswith(f"{log}:1: ") and "\n" not in str(e)
        jobs, report = tvm_log.read_jobs([str(log)], skip_bad=True)
        assert jobs == [] and [(b[0], b[1]) for b in report.bad_lines] == [(str(log), 1)]
        return
    for job in jobs:  # what was accepted is a config of its template's space
        template = get_template(job.template)
        space = template.space(job.workload)
        assert space.get(job.config.index) == job.config
        assert all(MIN_COST_S <= c <= MAX_COST_S for c in job.costs)


def c12(**changes):
    """C12's record with task args / entity items changed."""
    record = copy.deepcopy(C12)
    args, entity = record["input"][2], record["config"]["entity"]
    for key, value in changes.items():
        if key == "stride":
            args[2] = value
        elif key == "data":
            args[0][1] = value
        elif key == "kernel":
            args[1][1] = value
        else:
            next(item for item in entity if item[0] == key)[2] = value
    return record


DEEP = {  # what raised a TypeError / ZeroDivisionError / TVM InternalError before
    "knob value null": (c12(unroll_ow=None), "unroll_ow"),
    "split value null": (c12(tile_ic=None), "tile_ic"),
    "stride 0": (c12(stride=[0, 0]), "stride 0"),
    "negative dimension": (c12(data=[1, 512, -7, 7]), "-7"),
    "zero channels": (c12(data=[1, 0, 7, 7], kernel=[512, 0, 3, 3]), "< 1"),
    "bool in a shape": (c12(data=[1, 512, True, 7]), "True"),
    "float stride": (c12(stride=[1.5, 1.5]), "1.5"),
    "split factors not multiplying to the extent": (c12(tile_ic=[5, 128]), "multiply to 640"),
    "split of the wrong length": (c12(tile_oc=[-1, 2, 2]), "3 factors"),
    "option true for an int knob": (c12(tile_oh=True), "tile_oh"),
    "option 1 for a bool knob": (c12(unroll_kw=1), "unroll_kw"),
    "kernel larger than the input": (c12(data=[1, 512, 1, 1], stride=[1, 1]), None),
}


@pytest.mark.parametrize("case", sorted(DEEP))
def test_records_that_raised_deep_inside_are_one_skip(tmp_path, case):
    record, needle = DEEP[case]
    if case == "kernel larger than the input":
        record["input"][2][3] = [0, 0, 0, 0]
        needle = "larger than the padded input"
    log = with_line2(tmp_path, json.dumps(record))
    with pytest.raises(RecordFormatError) as e:
        tvm_log.read_jobs([str(log)])
    message = str(e.value)
    assert message.startswith(f"{log}:2: ") and needle in message and "\n" not in message
    jobs, report = tvm_log.read_jobs([str(log)], skip_bad=True)
    assert len(jobs) == 2 and [(b[0], b[1]) for b in report.bad_lines] == [(str(log), 2)]
    assert report.per_file[str(log)] == {"records": 2, "samples": 2, "skipped": 1}


def cuda_record(values, target="cuda -arch=sm_80"):
    """A measured record of the CUDA tutorial template (1x16x14x14, 32 3x3 kernels, stride 2)."""
    template = get_template("tutorial/conv2d_no_batching")
    from extract.tir.workloads import Conv2dWorkload
    wl = Conv2dWorkload(1, 16, 14, 14, 32, 3, 3, 2, 1)
    entity = [[k, "sp", v] for k, v in zip(("tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx"), values)]
    entity += [["auto_unroll_max_step", "ot", 0], ["unroll_explicit", "ot", 0]]
    return {"input": [target, template.name, template.task_args(wl), {}],
            "config": {"index": 0, "code_hash": None, "entity": entity},
            "result": [[1e-4, 1.1e-4], 0, 1.0, 1700000000.0], "version": 0.2}


GOOD_CUDA = ([-1, 2, 4, 1], [-1, 1, 7, 1], [-1, 1, 7, 1], [-1, 4, 1], [-1, 1, 1], [-1, 1, 1])
TOO_MANY_THREADS = ([-1, 1, 32, 1], [-1, 1, 7, 1], [-1, 1, 7, 1], [-1, 4, 1], [-1, 1, 1], [-1, 1, 1])


def test_a_config_that_fails_to_schedule_is_one_skip_not_a_lost_file(tmp_path, capsys):
    """A record that validates but whose schedule raises (here: 1568 threads per block,
    which the CUDA template refuses while scheduling)."""
    log = write_log(tmp_path / "gpu.jsonl", [cuda_record(GOOD_CUDA), cuda_record(TOO_MANY_THREADS)])
    with pytest.raises(tvm_graph.ExtractionError, match=rf"^{re.escape(str(log))}:2: extraction failed: InvalidGpuConfig: 1568 threads"):
        tvm_log.extract_logs([str(log)], workers=1, progress=False, per_store=False)
    by_group, report = tvm_log.extract_logs([str(log)], skip_bad=True, workers=1, progress=False, per_store=False)
    group = "conv2d_1x16x14x14_32x3x3_s2_p1@cuda"
    assert [s.name for s in by_group[group]] == [f"{group}/{by_group[group][0].meta.index}"]
    assert report.measured[group] == 1 and [(b[0], b[1]) for b in report.bad_lines] == [(str(log), 2)]
    assert "extraction failed" in report.bad_lines[0][2]
    out = tmp_path / "out"
    assert tvm_log.main([str(log), "--out", str(out), "--workers", "1", "--no-per-store", "--skip-bad"]) == 0
    assert json.loads((out / "report.json").read_text())["files"][f"{group}.npz"]["samples"] == 1
    assert f"{log}: 1 log: 2 records → 1 samples, 0 errors set aside, 1 skipped" in capsys.readouterr().out


class Job:
    """A job that needs no TVM: fails when told to (what a worker sees of a bad config)."""

    def __init__(self, i, fail):
        self.i, self.fail, self.source = i, fail, f"fake.jsonl:{i + 1}"

    def run(self, per_store):
        if self.fail:
            raise RuntimeError("InternalError: Check failed: (extent > 0)\n  backtrace line\nCheck failed: extent > 0")
        from extract.sample import GraphSample
        sample = GraphSample(edges=[[0, 1]], node_features=np.ones((2, 3)), node_types=[1, 2],
                             runtimes=[1e-3], group="g", name=f"g/{self.i}")
        return tvm_graph.Extraction(sample, {})


def test_failures_in_the_worker_pool_are_counted_skips():
    jobs = [Job(i, fail=i in (3, 40)) for i in range(48)]
    failed = []
    samples, _ = tvm_graph.extract_many(jobs, workers=2, progress=False, chunk=8, failed=failed)
    assert [s.name for s in samples] == [f"g/{i}" for i in range(48) if i not in (3, 40)]
    assert [f.source for f in failed] == ["fake.jsonl:4", "fake.jsonl:41"]
    assert failed[0].reason == "RuntimeError: Check failed: extent > 0"
    with pytest.raises(tvm_graph.ExtractionError, match=r"^fake.jsonl:4: extraction failed: RuntimeError"):
        tvm_graph.extract_many(jobs, workers=2, progress=False, chunk=8)


class DyingJob(Job):
    """A job whose worker process dies (killed, out of memory, or a script without a
    `__main__` guard that the spawned worker re-runs)."""

    def run(self, per_store):
        if self.fail:
            os._exit(3)
        return super().run(per_store)


def test_a_worker_that_dies_is_an_error_not_a_hang():
    jobs = [DyingJob(i, fail=i == 20) for i in range(48)]
    with pytest.raises(tvm_graph.ExtractionError, match=r"an extraction worker process died .*__main__"):
        tvm_graph.extract_many(jobs, workers=2, progress=False, chunk=8)


# ---------------------------------------------------------------- class 5: damaged .gz
def gz_log(tmp_path, data: bytes, name="cut.jsonl.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


WHOLE = gzip.compress(("\n".join(LINES * 40) + "\n").encode())  # 280 records
ALL = list(read_records(str(V02))) * 40


@QUICK
@given(cut=st.integers(0, len(WHOLE) - 1))
def test_a_gzip_cut_anywhere_keeps_the_records_before_the_cut(tmp_path, cut):
    log = gz_log(tmp_path, WHOLE[:cut])
    bad = []
    records = list(read_records(str(log), skip_bad=True, bad=bad))
    assert [(r.config_index, r.costs) for r in records] == [(r.config_index, r.costs) for r in ALL[:len(records)]]
    assert len(bad) <= 1 and (not bad or "damaged after line" in bad[0][2])
    if bad:
        with pytest.raises(RecordFormatError, match=rf"^{re.escape(str(log))}:\d+: "):
            list(read_records(str(log)))


def test_a_damaged_gzip_keeps_what_was_read_and_says_where(tmp_path, capsys):
    log = gz_log(tmp_path, WHOLE[: len(WHOLE) * 2 // 3])
    with pytest.raises(RecordFormatError, match=r"cut.jsonl.gz:\d+: log damaged after line \d+"):
        tvm_log.read_jobs([str(log)])
    jobs, report = tvm_log.read_jobs([str(log)], skip_bad=True)
    (path, line, reason) = report.bad_lines[-1]
    assert path == str(log) and f"damaged after line {line - 1}" in reason
    assert 0 < len(jobs) < 240 and line > 50
    # corrupted bytes in the middle (not a truncation): the same
    damaged = bytearray(WHOLE)
    damaged[len(damaged) // 2: len(damaged) // 2 + 64] = b"\x00" * 64
    log2 = gz_log(tmp_path, bytes(damaged), "corrupt.log.gz")
    jobs, report = tvm_log.read_jobs([str(log2)], skip_bad=True)
    assert 0 < len(jobs) < 240 and "damaged after line" in report.bad_lines[-1][2]


def test_binary_junk_in_a_plain_log_is_one_bad_line(tmp_path):
    log = tmp_path / "junk.jsonl"
    log.write_bytes((LINES[0] + "\n").encode() + b"\xff\xfe\x00junk\n" + (LINES[1] + "\n").encode())
    with pytest.raises(RecordFormatError, match=rf"^{re.escape(str(log))}:2: not an AutoTVM record"):
        list(read_records(str(log)))
    bad = []
    assert len(list(read_records(str(log), skip_bad=True, bad=bad))) == 2 and bad[0][1] == 2


# ---------------------------------------------------------------- class 8: target kinds
def test_records_of_another_target_kind_get_their_own_group(tmp_path):
    cuda = copy.deepcopy(FIRST)
    cuda["input"][0] = "cuda -keys=cuda,gpu -arch=sm_80"
    cuda["result"][0] = [c / 100 for c in cuda["result"][0]]
    log = write_log(tmp_path / "mixed.jsonl", [FIRST, cuda, json.loads(LINES[1])])
    jobs, report = tvm_log.read_jobs([str(log)])
    assert [j.group for j in jobs] == ["C3", "C3@cuda", "C3"]
    assert dict(report.measured) == {"C3": 2, "C3@cuda": 1}
    # v0.1's plain target strings and TVM's JSON ones name the kind the same way
    assert {j.group for j in tvm_log.read_jobs([str(V01)])[0]} == {"C2"}
    no_target = copy.deepcopy(FIRST)
    no_target["input"][0] = ""
    with pytest.raises(RecordFormatError, match=r":1: not an AutoTVM record: target '' names no target kind"):
        tvm_log.read_jobs([str(write_log(tmp_path / "none.jsonl", [no_target]))])


def test_noise_ceiling_separates_targets_and_fails_in_one_line(tmp_path, capsys):
    from datasets import noise_ceiling

    missing = tmp_path / "nope.jsonl"
    assert noise_ceiling.main([str(missing), str(V02)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {missing}: no such log file"]
    garbled = with_line2(tmp_path, '{"input": ["llvm", "conv2d_NCHWc.x86"')
    assert noise_ceiling.main([str(garbled), str(V02)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {garbled}:2: not an AutoTVM record")
    bad_workload = with_line2(tmp_path, json.dumps(c12(stride=[0, 0])), "stride0.jsonl")
    assert noise_ceiling.main([str(bad_workload), str(V02)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {bad_workload}:2: ") and "stride 0" in err[0]
    # the same configs measured on a CUDA target are not compared with the x86 ones
    cuda = [dict(json.loads(line), input=["cuda"] + json.loads(line)["input"][1:]) for line in LINES]
    cuda_log = write_log(tmp_path / "cuda.jsonl", cuda)
    assert noise_ceiling.costs_by_workload(str(cuda_log)).keys() == {"C3@cuda", "C12@cuda"}
    with pytest.raises(ValueError, match="share no measured configs"):
        noise_ceiling.noise_ceiling(str(V02), str(cuda_log))


def test_machine_load_finds_the_minutes_the_first_pass_ran_slow(tmp_path, capsys):
    """Configs measured twice: the first pass's windows where they all ran 2× slower are loaded,
    the others not, a window with too few shared configs is unknown; every first-pass config of
    a loaded window is counted, shared or not."""
    from datasets import noise_ceiling

    start = FIRST["result"][3]

    def record(index, minute, scale):
        r = copy.deepcopy(FIRST)
        r["config"]["index"] = index
        r["result"][0] = [c * scale for c in FIRST["result"][0]]
        r["result"][3] = start + 60 * minute
        return r
    first = [record(i, 0.5 * i, 1.0) for i in range(6)]                 # minutes 0–2.5: as quiet
    first += [record(10 + i, 5.5 + 0.5 * i, 2.0) for i in range(8)]     # minutes 5.5–9: twice as slow
    first += [record(30 + i, 11 + i, 3.0) for i in range(3)]            # minutes 11–13: too few shared
    reference = [record(i, 100, 1.0) for i in list(range(6)) + list(range(10, 16)) + [30, 31]]
    first_log, ref_log = write_log(tmp_path / "first.jsonl", first), write_log(tmp_path / "ref.jsonl", reference)
    load = noise_ceiling.machine_load(str(first_log), str(ref_log))
    assert [w["configs"] for w in load["windows"]] == [6, 6, 2]
    assert [w["first_pass_configs"] for w in load["windows"]] == [6, 8, 3]
    assert [w["loaded"] for w in load["windows"]] == [False, True, None]
    assert load["windows"][1]["median_ratio"] == pytest.approx(2.0)
    assert (load["loaded_configs"], load["unknown_configs"], load["first_pass_configs"]) == (8, 3, 17)
    assert load["loaded_share"] == pytest.approx(8 / 17)
    with pytest.raises(ValueError, match="must be > 0"):
        noise_ceiling.machine_load(str(first_log), str(ref_log), window_minutes=0)
    other = write_log(tmp_path / "other.jsonl", [record(99, 0, 1.0)])
    with pytest.raises(ValueError, match="share no measured configs"):
        noise_ceiling.machine_load(str(first_log), str(other))
    assert noise_ceiling.main([str(first_log), str(ref_log)]) == 0
    out = capsys.readouterr().out
    assert "5–10" in out and "loaded" in out and "8 of the first pass's 17 configs (47%)" in out
