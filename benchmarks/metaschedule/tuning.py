"""MetaSchedule tuning of held-out operators with each cost model, measured here: best latency
against trials, and rank quality (AutoTVM's conv2d tuning is `benchmarks.tuning`).

    python -m benchmarks.metaschedule.tuning --pretrain-data DB_FOLDER ... [--operators ...] [--trials 128]
        [--points 64 128] [--seeds 0 1 2] [--cost-models gnn tvm-xgb tvm-xgb-pretrained random gnn-filter]
        [--filter-keep 0.25]
        [--deadline-min 40] [--runs runs/ms_tuning] [--results docs/results]

Also the `ms-tuning` stage of `python -m benchmarks.all`.

1. **Pre-training data.** `--pretrain-data`: MetaSchedule databases of real networks
   (`datasets/networks_<cpu>`). A snapshot of them is taken first (every record, or at most
   `--pretrain-records` records of each database, evenly spaced in file order so that every
   workload contributes; a last line still being written is left out), so every cost model
   pre-trains on the same records.
2. **Held-out operators** (`--operators`, `extract.tir.workloads` specs): refused if their
   workload key is among the pre-training data's (so "not in the pre-training data" is
   checked, not assumed).
3. **Pre-training.** gnn: `simulator.train` (gcn, random split, `--epochs`, `--pretrain-loss`:
   the ranking recipe of `benchmarks.networks`, pairwise-hinge for 30 epochs by default) on the
   snapshot's graph samples; tvm-xgb-pretrained: TenSet's recipe (`simulator.metaschedule.rivals.
   pretrain_xgb`: MetaSchedule's XGBModel on PerStoreFeature rows of the same records).
   Everything made from one pre-training (the snapshot, both models, every tuning run) lives
   in a subfolder of `--runs` named by a digest of its data and recipe (`pretrain-data`,
   `--pretrain-records`, `--epochs`, `--pretrain-loss`; `pretraining.json` says which), so
   a re-run reuses it only under the same pre-training.
4. **Tuning.** For each seed, operator and cost model, one `simulator.metaschedule.tune.tune` run of
   `--trials` trials (64 per round, MetaSchedule's evolutionary search defaults), one
   builder for all runs; the best latency after each of `--points` trials is read from the
   run's best-so-far history (so the 64-trial point of a 128-trial run is its state after
   its first round). `gnn-filter` is the pre-trained gnn with two-stage
   scoring (`GNNCostModel(filter_keep=--filter-keep)`, docs/ms_features.md): the
   tuning-quality check of the filter and its share of tuning time. Runs are ordered
   seed-major, and a run is not started when `--deadline-min` minutes would be exceeded at
   the mean run time so far: what was cut is listed in the results. A finished run (its
   `tune_summary.json`) is reused; a gnn's only while it was tuned under today's gnn defaults
   (`simulator.metaschedule.cost_model.gnn_defaults`, recorded in its summary), else it is
   tuned again.
5. **Rank quality.** Every successful record of the held-out operators' runs (all cost
   models and seeds, one point per distinct schedule) scored offline by the pre-trained gnn,
   the pre-trained xgb and random scores: Kendall τ per operator and top-k recall (how many
   of the k fastest the model's k best hold).

Outputs: `ms_tuning.json` and `ms_tuning.png` (best latency against trials per operator,
mean over seeds with min–max band) in `--results`; the section of docs/RESULTS.md comes
from `report_section`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from extract.cli import FRACTION, POSITIVE

from ..common import COUNT, SEED, log, loss_name, not_todays_gnn, write_json

OPERATORS = ["dense_512x512x512", "batch_matmul_16x96x96x48"]
GNN_FILTER = "gnn-filter"   # the pre-trained gnn with two-stage scoring (--filter-keep)
COST_MODELS = ["gnn", "tvm-xgb", "tvm-xgb-pretrained", "random", GNN_FILTER]
GNNS = ("gnn", GNN_FILTER)   # the cost models that are the simulator (tuned under gnn_defaults)
RESULT = "ms_tuning.json"
PRETRAIN_LOSS, PRETRAIN_EPOCHS = "pairwise-hinge", 30   # the ranking recipe (docs/RANKING.md)
PRETRAIN_SEED = 0   # one gnn checkpoint for every tuning seed: the seeds vary the search only


def _default_pretrain_data() -> str:
    from datasets.networks import FIRST_PASS, default_dataset

    return os.path.relpath(default_dataset() / FIRST_PASS)


def add_arguments(ap, prefix: str = "ms-") -> None:
    ap.add_argument(f"--{prefix}pretrain-data", nargs="+", default=[], metavar="DB",
                    help="MetaSchedule databases to pre-train on (default: pass 1 of the shipped networks "
                         "dataset with the most tasks; pass 2 re-measures the same schedules)")
    ap.add_argument(f"--{prefix}pretrain-records", type=COUNT, default=None,
                    help="at most this many records per database in the snapshot (default: all)")
    ap.add_argument(f"--{prefix}operators", nargs="+", default=OPERATORS)
    ap.add_argument(f"--{prefix}cost-models", nargs="+", default=COST_MODELS,
                    choices=COST_MODELS)
    ap.add_argument(f"--{prefix}filter-keep", type=FRACTION, default=0.25,
                    help=f"{GNN_FILTER}: share of each round's candidates the first stage passes to the gnn")
    ap.add_argument(f"--{prefix}trials", type=COUNT, default=256)
    ap.add_argument(f"--{prefix}points", nargs="+", type=COUNT, default=[64, 128, 256])
    ap.add_argument(f"--{prefix}trials-per-iter", type=COUNT, default=64)
    ap.add_argument(f"--{prefix}seeds", nargs="+", type=SEED, default=[0, 1, 2])
    ap.add_argument(f"--{prefix}epochs", type=COUNT, default=PRETRAIN_EPOCHS, help="gnn pre-training epochs")
    ap.add_argument(f"--{prefix}pretrain-loss", type=loss_name, default=PRETRAIN_LOSS,
                    help="gnn pre-training loss (simulator.train --loss; a ranking loss on batches grouped by task)")
    ap.add_argument(f"--{prefix}deadline-min", type=POSITIVE, default=None, help="start no run past this many minutes")
    ap.add_argument(f"--{prefix}runs", default=os.path.join("runs", "ms_tuning"))
    ap.add_argument(f"--{prefix}top-k", type=COUNT, default=8)


def _opt(args, name: str, prefix: str):
    return getattr(args, (prefix + name).replace("-", "_"))


# ---------------------------------------------------------------- data
def pretraining_folder(runs: str, sources: Sequence[str], records: Optional[int], epochs: int, loss: str) -> str:
    """`runs`' subfolder for one pre-training (its snapshot, the pre-trained models and the
    tuning runs that started from them), named by a digest of its data and recipe and
    described by its `pretraining.json`: a run is reused only under the same pre-training."""
    import hashlib

    choice = {"sources": [os.path.normpath(s) for s in sources], "records_per_database": records,
              "gnn_epochs": epochs, "gnn_loss": loss}
    digest = hashlib.sha256(json.dumps(choice, sort_keys=True).encode()).hexdigest()[:10]
    folder = os.path.join(runs, f"pretraining-{digest}")
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, "pretraining.json"), choice)
    return folder


def snapshot(databases: Sequence[str], out: str, records: Optional[int] = None) -> List[str]:
    """At most `records` complete lines of each database's records, evenly spaced in file
    order (every workload of the database contributes; workloads copied whole), as plain
    JSON files (the shipped databases are gzipped)."""
    from extract.metaschedule.database import RECORD_FILE, WORKLOAD_FILE, database_files, database_lines, find_databases

    found = [db for path in databases for db in find_databases(path)]
    if not found:
        raise SystemExit(f"no MetaSchedule database in {', '.join(databases)}")
    copies = []
    for i, db in enumerate(found):
        dst = os.path.join(out, f"{i}-{os.path.basename(os.path.normpath(db))}")
        if not os.path.exists(os.path.join(dst, RECORD_FILE)):
            os.makedirs(dst, exist_ok=True)
            workloads, records_file = database_files(db)
            with open(os.path.join(dst, WORKLOAD_FILE), "w", encoding="utf-8") as f:
                f.writelines(text + "\n" for _, text, _ in database_lines(workloads))
            lines = [text + "\n" for _, text, ended in database_lines(records_file) if ended]
            step = max(1, math.ceil(len(lines) / records)) if records else 1   # spread over all the workloads
            with open(os.path.join(dst, RECORD_FILE), "w", encoding="utf-8") as f:
                f.writelines(lines[::step])
        copies.append(dst)
    return copies


def pretrain_groups(databases: Sequence[str]) -> set:
    from extract.metaschedule.database import read_databases

    jobs, _ = read_databases(list(databases), skip_bad=True)
    return {job.group for job in jobs}


def held_out(operators: Sequence[str], groups: set, target) -> Dict[str, str]:
    """Operator → workload key; SystemExit if one is in the pre-training data."""
    from extract.tir.workload_key import workload_key
    from extract.tir.workloads import parse_workload

    keys = {op: workload_key(parse_workload(op).prim_func(), target) for op in operators}
    seen = [op for op, key in keys.items() if key in groups]
    if seen:
        raise SystemExit(f"not held out: {', '.join(seen)} are in the pre-training data")
    return keys


def pretrain_argv(snap: Sequence[str], runs: str, epochs: int, loss: str = PRETRAIN_LOSS) -> List[str]:
    """`simulator.train`'s command line for the gnn pre-training (its folder named by loss and epochs)."""
    gnn = os.path.join(runs, "pretrain", f"gnn-{loss}-e{epochs}")
    return ["--data", *snap, "--model", "gcn", "--split", "random", "--loss", loss, "--epochs", str(epochs),
            "--seed", str(PRETRAIN_SEED), "--threads", "1", "--out", gnn, "--cache-dir", os.path.join(runs, "cache")]


