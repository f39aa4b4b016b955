"""Tune an operator or a whole network with MetaSchedule, the simulator as its cost model.

    python -m simulator.tune WORKLOAD_OR_MODEL --cost-model gnn|tvm-xgb|tvm-xgb-pretrained|tvm-mlp|random
        --trials N --work-dir DIR [--checkpoint RUN_DIR] [--target TARGET] [--seed S]

WORKLOAD_OR_MODEL is one of
  * a network of `extract.metaschedule.networks` (`resnet50`, `mobilenet_v2`, `bert`, `vit`): imported
    into Relax and split into MetaSchedule's tasks as the dataset was (`extract.metaschedule.tasks`),
    all tuned together by MetaSchedule's gradient task scheduler (`--trials` for the whole
    network, as `ms.relax_integration.tune_relax` counts them; `--trials-per-task` caps one);
  * an operator by shape: `dense_128x768x3072` (M×K×N), `batch_matmul_12x128x64x128`,
    `conv2d_1x64x56x56_64x3x3_s1_p1` or ResNet-18's `C1`…`C12` (`extract.tir.workloads`);
  * a MetaSchedule workload key (`extract.tir.workload_key.workload_key`, e.g. one of the
    dataset's tasks), looked up in `--tasks` (a task table `tasks.json` of
    `extract.ms_measure`, or MetaSchedule databases whose workloads hold it);
  * a TVMScript file (a `@T.prim_func`, or an `@I.ir_module` of PrimFuncs: each tuned).

Cost models (`simulator.metaschedule.cost_model`, TVM's own in `simulator.metaschedule.rivals`): `gnn` — the simulator, from `--checkpoint` (a
`simulator.train` run, pre-trained; by default the shipped pre-trained cost model of this
CPU's networks dataset, or of the largest shipped one; `--checkpoint cold`: none, the first
measurements train it), fine-tuned online; `tvm-xgb` —
MetaSchedule's default XGBModel (random until 100 measurements); `tvm-xgb-pretrained` —
XGBModel trained offline on `--pretrain-data` databases (or loaded from `--checkpoint`,
a tar saved by `pretrain_xgb`), then updated online; `tvm-mlp` — MetaSchedule's MLPModel;
`random` — MetaSchedule's RandomModel.

Measuring (`extract.metaschedule.runner`, the dataset's protocol): candidates are built by
MetaSchedule's LocalBuilder function on a pool of persistent workers (the per-call pool
of LocalBuilder re-imports TVM's tensor intrinsics, > 1 s per candidate), and timed by
MetaSchedule's LocalRunner in one worker pinned to the measuring core (`--measure-core`,
default the last core this process may use: under `taskset -c 0` that is core 0),
single-threaded kernels (`TVM_NUM_THREADS=1`, target `num-cores` 1), evaluator
`number=1, repeat=5, min_repeat_ms=20` — TVM raises `number` until one repeat lasts
≥ 20 ms, so a 50 µs kernel is averaged over ~400 runs per repeat and timer resolution
and one-off interrupts stop mattering, while a slow kernel runs once per repeat; every
repeat is kept in the database — and no cache flush (it would flush once per repeat,
before `number` warm runs: a variable cold first run; batch-1 kernels run warm in a
network). Timeouts are explicit (build 120 s, run 60 s). The search itself runs in this
process with one thread.

Output: DIR holds a normal MetaSchedule database (`database_workload.json`,
`database_tuning_record.json`; `python -m extract.tvm_log DIR` and `simulator.train
--data DIR` read it), MetaSchedule's logs, `tune_settings.json` (the command's settings)
and `tune_summary.json`: per task the best latency, trials (of them resumed) and errors;
the best-so-far history (one row per measured candidate); the time spent in the cost
model (predict, update, featurizing) against the run's wall time; the measuring
configuration; warnings. A network is then compiled with the database applied
(`simulator.metaschedule.network`: the database applied to the imported network, `DIR/network.so`) and timed end to
end with the same protocol on the measuring core (every repeat kept): `end_to_end` in the
summary, and a line after the table; its kernels are then timed call by call inside the
network (`end_to_end.kernels_s`), and a second line sets them beside their tasks' bests
alone. A progress line per measured batch shows trials, the batch's best, the best so far
and the cost model's share of the time; a table ends the run.

Stopping and resuming (`simulator.metaschedule.resume`, `simulator.metaschedule.interrupt`): rerunning the
same command in the same DIR resumes it — the records already in its database count
toward `--trials` (per task, as MetaSchedule's scheduler counts them), teach the cost
model before it ranks anything, seed the search (MetaSchedule's evolutionary search
starts from the database's best), and are never measured again; a record line cut off
by a kill is dropped and counted; the summary and the table say how many were resumed.
`--trials` / `--trials-per-task` may be raised on a rerun to go further. A DIR holding
records of another command (any other setting) or of another tool is refused with the
setting that differs; `--overwrite` removes everything of the earlier run (database,
summary, settings, `logs/`) and starts again. Ctrl-C stops at once (a batch being
searched, built or timed is dropped whole, a batch being stored is finished first),
writes and prints the summary of what the database holds, and exits 130 with
"interrupted".

Refused before anything is made or measured (one line, exit 2): an option the chosen
cost model does not read (each registered cost model's `options`: e.g. `--checkpoint`
with tvm-xgb, `--workers` with anything but gnn, `--cold-model` with a checkpoint), an
unknown or unusable `--cold-model`, `--tasks` without a workload key, a target whose
kernels cannot run on this machine (another device kind, architecture, or a CPU with
instruction sets this one lacks; measuring on `--tracker` devices is not checked) or an
LLVM target without `num-cores`, pre-training data with no usable record. A run in which
no candidate ran is an error (exit 2, with the first error; the summary is still
written); a measuring core that other processes keep busy is a warning, printed and
kept in the summary.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from extract.cli import COUNT, FRACTION, NONNEGATIVE, SEED, Int, output_folder

from .interrupt import InterruptibleBuilder, InterruptibleCostModel, InterruptibleRunner, Interrupts
from .resume import SUMMARY, Earlier, ResumingSearch, check_work_dir, read_earlier, start_run
from simulator.registry import SimulatorError, run_cli


@dataclass
class Task:
    """One MetaSchedule tuning task."""

    name: str            # MetaSchedule's task name
    mod: Any             # IRModule holding the PrimFunc
    weight: int = 1      # calls per inference (networks)
    key: str = ""        # extract.tir.workload_key.workload_key
    flops: float = 0.0


@dataclass
class SearchSettings:
    """The evolutionary search (MetaSchedule's defaults unless said)."""

    trials: int
    trials_per_iter: int = 64
    trials_per_task: Optional[int] = None
    population: int = 512
    init_min_unmeasured: int = 50
    genetic_num_iters: int = 4
    seed: int = 0

    def strategy(self):
        from tvm.s_tir import meta_schedule as ms

        return ms.search_strategy.EvolutionarySearch(
            population_size=self.population, init_min_unmeasured=min(self.init_min_unmeasured, self.population),
            genetic_num_iters=self.genetic_num_iters)


# ---------------------------------------------------------------- what to tune
def _task(name: str, mod, target, weight: int = 1) -> Task:
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    from extract.tir.workload_key import workload_key

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod.with_attr("global_symbol", "main")})
    return Task(name, mod, weight, workload_key(mod, target), float(estimate_tir_flops(mod)))


