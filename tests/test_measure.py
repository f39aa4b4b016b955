"""Measuring on this machine: real timings, AutoTVM v0.2 records, resume, error records."""
import json

import numpy as np

from extract.autotvm import measure, timing
from extract.autotvm.records import RUN_TIMEOUT, read_records
from extract.autotvm.templates import get_template
from extract.tir.workloads import parse_workload

TINY = "1x8x8x8_8x3x3_s1_p1"


def test_measure_writes_records_and_resumes(tmp_path, capsys):
    log = tmp_path / "run.jsonl"
    args = ["--log", str(log), "--workloads", TINY, "--per-workload", "3", "--repeat", "2",
            "--min-repeat-ms", "1"]
    assert measure.main(args) == 0
    records = list(read_records(str(log)))
    assert len(records) == 3 and all(r.ok for r in records)
    assert all(len(r.costs) == 2 and 0 < min(r.costs) < 1 for r in records)
    raw = json.loads(log.read_text().splitlines()[0])
    assert set(raw) >= {"input", "config", "result", "version"} and raw["version"] == 0.2
    assert raw["input"][1] == "conv2d_NCHWc.x86"
    template = get_template("conv2d_NCHWc.x86")
    wl = parse_workload(TINY)
    for r in records:  # the entity written is the config at the index written
        assert template.space(wl).from_entity(r.entity).index == r.config_index
    # resume after a kill that left one record: only the two missing ones are measured
    first = log.read_text().splitlines()[0]
    log.write_text(first + "\n")
    capsys.readouterr()
    assert measure.main(args) == 0
    assert "1 already in" in capsys.readouterr().err
    assert sorted(r.config_index for r in read_records(str(log))) == sorted(r.config_index for r in records)


def test_timeouts_are_records_not_drops(tmp_path):
    log = tmp_path / "timeout.jsonl"
    assert measure.main(["--log", str(log), "--workloads", TINY, "--per-workload", "2",
                         "--timeout", "0.01"]) == 0
    records = list(read_records(str(log)))
    assert [r.error_no for r in records] == [RUN_TIMEOUT, RUN_TIMEOUT]
    assert "no result after" in records[0].error_msg


def test_sampling_is_seeded_uniform_and_interleaved():
    workloads = {"C3": parse_workload("C3"), "C12": parse_workload("C12")}
    jobs = measure.sample_jobs("conv2d_NCHWc.x86", workloads, 50, seed=0, max_vector_lanes=64)
    assert jobs == measure.sample_jobs("conv2d_NCHWc.x86", workloads, 50, seed=0, max_vector_lanes=64)
    assert len(jobs) == 100 and len(set(jobs)) == 100
    first_half = [wl for _, wl, _ in jobs[:50]]
    assert 10 < first_half.count(workloads["C3"]) < 40  # shuffled across workloads
    space = get_template("conv2d_NCHWc.x86").space(workloads["C12"])
    assert all(space.get(i)["tile_oc"][-1] <= 64 for _, wl, i in jobs if wl == workloads["C12"])


def test_measure_one_checks_the_answer():
    wl = parse_workload(TINY)
    result = timing.measure_one("conv2d_NCHWc.x86", wl, 0, repeat=1, min_repeat_ms=1)
    assert result.error_no == 0 and np.isfinite(result.costs).all()


def test_remeasure_subset_is_stable_and_can_include_an_earlier_pass():
    from datasets import SHIPPED_LOG, SHIPPED_REMEASURE
    template = get_template("conv2d_NCHWc.x86")
    pass2 = {(template.parse_task_args(r.task_args), r.config_index)
             for r in read_records(str(SHIPPED_REMEASURE))}
    # the documented pass-2 command still selects exactly pass 2's configs
    jobs = measure.remeasure_jobs(str(SHIPPED_LOG), 300, seed=1)
    assert {(wl, i) for _, wl, i in jobs} == pass2
    # a larger pass 3 that also covers pass 2: the union, each config once, shuffled
    third = measure.remeasure_jobs(str(SHIPPED_LOG), 1200, seed=2, also=[str(SHIPPED_REMEASURE)])
    keys = [(wl, i) for _, wl, i in third]
    assert len(keys) == len(set(keys)) and pass2 <= set(keys)
    assert 1200 < len(keys) < 1500
    assert keys[:300] != sorted(keys[:300], key=str)