def pretrain(snap: Sequence[str], runs: str, epochs: int, loss: str = PRETRAIN_LOSS) -> Dict[str, str]:
    """The pre-trained gnn run folder and xgb tar (made unless present)."""
    from simulator import train
    from simulator.metaschedule.rivals import pretrain_xgb

    argv = pretrain_argv(snap, runs, epochs, loss)
    gnn = argv[argv.index("--out") + 1]
    if not os.path.exists(os.path.join(gnn, "metrics.json")):
        log(f"pre-training gnn on {len(snap)} databases ({loss}, {epochs} epochs)")
        code = train.main(argv)
        if code != 0:
            raise SystemExit(f"gnn pre-training failed ({code})")
    xgb = os.path.join(runs, "pretrain", "xgb.tar")
    if not os.path.exists(xgb):
        log("pre-training xgb (PerStoreFeature rows of the same records)")
        pretrain_xgb(list(snap), out=xgb)
    return {"gnn": gnn, "tvm-xgb-pretrained": xgb}


# ---------------------------------------------------------------- tuning
def best_at(history: Sequence[Dict[str, Any]], points: Sequence[int]) -> Dict[str, Optional[float]]:
    """Best latency after each of `points` trials (None: not reached, or nothing valid)."""
    out = {}
    for p in points:
        rows = [r for r in history if r["trial"] <= p]
        out[str(p)] = rows[-1]["best_s"] if len(rows) == p else None
    return out