def network_tasks(name: str, target) -> List[Task]:
    """The tasks of a network of `extract.metaschedule.networks`, as the dataset extracted them."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.tasks import import_network

    with target:
        mod = import_network(name)
    return [_task(str(t.task_name), t.dispatched[0], target, int(t.weight))
            for t in ms.relax_integration.extract_tasks(mod, target)]


def keyed_task(key: str, target, tables: Sequence[str]) -> Task:
    """The task of a workload key, from task tables or databases. Keys are compared
    without their target part, so a key of the dataset's machine finds its task."""
    from extract.metaschedule.database import find_databases, holds_databases, read_databases, workload_module
    from extract.metaschedule.tasks import load_tasks
    from extract.tir.workload_key import computation, parse_workload_key

    try:
        want = computation(str(parse_workload_key(key)))
    except ValueError as e:
        raise SimulatorError(f"workload key {key!r}: malformed ({e}); a key reads "
                             f"kind.chain.shapes.dtype.digest.target, e.g. "
                             f"dense.none.128x768_768x3072_128x3072.float32.3f9c2a1b.x86") from None
    for table in tables:
        if holds_databases(table):
            jobs, _ = read_databases(find_databases(table), skip_bad=True)
            for job in jobs:
                if computation(job.group) == want:
                    return _task(key, workload_module(job.workload), target)
        elif os.path.isfile(table):
            try:
                infos = load_tasks(table)
            except ValueError as e:
                raise SimulatorError(f"--tasks {e}") from None
            for info in infos:
                if computation(info.key) == want:
                    try:
                        mod = info.mod
                    except Exception as e:  # noqa: BLE001 - TVM's JSON reader raises its own types
                        raise SimulatorError(f"--tasks {table}: the module of {info.key} does not load "
                                             f"({' '.join(str(e).split())[:200]})") from None
                    return _task(key, mod, target, info.weight)
        else:
            raise SimulatorError(f"--tasks {table}: no such task table or database")
    where = ", ".join(tables) if tables else "no --tasks given"
    raise SimulatorError(f"workload key {key!r} not found ({where}); pass --tasks with the task table "
                         f"(tasks.json of extract.ms_measure) or databases that hold it")


