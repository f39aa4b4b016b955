"""Whole networks tuned by MetaSchedule with each cost model, compiled and timed end to end
(rank quality on the networks dataset, leaving a network out, is `benchmarks.networks`).

    python -m benchmarks.metaschedule.networks [--networks bert vit mixer] [--cost-models gnn tvm-xgb tvm-xgb-pretrained random [gnn-sage]]
        [--budgets 8 16 32 64] [--seeds 0 1 2] [--data datasets/networks_rocketlake]
        [--runs runs/ms_networks] [--results docs/results] [--plan]

Also the `ms-networks` stage of `python -m benchmarks.all` (not in its default stages:
it measures for many hours).

1. **Fair pre-training.** For a network of the dataset (`--data`'s task table tags each
   task with its networks), the gnn (`simulator.train --split leave-network-out
   --test-network NETWORK`, gcn, pairwise-hinge, `--epochs`) and the pre-trained XGB
   (`simulator.metaschedule.rivals.pretrain_xgb(..., leave_out=the network's task keys)`) learn
   from the same records: every task of the other networks. A network in no dataset
   (`mixer`, written for this benchmark) uses the whole dataset: the shipped checkpoint,
   and XGB on every record. `gnn-sage` (not tuned unless named in `--cost-models`) is the
   gnn pre-trained as `sage` the same way (for `mixer`, by the shipped checkpoint's recipe).
2. **Tuning.** For each network, cost model and seed, one `python -m simulator.tune
   NETWORK` work dir, taken through the budgets in turn: `--trials B × tasks
   --trials-per-task B` for B in `--budgets` (trials per task as MetaSchedule counts
   them), each step resuming the one before (`simulator.metaschedule.resume`: its records count,
   teach the cost model and seed the search), `--trials-per-iter` per round. After each
   step `simulator.tune` compiles the network with the database and times it end to end
   on the measuring core (`simulator.metaschedule.network`); the step's summary is kept as
   `summary_b<B>.json`, with what other processes used of the machine meanwhile and how
   long the tuner's processes waited for a core because of it (`run_queue.RunQueueWait`):
   its wall time is the tuner's own only where that wait is ~0. A killed run resumes:
   finished steps are read back, an unfinished one is resumed by `simulator.tune` itself.
3. **The quiet pass.** When every step is done, each step's network is compiled again
   from its database as the step left it and timed again, in interleaved rounds on a quiet
   machine (`benchmarks.metaschedule.quiet`, whose docstring has the measured reason); the
   table reports these timings (a point without one keeps its timing from the tuning step).
4. **Kept runs.** Each finished step's database, settings and summaries are copied
   compactly to `--results`/`ms_networks_runs_<cpu>/` (`benchmarks.metaschedule.kept`);
   a fresh clone, or a machine that lost `--runs`, resumes from them (`--plan` too). The
   table names its CPU, and a machine of another CPU model refuses to write over it. The
   table reports one gnn, today's: a gnn run tuned under other gnn defaults
   (`simulator.metaschedule.cost_model.gnn_defaults`, recorded by `simulator.tune`; or before
   they were recorded) is left out of it, said so in the report, and tuned again from its
   first step (its work dir and kept copy removed; git keeps the copy).
5. **Time.** `--plan` (and every start) prints the runs left and how long they will take:
   seconds per trial and per end-to-end point measured by the finished steps of this run
   (before any, `PRIOR_S_PER_TRIAL` and `PRIOR_S_PER_POINT`).

Outputs: `ms_networks.json` and `ms_networks.png` (end-to-end latency against trials per
task and against tuning wall time, per network; mean over seeds) in `--results`, written
at the start and again after every step, so a run of days shows its table so far; the
section of docs/RESULTS.md (table and the issue's goal verdicts) comes from
`report_section`.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.cli import Int
from simulator.registry import SimulatorError

from ..common import (COUNT, SEED, cli, cpu_counters, dies_with_parent, load_json, log, markdown_table, others_cpu_s,
                      not_todays_gnn, run_training, shown_command, write_json)
from .kept import KEPT_PREFIX, copy_of, finished_budgets, keep, kept_folder, note_machine, restore
from .quiet import ROUNDS, S_PER_POINT, quiet_latency, quiet_pass
from .run_queue import RunQueueWait

NETWORKS = ["bert", "vit", "mixer"]        # resnet50 / mobilenet_v2 when the machine time allows
COST_MODELS = ["gnn", "tvm-xgb", "tvm-xgb-pretrained", "random"]
# a gnn cost model → the `simulator.train --model` its checkpoint is trained as; `gnn-sage` (the
# candidate default of docs/COSTMODEL.md) is tuned only when named
GNN_MODELS = {"gnn": "gcn", "gnn-sage": "sage"}
CHOICES = [*COST_MODELS, "gnn-sage"]
BUDGETS = [8, 16, 32, 64]
RESULT, FIGURE = "ms_networks.json", "ms_networks.png"
PRETRAIN_EPOCHS = 30
PRIOR_S_PER_TRIAL = 1.5    # build + run + search of one candidate (no finished step yet)
PRIOR_S_PER_POINT = 90.0   # compile + end-to-end timing


# ---------------------------------------------------------------- pre-training
def network_keys(data: str, network: str) -> List[str]:
    """The dataset's task keys tagged with `network` (empty: a network in no dataset)."""
    from datasets.networks import read_tasks

    return [row["key"] for row in read_tasks(data) if network in row["networks"]]


