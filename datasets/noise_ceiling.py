"""Agreement between two measurement passes: the ceiling no runtime model can beat.

    python -m datasets.noise_ceiling [FIRST_LOG SECOND_LOG] [--out FILE]

For every workload, the configs measured in both passes are ranked by each pass's
mean runtime; Kendall τ between the two rankings is the best τ any predictor can
expect against one pass's numbers. Also reported: the median and 90th percentile of
the relative difference |t2 − t1| / t1, and the median spread (std / mean) of the
repeats within one measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Dict, Optional, Sequence

import numpy as np
from scipy.stats import kendalltau

from extract.fileio import atomic_write
from extract.records import RecordFormatError, read_records

from . import SHIPPED_LOG, SHIPPED_REMEASURE


def costs_by_workload(path: str) -> Dict[str, Dict[int, np.ndarray]]:
    """{group: {config index: per-repeat costs}} of a log's successful records, each
    record checked as `extract.tvm_log` checks it (RecordFormatError naming file:line);
    groups as extract.tvm_log names them (the target kind when not the template's)."""
    from extract.tvm_log import record_job

    out: Dict[str, Dict[int, np.ndarray]] = defaultdict(dict)
    for r in read_records(path):
        if r.ok:
            try:
                job = record_job(r)
            except (ValueError, KeyError) as e:  # a bad record, an unknown template
                raise RecordFormatError(f"{r.source}: {e}") from None
            out[job.group][r.config_index] = np.asarray(r.costs)
    return out


def noise_ceiling(first: str, second: str) -> Dict[str, Dict[str, float]]:
    a, b = costs_by_workload(first), costs_by_workload(second)
    result: Dict[str, Dict[str, float]] = {}
    for group in sorted(set(a) & set(b), key=lambda g: (len(g), g)):
        common = sorted(set(a[group]) & set(b[group]))
        if len(common) < 3:
            continue
        t1 = np.array([a[group][i].mean() for i in common])
        t2 = np.array([b[group][i].mean() for i in common])
        rel = np.abs(t2 - t1) / t1
        spread = [a[group][i].std() / a[group][i].mean() for i in common]
        result[group] = {"configs": len(common), "kendall_tau": float(kendalltau(t1, t2).statistic),
                         "median_rel_diff": float(np.median(rel)), "p90_rel_diff": float(np.percentile(rel, 90)),
                         "median_repeat_spread": float(np.median(spread))}
    if not result:
        raise ValueError(f"{first} and {second} share no measured configs")
    taus = [r["kendall_tau"] for r in result.values()]
    result["mean"] = {"configs": sum(r["configs"] for r in result.values()), "kendall_tau": float(np.mean(taus)),
                      "median_rel_diff": float(np.median([r["median_rel_diff"] for r in result.values()])),
                      "p90_rel_diff": float(np.median([r["p90_rel_diff"] for r in result.values()])),
                      "median_repeat_spread": float(np.median([r["median_repeat_spread"] for r in result.values()]))}
    return result


def _output_file(text: str) -> str:
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    parent = os.path.dirname(text) or "."
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{parent}: no such folder")
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets.noise_ceiling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="*", default=[str(SHIPPED_LOG), str(SHIPPED_REMEASURE)])
    ap.add_argument("--out", default=None, type=_output_file, help="JSON file to write (default: print only)")
    args = ap.parse_args(argv)
    if len(args.logs) != 2:
        ap.error("give two logs: the first pass and the re-measured subset")
    try:
        for log in args.logs:
            if not os.path.isfile(log):
                raise FileNotFoundError(f"{log}: no such log file")
        result = noise_ceiling(*args.logs)
    except (FileNotFoundError, ValueError) as e:  # RecordFormatError, no shared configs
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{'workload':<10} {'configs':>7} {'tau':>6} {'med |Δ|/t':>10} {'p90 |Δ|/t':>10} {'repeat spread':>14}")
    for group, r in result.items():
        print(f"{group:<10} {r['configs']:>7} {r['kendall_tau']:>6.3f} {r['median_rel_diff']:>10.3f} "
              f"{r['p90_rel_diff']:>10.3f} {r['median_repeat_spread']:>14.3f}")
    if args.out:
        with atomic_write(args.out) as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