def script_tasks(path: str, target) -> List[Task]:
    """The PrimFuncs of a TVMScript file."""
    import tvm
    from tvm.script import from_source

    try:
        with open(path, encoding="utf-8") as f:
            parsed = from_source(f.read())
    except UnicodeDecodeError:
        raise SimulatorError(f"{path}: not a text file; WORKLOAD_OR_MODEL names a TVMScript file, a network, "
                             f"an operator or a workload key") from None
    except Exception as e:  # noqa: BLE001 - the parser raises SyntaxError, TVM's DiagnosticError, ...
        reason = " ".join(str(e).split()) or type(e).__name__
        raise SimulatorError(f"{path}: not TVMScript that TVM parses ({type(e).__name__}: {reason[:300]})") from None
    if isinstance(parsed, tvm.tirx.PrimFunc):
        return [_task(os.path.basename(path), parsed, target)]
    if not isinstance(parsed, tvm.IRModule):
        raise SimulatorError(f"{path}: holds no PrimFunc (TVMScript gave {type(parsed).__name__})")
    funcs = [(gv.name_hint, f) for gv, f in parsed.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    if not funcs:
        raise SimulatorError(f"{path}: holds no PrimFunc")
    return [_task(name, func, target) for name, func in sorted(funcs, key=lambda x: x[0])]


def looks_like_key(spec: str) -> bool:
    """Whether WORKLOAD_OR_MODEL is meant as a workload key (a malformed one, too, so that
    its error says what a key is)."""
    return spec.count(".") >= 4


def resolve(spec: str, target, tables: Sequence[str] = ()) -> List[Task]:
    """The tasks WORKLOAD_OR_MODEL names (see the module docstring)."""
    from extract.metaschedule.networks import NETWORKS
    from extract.tir.workloads import parse_workload

    if spec in NETWORKS:
        return network_tasks(spec, target)
    if os.path.isfile(spec):
        return script_tasks(spec, target)
    if looks_like_key(spec):
        return [keyed_task(spec, target, tables)]
    try:
        workload = parse_workload(spec)
    except ValueError as e:
        raise SimulatorError(f"{e}; or a network ({', '.join(NETWORKS)}), a MetaSchedule workload key "
                             f"(with --tasks), or a TVMScript file") from None
    return [_task(workload.key, workload.prim_func(), target)]


def parse_target(text: Optional[str]):
    """`--target`: a target string or JSON config; default LLVM for this CPU, one core.
    An LLVM target must say `num-cores` (MetaSchedule's CPU rules read it)."""
    from tvm.target import Target

    from extract.metaschedule.runner import host_target

    if not text:
        return host_target(1)
    try:
        target = Target(json.loads(text)) if text.lstrip().startswith("{") else Target(text)
    except Exception as e:  # noqa: BLE001 - TVM raises its own error types
        raise SimulatorError(f"--target {text!r}: {str(e).strip().splitlines()[-1]}") from None
    if str(target.kind.name) == "llvm" and "num-cores" not in target.attrs:
        raise SimulatorError(f"--target {text!r}: an LLVM target needs \"num-cores\" (MetaSchedule's CPU rules "
                             f"read it; kernels are timed single-threaded here, so 1 fits)")
    return target


# ---------------------------------------------------------------- progress
def _mean(result) -> Optional[float]:
    secs = [float(s) for s in (result.run_secs or [])]
    if getattr(result, "error_msg", None) is not None or not secs or max(secs) >= 1e10:
        return None
    return sum(secs) / len(secs)


class Recorder:
    """What a tuning run measured, in order: one row per candidate (task, latency or
    None for an error, the task's best so far, seconds since the start); the records an
    earlier run of the same command left come first, marked `resumed`."""

    def __init__(self, tasks: Sequence[Task], stats=None, quiet: bool = False):
        self.tasks, self.stats, self.quiet = list(tasks), stats, quiet
        self.start = time.perf_counter()
        self.rows: List[Dict[str, Any]] = []
        self.best: List[Optional[float]] = [None] * len(tasks)
        self.trials = [0] * len(tasks)
        self.errors = [0] * len(tasks)
        self.resumed = [0] * len(tasks)
        self.first_error: Optional[str] = None

    def _count(self, task_id: int, latency: Optional[float], row: Dict[str, Any]) -> None:
        self.trials[task_id] += 1
        if latency is None:
            self.errors[task_id] += 1
        elif self.best[task_id] is None or latency < self.best[task_id]:
            self.best[task_id] = latency
        self.rows.append({"trial": len(self.rows) + 1, "task": task_id, "latency_s": latency,
                          "best_s": self.best[task_id], **row})

    def add_earlier(self, earlier) -> None:
        """The records of an earlier run (`resume.Earlier`), in the order measured."""
        for record in earlier.records:
            self.resumed[record.task] += 1
            self._count(record.task, record.latency, {"elapsed_s": None, "resumed": True})

    def add(self, task_id: int, results) -> None:
        elapsed = time.perf_counter() - self.start
        batch = []
        for result in results:
            latency = _mean(result)
            if latency is None and self.first_error is None:
                self.first_error = " ".join(str(result.error_msg or "no run_secs").split())[:300]
            self._count(task_id, latency, {"elapsed_s": round(elapsed, 3), "resumed": False})
            batch.append(latency)
        if not self.quiet:
            print(self.line(task_id, batch, elapsed), flush=True)

    def weighted_best(self) -> Optional[float]:
        """Σ weight × best latency over the tasks (None until every task has one)."""
        if any(b is None for b in self.best):
            return None
        return sum(t.weight * b for t, b in zip(self.tasks, self.best))

    def line(self, task_id: int, batch: Sequence[Optional[float]], elapsed: float) -> str:
        valid = [b for b in batch if b is not None]
        task = self.tasks[task_id]
        share = ""
        if self.stats is not None and elapsed > 0:
            share = f", cost model {100 * self.stats.total_s / elapsed:.0f}% of the time"
        best = self.best[task_id]
        total = self.weighted_best() if len(self.tasks) > 1 else None
        return (f"[{len(self.rows)} trials, {elapsed:.0f} s] {task.name}: batch of {len(batch)}"
                + (f" best {_us(min(valid))}" if valid else "") + f", {len(batch) - len(valid)} errors; "
                f"best so far {_us(best)}" + (f"; network {_us(total)}" if total is not None else "") + share)


def _us(seconds: Optional[float]) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def recording_callback(recorder: Recorder, interrupts: Optional[Interrupts] = None):
    """The measure callback that records each batch (last in the list: with `interrupts`
    it ends the stretch in which Ctrl-C is held back, see `holding_callback`)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class Progress(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            recorder.add(int(task_id), runner_results)
            if interrupts is not None:
                interrupts.release()

    return Progress()


def holding_callback(interrupts: Interrupts):
    """The first measure callback: from here until `recording_callback` has run, a
    measured batch is being stored (database, cost model, progress) and Ctrl-C waits."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class Hold(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            interrupts.hold()

    return Hold()


# ---------------------------------------------------------------- tuning
@dataclass
class TuneResult:
    """What `tune` returns (and writes as tune_summary.json)."""

    tasks: List[Dict[str, Any]]
    history: List[Dict[str, Any]]
    wall_s: float
    cost_model_stats: Dict[str, Any] = field(default_factory=dict)
    settings: Dict[str, Any] = field(default_factory=dict)
    resumed: Dict[str, Any] = field(default_factory=dict)   # records of an earlier run (see tune)
    interrupted: bool = False
    first_error: Optional[str] = None

    @property
    def cost_model_share(self) -> Optional[float]:
        total = self.cost_model_stats.get("total_s")
        return total / self.wall_s if total is not None and self.wall_s > 0 else None

    @property
    def valid_trials(self) -> int:
        return sum(t["trials"] - t["errors"] for t in self.tasks)

    def best_latency(self) -> Optional[float]:
        """The best latency of a one-task run, or the weighted sum over a network's tasks."""
        bests = [t["best_s"] for t in self.tasks]
        if any(b is None for b in bests):
            return None
        return sum(t["weight"] * t["best_s"] for t in self.tasks)

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "cost_model_share": self.cost_model_share, "best_latency_s": self.best_latency(),
                "valid_trials": self.valid_trials}


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during `tune`; `.result` is what was measured until then (all of it in the
    database: a batch being measured when the signal came is not)."""

    def __init__(self, result: TuneResult):
        super().__init__("interrupted")
        self.result = result


def _contexts(tasks: Sequence[Task], target, settings: SearchSettings, work_dir: str, earlier: Earlier,
              interrupts: Interrupts):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    names = [t.name for t in tasks]
    return [ms.TuneContext(mod=t.mod, target=target, space_generator="post-order-apply",
                           search_strategy=ResumingSearch(settings.strategy(), earlier.keys(i), len(earlier.of_task(i)),
                                                          interrupts),
                           task_name=t.name, rand_state=seed, num_threads=1, logger=logger).clone()
            for i, (t, logger, seed) in enumerate(zip(tasks, get_loggers_from_work_dir(work_dir, names),
                                                      fork_seed(settings.seed, len(tasks))))]


def _teach_earlier(cost_model, contexts, earlier: Earlier) -> None:
    """Give the cost model what the earlier run measured, task by task, before it ranks
    anything: a resumed run does not learn from scratch."""
    for i, context in enumerate(contexts):
        records = earlier.of_task(i)
        if records:
            cost_model.update(context, [r.candidate for r in records], [r.result for r in records])


def tune(tasks: Sequence[Task], target, cost_model, work_dir: str, settings: SearchSettings,
         measure=None, builder=None, runner=None, quiet: bool = False) -> TuneResult:
    """Tune `tasks` with `cost_model` (a MetaSchedule cost model; `simulator.metaschedule.cost_model`'s
    keep their time in `.stats`), writing a JSONDatabase into `work_dir`. `measure`: an
    `extract.metaschedule.runner.MeasureConfig` (default: this machine's); `builder`/`runner`: reuse
    ones made by `extract.metaschedule.runner` (they are made, and the builder's workers stopped
    after, otherwise). Records of these tasks already in `work_dir`'s database (an earlier
    run) count toward `settings.trials`, teach the cost model and seed the search, and are
    not measured again (`simulator.metaschedule.resume`). Ctrl-C raises `TuneInterrupted`."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.runner import (
        MeasureConfig, load_tensor_intrinsics, make_builder, make_runner, off_measure_core,
    )

    if not tasks:
        raise SimulatorError("nothing to tune")
    measure = measure or MeasureConfig.for_machine()
    os.makedirs(work_dir, exist_ok=True)
    load_tensor_intrinsics(target)  # before TuneContext imports them all (and before a trace that tensorizes replays)
    earlier = read_earlier(work_dir, [t.mod for t in tasks])
    budget = settings.trials - len(earlier.records)
    own_builder = builder is None and budget > 0
    builder = builder or (make_builder(measure, target) if budget > 0 else None)
    runner = runner or (make_runner(measure) if budget > 0 else None)
    stats = getattr(cost_model, "stats", None)
    recorder = Recorder(tasks, stats, quiet)
    recorder.add_earlier(earlier)
    interrupts = Interrupts()
    # measuring here: the search and the cost model keep off the measuring core
    keep_off = off_measure_core(measure) if isinstance(runner, ms.runner.LocalRunner) else contextlib.nullcontext()
    start = time.perf_counter()
    try:
        with keep_off, interrupts.catching():
            if budget > 0:
                contexts = _contexts(tasks, target, settings, work_dir, earlier, interrupts)
                _teach_earlier(cost_model, contexts, earlier)
                ms.tune.tune_tasks(
                    tasks=contexts, task_weights=[float(t.weight) for t in tasks], work_dir=work_dir,
                    max_trials_global=budget, max_trials_per_task=settings.trials_per_task or settings.trials,
                    num_trials_per_iter=settings.trials_per_iter, builder=InterruptibleBuilder(builder, interrupts),
                    runner=InterruptibleRunner(runner, interrupts), database="json",
                    cost_model=InterruptibleCostModel(cost_model, interrupts),
                    measure_callbacks=[holding_callback(interrupts), *ms.measure_callback.MeasureCallback.create(
                        "default"), recording_callback(recorder, interrupts)],
                    task_scheduler="gradient" if len(tasks) > 1 else "round-robin")
    except BaseException:  # noqa: BLE001 - Ctrl-C comes back through TVM's FFI as any error type
        if not interrupts.requested:
            raise
    finally:
        wall = time.perf_counter() - start
        if own_builder:
            builder.pool.shutdown(wait=False)
    result = _result(tasks, recorder, earlier, wall, stats, settings, target, measure, interrupts.requested)
    if interrupts.requested:
        raise TuneInterrupted(result)
    return result


