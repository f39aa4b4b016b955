"""Reading AutoTVM logs (both formats) into samples, with errors and bad lines accounted for."""
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from extract import tvm_log
from extract.autotvm.records import RecordFormatError, read_records
from extract.sample import load_samples
from extract.tir.graph import FEATURE_NAMES

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
    assert c2[0].meta.config["tile_oh"] == 1  # AutoTVM's fixed choice for old logs
    for sample in c2 + by_group["C3"]:
        assert sample.node_features.shape[1] == len(FEATURE_NAMES) == 42 and sample.num_configs == 1
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
    assert all(set(s.vectors) == {"curve", "itervar", "knob", "per_store", "per_store_rows"} for s in samples)
    # without the xgb baseline's features: the same graphs, no per-store vectors
    lean = tmp_path / "lean"
    assert tvm_log.main([str(logs), "--out", str(lean), "--workers", "1", "--no-per-store"]) == 0
    lean_samples = load_samples(str(lean / "C3.npz"))
    assert all(set(s.vectors) == {"curve", "itervar", "knob"} for s in lean_samples)
    for a, b in zip(samples, lean_samples):
        np.testing.assert_array_equal(a.node_features, b.node_features)


def test_cli_missing_log_exits_with_message(tmp_path, capsys):
    assert tvm_log.main([str(tmp_path / "nope.json"), "--out", str(tmp_path)]) == 2
    assert "nope.json: no such log file or folder" in capsys.readouterr().err


def test_extract_configs_in_processes_matches_one_process():
    """A config space extracted over 2 spawned workers: same samples, same (index) order."""
    from extract.autotvm.templates import get_template
    from extract.schedules import extract_configs
    from extract.tir.workloads import parse_workload
    wl = parse_workload("1x8x8x8_8x3x3_s1_p1")
    indices = list(range(len(get_template("conv2d_NCHWc.x86").space(wl))))[::-3][:40]
    serial = extract_configs("conv2d_NCHWc.x86", wl, indices, workers=1, chunk=8, progress=False)
    pooled = extract_configs("conv2d_NCHWc.x86", wl, indices, workers=2, chunk=8, progress=False)
    assert [s.meta.index for s in pooled] == [s.meta.index for s in serial] == indices
    for a, b in zip(serial, pooled):
        np.testing.assert_array_equal(a.node_features, b.node_features)
        np.testing.assert_array_equal(a.edges, b.edges)
        assert np.isnan(b.runtimes).all() and "per_store" not in b.vectors


# ---------------------------------------------------------------- the output folder
def _extract(logs, out, *extra):
    return tvm_log.main([*map(str, logs), "--out", str(out), "--workers", "1", "--no-per-store", *extra])


