"""Whole config spaces of workloads as graph samples (runtimes NaN), cached on disk.

    python -m benchmarks.spaces C3 C5 C6 C7 C10 C11 --out runs/bench/spaces [--workers 2]

The model-guided tuning ranks a workload's *whole* space, measured or not; extracting
it (schedule → lower → TIR graph) is the slow part (~15 configs/s per process), so it is
done once per workload and extractor version and kept as `OUT/<workload>-<version>.npz`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Optional, Sequence

from extract.sample import GraphSample, load_samples, save_samples

from .common import NONNEGATIVE, cli, locked_outputs, output_folder

DEFAULT_TEMPLATE = "conv2d_NCHWc.x86"


def space_path(out: str, workload: str) -> str:
    from extract.tir.graph import EXTRACTOR_VERSION
    return os.path.join(out, f"{workload}-{EXTRACTOR_VERSION}.npz")


def space_samples(workload: str, out: str, template: str = DEFAULT_TEMPLATE, workers: int = 1,
                  chunk: int = 32, progress: Optional[bool] = None) -> List[GraphSample]:
    """All configs of `workload` (C1…C12 or a key) as samples, in index order; cached.
    `progress`: a bar (default: only when stderr is a terminal)."""
    from extract.schedules import TIR_EXTRACTOR, extract_configs
    from extract.tir.workloads import parse_workload
    from simulator.engine import stderr_is_terminal

    if progress is None:
        progress = stderr_is_terminal()

    path = space_path(out, workload)
    if os.path.exists(path):
        return load_samples(path)
    start = time.perf_counter()
    samples = extract_configs(template, parse_workload(workload), workers=workers, chunk=chunk, progress=progress)
    save_samples(path, samples, extractor=TIR_EXTRACTOR,
                 info={"workload": workload, "template": template, "seconds": time.perf_counter() - start})
    return samples


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spaces", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--out", type=output_folder, default=os.path.join("runs", "bench", "spaces"))
    ap.add_argument("--template", default=DEFAULT_TEMPLATE)
    ap.add_argument("--workers", type=NONNEGATIVE, default=1, help="extraction processes (0: one per core)")
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.out):
        for w in args.workloads:
            start = time.perf_counter()
            samples = space_samples(w, args.out, args.template, args.workers)
            print(f"{w}: {len(samples)} configs in {time.perf_counter() - start:.0f} s -> "
                  f"{space_path(args.out, w)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
