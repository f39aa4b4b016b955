"""Writing files safely: every output of the project goes through these two helpers.

* `atomic_write(path)`: the file appears whole or not at all. It is written to a
  temporary file beside the target (unique per process, so two writers never share
  one), flushed to disk, then `os.replace`d over the target; an exception or a kill
  leaves the old file (or none) and no temporary behind.
* `AppendLog(path)`: a log that only grows by whole lines (measurement logs, whose
  lines are the state a rerun resumes from): each line is one `write()` on a file
  opened with O_APPEND, so a killed writer leaves whole lines, never half of one.
* `write_gzip(path, data)`: `atomic_write` of gzip level 9 with no name or time in its
  header, so the same data give the same bytes (committed files stay unchanged).
* `output_lock(folder)`: one writer per output folder. A second process that tries to
  write into a folder another process is writing to gets `OutputBusyError` at once,
  naming the folder, instead of interleaving its files with the first one's.

Both are used from `extract` upwards (datasets, simulator, benchmarks), which is why
they live at the bottom of the data flow.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator, Union

from filelock import FileLock, Timeout

PathLike = Union[str, "os.PathLike[str]"]
LOCK_NAME = ".tpsim.lock"


class OutputBusyError(RuntimeError):
    """Another process holds the output folder; the message names it."""


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO]:
    """Open a temporary file for writing that replaces `path` when the block ends
    without an exception (`mode` "w" for text, "wb" for bytes)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode {mode!r} (use 'w' or 'wb')")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_gzip(path: PathLike, data: bytes) -> None:
    """`data` gzipped into `path` atomically, deterministically (level 9, no name or time)."""
    with atomic_write(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                       compresslevel=9, mtime=0) as out:
        out.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class AppendLog:
    """Append whole lines to `path` (created if missing), one `write()` each.

    A line is encoded and handed to the kernel in a single `os.write` on an O_APPEND
    descriptor: a kill before it leaves the file as it was, a kill after leaves the
    whole line; appenders in several threads or processes interleave lines, not bytes.
    A file that does not end with a newline (edited by hand) gets one when it is
    opened, so the first line is not glued to its last one."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        if _ends_without_newline(self.path):
            self._write(b"\n")

    def append(self, line: str) -> None:
        if self._fd < 0:
            raise ValueError(f"{self.path}: log is closed")
        self._write((line.rstrip("\n") + "\n").encode("utf-8"))

    def _write(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        while written < len(data):  # only on a full disk or a signal mid-write
            written += os.write(self._fd, data[written:])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "AppendLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ends_without_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


@contextlib.contextmanager
def output_lock(folder: PathLike) -> Iterator[Path]:
    """Hold `folder` (created if needed) for this process for the duration of the block."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_NAME))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise OutputBusyError(f"{folder}: another process is writing to this folder; "
                              f"wait for it or choose another output") from None
    try:
        yield folder
    finally:
        lock.release()


def sha256_of(path: Union[str, Path]) -> str:
    """The file's SHA-256, hex, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
