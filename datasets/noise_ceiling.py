"""Agreement between two measurement passes: the ceiling no runtime model can beat.

    python -m datasets.noise_ceiling [FIRST_LOG SECOND_LOG] [--out FILE]

For every workload, the configs measured in both passes are ranked by each pass's
mean runtime; Kendall τ between the two rankings is the best τ any predictor can
expect against one pass's numbers. Also reported: the median and 90th percentile of
the relative difference |t2 − t1| / t1, and the median spread (std / mean) of the
repeats within one measurement.

Then, when the first pass ran slow: the shared configs by the minute the first pass measured
them (`machine_load`). A config measured twice differs by the machine's state, so a window
whose configs all ran slower in the first pass was a window of load from other work; the
configs the first pass measured then carry that slowdown in their labels.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
from scipy.stats import kendalltau

from extract.autotvm.records import RecordFormatError, read_records
from extract.cli import POSITIVE
from extract.fileio import atomic_write

from . import SHIPPED_LOG, SHIPPED_REMEASURE


def _measured(path: str) -> Iterator[Tuple[str, int, np.ndarray, float]]:
    """(group, config index, per-repeat costs, timestamp) of a log's successful records, each
    record checked as `extract.tvm_log` checks it (RecordFormatError naming file:line);
    groups as extract.tvm_log names them (the target kind when not the template's)."""
    from extract.tvm_log import record_job

    for r in read_records(path):
        if r.ok:
            try:
                job = record_job(r)
            except (ValueError, KeyError) as e:  # a bad record, an unknown template
                raise RecordFormatError(f"{r.source}: {e}") from None
            yield job.group, r.config_index, np.asarray(r.costs), r.timestamp


def costs_by_workload(path: str) -> Dict[str, Dict[int, np.ndarray]]:
    """{group: {config index: per-repeat costs}} of a log's successful records."""
    out: Dict[str, Dict[int, np.ndarray]] = defaultdict(dict)
    for group, index, costs, _ in _measured(path):
        out[group][index] = costs
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


WINDOW_MINUTES = 5.0   # the load of a shared machine changes over minutes (docs: resnet18_x86/README.md)
LOADED_RATIO = 1.15    # a window whose configs ran this much slower than in the reference pass was loaded
MIN_WINDOW_CONFIGS = 5


def machine_load(first: str, reference: str, window_minutes: float = WINDOW_MINUTES,
                 loaded_ratio: float = LOADED_RATIO) -> Dict[str, Any]:
    """When the first pass ran slow: its configs that `reference` (a quiet re-measurement)
    measured again, by the time the first pass measured them, in windows of `window_minutes`
    from its first record. Per window: the median, 25th and 75th percentile of t_first /
    t_reference, and whether the window was loaded (median ≥ `loaded_ratio`; None with fewer
    than MIN_WINDOW_CONFIGS shared configs). The same config's two timings differ by the
    machine's state, not by the program, so a window's ratio is the slowdown every config
    measured then suffered; `loaded_configs` counts the first pass's configs (all of them,
    not only the shared ones) measured in loaded windows."""
    if not window_minutes > 0 or not loaded_ratio > 0:
        raise ValueError(f"window_minutes ({window_minutes}) and loaded_ratio ({loaded_ratio}) must be > 0")
    ref = {(g, i): c.mean() for g, i, c, _ in _measured(reference)}
    measured = [(ts, ref.get((g, i)), c.mean()) for g, i, c, ts in _measured(first)]
    if not measured or not any(r is not None for _, r, _ in measured):
        raise ValueError(f"{first} and {reference} share no measured configs")
    start = min(ts for ts, _, _ in measured)
    window = [int((ts - start) // (60 * window_minutes)) for ts, _, _ in measured]
    windows = []
    for w in range(max(window) + 1):
        rows = [m for m, k in zip(measured, window) if k == w]
        ratios = np.array([t / r for _, r, t in rows if r is not None])
        known = len(ratios) >= MIN_WINDOW_CONFIGS
        q25, median, q75 = np.percentile(ratios, [25, 50, 75]) if known else (None, None, None)
        windows.append({"start_minute": w * window_minutes, "first_pass_configs": len(rows), "configs": len(ratios),
                        "median_ratio": _float(median), "q25_ratio": _float(q25), "q75_ratio": _float(q75),
                        "loaded": bool(median >= loaded_ratio) if known else None})
    loaded = sum(w["first_pass_configs"] for w in windows if w["loaded"])
    return {"window_minutes": window_minutes, "loaded_ratio": loaded_ratio, "windows": windows,
            "first_pass_configs": len(measured), "loaded_configs": loaded, "loaded_share": loaded / len(measured),
            "unknown_configs": sum(w["first_pass_configs"] for w in windows if w["loaded"] is None)}


def _float(value: Optional[float]) -> Optional[float]:
    return None if value is None else float(value)


def _print_load(load: Dict[str, Any]) -> None:
    print(f"\nthe first pass against the second by the minute it measured them "
          f"(loaded: median ratio ≥ {load['loaded_ratio']:.2f})")
    print(f"{'minutes':<9} {'configs':>7} {'shared':>6} {'median t1/t2':>12} {'q25':>6} {'q75':>6}")
    for w in load["windows"]:
        span = f"{w['start_minute']:g}–{w['start_minute'] + load['window_minutes']:g}"
        ratios = (f"{w['median_ratio']:>12.2f} {w['q25_ratio']:>6.2f} {w['q75_ratio']:>6.2f}"
                  + ("  loaded" if w["loaded"] else "")) if w["loaded"] is not None else f"{'–':>12}"
        print(f"{span:<9} {w['first_pass_configs']:>7} {w['configs']:>6} {ratios}")
    print(f"{load['loaded_configs']} of the first pass's {load['first_pass_configs']} configs "
          f"({100 * load['loaded_share']:.0f}%) were measured in loaded windows"
          + (f", {load['unknown_configs']} in windows too thin to tell" if load["unknown_configs"] else ""))


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
    ap.add_argument("--window-minutes", type=POSITIVE, default=WINDOW_MINUTES,
                    help="the load-by-time table's window (minutes of the first pass)")
    args = ap.parse_args(argv)
    if len(args.logs) != 2:
        ap.error("give two logs: the first pass and the re-measured subset")
    try:
        for log in args.logs:
            if not os.path.isfile(log):
                raise FileNotFoundError(f"{log}: no such log file")
        result = noise_ceiling(*args.logs)
        load = machine_load(*args.logs, window_minutes=args.window_minutes)
    except (FileNotFoundError, ValueError) as e:  # RecordFormatError, no shared configs
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{'workload':<10} {'configs':>7} {'tau':>6} {'med |Δ|/t':>10} {'p90 |Δ|/t':>10} {'repeat spread':>14}")
    for group, r in result.items():
        print(f"{group:<10} {r['configs']:>7} {r['kendall_tau']:>6.3f} {r['median_rel_diff']:>10.3f} "
              f"{r['p90_rel_diff']:>10.3f} {r['median_repeat_spread']:>14.3f}")
    _print_load(load)
    if args.out:
        with atomic_write(args.out) as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