def tune_one(op: str, name: str, seed: int, work: str, trials: int, per_iter: int, pre: Dict[str, str],
             measure, builder, runner, target, filter_keep: float = 0.25) -> Dict[str, Any]:
    from extract.tir.workloads import parse_workload
    from simulator.metaschedule import tune
    from simulator.metaschedule.cost_model import gnn_defaults, make_cost_model
    from simulator.metaschedule.resume import other_gnn_defaults

    summary = os.path.join(work, tune.SUMMARY)
    gnn = name in GNNS
    if os.path.exists(summary):
        with open(summary, encoding="utf-8") as f:
            done = json.load(f)
        stale = other_gnn_defaults(done.get("gnn_defaults")) if gnn else None
        if stale is None:
            return done
        log(f"{op} {name} seed {seed}: tuned again, its run was another gnn's ({stale})")
    if os.path.exists(work):
        shutil.rmtree(work)  # an unfinished run, or another gnn's
    if name == GNN_FILTER:
        model = make_cost_model("gnn", pre["gnn"], seed=seed, filter_keep=filter_keep)
    else:
        model = make_cost_model(name, pre.get(name), seed=seed)
    settings = tune.SearchSettings(trials=trials, trials_per_iter=per_iter, seed=seed)
    task = tune._task(op, parse_workload(op).prim_func(), target)
    result = tune.tune([task], target, model, work, settings, measure, builder, runner, quiet=True)
    out = {"workload": op, "cost_model": name, "seed": seed, **result.to_dict(),
           **({"gnn_defaults": gnn_defaults()} if gnn else {})}
    write_json(summary, out)
    return out


