"""Training-fraction sweep: test L1 (log) and Kendall τ against the share of training data.

    python -m benchmarks.sweep [--models gcn mlp curve-mlp]
        [--fractions 0.05 0.1 0.15 0.2 0.25 0.5 0.75 1.0] [--seeds 0 1 2] [--epochs N]

Each point is `python -m simulator.train --split cross-workload --train-fraction F`
(a seeded ⌈F·n⌉ of each training workload's configs; validation and test stay whole).
Runs share the accuracy benchmark's folder, so the F = 1 points are its runs, reused.
Writes RESULTS/sweep_runs.csv (every run) and RESULTS/sweep.csv (mean ± std over seeds).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from .accuracy import long_rows, run_dir
from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, FRACTION, SEED, cli, locked_outputs, log, mean_std,
                     model_name, output_folder, run_many, train_argv, write_csv, write_json)

FRACTIONS = [0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 0.75, 1.0]
SWEEP_MODELS = ["gcn", "mlp", "curve-mlp"]


def sweep_jobs(models, fractions, seeds, runs, data, epochs, extra=()) -> List[Dict[str, Any]]:
    jobs = []
    for seed in seeds:
        for fraction in sorted(fractions):
            for model in models:
                out = run_dir(runs, model, seed, fraction)
                more = list(extra) + (["--train-fraction", f"{fraction:g}"] if fraction < 1.0 else [])
                jobs.append({"model": model, "seed": seed, "fraction": fraction, "out": out,
                             "argv": train_argv(model, seed, out, data, epochs, extra=more)})
    return jobs


def summarize(results: Sequence[Dict[str, Any]]) -> List[List[Any]]:
    """[model, fraction, train_samples, metric, mean, std, n] of the test means."""
    rows = []
    keys = sorted({(r["model"], r["fraction"]) for r in results}, key=lambda k: (k[0], k[1]))
    for model, fraction in keys:
        runs = [r for r in results if r["model"] == model and r["fraction"] == fraction]
        n_train = runs[0]["metrics"].get("run", {}).get("train_samples")
        for metric in ("l1_log", "kendall_tau", "top5_slowdown", "mape"):
            m, s, n = mean_std(r["metrics"].get("test", {}).get(metric, {}).get("mean") for r in runs)
            rows.append([model, fraction, n_train, metric, m, s, n])
    return rows


def write_outputs(results: Sequence[Dict[str, Any]], results_dir: str) -> List[List[Any]]:
    write_csv(os.path.join(results_dir, "sweep_runs.csv"),
              ["model", "seed", "fraction", "workload", "metric", "value"], long_rows(results))
    rows = summarize(results)
    write_csv(os.path.join(results_dir, "sweep.csv"),
              ["model", "fraction", "train_samples", "metric", "mean", "std", "n"], rows)
    write_json(os.path.join(results_dir, "sweep.json"),
               {"rows": rows, "runs": [{"model": r["model"], "seed": r["seed"], "fraction": r["fraction"],
                                        "out": r["out"], "argv": r["argv"]} for r in results]})
    return rows


def add_arguments(ap: argparse.ArgumentParser, prefix: str = "") -> None:
    ap.add_argument(f"--{prefix}models", nargs="+", type=model_name, default=SWEEP_MODELS)
    ap.add_argument(f"--{prefix}fractions", nargs="+", type=FRACTION, default=FRACTIONS)
    ap.add_argument(f"--{prefix}seeds", nargs="+", type=SEED, default=[0, 1, 2])


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--epochs", type=COUNT, default=None)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--runs", type=output_folder, default=os.path.join(DEFAULT_RUNS, "accuracy"))
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=2)
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    jobs = sweep_jobs(args.models, args.fractions, args.seeds, args.runs, args.data, args.epochs)
    log(f"sweep: {len(jobs)} runs, {args.parallel} at a time")
    with locked_outputs(args.results, args.runs):
        rows = write_outputs(run_many(jobs, args.parallel), args.results)
    for r in rows:
        if r[3] in ("kendall_tau", "l1_log"):
            print(f"{r[0]:10s} f={r[1]:<5g} {r[3]:12s} {r[4]:.4f} ± {r[5]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