def pretrained(args, network: str, cost_model: str) -> Optional[str]:
    """`cost_model`'s --checkpoint for `network` (made when missing; None: it has none). Only
    what a step about to run needs is trained: a resumed run whose gnn steps are done does
    not pre-train the gnn again."""
    from datasets.networks import training_databases
    from simulator.metaschedule.rivals import pretrain_xgb

    keys = network_keys(args.data, network)
    folder = os.path.join(args.runs, "pretrain", network if keys else "whole-dataset")
    if cost_model in GNN_MODELS:
        return pretrained_gnn(args, network, keys, os.path.join(folder, cost_model), GNN_MODELS[cost_model])
    if cost_model != "tvm-xgb-pretrained":
        return None
    xgb = os.path.join(folder, "xgb.tar")
    if not os.path.exists(xgb):
        log(f"pre-training xgb ({'without ' + network + chr(39) + 's tasks' if keys else 'on the whole dataset'})")
        os.makedirs(folder, exist_ok=True)
        pretrain_xgb(training_databases(args.data), out=xgb, leave_out=keys)
    return xgb


def pretrained_gnn(args, network: str, keys: Sequence[str], run: str, model: str) -> str:
    """The checkpoint of a gnn trained as `model`: with `network`'s tasks (`keys`) left out,
    in `run`; for a network in no dataset, the shipped checkpoint (gcn), or one trained in `run`
    on the whole dataset by the shipped checkpoint's recipe (another model). A finished run is
    reused while its command line and defaults are unchanged (benchmarks.common)."""
    from datasets.networks import PRETRAIN_RECIPE, pretrained_path

    if not keys and model == "gcn":
        return str(pretrained_path(args.data))
    if keys:
        log(f"pre-training the gnn ({model}) with {network}'s {len(keys)} tasks left out (or reusing it)")
        argv = ["--split", "leave-network-out", "--test-network", network, "--model", model, "--loss",
                "pairwise-hinge", "--epochs", str(args.epochs), "--seed", "0", "--threads", "1"]
    else:
        log(f"pre-training the gnn ({model}) on the whole dataset (or reusing it)")
        argv = ["--split", "random", "--model", model, *PRETRAIN_RECIPE]
    run_training(["--data", args.data, *argv, "--out", run], run)
    return run


# ---------------------------------------------------------------- the plan
def work_dir(runs: str, network: str, model: str, seed: int) -> str:
    return os.path.join(runs, "tune", network, model, f"seed{seed}")


def step_summary(work: str, budget: int) -> Optional[Dict[str, Any]]:
    return load_json(work, f"summary_b{budget}.json")


def stale(work: str, model: str) -> Optional[str]:
    """Why a gnn work dir's finished steps are not today's gnn's (None: they are, or it is
    no gnn's, or nothing is finished): tuned under other gnn defaults than today's, or before
    they were recorded. The table reports one gnn, so such a run is tuned again."""
    from simulator.metaschedule.resume import SETTINGS, other_gnn_defaults

    if model not in GNN_MODELS or not finished_budgets(work):
        return None
    stored = load_json(work, SETTINGS) or {}
    return other_gnn_defaults((stored.get("settings") or {}).get("gnn_defaults"))


def plan(args, tasks: Dict[str, int]) -> List[Dict[str, Any]]:
    """Every (network, cost model, seed, budget) step, in the order run (seed-major), and
    whether it is done (a `stale` work dir's steps are not)."""
    steps = []
    for seed in args.seeds:
        for network in args.networks:
            for model in args.cost_models:
                work = work_dir(args.runs, network, model, seed)
                old = stale(work, model)
                for budget in sorted(args.budgets):
                    steps.append({"network": network, "cost_model": model, "seed": seed, "budget": budget,
                                  "tasks": tasks[network], "work_dir": work, "stale": old,
                                  "done": old is None and step_summary(work, budget) is not None})
    return steps


