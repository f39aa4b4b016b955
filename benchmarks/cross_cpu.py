"""What a user with new hardware gets: a cost model pre-trained on CPU A ranking schedules on
CPU B, as TenSet and TLP ask it, against a model trained on B alone.

    python -m benchmarks.cross_cpu [--source datasets/networks_rocketlake]
        [--target datasets/networks_znver4] [--ks 0 16 32] [--seeds 0 1 2]

The tasks are the computations both datasets measured (workload keys without their
target part), with at least `--min-records` valid records on B. Per task and seed, B's
records are shuffled; the first k fine-tune the model (one online update of
`--update-steps` steps, as `simulator.tune`'s gnn does after a round), and the records
from position max(ks) on are the test set — the same for every k, so the columns compare.
Every task starts from the unchanged model.

Models: `pre-trained on A` — A's shipped pre-trained cost model (`pretrained/gcn.pt`,
trained on all of A, what a user gets); `B alone` — trained with the same recipe on B's
records of every *other* task (`simulator.train --split cross-workload --test-workloads
…`), so neither model has seen a test record and only A's has seen the computation.

Metrics per task: Kendall τ, top-1 and top-5 slowdown; over the tasks: mean τ and TenSet's
top-k score (weights: the task's calls in B's networks). Means ± std over seeds go to
`results/cross_cpu_<A>_<B>.json` and the report's section.

Tasks hold ~64 records each on this project's datasets, so k stops at 32 (k = 64 would
leave nothing to test on); `--ks` says otherwise where the data allows.
"""
from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from extract.cli import Int
from extract.tir.workload_key import computation

from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, SEED, dies_with_parent, log, markdown_table, mean_std,
                     shown_command, write_json)

RESULT = "cross_cpu_{source}_{target}.json"   # one per (source CPU, target CPU)
MODELS = ("pre-trained on A", "B alone")
MIN_SHARED = 40     # tasks both CPUs measured, below which the comparison is not made (the bar)


def shared_tasks(source: str, target: str, min_records: int) -> List[Dict[str, Any]]:
    """B's summary rows of the computations A measured too, with ≥ `min_records` valid on B."""
    from datasets.networks import summary_tasks

    measured_on_a = {computation(r["key"]) for r in summary_tasks(source) if r["valid"] > 0}
    return [r for r in summary_tasks(target) if computation(r["key"]) in measured_on_a and r["valid"] >= min_records]


def train_alone(target: str, test_keys: Sequence[str], out: str, epochs: int) -> str:
    """B alone: the pre-training recipe on B's other tasks (a finished run is reused)."""
    if os.path.exists(os.path.join(out, "metrics.json")):
        return out
    argv = [sys.executable, "-m", "simulator.train", "--data", target, "--split", "cross-workload",
            "--test-workloads", *test_keys, "--model", "gcn", "--loss", "pairwise-hinge", "--epochs", str(epochs),
            "--seed", "0", "--threads", "1", "--out", out, "--overwrite"]
    log(f"cross-cpu: training on B alone ({len(test_keys)} tasks held out) → {out}")
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=dies_with_parent())
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"cross-cpu: training on B alone failed ({last}); command: {' '.join(argv[1:])}")
    return out


def split_task(samples: Sequence[Any], seed: int, ks: Sequence[int]) -> Dict[int, Any]:
    """k → (fine-tuning samples, test samples) of one task, the test set shared by every k."""
    order = np.random.default_rng(seed).permutation(len(samples))
    shuffled = [samples[i] for i in order]
    test = shuffled[max(ks):]
    return {k: (shuffled[:k], test) for k in ks}


def score_task(trained: Any, fine: Sequence[Any], test: Sequence[Any], steps: int) -> Dict[str, float]:
    """A fresh copy of the trained model, fine-tuned on `fine`, scored on `test`."""
    from simulator.metrics import evaluate

    model = copy.deepcopy(trained)
    if fine:
        model.update(list(fine), steps)
    pred = model.predict(list(test))
    true = np.log([float(np.mean(s.runtimes)) for s in test])
    result = evaluate(pred, true, [test[0].group] * len(test), ["kendall_tau", "top1_slowdown", "top5_slowdown",
                                                                 "best_ms"])
    return {name: result[name]["mean"] for name in result}


def task_scores(paths: Dict[str, str], by_task: Dict[str, List[Any]], args) -> List[Dict[str, Any]]:
    """One row per (model, k, seed, task)."""
    from simulator.models.costmodel import load_trained

    models = {name: load_trained(path)[0] for name, path in paths.items()}
    rows = []
    for seed in args.seeds:
        for task, samples in sorted(by_task.items()):
            for k, (fine, test) in split_task(samples, seed, args.ks).items():
                for name, model in models.items():
                    rows.append({"model": name, "k": k, "seed": seed, "task": task,
                                 **score_task(model, fine, test, args.update_steps)})
        log(f"cross-cpu: seed {seed} scored")
    return rows


