"""Dataset loading: logs are extracted once, cached by content and extractor version."""
import gzip
import shutil
from pathlib import Path

import pytest

import datasets
from extract import tvm_log
from extract.sample import save_samples

DATA = Path(__file__).parent / "data"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TPSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_logs_are_extracted_once_then_cached(cache, monkeypatch):
    logs = [str(DATA / "autotvm_v02.jsonl"), str(DATA / "autotvm_v01.log")]
    first = datasets.load_dataset(logs, progress=False)
    assert sorted({s.group for s in first}) == ["C12", "C2", "C3"] and len(first) == 9
    assert len(list(cache.glob("logs-*.npz"))) == 1

    def no_extraction(*args, **kwargs):
        raise AssertionError("extracted again despite the cache")

    monkeypatch.setattr(tvm_log, "extract_logs", no_extraction)
    again = datasets.load_dataset(logs, progress=False)
    assert [s.name for s in again] == [s.name for s in first]


def test_cache_key_follows_content_and_extractor_version(tmp_path, monkeypatch):
    log = tmp_path / "a.jsonl"
    shutil.copy(DATA / "autotvm_v02.jsonl", log)
    key = datasets._logs_key([str(log)])
    monkeypatch.setattr(datasets, "EXTRACTOR_VERSION", "tir-ast-v999")
    assert datasets._logs_key([str(log)]) != key
    monkeypatch.undo()
    log.write_text(log.read_text() + "\n")
    assert datasets._logs_key([str(log)]) != key


def test_folder_of_sample_collections(tmp_path, cache):
    by_group, _ = tvm_log.extract_logs([str(DATA / "autotvm_v02.jsonl")], workers=1, progress=False)
    for group, samples in by_group.items():
        save_samples(str(tmp_path / f"{group}.npz"), samples)
    loaded = datasets.load_dataset(str(tmp_path), progress=False)
    assert sorted(s.name for s in loaded) == sorted(s.name for g in by_group.values() for s in g)


def test_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(datasets.DatasetError, match="nowhere.jsonl: no such file or folder"):
        datasets.load_dataset(str(tmp_path / "nowhere.jsonl"))


def test_cache_folder_can_be_given_per_call(tmp_path, cache):
    chosen = tmp_path / "chosen"
    datasets.load_dataset(str(DATA / "autotvm_v02.jsonl"), progress=False, cache=str(chosen))
    assert len(list(chosen.glob("logs-*.npz"))) == 1
    assert not cache.exists()  # $TPSIM_CACHE untouched when a folder is given


# ---------------------------------------------------------------- duplicated or mixed inputs
def _collection_folder(tmp_path, name="collections"):
    folder = tmp_path / name
    folder.mkdir()
    by_group, _ = tvm_log.extract_logs([str(DATA / "autotvm_v02.jsonl")], workers=1, progress=False, per_store=False)
    for group, samples in by_group.items():
        save_samples(str(folder / f"{group}.npz"), samples)
    return folder


def test_data_given_twice_is_read_once(tmp_path, cache, capsys):
    folder = _collection_folder(tmp_path)
    once = datasets.load_collection(str(folder), progress=False)
    twice = datasets.load_collection([str(folder), str(folder)])
    assert [s.name for s in twice.samples] == [s.name for s in once.samples] and len(once.samples) == 6
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{folder}: 2 sample collections, 6 samples",
                       f"{folder}: 0 sample collections, 0 samples (2 already read from an earlier path)"]
    log = str(DATA / "autotvm_v02.jsonl")
    assert len(datasets.load_dataset([log, log], progress=False)) == 6


def test_the_same_configs_from_two_sources_are_kept_once(tmp_path, cache, capsys):
    """Logs and the collections extracted from them, or a log and its copy: each (workload
    group, config) once, the first kept, with a count — never on both sides of a split."""
    folder = _collection_folder(tmp_path)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(DATA / "autotvm_v02.jsonl", copy)
    collection = datasets.load_collection([str(folder), str(copy), str(DATA / "autotvm_v01.log")])
    assert collection.duplicates == 6 and len(collection.samples) == 9
    keys = [datasets.sample_key(s) for s in collection.samples]
    assert len(set(keys)) == len(keys)
    assert {s.group for s in collection.samples} == {"C2", "C3", "C12"}
    printed = capsys.readouterr().out
    assert f"{copy}: 1 log: 7 records → 6 samples, 1 errors set aside, 0 skipped" in printed
    assert "dropped 6 samples repeating a (workload group, config) already read (the first kept)" in printed
    # the shipped data has no repeats: nothing dropped, the same samples as before
    shipped = datasets.load_collection("shipped", progress=False)
    assert shipped.duplicates == 0 and len(shipped.samples) == 7104


def test_a_folder_of_samples_and_logs_is_refused(tmp_path, cache):
    folder = _collection_folder(tmp_path)
    shutil.copy(DATA / "autotvm_v01.log", folder)
    with pytest.raises(datasets.DatasetError, match=r"holds both sample collections \(2 .npz.*\) and tuning logs \(1"):
        datasets.load_dataset(str(folder), progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(datasets.DatasetError, match="empty: holds no sample collections"):
        datasets.load_dataset(str(empty), progress=False)


def test_names_match_in_any_case(tmp_path, cache, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(DATA / "autotvm_v02.jsonl", logs / "RUN.JSONL")
    (logs / "OLD.LOG.GZ").write_bytes(gzip.compress((DATA / "autotvm_v01.log").read_bytes()))
    (logs / "readme.TXT").write_text("not a log")
    samples = datasets.load_dataset(str(logs))
    assert sorted({s.group for s in samples}) == ["C12", "C2", "C3"] and len(samples) == 9
    assert f"{logs}: 2 logs: 11 records → 9 samples, 2 errors set aside, 0 skipped" in capsys.readouterr().out
    folder = _collection_folder(tmp_path)
    (folder / "C3.npz").rename(folder / "C3.NPZ")
    assert len(datasets.load_dataset(str(folder), progress=False)) == 6
    # from the cache the second time: the same line
    datasets.load_dataset(str(logs))
    assert f"{logs}: 2 logs: 11 records → 9 samples" in capsys.readouterr().out


def test_shipped_among_other_data(tmp_path, cache):
    collection = datasets.load_collection(["shipped", str(DATA / "autotvm_v01.log")], progress=False)
    # two of the old log's configs were measured in the shipped pass too: kept once, the shipped one
    assert collection.duplicates == 2 and len(collection.samples) == 7104 + 3 - 2
    shipped = datasets.load_collection("shipped", progress=False)
    assert [s.name for s in collection.samples[:7104]] == [s.name for s in shipped.samples]
    assert collection.info == shipped.info
