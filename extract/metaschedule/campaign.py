"""Measure MetaSchedule schedules of real networks' tasks on this CPU (the networks dataset).

    python -m extract.ms_measure --work-dir /work/measure/networks_znver4 --trials-per-task 96
    python -m extract.ms_measure --work-dir /work/measure/networks_znver4 --remeasure 0.12

For every task of the chosen networks (`extract.metaschedule.tasks`; task table in `tasks.json`),
half of `--trials-per-task` records are drawn uniformly from MetaSchedule's design space
(ReplayTrace) and half come from its evolutionary search guided by an XGBoost cost model
trained on the task's records so far (`extract.metaschedule.collect`). Records go into normal
MetaSchedule JSON databases, one per sampling method, with a sidecar line per record
(`extract.metaschedule.store`); failed builds and runs stay as records. The measuring protocol (one
pinned core, single-threaded kernels, every repeat kept, reference kernel) is
`extract.metaschedule.runner` / `extract.metaschedule.drift`.

The run is resumable: kill it (even with -9) and start the same command again; it measures
only what is missing. It refuses to start when the measuring core is busy (`--force` to
override) — keep everything else off that core for the whole run (`taskset -c 0 …`).
`--remeasure FRACTION` starts the second, noise-ceiling pass (`extract.metaschedule.remeasure`).

Work folder:
    tasks.json  meta.json  reference.jsonl  reference_kernel.tar
    pass1/{random,evolutionary}/database_{workload,tuning_record}.json  pass1/records.jsonl
    pass2/…     (the --remeasure pass)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import sys
import time
from dataclasses import dataclass
from typing import AbstractSet, Dict, FrozenSet, List, Optional, Sequence

from extract.cli import COUNT, NONNEGATIVE, NONNEGATIVE_FLOAT, POSITIVE, SEED, Float, Int
from extract.fileio import OutputBusyError, atomic_write, output_lock
from .collect import Measurer, SearchSettings, TaskCollector
from .cpu_load import BUSY_PERCENT, LoadMonitor, measure_load
from .progress import Counts, Progress
from .runner import (
    MeasureConfig, check_probe, host_target, load_tensor_intrinsics, make_builder, make_runner, pin_process,
    probe_runner,
)
from .store import METHODS, PassStore, is_valid, record_secs
from .tasks import TaskInfo, extract_tasks, load_tasks, merge_tasks, save_tasks, summary
from extract.tir.workload_key import computation, parse_workload_key, target_tag

DEFAULT_NETWORKS = ("resnet50", "mobilenet_v2", "bert", "vit")


@dataclass(frozen=True)
class Plan:
    """Records wanted per task and sampling method."""

    random: int
    evolutionary: int

    @staticmethod
    def split(trials_per_task: int) -> "Plan":
        half = trials_per_task // 2
        return Plan(half, trials_per_task - half)

    def wanted(self, method: str) -> int:
        return getattr(self, method)


# ---------------------------------------------------------------- setup
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m extract.ms_measure", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", required=True, help="output folder (resumed if it exists)")
    ap.add_argument("--networks", nargs="+", default=list(DEFAULT_NETWORKS), metavar="NETWORK",
                    help="networks of extract.metaschedule.networks whose tasks to measure, or `all` (default: %(default)s); "
                         "a work folder's task table grows with networks it lacks")
    ap.add_argument("--only", nargs="+", default=[], metavar="SUBSTRING",
                    help="measure only tasks whose workload key contains one of these")
    ap.add_argument("--first-keys", default=None, metavar="FILE",
                    help="a file of workload keys (one per line; their target part is ignored): these "
                         "computations are measured before the others (datasets.measure: those another "
                         "CPU's dataset has measured, so that both CPUs share them soonest)")
    ap.add_argument("--max-tasks", type=NONNEGATIVE, default=0, help="at most this many tasks (0: all)")
    ap.add_argument("--trials-per-task", type=COUNT, default=96,
                    help="records per task, half random, half evolutionary")
    ap.add_argument("--batch", type=COUNT, default=24, help="candidates per search round")
    ap.add_argument("--population", type=COUNT, default=128, help="evolutionary search population")
    ap.add_argument("--seed", type=SEED, default=0)
    ap.add_argument("--measure-core", type=Int(-1), default=-1, help="core that times (default: the last)")
    ap.add_argument("--load-threshold", type=Float(0, 100), default=BUSY_PERCENT,
                    help="percent busy above which the measuring core counts as loaded")
    ap.add_argument("--max-wait", type=NONNEGATIVE_FLOAT, default=60.0,
                    help="seconds to wait for a loaded measuring core before each batch")
    ap.add_argument("--force", action="store_true", help="start even if the measuring core is busy")
    ap.add_argument("--build-timeout", type=POSITIVE, default=MeasureConfig.build_timeout_s,
                    help="seconds before a build counts as failed")
    ap.add_argument("--run-timeout", type=POSITIVE, default=MeasureConfig.run_timeout_s,
                    help="seconds before a timing counts as failed")
    ap.add_argument("--reference-every", type=NONNEGATIVE_FLOAT, default=300.0, help="seconds between reference timings")
    ap.add_argument("--remeasure", type=Float(0, 1), default=0.0, metavar="FRACTION",
                    help="second pass: time again this share of every task's valid records")
    ap.add_argument("--pass-number", type=NONNEGATIVE, default=0, help="pass folder to write (default 1, or 2 with --remeasure)")
    ap.add_argument("--progress-every", type=NONNEGATIVE_FLOAT, default=60.0, help="seconds between progress lines (not a terminal)")
    ap.add_argument("--dry-run", action="store_true", help="write the task table, print the plan, measure nothing")
    return ap


def select_tasks(tasks: Sequence[TaskInfo], only: Sequence[str], max_tasks: int, seed: int,
                 first: AbstractSet[str] = frozenset()) -> List[TaskInfo]:
    """The tasks to measure, in a seeded shuffled order (a run stopped early still covers
    every network and operator kind evenly); the computations in `first` (keys without
    their target part) before the others; elementwise tasks last: their design space
    holds one schedule, so they teach a cost model nothing about ranking."""
    chosen = [t for t in tasks if not only or any(s in t.key for s in only)]
    random.Random(seed).shuffle(chosen)
    chosen.sort(key=lambda t: (t.kind == "elementwise", computation(t.key) not in first))
    return chosen[:max_tasks] if max_tasks > 0 else chosen


def read_first_keys(path: Optional[str]) -> FrozenSet[str]:
    """`--first-keys`: the computations of a file of workload keys (SystemExit naming the
    file and line when a line is not a key)."""
    if not path:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"--first-keys {path}: cannot read it ({e})") from None
    keys = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parse_workload_key(line.strip())
        except ValueError as e:
            raise SystemExit(f"--first-keys {path}:{number}: {e}") from None
        keys.add(computation(line.strip()))
    return frozenset(keys)


def task_table(work_dir: str, networks: Sequence[str], target) -> List[TaskInfo]:
    """The task table of the work folder, made on the first run and extended with the tasks
    of networks it does not have yet (a task two networks share is one task, with both
    weights); later runs must be on a machine whose target gives the same keys."""
    path = os.path.join(work_dir, "tasks.json")
    tasks = load_tasks(path) if os.path.exists(path) else []
    tag = target_tag(target)
    if tasks and not tasks[0].key.endswith("." + tag):
        raise SystemExit(f"{path}: tasks are for another target ({tasks[0].key.rsplit('.', 1)[-1]}), "
                         f"this machine is {tag}; use another --work-dir")
    missing = [n for n in networks if n not in {net for t in tasks for net in t.networks}]
    if missing:
        print(f"extracting the tasks of {', '.join(missing)} into {path}", file=sys.stderr)
        tasks = merge_tasks([tasks, extract_tasks(missing, target)])
        save_tasks(path, tasks, target_json=str(target))
    return [t for t in tasks if set(t.networks) & set(networks)]


def machine_info() -> Dict:
    import tvm
    from tvm.target.codegen import llvm_get_system_cpu

    model = ""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    return {"cpu_model": model, "llvm_cpu": llvm_get_system_cpu(), "cores": os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version(),
            "tvm": tvm.__version__}


def write_meta(work_dir: str, session: Dict) -> None:
    """meta.json: the machine and settings of every session that wrote to the folder."""
    path = os.path.join(work_dir, "meta.json")
    meta = {"sessions": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    meta["sessions"].append(session)
    with atomic_write(path) as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def check_quiet(config: MeasureConfig, args) -> Optional[str]:
    load = measure_load(config.measure_core, 3.0)
    print(f"measuring on core {config.measure_core} ({load.describe()}); building and searching on "
          f"cores {list(config.build_cores)}. Run nothing else on core {config.measure_core} "
          f"until this finishes (e.g. `taskset -c 0 …`).", file=sys.stderr)
    if load.busy > args.load_threshold and not args.force:
        return (f"core {config.measure_core} is {load.busy:.0f}% busy (threshold {args.load_threshold:.0f}%): "
                f"not starting; stop what runs there, or --force")
    return None


# ---------------------------------------------------------------- the passes
def counts_for(store: PassStore, tasks: Sequence[TaskInfo], plan: Optional[Plan]) -> Counts:
    counts = Counts(tasks_total=len(tasks))
    for task in tasks:
        for method in METHODS:
            secs = [record_secs(r) for r in store.records(method, task)]
            counts.records += len(secs)
            counts.valid += sum(is_valid(s) for s in secs)
            if plan is not None:
                wanted = plan.wanted(method)
                counts.planned += len(secs) if store.is_exhausted(method, task) else max(wanted, len(secs))
    counts.errors = counts.records - counts.valid
    return counts


def collect_pass(tasks: Sequence[TaskInfo], store: PassStore, measurer: Measurer, target,
                 plan: Plan, settings: SearchSettings, progress: Progress) -> None:
    def on_batch(task, method, n, info):
        progress.add(n, info["errors"])
        progress.show(f"{task.kind} {method} {store.count(method, task)}/{plan.wanted(method)}")

    collector = TaskCollector(store, measurer, target, settings, on_batch)
    for task in tasks:
        for method in METHODS:
            collector.collect(task, method, plan.wanted(method))
            if store.is_exhausted(method, task):
                progress.counts.planned -= max(plan.wanted(method) - store.count(method, task), 0)
        progress.counts.tasks_done += 1
        progress.show(force=True)


def remeasure_pass(tasks, first: PassStore, second: PassStore, measurer: Measurer, fraction: float,
                   seed: int, batch: int, progress: Progress) -> None:
    from .remeasure import remeasure_task

    def on_batch(task, method, n, info):
        progress.add(n, info["errors"])
        progress.show(f"{task.kind} {method}")

    for task in tasks:
        remeasure_task(task, first, second, measurer, fraction, seed, batch, on_batch)
        progress.counts.tasks_done += 1
        progress.show(force=True)


def _final_summary(store: PassStore, tasks: Sequence[TaskInfo]) -> Dict:
    counts = counts_for(store, tasks, None)
    exhausted = sum(store.is_exhausted(m, t) for t in tasks for m in METHODS)
    return {"tasks": len(tasks), "records": counts.records, "valid": counts.valid,
            "errors": counts.errors, "exhausted_task_methods": exhausted}


def run(args) -> int:
    config = dataclasses.replace(MeasureConfig.for_machine(args.measure_core),
                                 build_timeout_s=args.build_timeout, run_timeout_s=args.run_timeout)
    pin_process(config.build_cores, 1)
    target = host_target()
    work = os.path.abspath(args.work_dir)
    with output_lock(work):
        tasks = select_tasks(task_table(work, args.networks, target), args.only, args.max_tasks, args.seed,
                             read_first_keys(args.first_keys))
        print(f"{len(tasks)} tasks: {json.dumps(summary(tasks))}", file=sys.stderr)
        if args.dry_run:
            return 0
        problem = check_quiet(config, args)
        if problem:
            print(problem, file=sys.stderr)
            return 2
        return measure(args, work, config, target, tasks)


@dataclass
class Session:
    """What one run of the command holds open: pools, logs, the pass's store."""

    runner: object
    builder: object
    reference: object
    measurer: Measurer
    store: PassStore

    def close(self) -> None:
        for closing in (self.store.close, self.reference.close, self.runner.pool.shutdown,
                        self.builder.pool.shutdown):
            closing()


