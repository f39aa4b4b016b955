"""Measure MetaSchedule schedules of one task, sampled two ways, as TenSet did.

* `random`: MetaSchedule's `ReplayTrace` — every sampling decision of the design space
  drawn uniformly — so slow and middling schedules are present, not only good ones.
* `evolutionary`: MetaSchedule's `EvolutionarySearch` guided by its XGBoost cost model,
  so the fast end is present too. TVM's XGB model predicts at random until it has
  `num_warmup_samples` (100) measurements, which would make this half random as well; so
  the model here has no warm-up and is first trained on the task's records measured so far
  (its random half), then updated after every batch, and the search's initial population
  includes the best of those records (a MemoryDatabase holding both halves).

The loop is MetaSchedule's own (generate candidates → build → run → record) written out
rather than `ms.tune_tasks`, for three things the task scheduler cannot do: skip a
candidate that is already in the databases (so each record is a distinct schedule, and a
resumed run does not measure again what it has), time the reference kernel and check the
measuring core's load between batches, and stop a task whose design space has run out of
new schedules (tiny elementwise spaces) instead of spinning.
"""
from __future__ import annotations

import os
import shutil
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .cpu_load import LoadMonitor
from .drift import ReferenceTimer
from .store import METHODS, Outcome, PassStore, record_secs, schedule_hash
from .tasks import TaskInfo


@dataclass(frozen=True)
class SearchSettings:
    """How candidates are generated (see the module docstring)."""

    batch: int = 24              # candidates built and timed per round
    # evolutionary search population (TVM's default is 512): its CPU cost is linear in the
    # population (measured on a ResNet conv: 5.6 / 11.6 / 24.7 s per round at 64 / 128 / 256)
    population: int = 128
    max_empty_rounds: int = 5    # rounds without a new schedule before a space counts as used up
    seed: int = 0


# ---------------------------------------------------------------- building and timing
class Measurer:
    """Builds candidates on the build core(s) and times each on the measuring runner as
    soon as it is built (the next one builds meanwhile); before a batch it checks that the
    measuring core is quiet, between timings it watches it, and after the batch it times
    the reference kernel when that is due."""

    def __init__(self, builder, runner, target, monitor: LoadMonitor,
                 reference: Optional[ReferenceTimer], max_wait_s: float = 60.0):
        self.builder, self.runner, self.target = builder, runner, target
        self.monitor, self.reference, self.max_wait_s = monitor, reference, max_wait_s
        self.warn: Callable[[str], None] = lambda message: None

    def _quiet_start(self) -> Optional[float]:
        """Wait (a little) for a quiet measuring core; the load seen before the batch."""
        load = self.monitor.before_measuring(self.max_wait_s)
        if load is not None and load.busy > self.monitor.threshold:
            self.warn(f"measuring core busy before timing: {load.describe()}")
        self.monitor.batch_load()
        self.monitor.mark()
        return None if load is None else round(load.busy, 1)

    def _time_one(self, candidate, built) -> Outcome:
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        if built.error_msg is not None:
            return Outcome(None, _short(built.error_msg), "build")
        self.monitor.close()
        (future,) = self.runner.run([RunnerInput(built.artifact_path, "cpu", candidate.args_info)])
        ran = future.result()
        self.monitor.mark()
        _remove_artifact(built.artifact_path)
        if ran.error_msg is not None or not ran.run_secs:
            return Outcome(None, _short(ran.error_msg or "no run_secs"), "run")
        return Outcome([float(s) for s in ran.run_secs])

    def measure(self, candidates: Sequence) -> Tuple[List[Outcome], Dict]:
        """Outcomes in candidate order, and the batch's figures for the sidecar."""
        from tvm.s_tir.meta_schedule.builder import BuilderInput

        start = time.time()
        pre_busy = self._quiet_start()
        inputs = [BuilderInput(c.sch.mod, self.target) for c in candidates]
        builds = (self.builder.build_iter(inputs) if hasattr(self.builder, "build_iter")
                  else iter(self.builder.build(inputs)))
        outcomes = [self._time_one(c, b) for c, b in zip(candidates, builds)]
        load = self.monitor.batch_load()
        if load is not None and load.busy > self.monitor.threshold:
            self.warn(f"measuring core busy between timings: {load.describe()}")
        if self.reference is not None and self.reference.due():
            self.monitor.close()
            if self.reference.time_now()["repinned"]:
                self.warn("runner worker found off the measuring core: put back")
            self.monitor.mark()
        n = max(len(candidates), 1)
        return outcomes, {"batch_s": round((time.time() - start) / n, 4), "pre_load_busy": pre_busy,
                          "load_busy": None if load is None else round(load.busy, 1),
                          "load_steal": None if load is None else round(load.steal, 1)}


def _short(message: str) -> str:
    lines = [l for l in str(message).strip().splitlines() if l.strip()]
    return (lines[0][:200] + (" … " + lines[-1][:300] if len(lines) > 1 else "")) if lines else ""


