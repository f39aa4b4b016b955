"""Learning curves on the MetaSchedule networks dataset: what more tasks, or more records per
task, would buy a model that ranks the schedules of a network it never trained on.

    python -m benchmarks.learning_curves [--networks-data datasets/networks_<cpu>] [--curve-models gcn tenset-mlp]
        [--curve-networks resnet50 mobilenet_v2 bert vit] [--task-fractions 0.125 0.25 0.5]
        [--record-fractions 0.25 0.5] [--curve-seeds 0] [--curve-epochs 10] [--runs runs/bench]
        [--results docs/results] [--parallel 1]

Each point is a leave-one-network-out run (`--split leave-network-out`, as
`benchmarks.networks`) trained on part of the training data: a seeded share of the training
tasks, whole (`simulator.train --train-task-fraction`), or a seeded share of every training
task's records (`--train-fraction`); validation and the held-out network's tasks stay the
same. The full point (both shares 1) is `benchmarks.networks`' own run, reused when its
command line is the same (same folder, `RUNS/networks/`). Metrics: τ and TenSet's top-k
scores over the held-out network's tasks (`benchmarks.networks.add_scores`), means over the
networks (and seeds). Results: RESULTS/learning_curves_<dataset>.json and .csv, a section
of docs/RESULTS.md (`report_section`).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from .common import (COUNT, SEED, add_run_options, cli, fmt, log, markdown_table, mean_std, run_and_report, run_many,
                     train_argv, write_csv, write_json)
from .kept_runs import KEPT_SUFFIX
from . import networks as bench_networks

PREFIX = "learning_curves_"
SHARES = {"tasks": "--train-task-fraction", "records": "--train-fraction"}
CURVE_METRICS = ["kendall_tau", "top1_score", "top5_score"]


def share(text: str) -> float:
    """An argparse type: a share in (0, 1)."""
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text}: a share in (0, 1) (the full data is benchmarks.networks' run)")
    return value


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The curves' own options (`--networks-data` is `benchmarks.networks`' option, shared)."""
    ap.add_argument("--curve-models", nargs="+", type=bench_networks.networks_model, default=["gcn", "tenset-mlp"])
    ap.add_argument("--curve-networks", nargs="+", default=bench_networks.NETWORKS)
    ap.add_argument("--task-fractions", nargs="*", type=share, default=[0.125, 0.25, 0.5])
    ap.add_argument("--record-fractions", nargs="*", type=share, default=[0.25, 0.5])
    ap.add_argument("--curve-seeds", nargs="+", type=SEED, default=[0])
    ap.add_argument("--curve-epochs", type=COUNT, default=10)


def jobs(args) -> List[Dict[str, Any]]:
    """Every run: (held-out network, model, seed, which share, its value); the full point
    is `benchmarks.networks`' run of the same network, model and seed."""
    runs = os.path.join(args.runs, "networks")
    points = [("full", 1.0)] + [(kind, f) for kind in SHARES for f in getattr(args, f"{kind[:-1]}_fractions")]
    out = []
    for seed in args.curve_seeds:
        for held in args.curve_networks:
            for model in args.curve_models:
                for kind, fraction in points:
                    folder = os.path.join(runs, f"leave-network-out-{held}-{model}-seed{seed}"
                                          + ("" if kind == "full" else f"-{kind}{fraction:g}"))
                    name, flags = bench_networks.model_flags(model)
                    loss = [] if "--loss" in flags else ["--loss", bench_networks.LOSS]
                    extra = [*flags, "--split", "leave-network-out", "--test-network", held, *loss]
                    if kind != "full":
                        extra += [SHARES[kind], f"{fraction:g}"]
                    argv = train_argv(name, seed, folder, [args.networks_data], args.curve_epochs, extra=extra)
                    out.append({"axis": "network", "held": held, "model": model, "shipped": False, "seed": seed,
                                "share": kind, "fraction": fraction, "out": folder, "argv": argv})
    return out


