"""Where one measuring pass keeps its records: MetaSchedule databases plus a sidecar.

    PASS_DIR/random/database_workload.json, database_tuning_record.json
    PASS_DIR/evolutionary/database_workload.json, database_tuning_record.json
    PASS_DIR/records.jsonl    one line per record: workload key, method, wall-clock time,
                              every repeat, min, median, error, load on the measuring core
    PASS_DIR/state.json       (task, method) pairs whose design space ran out of new schedules

One normal `JSONDatabase` per sampling method keeps each method's records readable by any
MetaSchedule tool (and by `extract.metaschedule.database`) without a filter. A database keeps only what
MetaSchedule keeps (trace, run_secs, target, argument info, and 1e10 for a failure), so
the sidecar holds what it cannot: when a record was measured (drift correction), why it
failed, and how loaded the machine was. The sidecar line is written first, then the
database record; a run killed between the two leaves a sidecar line too many, which
`reconcile` removes on the next start: counts always come from the database.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from extract.fileio import atomic_write
from extract.inputs import DATABASE_FILES, PASS_STATE, SIDECAR
from .jsonl import JsonlLog, read_jsonl, repair_truncated
from .tasks import TaskInfo

METHODS = ("random", "evolutionary")
FAILED = 1e10  # MetaSchedule's run_secs of a record that did not build or run


@dataclass
class Outcome:
    """What measuring one candidate gave: every repeat, or the stage that failed and why."""

    run_secs: Optional[List[float]]
    error: Optional[str] = None
    stage: str = "ok"                 # ok | build | run
    time: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.run_secs is not None


def record_secs(record) -> List[float]:
    """A TuningRecord's run_secs as floats ([] when missing)."""
    return [float(s) for s in (record.run_secs or [])]


def is_valid(secs: Sequence[float]) -> bool:
    return bool(secs) and max(secs) < FAILED


def schedule_hash(mod) -> str:
    """The structural hash of a scheduled IRModule (how candidates are told apart)."""
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}"


class PassStore:
    """The databases, sidecar and state of one pass folder (see the module docstring)."""

    def __init__(self, folder: str, pass_no: int, target):
        from tvm.s_tir.meta_schedule.database import JSONDatabase

        self.folder, self.pass_no, self.target = folder, pass_no, target
        self.dbs = {}
        for method in METHODS:
            sub = os.path.join(folder, method)
            os.makedirs(sub, exist_ok=True)
            for name in DATABASE_FILES:
                repair_truncated(os.path.join(sub, name))
            self.dbs[method] = JSONDatabase(work_dir=sub)
        self.sidecar_path = os.path.join(folder, SIDECAR)
        self.sidecar = JsonlLog(self.sidecar_path)
        self.state_path = os.path.join(folder, PASS_STATE)
        self.state = self._read_state()
        self._grouped = {m: self._group(db) for m, db in self.dbs.items()}

    @staticmethod
    def _group(db) -> Dict:
        grouped: Dict = {}
        for record in db.get_all_tuning_records():
            grouped.setdefault(record.workload, []).append(record)
        return grouped

    def _read_state(self) -> Dict:
        if not os.path.exists(self.state_path):
            return {"exhausted": {}}
        with open(self.state_path, encoding="utf-8") as f:
            return json.load(f)

    # ------------------------------------------------------------ reading
    def workload(self, method: str, task: TaskInfo):
        return self.dbs[method].commit_workload(task.mod)

    def records(self, method: str, task: TaskInfo) -> List:
        """The task's records of `method` (MetaSchedule TuningRecords, any order)."""
        db = self.dbs[method]
        if not db.has_workload(task.mod):  # reading never adds a workload to the file
            return []
        return list(self._grouped[method].get(db.commit_workload(task.mod), []))

    def count(self, method: str, task: TaskInfo) -> int:
        return len(self.records(method, task))

    def is_exhausted(self, method: str, task: TaskInfo) -> bool:
        return f"{task.key}|{method}" in self.state["exhausted"]

    # ------------------------------------------------------------ writing
    def commit(self, method: str, task: TaskInfo, candidate, outcome: Outcome, extra: Dict) -> None:
        """Append one record: its sidecar line, then the method's database record."""
        from tvm.s_tir.meta_schedule.database import TuningRecord

        workload = self.workload(method, task)
        self.sidecar.append(self.sidecar_row(method, task, outcome, extra))
        secs = outcome.run_secs if outcome.ok else [FAILED]
        record = TuningRecord(candidate.sch.trace, workload, secs, self.target, candidate.args_info)
        self.dbs[method].commit_tuning_record(record)
        self._grouped[method].setdefault(workload, []).append(record)

    def sidecar_row(self, method: str, task: TaskInfo, outcome: Outcome, extra: Dict) -> Dict:
        secs = outcome.run_secs or []
        return {"pass": self.pass_no, "method": method, "workload": task.key,
                "record": self.count(method, task), "time": outcome.time,
                "run_secs": secs, "min": min(secs) if secs else None,
                "median": statistics.median(secs) if secs else None,
                "error": outcome.error, "stage": outcome.stage, **extra}

    def mark_exhausted(self, method: str, task: TaskInfo, reason: str) -> None:
        self.state["exhausted"][f"{task.key}|{method}"] = reason
        with atomic_write(self.state_path) as f:
            json.dump(self.state, f, indent=1, sort_keys=True)

    def reconcile(self, tasks: Sequence[TaskInfo]) -> Dict[str, int]:
        """Make the sidecar agree with the databases after a kill: drop this pass's lines
        whose record never reached the database; note records that have no line."""
        counts = {(t.key, m): self.count(m, t) for t in tasks for m in METHODS}
        rows = read_jsonl(self.sidecar_path)
        keep, dropped, seen = [], 0, {}
        for row in rows:
            pair = (row.get("workload"), row.get("method"))
            if row.get("pass") == self.pass_no and pair in counts and row["record"] >= counts[pair]:
                dropped += 1
                continue
            keep.append(row)
            if row.get("pass") == self.pass_no:
                seen[pair] = seen.get(pair, 0) + 1
        if dropped:
            self.sidecar.close()
            with atomic_write(self.sidecar_path) as f:
                f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in keep)
            self.sidecar = JsonlLog(self.sidecar_path)
        missing = 0
        for (key, method), n in counts.items():
            for ordinal in range(seen.get((key, method), 0), n):
                self.sidecar.append({"pass": self.pass_no, "method": method, "workload": key,
                                     "record": ordinal, "time": None, "recovered": True})
                missing += 1
        return {"dropped": dropped, "missing": missing}

    def close(self) -> None:
        self.sidecar.close()

