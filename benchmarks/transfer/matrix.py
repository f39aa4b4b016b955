"""The transfer matrix: train on one (or two, or four) workloads, rank every other one.

    python -m benchmarks.transfer [--models gcn gcn-inv mlp curve-mlp xgb knob-xgb-rank …]
        [--sizes 1 2 4 11] [--sizes-models MODEL …] [--choices 3] [--seed 0] [--epochs 40] [--parallel 1]
        [--runs runs/bench/transfer] [--results docs/results] [--data shipped]

The situation a user is in after tuning one layer: a model trained on one workload's
measured configs ranks the configs of a workload it has never seen. On the shipped x86
data (ResNet-18's C1…C12) each model is trained

* on each single workload (12 trainings, 12 × 11 (train, test) pairs),
* on `--choices` seeded pairs and quadruples of workloads (the sizes in `--sizes`),
* on every set of eleven (size 11: each workload held out once, trained on all the others —
  how far more training workloads take each model, the reference for the one-workload rows),

each time with simulator.train's cross-workload split (20% of the training workloads'
configs for validation and early stopping) and tested on every other workload. Each
(training set, test workload) pair is scored against pass 1 (the labels: Kendall τ and
top-k slowdown) and, on the configs the quiet third pass re-measured
(`docs/results/pass3_quiet.jsonl.gz`, ≈ 121 per workload), against that pass (τ, top-5);
there pass 1's own ranking, scored the same way, is the noise ceiling (`noise_ceiling`).

Models (`--models`): the specs and ensembles of `benchmarks.transfer.specs`, each a
`simulator.train` command line or a combination of them.

Runs happen in this process (the data is loaded and prepared once; `--parallel N`:
N spawned worker processes, 1 thread each); a finished run with the same command line,
data and extractor is reused from RUNS/<model>/<training set>.json.

Writes RESULTS/transfer_runs.csv (every pair's numbers), RESULTS/transfer.json (the
summary per model and training-set size, the 12 × 12 matrices) and
RESULTS/transfer_tau.png, RESULTS/transfer_top5.png (heat maps of the one-workload pairs).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, SEED, cli, locked_outputs, log, natural_key,
                      write_csv, write_json)
from .specs import ENSEMBLES, MODEL_SPECS, MODELS

TRANSFER_METRICS = ("kendall_tau", "top1_slowdown", "top5_slowdown", "top10_slowdown", "opa", "picks_to_25")
QUIET_LOG = os.path.join(DEFAULT_RESULTS, "pass3_quiet.jsonl.gz")


# ---------------------------------------------------------------- what is trained
def default_sizes(workloads: int) -> List[int]:
    """1, 2, 4 and N − 1 training workloads (leave-one-out), those that leave one to test on."""
    return sorted({k for k in (1, 2, 4, workloads - 1) if 1 <= k < workloads})


def training_sets(workloads: Sequence[str], sizes: Sequence[int], choices: int, seed: int) -> List[Tuple[str, ...]]:
    """For each size: every set of that many workloads when there are no more such sets than
    workloads (size 1: each workload alone; size N − 1: each workload held out once, the
    leave-one-out sets), else `choices` seeded distinct sets. A size that leaves no
    workload to test on is an error."""
    workloads = sorted(workloads, key=natural_key)
    out: List[Tuple[str, ...]] = []
    for size in sizes:
        if size >= len(workloads):
            raise SystemExit(f"--sizes {size}: training on {size} of {len(workloads)} workloads leaves none to test on "
                             f"(at most {len(workloads) - 1})")
        every = list(itertools.combinations(workloads, size))
        if len(every) <= len(workloads):
            out += every
            continue
        rng = np.random.default_rng([seed, size])
        picked = rng.choice(len(every), min(choices, len(every)), replace=False)
        out += [tuple(every[int(i)]) for i in sorted(picked)]
    return out


def job_argv(spec: str, train: Sequence[str], workloads: Sequence[str], seed: int,
             epochs: Optional[int], data: Sequence[str]) -> List[str]:
    return flags_argv(MODEL_SPECS[spec], train, workloads, seed, epochs, data)


def flags_argv(model_flags: Sequence[str], train: Sequence[str], workloads: Sequence[str], seed: int,
               epochs: Optional[int], data: Sequence[str]) -> List[str]:
    """simulator.train's command line of a transfer run: model `model_flags` trained on
    `train`, tested on every other workload (what `job_argv` gives a spec)."""
    test = [w for w in sorted(workloads, key=natural_key) if w not in train]
    argv = ["--data", *data, "--split", "cross-workload", "--train-workloads", *train, "--test-workloads", *test,
            "--seed", str(seed), "--threads", "1"]
    if epochs is not None:
        argv += ["--epochs", str(epochs)]
    return argv + list(model_flags)


def set_name(train: Sequence[str]) -> str:
    return "+".join(train)


# ---------------------------------------------------------------- one run, in process
_DATA: Dict[Tuple[str, ...], Any] = {}


def _data(data: Sequence[str]):
    """(samples, collection info, {feature transform: SampleSource}) loaded once per process."""
    key = tuple(data)
    if key not in _DATA:
        from simulator.data.collection import samples_and_info
        samples, collection = samples_and_info(list(data))
        _DATA[key] = (samples, collection, {})
    return _DATA[key]


def quiet_costs(path: str = QUIET_LOG) -> Dict[str, Dict[int, float]]:
    """{workload: {config index: mean runtime s}} of the quiet third pass ({} if absent)."""
    if not path or not os.path.exists(path):
        return {}
    from datasets.noise_ceiling import costs_by_workload
    return {w: {i: float(c.mean()) for i, c in by.items()} for w, by in costs_by_workload(path).items()}


def score_pairs(pred: np.ndarray, samples: Sequence, quiet: Dict[str, Dict[int, float]]) -> Dict[str, Dict[str, float]]:
    """Per test workload: the metrics against pass 1 and, on the configs the quiet pass
    re-measured, τ and top-5 slowdown against it (`quiet_kendall_tau`, `quiet_top5_slowdown`)."""
    from simulator.metrics import METRICS, evaluate
    groups = [s.group for s in samples]
    true = np.log([s.runtimes[0] for s in samples])
    result = evaluate(pred, true, groups, list(TRANSFER_METRICS))
    out: Dict[str, Dict[str, float]] = {}
    for g in sorted(set(groups), key=natural_key):
        out[g] = {m: result[m]["per_workload"][g] for m in TRANSFER_METRICS}
        rows = [k for k, s in enumerate(samples) if s.group == g and s.meta.index in quiet.get(g, {})]
        if len(rows) >= 3:
            p = np.exp(pred[rows])
            t = np.array([quiet[g][samples[k].meta.index] for k in rows])
            out[g]["quiet_kendall_tau"] = METRICS.get("kendall_tau").fn(p, t)
            out[g]["quiet_top5_slowdown"] = METRICS.get("top5_slowdown").fn(p, t)
            out[g]["quiet_configs"] = len(rows)
    return out


def noise_ceiling(samples: Sequence, quiet: Dict[str, Dict[int, float]]) -> Optional[Dict[str, Any]]:
    """What the "vs quiet pass" columns show for a model that knew pass 1 exactly: pass 1's own
    ranking of each workload's re-measured configs, scored against the quiet pass (τ, top-5
    slowdown), per workload and summarised as a model's one-workload row is (mean, median and
    worst over the workloads). No model of pass 1's labels can beat it there; None without a
    quiet pass."""
    from simulator.metrics import METRICS
    per: Dict[str, Dict[str, float]] = {}
    for g in sorted(quiet, key=natural_key):
        rows = [s for s in samples if s.group == g and s.meta.index in quiet[g]]
        if len(rows) < 3:
            continue
        p = np.array([s.runtimes[0] for s in rows])
        t = np.array([quiet[g][s.meta.index] for s in rows])
        per[g] = {"quiet_kendall_tau": METRICS.get("kendall_tau").fn(p, t),
                  "quiet_top5_slowdown": METRICS.get("top5_slowdown").fn(p, t), "quiet_configs": len(rows)}
    if not per:
        return None
    tau = np.array([v["quiet_kendall_tau"] for v in per.values()])
    top5 = np.array([v["quiet_top5_slowdown"] for v in per.values()])
    return {"workloads": per, "quiet_mean_tau": float(tau.mean()), "quiet_mean_top5": float(top5.mean()),
            "quiet_median_top5": float(np.median(top5)), "quiet_worst_top5": float(top5.max())}


def train_model(argv: Sequence[str], log_path: Optional[str] = None):
    """Train the model `simulator.train ARGV` describes, in this process, on data loaded
    once per process; (model, config, {"train", "val", "test": SampleSource}, run summary).
    The training's progress goes to `log_path` (default: nowhere)."""
    from simulator.models.costmodel import build_cost_model
    from simulator.engine import setup_determinism
    from simulator.data.in_memory import SampleSource
    from simulator.data.sources import data_kind
    from simulator.data.splits import make_split
    from simulator.train import build_parser, config_from_flags, explicit_flags, validate

    flags = vars(build_parser().parse_args(list(argv)))
    config = config_from_flags(flags)
    config = validate(data_kind(config.data.data).resolve(config, set(explicit_flags(list(argv)))))
    samples, collection, sources = _data(config.data.data)
    key = (config.data.feature_transform, config.model.features)  # what the model reads
    if key not in sources:
        sources[key] = SampleSource(samples, None, key[0], collection, key[1])
    source = sources[key]
    d = config.data
    split = make_split([s.group for s in samples], d.split, config.seed, d.train_workloads, d.test_workloads,
                       d.val_fraction, d.train_fraction)
    parts = {p: source.subset(split[p]) for p in ("train", "val", "test")}
    setup_determinism(config.seed, config.threads)
    if log_path:
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    with open(log_path or os.devnull, "w", encoding="utf-8") as logf, contextlib.redirect_stderr(logf), \
            contextlib.redirect_stdout(io.StringIO()):
        model = build_cost_model(config, source.info)
        model.set_normalization(parts["train"].normalization(model.batch_spec, config.seed))
        summary = model.fit(parts["train"], parts["val"])
    return model, config, parts, summary


