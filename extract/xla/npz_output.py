"""The output folder of the XLA converters' command lines (`python -m extract.hlo …
--out DIR`, `python -m extract.tpugraphs convert … --out DIR`), and their progress.

`NpzOutput(folder, patterns, overwrite)` is used as a context manager around a run:

* one writer per folder: `extract.fileio.output_lock`; a second process converting
  into the same folder gets `OutputBusyError` at once, naming the folder;
* no stale files: npz files left in the folder by an earlier run (the `patterns` the
  command writes, e.g. `*.npz`) would be read later together with the new ones, so a
  folder that holds any is refused (`OutputNotEmptyError`) unless `overwrite`, which
  deletes those npz files — and only those — before anything is written;
* each file written once per run: two inputs that would write the same file (two
  `model.pb` from different folders, say) are an error for the second one, not a
  silent overwrite (`write`);
* every file is written whole or not at all (`NpzGraph.write` → `atomic_write`).

`progress(items, desc)` shows a tqdm bar only when stderr is a terminal; otherwise the
commands print one summary line per input and a total, never a line per update.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Tuple, TypeVar

from extract.fileio import output_lock
from extract.xla.npz_format import NpzGraph

T = TypeVar("T")


class OutputNotEmptyError(ValueError):
    """The output folder already holds npz files from another run; the message names it."""


class NpzOutput:
    """One converter run's output folder (module docstring)."""

    def __init__(self, folder: Path, patterns: Sequence[str] = ("*.npz",),
                 overwrite: bool = False) -> None:
        self.folder = Path(folder)
        self.patterns = tuple(patterns)
        self.overwrite = overwrite
        self.removed = 0
        self.written: Dict[Path, str] = {}
        self._lock = None

    def _existing(self) -> List[Path]:
        return sorted({p for pattern in self.patterns for p in self.folder.glob(pattern)
                       if p.is_file()})

    def __enter__(self) -> "NpzOutput":
        if self.folder.exists() and not self.folder.is_dir():
            raise NotADirectoryError(f"--out {self.folder}: exists and is not a folder")
        self._lock = output_lock(self.folder)
        self._lock.__enter__()
        try:
            existing = self._existing()
            if existing and not self.overwrite:
                raise OutputNotEmptyError(
                    f"--out {self.folder}: already holds {len(existing)} npz files from "
                    f"another run (e.g. {existing[0].relative_to(self.folder)}); a reader would "
                    "mix them with this run's. Pass --overwrite to replace them, or choose an "
                    "empty folder")
            for path in existing:
                path.unlink()
            self.removed = len(existing)
        except BaseException:
            self._lock.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._lock.__exit__(*exc_info)

    def write_all(self, graphs: Sequence[NpzGraph], path_of: Callable[[NpzGraph], Path],
                  source: str) -> List[Path]:
        """Write the files of one input: `path_of(graph)` for each of `graphs`. A path
        this run already wrote (or that two of the graphs share) is a ValueError naming
        `source`, raised before any of the input's files is written."""
        targets = [Path(path_of(graph)) for graph in graphs]
        seen: set = set()
        for target in targets:
            if target in seen:
                raise ValueError(f"{source}: two of its graphs would both be written as {target}")
            seen.add(target)
            if target in self.written:
                raise ValueError(f"{source}: would overwrite {target}, written from "
                                 f"{self.written[target]} earlier in this run (two inputs with "
                                 "the same name? convert them into different folders)")
        self.written.update((target, source) for target in targets)
        return [graph.write(target) for graph, target in zip(graphs, targets)]


def progress(items: Sequence[T], desc: str) -> Tuple[Iterable[T], Callable[[str], None]]:
    """(items, print_line): a tqdm bar over `items` on stderr when stderr is a terminal
    (and there is more than one item), the items as they are otherwise; `print_line`
    prints a stdout line without tearing the bar."""
    if len(items) > 1 and _isatty(sys.stderr):
        from tqdm import tqdm
        bar = tqdm(items, desc=desc, unit="file", leave=False, file=sys.stderr)
        return bar, lambda line: tqdm.write(line, file=sys.stdout)
    return items, print


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
