"""Rank the configs of a workload with a trained simulator and print the top k.

    python -m simulator.predict DIR LOG_OR_WORKLOAD --top-k 5

LOG_OR_WORKLOAD is either data (an AutoTVM log, a folder of logs, a folder of .npz
samples): its measured configs are ranked per workload, with the measured runtime
beside the prediction; or a workload (`C2`, or `1x64x56x56_64x3x3_s1_p1`) that need
never have been measured: its whole config space (`--template`, or a seeded
`--max-configs` subset of it) is extracted and ranked.

A model trained on a TpuGraphs collection ranks every config of TpuGraphs npz files —
measured or not — and can write a Kaggle submission::

    python -m simulator.predict RUN_DIR [tpugraphs:COLLECTION | NPZ_FILES_OR_FOLDERS ...]
        [--data-root ROOT] [--split test] [--kaggle-csv FILE]

With no target it ranks the test split of the run's own collection (under the run's
`--data-root`, or the one given). `--kaggle-csv` writes `ID,TopConfigs` rows, IDs
`tile:xla:<graph>` / `layout:<source>:<search>:<graph>`, config indices best first
joined by `;`: the 5 best for tile (fewer if a kernel has fewer configs), all configs
for layout. Loose npz files take their collection from their folders
(…/layout/xla/random/test/x.npz), else from `--collection`, else the run's.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.sample import GraphSample

from .data import DEFAULT_TEMPLATE, enumerate_workload, load_data
from .engine import check_extractor, load_trained, predict_log, prepare_samples, setup_determinism
from .model import vector_name_of
from .registry import SimulatorError, run_cli


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
    ap.add_argument("target", metavar="LOG_OR_WORKLOAD", nargs="*",
                    help="data to rank (log files/folders, .npz folders), or one workload name; "
                         "TpuGraphs runs: tpugraphs:COLLECTION or TpuGraphs npz files/folders "
                         "(default: the run's collection)")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--template", default=DEFAULT_TEMPLATE, help="for a workload: its schedule template")
    ap.add_argument("--max-configs", type=int, default=0,
                    help="for a workload: rank a seeded subset of this many configs (0: the whole space)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0,
                    help="for a workload: extraction processes (0: one per core)")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--threads", type=int, default=None)
    x = ap.add_argument_group("TpuGraphs runs")
    x.add_argument("--kaggle-csv", default=None, metavar="FILE",
                   help="write the rankings as a Kaggle submission (ID,TopConfigs)")
    x.add_argument("--data-root", default=None, help="for tpugraphs:COLLECTION (default: the run's)")
    x.add_argument("--split", choices=["train", "valid", "val", "test"], default="test",
                   help="for tpugraphs:COLLECTION: which folder to rank")
    x.add_argument("--collection", default=None,
                   help="collection of loose npz files whose folders do not name one")
    args = ap.parse_args(argv)

    model, state = load_trained(args.run)
    config, info = state["config"], state["info"]
    setup_determinism(config["seed"], args.threads or config["threads"])
    if "tpugraphs" in info:
        return rank_tpugraphs(args, model, config, info)
    if args.kaggle_csv:
        raise SimulatorError(f"--kaggle-csv: {args.run} is not a TpuGraphs model (train one with "
                             f"--data tpugraphs:<collection>)")
    if not args.target:
        raise SimulatorError("give the data (log files/folders, .npz folders) or a workload to rank")
    check_extractor(info, args.run)
    if all(os.path.exists(t) for t in args.target):
        samples = load_data(args.target, args.cache_dir)
    elif len(args.target) == 1:
        name, samples = enumerate_workload(args.target[0], args.template, args.max_configs, args.seed,
                                           vector_name=vector_name_of(config["model"]), workers=args.workers)
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


def _tpugraphs_targets(args, config: Dict[str, Any], info: Dict[str, Any]) -> List[Tuple[str, List[Any]]]:
    """[(collection, TpuGraphsFiles)] of the targets, each file's collection resolved."""
    from datasets import tpugraphs_collections as tg
    from extract.tpugraphs_npz import COLLECTIONS, collection_of_path
    run_collection = info["tpugraphs"]["collection"]
    if args.collection is not None and args.collection not in COLLECTIONS:
        raise SimulatorError(f"--collection {args.collection}: one of {', '.join(COLLECTIONS)}")
    part = "val" if args.split in ("valid", "val") else args.split
    out: Dict[str, List[Any]] = {}
    try:
        for target in args.target or [tg.PREFIX + run_collection]:
            if target.startswith(tg.PREFIX):
                collection = tg.parse_spec(target)
                root = args.data_root or config.get("data_root")
                out.setdefault(collection, []).extend(tg.open_split(root, collection, part))
                continue
            for file in tg.open_paths([target]):
                collection = (args.collection or collection_of_path(file.path) or
                              (run_collection if file.kind == info["tpugraphs"]["kind"] else None))
                if collection is None:
                    raise SimulatorError(f"{file.path}: a {file.kind} file; which collection? (--collection)")
                out.setdefault(collection, []).append(file)
    except ValueError as e:
        raise SimulatorError(str(e)) from None
    kind = info["tpugraphs"]["kind"]
    for collection in out:
        if tg.kind_of(collection) != kind:
            raise SimulatorError(f"{collection}: the model was trained on {run_collection}, a {kind} "
                                 f"collection; it cannot rank {tg.kind_of(collection)} configs")
    return list(out.items())


def rank_tpugraphs(args, model, config: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """Rank every config of every target graph; print the top k; write the Kaggle CSV."""
    from datasets import tpugraphs_collections as tg
    from .tpugraphs import TpuGraphsSource, rank_configs
    rows: Dict[str, List[Dict[str, Any]]] = {}
    kaggle: List[Tuple[str, List[int]]] = []
    for collection, files in _tpugraphs_targets(args, config, info):
        source = TpuGraphsSource(files, config, info)
        for file, order, pred, true in rank_configs(model, source):
            row_id = tg.kaggle_id(collection, file.name)
            kaggle.append((row_id, [int(i) for i in (order[:tg.TILE_TOP] if source.kind == "tile" else order)]))
            measured = np.isfinite(true)
            best = float(np.exp(true[measured].min())) if measured.any() else None
            rows[row_id] = [{"rank": r, "config": int(c), "predicted": float(np.exp(pred[c])),
                             "measured": float(np.exp(true[c])) if measured[c] else None}
                            for r, c in enumerate(order[:args.top_k], 1)]
            top = " ".join(str(int(c)) for c in order[:args.top_k])
            note = ""
            if best is not None:
                chosen = [np.exp(true[c]) for c in order[:args.top_k] if measured[c]]
                if chosen:
                    note = f"; top-{args.top_k} slowdown {100 * (min(chosen) - best) / best:.2f}%"
            print(f"{row_id}: {len(order)} configs ({int(measured.sum())} measured); "
                  f"top {min(args.top_k, len(order))}: {top}{note}")
    if args.kaggle_csv:
        try:
            path = tg.write_kaggle_csv(args.kaggle_csv, kaggle)
        except (OSError, ValueError) as e:
            raise SimulatorError(f"{args.kaggle_csv}: cannot write ({e})") from None
        print(f"wrote {path} ({len(kaggle)} rows)", file=sys.stderr)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
