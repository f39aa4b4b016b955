"""Reading AutoTVM logs (both formats) into samples, with errors and bad lines accounted for."""
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from extract import tvm_log
from extract.records import RecordFormatError, read_records
from extract.sample import load_samples

DATA = Path(__file__).parent / "data"
V02, V01 = DATA / "autotvm_v02.jsonl", DATA / "autotvm_v01.log"


def test_v02_records_parse():
    records = list(read_records(str(V02)))
    assert len(records) == 7
    first = records[0]
    assert first.task_name == "conv2d_NCHWc.x86" and first.ok and len(first.costs) == 3
    assert first.source == f"{V02}:1"
    assert [r.error_no for r in records].count(4) == 1


def test_v01_records_parse():
    records = list(read_records(str(V01)))
    assert [r.task_name for r in records] == ["topi_nn_conv2d"] * 4
    assert records[0].costs == [0.00212, 0.00209] and records[0].config_index == 100
    assert records[3].error_no == 1 and np.isnan(records[3].costs[0])


def test_both_formats_become_samples_and_errors_are_set_aside():
    by_group, report = tvm_log.extract_logs([str(V02), str(V01)], workers=1, progress=False)
    assert report.measured == {"C3": 3, "C12": 3, "C2": 3}
    assert {g: dict(c) for g, c in report.errors.items()} == {"C3": {4: 1}, "C2": {1: 1}}
    c2 = by_group["C2"]
    assert c2[0].runtimes[0] == pytest.approx(np.mean([0.00212, 0.00209]))
    assert c2[0].runtime_std[0] == pytest.approx(np.std([0.00212, 0.00209]))
    assert c2[0].meta["config"]["tile_oh"] == 1  # AutoTVM's fixed choice for old logs
    for sample in c2 + by_group["C3"]:
        assert sample.node_features.shape[1] == 24 and sample.num_configs == 1
        assert sample.vectors["per_store"].shape == (1, 328)
    table = report.table()
    assert "C3" in table and "runtime error" in table and "instantiation error" in table


def test_garbled_line_names_file_and_line(tmp_path):
    log = tmp_path / "bad.jsonl"
    lines = V02.read_text().splitlines()
    lines.insert(2, '{"input": ["llvm", "conv2d_NCHWc.x86"')  # cut off mid-record
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordFormatError, match=rf"{log}:3: not an AutoTVM record"):
        tvm_log.read_jobs([str(log)])
    jobs, report = tvm_log.read_jobs([str(log)], skip_bad=True)
    assert len(jobs) == 6 and [(b[0], b[1]) for b in report.bad_lines] == [(str(log), 3)]


def test_unknown_template_is_a_clear_error(tmp_path):
    record = json.loads(V02.read_text().splitlines()[0])
    record["input"][1] = "dense_pack.x86"
    log = tmp_path / "unknown.jsonl"
    log.write_text(json.dumps(record) + "\n")
    with pytest.raises(RecordFormatError, match=r"unknown.jsonl:1: no template for AutoTVM task 'dense_pack.x86'"):
        tvm_log.read_jobs([str(log)])


def test_truncated_gzip_names_the_file(tmp_path):
    data = gzip.compress(V02.read_bytes())
    log = tmp_path / "cut.jsonl.gz"
    log.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordFormatError, match="cut.jsonl.gz"):
        tvm_log.read_jobs([str(log)])


def test_cli_writes_collections_and_reports(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(V02, logs)
    with gzip.open(logs / "old.log.gz", "wt") as f:
        f.write(V01.read_text())
    out = tmp_path / "samples"
    assert tvm_log.main([str(logs), "--out", str(out), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "wrote 9 samples in 3 collections" in printed
    assert sorted(p.name for p in out.glob("*.npz")) == ["C12.npz", "C2.npz", "C3.npz"]
    samples = load_samples(str(out / "C3.npz"))
    assert len(samples) == 3 and all(s.group == "C3" for s in samples)
    report = json.loads((out / "report.json").read_text())
    assert report["errors"] == {"C3": {"4": 1}, "C2": {"1": 1}}
    assert all(set(s.vectors) == {"curve", "per_store"} for s in samples)
    # without the xgb baseline's features: the same graphs, no per-store vectors
    lean = tmp_path / "lean"
    assert tvm_log.main([str(logs), "--out", str(lean), "--workers", "1", "--no-per-store"]) == 0
    lean_samples = load_samples(str(lean / "C3.npz"))
    assert all(set(s.vectors) == {"curve"} for s in lean_samples)
    for a, b in zip(samples, lean_samples):
        np.testing.assert_array_equal(a.node_features, b.node_features)


def test_cli_missing_log_exits_with_message(tmp_path, capsys):
    assert tvm_log.main([str(tmp_path / "nope.json"), "--out", str(tmp_path)]) == 2
    assert "nope.json: no such log file or folder" in capsys.readouterr().err


def test_extract_configs_in_processes_matches_one_process():
    """A config space extracted over 2 spawned workers: same samples, same (index) order."""
    from extract.templates import get_template
    from extract.tvm_graph import extract_configs
    from extract.workloads import parse_workload
    wl = parse_workload("1x8x8x8_8x3x3_s1_p1")
    indices = list(range(len(get_template("conv2d_NCHWc.x86").space(wl))))[::-3][:40]
    serial = extract_configs("conv2d_NCHWc.x86", wl, indices, workers=1, chunk=8, progress=False)
    pooled = extract_configs("conv2d_NCHWc.x86", wl, indices, workers=2, chunk=8, progress=False)
    assert [s.meta["index"] for s in pooled] == [s.meta["index"] for s in serial] == indices
    for a, b in zip(serial, pooled):
        np.testing.assert_array_equal(a.node_features, b.node_features)
        np.testing.assert_array_equal(a.edges, b.edges)
        assert np.isnan(b.runtimes).all() and "per_store" not in b.vectors