def tune_all(args, prefix, runs_dir: str, pre, target, deadline: Optional[float]) -> Dict[str, Any]:
    from extract.metaschedule.runner import MeasureConfig, make_builder, make_runner

    measure = MeasureConfig.for_machine()
    builder, runner = make_builder(measure, target), make_runner(measure)
    runs, cut, durations = [], [], []
    trials = _opt(args, "trials", prefix)
    try:
        for seed in _opt(args, "seeds", prefix):
            for op in _opt(args, "operators", prefix):
                for name in _opt(args, "cost-models", prefix):
                    mean = sum(durations) / len(durations) if durations else 0.0
                    if deadline is not None and time.time() + mean > deadline:
                        cut.append({"workload": op, "cost_model": name, "seed": seed})
                        continue
                    work = os.path.join(runs_dir, "tune", op, name, f"seed{seed}")
                    start = time.time()
                    s = tune_one(op, name, seed, work, trials, _opt(args, "trials-per-iter", prefix), pre,
                                 measure, builder, runner, target, _opt(args, "filter-keep", prefix))
                    durations.append(time.time() - start)
                    s["work_dir"] = work
                    s["best_at"] = best_at(s["history"], _opt(args, "points", prefix))
                    log(f"{op} {name} seed {seed}: " + ", ".join(
                        f"{p}: {_us(v)}" for p, v in s["best_at"].items()) + f" ({s['wall_s']:.0f} s)")
                    runs.append(s)
    finally:
        builder.pool.shutdown(wait=False)
    return {"runs": runs, "cut": cut, "measure": measure.as_dict()}


def _us(s: Optional[float]) -> str:
    return "–" if s is None else f"{s * 1e6:.1f} µs"


# ---------------------------------------------------------------- rank quality
def kendall_tau(score, runtime) -> Optional[float]:
    from scipy.stats import kendalltau

    tau = kendalltau(score, [-r for r in runtime]).statistic
    return float(tau) if tau is not None and math.isfinite(tau) else None


def topk_recall(score, runtime, k: int) -> Optional[float]:
    import numpy as np

    if len(runtime) < 2 * k:
        return None
    best = set(np.argsort(runtime)[:k].tolist())
    picked = set(np.argsort(-np.asarray(score))[:k].tolist())
    return len(best & picked) / k


def topk_slowdown(score, runtime, k: int) -> Optional[float]:
    """How much slower the fastest of the model's k best is than the fastest record
    (0: the best record is among its k picks)."""
    import numpy as np

    if len(runtime) < k:
        return None
    runtime = np.asarray(runtime, dtype=float)
    picked = np.argsort(-np.asarray(score))[:k]
    return float(runtime[picked].min() / runtime.min() - 1.0)


def xgb_scores(path: str, jobs) -> List[float]:
    from extract.metaschedule.database import target_of, workload_module
    from simulator.metaschedule.cost_model import feature_context, measure_candidate
    from simulator.metaschedule.rivals import load_pretrained_xgb

    model = load_pretrained_xgb(path)
    context = feature_context(workload_module(jobs[0].workload), target_of(jobs[0].target))
    return [float(x) for x in model.predict(context, [measure_candidate(j.schedule()) for j in jobs])]