# ---------------------------------------------------------------- bad arguments, resume
import pytest  # noqa: E402


@pytest.mark.parametrize("args, message", [
    (["--per-workload", "0"], "--per-workload: 0 is not an integer ≥ 1"),
    (["--per-workload", "-5"], "--per-workload: -5 is not an integer ≥ 1"),
    (["--repeat", "0"], "--repeat: 0 is not an integer ≥ 1"),
    (["--timeout", "-1"], "--timeout: -1 is not a finite number > 0"),
    (["--timeout", "nan"], "--timeout: 'nan' is not a finite number > 0"),
    (["--count", "-3"], "--count: -3 is not an integer ≥ 1"),
    (["--seed", "-1"], "--seed: -1 is not an integer ≥ 0"),
    (["--num-threads", "0"], "--num-threads: 0 is not an integer ≥ 1"),
    (["--min-repeat-ms", "-1"], "--min-repeat-ms: -1 is not an integer ≥ 0"),
    (["--max-vector-lanes", "-64"], "--max-vector-lanes: -64 is not an integer ≥ 0"),
    (["--template", "dense.x86"], "no template for AutoTVM task 'dense.x86'"),
    (["--remeasure", "nowhere.jsonl"], "nowhere.jsonl: no such log file"),
    (["--also", "x.jsonl"], "x.jsonl: no such log file"),
])
def test_arguments_are_checked_before_anything_is_measured(tmp_path, capsys, args, message):
    log = tmp_path / "run.jsonl"
    with pytest.raises(SystemExit) as e:
        measure.main(["--log", str(log), "--workloads", TINY, *args])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not log.exists()


def test_bad_log_or_workload_is_one_line_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit):
        measure.main(["--log", str(tmp_path), "--workloads", TINY])
    assert "is a folder, not a log file" in capsys.readouterr().err
    log = tmp_path / "run.jsonl"
    assert measure.main(["--log", str(log), "--workloads", "1x8x8x8_8x3x3_s0_p1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: workload '1x8x8x8_8x3x3_s0_p1': conv2d stride 0 is not ≥ 1"] and not log.exists()
    assert measure.main(["--log", str(log), "--workloads", "C99"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown workload 'C99'")
    garbled = tmp_path / "first.jsonl"
    garbled.write_text('{"input": ["llvm"\n')
    assert measure.main(["--log", str(log), "--remeasure", str(garbled)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {garbled}:1: not an AutoTVM record")


def test_resume_after_a_kill_mid_line(tmp_path, capsys):
    """A log whose last line was cut by a kill: that line is passed over (said once), the
    config measured again, and the new record starts a line of its own."""
    from extract.autotvm.records import MeasureRecord
    log = tmp_path / "run.jsonl"
    wl = parse_workload(TINY)
    template = get_template("conv2d_NCHWc.x86")
    space = template.space(wl)
    jobs = measure.sample_jobs(template.name, {TINY: wl}, 2, seed=0, max_vector_lanes=64)
    first, second = (MeasureRecord("llvm", template.name, template.task_args(wl), j.index,
                                   space.to_entity(space.get(j.index)), [1e-4]).to_json() for j in jobs)
    log.write_text(first + "\n" + second[: len(second) // 2])  # killed while writing the second
    args = ["--log", str(log), "--workloads", TINY, "--per-workload", "2", "--repeat", "1", "--min-repeat-ms", "1"]
    assert measure.main(args) == 0
    err = capsys.readouterr().err
    assert f"{log}: 1 lines that are not records passed over (first {log}:2:" in err
    assert "1 already in" in err
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and lines[0] == first and lines[1] == second[: len(second) // 2]
    bad = []
    records = list(read_records(str(log), skip_bad=True, bad=bad))
    assert [r.config_index for r in records] == [j.index for j in jobs] and [b[1] for b in bad] == [2]
