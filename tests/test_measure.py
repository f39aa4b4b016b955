"""Measuring on this machine: real timings, AutoTVM v0.2 records, resume, error records."""
import json

import numpy as np

from extract import measure
from extract.records import RUN_TIMEOUT, read_records
from extract.templates import get_template
from extract.workloads import parse_workload

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
    result = measure.measure_one("conv2d_NCHWc.x86", wl, 0, repeat=1, min_repeat_ms=1)
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
