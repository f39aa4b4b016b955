"""MetaSchedule databases → graph samples, through every reader of the project.

Databases: the one `simulator.tune` writes in the shared `ms_tuned` fixture (a real tuning
run whose cost model's inputs were recorded), and `tests/data/ms_small` (a committed pass
folder in miniature, gzipped) with error records, bad lines and a trace that does not
apply added to copies of it."""
import gzip
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import MS_SMALL

SMALL_GROUPS = {
    "pool.pad-max.1x64x112x112_1x64x56x56.float32.063e66f3.llvm-rocketlake-1c",
    "conv2d.copy-mac-add.1x384x14x14_96x384x1x1_1x96x1x1_1x96x14x14.float32.4c11f9ab.llvm-rocketlake-1c",
    "conv2d.copy-mac-add.1x960x7x7_320x960x1x1_1x320x1x1_1x320x7x7.float32.ee0e3f24.llvm-rocketlake-1c",
}


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    """One sample cache for the committed database: it is extracted once per module."""
    return str(tmp_path_factory.mktemp("ms_small_cache"))


def _plain_copy(src, dst):
    """A gzipped database folder unpacked into plain JSON files (what MetaSchedule writes)."""
    os.makedirs(dst, exist_ok=True)
    for name in ("database_workload.json", "database_tuning_record.json"):
        with gzip.open(os.path.join(src, name + ".gz"), "rb") as f, open(os.path.join(dst, name), "wb") as out:
            out.write(f.read())
    return dst


