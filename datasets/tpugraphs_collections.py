"""TpuGraphs collections as the simulator's data: `--data` specs, splits, loose files,
Kaggle submissions.

    python -m simulator.train --data tpugraphs:tile:xla --data-root ~/data/tpugraphs
    python -m simulator.train --data tpugraphs:layout:nlp:random --data-root ~/data/tpugraphs

A data spec `tpugraphs:<collection>` names one of the five collections (`tile:xla`,
`layout:{xla,nlp}:{random,default}`) under a root laid out as the dataset ships (the
folder layout and the file format: extract/xla/npz_format.py)::

    ROOT/npz/tile/xla/{train,valid,test}/*.npz
    ROOT/npz/layout/{xla,nlp}/{random,default}/{train,valid,test}/*.npz

(ROOT may also be the `npz` folder itself). The official split is those folders:
train → train, valid → validation, test → test. Test files may have their runtimes
withheld (arrays absent or all 0): they are ranked by predict and left out of metrics.

Nothing here reads a whole collection: `open_split` and `open_paths` read only the npy
headers of each file (`extract.xla.npz_format.TpuGraphsFile`, which then reads graphs and
config rows on request). Errors are `TpuGraphsError`s naming the path.
"""
from __future__ import annotations

import collections
import csv
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

from extract.fileio import atomic_write
from extract.xla.npz_format import COLLECTIONS, TpuGraphsFile, collection_dir, kind_of, list_files

PREFIX = "tpugraphs:"
# our split part → the dataset's folder
SPLIT_FOLDERS = {"train": "train", "val": "valid", "test": "test"}
TILE_TOP = 5  # configs per tile kernel in a Kaggle submission


class TpuGraphsError(ValueError):
    """A TpuGraphs path or file that cannot be used; the message names it."""


def parse_spec(data: Union[str, Sequence[str]]) -> str:
    """The collection of a `tpugraphs:<collection>` spec (exactly one, alone)."""
    items = [data] if isinstance(data, str) else list(data)
    if len(items) != 1 or not str(items[0]).startswith(PREFIX):
        raise TpuGraphsError(f"--data {' '.join(map(str, items))}: give exactly one "
                             f"tpugraphs:<collection> (one of {', '.join(PREFIX + c for c in COLLECTIONS)})")
    collection = str(items[0])[len(PREFIX):]
    if collection not in COLLECTIONS:
        raise TpuGraphsError(f"--data {items[0]}: unknown TpuGraphs collection {collection!r} "
                             f"(one of {', '.join(COLLECTIONS)})")
    return collection


def open_split(root: Union[str, Path, None], collection: str, part: str) -> List[TpuGraphsFile]:
    """The files of one part ("train", "val", "test") of a collection, headers read,
    sorted by name. A missing root or folder, an empty folder, or a file that is not a
    readable TpuGraphs npz of the collection's kind raises TpuGraphsError naming it."""
    if root is None:
        raise TpuGraphsError("TpuGraphs data needs --data-root (the folder holding npz/tile/xla/… "
                             "or npz/layout/…, as the dataset unpacks)")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise TpuGraphsError(f"--data-root {root}: no such folder")
    try:
        paths = list_files(root, collection, SPLIT_FOLDERS[part])
    except (FileNotFoundError, ValueError) as e:
        raise TpuGraphsError(f"{e} (--data-root {root})") from None
    if not paths:
        raise TpuGraphsError(f"{collection_dir(root, collection, SPLIT_FOLDERS[part])}: "
                             "holds no .npz files")
    return [_open(p, collection, SPLIT_FOLDERS[part]) for p in paths]


def _open(path: Path, collection: Optional[str], split: Optional[str]) -> TpuGraphsFile:
    try:
        file = TpuGraphsFile(path, collection=collection, split=split)
    except ValueError as e:
        raise TpuGraphsError(str(e)) from None
    if collection is not None and file.kind != kind_of(collection):
        raise TpuGraphsError(f"{path}: a TpuGraphs {file.kind} file, in the {collection} collection")
    return file


def open_paths(paths: Sequence[Union[str, Path]]) -> List[TpuGraphsFile]:
    """TpuGraphs npz files given as files or folders (searched recursively for `*.npz`,
    any case). A file reached twice (the same path given twice, or a file and its
    folder) is a TpuGraphsError naming both: its configs would be counted twice."""
    files: List[TpuGraphsFile] = []
    seen: dict = {}
    for spec in paths:
        path = Path(spec).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() == ".npz" and p.is_file())
            if not found:
                raise TpuGraphsError(f"{path}: folder holds no .npz files")
        elif path.is_file():
            found = [path]
        else:
            raise TpuGraphsError(f"{path}: no such file or folder")
        for p in found:
            key = p.resolve()
            if key in seen:
                raise TpuGraphsError(f"{p}: given twice (as {seen[key]} and as {spec}); "
                                     "each file's configs would be read twice")
            seen[key] = spec
            files.append(_open(p, None, None))
    return files


def kaggle_id(collection: str, name: str) -> str:
    """`tile:xla:<graph>`, `layout:xla:random:<graph>`: the competition's row ids."""
    return f"{collection}:{name}"


def write_kaggle_csv(path: Union[str, Path], rows: Sequence[Tuple[str, Sequence[int]]]) -> Path:
    """`ID,TopConfigs` rows, config indices joined by ';' (best first), as the Kaggle
    competition and tpu_graphs' combine_csvs.py expect; written atomically."""
    path = Path(path)
    counts = collections.Counter(r[0] for r in rows)
    duplicate = next((i for i, n in counts.items() if n > 1), None)
    if duplicate is not None:
        raise TpuGraphsError(f"{path}: two graphs would both be written as {duplicate!r} "
                             f"(the same graph name in two folders?)")
    with atomic_write(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["ID", "TopConfigs"])
        for row_id, order in rows:
            writer.writerow([row_id, ";".join(str(int(i)) for i in order)])
    return path