def run(args) -> Dict[str, Any]:
    if args.networks_data is None:
        from datasets.networks import default_dataset

        args.networks_data = os.path.relpath(default_dataset())
    summary = bench_networks.dataset_summary(args.networks_data)
    digest = bench_networks.dataset_digest(args.networks_data)
    planned = [dict(job, data=digest) for job in jobs(args)]
    log(f"learning curves: {len(planned)} training runs")
    stem = PREFIX + bench_networks.dataset_name(args.networks_data)
    results = run_many(planned, args.parallel, args.device, os.path.join(args.results, stem + KEPT_SUFFIX))
    rows = bench_networks.add_scores(bench_networks.result_rows(results), summary)
    for row, job in zip(rows, results):
        train = job["metrics"].get("run", {})
        row.update(share=job["share"], fraction=job["fraction"], train_samples=train.get("train_samples"))
    out = {"rows": rows, "dataset": args.networks_data,
           "protocol": {"epochs": args.curve_epochs, "seeds": list(args.curve_seeds), "models": args.curve_models,
                        "networks": args.curve_networks, "loss": bench_networks.LOSS}}
    os.makedirs(args.results, exist_ok=True)
    write_json(os.path.join(args.results, f"{stem}.json"), out)
    columns = ["held", "model", "seed", "share", "fraction", "train_samples", *CURVE_METRICS]
    write_csv(os.path.join(args.results, f"{stem}.csv"), columns, [[r.get(k) for k in columns] for r in rows])
    return out


def load_results(results: str) -> List[Dict[str, Any]]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, f"{PREFIX}*.json"))):
        with open(path, encoding="utf-8") as f:
            found.append(json.load(f))
    return found


def curve_table(res: Dict[str, Any]) -> List[str]:
    """Per model and point: the means over the held-out networks (each a mean over seeds),
    ± the std of the per-network means; the training records the point kept (mean)."""
    points: Dict[tuple, Dict[str, List[Dict[str, Any]]]] = {}
    for r in res["rows"]:
        points.setdefault((r["model"], r["share"], r["fraction"]), {}).setdefault(r["held"], []).append(r)
    body = []
    for (model, kind, fraction), by_net in sorted(points.items(), key=lambda kv: (kv[0][0], kv[0][1] != "full",
                                                                                  kv[0][1], kv[0][2])):
        cells = []
        for metric in CURVE_METRICS:
            mean, std, n = mean_std(mean_std(r.get(metric) for r in rs)[0] for rs in by_net.values())
            cells.append(fmt(mean, metric, std if n > 1 else None))
        samples = mean_std(r.get("train_samples") for rs in by_net.values() for r in rs)[0]
        label = "all" if kind == "full" else f"{fraction:g} of the {kind}"
        body.append([model, label, "–" if samples is None else f"{samples:,.0f}", len(by_net), *cells])
    header = ["model", "training data", "training records", "networks", "τ", "top-1 score", "top-5 score"]
    return [markdown_table(header, body, "llrrrrr"), ""]


def report_section(res: Dict[str, Any]) -> List[str]:
    p = res["protocol"]
    return [f"## Learning curves (`{bench_networks.dataset_name(res['dataset'])}`, leave one network out)", "",
            f"`python -m benchmarks.learning_curves`: each held-out network ({', '.join(p['networks'])}) ranked "
            f"by models trained on a seeded share of the other networks' tasks (whole), or of every training "
            f"task's records; {bench_networks.epochs_phrase(p['epochs'], p['models'])}, "
            f"seeds {', '.join(map(str, p['seeds']))}, loss {p['loss']} "
            f"(a model's own recipe where it has one). Cells: means over the networks ± the std of the "
            f"per-network means.", "", *curve_table(res)]


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.learning_curves", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks-data", default=None,
                    help="a networks dataset (default: the shipped one with the most tasks)")
    add_arguments(ap)
    add_run_options(ap)
    args = ap.parse_args(argv)
    return run_and_report(args, run, report_section)


if __name__ == "__main__":
    sys.exit(main())
