"""Speed and memory of every model beside the XGBoost baseline, measured in one run.

    python -m benchmarks.speed [--models gcn sage gat cheb mlp curve-mlp xgb] [--epochs 2]
        [--infer-batch 256] [--infer-batches 128 256 1024] [--threads 2] [--extraction-count 1000]
        [--data shipped]

Each model is measured in its own process (so its peak RSS is its own): load the data,
cross-workload split (seed 0), then
  * training throughput: `--epochs` epochs of the SGD loop (huber, batch 64, as
    simulator.train) over the training set, graphs/s; xgb: training configs / seconds of
    one full fit (early stopping on validation, as simulator.train);
  * inference throughput: every config of the data scored in batches of `--infer-batch`
    (default 256, simulator.evaluate/predict's own) from already prepared tensors (the
    model's own cost), median of 3 passes, configs/s; the same at each of `--infer-batches`
    (a smaller batch keeps its node states, ~40 per graph × 64 floats, in cache); and including `prepare`
    (GraphSample → tensors);
  * peak RSS of the process (VmHWM), data included.
Extraction (log → samples) is `benchmarks.extraction`: configs/s with 1 and 2 processes
and the per-stage split, from which the graph models' path (schedule + lower + TIR graph)
and the xgb path (schedule + MetaSchedule per-store features) are compared.
Ratios are model / xgb (> 1: the model is faster or uses more memory).
Writes RESULTS/speed.json, speed.csv, speed.png. Do not run while `extract.measure` runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np

from .common import (COUNT, DEFAULT_RESULTS, MODELS, busy_measuring, cli, locked_outputs, log, model_name,
                     output_file, output_folder, peak_rss_mib, write_csv, write_json)


def child(args) -> Dict[str, Any]:
    """One model's figures, in this process (see the module docstring)."""
    from simulator.models.costmodel import TorchCostModel, build_cost_model
    from simulator.data.collection import load_data
    from simulator.engine import setup_determinism
    from simulator.data.in_memory import SampleSource
    from simulator.data.splits import make_split
    from simulator.train import build_parser as train_parser, config_from_flags, validate

    config = validate(config_from_flags(vars(train_parser().parse_args(
        ["--model", args.child, "--threads", str(args.threads), "--loss", "huber", "--batch-size", "64"]))))
    setup_determinism(0, args.threads)
    t0 = time.perf_counter()
    samples = load_data(args.data)
    load_s = time.perf_counter() - t0
    parts = make_split([s.group for s in samples], "cross-workload", 0, None, None, 0.2, 1.0)
    source = SampleSource(samples, features=config.model.features)
    model = build_cost_model(config, source.info)
    t0 = time.perf_counter()
    items = source.items(model.batch_spec)
    prepare_s = time.perf_counter() - t0
    train, val = source.subset(parts["train"]), source.subset(parts["val"])
    model.set_normalization(train.normalization(model.batch_spec, 0))
    out: Dict[str, Any] = {"model": args.child, "configs": len(items), "train_configs": len(train),
                           "load_s": load_s, "prepare_configs_per_s": len(items) / prepare_s}
    if isinstance(model, TorchCostModel):  # SGD steps (CostModel.update: the fit loop's steps, no validation)
        steps = -(-len(train) // config.fit.batch_size)
        rates = []
        for _ in range(args.epochs):
            start = time.perf_counter()
            model.update(train, steps=steps)
            rates.append(len(train) / (time.perf_counter() - start))
        out["train_graphs_per_s"] = float(np.median(rates))
        out["train_note"] = f"median of {args.epochs} epochs of SGD, batch 64"
    else:  # boosting: one full fit, early stopping on validation
        start = time.perf_counter()
        summary = model.fit(train, val)
        out["train_graphs_per_s"] = len(train) / (time.perf_counter() - start)
        out["train_note"] = f"one full fit (best iteration {summary.get('best_iteration')}), configs/s"

    def rate(batch_size: int) -> float:
        """Configs/s scoring the prepared data (the model's own cost), median of 3 passes."""
        model.predict(source.subset(range(min(batch_size, len(source)))), batch_size)  # warm-up
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            model.predict(source, batch_size)
            rates.append(len(items) / (time.perf_counter() - start))
        return float(np.median(rates))

    out["infer_configs_per_s"] = rate(args.batch_size)
    out["infer_configs_per_s_by_batch"] = {str(b): rate(b) for b in args.batches}
    start = time.perf_counter()
    model.predict(samples, args.batch_size)  # a list of samples: prepared on the way
    out["infer_with_prepare_configs_per_s"] = len(items) / (time.perf_counter() - start)
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def run_child(model: str, args) -> Dict[str, Any]:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        path = tmp.name
    cmd = [sys.executable, "-m", "benchmarks.speed", "--child", model, "--child-out", path,
           "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--threads", str(args.threads),
           "--batches", *map(str, args.batches),
           "--data", *args.data]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), TQDM_DISABLE="1")
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"speed child {model} failed ({proc.returncode}):\n{proc.stderr[-1500:]}")
    with open(path, encoding="utf-8") as f:
        out = json.load(f)
    os.unlink(path)
    return out


