"""Dataset loading: logs are extracted once, cached by content and extractor version."""
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
