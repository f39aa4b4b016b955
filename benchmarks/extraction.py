"""Extraction throughput: AutoTVM log records → graph samples, configs per second.

    python -m benchmarks.extraction [--log LOG] [--count 1000] [--workers 1 2]

Reads the first `--count` successful records of the log (default: the shipped
dataset) and extracts them with 1 and 2 worker processes, twice: graph samples only
(what the graph models and curve-mlp read; `extract.tvm_log --no-per-store`; goal ≥ 50
configs/s on 2 cores), and with MetaSchedule's per-store features too (the xgb
baseline's input; the default of `extract.tvm_log`). Also the per-config split between
scheduling, lowering, graph building and per-store features, measured in-process. Each
pool's start (spawned workers import TVM, seconds) is inside its timing.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Optional, Sequence

import numpy as np

from .common import COUNT, output_file, write_json


def stage_times(jobs, repeats: int = 1) -> dict:
    """Median seconds per config of each stage, in this process."""
    from extract.autotvm.templates import get_template
    from extract.tir.graph import lower_for_features, tir_to_graph
    from extract.schedules import per_store_vector, template_target

    stages = {"schedule": [], "lower": [], "graph": [], "per_store": []}
    for job in jobs:
        template = get_template(job.template)
        t0 = time.perf_counter()
        sch = template.schedule(job.workload, job.config)
        t1 = time.perf_counter()
        lowered = lower_for_features(sch.mod)
        t2 = time.perf_counter()
        tir_to_graph(lowered["main"])
        t3 = time.perf_counter()
        per_store_vector(template_target(template.name), sch)
        t4 = time.perf_counter()
        for key, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            stages[key].append(dt)
    return {k: float(np.median(v)) for k, v in stages.items()}


def build_parser() -> argparse.ArgumentParser:
    from datasets import SHIPPED_LOG
    ap = argparse.ArgumentParser(prog="python -m benchmarks.extraction", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", default=str(SHIPPED_LOG))
    ap.add_argument("--count", type=COUNT, default=1000)
    ap.add_argument("--workers", type=COUNT, nargs="+", default=[1, 2])
    ap.add_argument("--out", type=output_file, help="write the figures as JSON here")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from extract.schedules import extract_many
    from extract.tvm_log import read_jobs

    args = build_parser().parse_args(argv)

    jobs, _ = read_jobs([args.log])
    jobs = jobs[: args.count]
    extract_many(jobs[:4], workers=1, progress=False)  # warm-up: imports, first compile
    result = {"configs": len(jobs), "stages_s": stage_times(jobs[:100])}
    for prefix, per_store in (("graph_", False), ("", True)):
        for workers in args.workers:
            start = time.perf_counter()
            extract_many(jobs, workers=workers, progress=False, per_store=per_store)
            result[f"{prefix}configs_per_s_{workers}_workers"] = len(jobs) / (time.perf_counter() - start)
    print(json.dumps(result, indent=1))
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