def extraction(args) -> Optional[Dict[str, Any]]:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        path = tmp.name
    cmd = [sys.executable, "-m", "benchmarks.extraction", "--count", str(args.extraction_count), "--out", path]
    if args.extraction_log:
        cmd += ["--log", args.extraction_log]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"extraction benchmark failed: {proc.stderr[-800:]}")
        return None
    with open(path, encoding="utf-8") as f:
        out = json.load(f)
    os.unlink(path)
    st = out.get("stages_s", {})
    if st:
        graph_path = st.get("schedule", 0) + st.get("lower", 0) + st.get("graph", 0)
        xgb_path = st.get("schedule", 0) + st.get("per_store", 0)
        out["graph_path_configs_per_s"] = 1 / graph_path if graph_path else None
        out["xgb_path_configs_per_s"] = 1 / xgb_path if xgb_path else None
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--speed-models", nargs="+", type=model_name, default=MODELS)
    ap.add_argument("--speed-epochs", type=COUNT, default=2, help="epochs timed per SGD model")
    ap.add_argument("--infer-batch", type=COUNT, default=256, help="as simulator.evaluate/predict")
    ap.add_argument("--infer-batches", nargs="*", type=COUNT, default=[128, 256, 1024],
                    help="batch sizes also timed for inference")
    ap.add_argument("--speed-threads", type=COUNT, default=2)
    ap.add_argument("--extraction-count", type=COUNT, default=1000)
    ap.add_argument("--extraction-log", default=None, help="default: the shipped log")


def run(args) -> Dict[str, Any]:
    if busy_measuring() and not getattr(args, "force", False):
        raise SystemExit("extract.measure is running: timing now would disturb both (--force to override)")
    ns = argparse.Namespace(epochs=args.speed_epochs, batch_size=args.infer_batch, batches=args.infer_batches,
                            threads=args.speed_threads,
                            data=args.data, extraction_count=args.extraction_count,
                            extraction_log=args.extraction_log)
    result: Dict[str, Any] = {"models": {}, "threads": args.speed_threads, "batch_size": args.infer_batch}
    for m in args.speed_models:
        log(f"speed: {m}")
        result["models"][m] = run_child(m, ns)
    if args.extraction_count > 0:
        log("speed: extraction")
        result["extraction"] = extraction(ns)
    base = result["models"].get("xgb")
    rows = []
    for m, r in result["models"].items():
        for key in ("train_graphs_per_s", "infer_configs_per_s", "infer_with_prepare_configs_per_s", "peak_rss_mib"):
            ratio = r[key] / base[key] if base and base.get(key) else None
            r[key.replace("_per_s", "").replace("_mib", "") + "_vs_xgb"] = ratio
            rows.append([m, key, r[key], ratio])
    ex = result.get("extraction")
    if ex and ex.get("graph_path_configs_per_s") and ex.get("xgb_path_configs_per_s"):
        rows.append(["graph models", "extract_configs_per_s_1_process", ex["graph_path_configs_per_s"],
                     ex["graph_path_configs_per_s"] / ex["xgb_path_configs_per_s"]])
        rows.append(["xgb", "extract_configs_per_s_1_process", ex["xgb_path_configs_per_s"], 1.0])
    write_json(os.path.join(args.results, "speed.json"), result)
    write_csv(os.path.join(args.results, "speed.csv"), ["model", "figure", "value", "ratio_vs_xgb"], rows)
    from .plots import plot_speed
    plot_speed(result, os.path.join(args.results, "speed.png"))
    return result


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.speed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--child", type=model_name, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=output_file, help=argparse.SUPPRESS)
    ap.add_argument("--epochs", type=COUNT, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--batch-size", type=COUNT, default=256, help=argparse.SUPPRESS)
    ap.add_argument("--batches", nargs="*", type=COUNT, default=[], help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=COUNT, default=2, help=argparse.SUPPRESS)
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        write_json(args.child_out, child(args))
        return 0
    with locked_outputs(args.results):
        result = run(args)
    for m, r in result["models"].items():
        print(f"{m:10s} train {r['train_graphs_per_s']:9.0f}/s  infer {r['infer_configs_per_s']:9.0f}/s  "
              f"RSS {r['peak_rss_mib']:6.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
