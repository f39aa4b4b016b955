"""One rule for what a path stands for (`extract.inputs`), through every reader.

Class 2 of the MetaSchedule side: inputs silently left out when a folder is read (a
database and an AutoTVM log in one folder, databases below a database, a file and its
`.gz` twin, a networks dataset read whole by one command and by its first pass by
another). Every file found is read or named with the reason; a folder gives the same
samples through `extract.tvm_log` and `datasets.load_collection` (`simulator.train
--data`). Property-based: any folder tree of databases, logs, collections and other
files is partitioned into what is read and what is passed over."""
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import MS_SMALL, ROOT

import datasets
from extract import tvm_log
from extract.inputs import InputError, find_inputs
from extract.sample import load_samples

DATA = Path(ROOT) / "tests" / "data"
V02 = DATA / "autotvm_v02.jsonl"
TINY = DATA / "networks_tiny"


def read_by_both(folder: Path, tmp_path: Path, capsys):
    """(sample names, printed lines) of `extract.tvm_log FOLDER` and of
    `datasets.load_collection(FOLDER)`."""
    out = tmp_path / "out"
    assert tvm_log.main([str(folder), "--out", str(out), "--workers", "1", "--no-per-store"]) == 0
    printed = capsys.readouterr().out.splitlines()
    by_cli = sorted(s.name for f in out.glob("*.npz") for s in load_samples(str(f)))
    collection = datasets.load_collection([str(folder)], progress=False, cache=str(tmp_path / "cache"))
    by_loader = sorted(s.name for s in collection.samples)
    return by_cli, by_loader, printed, collection.read


def small_db(folder: Path, method: str = "random", records: int = 12) -> Path:
    """A copy of one of ms_small's databases with its first `records` records (a few: no
    worker processes are started to extract them)."""
    folder.mkdir(parents=True)
    for name, keep in (("database_workload.json", None), ("database_tuning_record.json", records)):
        with gzip.open(os.path.join(MS_SMALL, method, name + ".gz"), "rt", encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)[:keep]
        (folder / (name + ".gz")).write_bytes(gzip.compress("".join(lines).encode()))
    return folder


def passed_over(lines):
    return sorted(line for line in lines if line.startswith("passed over "))


# ---------------------------------------------------------------- the cases
def test_a_database_and_a_log_in_one_folder_are_both_read(tmp_path, capsys):
    """Before: the folder was read as a database only, the log never mentioned."""
    folder = small_db(tmp_path / "mixed")
    shutil.copy(V02, folder / "tuning.jsonl")
    (folder / "NOTES.txt").write_text("measured on the lab machine\n")
    by_cli, by_loader, printed, read = read_by_both(folder, tmp_path, capsys)
    assert len(by_cli) == 12 + 6 and by_cli == by_loader
    assert (f"{folder}: 1 database: 12 records → 12 samples, 0 errors set aside, 0 skipped; "
            f"1 log: 7 records → 6 samples, 1 errors set aside, 0 skipped") in printed
    assert passed_over(printed) == passed_over(read) == [
        f"passed over {folder / 'NOTES.txt'}: not a tuning log, database or sample collection (by its name)"]


def test_databases_below_a_database_are_read_by_every_command(tmp_path, capsys):
    """Before: a database folder hid the databases in its subfolders from one command."""
    folder = small_db(tmp_path / "db")
    small_db(folder / "later" / "evolutionary", "evolutionary")
    by_cli, by_loader, printed, _ = read_by_both(folder, tmp_path, capsys)
    assert len(by_cli) == 24 and by_cli == by_loader
    assert f"{folder}: 2 databases: 24 records → 24 samples, 0 errors set aside, 0 skipped" in printed


def test_a_networks_dataset_gives_its_first_pass_through_every_command(tmp_path, capsys):
    """Before: extract.tvm_log read both passes (48 records), load_collection pass 1 (24)."""
    by_cli, by_loader, printed, read = read_by_both(TINY, tmp_path, capsys)
    assert len(by_cli) == 24 and by_cli == by_loader
    assert f"{TINY}: 2 databases: 24 records → 24 samples, 0 errors set aside, 0 skipped" in printed
    assert passed_over(printed) == passed_over(read)
    assert any(line.startswith(f"passed over {TINY / 'pass2'}: a re-measuring pass") for line in printed)
    assert any(str(TINY / "pass1" / "records.jsonl.gz") in line and "sidecar" in line for line in printed)