def summarize(rows: Sequence[Dict[str, Any]], weights: Dict[str, float]) -> List[Dict[str, Any]]:
    """Per (model, k): mean τ and TenSet's top-1 / top-5 score, mean ± std over seeds."""
    from simulator.metrics import topk_score

    out = []
    for model in MODELS:
        for k in sorted({r["k"] for r in rows}):
            per_seed = {"kendall_tau": [], "top1_score": [], "top5_score": []}
            for seed in sorted({r["seed"] for r in rows}):
                mine = [r for r in rows if r["model"] == model and r["k"] == k and r["seed"] == seed]
                if not mine:
                    continue
                per_seed["kendall_tau"].append(np.mean([r["kendall_tau"] for r in mine if r["kendall_tau"] is not None]))
                for n in (1, 5):
                    per_seed[f"top{n}_score"].append(topk_score([r["best_ms"] for r in mine],
                                                                [r[f"top{n}_slowdown"] for r in mine],
                                                                [weights[r["task"]] for r in mine]))
            if per_seed["kendall_tau"]:
                out.append({"model": model, "k": k, **{m: mean_std(v) for m, v in per_seed.items()}})
    return out


def run(args) -> Dict[str, Any]:
    from datasets import load_collection
    from datasets.networks import dataset_cpu, pretrained_path

    tasks = shared_tasks(args.source, args.target, args.min_records)
    if len(tasks) < args.min_shared:
        raise SystemExit(f"cross-cpu: {args.source} and {args.target} share {len(tasks)} tasks with ≥ "
                         f"{args.min_records} records on the target; at least {args.min_shared} are needed "
                         f"(measure more: python -m datasets.measure)")
    keys = [t["key"] for t in tasks]
    alone = train_alone(args.target, keys, os.path.join(args.runs, "cross_cpu", "target-alone"), args.epochs)
    models = {MODELS[0]: str(pretrained_path(args.source)), MODELS[1]: alone}
    wanted = set(keys)
    by_task: Dict[str, List[Any]] = {}
    for s in load_collection(args.target, progress=False).samples:
        if s.group in wanted:
            by_task.setdefault(s.group, []).append(s)
    rows = task_scores(models, by_task, args)
    result = {"source": args.source, "target": args.target, "source_cpu": dataset_cpu(args.source),
              "target_cpu": dataset_cpu(args.target), "tasks": len(by_task), "ks": list(args.ks),
              "seeds": list(args.seeds), "update_steps": args.update_steps, "test_records": sum(
                  len(v) - max(args.ks) for v in by_task.values()),
              "summary": summarize(rows, {t["key"]: float(t["weight"]) for t in tasks}), "rows": rows,
              "command": "python -m benchmarks.cross_cpu " + " ".join(args.argv)}
    write_json(os.path.join(args.results, RESULT.format(source=result["source_cpu"], target=result["target_cpu"])),
               result)
    return result


def report_section(results: str) -> List[str]:
    """The report's section, one table per pair of CPUs (empty without results)."""
    lines = []
    for name in sorted(glob.glob(os.path.join(results, RESULT.format(source="*", target="*")))):
        with open(name, encoding="utf-8") as f:
            lines += pair_table(json.load(f))
    return lines


def pair_table(res: Dict[str, Any]) -> List[str]:
    def cell(v):
        return "–" if v[0] is None else f"{v[0]:.3f} ± {v[1]:.3f}"

    table = [[r["model"], str(r["k"]), cell(r["kendall_tau"]), cell(r["top1_score"]), cell(r["top5_score"])]
             for r in res["summary"]]
    return [f"## New hardware: pre-trained on {res['source_cpu']}, ranking on {res['target_cpu']}", "",
            f"    {shown_command(res['command'])}", "",
            f"{res['tasks']} tasks both CPUs measured; per task, k of {res['target_cpu']}'s records fine-tune "
            f"the model ({res['update_steps']} steps) and the same {res['test_records']} records (all tasks) are "
            f"ranked for every k; mean ± std over seeds {res['seeds']}. `B alone` is trained on "
            f"{res['target_cpu']}'s other tasks with the same recipe.", "",
            markdown_table(["model", "k", "τ", "top-1 score", "top-5 score"], table, "lrrrr"), ""]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cross_cpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.join("datasets", "networks_rocketlake"))
    ap.add_argument("--target", default=os.path.join("datasets", "networks_znver4"))
    ap.add_argument("--ks", nargs="+", type=Int(0), default=[0, 16, 32])
    ap.add_argument("--seeds", nargs="+", type=SEED, default=[0, 1, 2])
    ap.add_argument("--min-records", type=COUNT, default=48)
    ap.add_argument("--min-shared", type=COUNT, default=MIN_SHARED, help="fewer shared tasks: no comparison")
    ap.add_argument("--update-steps", type=COUNT, default=8)
    ap.add_argument("--epochs", type=COUNT, default=40)
    ap.add_argument("--runs", default=DEFAULT_RUNS)
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if max(args.ks) >= args.min_records:
        raise SystemExit(f"--ks must be below --min-records ({args.min_records}), to leave a test set")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
