"""The MetaSchedule dataset of real networks' operators: its folder, task table,
the networks and operator kind of every sample, and the agreement of its two passes.

A dataset folder is `extract.ms_measure`'s work folder or its compacted copy
(`datasets/networks_<cpu>/`, made by `python -m datasets.ship`); every file may be
gzipped (`.gz`):

    tasks.json        the task table (`extract.metaschedule.tasks`): key, operator kind, shapes,
                      networks of origin with their weights, the task's IRModule
    reference.jsonl   the reference kernel, timed every few minutes (drift)
    pass1/{random,evolutionary}/database_{workload,tuning_record}.json   the dataset
    pass1/records.jsonl   one line per record: every repeat, min, median, wall time, …
    pass2/…           the re-measured share of pass 1 (the noise ceiling)

Loading (`datasets.load_collection`, the one data path) reads the databases of pass 1
only (`training_databases`; pass 2 re-times schedules pass 1 already has) and tags every
sample whose workload group is a task of the table (`annotate`): `meta.networks`
(sorted names), `meta.kind` (operator kind) and `meta.weight` (calls per
inference, summed over its networks). The leave-network-out and leave-op-kind-out splits
(`simulator.data.splits`) read those tags.

One dataset per CPU model: `datasets/networks_<cpu>/`, named by LLVM's name for the CPU
(`rocketlake`, `znver4`); its table's target, every measuring session in its meta.json and
its folder name agree (`dataset_cpu`), and a dataset is never extended on another CPU
(`datasets.measure`, `datasets.ship`). The shipped dataset with the most measured tasks is
the default (`default_dataset`), and its `pretrained/gcn.pt` the default pre-trained cost model.

The noise ceiling (`agreement`) joins pass 2's records with pass 1's by (workload,
sampling method, schedule hash) and gives, per task, Kendall τ between the two passes'
runtimes and the median |t₂ − t₁| / t₁, raw and drift-corrected (each runtime divided by
`extract.metaschedule.drift.drift_factor` at the time it was measured).
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from extract.inputs import FIRST_PASS, SIDECAR, TASK_TABLE, is_networks_dataset

HERE = Path(__file__).resolve().parent
DATASET_PREFIX = "networks_"       # datasets/networks_<LLVM cpu>/: one dataset per CPU model
PRETRAINED_NAME = Path("pretrained") / "gcn.pt"
PRETRAIN_RUN = "runs/networks-pretrained-gcn"
# the pre-trained checkpoint's training, beside `--data D --split random --model gcn`
PRETRAIN_RECIPE = ("--loss", "pairwise-hinge", "--epochs", "40", "--seed", "0", "--threads", "1")
TASKS = TASK_TABLE
REFERENCE = "reference.jsonl"
SUMMARY = "summary.json"
MIN_TAU_RECORDS = 3   # a task's τ between passes needs this many re-measured records


class NetworkDataError(ValueError):
    """A dataset folder that cannot be read; the message names the file (and line)."""


@dataclass(frozen=True)
class TaskTags:
    """What the task table says about one workload group."""

    networks: Tuple[str, ...]
    kind: str
    weight: int


# ---------------------------------------------------------------- files
def find_file(folder: os.PathLike, name: str) -> Optional[Path]:
    """`folder/name` or `folder/name.gz`, whichever exists (None: neither)."""
    for candidate in (Path(folder) / name, Path(folder) / (name + ".gz")):
        if candidate.is_file():
            return candidate
    return None


def open_text(path: os.PathLike) -> IO[str]:
    """A text file, gunzipped when it is gzip (told by its first bytes)."""
    raw = open(path, "rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8")
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8")


def iter_jsonl(path: os.PathLike) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """(line number, row) of each complete line; a bad line is a NetworkDataError naming
    file:line (a last line cut off without its newline is left out: a writer was appending)."""
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise NetworkDataError(f"{path}:{n}: not JSON ({e.msg})") from None
                if not isinstance(row, dict):
                    raise NetworkDataError(f"{path}:{n}: not a JSON object")
                yield n, row


def is_dataset(folder: os.PathLike) -> bool:
    """A folder of this dataset's layout: a task table and a first pass (what every
    reader reads of it: `extract.inputs`)."""
    return is_networks_dataset(str(folder))


def dataset_folder(cpu: str) -> Path:
    """The shipped dataset of one CPU model (LLVM's name for it: `rocketlake`, `znver4`)."""
    return HERE / f"{DATASET_PREFIX}{cpu}"


def table_cpu(folder: os.PathLike) -> str:
    """The LLVM cpu of a dataset or work folder's task table (its target's `mcpu`)."""
    path = find_file(folder, TASKS)
    if path is None:
        raise NetworkDataError(f"{folder}: no {TASKS}[.gz] (the task table)")
    try:
        with open_text(path) as f:
            target = json.loads(json.load(f).get("target") or "{}")
    except (json.JSONDecodeError, AttributeError, TypeError, OSError, EOFError) as e:
        raise NetworkDataError(f"{path}: no readable target in the task table ({e})") from None
    cpu = target.get("mcpu") if isinstance(target, dict) else None
    if not cpu:
        raise NetworkDataError(f"{path}: the table's target names no CPU (mcpu)")
    return str(cpu)


def session_cpus(folder: os.PathLike) -> List[str]:
    """The LLVM cpu of every measuring session in the folder's meta.json (in order)."""
    path = find_file(folder, "meta.json")
    if path is None:
        return []
    with open_text(path) as f:
        sessions = json.load(f).get("sessions", [])
    return [str(s.get("machine", {}).get("llvm_cpu", "?")) for s in sessions]


def dataset_cpu(folder: os.PathLike) -> str:
    """The one CPU model a dataset folder was measured on; a NetworkDataError when its table,
    its sessions or (for a shipped dataset) its folder name disagree: one dataset, one CPU."""
    cpu = table_cpu(folder)
    others = sorted(set(session_cpus(folder)) - {cpu})
    if others:
        raise NetworkDataError(f"{folder}: measured on {cpu} and on {', '.join(others)} (meta.json): "
                               f"a dataset holds one CPU model's measurements")
    named = named_cpu(folder)
    if named is not None and named != cpu:
        raise NetworkDataError(f"{folder}: holds measurements of {cpu}, not of {named}")
    return cpu


def named_cpu(folder: os.PathLike) -> Optional[str]:
    """The CPU a shipped dataset's folder name gives (`datasets/networks_<cpu>`); None for a
    folder elsewhere."""
    path = Path(folder).resolve()
    if path.parent == HERE and path.name.startswith(DATASET_PREFIX):
        return path.name[len(DATASET_PREFIX):]
    return None


def shipped_datasets() -> Dict[str, Path]:
    """CPU → its shipped dataset folder (`datasets/networks_<cpu>/`)."""
    return {p.name[len(DATASET_PREFIX):]: p for p in sorted(HERE.glob(DATASET_PREFIX + "*")) if is_dataset(p)}


def summary_tasks(folder: os.PathLike) -> List[Dict[str, Any]]:
    """The per-task rows of a dataset's summary.json (written by `datasets.ship`)."""
    path = Path(folder) / SUMMARY
    try:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)["tasks"]
        if not all(isinstance(row, dict) and "key" in row and "valid" in row for row in rows):
            raise ValueError("a task row without key or valid")
        return rows
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NetworkDataError(f"{path}: not a dataset summary ({e}); remake it with python -m datasets.ship") from None