def _result(tasks, recorder: Recorder, earlier: Earlier, wall: float, stats, settings, target, measure,
            interrupted: bool) -> TuneResult:
    rows = [{"name": t.name, "key": t.key, "weight": t.weight, "flops": t.flops, "trials": recorder.trials[i],
             "errors": recorder.errors[i], "resumed": recorder.resumed[i], "best_s": recorder.best[i]}
            for i, t in enumerate(tasks)]
    resumed = {"records": len(earlier.records), "torn_lines_dropped": earlier.torn_lines,
               "records_of_other_workloads": earlier.other_workloads}
    return TuneResult(rows, recorder.rows, wall, stats.as_dict() if stats is not None else {},
                      {**asdict(settings), "target": str(target), "measure": measure.as_dict()}, resumed,
                      interrupted, recorder.first_error)


def table(result: TuneResult, cost_model: str) -> str:
    """The final table: per task its best latency, GFLOP/s, trials (of them resumed from
    an earlier run) and errors; then the cost model's time."""
    w = max([4, *(len(t["name"]) for t in result.tasks)])
    resumed = sum(t.get("resumed", 0) for t in result.tasks)
    extra = f"  {'resumed':>7}" if resumed else ""
    rows = [f"{'task':<{w}}  {'weight':>6}  {'trials':>6}{extra}  {'errors':>6}  {'best latency':>12}  {'GFLOP/s':>8}"]
    for t in result.tasks:
        gflops = f"{t['flops'] / t['best_s'] / 1e9:.2f}" if t["best_s"] and t["flops"] else "–"
        rows.append(f"{t['name']:<{w}}  {t['weight']:>6}  {t['trials']:>6}"
                    + (f"  {t.get('resumed', 0):>7}" if resumed else "")
                    + f"  {t['errors']:>6}  {_us(t['best_s']):>12}  {gflops:>8}")
    best = result.best_latency()
    rows.append(f"{'total' if len(result.tasks) == 1 else 'network (weighted)':<{w}}  {'':>6}  "
                f"{sum(t['trials'] for t in result.tasks):>6}" + (f"  {resumed:>7}" if resumed else "")
                + f"  {sum(t['errors'] for t in result.tasks):>6}  {_us(best):>12}")
    rows.append(_cost_model_line(result, cost_model))
    if resumed:
        rows.append(f"resumed: {resumed} records of an earlier run of this command counted, not measured again"
                    + (f" ({result.resumed['torn_lines_dropped']} line cut off by a kill dropped)"
                       if result.resumed.get("torn_lines_dropped") else ""))
    if result.interrupted:
        rows.append("interrupted: the rows above are what the database holds; rerun the same command to resume")
    return "\n".join(rows)


