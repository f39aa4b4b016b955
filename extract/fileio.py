"""Writing files safely: every output of the project goes through these two helpers.

* `atomic_write(path)`: the file appears whole or not at all. It is written to a
  temporary file beside the target (unique per process, so two writers never share
  one), flushed to disk, then `os.replace`d over the target; an exception or a kill
  leaves the old file (or none) and no temporary behind.
* `output_lock(folder)`: one writer per output folder. A second process that tries to
  write into a folder another process is writing to gets `OutputBusyError` at once,
  naming the folder, instead of interleaving its files with the first one's.

Both are used from `extract` upwards (datasets, simulator, benchmarks), which is why
they live at the bottom of the data flow.
"""
from __future__ import annotations

import contextlib
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