def measured_tasks(folder: os.PathLike) -> int:
    """How many of a dataset's tasks have a valid record (a table of tasks still to be
    measured counts for nothing)."""
    return sum(1 for row in summary_tasks(folder) if row["valid"] > 0)


def default_dataset() -> Path:
    """The shipped dataset with the most measured tasks: the default for training and the
    one the shipped pre-trained cost model is trained on."""
    found = shipped_datasets()
    if not found:
        raise NetworkDataError(f"{HERE}: no {DATASET_PREFIX}<cpu> dataset is shipped")
    return max(found.values(), key=lambda p: (measured_tasks(p), p.name))


def pretrained_path(folder: Optional[os.PathLike] = None) -> Path:
    """The pre-trained cost model of a dataset (default: of `default_dataset()`)."""
    return Path(folder or default_dataset()) / PRETRAINED_NAME


def shipped_checkpoint(cpu: str) -> Tuple[Path, str]:
    """The shipped pre-trained cost model for a machine with LLVM CPU `cpu`: (path, the CPU
    its dataset was measured on) — this CPU's own if shipped, else that of the dataset with
    the most tasks among those with a checkpoint. A NetworkDataError when none is shipped."""
    found = {c: p for c, p in shipped_datasets().items() if pretrained_path(p).is_file()}
    if not found:
        raise NetworkDataError(f"{HERE}: no {DATASET_PREFIX}<cpu> dataset ships {PRETRAINED_NAME}")
    chosen = cpu if cpu in found else max(found, key=lambda c: (measured_tasks(found[c]), c))
    return pretrained_path(found[chosen]), chosen