def _cost_model_line(result: TuneResult, cost_model: str) -> str:
    share = result.cost_model_share
    cm = result.cost_model_stats
    return (f"cost model {cost_model}: {cm.get('total_s', 0):.1f} s of {result.wall_s:.1f} s"
            + (f" ({100 * share:.1f}%)" if share is not None else "")
            + (f"; predict {cm['predict_s']:.1f} s for {cm['scored']} candidates, update {cm['update_s']:.1f} s"
               if cm else "")
            + (f"; first-stage filter: {cm['filtered']} of {cm['scored']} kept from the GNN, "
               f"{cm['filter_s']:.1f} s in stage 1" if cm.get("filter_s") or cm.get("filtered") else "")
            + (f"; {cm['repeated']} candidates given to update again, kept once" if cm.get("repeated") else ""))


# ---------------------------------------------------------------- command line
# options that only say how far to go or how to show it: a rerun may change them and resume
COLD = "cold"   # --checkpoint: no pre-trained model
RUN_ONLY = ("trials", "trials_per_task", "quiet", "overwrite", "workers")


def build_parser() -> argparse.ArgumentParser:
    from .cost_model import TUNING_COST_MODELS

    ap = argparse.ArgumentParser(prog="python -m simulator.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", metavar="WORKLOAD_OR_MODEL")
    ap.add_argument("--cost-model", choices=TUNING_COST_MODELS.names(), default="gnn")
    ap.add_argument("--trials", type=COUNT, required=True, help="measured candidates (a network: in all)")
    ap.add_argument("--work-dir", type=output_folder, required=True)
    ap.add_argument("--checkpoint", default=None,
                    help=f"gnn: a simulator.train run (default: the shipped pre-trained cost model; "
                         f"{COLD}: none); tvm-xgb-pretrained: a saved pre-trained XGBModel")
    ap.add_argument("--pretrain-data", nargs="+", default=None, metavar="DB",
                    help="tvm-xgb-pretrained: MetaSchedule databases to train XGBModel on first")
    ap.add_argument("--target", default=None, help="target string or JSON (default: LLVM for this CPU, 1 core)")
    ap.add_argument("--seed", type=SEED, default=0)
    ap.add_argument("--tasks", nargs="+", default=[], metavar="TABLE_OR_DB",
                    help="where a workload key is looked up: task tables (tasks.json) or databases")
    s = ap.add_argument_group("search")
    s.add_argument("--trials-per-iter", type=COUNT, default=64)
    s.add_argument("--trials-per-task", type=COUNT, default=None, help="a network: at most this many per task")
    s.add_argument("--population", type=Int(2), default=512, help="evolutionary search population")
    s.add_argument("--init-min-unmeasured", type=COUNT, default=50)
    s.add_argument("--genetic-iters", type=COUNT, default=4)
    g = ap.add_argument_group("gnn (refused with the other cost models)")
    g.add_argument("--workers", type=COUNT, default=None, help="featurizing processes, forked per call (default 1)")
    g.add_argument("--update-steps", type=NONNEGATIVE, default=None, help="optimizer steps per update (default 32)")
    g.add_argument("--min-measured", type=COUNT, default=None,
                   help="cold: measurements before the first training (default 32)")
    g.add_argument("--cold-model", default=None, help="cold: the simulator model to build (default gcn)")
    g.add_argument("--filter-keep", type=FRACTION, default=None,
                   help="two-stage scoring: the GNN scores only this share of each call's candidates, "
                        "picked by a model of their trace decisions (default 0.25; 1: the GNN scores all)")
    m = ap.add_argument_group("measuring")
    m.add_argument("--measure-core", type=Int(0), default=None,
                   help="core the runner times on (default: the last core this process may use)")
    from extract.autotvm import rpc as rpc_measure

    rpc_measure.add_arguments(ap)
    ap.add_argument("--overwrite", action="store_true",
                    help="remove the earlier run in --work-dir (database, summary, settings, logs) and start again")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap


def remote_runner(args: argparse.Namespace, measure):
    """MetaSchedule's RPCRunner on the tracker's devices (`--tracker`/`--rpc-key`), timing
    with this machine's evaluator settings; None for local measuring."""
    from extract.autotvm import rpc as rpc_measure
    from extract.metaschedule.runner import evaluator_config

    try:
        rpc = rpc_measure.from_args(args)
    except ValueError as e:
        raise SimulatorError(str(e)) from None
    return rpc.meta_schedule_runner(evaluator_config(measure)) if rpc else None


def model_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The cost-model options the user gave (option → value)."""
    from .cost_model import tuning_options

    return {n: getattr(args, n) for n in tuning_options() if getattr(args, n) is not None}


def choose_checkpoint(args: argparse.Namespace, target) -> None:
    """gnn: `--checkpoint cold` starts cold; without `--checkpoint` (and without an option
    only a cold gnn reads) the shipped pre-trained cost model is used, this CPU's if shipped."""
    from datasets.measure import this_cpu
    from datasets.networks import NetworkDataError, shipped_checkpoint

    from .cost_model import COLD_ONLY

    if args.cost_model != "gnn" or args.checkpoint is not None and args.checkpoint != COLD:
        return
    if args.checkpoint == COLD or any(getattr(args, option) is not None for option in COLD_ONLY):
        args.checkpoint = None
        return
    cpu = str(target.attrs.get("mcpu", "")) or this_cpu()
    try:
        path, trained_on = shipped_checkpoint(cpu)
    except NetworkDataError as e:
        raise SimulatorError(f"{e}; give --checkpoint RUN_DIR, or --checkpoint {COLD} to start cold") from None
    relative = os.path.relpath(path)
    args.checkpoint = str(path) if relative.startswith("..") else relative
    print(f"gnn: the shipped pre-trained cost model {args.checkpoint} (measured on {trained_on}; "
          f"--checkpoint {COLD} starts cold)", flush=True)
    if trained_on != cpu:
        print(f"warning: the pre-trained cost model was measured on {trained_on} and this target is {cpu}: "
              f"its ranking transfers imperfectly (`python -m datasets.measure` measures this CPU's dataset)",
              file=sys.stderr)


