"""Measure template configs on this CPU and write AutoTVM v0.2 records.

    python -m extract.measure --workloads resnet18 --per-workload 600 --log run.jsonl
    python -m extract.measure --remeasure run.jsonl --count 300 --log second.jsonl
    python -m extract.measure --remeasure run.jsonl --count 1200 --seed 2 --also second.jsonl --log third.jsonl

Each config is scheduled, built with LLVM for this CPU and timed with
`time_evaluator` (`--repeat` repeats of at least `--min-repeat-ms` each; costs holds the
mean of each repeat) in a worker process, after one run checked against the workload's
own NumPy reference (`Workload.reference`), so a crash or a hang costs one record, not
the run: instantiation/compile/run errors, wrong answers and timeouts are written with
AutoTVM's error_no (`extract.autotvm.timing`). Configs are sampled uniformly without replacement from each
workload's whole space (seeded) and measured in a shuffled order across workloads, so
drift of the machine's speed spreads over all workloads. An existing log is resumed:
configs already in it are skipped (a half-written last line of a killed run is passed
over, and ended so the next record starts a line of its own). Arguments are checked
before anything is measured (counts ≥ 1, a timeout > 0, a known template and workloads,
existing logs to re-measure); progress is a bar on a terminal, a few lines otherwise.

With `--tracker HOST:PORT --rpc-key KEY`, configs are built here and checked and timed on
remote devices through TVM's RPC tracker instead (see `extract.autotvm.rpc`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import rpc as rpc_measure
from extract.cli import COUNT, NONNEGATIVE, POSITIVE, progress
from .records import MeasureRecord, read_records
from .templates import get_template
from .timing import MeasureJob, Worker
from extract.tir.workloads import Workload, parse_workloads, workload_name


def sample_jobs(template_name: str, workloads: Dict[str, Workload], per_workload: int,
                seed: int, max_vector_lanes: int = 0) -> List[MeasureJob]:
    """Uniform sample without replacement over each space, shuffled across workloads.

    `max_vector_lanes` > 0 leaves out configs whose vector axis (the inner factor of
    tile_oc) is wider: LLVM takes ~15 s to build a 256- or 512-lane loop, 30× a usual config.
    """
    template = get_template(template_name)
    jobs: List[MeasureJob] = []
    for number, wl in enumerate(workloads.values()):
        space = template.space(template.check_workload(wl))
        allowed = [i for i in range(len(space))
                   if not max_vector_lanes or "tile_oc" not in space.by_name
                   or space.get(i)["tile_oc"][-1] <= max_vector_lanes]
        rng = np.random.default_rng([seed, number])
        picked = rng.choice(allowed, size=min(per_workload, len(allowed)), replace=False)
        jobs.extend(MeasureJob(template_name, wl, int(i)) for i in sorted(picked))
    order = np.random.default_rng(seed).permutation(len(jobs))
    return [jobs[i] for i in order]


def remeasure_jobs(first_log: str, count: int, seed: int, also: Sequence[str] = ()) -> List[MeasureJob]:
    """A seeded subset of the successful records of a log, spread evenly over its workloads,
    plus every successful config of the logs in `also` (e.g. an earlier re-measurement, so
    that one new pass covers it too); in one shuffled order."""
    by_workload: Dict[Tuple[str, Workload], List[int]] = {}
    for r in read_records(first_log):
        if r.ok:
            template = get_template(r.task_name)
            key = (template.name, template.parse_task_args(r.task_args))
            by_workload.setdefault(key, []).append(r.config_index)
    if not by_workload:
        raise ValueError(f"{first_log}: no successful records to re-measure")
    per = -(-count // len(by_workload))
    rng = np.random.default_rng(seed)
    jobs = [MeasureJob(name, wl, int(i)) for (name, wl), indices in sorted(by_workload.items(), key=lambda kv: kv[0][1].key)
            for i in rng.choice(sorted(set(indices)), size=min(per, len(set(indices))), replace=False)]
    for log in also:
        for r in read_records(log):
            template = get_template(r.task_name)
            key = (template.name, template.parse_task_args(r.task_args))
            if r.ok and key in by_workload:
                jobs.append(MeasureJob(key[0], key[1], r.config_index))
    jobs = list(dict.fromkeys(jobs))
    return [jobs[i] for i in rng.permutation(len(jobs))]


def done_keys(log: str, passed_over: Optional[List[Tuple[str, int, str]]] = None) -> set:
    """The configs a log already holds (to resume it). Lines that are not records — e.g.
    the half-written last line of a killed run — are passed over (listed in `passed_over`)."""
    if not os.path.exists(log):
        return set()
    keys = set()
    bad = passed_over if passed_over is not None else []
    for r in read_records(log, skip_bad=True, bad=bad):
        try:
            template = get_template(r.task_name)
            keys.add(MeasureJob(template.name, template.parse_task_args(r.task_args), r.config_index))
        except (KeyError, ValueError) as e:
            file, _, line = r.source.rpartition(":")
            bad.append((file, int(line), str(e)))
    return keys


def _end_with_newline(log: str) -> None:
    """A log cut mid-line (a killed run) gets its line ended, so that the next record
    starts a line of its own instead of being glued to the broken one."""
    if os.path.exists(log) and os.path.getsize(log):
        with open(log, "rb") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
        if last != b"\n":
            with open(log, "ab") as f:
                f.write(b"\n")


def _template_name(text: str) -> str:
    try:
        return get_template(text).name
    except KeyError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _existing_file(text: str) -> str:
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text}: no such log file")
    return text


def _log_file(text: str) -> str:
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a log file")
    parent = os.path.dirname(text) or "."
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{parent}: no such folder for the log")
    return text


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m extract.measure", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", required=True, type=_log_file,
                    help="JSON-lines log to append to (resumed if it exists)")
    ap.add_argument("--template", default="conv2d_NCHWc.x86", type=_template_name)
    ap.add_argument("--workloads", nargs="+", default=["resnet18"],
                    help="'resnet18', names C1…C12, or keys like 1x64x56x56_64x3x3_s1_p1")
    ap.add_argument("--per-workload", type=COUNT, default=600, help="configs sampled per workload")
    ap.add_argument("--max-vector-lanes", type=NONNEGATIVE, default=64,
                    help="sample only configs whose tile_oc inner factor is at most this (0: all)")
    ap.add_argument("--remeasure", metavar="LOG", type=_existing_file,
                    help="re-measure a subset of this log's successful configs")
    ap.add_argument("--count", type=COUNT, default=300, help="with --remeasure: how many configs")
    ap.add_argument("--also", nargs="+", default=[], metavar="LOG", type=_existing_file,
                    help="with --remeasure: also re-measure every successful config of these logs")
    ap.add_argument("--seed", type=NONNEGATIVE, default=0)
    ap.add_argument("--repeat", type=COUNT, default=3)
    ap.add_argument("--min-repeat-ms", type=NONNEGATIVE, default=20)
    ap.add_argument("--timeout", type=POSITIVE, default=30.0,
                    help="seconds per config (build + run)")
    ap.add_argument("--num-threads", type=COUNT, default=1,
                    help="runtime threads; 1 keeps timings stable on a shared 2-core machine")
    rpc_measure.add_arguments(ap).add_argument(
        "--rpc-target", metavar="TARGET",
        help="build for this TVM target (the devices'; JSON, e.g. '{\"kind\": \"llvm\", "
             "\"mcpu\": \"skylake\"}') instead of this CPU's")
    return ap


def plan_jobs(args: argparse.Namespace) -> List[MeasureJob]:
    """The configs the arguments ask for (ValueError/KeyError: a bad workload or log)."""
    if args.remeasure:
        return remeasure_jobs(args.remeasure, args.count, args.seed, args.also)
    return sample_jobs(args.template, parse_workloads(args.workloads), args.per_workload,
                       args.seed, args.max_vector_lanes)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.also and not args.remeasure:
        ap.error("--also goes with --remeasure")
    try:
        rpc = rpc_measure.from_args(args)
    except ValueError as e:
        ap.error(str(e))
    if args.rpc_target and rpc is None:
        ap.error("--rpc-target goes with --tracker and --rpc-key")

    import tvm

    try:
        jobs = plan_jobs(args)
        unmeasurable = sorted({workload_name(j.workload) for j in jobs if not j.workload.measurable})
        if unmeasurable:
            raise ValueError(f"{', '.join(unmeasurable)}: no reference implementation to check "
                             f"measurements against")
        passed_over: List[Tuple[str, int, str]] = []
        done = done_keys(args.log, passed_over) if rpc is None else set()
    except (ValueError, KeyError) as e:  # RecordFormatError, unknown workload or template
        print(f"error: {e}", file=sys.stderr)
        return 2
    if rpc is not None:
        options = rpc_measure.Options(args.repeat, args.min_repeat_ms, args.timeout,
                                      args.num_threads, args.rpc_target or "")
        try:
            return rpc_measure.measure_jobs(jobs, args.log, rpc, options)
        except (ConnectionError, rpc_measure.TargetError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if passed_over:
        file, line, reason = passed_over[0]
        print(f"{args.log}: {len(passed_over)} lines that are not records passed over "
              f"(first {file}:{line}: {reason})", file=sys.stderr)
    pending = [j for j in jobs if j not in done]
    print(f"{len(jobs)} configs planned, {len(jobs) - len(pending)} already in {args.log}, "
          f"{len(pending)} to measure", file=sys.stderr)

    worker = Worker(args.num_threads)
    errors = 0
    _end_with_newline(args.log)
    with open(args.log, "a", encoding="utf-8") as log, progress(pending, unit="cfg", desc="measure") as bar:
        for job in bar:
            template_name, wl, index = job
            template = get_template(template_name)
            result = worker.run(job, args.repeat, args.min_repeat_ms, args.timeout)
            config = template.space(wl).get(index)
            record = MeasureRecord(
                target=str(template.make_target(args.num_threads)), task_name=template.name,
                task_args=template.task_args(wl), config_index=index,
                entity=template.space(wl).to_entity(config), costs=result.costs,
                error_no=result.error_no, all_cost=result.all_cost, timestamp=time.time(),
                error_msg=result.error_msg, extra={"tvm_version": tvm.__version__})
            log.write(record.to_json() + "\n")
            log.flush()
            errors += not record.ok
            bar.set_postfix(workload=workload_name(wl), errors=errors)
    worker.close()
    print(f"wrote {len(pending)} records to {args.log} ({errors} errors)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
