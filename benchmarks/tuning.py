"""Model-guided tuning, measured for real on this machine.

    python -m benchmarks.tuning [--workloads C3 C5 C6 C7 C10 C11] [--model gcn] [--train loo]
        [--ks 1 5 10 20] [--passes 3] [--repeat 3] [--min-repeat-ms 20] [--random-seeds 1000]

For each held-out workload W:

1. a simulator trained on the other workloads (`--train loo`: all eleven other ResNet-18
   workloads, one run per W; `--train split`: the cross-workload split's run, trained on
   C1 C2 C4 C8 C9 C12) ranks W's *whole* config space (`benchmarks.spaces`, every index of
   the template's space, measured or not);
2. its top max(ks) configs, the shipped dataset's best config of W, the template's config 0
   (all tiles 1) and the unscheduled default (the template's compute, no packing blocks
   (ic_bn = oc_bn = 1) and no schedule at all: TVM's default lowering) are built and timed
   exactly as the dataset was (`extract.autotvm.timing.measure_one`: one runtime thread,
   `time_evaluator(number=1, repeat, min_repeat_ms)`, checked against NumPy), in a spawned
   worker; this is repeated `--passes` times, each pass in a new shuffled order over all
   workloads, so the spread between passes is the measurement noise;
3. best found with k measurements (k = 1 … max(ks)) is compared, within each pass, with the
   dataset's best config measured in that same pass, and with random search: best of k
   configs drawn without replacement from the dataset's measured configs of W (a uniform
   sample of the space), over `--random-seeds` seeds, relative to the dataset's best.

Writes RESULTS/tuning.json, tuning.csv, tuning_measurements.jsonl (every measurement;
resumed if present) and tuning.png. Do not run while `extract.measure` is measuring.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.autotvm.timing import MeasureResult, Worker
from extract.cli import Float
from simulator.registry import SimulatorError

from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, NONNEGATIVE, SEED, busy_measuring, cli, locked_outputs,
                     log, model_name, output_folder, run_many, train_argv, write_csv, write_json)

TEMPLATE = "conv2d_NCHWc.x86"
TEST_WORKLOADS = ["C3", "C5", "C6", "C7", "C10", "C11"]
ALL_WORKLOADS = [f"C{i}" for i in range(1, 13)]


# ---------------------------------------------------------------- measuring (worker side)
def measure_unscheduled(spec: str, repeat: int, min_repeat_ms: int) -> MeasureResult:
    """The conv2d of the template's compute with ic_bn = oc_bn = 1 and no schedule applied,
    built by TVM's default lowering; timed and checked as `measure_one` does."""
    import tvm
    from extract.autotvm import records as rec
    from extract.autotvm.timing import check_and_time
    from extract.autotvm.templates import get_template
    from extract.tir.workloads import parse_workload

    start = time.time()
    template, wl = get_template(TEMPLATE), parse_workload(spec)
    try:
        mod = tvm.IRModule({"main": template.compute(wl, 1, 1)})
        module = tvm.compile(mod, target=template.make_target()).jit()
        return check_and_time(module, wl, repeat, min_repeat_ms, start)
    except Exception as e:  # noqa: BLE001 - reported as that measurement's error
        return MeasureResult.failed(rec.UNKNOWN_ERROR, f"{type(e).__name__}: {e}"[:500], time.time() - start)


def measure_config(spec: str, index: int, repeat: int, min_repeat_ms: int) -> MeasureResult:
    from extract.autotvm.timing import measure_one
    from extract.tir.workloads import parse_workload
    return measure_one(TEMPLATE, parse_workload(spec), index, repeat, min_repeat_ms)