def check_arguments(args: argparse.Namespace, target) -> None:
    """Every option against the cost model, the target and the way of measuring, before
    anything is made or measured."""
    from extract.metaschedule.runner import why_not_runnable_here

    from .cost_model import check_options

    check_options(args.cost_model, model_options(args))
    if args.tasks and not looks_like_key(args.workload):
        raise SimulatorError(f"--tasks: read only to look up a workload key, and {args.workload!r} is not one")
    remote = bool(args.tracker or args.rpc_key)
    if remote and args.measure_core is not None:
        raise SimulatorError("--measure-core: not read when the devices of --tracker measure")
    if args.measure_core is not None and args.measure_core not in os.sched_getaffinity(0):
        raise SimulatorError(f"--measure-core {args.measure_core}: not a core this process may use "
                             f"({sorted(os.sched_getaffinity(0))})")
    reason = None if remote else why_not_runnable_here(target)
    if reason:
        raise SimulatorError(f"--target {args.target or str(target)}: its kernels cannot be timed here: {reason}")


def run_settings(args: argparse.Namespace, target) -> Dict[str, Any]:
    """What makes a rerun the same command (stored in the work dir, `resume`): its options,
    the target, and for the gnn the defaults of what it did not give."""
    from .cost_model import gnn_defaults

    settings = {**{k: v for k, v in sorted(vars(args).items()) if k not in RUN_ONLY}, "target": str(target)}
    if args.cost_model != "gnn":
        return settings
    return {**settings, "gnn_defaults": {k: v for k, v in gnn_defaults().items() if getattr(args, k, None) is None}}


