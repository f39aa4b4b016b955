"""The second (noise-ceiling) pass: build and time again a seeded share of each task's
valid records of pass 1, into a pass folder of its own.

Every task contributes at least `fraction` of its valid records (rounded up, at least 2,
so that a per-task Kendall τ exists), chosen by a seeded generator per task from the
records ordered by their schedule's hash (an order that does not depend on when or in
which order they were measured). Each re-timed record is written to the pass's database of
the same sampling method; its sidecar line carries `mod_hash`, the schedule's structural
hash, which pass 1's sidecar line has too: the two passes join on (workload, mod_hash).
A resumed pass skips the schedules it has already re-timed.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

import numpy as np

from .collect import Measurer
from .store import METHODS, PassStore, is_valid, record_secs, schedule_hash
from .tasks import TaskInfo


@dataclass
class Job:
    """One record of the first pass to time again."""

    task: TaskInfo
    method: str
    candidate: object  # MeasureCandidate replayed from the record's trace
    mod_hash: str


def choose(task: TaskInfo, method: str, first: PassStore, fraction: float, seed: int) -> List[Job]:
    """The seeded share of the task's valid `method` records of the first pass."""
    valid = []
    for record in first.records(method, task):
        if is_valid(record_secs(record)):
            candidate = record.as_measure_candidate()
            valid.append((schedule_hash(candidate.sch.mod), candidate))
    if not valid:
        return []
    valid.sort(key=lambda pair: pair[0])
    count = min(len(valid), max(2, math.ceil(fraction * len(valid))))
    rng = np.random.default_rng([seed, zlib.crc32(f"{task.key}|{method}".encode())])
    picked = sorted(rng.choice(len(valid), size=count, replace=False))
    return [Job(task, method, valid[i][1], valid[i][0]) for i in picked]


def done_hashes(second: PassStore) -> Dict:
    """(workload, method) → schedules the pass has already re-timed (from its sidecar,
    which `reconcile` has made agree with its databases)."""
    from .jsonl import read_jsonl

    done: Dict = {}
    for row in read_jsonl(second.sidecar_path):
        if row.get("pass") == second.pass_no and row.get("mod_hash"):
            done.setdefault((row["workload"], row["method"]), set()).add(row["mod_hash"])
    return done


def remeasure_task(task: TaskInfo, first: PassStore, second: PassStore, measurer: Measurer,
                   fraction: float, seed: int, batch: int,
                   on_batch: Callable[[TaskInfo, str, int, Dict], None] = lambda *a: None) -> int:
    """Time again the chosen records of one task not yet in the second pass; how many."""
    done = done_hashes(second)
    measured = 0
    for method in METHODS:
        jobs = [j for j in choose(task, method, first, fraction, seed)
                if j.mod_hash not in done.get((task.key, method), set())]
        for start in range(0, len(jobs), batch):
            chunk = jobs[start:start + batch]
            outcomes, info = measurer.measure([j.candidate for j in chunk])
            for job, outcome in zip(chunk, outcomes):
                second.commit(method, task, job.candidate, outcome,
                              {**info, "mod_hash": job.mod_hash, "of_pass": first.pass_no})
            measured += len(chunk)
            on_batch(task, method, len(chunk), {**info, "errors": sum(not o.ok for o in outcomes)})
    return measured


def planned(tasks: Sequence[TaskInfo], first: PassStore, fraction: float) -> int:
    """How many records the pass will time in total (for the progress line)."""
    total = 0
    for task in tasks:
        for method in METHODS:
            n = sum(is_valid(record_secs(r)) for r in first.records(method, task))
            total += min(n, max(2, math.ceil(fraction * n))) if n else 0
    return total
