"""extract.fileio: whole files or none; one writer per output folder."""
import multiprocessing as mp
import os

import pytest

from extract.fileio import OutputBusyError, atomic_write, output_lock


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "out.json"
    with atomic_write(target) as f:
        f.write("first")
    with atomic_write(target, "wb") as f:
        f.write(b"second")
    assert target.read_text() == "second"
    assert sorted(os.listdir(target.parent)) == ["out.json"]


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "out.txt") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as f:
            f.write("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def _hold(folder, ready, release):
    with output_lock(folder):
        ready.set()
        release.wait(30)


def test_output_lock_refuses_second_writer(tmp_path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        with pytest.raises(OutputBusyError, match=str(tmp_path)):
            with output_lock(tmp_path):
                pass
    finally:
        release.set()
        holder.join(30)
    with output_lock(tmp_path):  # free again once the holder is gone
        pass


def test_output_lock_refuses_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="file"):
        with output_lock(path):
            pass