def rank_quality(runs: Sequence[Dict[str, Any]], pre: Dict[str, str], k: int) -> Dict[str, Any]:
    """τ and top-k recall of each pre-trained cost model (and random) on the held-out records."""
    import numpy as np

    from extract.metaschedule.database import read_databases
    from extract.schedules import extract_many
    from simulator.models.costmodel import load_trained

    gnn = load_trained(pre["gnn"], "best_model")[0]
    out: Dict[str, Any] = {}
    for op in sorted({r["workload"] for r in runs}):
        jobs, report = read_databases([r["work_dir"] for r in runs if r["workload"] == op], skip_bad=True)
        failed: List[Any] = []
        samples, _ = extract_many(jobs, 1, False, False, failed=failed)
        lost = {f.source for f in failed}
        jobs = [j for j in jobs if j.source not in lost]
        unique = {s.name: (s, j) for s, j in zip(samples, jobs)}  # one point per schedule
        samples = [s for s, _ in unique.values()]
        jobs = [j for _, j in unique.values()]
        runtime = [float(s.runtimes[0]) for s in samples]
        scores = {"gnn (pre-trained)": (-np.asarray(gnn.predict(samples))).tolist(),
                  "tvm-xgb (pre-trained)": xgb_scores(pre["tvm-xgb-pretrained"], jobs),
                  "random": np.random.default_rng(0).random(len(samples)).tolist()}
        out[op] = {"records": len(samples), "skipped": len(report.bad_lines) + len(lost),
                   **{m: {"tau": kendall_tau(s, runtime), f"top{k}_recall": topk_recall(s, runtime, k),
                          f"top{k}_slowdown": topk_slowdown(s, runtime, k)} for m, s in scores.items()}}
    return out


# ---------------------------------------------------------------- summary, plot, report
def summarize(runs: Sequence[Dict[str, Any]], points: Sequence[int]) -> List[Dict[str, Any]]:
    """Per operator, cost model and point: mean/min/max best latency over the seeds run."""
    rows = []
    for op in sorted({r["workload"] for r in runs}):
        for name in dict.fromkeys(r["cost_model"] for r in runs):
            mine = [r for r in runs if r["workload"] == op and r["cost_model"] == name]
            for p in points:
                vals = [r["best_at"][str(p)] for r in mine if r["best_at"].get(str(p)) is not None]
                if vals:
                    rows.append({"workload": op, "cost_model": name, "trials": p, "seeds": len(vals),
                                 "mean_s": sum(vals) / len(vals), "min_s": min(vals), "max_s": max(vals),
                                 "cost_model_share": _mean([r["cost_model_share"] for r in mine])})
    return rows