def retire_stale(args, steps: Sequence[Dict[str, Any]], kept: str) -> None:
    """Remove the `stale` work dirs and their kept copies (git keeps those), so that their
    steps are tuned again from the first."""
    for work, why in sorted({(s["work_dir"], s["stale"]) for s in steps if s["stale"]}):
        log(f"{os.path.relpath(work, args.runs)}: tuned again from the first step, its run was another gnn's ({why})")
        shutil.rmtree(work)
        shutil.rmtree(copy_of(work, args.runs, kept), ignore_errors=True)


def estimate(steps: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """Seconds per trial and per end-to-end point (from the finished steps, else the
    priors), and the seconds the steps left will take."""
    trials = walls = points = compile_s = 0.0
    for s in steps:
        summary = step_summary(s["work_dir"], s["budget"]) if s["done"] else None
        if summary:
            new = sum(t["trials"] - t.get("resumed", 0) for t in summary["tasks"])
            trials, walls = trials + new, walls + summary["wall_s"]
            e2e = summary.get("end_to_end") or {}
            points, compile_s = points + 1, compile_s + e2e.get("compile_s", 0.0) + sum(e2e.get("repeats_s", []))
    per_trial = walls / trials if trials else PRIOR_S_PER_TRIAL
    per_point = compile_s / points + 15.0 if points else PRIOR_S_PER_POINT  # + import and start
    left = [s for s in steps if not s["done"]]
    new_trials = sum(s["tasks"] * (s["budget"] - _previous(steps, s)) for s in left)
    quiet_left = sum(1 - min(ROUNDS, quiet_rounds(s)) / ROUNDS for s in steps)
    return {"s_per_trial": per_trial, "s_per_point": per_point, "steps_left": len(left),
            "trials_left": new_trials, "quiet_points_left": quiet_left,
            "seconds_left": new_trials * per_trial + len(left) * per_point + quiet_left * S_PER_POINT}


def quiet_rounds(step: Dict[str, Any]) -> int:
    quiet = quiet_latency(step)
    return quiet["rounds"] if quiet else 0


def _previous(steps: Sequence[Dict[str, Any]], step: Dict[str, Any]) -> int:
    """The budget of the step before `step` in its work dir (0: none)."""
    before = [s["budget"] for s in steps if s["work_dir"] == step["work_dir"] and s["budget"] < step["budget"]]
    return max(before, default=0)


def say_plan(steps, est) -> None:
    log(f"{len(steps)} steps, {est['steps_left']} left: {est['trials_left']:.0f} trials at "
        f"{est['s_per_trial']:.2f} s, {est['steps_left']} end-to-end points at {est['s_per_point']:.0f} s and "
        f"{est['quiet_points_left']:.0f} of the quiet pass at {S_PER_POINT:.0f} s: about {est['seconds_left'] / 3600:.1f} h")


# ---------------------------------------------------------------- running
def tune_argv(args, step: Dict[str, Any], checkpoint: Optional[str]) -> List[str]:
    cost_model = "gnn" if step["cost_model"] in GNN_MODELS else step["cost_model"]
    argv = [sys.executable, "-m", "simulator.tune", step["network"], "--cost-model", cost_model,
            "--trials", str(step["budget"] * step["tasks"]), "--trials-per-task", str(step["budget"]),
            "--trials-per-iter", str(args.trials_per_iter), "--seed", str(step["seed"]),
            "--work-dir", step["work_dir"], "--quiet"]
    if checkpoint:
        argv += ["--checkpoint", checkpoint]
    if args.measure_core is not None:
        argv += ["--measure-core", str(args.measure_core)]
    return argv


def run_step(args, step: Dict[str, Any], checkpoint: Optional[str]) -> Dict[str, Any]:
    """One budget step through `simulator.tune` (resuming the work dir); its summary kept."""
    from simulator.metaschedule.resume import SUMMARY

    from extract.metaschedule.runner import MeasureConfig

    off_measuring = MeasureConfig.for_machine(-1 if args.measure_core is None else args.measure_core).build_cores
    since, start = cpu_counters(), time.perf_counter()
    with (subprocess.Popen(tune_argv(args, step, checkpoint), preexec_fn=dies_with_parent()) as proc,
          RunQueueWait(proc.pid, cores=off_measuring) as wait):
        returncode = proc.wait()
    if returncode != 0:
        raise SystemExit(f"{step['network']} {step['cost_model']} seed {step['seed']} at {step['budget']} per task: "
                         f"simulator.tune exited {returncode} (its work dir: {step['work_dir']})")
    with open(os.path.join(step["work_dir"], SUMMARY), encoding="utf-8") as f:
        summary = json.load(f)
    # the wall time is the tuner's only while nothing else runs on the build cores: say what did,
    # and how long the tuner's processes waited for a core because of it
    summary |= {"others_cpu_s": others_cpu_s(since), "step_span_s": time.perf_counter() - start,
                "run_queue_wait_s": wait.waited_s}
    write_json(os.path.join(step["work_dir"], f"summary_b{step['budget']}.json"), summary)
    return step_summary(step["work_dir"], step["budget"])


def restore_kept(args, steps: Sequence[Dict[str, Any]], kept: str) -> None:
    """Work dirs behind their kept copies (`benchmarks.metaschedule.kept`) restored from them."""
    back = [w for w in sorted({s["work_dir"] for s in steps}) if restore(w, args.runs, kept)]
    if back:
        log(f"restored {len(back)} work dirs from the kept runs in {kept}")


def keep_all(args, steps: Sequence[Dict[str, Any]], kept: str, only_ahead: bool = False) -> None:
    """Every work dir kept; `only_ahead`: only those with more finished steps than their copy
    (measured before runs were kept, or killed between a step and its keep) — not a step
    being measured when the run was stopped."""
    for work in sorted({s["work_dir"] for s in steps}):
        if not only_ahead or len(finished_budgets(work)) > len(finished_budgets(copy_of(work, args.runs, kept))):
            keep(work, args.runs, kept)


def run_all(args, steps: List[Dict[str, Any]], kept: str, after_step=lambda: None) -> None:
    checkpoints: Dict[Tuple[str, str], Optional[str]] = {}   # (network, cost model) → checkpoint
    for step in steps:
        if step["done"]:
            continue
        say_plan(steps, estimate(steps))
        needs = (step["network"], step["cost_model"])
        if needs not in checkpoints:
            checkpoints[needs] = pretrained(args, *needs)
        summary = run_step(args, step, checkpoints[needs])
        keep(step["work_dir"], args.runs, kept)
        step["done"] = True
        e2e = (summary.get("end_to_end") or {}).get("latency_s")
        log(f"{step['network']} {step['cost_model']} seed {step['seed']} at {step['budget']} per task: end to end "
            f"{'–' if e2e is None else f'{e2e * 1e3:.3f} ms'} ({summary['wall_s']:.0f} s)")
        after_step()


def run_quiet_pass(args, steps: Sequence[Dict[str, Any]], target) -> List[str]:
    """Every finished step timed again, `benchmarks.metaschedule.quiet`; one pass at a time
    per runs folder. The steps it could not time, one line each."""
    from extract.fileio import OutputBusyError, output_lock
    from extract.metaschedule.runner import MeasureConfig

    measure = MeasureConfig.for_machine(-1 if args.measure_core is None else args.measure_core)
    finished = [(s, step_summary(s["work_dir"], s["budget"])) for s in steps if s["done"]]
    try:
        with output_lock(args.runs):
            return quiet_pass(finished, target, measure, log=log)
    except OutputBusyError as e:
        raise SystemExit(f"the quiet pass: {e}") from None


# ---------------------------------------------------------------- results
def point(step: Dict[str, Any], steps: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """One finished step as a result row: end-to-end latency, the sum of the tasks' bests
    (weighted), tuning wall time up to this budget, the cost model's share."""
    s = step_summary(step["work_dir"], step["budget"])
    if s is None or step.get("stale"):
        return None
    mine = [step_summary(o["work_dir"], o["budget"]) for o in steps
            if o["work_dir"] == step["work_dir"] and o["budget"] <= step["budget"]]
    wall = sum(m["wall_s"] for m in mine if m)
    cost = sum((m.get("cost_model_stats") or {}).get("total_s", 0.0) for m in mine if m)
    others = [(m.get("others_cpu_s"), m.get("step_span_s")) for m in mine if m]
    waits = [m.get("run_queue_wait_s") for m in mine if m]
    from simulator.metaschedule.network import kernel_gaps

    e2e = s.get("end_to_end") or {}
    repeats = e2e.get("repeats_s")
    # the median of the repeats, also for a point whose summary recorded their mean
    during = float(np.median(repeats)) if repeats else e2e.get("latency_s")
    found = quiet_latency(step)
    rounds = found["rounds"] if found else 0
    quiet = found if rounds >= ROUNDS else None   # an unfinished pass is not its figure yet
    inside = kernel_gaps((quiet or e2e).get("kernels_s") or {}, s.get("tasks") or [])
    return {k: step[k] for k in ("network", "cost_model", "seed", "budget", "tasks")} | {
        "end_to_end_s": quiet["latency_s"] if quiet else during, "during_tuning_s": during,
        "quiet_rounds": rounds, "quiet_loaded": quiet["loaded"] if quiet else 0,
        "sum_of_bests_s": s.get("best_latency_s"),
        # the tuned kernels' time inside the network (None: timed before kernels were)
        "tuned_inside_s": sum(r["inside_s"] for r in inside) if inside else None,
        "wall_s": wall, "cost_model_share": cost / wall if wall > 0 else None,
        # other processes' CPU while the steps ran, in cores (None: a step ran before this was recorded)
        "others_cores": (sum(o for o, _ in others) / sum(t for _, t in others)
                         if others and all(o is not None and t for o, t in others) else None),
        # seconds the tuner's processes waited for a core (None: a step ran before this was recorded)
        "run_queue_wait_s": sum(waits) if waits and all(w is not None for w in waits) else None}


def aggregate(points: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """network → cost model → budget → mean / min / max end to end over seeds, mean wall."""
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for p in points:
        if p["end_to_end_s"] is None:
            continue
        cell = out.setdefault(p["network"], {}).setdefault(p["cost_model"], {}).setdefault(str(p["budget"]), [])
        cell.append(p)
    for network, models in out.items():
        for model, budgets in models.items():
            for budget, rows in budgets.items():
                lat = [r["end_to_end_s"] for r in rows]
                shares = [r["cost_model_share"] for r in rows if r["cost_model_share"] is not None]
                bests = [r["sum_of_bests_s"] for r in rows if r.get("sum_of_bests_s") is not None]
                budgets[budget] = {"mean_s": float(np.mean(lat)), "min_s": min(lat), "max_s": max(lat),
                                   "seeds": len(rows), "wall_s": float(np.mean([r["wall_s"] for r in rows])),
                                   "share": float(np.mean(shares)) if shares else None,
                                   "bests_s": float(np.mean(bests)) if bests else None}
    return out


def plot(agg: Dict[str, Any], path: str) -> None:
    """Per network: end to end against trials per task, and against tuning wall time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nets = sorted(agg)
    fig, axes = plt.subplots(len(nets), 2, figsize=(9, 3 * len(nets)), squeeze=False)
    for row, network in zip(axes, nets):
        for model, budgets in sorted(agg[network].items()):
            bs = sorted(budgets, key=int)
            ys = [1e3 * budgets[b]["mean_s"] for b in bs]
            row[0].plot([int(b) for b in bs], ys, marker="o", label=model)
            row[1].plot([budgets[b]["wall_s"] / 60 for b in bs], ys, marker="o", label=model)
        row[0].set(xscale="log", xlabel="trials per task", ylabel=f"{network}: end to end (ms)")
        row[1].set(xlabel="tuning wall time (min)")
        row[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cell(agg, network, model, budget) -> Optional[Dict[str, Any]]:
    return agg.get(network, {}).get(model, {}).get(str(budget))


def verdicts(agg: Dict[str, Any]) -> List[str]:
    """The issue's goals, per network, on the means over seeds."""
    lines = []
    for network in sorted(agg):
        g16, g8, x64, x8 = (_cell(agg, network, m, b) for m, b in (("gnn", 16), ("gnn", 8), ("tvm-xgb", 64), ("tvm-xgb", 8)))
        if g16 and x64:
            lines.append(f"`{network}`: gnn at 16 per task {g16['mean_s'] * 1e3:.3f} ms vs tvm-xgb at 64 "
                         f"{x64['mean_s'] * 1e3:.3f} ms — **{'met' if g16['mean_s'] <= x64['mean_s'] else 'not met'}**")
        if g8 and x8:
            gain = 1 - g8["mean_s"] / x8["mean_s"]
            lines.append(f"`{network}`: gnn at 8 per task {100 * gain:.1f}% faster than tvm-xgb at 8 (goal ≥ 10%) — "
                         f"**{'met' if gain >= 0.10 else 'not met'}**")
        lines += _pretrained_and_time(agg, network, x64)
    return lines


def _pretrained_and_time(agg, network: str, x64: Optional[Dict[str, Any]]) -> List[str]:
    lines = []
    gnn, pre = agg[network].get("gnn", {}), agg[network].get("tvm-xgb-pretrained", {})
    both = sorted(set(gnn) & set(pre), key=int)
    if both:
        wins = sum(gnn[b]["mean_s"] <= pre[b]["mean_s"] for b in both)
        lines.append(f"`{network}`: gnn at least as good as tvm-xgb-pretrained at {wins} of {len(both)} budgets")
    shares = [gnn[b]["share"] for b in sorted(gnn, key=int) if gnn[b]["share"] is not None]
    if shares:
        lines.append(f"`{network}`: gnn's share of tuning wall time {100 * max(shares):.0f}% at most (goal ≤ 10%) — "
                     f"**{'met' if max(shares) <= 0.10 else 'not met'}**")
    if x64 and gnn:
        reach = [b for b in sorted(gnn, key=int) if gnn[b]["mean_s"] <= x64["mean_s"]]
        if reach:
            ratio = gnn[reach[0]]["wall_s"] / x64["wall_s"]
            lines.append(f"`{network}`: gnn reaches tvm-xgb's 64-per-task latency at {reach[0]} per task in "
                         f"{100 * ratio:.0f}% of tvm-xgb's wall time (goal ≤ 25%) — **{'met' if ratio <= 0.25 else 'not met'}**")
        else:
            lines.append(f"`{network}`: gnn does not reach tvm-xgb's 64-per-task latency — **goal not met**")
    return lines


def quiet_line(points: Sequence[Dict[str, Any]]) -> str:
    """Where the table's latencies come from: the quiet pass, or the timing during tuning."""
    quiet = [p for p in points if p.get("quiet_rounds", 0) >= ROUNDS]
    loaded = sum(p.get("quiet_loaded", 0) for p in quiet)
    return (f"Timed in the quiet pass after tuning (`benchmarks.metaschedule.quiet`: the median of {ROUNDS} "
            f"interleaved rounds, each waiting for every core to be quiet): {len(quiet)} of {len(points)} points"
            f"{f'; {loaded} timings found a core still busy' if loaded else ''}"
            f"{'; the others as timed right after their tuning step' if len(quiet) < len(points) else ''}.")


SAME_BESTS = 0.005  # two steps' sums of task bests this close: nothing better found, the same network


def repeat_line(points: Sequence[Dict[str, Any]]) -> str:
    """How far the timing of one network moves between two timings: the pairs of consecutive
    budgets of a run whose later step found nothing better (sums of the tasks' bests within
    SAME_BESTS) compile the same network; empty without such a pair."""
    runs: Dict[tuple, List[Dict[str, Any]]] = {}
    for p in points:
        runs.setdefault((p["network"], p["cost_model"], p["seed"]), []).append(p)
    moved = []
    for run in runs.values():
        run.sort(key=lambda p: p["budget"])
        moved += [abs(b["end_to_end_s"] / a["end_to_end_s"] - 1) for a, b in zip(run, run[1:])
                  if abs(b["sum_of_bests_s"] / a["sum_of_bests_s"] - 1) <= SAME_BESTS]
    if not moved:
        return ""
    return (f"The same network timed twice: {len(moved)} pairs of consecutive budgets of a run where the later "
            f"step found nothing better (sums of bests within {100 * SAME_BESTS:.1f}%) differ by "
            f"{100 * min(moved):.0f}–{100 * max(moved):.0f}% end to end (median {100 * float(np.median(moved)):.0f}%): "
            f"differences between cost models of that size are within the timing's noise.")


def others_line(points: Sequence[Dict[str, Any]]) -> str:
    """How much of the machine other processes took while the points were tuned (their wall
    times are the tuner's alone only where that is ~0); empty if no point recorded it."""
    seen = [p for p in points if p.get("others_cores") is not None]
    if not seen:
        return ""
    most = max(seen, key=lambda p: p["others_cores"])
    return (f"Other processes used {float(np.mean([p['others_cores'] for p in seen])):.2f} of a core on average "
            f"while the steps were tuned ({len(seen)} of {len(points)} points recorded it), at most "
            f"{most['others_cores']:.2f} ({most['network']} {most['cost_model']} seed {most['seed']} up to "
            f"{most['budget']} per task): the wall times hold what that took from the build core."
            + waited_line(points))


def waited_line(points: Sequence[Dict[str, Any]]) -> str:
    """What contention cost the tuner: its processes' wait for a core, as a share of the wall
    time (` …` to append; empty if no point recorded it)."""
    seen = [p for p in points if p.get("run_queue_wait_s") is not None and p["wall_s"] > 0]
    if not seen:
        return ""
    shares = [p["run_queue_wait_s"] / p["wall_s"] for p in seen]
    worst = seen[int(np.argmax(shares))]
    return (f" The tuner's processes waited for a core {100 * float(np.mean(shares)):.1f}% of the wall time on "
            f"average ({len(seen)} points recorded it), at most {100 * max(shares):.1f}% ({worst['network']} "
            f"{worst['cost_model']} seed {worst['seed']} up to {worst['budget']} per task).")


def bests_table(r: Dict[str, Any], agg: Dict[str, Any]) -> List[str]:
    """The sum of the tuned tasks' best latencies (weighted by calls, mean over seeds): what
    the search found, without the noise of a timing of the whole network."""
    rows = []
    for network in sorted(agg):
        for model in r["cost_models"]:
            cells = [_cell(agg, network, model, b) for b in r["budgets"]]
            rows.append([network, model] + ["–" if c is None or c.get("bests_s") is None else
                                            f"{c['bests_s'] * 1e3:.3f}" for c in cells])
    return ["The sum of the tuned tasks' best latencies (ms, each task's best measured kernel × its calls, mean over "
            "seeds) — what each search found, free of the end-to-end timing's noise:", "",
            markdown_table(["network", "cost model"] + [f"B = {b}" for b in r["budgets"]], rows), ""]


def report_section(results: str) -> List[str]:
    r = load_json(results, RESULT)
    if not r:
        return []
    agg = aggregate(r["points"]) if r.get("points") else r["aggregate"]  # today's columns from the stored points
    lines = ["## Whole networks tuned end to end (MetaSchedule)", "", f"    {shown_command(r['command'])}", "",
             f"Networks {', '.join(r['networks'])}; cost models {', '.join(r['cost_models'])}; seeds {r['seeds']}; "
             f"{r['steps_done']} of {r['steps']} steps done. End-to-end latency of the compiled Relax module (ms, mean "
             f"over seeds [min–max]) after B trials per task, and the tuning wall time up to it (min):", ""]
    budgets = r["budgets"]
    rows = []
    for network in sorted(agg):
        for model in r["cost_models"]:
            cells = [_cell(agg, network, model, b) for b in budgets]
            rows.append([network, model] + ["–" if c is None else
                                            f"{c['mean_s'] * 1e3:.3f} [{c['min_s'] * 1e3:.3f}–{c['max_s'] * 1e3:.3f}] "
                                            f"({c['wall_s'] / 60:.0f} min)" for c in cells])
    lines += [markdown_table(["network", "cost model"] + [f"B = {b}" for b in budgets], rows), ""]
    repeat = repeat_line(r.get("points") or [])
    lines += [quiet_line(r.get("points") or []) + (f" {repeat}" if repeat else ""), ""] + bests_table(r, agg)
    others = others_line(r.get("points") or [])
    lines += [others, ""] if others else []
    left_out = r.get("quiet_left_out") or []
    lines += [f"- not timed again: {why}" for why in left_out] + ([""] if left_out else [])
    lines += [f"![end to end against trials and wall time](results/{FIGURE})", ""] if r.get("figure") else []
    points = r.get("points") or []
    provisional = any(p.get("quiet_rounds", 0) < ROUNDS for p in points)
    lines += [("**Provisional** (from timings taken right after tuning steps, before the quiet pass) — " if provisional
               else "") + "Goals (gnn at 16 per task ≤ tvm-xgb at 64; ≥ 10% better than tvm-xgb at 8; ≥ "
              "tvm-xgb-pretrained at equal trials on most networks; share ≤ 10%; tvm-xgb's 64-per-task latency in "
              "≤ ¼ of its wall time):", ""]
    lines += [f"- {v}" for v in verdicts(agg)] + [""]
    stale_runs = stale_line(results, results_cpu(results))
    return lines + ([stale_runs, ""] if stale_runs else [])


def stale_line(results: str, cpu: Optional[str]) -> str:
    """A line on the table's kept gnn runs that are not today's gnn's (`stale`; "": none)."""
    if not cpu:
        return ""
    kept = glob.escape(kept_folder(results, cpu))
    found = [(work, why) for model in GNN_MODELS for work in sorted(glob.glob(os.path.join(kept, "*", model, "seed*")))
             if (why := stale(work, model))]
    if not found:
        return ""
    return not_todays_gnn(f"{len(found)} gnn runs of this table were tuned", found[0][1],
                          "the benchmark tunes them again from their first step on its next run on this CPU.")


def run(args, command: str = "") -> Dict[str, Any]:
    from datasets.measure import this_cpu
    from extract.metaschedule.campaign import machine_info
    from extract.metaschedule.runner import host_target
    from simulator.metaschedule.tune import network_tasks

    cpu = this_cpu()
    if not args.plan:
        check_one_cpu(args.results, cpu)
    target = host_target(1)
    tasks = {n: len(network_tasks(n, target)) for n in args.networks}
    kept = kept_folder(args.results, cpu)
    restore_kept(args, plan(args, tasks), kept)
    steps = plan(args, tasks)
    say_plan(steps, estimate(steps))
    if args.plan:
        return results(args, steps, tasks, command)
    retire_stale(args, steps, kept)
    steps = plan(args, tasks)
    note_machine(kept, machine_info(), command)
    keep_all(args, steps, kept, only_ahead=True)
    write_results(args, steps, tasks, command, cpu=cpu)
    run_all(args, steps, kept, after_step=lambda: write_results(args, steps, tasks, command, cpu=cpu))
    left_out = run_quiet_pass(args, steps, target)
    keep_all(args, steps, kept)
    return write_results(args, steps, tasks, command, left_out, cpu=cpu)


def results(args, steps, tasks: Dict[str, int], command: str, left_out: Sequence[str] = (),
            cpu: Optional[str] = None) -> Dict[str, Any]:
    """The table's data from the steps finished so far (timed in the quiet pass where it has),
    measured on `cpu` (LLVM's name)."""
    points = [p for p in (point(s, steps) for s in steps) if p]
    agg = aggregate(points)
    return {"command": command, "cpu": cpu, "networks": list(args.networks), "cost_models": list(args.cost_models),
            "budgets": sorted(args.budgets), "seeds": list(args.seeds), "tasks": tasks, "steps": len(steps),
            "steps_done": sum(s["done"] for s in steps), "estimate": estimate(steps), "points": points,
            "aggregate": agg, "quiet_left_out": list(left_out), "figure": bool(agg)}


def write_results(args, steps, tasks: Dict[str, int], command: str, left_out: Sequence[str] = (),
                  cpu: Optional[str] = None) -> Dict[str, Any]:
    """`ms_networks.json` and its figure in `--results`, rewritten as steps finish: a run of
    days shows its table so far."""
    out = results(args, steps, tasks, command, left_out, cpu)
    os.makedirs(args.results, exist_ok=True)
    if out["aggregate"]:
        plot(out["aggregate"], os.path.join(args.results, FIGURE))
    write_json(os.path.join(args.results, RESULT), out)
    return out


def results_cpu(results_dir: str) -> Optional[str]:
    """The CPU whose points `--results`' table holds: its "cpu", or, for a table written before
    it named one, the CPU of the one kept-runs folder beside it (None: no table, or no telling)."""
    try:
        table = load_json(results_dir, RESULT)
    except (OSError, ValueError) as e:
        raise SimulatorError(f"{os.path.join(results_dir, RESULT)}: not a whole-network results file ({e})") from None
    if table is None:
        return None
    if isinstance(table, dict) and table.get("cpu"):
        return table["cpu"]
    kept = glob.glob(os.path.join(results_dir, KEPT_PREFIX + "*"))
    return os.path.basename(kept[0])[len(KEPT_PREFIX):] if len(kept) == 1 else None


def check_one_cpu(results_dir: str, cpu: str) -> None:
    """One CPU per table: refuse to write this machine's points over another CPU's."""
    theirs = results_cpu(results_dir)
    if theirs and theirs != cpu:
        raise SimulatorError(f"{os.path.join(results_dir, RESULT)} holds whole-network points measured on "
                             f"{theirs}; this machine is {cpu}: give this CPU its own --results (and --runs)")


def add_arguments(ap, prefix: str = "") -> None:
    from datasets.networks import default_dataset
    from extract.metaschedule.networks import NETWORKS as KNOWN

    ap.add_argument(f"--{prefix}networks", nargs="+", default=NETWORKS, choices=sorted(KNOWN), metavar="NETWORK")
    ap.add_argument(f"--{prefix}cost-models", nargs="+", default=COST_MODELS, choices=CHOICES)
    ap.add_argument(f"--{prefix}budgets", nargs="+", type=COUNT, default=BUDGETS, help="trials per task")
    ap.add_argument(f"--{prefix}seeds", nargs="+", type=SEED, default=[0, 1, 2])
    ap.add_argument(f"--{prefix}trials-per-iter", type=COUNT, default=8, help="candidates per task per round")
    ap.add_argument(f"--{prefix}epochs", type=COUNT, default=PRETRAIN_EPOCHS, help="gnn pre-training epochs")
    ap.add_argument(f"--{prefix}data", default=os.path.relpath(default_dataset()),
                    help="the networks dataset both pre-trainings read")
    ap.add_argument(f"--{prefix}measure-core", type=Int(0), default=None,
                    help="simulator.tune --measure-core (default: its own, the last core)")
    ap.add_argument(f"--{prefix}runs", default=os.path.join("runs", "ms_networks"))


ALL_PREFIX = "e2e-"   # the options' prefix in benchmarks.all


def run_from_all(args, command: str) -> Dict[str, Any]:
    """The `ms-networks` stage of benchmarks.all (its `--e2e-…` options)."""
    plain = {k[len(ALL_PREFIX):]: v for k, v in vars(args).items() if k.startswith(ALL_PREFIX.replace("-", "_"))}
    return run(argparse.Namespace(**plain, results=args.results, plan=False), command=command)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.metaschedule.networks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--results", default=os.path.join("docs", "results"))
    ap.add_argument("--plan", action="store_true",
                    help="only say what is left and how long it will take (after restoring kept runs)")
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    run(args, command=" ".join(["python -m benchmarks.metaschedule.networks", *(argv if argv is not None else sys.argv[1:])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