def pretrain_commands(folder: os.PathLike) -> Tuple[str, str]:
    """How a dataset's pre-trained cost model is made (from the repository root)."""
    rel = os.path.relpath(folder, HERE.parent)
    return (f"python -m simulator.train --data {rel} --split random --model gcn {' '.join(PRETRAIN_RECIPE)} "
            f"--out {PRETRAIN_RUN}",
            f"python -m simulator.export {PRETRAIN_RUN} {rel}/{PRETRAINED_NAME} "
            f"--scores {rel}/{PRETRAINED_NAME.with_suffix('.json')}")


def training_databases(folder: os.PathLike) -> List[str]:
    """The database folders a dataset folder trains on: its first pass's."""
    from extract.metaschedule.database import find_databases

    found = find_databases(str(Path(folder) / FIRST_PASS))
    if not found:
        raise NetworkDataError(f"{folder}/{FIRST_PASS}: holds no MetaSchedule database")
    return found


# ---------------------------------------------------------------- the task table
def read_tasks(folder: os.PathLike) -> List[Dict[str, Any]]:
    """The task table's rows (NetworkDataError naming the file when it is not one)."""
    path = find_file(folder, TASKS)
    if path is None:
        raise NetworkDataError(f"{folder}: no {TASKS}[.gz] (the task table)")
    try:
        with open_text(path) as f:
            doc = json.load(f)
    except (json.JSONDecodeError, EOFError, OSError) as e:
        raise NetworkDataError(f"{path}: not a task table ({e})") from None
    rows = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise NetworkDataError(f"{path}: not a task table (no 'tasks' list)")
    if doc.get("version") == 1:
        raise NetworkDataError(f"{path}: a task table of the old key format (keys without the computation "
                               f"digest): upgrade it with `python -m datasets.rekey {folder}`")
    for i, row in enumerate(rows):
        missing = [k for k in ("key", "kind", "networks") if k not in row]
        if missing or not isinstance(row["networks"], dict) or not row["networks"]:
            raise NetworkDataError(f"{path}: task {i} lacks {', '.join(missing) or 'its networks'}")
    return rows


def task_tags(rows: Sequence[Mapping[str, Any]]) -> Dict[str, TaskTags]:
    """Workload key → its networks, operator kind and weight."""
    return {row["key"]: TaskTags(tuple(sorted(row["networks"])), str(row["kind"]),
                                 int(sum(row["networks"].values()))) for row in rows}


def merge_tags(tables: Sequence[Mapping[str, TaskTags]]) -> Dict[str, TaskTags]:
    """Several tables as one (a task in two tables gets both tables' networks)."""
    out: Dict[str, TaskTags] = {}
    for table in tables:
        for key, tags in table.items():
            if key in out and out[key] != tags:
                old = out[key]
                tags = TaskTags(tuple(sorted(set(old.networks) | set(tags.networks))), old.kind,
                                max(old.weight, tags.weight))
            out[key] = tags
    return out