def _records(folder):
    with open(os.path.join(folder, "database_tuning_record.json"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---------------------------------------------------------------- replay = what was scored
def _script(mod) -> str:
    """A module's TVMScript with boolean annotation values written as 1: a trace's JSON
    round trip (the database) turns `True` annotations (`meta_schedule.layout_rewrite_preproc`)
    into the integer 1, which structural equality tells apart; nothing else changes."""
    return re.sub(r'(T\.sblock_attr\(\{[^}]*": )True', r"\g<1>1", mod.script())


def test_replayed_record_is_the_module_the_cost_model_scored(ms_tuned):
    """Every record's trace, replayed as the reader does (postprocessing included), gives
    the module (up to True/1 in annotations, see `_script`) that the cost model was asked
    to score during the run; the trace without its postprocessing (the design-space part)
    does not."""
    from tvm.s_tir import Schedule

    from extract.metaschedule.database import read_databases, workload_module

    work, spy, _, _ = ms_tuned
    scored = {_script(mod) for mods, _ in spy.predicted for mod in mods}
    jobs, report = read_databases([work])
    assert len(jobs) == sum(report.measured.values()) > 0
    trimmed_matches = 0
    for job in jobs:
        assert _script(job.schedule().mod) in scored, f"{job.source}: replayed module is none of the scored candidates"
        trimmed = Schedule(workload_module(job.workload))  # the trace without its postprocessing
        job.schedule().trace.apply_to_schedule(trimmed, remove_postproc=True)
        trimmed_matches += _script(trimmed.mod) in scored
    assert trimmed_matches < len(jobs)


def test_tuned_database_gives_one_sample_per_measured_record(ms_tuned):
    from extract.tir.workload_key import workload_key
    from extract.tvm_log import extract_logs
    from extract.tir.workloads import parse_workload
    from extract.metaschedule.runner import host_target

    work, spy, summary, _ = ms_tuned
    by_group, report = extract_logs([work], workers=1, progress=False, per_store=False)
    key = workload_key(parse_workload("dense_32x32x48").prim_func(), host_target(1))
    assert list(by_group) == [key] == [t["key"] for t in summary["tasks"]]
    records = _records(work)
    ok = [r for r in records if r[1][1] and max(r[1][1]) < 1e10]
    samples = by_group[key]
    assert len(samples) == len(ok) == summary["tasks"][0]["trials"] - summary["tasks"][0]["errors"]
    for sample, record in zip(samples, ok):
        secs = record[1][1]
        assert sample.runtimes[0] == pytest.approx(np.mean(secs))
        assert sample.meta.extra["min"] == pytest.approx(min(secs)) and sample.meta.format == "metaschedule"
        assert sample.name.startswith(key + "/")
    assert len({s.name for s in samples}) == len(samples)


def test_any_database_object_reads_like_its_folder(ms_tuned):
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.database import database_samples

    work = ms_tuned[0]
    from_folder, _ = database_samples(work)
    from_object, report = database_samples(ms.database.JSONDatabase(work_dir=work), name="tuned")
    assert sorted(s.name for s in from_object) == sorted(s.name for s in from_folder)
    assert report.per_file["tuned"]["samples"] == len(from_object)
    memory = ms.database.MemoryDatabase()
    for record in ms.database.JSONDatabase(work_dir=work).get_all_tuning_records()[:3]:
        memory.commit_workload(record.workload.mod)
        memory.commit_tuning_record(record)
    assert len(database_samples(memory)[0]) == 3


# ---------------------------------------------------------------- the committed database
def test_committed_pass_folder_reads_as_two_databases(tmp_path, capsys):
    from extract import tvm_log

    out = tmp_path / "out"
    assert tvm_log.main([MS_SMALL, "--out", str(out), "--workers", "1", "--no-per-store"]) == 0
    text = capsys.readouterr().out
    assert f"{MS_SMALL}: 2 databases: 72 records → 72 samples, 0 errors set aside, 0 skipped" in text
    report = json.loads((out / "report.json").read_text())
    assert set(report["samples"]) == SMALL_GROUPS and sum(report["samples"].values()) == 72
    assert {name[:-4] for name in report["files"]} == SMALL_GROUPS


def test_error_records_bad_lines_and_stale_traces_are_counted(tmp_path):
    """1e10 and missing run_secs: error records of their workload; a line that is no
    record: RecordFormatError naming file:line (or a counted skip with skip_bad); a trace
    of another workload: a counted skip naming its line; a cut-off last line: skipped."""
    from extract.autotvm.records import RecordFormatError
    from extract.tvm_log import extract_logs

    db = _plain_copy(os.path.join(MS_SMALL, "random"), str(tmp_path / "db"))
    records = _records(db)
    by_workload = {}
    for r in records:
        by_workload.setdefault(r[0], r)
    pool, conv = by_workload[0], by_workload[1]
    extra = [
        [0, [pool[1][0], [1e10], pool[1][2], pool[1][3]]],          # line 37: failed to build/run
        [1, [conv[1][0], None, conv[1][2], conv[1][3]]],            # line 38: no run_secs
        [0, [conv[1][0], [1e-4, 1.1e-4], pool[1][2], pool[1][3]]],  # line 39: conv's trace on the pool
    ]
    path = os.path.join(db, "database_tuning_record.json")
    with open(path, "a", encoding="utf-8") as f:
        for row in extra:
            f.write(json.dumps(row) + "\n")
        f.write("not a record\n")                                     # line 40
        f.write(json.dumps([1, conv[1]])[:50])                       # line 41, cut off
    with pytest.raises(RecordFormatError, match=r"database_tuning_record.json:40: "):
        extract_logs([db], progress=False, per_store=False)
    by_group, report = extract_logs([db], skip_bad=True, workers=1, progress=False, per_store=False)
    pool_key = next(g for g in SMALL_GROUPS if g.startswith("pool"))
    conv_key = next(g for g in SMALL_GROUPS if "384x14x14" in g)
    assert report.errors[pool_key]["failed to build or run (run_secs 1e10)"] == 1
    assert report.errors[conv_key]["no run_secs"] == 1
    skipped = {line: reason for _, line, reason in report.bad_lines}
    assert set(skipped) == {39, 40, 41}
    assert "trace no longer applies" in skipped[39] and "cut off" in skipped[41]
    assert sum(len(v) for v in by_group.values()) == 36
    counts = report.per_file[path]
    assert (counts["records"], counts["samples"], counts["errors"], counts["skipped"]) == (39, 36, 2, 3)


def test_load_collection_reads_and_caches_databases(small_cache, monkeypatch):
    import datasets
    from extract import tvm_log

    collection = datasets.load_collection([MS_SMALL], progress=False, cache=small_cache)
    assert {s.group for s in collection.samples} == SMALL_GROUPS and len(collection.samples) == 72
    assert collection.extractor is not None and collection.info["vocabulary"]
    assert any("2 databases: 72 records" in line for line in collection.read)
    assert len(list(Path(small_cache).glob("logs-*.npz"))) == 1
    # a database named twice (by itself and inside its pass folder) is read once
    twice = datasets.load_collection([os.path.join(MS_SMALL, "random"), MS_SMALL], progress=False,
                                     cache=small_cache)
    assert len(twice.samples) == 72 and twice.duplicates == 0

    def boom(*a, **k):
        raise AssertionError("extracted again instead of read from the cache")
    monkeypatch.setattr(tvm_log, "extract_logs", boom)
    cached = datasets.load_collection([MS_SMALL], progress=False, cache=small_cache)
    assert [s.name for s in cached.samples] == [s.name for s in collection.samples]
    np.testing.assert_array_equal(cached.samples[5].node_features, collection.samples[5].node_features)


def test_folder_of_collections_and_databases_is_refused(tmp_path, small_cache):
    import datasets
    from extract.sample import save_samples

    folder = tmp_path / "mixed"
    shutil.copytree(MS_SMALL, folder / "db")
    collection = datasets.load_collection([MS_SMALL], progress=False, cache=small_cache)
    save_samples(str(folder / "x.npz"), collection.samples[:2])
    with pytest.raises(datasets.DatasetError, match="MetaSchedule databases"):
        datasets.load_collection([str(folder)], progress=False, cache=small_cache)


def test_train_and_predict_on_metaschedule_data(tmp_path, capsys, small_cache):
    """simulator.train --data DB --split cross-workload with workload keys, then
    simulator.predict on a database: as on AutoTVM logs."""
    from simulator import predict, train

    groups = sorted(SMALL_GROUPS)
    out = tmp_path / "run"
    assert train.main(["--data", MS_SMALL, "--split", "cross-workload", "--train-workloads", groups[0], groups[2],
                       "--test-workloads", groups[1], "--epochs", "1", "--threads", "1", "--out", str(out),
                       "--cache-dir", small_cache]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["test"]["kendall_tau"]["per_workload"]) == [groups[1]]
    capsys.readouterr()
    rows = predict.run([str(out), MS_SMALL, "--top-k", "2",
                        "--cache-dir", small_cache])
    assert set(rows) == SMALL_GROUPS
    assert all(sum(r["rank"] is not None for r in ranked) == 2 for ranked in rows.values())
    assert "top 2 of 24 configs" in capsys.readouterr().out