def test_a_file_and_its_gz_twin(tmp_path, capsys):
    """The same content: read once, the twin named. Different content: a one-line error
    naming both, from every command (which one is current is not for a reader to guess)."""
    folder = small_db(tmp_path / "twins")
    for name in ("database_workload.json", "database_tuning_record.json"):
        (folder / name).write_bytes(gzip.decompress((folder / (name + ".gz")).read_bytes()))
    shutil.copy(V02, folder / "log.jsonl")
    (folder / "log.jsonl.gz").write_bytes(gzip.compress(V02.read_bytes()))
    found = find_inputs(str(folder))
    assert found.logs == [str(folder / "log.jsonl")] and found.databases == [str(folder)]
    assert sorted(p for p, _ in found.passed_over) == sorted(
        str(folder / n) for n in ("database_tuning_record.json.gz", "database_workload.json.gz", "log.jsonl.gz"))
    by_cli, by_loader, printed, _ = read_by_both(folder, tmp_path, capsys)
    assert len(by_cli) == 12 + 6 and by_cli == by_loader
    assert any("log.jsonl.gz: the same content as" in line for line in printed)

    records = (folder / "database_tuning_record.json").read_text().splitlines()
    (folder / "database_tuning_record.json").write_text("\n".join(records[:-1]) + "\n")  # the plain one edited
    message = (f"{folder}: holds both database_tuning_record.json and database_tuning_record.json.gz with "
               f"different contents; which one is current is not for a reader to guess: remove or rename one")
    assert tvm_log.main([str(folder), "--out", str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    with pytest.raises(datasets.DatasetError) as e:
        datasets.load_collection([str(folder)], progress=False, cache=str(tmp_path / "cache"))
    assert str(e.value) == message
    with pytest.raises(InputError, match="with different contents"):  # named directly, the same
        find_inputs(str(folder / "database_tuning_record.json"))


def test_a_metaschedule_work_folder_reads_as_its_database(tmp_path):
    """`ms.tune_tir`'s work folder: its text logs (logs/*.log) and a summary beside the
    database are named, not read as AutoTVM logs (which they would fail as)."""
    folder = small_db(tmp_path / "work")
    (folder / "logs").mkdir()
    (folder / "logs" / "tvm.s_tir.meta_schedule.logging.task_scheduler.log").write_text("2026 [INFO] start\n")
    (folder / "tune_summary.json").write_text(json.dumps({"tasks": [{"key": "x"}]}, indent=1))
    found = find_inputs(str(folder))
    assert found.databases == [str(folder)] and not found.logs
    assert sorted(why.split(",")[0] for _, why in found.passed_over) == [
        "MetaSchedule's text log of its tuning messages", "a JSON document"]


# ---------------------------------------------------------------- any folder tree
def _database(folder: Path, zipped: bool) -> None:
    for name in ("database_workload.json", "database_tuning_record.json"):
        (folder / (name + ".gz" if zipped else name)).write_bytes(b"\n" if not zipped else gzip.compress(b"\n"))


ITEMS = {  # what a file (or files) of a folder can be, and how it is made
    "database": lambda f, n: _database(f, False),
    "database.gz": lambda f, n: _database(f, True),
    "half database": lambda f, n: (f / "database_workload.json").write_text("\n"),
    "log": lambda f, n: shutil.copy(V02, f / f"log{n}.jsonl"),
    "log.gz": lambda f, n: (f / f"log{n}.LOG.GZ").write_bytes(gzip.compress(V02.read_bytes())),
    "twin logs": lambda f, n: ((f / f"t{n}.jsonl").write_bytes(V02.read_bytes()),
                               (f / f"t{n}.jsonl.gz").write_bytes(gzip.compress(V02.read_bytes()))),
    "collection": lambda f, n: (f / f"C{n}.npz").write_bytes(b"PK"),
    "json document": lambda f, n: (f / f"summary{n}.json").write_text('{\n "tasks": 3\n}\n'),
    "report": lambda f, n: (f / "report.json").write_text(json.dumps({"tool": "extract.tvm_log"})),
    "text log": lambda f, n: (f / f"tvm.meta_schedule.logging.task_{n}.log").write_text("[INFO]\n"),
    "readme": lambda f, n: (f / f"README{n}.md").write_text("notes\n"),
    "hidden": lambda f, n: (f / f".partial{n}.jsonl").write_text("half a line"),
    "networks dataset": lambda f, n: ((f / "tasks.json").write_text("{}"), (f / "pass1").mkdir(exist_ok=True),
                                      _database(f / "pass1", True), (f / "pass2").mkdir(exist_ok=True),
                                      _database(f / "pass2", True)),
}
TREES = st.lists(st.tuples(st.sampled_from(sorted(ITEMS)), st.lists(st.sampled_from("abc"), max_size=3)),
                 min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=TREES)
def test_every_file_found_is_read_or_named(tmp_path_factory, tree):
    """Any tree of databases (plain, gzipped, halves), logs, twins, collections, JSON
    documents, reports, text logs, other files, hidden files and networks datasets: each
    file that is not hidden is read (a log, a collection, a file of a database read)
    or passed over with a reason (it, or a folder above it), never both, never neither."""
    root = tmp_path_factory.mktemp("tree")
    for n, (item, where) in enumerate(tree):
        folder = root.joinpath(*where)
        folder.mkdir(parents=True, exist_ok=True)
        ITEMS[item](folder, n)
    found = find_inputs(str(root))
    read = set(found.data_files) | set(found.collections)  # logs, both files of each database, collections
    named = {p for p, why in found.passed_over if why}
    files = {str(p) for p in root.rglob("*") if p.is_file()
             and not any(part.startswith(".") for part in p.relative_to(root).parts)}
    under_named = {f for f in files if any(f == p or f.startswith(p + os.sep) for p in named)}
    assert read <= files and not (read & under_named)
    assert files == read | under_named, sorted(files - read - under_named)
    db_files = {f for f in files if os.path.basename(f).startswith("database_")}
    assert all(f in read or f in under_named for f in db_files)
