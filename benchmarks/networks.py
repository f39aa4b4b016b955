"""Cross-network and cross-operator generalisation on the MetaSchedule networks dataset.

    python -m benchmarks.networks [--networks-data datasets/networks_x86] [--networks-models gcn sage mlp curve-mlp xgb]
        [--held-networks bert ...] [--held-kinds softmax ...] [--networks-epochs 20] [--networks-seeds 0 1 2]
        [--combined-models gcn xgb] [--runs runs/bench] [--results docs/results] [--parallel 1]

For every held-out network (`--split leave-network-out --test-network N`) and every held-out
operator kind (`--split leave-op-kind-out --test-op-kind K`), each model is trained on the
rest and scored on the held-out tasks: Kendall τ, top-1 / top-5 slowdown and top-5 recall
(means over the held-out tasks that have a value), beside the noise ceiling of those tasks
(mean per-task τ between the dataset's two passes, `datasets/networks_x86/summary.json`).
Then, per held-out network, the `--combined-models` are trained again with the shipped
conv2d-template dataset added to the training data (`--data NETWORKS shipped`: its
workloads belong to no network, so they only ever train), to see whether the templates help.

Every model trains with `--networks-loss` (default `pairwise-hinge`: only the order of a
task's schedules matters to a tuner, and 83% of the log-runtime variance of this dataset is
between tasks, which a regression loss spends its fit on). Default held-out kinds: every kind of the dataset with at least one task of more than 5
valid records (so that τ and top-5 recall have a value); the other kinds (e.g. elementwise
tasks whose design space holds one schedule) are listed in the results with their record
counts, never dropped silently. Every run is repeated for each of `--networks-seeds`; the
tables show the mean over seeds (± the standard deviation with more than one). Runs go to
RUNS/networks/<split>-<held-out>-<model>-seed<S>[-with-shipped] (a finished run with the
same command line is reused); results to RESULTS/networks.json and networks.csv, and a
section of docs/RESULTS.md (`report_section`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, SEED, cli, fmt, locked_outputs, log, markdown_table,
                     mean_std, model_name, output_folder, run_many, train_argv, write_csv, write_json)

MODELS = ["gcn", "sage", "mlp", "curve-mlp", "xgb"]
METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "top5_recall"]
NETWORKS = ["resnet50", "mobilenet_v2", "bert", "vit"]
SPLITS = {"network": ("leave-network-out", "--test-network"), "kind": ("leave-op-kind-out", "--test-op-kind")}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--networks-data", default=os.path.join("datasets", "networks_x86"))
    ap.add_argument("--networks-models", nargs="+", type=model_name, default=MODELS)
    ap.add_argument("--held-networks", nargs="+", default=NETWORKS)
    ap.add_argument("--held-kinds", nargs="+", default=None, help="default: every kind with a task of > 5 records")
    ap.add_argument("--networks-epochs", type=COUNT, default=20)
    ap.add_argument("--networks-seeds", nargs="+", type=SEED, default=[0])
    from simulator.losses import LOSSES

    ap.add_argument("--networks-loss", default="pairwise-hinge", choices=LOSSES.names(),
                    help="training loss of every model (a ranking loss makes xgb rank:pairwise)")
    ap.add_argument("--combined-models", nargs="*", type=model_name, default=["gcn", "xgb"],
                    help="trained again with the shipped conv2d dataset added (none: skip)")


def dataset_summary(data: str) -> Dict[str, Any]:
    """The dataset folder's summary.json (datasets.ms_ship): its task table and ceilings."""
    path = os.path.join(data, "summary.json")
    if not os.path.exists(path):
        raise SystemExit(f"{path}: missing (make the dataset folder with python -m datasets.ms_ship)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def default_kinds(summary: Dict[str, Any]) -> List[str]:
    return sorted({t["kind"] for t in summary["tasks"] if t["valid"] > 5})


def unheld_kinds(summary: Dict[str, Any]) -> Dict[str, Dict[str, int]]:
    """Kinds no task of which has more than 5 valid records: they cannot be held out (no τ
    or top-5 recall on them) and only ever train; with their task and record counts."""
    held = set(default_kinds(summary))
    out: Dict[str, Dict[str, int]] = {}
    for t in summary["tasks"]:
        if t["kind"] not in held:
            row = out.setdefault(t["kind"], {"tasks": 0, "valid": 0, "max_per_task": 0})
            row["tasks"] += 1
            row["valid"] += t["valid"]
            row["max_per_task"] = max(row["max_per_task"], t["valid"])
    return out


def held_tasks(summary: Dict[str, Any], axis: str, held: str) -> List[Dict[str, Any]]:
    if axis == "network":
        return [t for t in summary["tasks"] if held in t["networks"]]
    return [t for t in summary["tasks"] if t["kind"] == held]


def ceiling_of(tasks: Sequence[Dict[str, Any]], key: str = "tau") -> Dict[str, Any]:
    """Mean per-task τ between the passes over the tasks that have one (None: none has)."""
    taus = [t[key] for t in tasks if t.get(key) is not None]
    return {"tau": sum(taus) / len(taus) if taus else None, "tasks": len(taus)}


def jobs(args, summary: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every training run: (axis, held-out, model, shipped added or not)."""
    kinds = args.held_kinds or default_kinds(summary)
    runs = os.path.join(args.runs, "networks")
    out = []
    plan = [("network", n, m, False) for n in args.held_networks for m in args.networks_models]
    plan += [("network", n, m, True) for n in args.held_networks for m in args.combined_models]
    plan += [("kind", k, m, False) for k in kinds for m in args.networks_models]
    for seed in args.networks_seeds:
        for axis, held, model, shipped in plan:
            split, flag = SPLITS[axis]
            folder = os.path.join(runs, f"{split}-{held}-{model}-seed{seed}" + ("-with-shipped" if shipped else ""))
            data = [args.networks_data] + (["shipped"] if shipped else [])
            argv = train_argv(model, seed, folder, data, args.networks_epochs,
                              extra=["--split", split, flag, held, "--loss", args.networks_loss])
            out.append({"axis": axis, "held": held, "model": model, "shipped": shipped, "seed": seed,
                        "out": folder, "argv": argv})
    return out


def _clean(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and v == v and abs(v) != float("inf") else None


def result_rows(results: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows = []
    for r in results:
        test = r["metrics"].get("test", {})
        rows.append({"axis": r["axis"], "held": r["held"], "model": r["model"], "shipped": r["shipped"],
                     "seed": r["seed"], "tasks": test.get("kendall_tau", {}).get("count", 0),
                     "samples": sum(int(v) for k, v in r["metrics"].get("run", {}).items() if k.endswith("_samples")),
                     **{m: _clean(test.get(m, {}).get("mean")) for m in METRICS},
                     "seconds": _clean(r["metrics"].get("bench", {}).get("seconds")),
                     "command": "python -m simulator.train " + " ".join(r["argv"])})
    return rows


def run(args) -> Dict[str, Any]:
    summary = dataset_summary(args.networks_data)
    planned = jobs(args, summary)
    log(f"networks: {len(planned)} training runs")
    rows = result_rows(run_many(planned, args.parallel))
    ceilings = {f"{axis}:{held}": {**ceiling_of(held_tasks(summary, axis, held)),
                                   "corrected": ceiling_of(held_tasks(summary, axis, held), "tau_corrected")["tau"]}
                for axis, held in {(r["axis"], r["held"]) for r in rows}}
    out = {"rows": rows, "ceilings": ceilings, "dataset": args.networks_data,
           "agreement_raw": summary.get("agreement_raw"), "agreement_corrected": summary.get("agreement_corrected"),
           "not_held_kinds": unheld_kinds(summary),
           "protocol": {"epochs": args.networks_epochs, "seeds": list(args.networks_seeds), "loss": args.networks_loss,
                        "models": args.networks_models, "combined_models": args.combined_models,
                        "valid_records": sum(t["valid"] for t in summary["tasks"]), "tasks": len(summary["tasks"])}}
    os.makedirs(args.results, exist_ok=True)
    write_json(os.path.join(args.results, "networks.json"), out)
    columns = ["axis", "held", "model", "shipped", "seed", "tasks", *METRICS]
    write_csv(os.path.join(args.results, "networks.csv"), columns, [[r[k] for k in columns] for r in rows])
    return out


# ---------------------------------------------------------------- report
def seed_means(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per (axis, held-out, model, shipped): each metric's (mean, std, seeds) over the
    seeds that gave a value (rows of a results file without seeds count as one seed)."""
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["axis"], r["held"], r["model"], r["shipped"]), []).append(r)
    return [{"axis": a, "held": h, "model": m, "shipped": sh, "tasks": max(r["tasks"] for r in rs),
             "seeds": len(rs), **{k: mean_std(r[k] for r in rs) for k in METRICS}}
            for (a, h, m, sh), rs in groups.items()]


