"""Accuracy on the cross-workload split: every model × seeds, mean ± std, beside the noise ceiling.

    python -m benchmarks.accuracy [--models gcn sage gat cheb mlp curve-mlp xgb] [--seeds 0 1 2]
        [--epochs N] [--data shipped] [--runs runs/bench/accuracy] [--results docs/results]
        [--parallel 2]

Trains each (model, seed) with `python -m simulator.train --split cross-workload` (train
C1 C2 C4 C8 C9 C12, test C3 C5 C6 C7 C10 C11; a finished run with the same command line
is reused), then writes

    RESULTS/accuracy_runs.csv   model, seed, workload, metric, value   (every number)
    RESULTS/accuracy.csv        model, workload, metric, mean, std, n  (over seeds)
    RESULTS/noise_ceiling.csv   per workload: τ between the dataset's two passes
    RESULTS/accuracy.json       the same, for the report
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, METRICS, MODELS, SEED, cli, locked_outputs, log, mean_std,
                     model_name, natural_key, output_folder, run_many, train_argv, write_csv, write_json)

ALL_METRICS = METRICS + ["opa", "top10_slowdown", "l1_ms", "top1_ape"]


def run_dir(runs: str, model: str, seed: int, fraction: float = 1.0) -> str:
    name = f"{model}-seed{seed}" + (f"-f{fraction:g}" if fraction < 1.0 else "")
    return os.path.join(runs, name)


def accuracy_jobs(models: Sequence[str], seeds: Sequence[int], runs: str, data: Sequence[str],
                  epochs: Optional[int], extra: Sequence[str] = ()) -> List[Dict[str, Any]]:
    jobs = []
    for seed in seeds:
        for model in models:
            out = run_dir(runs, model, seed)
            jobs.append({"model": model, "seed": seed, "fraction": 1.0, "out": out,
                         "argv": train_argv(model, seed, out, data, epochs, extra=extra)})
    return jobs


def long_rows(results: Sequence[Dict[str, Any]], part: str = "test") -> List[List[Any]]:
    """[model, seed, fraction, workload, metric, value] for every number of every run."""
    rows = []
    for r in results:
        block = r["metrics"].get(part, {})
        for metric, v in block.items():
            rows.append([r["model"], r["seed"], r.get("fraction", 1.0), "mean", metric, v.get("mean")])
            for w, x in v.get("per_workload", {}).items():
                rows.append([r["model"], r["seed"], r.get("fraction", 1.0), w, metric, x])
    return rows


def summarize(results: Sequence[Dict[str, Any]], part: str = "test") -> Dict[str, Dict[str, Dict[str, list]]]:
    """{model: {workload|"mean": {metric: [mean, std, n]}}} over seeds."""
    acc: Dict[str, Dict[str, Dict[str, list]]] = {}
    for model in dict.fromkeys(r["model"] for r in results):
        runs = [r["metrics"].get(part, {}) for r in results if r["model"] == model]
        workloads = sorted({w for m in runs for v in m.values() for w in v.get("per_workload", {})},
                           key=natural_key)
        acc[model] = {}
        for w in ["mean"] + workloads:
            acc[model][w] = {}
            for metric in sorted({k for m in runs for k in m}):
                vals = [m.get(metric, {}).get("mean") if w == "mean"
                        else m.get(metric, {}).get("per_workload", {}).get(w) for m in runs]
                acc[model][w][metric] = list(mean_std(vals))
    return acc


def noise_ceiling(data_dir: Optional[str] = None, logs: Optional[Sequence[str]] = None
                  ) -> Optional[Dict[str, Dict[str, float]]]:
    """Per-workload agreement of the shipped dataset's two passes (noise_ceiling.json, or
    computed from pass1/pass2; or from the two `logs` given), None if the second pass is missing."""
    from datasets import SHIPPED, SHIPPED_LOG, SHIPPED_REMEASURE
    if logs:
        from datasets.noise_ceiling import noise_ceiling as compute
        return compute(*logs)
    folder = data_dir or str(SHIPPED)
    path = os.path.join(folder, "noise_ceiling.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    first, second = os.path.join(folder, SHIPPED_LOG.name), os.path.join(folder, SHIPPED_REMEASURE.name)
    if not (os.path.exists(first) and os.path.exists(second)):
        return None
    from datasets.noise_ceiling import noise_ceiling as compute
    return compute(first, second)


def quiet_agreement(results: Sequence[Dict[str, Any]], samples, first_log: str, quiet_log: str
                    ) -> Dict[str, Any]:
    """Kendall τ against a quiet re-measurement, per held-out workload, on the test configs it
    re-measured: each model's predictions (mean ± std over seeds) beside pass 1's own
    measurements, which the models were trained and scored on. A model that agrees with the
    quiet pass as well as pass 1 does predicts as well as one more measurement would."""
    from scipy.stats import kendalltau

    from datasets.noise_ceiling import costs_by_workload

    from .plots import test_predictions
    first = costs_by_workload(first_log)
    quiet = {w: {i: float(c.mean()) for i, c in by.items()} for w, by in costs_by_workload(quiet_log).items()}
    pass1_tau: Dict[str, float] = {}
    configs: Dict[str, int] = {}
    per_model: Dict[str, Dict[str, List[float]]] = {}
    for r in results:
        p = test_predictions(r["out"], None, samples)
        for w in sorted(set(p["workload"].tolist()), key=natural_key):
            rows = [k for k in np.flatnonzero(p["workload"] == w)
                    if p["index"][k] in quiet.get(w, {}) and p["index"][k] in first.get(w, {})]
            if len(rows) < 3:
                continue
            t_quiet = [quiet[w][p["index"][k]] for k in rows]
            per_model.setdefault(r["model"], {}).setdefault(w, []).append(
                float(kendalltau(p["predicted"][rows], t_quiet).statistic))
            if w not in pass1_tau:
                t_first = [first[w][p["index"][k]].mean() for k in rows]
                pass1_tau[w], configs[w] = float(kendalltau(t_first, t_quiet).statistic), len(rows)
    if not pass1_tau:
        raise ValueError(f"{quiet_log}: no re-measured config is in the runs' test sets")
    workloads = sorted(pass1_tau, key=natural_key)
    models = {}
    for m, per in per_model.items():
        models[m] = {w: list(mean_std(per.get(w, []))) for w in workloads}
        seeds = min(len(v) for v in per.values())
        models[m]["mean"] = list(mean_std([np.mean([per[w][i] for w in workloads]) for i in range(seeds)]))
    pass1 = dict(pass1_tau, mean=float(np.mean(list(pass1_tau.values()))))
    return {"quiet_log": quiet_log, "configs": configs, "pass1": pass1, "models": models}


def write_outputs(results: Sequence[Dict[str, Any]], results_dir: str,
                  ceiling: Optional[Dict[str, Dict[str, float]]]) -> Dict[str, Any]:
    os.makedirs(results_dir, exist_ok=True)
    write_csv(os.path.join(results_dir, "accuracy_runs.csv"),
              ["model", "seed", "fraction", "workload", "metric", "value"], long_rows(results))
    summary = summarize(results)
    rows = []
    for model, per in summary.items():
        for w, ms in per.items():
            for metric, (m, s, n) in ms.items():
                rows.append([model, w, metric, m, s, n])
    write_csv(os.path.join(results_dir, "accuracy.csv"), ["model", "workload", "metric", "mean", "std", "n"], rows)
    if ceiling:
        write_csv(os.path.join(results_dir, "noise_ceiling.csv"),
                  ["workload", "configs", "kendall_tau", "median_rel_diff", "p90_rel_diff", "median_repeat_spread"],
                  [[w, c.get("configs"), c.get("kendall_tau"), c.get("median_rel_diff"), c.get("p90_rel_diff"),
                    c.get("median_repeat_spread")] for w, c in ceiling.items()])
    out = {"summary": summary, "noise_ceiling": ceiling,
           "runs": [{"model": r["model"], "seed": r["seed"], "out": r["out"], "argv": r["argv"],
                     "seconds": r["metrics"].get("bench", {}).get("seconds"),
                     "run": r["metrics"].get("run", {})} for r in results]}
    write_json(os.path.join(results_dir, "accuracy.json"), out)
    return out


def check_train_args(train_args: Sequence[str]) -> None:
    """--train-args are simulator.train's flags: checked by its parser now, before any run
    (argparse's one-line error and exit 2 for a bad one)."""
    if train_args:
        from simulator.train import explicit_flags
        explicit_flags(list(train_args))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.accuracy", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--models", nargs="+", type=model_name, default=MODELS)
    ap.add_argument("--seeds", nargs="+", type=SEED, default=[0, 1, 2])
    ap.add_argument("--epochs", type=COUNT, default=None, help="default: simulator.train's (60, patience 15)")
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--runs", type=output_folder, default=os.path.join(DEFAULT_RUNS, "accuracy"))
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=2, help="training runs at a time (each 1 thread)")
    ap.add_argument("--ceiling-logs", nargs=2, default=None, metavar=("FIRST", "SECOND"),
                    help="the two measurement passes (default: the shipped dataset's)")
    ap.add_argument("--train-args", nargs=argparse.REMAINDER, default=[],
                    help="further simulator.train flags for every run (last on the line)")


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    check_train_args(args.train_args)
    jobs = accuracy_jobs(args.models, args.seeds, args.runs, args.data, args.epochs, args.train_args)
    log(f"accuracy: {len(jobs)} runs, {args.parallel} at a time")
    with locked_outputs(args.results, args.runs):
        results = run_many(jobs, args.parallel)
        out = write_outputs(results, args.results, noise_ceiling(logs=args.ceiling_logs))
    for model, per in out["summary"].items():
        tau = per["mean"].get("kendall_tau", [np.nan])[0]
        print(f"{model:10s} τ {tau:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
