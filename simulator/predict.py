"""Rank the configs of a workload with a trained simulator and print the top k.

    python -m simulator.predict DIR LOG_OR_WORKLOAD --top-k 5

LOG_OR_WORKLOAD is either data (an AutoTVM log, a folder of logs, a folder of .npz
samples): its measured configs are ranked per workload, with the measured runtime
beside the prediction; or a workload (`C2`, or `1x64x56x56_64x3x3_s1_p1`) that need
never have been measured: its whole config space (`--template`, or a seeded
`--max-configs` subset of it) is extracted and ranked.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from extract.sample import GraphSample

from .data import DEFAULT_TEMPLATE, enumerate_workload, load_data
from .engine import check_extractor, load_trained, predict_log, prepare_samples, setup_determinism
from .model import vector_name_of
from .registry import SimulatorError


def rank_samples(model, config: Dict[str, Any], info: Dict[str, Any], samples: Sequence[GraphSample],
                 top_k: int) -> Dict[str, List[Dict[str, Any]]]:
    """{workload: [the top_k configs by predicted runtime, fastest first]}; each row has
    rank, name, predicted_ms, measured_ms (None if unmeasured) and meta."""
    group_index = {g: i for i, g in enumerate(sorted({s.group for s in samples}))}
    items = prepare_samples(samples, config, info, group_index)
    pred = predict_log(model, items, config.get("eval_batch_size", 256))
    rows: Dict[str, List[Dict[str, Any]]] = {}
    row = 0
    flat = []
    for s in samples:
        for c in range(s.num_configs):
            flat.append((s, c, float(pred[row])))
            row += 1
    for group in sorted(group_index):
        members = [f for f in flat if f[0].group == group]
        order = np.argsort([f[2] for f in members], kind="stable")[:top_k]
        rows[group] = []
        for rank, i in enumerate(order, 1):
            s, c, p = members[i]
            measured = float(s.runtimes[c])
            rows[group].append({"rank": rank, "name": s.name, "predicted_ms": math.exp(p) * 1e3,
                                "measured_ms": measured * 1e3 if math.isfinite(measured) else None,
                                "meta": s.meta})
        best = min((float(f[0].runtimes[f[1]]) for f in members), default=float("nan"))
        if math.isfinite(best):
            rows[group].append({"rank": None, "name": "best measured", "predicted_ms": None,
                                "measured_ms": best * 1e3, "meta": {}})
    return rows


def _describe(meta: Dict[str, Any]) -> str:
    for key in ("entity", "config", "knobs"):
        if key in meta:
            return json.dumps(meta[key], separators=(",", ":"))
    return ""


def print_ranking(rows: Dict[str, List[Dict[str, Any]]], counts: Dict[str, int]) -> None:
    for group, ranked in rows.items():
        print(f"\n{group}: top {sum(r['rank'] is not None for r in ranked)} of {counts[group]} configs")
        print(f"{'rank':>4}  {'predicted ms':>12}  {'measured ms':>11}  config")
        for r in ranked:
            rank = "" if r["rank"] is None else str(r["rank"])
            pred = "" if r["predicted_ms"] is None else f"{r['predicted_ms']:.4f}"
            meas = "-" if r["measured_ms"] is None else f"{r['measured_ms']:.4f}"
            print(f"{rank:>4}  {pred:>12}  {meas:>11}  {r['name']}  {_describe(r['meta'])}")


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, List[Dict[str, Any]]]:
    ap = argparse.ArgumentParser(prog="python -m simulator.predict", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", metavar="DIR", help="run folder (or its checkpoint.pt)")
    ap.add_argument("target", metavar="LOG_OR_WORKLOAD", nargs="+",
                    help="data to rank (log files/folders, .npz folders), or one workload name")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--template", default=DEFAULT_TEMPLATE, help="for a workload: its schedule template")
    ap.add_argument("--max-configs", type=int, default=0,
                    help="for a workload: rank a seeded subset of this many configs (0: the whole space)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)

    model, state = load_trained(args.run)
    config, info = state["config"], state["info"]
    setup_determinism(config["seed"], args.threads or config["threads"])
    check_extractor(info, args.run)
    if all(os.path.exists(t) for t in args.target):
        samples = load_data(args.target, args.cache_dir)
    elif len(args.target) == 1:
        name, samples = enumerate_workload(args.target[0], args.template, args.max_configs, args.seed,
                                           vector_name=vector_name_of(config["model"]))
        if not samples:
            raise SimulatorError(f"workload {args.target[0]!r}: its config space is empty")
        print(f"{name}: ranking {len(samples)} configs of {args.template}", file=sys.stderr)
    else:
        missing = [t for t in args.target if not os.path.exists(t)]
        raise SimulatorError(f"{missing[0]}: no such file or folder")
    rows = rank_samples(model, config, info, samples, args.top_k)
    counts: Dict[str, int] = {}
    for s in samples:
        counts[s.group] = counts.get(s.group, 0) + s.num_configs
    print_ranking(rows, counts)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        run(argv)
    except SimulatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