def busy_measuring_core(core: int) -> Optional[str]:
    """A warning when other processes keep the measuring core busy (None: quiet)."""
    from extract.metaschedule.cpu_load import BUSY_PERCENT, measure_load

    load = measure_load(core, 1.0)
    if load.busy <= BUSY_PERCENT:
        return None
    return (f"measuring core {core} was {load.busy:.0f}% busy with other processes before tuning: timings may "
            f"be slower than the kernels are; keep other work off it (e.g. taskset -c …)")


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    from extract.metaschedule.runner import MeasureConfig

    args = build_parser().parse_args(argv)
    target = parse_target(args.target)
    choose_checkpoint(args, target)
    check_arguments(args, target)
    tasks = resolve(args.workload, target, args.tasks)
    measure = MeasureConfig.for_machine(-1 if args.measure_core is None else args.measure_core)
    settings = SearchSettings(args.trials, args.trials_per_iter, args.trials_per_task, args.population,
                              args.init_min_unmeasured, args.genetic_iters, args.seed)
    with _holding(args.work_dir):
        resumed = check_work_dir(args.work_dir, run_settings(args, target), args.overwrite)
        summary, interrupted = _tune_and_summarize(args, tasks, target, measure, settings, resumed)
    print(table(TuneResult(**{k: summary[k] for k in TuneResult.__dataclass_fields__}), args.cost_model))
    if summary.get("end_to_end"):
        print(end_to_end_line(summary["end_to_end"]))
        print(kernels_line(summary["end_to_end"], summary["tasks"]))
    for warning in summary["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if interrupted:
        raise KeyboardInterrupt
    if summary["valid_trials"] == 0 and summary["tasks"] and any(t["trials"] for t in summary["tasks"]):
        raise SimulatorError(f"no candidate ran: all {sum(t['trials'] for t in summary['tasks'])} trials failed "
                             f"(first error: {summary['first_error']}); see {args.work_dir}/logs")
    return summary


@contextlib.contextmanager
def _holding(work_dir: str):
    """The work dir's output lock, or a one-line error when it is busy or not writable."""
    from extract.fileio import OutputBusyError, output_lock

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(output_lock(work_dir))
        except OutputBusyError as e:
            raise SimulatorError(str(e)) from None
        except OSError as e:
            raise SimulatorError(f"--work-dir {work_dir}: cannot write there ({e.strerror or e})") from None
        yield


def gnn_filter_keep(given: Optional[float]) -> Optional[float]:
    """The gnn's two-stage share: `cost_model.FILTER_KEEP` unless given; 1 scores all (off)."""
    from .cost_model import FILTER_KEEP

    keep = FILTER_KEEP if given is None else given
    return None if keep >= 1.0 else keep


def _tune_and_summarize(args, tasks, target, measure, settings, resumed: bool):
    """Tune, then write tune_summary.json (also after Ctrl-C); (summary, interrupted)."""
    from extract.fileio import atomic_write

    from .cost_model import make_cost_model
    from .rivals import describe_pretraining

    runner = remote_runner(args, measure)
    options = {k: v for k, v in model_options(args).items() if k not in ("checkpoint", "pretrain_data", "workers")}
    if args.cost_model == "gnn":
        options["filter_keep"] = gnn_filter_keep(args.filter_keep)
    model = make_cost_model(args.cost_model, args.checkpoint, args.seed, args.workers or 1, args.pretrain_data or (),
                            **options)
    pretraining = getattr(getattr(model, "inner", None), "pretraining", None)
    if pretraining:
        print(f"xgb pre-training: {describe_pretraining(pretraining)}", flush=True)
    start_run(args.work_dir, run_settings(args, target), resumed)
    warnings = [w for w in [busy_measuring_core(measure.measure_core) if runner is None else None] if w]
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    where = (f"on the devices of tracker {args.tracker} (key {args.rpc_key})" if args.tracker
             else f"on core {measure.measure_core}")
    print(f"{'resuming' if resumed else 'tuning'} {len(tasks)} task{'s' * (len(tasks) != 1)} of {args.workload} "
          f"for {args.trials} trials with {args.cost_model}; measuring {where}, building on "
          f"{list(measure.build_cores)}", flush=True)
    interrupted = False
    try:
        result = tune(tasks, target, model, args.work_dir, settings, measure, runner=runner, quiet=args.quiet)
    except TuneInterrupted as stop:
        result, interrupted = stop.result, True
    summary = {"workload": args.workload, "cost_model": args.cost_model, "checkpoint": args.checkpoint,
               "pretraining": pretraining, "warnings": warnings, **result.to_dict()}
    if not interrupted and runner is None and is_network(args.workload) and result.valid_trials:
        try:
            summary["end_to_end"] = network_end_to_end(args.workload, target, args.work_dir, measure)
        except SimulatorError as e:
            summary["end_to_end"] = None
            warnings.append(f"end to end not timed: {e}")
    with atomic_write(os.path.join(args.work_dir, SUMMARY)) as f:
        json.dump(summary, f, indent=1, default=str)
    return summary, interrupted


def is_network(spec: str) -> bool:
    from extract.metaschedule.networks import NETWORKS

    return spec in NETWORKS and not os.path.isfile(spec)


def network_end_to_end(name: str, target, work_dir: str, measure) -> Dict[str, Any]:
    """The network compiled with the run's database and timed end to end (`simulator.metaschedule.network`)."""
    from .network import end_to_end

    print(f"compiling {name} with the tuning database and timing it end to end on core {measure.measure_core}",
          flush=True)
    return end_to_end(name, target, work_dir, measure).as_dict()


def end_to_end_line(e2e: Dict[str, Any]) -> str:
    repeats = e2e["repeats_s"]
    return (f"end to end: {_us(e2e['latency_s'])} (median of {len(repeats)} repeats, {_us(min(repeats))}–"
            f"{_us(max(repeats))}); {e2e['tuned']} of {e2e['functions']} tasks from the database, compiled in "
            f"{e2e['compile_s']:.1f} s")


def kernels_line(e2e: Dict[str, Any], tasks: Sequence[Dict[str, Any]]) -> str:
    """The tuned kernels' time inside the network against their bests alone, and the three
    kernels that lose the most inside it."""
    from .network import kernel_gaps

    rows = kernel_gaps(e2e.get("kernels_s") or {}, tasks)
    if not rows:
        return "inside the network: no kernel timed"
    worst = ", ".join(f"{r['name']} {_us(r['inside_s'])} (alone {_us(r['alone_s'])})" for r in rows[:3])
    return (f"inside the network the {len(rows)} tuned kernels took {_us(sum(r['inside_s'] for r in rows))} "
            f"a run against {_us(sum(r['alone_s'] for r in rows))} alone; most lost: {worst}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv, interrupted_hint="what was measured is in the summary above and the database; "
                                               "rerun the same command to resume")


if __name__ == "__main__":
    sys.exit(main())