def run_job(job: Dict[str, Any]) -> Dict[str, Any]:
    """Train one model on one training set (in this process) and score every test pair."""
    start = time.perf_counter()
    model, config, parts, summary = train_model(job["argv"], job["log"])
    pred = parts["test"].predict(model, config.fit.eval_batch_size)
    seconds = time.perf_counter() - start
    pairs = score_pairs(pred, parts["test"].samples, job.get("quiet") or {})
    return {"spec": job["spec"], "train": list(job["train"]), "argv": job["argv"], "key": job["key"],
            "seconds": seconds, "run": summary, "pairs": pairs,
            "predictions": {s.name: float(v) for s, v in zip(parts["test"].samples, pred)}}


def _worker(job: Dict[str, Any]) -> Dict[str, Any]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    result = run_job(job)
    with open(job["out"] + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(job["out"] + ".tmp", job["out"])
    return result


def _cached(job: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    if not os.path.exists(job["out"]):
        return None
    with open(job["out"], encoding="utf-8") as f:
        result = json.load(f)
    if job.get("needs_predictions") and "predictions" not in result:
        return None  # an ensemble's member, run before predictions were kept
    return result if result.get("key") == job["key"] else None


def standardised(pred: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """`pred` standardised within each group (mean 0, std 1; a constant group: 0)."""
    out = np.zeros(len(pred))
    groups = np.asarray(groups)
    for g in set(groups.tolist()):
        rows = groups == g
        p = pred[rows]
        std = p.std()
        out[rows] = (p - p.mean()) / std if std > 0 else 0.0
    return out


def ensemble_results(name: str, results: Sequence[Dict[str, Any]], samples: Sequence,
                     quiet: Dict[str, Dict[int, float]]) -> List[Dict[str, Any]]:
    """The ensemble `name`'s result for each training set its members were all trained
    on: the members' per-workload standardised predictions, aggregated, scored."""
    ensemble = ENSEMBLES[name]
    members = ensemble.members
    by = {(r["spec"], tuple(r["train"])): r for r in results}
    out = []
    for train in dict.fromkeys(tuple(r["train"]) for r in results if r["spec"] == members[0]):
        runs = [by.get((m, train)) for m in members]
        if any(r is None for r in runs):
            continue
        test = [s for s in samples if s.group not in train and s.name in runs[0]["predictions"]]
        groups = [s.group for s in test]
        pred = ensemble.combine(np.array([standardised(np.array([r["predictions"][s.name] for s in test]), groups)
                                          for r in runs]))
        out.append({"spec": name, "train": list(train),
                    "argv": [f"{ensemble.aggregation} ensemble of {', '.join(members)}"],
                    "seconds": sum(r["seconds"] for r in runs), "run": {},
                    "pairs": score_pairs(pred, test, quiet)})
    return out


def complete_pairs(results: Sequence[Dict[str, Any]], samples: Sequence) -> None:
    """Fill in, from a run's kept predictions, the TRANSFER_METRICS its pairs were scored
    without (runs made before a metric was added); runs without predictions stay as they are."""
    from simulator.metrics import evaluate
    by_group: Dict[str, List] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    for r in results:
        for g, pair in r["pairs"].items():
            missing = [m for m in TRANSFER_METRICS if m not in pair]
            if not missing or "predictions" not in r:
                continue
            test = [s for s in by_group[g] if s.name in r["predictions"]]
            scored = evaluate(np.array([r["predictions"][s.name] for s in test]),
                              np.log([s.runtimes[0] for s in test]), [g] * len(test), missing)  # as score_pairs does
            pair.update({m: scored[m]["per_workload"][g] for m in missing})


def run_all(jobs: Sequence[Dict[str, Any]], parallel: int = 1) -> List[Dict[str, Any]]:
    """Every job's result (cached ones reused), in job order."""
    results: List[Optional[Dict[str, Any]]] = [_cached(j) for j in jobs]
    todo = [i for i, r in enumerate(results) if r is None]
    log(f"transfer: {len(jobs)} trainings, {len(jobs) - len(todo)} reused, {len(todo)} to run, {parallel} at a time")
    start = time.perf_counter()

    def done(i: int, result: Dict[str, Any], n: int) -> None:
        results[i] = result
        tau = np.mean([p["kendall_tau"] for p in result["pairs"].values() if p["kendall_tau"] is not None])
        log(f"{n}/{len(todo)} {jobs[i]['spec']} on {set_name(jobs[i]['train'])}: mean τ {tau:.3f} "
            f"({result['seconds']:.0f} s; {time.perf_counter() - start:.0f} s so far)")
    if parallel > 1 and len(todo) > 1:
        import multiprocessing
        with multiprocessing.get_context("spawn").Pool(parallel) as pool:
            for n, (i, result) in enumerate(zip(todo, pool.imap(_worker, [jobs[i] for i in todo])), 1):
                done(i, result, n)
    else:
        for n, i in enumerate(todo, 1):
            done(i, _worker(jobs[i]), n)
    return results  # type: ignore[return-value]


def make_jobs(models: Sequence[str], sets: Sequence[Tuple[str, ...]], workloads: Sequence[str], seed: int,
              epochs: Optional[int], data: Sequence[str], runs: str, data_key: str,
              quiet: Dict[str, Dict[int, float]], sizes_models: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """One job per (model, training set); with `sizes_models`, the training sets of more than one
    workload only for those models (and the members of those ensembles)."""
    jobs = []
    members = {m for spec in models if spec in ENSEMBLES for m in ENSEMBLES[spec].members}
    many = None if sizes_models is None else (
        set(sizes_models) | {m for spec in sizes_models if spec in ENSEMBLES for m in ENSEMBLES[spec].members})
    for spec in dict.fromkeys([m for m in models if m not in ENSEMBLES] + sorted(members)):
        if spec not in MODEL_SPECS:
            raise SystemExit(f"unknown transfer model {spec!r} (known: {', '.join(list(MODEL_SPECS) + list(ENSEMBLES))})")
        for train in sets:
            if many is not None and len(train) > 1 and spec not in many:
                continue
            argv = job_argv(spec, train, workloads, seed, epochs, data)
            out = os.path.join(runs, spec, set_name(train) + ".json")
            jobs.append({"spec": spec, "train": train, "argv": argv, "out": out, "log": out[:-5] + ".log",
                         "key": json.dumps([argv, data_key]), "quiet": quiet, "needs_predictions": spec in members})
    return jobs


# ---------------------------------------------------------------- summaries
def _values(results: Sequence[Dict[str, Any]], metric: str) -> np.ndarray:
    return np.array([p.get(metric) for r in results for p in r["pairs"].values() if p.get(metric) is not None],
                    dtype=float)


def _picks(results: Sequence[Dict[str, Any]], pairs: int) -> Dict[str, Optional[float]]:
    """Median, 90th percentile and worst of `picks_to_25` over the pairs (None unless every pair has it)."""
    picks = _values(results, "picks_to_25")
    if picks.size == 0 or picks.size != pairs:
        return {"median_picks_to_25": None, "p90_picks_to_25": None, "worst_picks_to_25": None}
    return {"median_picks_to_25": float(np.median(picks)),
            "p90_picks_to_25": float(np.percentile(picks, 90, method="higher")),  # a pair's own count
            "worst_picks_to_25": float(picks.max())}


def summarize(results: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{model: {size: {mean/worst τ, mean/worst top-5, quiet τ, pairs, trainings, seconds}}}."""
    out: Dict[str, Dict[str, Dict[str, float]]] = {}
    for spec in dict.fromkeys(r["spec"] for r in results):
        out[spec] = {}
        for size in sorted({len(r["train"]) for r in results if r["spec"] == spec}):
            rs = [r for r in results if r["spec"] == spec and len(r["train"]) == size]
            tau, top5, top1 = _values(rs, "kendall_tau"), _values(rs, "top5_slowdown"), _values(rs, "top1_slowdown")
            qtau, qtop5 = _values(rs, "quiet_kendall_tau"), _values(rs, "quiet_top5_slowdown")
            out[spec][str(size)] = {
                "trainings": len(rs), "pairs": int(tau.size),
                "mean_tau": float(tau.mean()), "worst_tau": float(tau.min()), "median_tau": float(np.median(tau)),
                "mean_top5": float(top5.mean()), "worst_top5": float(top5.max()),
                "median_top5": float(np.median(top5)), "mean_top1": float(top1.mean()),
                "pairs_top5_over_25": int((top5 > 0.25).sum()),
                "quiet_mean_tau": float(qtau.mean()) if qtau.size else None,
                "quiet_mean_top5": float(qtop5.mean()) if qtop5.size else None,
                "quiet_worst_top5": float(qtop5.max()) if qtop5.size else None,
                **_picks(rs, int(tau.size)),
                "seconds": float(sum(r["seconds"] for r in rs))}
    return out


def matrices(results: Sequence[Dict[str, Any]], workloads: Sequence[str], metric: str) -> Dict[str, List[List]]:
    """{model: 12 × 12 [train][test] of `metric` for the one-workload trainings (None on the diagonal)}."""
    ws = sorted(workloads, key=natural_key)
    out: Dict[str, List[List]] = {}
    for spec in dict.fromkeys(r["spec"] for r in results):
        m: List[List] = [[None] * len(ws) for _ in ws]
        for r in results:
            if r["spec"] == spec and len(r["train"]) == 1:
                i = ws.index(r["train"][0])
                for w, p in r["pairs"].items():
                    m[i][ws.index(w)] = p.get(metric)
        out[spec] = m
    return out


def long_rows(results: Sequence[Dict[str, Any]]) -> List[List[Any]]:
    rows = []
    for r in results:
        for w, p in r["pairs"].items():
            for metric, v in p.items():
                rows.append([r["spec"], set_name(r["train"]), len(r["train"]), w, metric, v])
    return rows


def plot_heatmaps(mats: Dict[str, List[List]], workloads: Sequence[str], metric: str, path: str,
                  title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ws = sorted(workloads, key=natural_key)
    specs = list(mats)
    cols = min(4, len(specs))
    rows = -(-len(specs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.5 * rows), squeeze=False)
    is_tau = metric == "kendall_tau"
    for ax, spec in zip(axes.flat, specs):
        m = np.array([[np.nan if v is None else v for v in row] for row in mats[spec]], dtype=float)
        shown = m if is_tau else np.minimum(m * 100, 100)
        im = ax.imshow(shown, cmap="viridis" if is_tau else "magma_r", vmin=0 if is_tau else 0,
                       vmax=1 if is_tau else 100)
        mean = np.nanmean(m)
        ax.set_title(f"{spec}: mean {mean:.2f}" if is_tau else f"{spec}: mean {100 * mean:.0f}%", fontsize=9)
        ax.set_xticks(range(len(ws)), ws, fontsize=6, rotation=90)
        ax.set_yticks(range(len(ws)), ws, fontsize=6)
        ax.set_xlabel("test workload", fontsize=7)
        ax.set_ylabel("trained on", fontsize=7)
    for ax in list(axes.flat)[len(specs):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="Kendall τ" if is_tau else "top-5 slowdown % (capped at 100)")
    fig.suptitle(title, fontsize=11)
    from extract.fileio import atomic_write
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def write_outputs(results: Sequence[Dict[str, Any]], workloads: Sequence[str], results_dir: str,
                  args: Dict[str, Any], extractor: Optional[str] = None,
                  ceiling: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    os.makedirs(results_dir, exist_ok=True)
    write_csv(os.path.join(results_dir, "transfer_runs.csv"),
              ["model", "trained_on", "size", "test_workload", "metric", "value"], long_rows(results))
    out = {"summary": summarize(results), "workloads": sorted(workloads, key=natural_key), "extractor": extractor,
           "tau": matrices(results, workloads, "kendall_tau"),
           "top5": matrices(results, workloads, "top5_slowdown"),
           "quiet_tau": matrices(results, workloads, "quiet_kendall_tau"),
           "noise_ceiling": ceiling,
           "trainings": [{"model": r["spec"], "trained_on": r["train"], "argv": r["argv"], "seconds": r["seconds"],
                          "run": r["run"]} for r in results],
           "protocol": args}
    write_json(os.path.join(results_dir, "transfer.json"), out)
    plot_heatmaps(out["tau"], workloads, "kendall_tau", os.path.join(results_dir, "transfer_tau.png"),
                  "Kendall τ, trained on one workload (row), tested on another (column)")
    plot_heatmaps(out["top5"], workloads, "top5_slowdown", os.path.join(results_dir, "transfer_top5.png"),
                  "top-5 slowdown, trained on one workload (row), tested on another (column)")
    return out


# ---------------------------------------------------------------- CLI
def add_arguments(ap: argparse.ArgumentParser, prefix: str = "",
                  sizes_models: Optional[Sequence[str]] = None) -> None:
    """The transfer options (`prefix`: benchmarks.all's "transfer-"); `sizes_models`: the default
    of --sizes-models (None: every model)."""
    ap.add_argument(f"--{prefix}models", nargs="+", default=MODELS,
                    help=f"of: {', '.join(MODEL_SPECS)}; ensembles: {', '.join(ENSEMBLES)}")
    ap.add_argument(f"--{prefix}sizes", nargs="+", type=COUNT, default=None,
                    help="training-set sizes (default: 1, 2, 4 and N − 1 of N workloads, those below N; every set "
                         "of a size with no more sets than workloads: 1 and N − 1)")
    ap.add_argument(f"--{prefix}sizes-models", nargs="+", default=None if sizes_models is None else list(sizes_models),
                    metavar="MODEL", help="train only these models (of --models) on the sets of more than one "
                    f"workload (default: {'every model' if sizes_models is None else ' '.join(sizes_models)})")
    ap.add_argument(f"--{prefix}choices", type=COUNT, default=3,
                    help="seeded training sets per size with more sets than workloads (2, 4)")
    ap.add_argument(f"--{prefix}seed", type=SEED, default=0)
    ap.add_argument(f"--{prefix}train-only", nargs="+", default=None, metavar="W",
                    help="train only on these single workloads (a subset of the pairs, for iteration)")
    ap.add_argument(f"--{prefix}epochs", type=COUNT, default=40,
                    help="graph/MLP models (one workload is 480 training configs; early stopping as simulator.train)")
    ap.add_argument(f"--{prefix}quiet-log", default=QUIET_LOG, help="the quiet re-measurement (second reference)")


def run(args, data: Sequence[str], runs: str, results_dir: str, parallel: int, prefix: str = "") -> Dict[str, Any]:
    from simulator.data.collection import samples_and_info
    get = lambda name: getattr(args, prefix.replace("-", "_") + name)  # noqa: E731
    asked = set(get("models")) | {m for spec in get("models") if spec in ENSEMBLES for m in ENSEMBLES[spec].members}
    unknown = [m for m in get("sizes_models") or [] if m not in asked]
    if unknown:
        raise SystemExit(f"--{prefix}sizes-models {' '.join(unknown)}: not in --{prefix}models")
    samples, collection = samples_and_info(list(data))
    workloads = sorted({s.group for s in samples}, key=natural_key)
    sizes = get("sizes") or default_sizes(len(workloads))
    sets = training_sets(workloads, sizes, get("choices"), get("seed"))
    if get("train_only"):
        sets = [s for s in sets if len(s) > 1 or s[0] in get("train_only")]
    data_key = f"{collection.extractor}:{len(samples)}"
    quiet = quiet_costs(get("quiet_log"))
    jobs = make_jobs(get("models"), sets, workloads, get("seed"), get("epochs"), data, runs, data_key, quiet,
                     get("sizes_models"))
    results = run_all(jobs, parallel)
    complete_pairs(results, samples)
    for name in [m for m in get("models") if m in ENSEMBLES]:
        results += ensemble_results(name, results, samples, quiet)
    results = [r for r in results if r["spec"] in get("models")]  # members asked for only as members: not shown
    protocol = {k: get(k) for k in ("models", "choices", "seed", "epochs", "sizes_models")}
    protocol["sizes"] = sizes
    out = write_outputs(results, workloads, results_dir, protocol, collection.extractor, noise_ceiling(samples, quiet))
    for spec, per in out["summary"].items():
        s = per.get("1", next(iter(per.values())))
        log(f"{spec:18s} one workload: τ {s['mean_tau']:.3f} (worst {s['worst_tau']:.3f}), top-5 "
            f"{100 * s['mean_top5']:.1f}% (worst {100 * s['worst_top5']:.0f}%)")
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--runs", default=os.path.join(DEFAULT_RUNS, "transfer"))
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=1, help="worker processes (1 thread each)")
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.results, args.runs):
        run(args, args.data, args.runs, args.results, args.parallel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
