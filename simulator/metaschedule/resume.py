"""Resuming `simulator.tune`: the work folder's run, the records an earlier run left there,
and a search that does not measure them again.

A tuning run writes MetaSchedule's JSONDatabase into its work folder as it measures (one
line per candidate, appended after each batch), and `tune_settings.json` (the command's
settings) before it starts. Rerunning the same command resumes it:

* `check_work_dir` compares the settings: the same command resumes; another one is
  refused with the first setting that differs (`--trials` and `--trials-per-task` may
  change: they only say how far to go) while the database holds records (a run that
  measured nothing is simply replaced). The settings include what the command did not
  give but the search depends on (the gnn's defaults, `cost_model.gnn_defaults`), so a run
  is not resumed under other defaults than it started with; a run started before they
  were recorded (`LATER_KEYS` absent from its settings) resumes under today's, says so,
  and has them recorded from then on. `start_run`, once the cost model is made and
  nothing can fail before measuring, writes the settings; with `--overwrite` it first
  removes everything of the earlier run (database, summary, settings, MetaSchedule's
  `logs/`).
* `read_earlier` reads the records already in the database, per task, in the order they
  were measured. A line cut off by a kill (no newline at its end) is dropped from the file
  and counted; a damaged line elsewhere is an error naming `file:line`.
* The records count toward the trials (`ResumingSearch` asks its search for `trials −
  earlier` more), they seed the search (MetaSchedule's EvolutionarySearch draws part of
  its first population from the database's best records), the cost model is updated with
  them before the first round, and `ResumingSearch` drops every candidate whose schedule
  is already in the database — EvolutionarySearch remembers only what it measured itself.
* Schedules are compared by `schedule_key`: the structural hash of the trace replayed from
  the JSON the database stores. A live candidate's own module differs from its record's
  replay (the trace's booleans come back as 0/1), so both go through the same round trip.
* `database_at` gives the database as it stood after an earlier, smaller `--trials`: the
  first records of each task, in the order measured (records are only ever appended).

Ctrl-C is `simulator.metaschedule.interrupt`'s.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from extract.inputs import DATABASE_FILES
from simulator.registry import SimulatorError

SETTINGS = "tune_settings.json"
SUMMARY = "tune_summary.json"
LOGS = "logs"
EMPTY_ROUNDS = 8      # search rounds of nothing new before a task counts as exhausted
LATER_KEYS = ("gnn_defaults",)   # settings that runs started before they were recorded lack


# ---------------------------------------------------------------- the work folder
def check_work_dir(work_dir: str, settings: Dict[str, Any], overwrite: bool) -> bool:
    """Whether this run resumes the one in `work_dir` (same settings, records measured);
    a one-line error when `work_dir` holds records of another command or of another tool.
    Changes nothing (see `start_run`)."""
    if overwrite or not _has_records(work_dir):
        return False
    path = os.path.join(work_dir, SETTINGS)
    if not os.path.exists(path):
        raise SimulatorError(f"{work_dir}: holds a MetaSchedule database that simulator.tune did not start "
                             f"(no {SETTINGS}); pass --overwrite to replace it, or choose another --work-dir")
    earlier = _read_settings(path)
    unrecorded = [k for k in LATER_KEYS if k in settings and k not in earlier]
    for k in unrecorded:
        print(f"note: {work_dir}: its run did not record {k} (started before simulator.tune recorded them); "
              f"resuming it under today's: {settings[k]}", file=sys.stderr)
    changed = [k for k in sorted(set(earlier) | set(settings))
               if k not in unrecorded and earlier.get(k) != settings.get(k)]
    if changed:
        k = changed[0]
        if k in LATER_KEYS and isinstance(earlier[k], dict) and isinstance(settings.get(k), dict):
            raise SimulatorError(f"{work_dir}: holds a run started under other defaults "
                                 f"({_differences(earlier[k], settings[k])}); resuming it would mix two "
                                 f"searches: pass --overwrite to start again, or choose another --work-dir")
        raise SimulatorError(f"{work_dir}: holds a run of another command ({_option(k)} {earlier.get(k)!r} "
                             f"there, {settings.get(k)!r} here); rerun that command to resume it, pass "
                             f"--overwrite to replace it, or choose another --work-dir")
    return True


def start_run(work_dir: str, settings: Dict[str, Any], resumed: bool) -> None:
    """Unless resuming: remove everything an earlier run wrote (database, summary,
    settings, MetaSchedule's logs; other files stay) and write this run's settings."""
    from extract.fileio import atomic_write

    if resumed:
        _record_later_keys(os.path.join(work_dir, SETTINGS), settings)
        return
    for name in (*DATABASE_FILES, SUMMARY, SETTINGS):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(work_dir, name))
    shutil.rmtree(os.path.join(work_dir, LOGS), ignore_errors=True)
    with atomic_write(os.path.join(work_dir, SETTINGS)) as f:
        json.dump({"tool": "simulator.tune", "settings": settings}, f, indent=1, sort_keys=True)


def _record_later_keys(path: str, settings: Dict[str, Any]) -> None:
    """A resumed run's settings with the `LATER_KEYS` it lacked (as `check_work_dir` resumed it)."""
    from extract.fileio import atomic_write

    earlier = _read_settings(path)
    missing = {k: settings[k] for k in LATER_KEYS if k in settings and k not in earlier}
    if missing:
        with atomic_write(path) as f:
            json.dump({"tool": "simulator.tune", "settings": {**earlier, **missing}}, f, indent=1, sort_keys=True)


def _has_records(work_dir: str) -> bool:
    path = os.path.join(work_dir, DATABASE_FILES[1])
    return os.path.exists(path) and os.path.getsize(path) > 0


def _read_settings(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return dict(json.load(f)["settings"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SimulatorError(f"{path}: not the settings simulator.tune writes ({e}); pass --overwrite to "
                             f"start again") from None


def other_gnn_defaults(recorded: Optional[Dict[str, Any]]) -> Optional[str]:
    """Why a finished gnn run is not one of today's gnn (None: it is): its recorded
    `gnn_defaults` (None: it recorded none) against `cost_model.gnn_defaults()`. Benchmarks
    that keep finished runs tune such a run again rather than report it as today's."""
    from .cost_model import gnn_defaults

    if recorded is None:
        return "tuned before the gnn's defaults were recorded"
    today = gnn_defaults()
    return None if recorded == today else _differences(recorded, today)


def _differences(there: Dict[str, Any], here: Dict[str, Any]) -> str:
    return ", ".join(f"{k} {there.get(k)!r} there, {here.get(k)!r} here"
                     for k in sorted(set(there) | set(here)) if there.get(k) != here.get(k))


def _option(key: str) -> str:
    return "WORKLOAD_OR_MODEL" if key == "workload" else "--" + key.replace("_", "-")


# ---------------------------------------------------------------- what an earlier run measured
@dataclass
class EarlierRecord:
    task: int
    candidate: Any           # MeasureCandidate (the trace replayed on the task's module)
    result: Any              # RunnerResult (error_msg set for a failed record)
    key: str                 # schedule_key
    latency: Optional[float]


@dataclass
class Earlier:
    """The records already in a work folder's database, for the tasks being tuned."""

    records: List[EarlierRecord] = field(default_factory=list)
    torn_lines: int = 0      # cut-off last lines dropped
    other_workloads: int = 0  # records of workloads that are none of these tasks

    def of_task(self, task: int) -> List[EarlierRecord]:
        return [r for r in self.records if r.task == task]

    def keys(self, task: int) -> FrozenSet[str]:
        return frozenset(r.key for r in self.records if r.task == task)


def read_earlier(work_dir: str, task_mods: Sequence[Any]) -> Earlier:
    """The records of `work_dir`'s database whose workload is one of `task_mods`."""
    from extract.metaschedule.jsonl import repair_truncated

    workload_path, record_path = (os.path.join(work_dir, n) for n in DATABASE_FILES)
    earlier = Earlier(torn_lines=sum(repair_truncated(p) > 0 for p in (workload_path, record_path)))
    if not os.path.exists(record_path):
        return earlier
    tasks_of = _workload_tasks(workload_path, task_mods)
    for number, line in enumerate(_lines(record_path), 1):
        index, (trace, secs, _, args) = _record_line(record_path, number, line)
        task = tasks_of.get(index)
        if task is None:
            earlier.other_workloads += 1
            continue
        earlier.records.append(_earlier_record(task, task_mods[task], trace, secs, args))
    return earlier


def database_at(work_dir: str, task_mods: Sequence[Any], counts: Sequence[int]):
    """A MetaSchedule MemoryDatabase of the first `counts[i]` records of task `i` in
    `work_dir`'s database, in the order they were measured: the database as it stood when
    each task had that many trials (a step of a run resumed with a larger `--trials`).
    Records of other workloads are left out; a task with fewer records is an error."""
    from tvm.s_tir import meta_schedule as ms

    workload_path, record_path = (os.path.join(work_dir, n) for n in DATABASE_FILES)
    tasks_of = _workload_tasks(workload_path, task_mods)
    database, workloads, taken = ms.database.MemoryDatabase(), {}, [0] * len(task_mods)
    for number, line in enumerate(_lines(record_path) if os.path.exists(record_path) else [], 1):
        if taken == list(counts):   # all there: the lines after them (even one being written) are not parsed
            break
        index, record = _record_line(record_path, number, line)
        task = tasks_of.get(index)
        if task is None or taken[task] >= counts[task]:
            continue
        taken[task] += 1
        if task not in workloads:
            workloads[task] = database.commit_workload(task_mods[task])
        try:
            database.commit_tuning_record(ms.database.TuningRecord.from_json(record, workloads[task]))
        except Exception as e:  # noqa: BLE001 - TVM raises its own error types
            raise SimulatorError(f"{record_path}:{number}: not a record of its workload "
                                 f"({str(e).strip().splitlines()[-1][:200]})") from None
    short = [i for i, (have, want) in enumerate(zip(taken, counts)) if have < want]
    if short:
        raise SimulatorError(f"{record_path}: task {short[0]} has {taken[short[0]]} records, not the "
                             f"{counts[short[0]]} asked for")
    return database


def _lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line for line in f if line.strip()]


def _record_line(path: str, number: int, line: str):
    """(workload index, record JSON) of one line of a JSONDatabase's record file."""
    try:
        index, record = json.loads(line)
        if len(record) != 4:
            raise ValueError("not [trace, run_secs, target, args_info]")
    except (ValueError, TypeError) as e:
        raise SimulatorError(f"{path}:{number}: not a tuning record ({e}); the database is "
                             f"damaged: pass --overwrite to start again") from None
    return index, record


def _workload_tasks(path: str, task_mods: Sequence[Any]) -> Dict[int, int]:
    """Workload line index → index of the task with that module."""
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    if not os.path.exists(path):
        return {}
    hashes = [int(tvm_ffi.structural_hash(m)) for m in task_mods]
    out = {}
    for index, line in enumerate(_lines(path)):
        try:
            mod = ms.database.Workload.from_json(json.loads(line)).mod
        except Exception as e:  # noqa: BLE001 - TVM raises its own error types
            raise SimulatorError(f"{path}:{index + 1}: not a workload ({str(e).strip().splitlines()[-1]}); the "
                                 f"database is damaged: pass --overwrite to start again") from None
        digest = int(tvm_ffi.structural_hash(mod))
        for task, (task_mod, task_hash) in enumerate(zip(task_mods, hashes)):
            if digest == task_hash and tvm_ffi.structural_equal(mod, task_mod):
                out[index] = task
    return out


def _earlier_record(task: int, mod, trace_json, secs, args_json) -> EarlierRecord:
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.database import replay
    from extract.metaschedule.store import is_valid, schedule_hash

    sch = replay(mod, trace_json)
    secs = [float(s) for s in secs or []]
    ok = is_valid(secs)
    result = ms.runner.RunnerResult(run_secs=secs if ok else None,
                                    error_msg=None if ok else "failed when an earlier run measured it")
    candidate = ms.MeasureCandidate(sch, [ms.arg_info.ArgInfo.from_json(a) for a in args_json])
    return EarlierRecord(task, candidate, result, schedule_hash(sch.mod), sum(secs) / len(secs) if ok else None)


def schedule_key(mod, trace) -> str:
    """The schedule hash of `trace` replayed on `mod` from the JSON a database stores it
    as (see the module docstring): equal for a live candidate and its record."""
    from extract.metaschedule.database import replay
    from extract.metaschedule.store import schedule_hash

    return schedule_hash(replay(mod, json.loads(json.dumps(_stored_json(trace.as_json(remove_postproc=False))))).mod)


def _stored_json(obj):
    """A trace's JSON object as JSONDatabase writes it: numbers plain, booleans 0/1."""
    import tvm

    if isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, tvm.tirx.IntImm):
        return int(obj.value)
    if isinstance(obj, tvm.tirx.FloatImm):
        return float(obj.value)
    if isinstance(obj, list):
        return [_stored_json(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _stored_json(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- the search
@derived_object
class ResumingSearch(PySearchStrategy):
    """MetaSchedule's search (`inner`) for a task an earlier run measured `done` candidates
    of (`measured`: their schedule keys): it is asked for `max_trials − done` more, and
    every candidate already measured is dropped from what it proposes. With nothing
    earlier it only passes calls through."""

    def __init__(self, inner, measured: FrozenSet[str] = frozenset(), done: int = 0, interrupts=None):
        super().__init__()
        self.inner, self.measured, self.done = inner, frozenset(measured), int(done)
        self.interrupts = interrupts   # simulator.metaschedule.interrupt.Interrupts: checked around each search round
        self.mod = None
        self.left = 0                  # trials still to measure in this run

    def _initialize_with_tune_context(self, context) -> None:
        self.inner._initialize_with_tune_context(context)  # noqa: SLF001 - MetaSchedule's own hook
        self.mod = context.mod

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.left = max(int(max_trials) - self.done, 0)
        self.inner.pre_tuning(self.left, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        """The inner search's next candidates, less those measured earlier; at most the
        trials left (the inner search, asked again after a round of nothing new, would
        offer a whole round: it counts only what it is told was measured)."""
        for _ in range(EMPTY_ROUNDS):
            self._check()
            if self.left <= 0:
                return None
            candidates = self.inner.generate_measure_candidates()
            self._check()
            if candidates is None:
                return None
            fresh = [c for c in candidates if not self.measured or schedule_key(self.mod, c.sch.trace) not in self.measured]
            if fresh:
                return fresh[:self.left]
        return None

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.left -= len(results)
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        return ResumingSearch(self.inner.clone(), self.measured, self.done, self.interrupts)

    def _check(self) -> None:
        if self.interrupts is not None:
            self.interrupts.check()