def _cell(stat: tuple, metric: str) -> str:
    mean, std, n = stat
    return fmt(mean, metric, std if n > 1 else None)


def _table(res: Dict[str, Any], axis: str, shipped: bool) -> List[str]:
    rows = [r for r in seed_means(res["rows"]) if r["axis"] == axis and r["shipped"] == shipped]
    helds = list(dict.fromkeys(r["held"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    header = ["held out", "tasks", "ceiling τ (raw / corrected)"] + [f"{m} τ" for m in models] + \
             [f"{m} top-1 / top-5 slowdown, top-5 recall" for m in models]
    out = []
    for held in helds:
        by_model = {r["model"]: r for r in rows if r["held"] == held}
        c = res["ceilings"].get(f"{axis}:{held}", {})
        ceiling = f"{fmt(c.get('tau'), 'kendall_tau')} / {fmt(c.get('corrected'), 'kendall_tau')} ({c.get('tasks', 0)})"
        tasks = max((r["tasks"] for r in by_model.values()), default=0)
        out.append([held, tasks, ceiling]
                   + [_cell(by_model[m]["kendall_tau"], "kendall_tau") if m in by_model else "–" for m in models]
                   + [" / ".join(fmt(by_model[m][k][0], k) for k in ("top1_slowdown", "top5_slowdown", "top5_recall"))
                      if m in by_model else "–" for m in models])
    return [markdown_table(header, out, "l" + "r" * (len(header) - 1)), ""]


def _combined(res: Dict[str, Any]) -> List[str]:
    means = seed_means(res["rows"])
    alone = {(r["held"], r["model"]): r for r in means if r["axis"] == "network" and not r["shipped"]}
    rows = []
    for r in (r for r in means if r["shipped"]):
        base = alone.get((r["held"], r["model"]))
        if base is None:
            continue
        before, after = base["kendall_tau"][0], r["kendall_tau"][0]
        delta = None if before is None or after is None else after - before
        rows.append([r["held"], r["model"], _cell(base["kendall_tau"], "kendall_tau"),
                     _cell(r["kendall_tau"], "kendall_tau"), "–" if delta is None else f"{delta:+.3f}",
                     fmt(base["top1_slowdown"][0], "top1_slowdown"), fmt(r["top1_slowdown"][0], "top1_slowdown")])
    if not rows:
        return []
    return ["**Networks alone vs with the shipped conv2d templates added to training** (held-out network; "
            "the shipped ResNet-18 conv2d workloads belong to no network, so they only ever train):", "",
            markdown_table(["held out", "model", "τ alone", "τ + shipped", "Δτ", "top-1 alone", "top-1 + shipped"],
                           rows, "llrrrrr"), ""]


def _not_held(res: Dict[str, Any]) -> List[str]:
    kinds = res.get("not_held_kinds") or {}
    if not kinds:
        return []
    parts = [f"{k} ({v['tasks']} tasks, {v['valid']} records, at most {v['max_per_task']} per task)"
             for k, v in sorted(kinds.items())]
    return [f"Not held out (no task with more than 5 valid records, so no τ or top-5 recall; they only "
            f"ever train): {', '.join(parts)}.", ""]


def _protocol_line(res: Dict[str, Any]) -> str:
    p = res.get("protocol", {})
    seeds = p.get("seeds", [p["seed"]] if "seed" in p else [])
    used = max((r.get("samples", 0) for r in res["rows"] if not r["shipped"]), default=0)
    spread = "mean ± standard deviation over the seeds" if len(seeds) > 1 else "one seed"
    return (f"`{res['dataset']}`: {p.get('tasks')} tasks, {p.get('valid_records')} valid records now; the runs "
            f"below trained and scored on {used} samples of it. Seeds {', '.join(map(str, seeds))} ({spread}; "
            f"slowdowns and recall are means over seeds), {p.get('epochs')} epochs, loss `{p.get('loss', 'huber')}` "
            f"(a ranking loss within each task: only the order of a task's schedules is scored; xgb then "
            f"uses rank:pairwise), every run pinned to one core "
            f"(`python -m benchmarks.networks`; every command in `docs/results/networks.json`). Metrics are "
            f"means over the held-out tasks with a value; the ceiling is the mean per-task τ between the "
            f"dataset's two measuring passes over those tasks (raw / drift-corrected; tasks with a τ in "
            f"brackets).")


def report_section(res: Dict[str, Any]) -> List[str]:
    raw, cor = res.get("agreement_raw") or {}, res.get("agreement_corrected") or {}
    lines = ["## Cross-network and cross-operator generalisation (MetaSchedule networks dataset)", "",
             _protocol_line(res), ""]
    if raw.get("tasks"):
        lines += [f"Whole dataset, pass 1 vs pass 2: mean τ {fmt(raw.get('mean_tau'), 'kendall_tau')} raw, "
                  f"{fmt(cor.get('mean_tau'), 'kendall_tau')} drift-corrected; median |Δt|/t "
                  f"{fmt(raw.get('median_rel_diff'), 'mape')} raw, {fmt(cor.get('median_rel_diff'), 'mape')} "
                  f"corrected ({raw.get('records')} records of {raw.get('tasks')} tasks re-measured).", ""]
    else:
        lines += ["No second (re-measure) pass in this dataset yet: no ceiling.", ""]
    lines += ["**Leave one network out**", "", *_table(res, "network", False),
              "**Leave one operator kind out**", "", *_table(res, "kind", False), *_not_held(res), *_combined(res)]
    return lines


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.networks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--runs", type=output_folder, default=DEFAULT_RUNS)
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=1, help="training runs at a time (1 thread each)")
    args = ap.parse_args(argv)
    with locked_outputs(args.results, args.runs):
        res = run(args)
    print("\n".join(report_section(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