def annotate(samples: Sequence[Any], tags: Mapping[str, TaskTags]) -> int:
    """Tag each sample of a task in `tags` (meta networks, kind, weight); how many were
    not (their group is no task of the table)."""
    untagged = 0
    for s in samples:
        t = tags.get(s.group)
        if t is None:
            untagged += 1
            continue
        s.meta = dataclasses.replace(s.meta, networks=t.networks, kind=t.kind, weight=t.weight)
    return untagged


# ---------------------------------------------------------------- the noise ceiling
def sidecar_runtimes(path: os.PathLike, stat: str = "median") -> Dict[Tuple[str, str, str], Tuple[float, float]]:
    """(workload, method, schedule hash) → (runtime `stat` in s, wall time) of each valid
    record of a pass's sidecar (the first, when a schedule was measured twice)."""
    out: Dict[Tuple[str, str, str], Tuple[float, float]] = {}
    for n, row in iter_jsonl(path):
        if row.get("stage") != "ok" or row.get("error") or not row.get("mod_hash"):
            continue
        value = row.get(stat)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise NetworkDataError(f"{path}:{n}: {stat} {value!r} of a valid record is not a positive run time")
        key = (str(row["workload"]), str(row["method"]), str(row["mod_hash"]))
        out.setdefault(key, (float(value), float(row.get("time", 0.0))))
    return out


def reference_rows(folder: os.PathLike) -> List[Dict[str, Any]]:
    path = find_file(folder, REFERENCE)
    return [row for _, row in iter_jsonl(path)] if path else []


@dataclass
class TaskAgreement:
    """Pass 1 against pass 2 on one task's re-measured records."""

    records: int
    tau: Optional[float]              # None: fewer than MIN_TAU_RECORDS
    median_rel_diff: float            # median |t2 − t1| / t1


def task_agreement(t1: np.ndarray, t2: np.ndarray) -> TaskAgreement:
    from scipy.stats import kendalltau

    tau = None
    if len(t1) >= MIN_TAU_RECORDS:
        value = float(kendalltau(t1, t2).statistic)
        tau = value if math.isfinite(value) else None
    return TaskAgreement(len(t1), tau, float(np.median(np.abs(t2 - t1) / t1)))


def agreement(folder: os.PathLike, second: str = "pass2", corrected: bool = False,
              stat: str = "median") -> Dict[str, TaskAgreement]:
    """Per task: pass 1 against pass `second` on the records both timed ({} when the
    second pass is missing). `corrected`: each runtime divided by the drift factor at its
    measuring time (extract.metaschedule.drift.drift_factor, reference kernel timings)."""
    from extract.metaschedule.drift import drift_factor

    first_path = find_file(Path(folder) / FIRST_PASS, SIDECAR)
    second_path = find_file(Path(folder) / second, SIDECAR)
    if first_path is None or second_path is None:
        return {}
    a, b = sidecar_runtimes(first_path, stat), sidecar_runtimes(second_path, stat)
    ref = reference_rows(folder) if corrected else []
    scale = (lambda t, at: t / drift_factor(ref, at)) if corrected else (lambda t, at: t)
    by_task: Dict[str, List[Tuple[float, float]]] = {}
    for key in sorted(set(a) & set(b)):
        by_task.setdefault(key[0], []).append((scale(*a[key]), scale(*b[key])))
    return {task: task_agreement(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
            for task, pairs in by_task.items()}


def summarize_agreement(per_task: Mapping[str, TaskAgreement]) -> Dict[str, Any]:
    """Mean τ over the tasks that have one (and how many), and the median of the tasks'
    median |Δt|/t (None where there is nothing to summarise: never a NaN)."""
    taus = [a.tau for a in per_task.values() if a.tau is not None]
    rel = [a.median_rel_diff for a in per_task.values()]
    return {"tasks": len(per_task), "tasks_with_tau": len(taus),
            "records": int(sum(a.records for a in per_task.values())),
            "mean_tau": float(np.mean(taus)) if taus else None,
            "median_tau": float(np.median(taus)) if taus else None,
            "median_rel_diff": float(np.median(rel)) if rel else None}
