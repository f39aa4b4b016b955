"""TpuGraphs collections on disk, as the simulator reads them: lazily, file by file.

    python -m simulator.train --data tpugraphs:tile:xla --data-root ~/data/tpugraphs
    python -m simulator.train --data tpugraphs:layout:nlp:random --data-root ~/data/tpugraphs

A data spec `tpugraphs:<collection>` names one of the five collections (`tile:xla`,
`layout:{xla,nlp}:{random,default}`) under a root laid out as the dataset ships
(extract/tpugraphs.py)::

    ROOT/npz/tile/xla/{train,valid,test}/*.npz
    ROOT/npz/layout/{xla,nlp}/{random,default}/{train,valid,test}/*.npz

(ROOT may also be the `npz` folder itself). The official split is those folders:
train → train, valid → validation, test → test. Test files may have their runtimes
withheld (arrays absent or all 0): they are ranked by predict and left out of metrics.

Nothing here reads a whole collection: `open_split` reads only the npy headers of each
file (`extract.tpugraphs.TpuGraphsFile`), and `iter_config_chunks` streams a file's
config rows a chunk at a time, for evaluating and ranking all configs of a graph with
memory bounded by the chunk.
"""
from __future__ import annotations

import collections
import contextlib
import csv
import math
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from extract.tpugraphs import COLLECTIONS, TpuGraphsFile, collection_dir

PREFIX = "tpugraphs:"
# our split part → the dataset's folder
SPLIT_FOLDERS = {"train": "train", "val": "valid", "test": "test"}
TILE_TOP = 5  # configs per tile kernel in a Kaggle submission


class TpuGraphsError(ValueError):
    """A TpuGraphs path or file that cannot be used; the message names it."""


def is_spec(data: Union[str, Sequence[str]]) -> bool:
    """Whether `--data` names a TpuGraphs collection."""
    items = [data] if isinstance(data, str) else list(data)
    return any(str(d).startswith(PREFIX) for d in items)


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


def kind_of(collection: str) -> str:
    return collection.split(":")[0]


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
    folder = collection_dir(root, collection, SPLIT_FOLDERS[part])
    if not folder.is_dir():
        raise TpuGraphsError(f"{folder}: no such folder; --data-root must hold "
                             f"npz/{'/'.join(collection.split(':'))}/{{train,valid,test}}/*.npz")
    paths = sorted(folder.glob("*.npz"))
    if not paths:
        raise TpuGraphsError(f"{folder}: holds no .npz files")
    return [_open(p, collection, SPLIT_FOLDERS[part]) for p in paths]


def _open(path: Path, collection: Optional[str], split: Optional[str]) -> TpuGraphsFile:
    try:
        file = TpuGraphsFile(path, collection=collection, split=split)
    except ValueError as e:
        raise TpuGraphsError(str(e)) from None
    if collection is not None and file.kind != kind_of(collection):
        raise TpuGraphsError(f"{path}: a TpuGraphs {file.kind} file, in the {collection} collection")
    return file


def is_tpugraphs_npz(path: Union[str, Path]) -> bool:
    """Whether `path` is a TpuGraphs npz (has node_feat), not another npz (a sample collection)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return "node_feat.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def open_paths(paths: Sequence[Union[str, Path]]) -> List[TpuGraphsFile]:
    """TpuGraphs npz files given as files or folders (searched recursively)."""
    files: List[TpuGraphsFile] = []
    for spec in paths:
        path = Path(spec).expanduser()
        if path.is_dir():
            found = sorted(path.rglob("*.npz"))
            if not found:
                raise TpuGraphsError(f"{path}: folder holds no .npz files")
        elif path.is_file():
            found = [path]
        else:
            raise TpuGraphsError(f"{path}: no such file or folder")
        for p in found:
            files.append(_open(p, None, None))
    return files


def collection_of_path(path: Union[str, Path]) -> Optional[str]:
    """The collection a file's folders name (…/tile/xla/<split>/f.npz,
    …/layout/<source>/<search>/<split>/f.npz), or None."""
    parts = Path(path).parts
    for collection in COLLECTIONS:
        names = collection.split(":")
        for i in range(len(parts) - len(names)):
            if list(parts[i:i + len(names)]) == names and i + len(names) == len(parts) - 2:
                return collection
    return None


def measured_configs(file: TpuGraphsFile) -> np.ndarray:
    """Indices of the configs with a runtime (withheld or 0-runtime configs are not)."""
    return np.flatnonzero(file.runtimes_ns() > 0)


def runtimes(file: TpuGraphsFile, config_rows: Dict[str, np.ndarray]) -> np.ndarray:
    """Runtimes of the given config rows as `extract.tpugraphs` defines them for
    GraphSamples: tile runtime / normaliser, layout seconds; NaN where unmeasured."""
    n = len(next(iter(config_rows.values())))
    runtime = config_rows.get("config_runtime")
    out = np.full(n, np.nan)
    if runtime is None:
        return out
    runtime = runtime.astype(np.float64)
    measured = runtime > 0
    if file.kind == "tile":
        norm = config_rows.get("config_runtime_normalizers")
        if norm is None:
            return out
        measured &= norm > 0
        out[measured] = runtime[measured] / norm[measured].astype(np.float64)
    else:
        out[measured] = runtime[measured] / 1e9
    return out


def iter_config_chunks(file: TpuGraphsFile, chunk: int, keys: Optional[Sequence[str]] = None
                       ) -> Iterator[Tuple[int, Dict[str, np.ndarray]]]:
    """All configs of `file`, in order, `chunk` at a time: (index of the first, {key: rows}).

    Each per-config array is streamed once from the start of its zip member, so memory
    is O(chunk) and the file is decompressed once (reading chunk after chunk with
    `TpuGraphsFile.read(key, rows)` would restart decompression for every chunk)."""
    keys = list(keys or file.config_keys)
    total = file.num_configs
    if total == 0:
        return
    headers = {k: file._headers[k] for k in keys}  # (shape, fortran_order, dtype, offset)
    key = keys[0]
    try:
        with contextlib.ExitStack() as stack:
            streams = {}
            for key in keys:
                shape, fortran_order, dtype, offset = headers[key]
                if fortran_order:  # never written so; fall back to whole-array reads
                    streams[key] = file.read(key)
                    continue
                archive = stack.enter_context(zipfile.ZipFile(file.path))
                stream = stack.enter_context(archive.open(key + ".npy"))
                stream.seek(offset)
                streams[key] = stream
            for start in range(0, total, chunk):
                count = min(chunk, total - start)
                rows = {}
                for key in keys:
                    shape, _, dtype, _ = headers[key]
                    source = streams[key]
                    if isinstance(source, np.ndarray):
                        rows[key] = source[start:start + count]
                    else:
                        row_shape = tuple(shape[1:])
                        rows[key] = TpuGraphsFile._read_exact(
                            source, count * math.prod(row_shape) * dtype.itemsize, dtype,
                            (count,) + row_shape)
                yield start, rows
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as e:
        raise TpuGraphsError(f"{file.path}: array {key} is truncated or corrupted "
                             f"({type(e).__name__}: {e})") from None


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["ID", "TopConfigs"])
        for row_id, order in rows:
            writer.writerow([row_id, ";".join(str(int(i)) for i in order)])
    tmp.replace(path)
    return path