def open_session(args, work: str, config: MeasureConfig, target, pass_no: int) -> Optional[Session]:
    """Build the reference, start the pools, check the measuring worker (None: refused)."""
    from .drift import ReferenceTimer, build_reference

    kernel = build_reference(work, target)
    runner, builder = make_runner(config), make_builder(config, target)
    try:
        probe = probe_runner(runner, kernel.artifact_path, kernel.args_info)
        problems, probe_row = check_probe(probe, config), probe.__dict__
    except Exception as e:  # noqa: BLE001 - a worker that cannot even run the probe
        problems, probe_row = [f"probe failed: {str(e).strip().splitlines()[-1:]}"], {}
    write_meta(work, {"started": time.time(), "argv": getattr(args, "argv", sys.argv), "pass": pass_no, "machine": machine_info(),
                      "target": str(target), "measure": config.as_dict(), "probe": probe_row,
                      "probe_problems": problems, "search": vars(args)})
    if problems and not args.force:
        print("the measuring worker does not run as the protocol says:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        runner.pool.shutdown()
        builder.pool.shutdown()
        return None
    reference = ReferenceTimer(runner, kernel, os.path.join(work, "reference.jsonl"),
                               args.reference_every, {"pass": pass_no}, config.measure_core)
    monitor = LoadMonitor(config.measure_core, args.load_threshold)
    measurer = Measurer(builder, runner, target, monitor, reference, args.max_wait)
    store = PassStore(os.path.join(work, f"pass{pass_no}"), pass_no, target)
    return Session(runner, builder, reference, measurer, store)


def measure(args, work: str, config: MeasureConfig, target, tasks: Sequence[TaskInfo]) -> int:
    load_tensor_intrinsics(target)  # x86's only: this process tunes for this CPU alone
    pass_no = args.pass_number or (2 if args.remeasure else 1)
    session = open_session(args, work, config, target, pass_no)
    if session is None:
        return 3
    store, measurer = session.store, session.measurer
    fixed = store.reconcile(tasks)
    if any(fixed.values()):
        print(f"sidecar repaired after an interrupted run: {fixed}", file=sys.stderr)
    session.reference.time_now("start")
    measurer.monitor.mark()
    if args.remeasure:
        first = PassStore(os.path.join(work, "pass1"), 1, target)
        progress = _remeasure_progress(args, tasks, first, store)
        measurer.warn = progress.warning
        progress.show(force=True)
        remeasure_pass(tasks, first, store, measurer, args.remeasure, args.seed, args.batch, progress)
        first.close()
    else:
        plan = Plan.split(args.trials_per_task)
        progress = Progress(counts_for(store, tasks, plan), every_s=args.progress_every)
        measurer.warn = progress.warning
        progress.show(force=True)
        collect_pass(tasks, store, measurer, target, plan,
                     SearchSettings(args.batch, args.population, seed=args.seed), progress)
    session.reference.time_now("end")
    progress.message(f"done: {json.dumps(_final_summary(store, tasks))}")
    session.close()
    return 0


def _remeasure_progress(args, tasks, first: PassStore, store: PassStore) -> Progress:
    from .remeasure import planned

    counts = counts_for(store, tasks, None)
    counts.planned = planned(tasks, first, args.remeasure)
    return Progress(counts, every_s=args.progress_every)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The arguments, network names checked (before any folder or task table is made)."""
    from .networks import DATASET_NETWORKS, NETWORKS

    parser = build_parser()
    args = parser.parse_args(argv)
    args.networks = list(DATASET_NETWORKS) if "all" in args.networks else list(dict.fromkeys(args.networks))
    unknown = [n for n in args.networks if n not in NETWORKS]
    if unknown:
        parser.error(f"argument --networks: unknown network {unknown[0]!r} (known: all, {', '.join(NETWORKS)})")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # the options this run was given (datasets.measure adds some): the dataset's README repeats them
    args.argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    try:
        return run(args)
    except OutputBusyError as e:
        print(e, file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