def _remove_artifact(path: str) -> None:
    """LocalBuilder exports each build into its own temporary folder; remove it."""
    folder = os.path.dirname(path)
    if os.path.basename(folder).startswith("tmp"):
        shutil.rmtree(folder, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


# ---------------------------------------------------------------- one task, one method
def _seed(settings: SearchSettings, task: TaskInfo, method: str, have: int) -> int:
    """A search seed per (run seed, task, method, records so far): a resumed run draws new
    samples rather than replaying the ones it already has."""
    return zlib.crc32(f"{settings.seed}|{task.key}|{method}|{have}".encode()) & 0x7FFFFFFF


def make_context(task: TaskInfo, method: str, target, seed: int, settings: SearchSettings):
    from tvm.s_tir import meta_schedule as ms

    if method == "random":
        strategy = ms.search_strategy.ReplayTrace()
    else:
        strategy = ms.search_strategy.EvolutionarySearch(population_size=settings.population)
    return ms.TuneContext(task.mod, target=target, space_generator="post-order-apply",
                          search_strategy=strategy, task_name=task.key, rand_state=seed,
                          num_threads=1)


def warm_cost_model(context, records: Sequence):
    """TVM's XGB model without warm-up, trained on `records` (the task's measurements)."""
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    model = XGBModel(num_warmup_samples=0, num_tuning_cores=1, verbose_eval=0)
    if records:
        model.update(context, [r.as_measure_candidate() for r in records],
                     [RunnerResult(record_secs(r), None) for r in records])
    return model


def _memory_database(task: TaskInfo, records: Sequence):
    """The task's records so far, for the evolutionary search's initial population."""
    from tvm.s_tir.meta_schedule.database import MemoryDatabase, TuningRecord

    db = MemoryDatabase()
    workload = db.commit_workload(task.mod)
    for r in records:
        db.commit_tuning_record(TuningRecord(r.trace, workload, r.run_secs, r.target, r.args_info))
    return db, workload


class TaskCollector:
    """Collects the records of every (task, method) into a `PassStore`."""

    def __init__(self, store: PassStore, measurer: Measurer, target, settings: SearchSettings,
                 on_batch: Callable[[TaskInfo, str, int, Dict], None] = lambda *a: None):
        self.store, self.measurer, self.target, self.settings = store, measurer, target, settings
        self.on_batch = on_batch

    def known_hashes(self, task: TaskInfo) -> set:
        """Schedules of the task already in either database (replayed from their traces)."""
        return {schedule_hash(r.as_measure_candidate().sch.mod)
                for m in METHODS for r in self.store.records(m, task)}

    def collect(self, task: TaskInfo, method: str, wanted: int) -> int:
        """Measure until the method has `wanted` records of the task (or the space is used
        up); returns how many were measured now."""
        have = self.store.count(method, task)
        if have >= wanted or self.store.is_exhausted(method, task):
            return 0
        seen = self.known_hashes(task)
        context = make_context(task, method, self.target, _seed(self.settings, task, method, have),
                               self.settings)
        model = database = workload = None
        if method == "evolutionary":
            previous = [r for m in METHODS for r in self.store.records(m, task)]
            model = warm_cost_model(context, previous)
            database, workload = _memory_database(task, previous)
        need = wanted - have
        rounds = -(-need // self.settings.batch)
        per_round = -(-need // rounds)
        spare = max(1, per_round // 8)  # a few more per round than needed: duplicates are
        # dropped, and a whole search round for the last one or two records is costly
        context.pre_tuning(max_trials=need + rounds * spare, num_trials_per_iter=per_round + spare,
                           design_spaces=context.generate_design_space(), database=database,
                           cost_model=model)
        try:
            return self._rounds(task, method, need, context, seen, model, database, workload)
        finally:
            context.post_tuning()

    def _rounds(self, task, method, need, context, seen, model, database, workload) -> int:
        measured, empty = 0, 0
        while measured < need:
            start = time.time()
            candidates = context.generate_measure_candidates()
            if candidates is None:
                self.store.mark_exhausted(method, task, "search returned no candidates")
                break
            fresh = self._fresh(candidates, seen)[: need - measured]
            if not fresh:
                context.notify_runner_results([], [])
                empty += 1
                if empty >= self.settings.max_empty_rounds:
                    self.store.mark_exhausted(method, task, f"{empty} rounds without a new schedule")
                    break
                continue
            empty = 0
            search_s = round((time.time() - start) / len(fresh), 4)
            self._measure_batch(task, method, fresh, search_s, context, model, (database, workload))
            measured += len(fresh)
        return measured

    def _measure_batch(self, task, method, fresh, search_s, context, model, memory) -> None:
        """Build, time and record one batch; tell the search, the cost model and the
        search's database what came out."""
        from tvm.s_tir.meta_schedule.database import TuningRecord
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        chosen = [candidate for candidate, _ in fresh]
        outcomes, info = self.measurer.measure(chosen)
        info["search_s"] = search_s
        database, workload = memory
        results = []
        for (candidate, digest), outcome in zip(fresh, outcomes):
            self.store.commit(method, task, candidate, outcome, {**info, "mod_hash": digest})
            results.append(RunnerResult(outcome.run_secs, outcome.error))
            if database is not None:
                database.commit_tuning_record(TuningRecord(
                    candidate.sch.trace, workload, outcome.run_secs or [1e10], self.target,
                    candidate.args_info))
        if model is not None:
            model.update(context, chosen, results)
        context.notify_runner_results(chosen, results)
        self.on_batch(task, method, len(fresh), {**info, "errors": sum(not o.ok for o in outcomes)})

    @staticmethod
    def _fresh(candidates: Sequence, seen: set) -> List[Tuple[object, str]]:
        """(candidate, schedule hash) of the candidates in neither database nor earlier in
        this batch."""
        fresh = []
        for candidate in candidates:
            digest = schedule_hash(candidate.sch.mod)
            if digest not in seen:
                seen.add(digest)
                fresh.append((candidate, digest))
        return fresh