# ---------------------------------------------------------------- ranking
def train_jobs(workloads: Sequence[str], mode: str, model: str, runs: str, data: Sequence[str],
               epochs: Optional[int], seed: int, split_run: Optional[str],
               accuracy_runs: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    """{workload: training job} (several workloads may share one job in split mode)."""
    if mode == "split":
        if split_run:  # an existing run: used as it is, never retrained
            return {w: {"out": split_run, "argv": None} for w in workloads}
        from .accuracy import run_dir
        out = run_dir(accuracy_runs or os.path.join(DEFAULT_RUNS, "accuracy"), model, seed)
        job = {"out": out, "argv": train_argv(model, seed, out, data, epochs)}
        return {w: job for w in workloads}
    jobs = {}
    for w in workloads:
        out = os.path.join(runs, f"loo-{model}-seed{seed}-{w}")
        others = [x for x in ALL_WORKLOADS if x != w]
        jobs[w] = {"out": out, "argv": train_argv(model, seed, out, data, epochs,
                                                  extra=["--train-workloads", *others, "--test-workloads", w])}
    return jobs


def rank_space(run: str, samples) -> np.ndarray:
    """Predicted log runtimes of the space samples (index order) by the run's best weights."""
    from simulator.models.costmodel import load_trained
    from simulator.engine import setup_determinism
    model, _ = load_trained(run)
    if model.config.model.model == "xgb":
        raise SystemExit("--model xgb: the space samples carry no per_store features; tune with a "
                         "graph model or curve-mlp")
    setup_determinism(model.config.seed, 1)
    return model.predict(samples, 1024)


def dataset_runtimes(data: Sequence[str]) -> Dict[str, Dict[int, float]]:
    """{workload: {config index: runtime s}} of the training data (pass 1)."""
    from simulator.data.collection import load_data
    out: Dict[str, Dict[int, float]] = {}
    for s in load_data(list(data)):
        idx = s.meta.index
        if idx is not None and np.isfinite(s.runtimes[0]):
            out.setdefault(s.group, {})[int(idx)] = float(s.runtimes[0])
    return out


# ---------------------------------------------------------------- analysis
def random_search(values: np.ndarray, budget: int, seeds: int, seed0: int = 0) -> np.ndarray:
    """(seeds, budget) best-so-far of random draws without replacement from `values`."""
    budget = min(budget, len(values))
    out = np.empty((seeds, budget))
    for s in range(seeds):
        perm = np.random.default_rng([seed0, s]).permutation(len(values))[:budget]
        out[s] = np.minimum.accumulate(values[perm])
    return out


def first_hit(curves: np.ndarray, target: float) -> np.ndarray:
    """Per row, the number of measurements until best-so-far ≤ target (inf if never)."""
    hit = curves <= target
    return np.where(hit.any(1), hit.argmax(1) + 1, np.inf)


def _pass_times(rows: Sequence[dict]) -> Dict[Tuple[str, int], Dict[int, float]]:
    """{(kind, index): {pass: mean runtime s (inf for an error)}} of one workload's rows."""
    t: Dict[Tuple[str, int], Dict[int, float]] = {}
    for m in rows:
        ok = m["error_no"] == 0
        t.setdefault((m["kind"], m["index"]), {})[m["pass"]] = float(np.mean(m["costs"])) if ok else math.inf
    return t


def _at(t: Dict[Tuple[str, int], Dict[int, float]], kind: str, index: int, p: int) -> float:
    return t.get((kind, index), {}).get(p, math.nan)


def _guided_curves(t, top: Sequence[int], best_index: int, pass_ids: Sequence[int], kmax: int):
    """Best found after k guided measurements, per pass: relative to the dataset's best
    config measured in the same pass, and in seconds; and that best config's runtimes."""
    guided = np.full((len(pass_ids), kmax), np.nan)
    guided_abs = np.full((len(pass_ids), kmax), np.nan)
    ds_now = np.array([_at(t, "config", best_index, p) for p in pass_ids])
    for pi, p in enumerate(pass_ids):
        vals = np.array([_at(t, "config", i, p) for i in top])
        guided_abs[pi, :len(vals)] = np.fmin.accumulate(vals)
        guided[pi] = guided_abs[pi] / ds_now[pi]
    return guided, guided_abs, ds_now


def _per_k(guided: np.ndarray, guided_abs: np.ndarray, rand: np.ndarray, ks: Sequence[int]) -> Dict[str, Any]:
    """Guided best-of-k against random search's, for each k."""
    per_k = {}
    for k in ks:
        g = guided[:, k - 1]
        target = float(np.nanmedian(g))
        hits = first_hit(rand, target * (1 + 1e-12))
        within = k <= rand.shape[1]
        per_k[str(k)] = {
            "ratio_median": target, "ratio_min": float(np.nanmin(g)), "ratio_max": float(np.nanmax(g)),
            "ratio_per_pass": g.tolist(),
            "best_ms_median": float(np.nanmedian(guided_abs[:, k - 1]) * 1e3),
            "random_ratio_mean": float(rand[:, k - 1].mean()) if within else None,
            "random_ratio_p10": float(np.percentile(rand[:, k - 1], 10)) if within else None,
            "random_ratio_p90": float(np.percentile(rand[:, k - 1], 90)) if within else None,
            # measurements random search needs (mean over seeds; ∞ if beyond its budget in
            # some seeds) to do as well as model-guided with k
            "random_needed_mean": float(np.mean(hits)),
            "random_needed_median": float(np.median(hits)),
            "random_reached_share": float(np.isfinite(hits).mean()),
        }
    return per_k


def _workload_result(rows: Sequence[dict], ranking: List[int], ds: Dict[int, float], ks: Sequence[int],
                     random_seeds: int) -> Dict[str, Any]:
    """One workload's figures: guided against random search and the dataset's best."""
    t = _pass_times(rows)
    ds_best_index = min(ds, key=ds.get)
    ds_best_shipped = ds[ds_best_index]
    top = ranking[:max(ks)]
    pass_ids = sorted({m["pass"] for m in rows})
    guided, guided_abs, ds_now = _guided_curves(t, top, ds_best_index, pass_ids, max(ks))
    unsched = np.array([_at(t, "unscheduled", -1, p) for p in pass_ids])
    config0 = np.array([_at(t, "config", 0, p) for p in pass_ids])
    rand = random_search(np.array(list(ds.values())), len(ds), random_seeds) / ds_best_shipped
    med = np.nanmedian(guided, 0)
    within5 = np.flatnonzero(med <= 1.05)
    r5 = first_hit(rand, 1.05)
    return {
        "space": len(ranking), "dataset_configs": len(ds),
        "dataset_best_index": ds_best_index, "dataset_best_ms_shipped": ds_best_shipped * 1e3,
        "dataset_best_ms_now": float(np.nanmedian(ds_now) * 1e3),
        "dataset_best_now_spread": [float(np.nanmin(ds_now) * 1e3), float(np.nanmax(ds_now) * 1e3)],
        "dataset_best_rank": int(ranking.index(ds_best_index) + 1),
        "top_indices": top,
        "top_in_dataset": int(sum(i in ds for i in top)),
        "guided_curve_median": med.tolist(),
        "guided_curve_min": np.nanmin(guided, 0).tolist(), "guided_curve_max": np.nanmax(guided, 0).tolist(),
        "random_curve_mean": rand.mean(0).tolist(),
        "random_curve_p10": np.percentile(rand, 10, 0).tolist(),
        "random_curve_p90": np.percentile(rand, 90, 0).tolist(),
        "per_k": _per_k(guided, guided_abs, rand, ks),
        "guided_measurements_to_5pct": int(within5[0] + 1) if within5.size else None,
        "random_measurements_to_5pct_mean": float(np.mean(r5)),
        "random_measurements_to_5pct_median": float(np.median(r5)),
        "random_reached_5pct_share": float(np.isfinite(r5).mean()),
        "unscheduled_ms": float(np.nanmedian(unsched) * 1e3),
        "unscheduled_spread": [float(np.nanmin(unsched) * 1e3), float(np.nanmax(unsched) * 1e3)],
        "config0_ms": float(np.nanmedian(config0) * 1e3),
        "dataset_median_ms": float(np.median(np.array(sorted(ds.values()))) * 1e3),
        "errors": sum(m["error_no"] != 0 for m in rows),
    }


def analyse(workloads: Sequence[str], measurements: Sequence[dict], ranking: Dict[str, List[int]],
            dataset: Dict[str, Dict[int, float]], ks: Sequence[int], random_seeds: int,
            passes: int) -> Dict[str, Any]:
    """Per workload: the model-guided best-of-k (per measurement pass) against the
    dataset's best config measured in the same pass and against random search."""
    result: Dict[str, Any] = {"workloads": {}, "ks": list(ks), "passes": passes}
    for w in workloads:
        rows = [m for m in measurements if m["workload"] == w]
        result["workloads"][w] = _workload_result(rows, ranking[w], dataset.get(w, {}), ks, random_seeds)
    return result


def table_rows(result: Dict[str, Any]) -> List[List[Any]]:
    rows = []
    for w, r in result["workloads"].items():
        for k, v in r["per_k"].items():
            rows.append([w, int(k), v["best_ms_median"], v["ratio_median"], v["ratio_min"], v["ratio_max"],
                         v["random_ratio_mean"], v["random_ratio_p10"], v["random_ratio_p90"],
                         v["random_needed_mean"], v["random_needed_median"], r["dataset_best_ms_shipped"],
                         r["dataset_best_ms_now"], r["unscheduled_ms"], r["config0_ms"]])
    return rows


TABLE_HEADER = ["workload", "k", "guided_best_ms", "guided_vs_dataset_best", "guided_min", "guided_max",
                "random_mean", "random_p10", "random_p90", "random_needed_mean", "random_needed_median",
                "dataset_best_ms_shipped", "dataset_best_ms_now", "unscheduled_ms", "config0_ms"]


# ---------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tuning", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=2, help="training runs at a time")
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--workloads", nargs="+", default=TEST_WORKLOADS)
    ap.add_argument("--model", type=model_name, default="gcn", help="the simulator that ranks the space")
    ap.add_argument("--train", choices=["loo", "split"], default="loo",
                    help="loo: one run per workload on the eleven others; split: the cross-workload run")
    ap.add_argument("--split-run", default=None, help="with --train split: that run's folder")
    ap.add_argument("--train-seed", type=SEED, default=0)
    ap.add_argument("--tuning-epochs", type=COUNT, default=None, help="epochs of the ranking runs")
    ap.add_argument("--ks", nargs="+", type=COUNT, default=[1, 5, 10, 20])
    ap.add_argument("--passes", type=COUNT, default=3, help="measurement passes (repeats of every measurement)")
    ap.add_argument("--repeat", type=COUNT, default=3, help="time_evaluator repeats, as the dataset")
    ap.add_argument("--min-repeat-ms", type=NONNEGATIVE, default=20)
    ap.add_argument("--timeout", type=Float(0, 86400, lo_open=True), default=60.0, help="seconds per measurement")
    ap.add_argument("--random-seeds", type=COUNT, default=1000)
    ap.add_argument("--tuning-runs", type=output_folder, default=os.path.join(DEFAULT_RUNS, "tuning"))
    ap.add_argument("--spaces", type=output_folder, default=os.path.join(DEFAULT_RUNS, "spaces"))
    ap.add_argument("--space-workers", type=NONNEGATIVE, default=2, help="extraction processes (0: one per core)")
    ap.add_argument("--force", action="store_true", help="measure even while extract.measure runs")


def run(args) -> Dict[str, Any]:
    from .spaces import space_samples
    os.makedirs(args.results, exist_ok=True)
    # 1. simulators
    jobs = train_jobs(args.workloads, args.train, args.model, args.tuning_runs, args.data,
                      args.tuning_epochs, args.train_seed, args.split_run,
                      getattr(args, "accuracy_runs", None))
    unique = [j for j in {j["out"]: j for j in jobs.values()}.values() if j["argv"] is not None]
    log(f"tuning: {len(unique)} ranking run(s) of {args.model} ({args.train}) to train or reuse")
    run_many(unique, args.parallel)
    # 2. rank every config of each workload's space
    ranking: Dict[str, List[int]] = {}
    rank_rows = []
    dataset = dataset_runtimes(args.data)
    for w in args.workloads:
        samples = space_samples(w, args.spaces, TEMPLATE, args.space_workers)
        pred = rank_space(jobs[w]["out"], samples)
        indices = [int(s.meta.index) for s in samples]
        order = np.argsort(pred, kind="stable")
        ranking[w] = [indices[i] for i in order]
        for r, i in enumerate(order, 1):
            rank_rows.append([w, r, indices[i], math.exp(pred[i]) * 1e3,
                              dataset.get(w, {}).get(indices[i], math.nan) * 1e3])
        log(f"{w}: ranked {len(samples)} configs; top 5 {ranking[w][:5]}")
    write_csv(os.path.join(args.tuning_runs, "rankings.csv"),
              ["workload", "rank", "index", "predicted_ms", "dataset_ms"], rank_rows)
    # 3. measure
    if busy_measuring() and not args.force:
        raise SystemExit("extract.measure is running: timing now would disturb both (--force to override)")
    kmax = max(args.ks)
    plan: List[Tuple[str, str, int]] = []
    for w in args.workloads:
        best = min(dataset[w], key=dataset[w].get)
        configs = list(dict.fromkeys(ranking[w][:kmax] + [best, 0]))
        plan += [(w, "config", i) for i in configs] + [(w, "unscheduled", -1)]
    path = os.path.join(args.results, "tuning_measurements.jsonl")
    done = read_journal(path)
    have = {(m["workload"], m["kind"], m["index"], m["pass"]) for m in done}
    measurer = Worker(num_threads=1)
    start = time.perf_counter()
    todo = [(p, job) for p in range(args.passes)
            for job in [plan[i] for i in np.random.default_rng([7, p]).permutation(len(plan))]
            if (job[0], job[1], job[2], p) not in have]
    log(f"tuning: {len(plan)} configs × {args.passes} passes, {len(todo)} measurements to make")
    with open(path, "a", encoding="utf-8") as f:
        for n, (p, (w, kind, index)) in enumerate(todo, 1):
            if kind == "config":
                res = measurer.measure(measure_config, (w, index, args.repeat, args.min_repeat_ms), args.timeout)
            else:
                res = measurer.measure(measure_unscheduled, (w, args.repeat, args.min_repeat_ms), args.timeout * 4)
            m = {"workload": w, "kind": kind, "index": index, "pass": p, "time": time.time(), **asdict(res)}
            done.append(m)
            f.write(json.dumps(m) + "\n")
            f.flush()
            if n % 25 == 0 or n == len(todo):
                log(f"measured {n}/{len(todo)} ({time.perf_counter() - start:.0f} s)")
    measurer.close()
    result = analyse(args.workloads, done, ranking, dataset, args.ks, args.random_seeds, args.passes)
    result["config"] = {k: v for k, v in vars(args).items()}
    result["measure_seconds"] = time.perf_counter() - start
    write_json(os.path.join(args.results, "tuning.json"), result)
    write_csv(os.path.join(args.results, "tuning.csv"), TABLE_HEADER, table_rows(result))
    from .plots import plot_tuning
    plot_tuning(result, os.path.join(args.results, "tuning.png"))
    return result


def read_journal(path: str) -> List[dict]:
    """The measurements appended to `path` so far (one JSON object per line). A last line
    cut short by a kill is dropped and cut from the file, so that appending goes on after
    the last whole record; a damaged line elsewhere is an error naming file and line."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        log(f"{path}: dropping a last line cut short ({len(data) - whole} bytes; an interrupted run)")
        with open(path, "r+b") as f:
            f.truncate(whole)
    out = []
    for number, line in enumerate(data[:whole].decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            raise SimulatorError(f"{path}:{number}: not a measurement record ({e})") from None
    return out


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.results, args.tuning_runs, args.spaces):
        result = run(args)
    for w, r in result["workloads"].items():
        k10 = r["per_k"].get("10", next(iter(r["per_k"].values())))
        print(f"{w}: guided best-of-10 {k10['ratio_median']:.3f}× dataset best; random needs "
              f"{k10['random_needed_mean']:.1f}; unscheduled {r['unscheduled_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