def _mean(values):
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def plot(rows: Sequence[Dict[str, Any]], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 3.8), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for name in dict.fromkeys(r["cost_model"] for r in rows):
            mine = sorted((r for r in rows if r["workload"] == op and r["cost_model"] == name), key=lambda r: r["trials"])
            if not mine:
                continue
            x = [r["trials"] for r in mine]
            ax.plot(x, [r["mean_s"] * 1e6 for r in mine], marker="o", label=name)
            ax.fill_between(x, [r["min_s"] * 1e6 for r in mine], [r["max_s"] * 1e6 for r in mine], alpha=0.15)
        ax.set_title(op, fontsize=9)
        ax.set_xlabel("trials")
        ax.set_ylabel("best latency (µs)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report_section(results: str) -> List[str]:
    """The MetaSchedule tuning section of docs/RESULTS.md (empty without results)."""
    from ..common import markdown_table, shown_command

    path = os.path.join(results, RESULT)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        res = json.load(f)
    lines = ["## MetaSchedule tuning of held-out operators", "",
             f"    {shown_command(res['command'])}", "",
             f"Held-out operators (workload keys absent from the pre-training data, checked): "
             + ", ".join(f"`{op}`" for op in res["held_out"]) + f". Pre-training data: {res['pretrain']['records']} "
             f"records of {len(res['pretrain']['databases'])} MetaSchedule databases (snapshot of "
             f"{', '.join('`' + d + '`' for d in res['pretrain']['sources'])}). Seeds run: {res['seeds_run']}; "
             f"{len(res['cut'])} planned runs cut by the deadline.{_measured_on(res.get('machine'))} The gnn rows "
             f"of every seed tune from one checkpoint, pre-trained at seed {PRETRAIN_SEED}: the seeds vary the search, "
             f"not the pre-training (how far its seed alone moves the first picks: docs/ms_tune.md, *The width "
             f"the prior prefers is a seed's*). Best latency (µs, mean over seeds [min–max]):", ""]
    points = sorted({r["trials"] for r in res["summary"]})
    table = []
    for op in res["held_out"]:
        for name in dict.fromkeys(r["cost_model"] for r in res["summary"]):
            cells = {r["trials"]: r for r in res["summary"] if r["workload"] == op and r["cost_model"] == name}
            if cells:
                share = next(iter(cells.values()))["cost_model_share"]
                table.append([op, name] + [f"{cells[p]['mean_s'] * 1e6:.1f} [{cells[p]['min_s'] * 1e6:.1f}–"
                                           f"{cells[p]['max_s'] * 1e6:.1f}] ({cells[p]['seeds']})" if p in cells else "–"
                                           for p in points] + ["–" if share is None else f"{100 * share:.0f}%"])
    lines += [markdown_table(["operator", "cost model", *(f"{p} trials" for p in points), "cost model share"],
                             table), "", f"![MetaSchedule tuning]({res['figure']})", ""]
    goals = goal_lines(res["summary"]) + goal_lines(res["summary"], GNN_FILTER)
    if goals:
        lines += ["The tuning goals, on the means over the seeds (gnn reaches tvm-xgb's best at the last point by half "
                  "as many trials; gnn ≥ 10% faster than tvm-xgb at the first point):", "", *goals, ""]
    k = res["top_k"]
    rq = [[op, m, _f(v["tau"]), _f(v[f"top{k}_recall"]), _pct(v.get(f"top{k}_slowdown")), str(rank["records"])]
          for op, rank in res["rank"].items() for m, v in rank.items() if isinstance(v, dict)]
    if rq:
        lines += [f"Rank quality on the recorded held-out databases (every distinct measured schedule of the runs "
                  f"above; pre-trained models, no online update):", "",
                  markdown_table(["operator", "model", "τ", f"top-{k} recall", f"top-{k} slowdown", "records"], rq),
                  "", f"(top-{k} recall: how many of the {k} fastest records the model's {k} best hold; top-{k} "
                  f"slowdown: how much slower the fastest of its {k} best is than the fastest record.)", ""]
    if res.get("notes"):  # what the person who ran it found (kept in the JSON, so a rebuild keeps it)
        for note in res["notes"]:
            lines += [note, ""]
    stale = stale_line(res.get("runs") or [])
    return lines + ([stale, ""] if stale else [])


def stale_line(runs: Sequence[Dict[str, Any]]) -> str:
    """A line on the gnn runs of the table that are not today's gnn's ("": none)."""
    from simulator.metaschedule.resume import other_gnn_defaults

    found = [why for r in runs if r["cost_model"] in GNNS and (why := other_gnn_defaults(r.get("gnn_defaults")))]
    if not found:
        return ""
    return not_todays_gnn(f"{len(found)} gnn runs of this table were tuned", found[0],
                          "the benchmark tunes them again on its next run on this CPU.")


def goal_lines(rows: Sequence[Dict[str, Any]], model: str = "gnn") -> List[str]:
    """The tuning goals checked per operator on the means over seeds: `model` reaches each
    rival's (tvm-xgb, tvm-xgb-pretrained) best-at-the-last-point latency by half as many
    trials, and is ≥ 10% faster than it at the first point."""
    points = sorted({r["trials"] for r in rows})
    if len(points) < 2:
        return []
    first, last = points[0], points[-1]
    half = max(p for p in points if p <= last // 2) if any(p <= last // 2 for p in points) else first
    mean = {(r["workload"], r["cost_model"], r["trials"]): r["mean_s"] for r in rows}
    out = []
    for op in sorted({r["workload"] for r in rows}):
        for rival in ("tvm-xgb", "tvm-xgb-pretrained"):
            cells = [mean.get((op, model, half)), mean.get((op, rival, last)), mean.get((op, model, first)),
                     mean.get((op, rival, first))]
            if None in cells:
                continue
            ours_half, theirs_last, ours_first, theirs_first = cells
            out.append(f"- `{op}`, {model} against {rival}: at {half} trials {ours_half * 1e6:.1f} µs vs {rival}'s best "
                       f"at {last} {theirs_last * 1e6:.1f} µs — **{'met' if ours_half <= theirs_last else 'not met'}**; "
                       f"at {first} trials {ours_first * 1e6:.1f} vs {theirs_first * 1e6:.1f} µs "
                       f"({_faster(ours_first, theirs_first)}; goal ≥ 10% faster: "
                       f"**{'met' if ours_first <= 0.9 * theirs_first else 'not met'}**)")
    return out


def _faster(ours: float, theirs: float) -> str:
    gain = 100 * (1 - ours / theirs)
    return f"{gain:.1f}% faster" if gain >= 0 else f"{-gain:.1f}% slower"


def _f(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.3f}"


def _pct(v: Optional[float]) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


# ---------------------------------------------------------------- driver
def run(args, prefix: str = "ms-", results: Optional[str] = None, command: str = "") -> Dict[str, Any]:
    from extract.metaschedule.campaign import machine_info
    from extract.metaschedule.runner import host_target, load_tensor_intrinsics

    start = time.time()
    minutes = _opt(args, "deadline-min", prefix)
    deadline = start + 60 * minutes if minutes else None
    results = results or args.results
    sources = _opt(args, "pretrain-data", prefix) or [_default_pretrain_data()]
    runs_dir = pretraining_folder(_opt(args, "runs", prefix), sources, _opt(args, "pretrain-records", prefix),
                                  _opt(args, "epochs", prefix), _opt(args, "pretrain-loss", prefix))
    snap = snapshot(sources, os.path.join(runs_dir, "snapshot"), _opt(args, "pretrain-records", prefix))
    target = host_target(1)
    load_tensor_intrinsics(target)
    groups = pretrain_groups(snap)
    keys = held_out(_opt(args, "operators", prefix), groups, target)
    pre = pretrain(snap, runs_dir, _opt(args, "epochs", prefix), _opt(args, "pretrain-loss", prefix))
    tuned = tune_all(args, prefix, runs_dir, pre, target, deadline)
    points = _opt(args, "points", prefix)
    rows = summarize(tuned["runs"], points)
    os.makedirs(results, exist_ok=True)
    plot(rows, os.path.join(results, "ms_tuning.png"))
    rank = rank_quality(tuned["runs"], pre, _opt(args, "top-k", prefix)) if tuned["runs"] else {}
    out = {"command": command, "machine": machine_info(), "held_out": keys, "figure": "results/ms_tuning.png",
           "pretrain": {"sources": list(sources), "databases": snap, "records": _records(snap),
                        "gnn_run": pre["gnn"], "epochs": _opt(args, "epochs", prefix),
                        "loss": _opt(args, "pretrain-loss", prefix)},
           "seeds_run": sorted({r["seed"] for r in tuned["runs"]}), "cut": tuned["cut"], "measure": tuned["measure"],
           "summary": rows, "rank": rank, "top_k": _opt(args, "top-k", prefix),
           "runs": [{k: v for k, v in r.items() if k != "history"} | {"best_so_far": [h["best_s"] for h in r["history"]]}
                    for r in tuned["runs"]], "wall_s": time.time() - start}
    write_json(os.path.join(results, RESULT), out)
    return out


def _measured_on(machine: Optional[Dict[str, Any]]) -> str:
    """The sentence naming the CPU the kernels were timed on ("" for a result that did not record it)."""
    if not machine:
        return ""
    return f" Measured on {machine['cpu_model'] or 'an unnamed CPU'} (LLVM: `{machine['llvm_cpu']}`)."


def _records(snap: Sequence[str]) -> int:
    from extract.metaschedule.database import RECORD_FILE

    return sum(sum(1 for _ in open(os.path.join(d, RECORD_FILE), encoding="utf-8")) for d in snap)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.metaschedule.tuning", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, prefix="")
    ap.add_argument("--results", default=os.path.join("docs", "results"))
    args = ap.parse_args(argv)
    command = " ".join(["python -m benchmarks.metaschedule.tuning", *(argv if argv is not None else sys.argv[1:])])
    out = run(args, prefix="", command=command)
    for line in report_section(args.results):
        print(line)
    return 0 if out["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