def test_a_used_output_folder_is_refused_unless_overwrite(tmp_path, capsys):
    import datasets

    out = tmp_path / "samples"
    assert _extract([V02, V01], out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    assert set(before) == {"C12.npz", "C2.npz", "C3.npz", "report.json"}
    capsys.readouterr()
    assert _extract([V01], out) == 2  # refused before any work: nothing changed
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out}: holds the output of an earlier run (report.json, 3 .npz)" in err[0]
    assert "--overwrite" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")} == before
    # a failing run with --overwrite leaves the earlier output as it was
    bad = tmp_path / "bad.jsonl"
    bad.write_text(V01.read_text() + "not a record\n")
    assert _extract([bad], out, "--overwrite") == 2
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")} == before
    # --overwrite replaces the earlier output: no C3/C12 collections left to be read with C2's
    (out / "notes.txt").write_text("mine")
    assert _extract([V01], out, "--overwrite") == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["C2.npz", "notes.txt", "report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] and list(report["files"]) == ["C2.npz"] and report["files"]["C2.npz"]["samples"] == 3
    assert {s.group for s in datasets.load_dataset(str(out), progress=False)} == {"C2"}


def test_readers_check_a_folder_against_its_report(tmp_path):
    import datasets

    out = tmp_path / "samples"
    assert _extract([V02, V01], out) == 0
    assert len(datasets.load_dataset(str(out), progress=False)) == 9
    # a collection the report does not list (e.g. left by another tool or run)
    shutil.copy(out / "C2.npz", out / "C99.npz")
    with pytest.raises(datasets.DatasetError, match=r"samples: C99.npz not listed in its report.json"):
        datasets.load_dataset(str(out), progress=False)
    (out / "C99.npz").unlink()
    # a collection changed after extraction
    c3 = (out / "C3.npz").read_bytes()
    shutil.copy(out / "C2.npz", out / "C3.npz")
    with pytest.raises(datasets.DatasetError, match=r"C3.npz: differs from the file its report.json lists"):
        datasets.load_dataset(str(out / "C3.npz"), progress=False)
    (out / "C3.npz").write_bytes(c3)
    # a run killed while writing: its report says so, and readers refuse the folder
    report = (out / "report.json").read_text()
    (out / "report.json").write_text(json.dumps({"tool": "extract.tvm_log", "complete": False, "files": {}}))
    with pytest.raises(datasets.DatasetError, match=r"report.json: the extract.tvm_log run writing this folder did not finish"):
        datasets.load_dataset(str(out), progress=False)
    (out / "report.json").write_text(report)
    assert len(datasets.load_dataset(str(out), progress=False)) == 9


def test_an_interrupted_overwrite_is_visible_to_readers(tmp_path, monkeypatch):
    import datasets

    out = tmp_path / "samples"
    assert _extract([V02, V01], out) == 0
    calls = []

    def dies_on_second(path, samples, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt  # a kill half-way through the collections
        return save_samples(path, samples, **kwargs)

    from extract.sample import save_samples
    monkeypatch.setattr(tvm_log, "save_samples", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        _extract([V02], out, "--overwrite")
    with pytest.raises(datasets.DatasetError, match="did not finish"):
        datasets.load_dataset(str(out), progress=False)


def test_out_inside_the_input_folder_is_not_read_back(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(V02, logs)
    for out in (logs / "samples", logs):  # a subfolder of the input, and the input folder itself
        assert _extract([logs], out) == 0
        capsys.readouterr()
        assert _extract([logs], out, "--overwrite") == 0
        printed = capsys.readouterr().out
        assert f"passed over {out / 'report.json'}" in printed
        assert "wrote 6 samples in 2 collections" in printed
        assert json.loads((out / "report.json").read_text())["bad_lines"] == []
    # named explicitly, a report is a clear error, not a log with bad lines
    assert tvm_log.main([str(logs / "report.json"), "--out", str(tmp_path / "o")]) == 2
    assert "a report written by extract.tvm_log, not a tuning log" in capsys.readouterr().err


def test_cli_says_what_it_read_from_each_path(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(V02, logs / "A.JSONL")  # upper-case names are logs too
    with gzip.open(logs / "OLD.LOG.GZ", "wt") as f:
        f.write(V01.read_text())
    assert _extract([logs, V02], tmp_path / "out") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{logs}: 2 logs: 11 records → 9 samples, 2 errors set aside, 0 skipped"
    assert lines[1] == f"{V02}: 1 log: 7 records → 6 samples, 1 errors set aside, 0 skipped"


@pytest.mark.parametrize("args, message", [
    (["--workers", "-1"], "--workers: -1 is not an integer ≥ 0"),
    (["--workers", "two"], "--workers: 'two' is not an integer"),
])
def test_cli_arguments_are_checked_before_any_work(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        tvm_log.main([str(V02), "--out", str(out), *args])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not out.exists()


def test_out_naming_a_file_fails_before_any_work(tmp_path, capsys):
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    with pytest.raises(SystemExit) as e:
        tvm_log.main([str(V02), "--out", str(not_a_folder)])
    assert e.value.code == 2 and "exists and is not a folder" in capsys.readouterr().err


def test_progress_is_a_few_lines_when_not_on_a_terminal(capsys):
    """extract_many's progress without a terminal: a few summary lines, not one per config."""
    from extract import schedules as tvm_graph
    from extract.sample import GraphSample

    class Quick:
        def __init__(self, i):
            self.i = i

        def run(self, per_store):
            return tvm_graph.Extraction(GraphSample(edges=[], node_features=np.ones((1, 2)), node_types=[1],
                                                    runtimes=[1.0], group="g", name=str(self.i)), {})

    samples, _ = tvm_graph.extract_many([Quick(i) for i in range(200)], workers=1, progress=True, desc="extract")
    err = capsys.readouterr().err.splitlines()
    assert len(samples) == 200 and 3 <= len(err) <= 6, err
    assert err[0] == "extract: 200 cfg to do" and err[-1].startswith("extract: 200/200 cfg done")
