"""Speed of scoring MetaSchedule candidates with the simulator: candidates/s per stage and end
to end, beside MetaSchedule's own cost model (PerStoreFeature + XGBoost), in one run.

    python -m benchmarks.metaschedule.features [--count 512] [--workloads NAME ...] [--templates]
        [--workers 1 2] [--es-trials 64] [--es-workloads matmul_512] [--out FILE.json]
        [--filter-workloads NAME ... [--filter-keep 0.25] [--filter-es-trials 128]]

Candidates: for each operator of `extract.metaschedule.candidates.WORKLOADS` (matmul 512³, a
ResNet conv2d, a depthwise conv2d, a batch matmul, softmax, layer norm), `--count`
schedules drawn from MetaSchedule's own llvm design space with fresh sampling
decisions and its postprocessors applied — what its evolutionary search hands a cost
model; also a CUDA matmul, and (`--templates`) configs of this project's two conv2d
templates (x86 and CUDA) on ResNet-18's 3×3 64-channel layer.

Per case:
  * stages, ms per candidate, in this process (CPU time): each lowering pass of
    `lower_for_features`, the TIR walk (`tir_to_graph`), GraphSample building, `prepare`, `make_batch` and
    the forward pass of a freshly built `simulator` GraphModel (gcn, 64 wide, 3 layers;
    timing does not depend on its weights) in batches of 256 (torch at 1 thread);
  * end to end, candidates/s (wall): Schedule → score for every candidate, by the
    featurization path with each of `--workers` processes (`extract.tir.featurize`: forked
    for each call);
  * MetaSchedule's XGBModel.predict (PerStoreFeature rows + booster; trained first on
    64 candidates with made-up runtimes, so that it predicts rather than guesses), its
    feature extractor with as many threads as the largest `--workers` — how a tuning
    run configures it.
`--es-trials N` (0: off) also runs MetaSchedule's evolutionary search for N trials on
each `--es-workloads` operator without building or measuring (made-up runtimes), once
scoring with the simulator (fast path, forked workers, graph cache) and once with
XGBModel, and reports the time inside the cost model against the search's own.

`--filter-workloads NAME ...` rates two-stage scoring (`GNNCostModel(filter_keep=…)`,
`simulator.metaschedule.prefilter`) with the GNN of `--checkpoint` (default: the shipped pre-trained
gcn): candidates/s of `--filter-count` fresh candidates by the GNN alone, by the two stages
(warmed up first on twice as many others) and by PerStoreFeature + XGB, with τ and top-64
recall of the first stage against the GNN on them; and (`--filter-es-trials N`) an
evolutionary search (made-up runtimes, the GNN not fine-tuned) scored by the GNN alone —
a shadow first stage, fed as the two-stage model would feed it, rated on every call:
the share of the GNN's own top-64 it keeps, Kendall τ against the GNN — then by the two
stages and by XGBModel.

When another process owns a core (`taskset -c 0 python -m benchmarks.metaschedule.features`),
only the cores this process may use count: `--workers` above that is skipped.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

BATCH = 256
PASS_NAMES = ("CanonicalizeLoop", "LowerCrossThreadReduction", "LowerInitBlock",
              "PlanAndUpdateBufferAllocationLocation", "ConvertBlocksToOpaque", "LiftThreadBinding",
              "CompactBufferAllocation", "LowerMatchBuffer", "StmtSimplify(s_tir)", "LowerOpaqueBlock",
              "FlattenBuffer", "StmtSimplify(tirx)")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Case:
    name: str
    kind: str          # "metaschedule" or "template"
    target: Any
    schedules: List[Any]


# ---------------------------------------------------------------- candidates
def metaschedule_case(name: str, count: int, cuda: bool = False, seed: int = 0) -> Case:
    from extract.metaschedule import candidates as msc

    target = msc.cuda_target() if cuda else msc.llvm_target()
    ctx = msc.tune_context(msc.workload_module(name), target, seed=seed)
    return Case(f"{name}@cuda" if cuda else name, "metaschedule", target,
                msc.sample_candidates(ctx, count, seed=seed))


def template_case(template_name: str, count: int, seed: int = 0) -> Case:
    from extract.autotvm.templates import Conv2dWorkload, get_template
    from extract.autotvm.templates.conv2d_cuda import InvalidGpuConfig

    template = get_template(template_name)
    wl = Conv2dWorkload(1, 64, 56, 56, 64, 3, 3, 1, 1)  # ResNet-18's C2
    space = template.space(wl)
    rng = np.random.default_rng(seed)
    schedules: List[Any] = []
    for index in rng.permutation(len(space)):
        try:
            schedules.append(template.schedule(wl, space.get(int(index))))
        except InvalidGpuConfig:
            continue
        if len(schedules) == count:
            break
    return Case(f"{template_name}:{wl.key}", "template", template.make_target(), schedules)


# ---------------------------------------------------------------- the GNN side
def fresh_model():
    import torch

    from extract.tir.graph import FEATURE_NAMES, VOCABULARY
    from simulator.models.model import GraphModel

    torch.manual_seed(0)
    return GraphModel("gcn", len(FEATURE_NAMES), len(VOCABULARY)).eval()


def score(model, samples, stages: Optional[Dict[str, float]] = None) -> np.ndarray:
    """Predicted log runtimes of samples: prepare, batch, forward (stage CPU seconds
    added to `stages`)."""
    import torch

    from extract.tir.graph import VOCABULARY
    from simulator.data.batching import make_batch, prepare

    clock = time.process_time
    t0 = clock()
    items = prepare(samples, {g: 0 for g in {s.group for s in samples}}, len(VOCABULARY))
    t1 = clock()
    out, batch_s, forward_s = [], 0.0, 0.0
    with torch.no_grad():
        for start in range(0, len(items), BATCH):
            t2 = clock()
            batch = make_batch(items[start:start + BATCH])
            t3 = clock()
            out.append(model(batch).numpy())
            batch_s, forward_s = batch_s + t3 - t2, forward_s + clock() - t3
    if stages is not None:
        for key, value in (("prepare", t1 - t0), ("batch", batch_s), ("forward", forward_s)):
            stages[key] = stages.get(key, 0.0) + value
    return np.concatenate(out) if out else np.zeros(0)


# ---------------------------------------------------------------- measurements
def stage_times(case: Case, model) -> Dict[str, Any]:
    """CPU ms per candidate of each stage, one process."""
    from extract.tir.featurize import to_sample
    from extract.tir.graph import feature_passes, tir_to_graph

    clock = time.process_time
    passes = feature_passes()
    per_pass = np.zeros(len(passes))
    funcs = []
    for sch in case.schedules:
        mod = sch.mod
        for k, p in enumerate(passes):
            t = clock()
            mod = p(mod)
            per_pass[k] += clock() - t
        funcs.append(mod["main"])
    n = len(funcs)
    t = clock()
    graphs = [tir_to_graph(f) for f in funcs]
    walk = clock() - t
    t = clock()
    samples = [to_sample((g.edges, g.node_types, g.node_features, g.curve, dict(g.unknown)), case.name,
                         f"{case.name}/{i}", {}) for i, g in enumerate(graphs)]
    sample = clock() - t
    stages: Dict[str, float] = {}
    score(model, samples, stages)
    nodes = [len(g.node_types) for g in graphs]
    ms = {"lower": 1e3 * per_pass.sum() / n,
          "lower_passes": {name: 1e3 * v / n for name, v in zip(PASS_NAMES, per_pass)},
          "walk": 1e3 * walk / n, "sample": 1e3 * sample / n,
          **{k: 1e3 * v / n for k, v in stages.items()}}
    return {"nodes": {"min": min(nodes), "mean": float(np.mean(nodes)), "max": max(nodes)}, "stages_ms": ms}


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (forked workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def end_to_end(case: Case, model, workers: int) -> Dict[str, float]:
    """Schedule → score for every candidate: candidates/s (wall) and CPU ms per
    candidate (all processes)."""
    from extract.tir.featurize import featurize_schedules

    start, cpu = time.perf_counter(), cpu_seconds()
    samples = featurize_schedules(case.schedules, case.target, case.name, workers=workers)
    score(model, samples)
    n = len(case.schedules)
    return {"per_s": n / (time.perf_counter() - start), "cpu_ms": 1e3 * (cpu_seconds() - cpu) / n}


def xgb_model(case: Case, threads: int, train: int = 64):
    """MetaSchedule's XGBModel, trained on `train` candidates with made-up runtimes, and
    the TuneContext it predicts in."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule import candidates as msc

    ctx = msc.tune_context(case.schedules[0].mod, case.target, num_threads=threads)
    model = ms.cost_model.XGBModel(extractor=ms.feature_extractor.PerStoreFeature(), num_warmup_samples=0,
                                   adaptive_training=False, num_tuning_cores=threads, verbose_eval=10 ** 6)
    rng = np.random.default_rng(0)
    train_set = [candidate(s) for s in case.schedules[:train]]
    model.update(ctx, train_set, [ms.runner.RunnerResult(run_secs=[float(x)], error_msg=None)
                                  for x in rng.uniform(1e-4, 1e-2, len(train_set))])
    return model, ctx


def candidate(sch):
    from tvm.s_tir import meta_schedule as ms
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"]))


def metaschedule_reference(case: Case, threads: int) -> Dict[str, Dict[str, float]]:
    """XGBModel.predict (features + booster) and its features alone: candidates/s (wall),
    CPU ms per candidate."""
    from tvm.s_tir import meta_schedule as ms

    model, ctx = xgb_model(case, threads)
    candidates = [candidate(s) for s in case.schedules]
    n, out = len(candidates), {}
    for key, run in (("per_store_xgb", lambda: model.predict(ctx, candidates)),
                     ("per_store_only", lambda: ms.feature_extractor.PerStoreFeature().extract_from(ctx, candidates))):
        start, cpu = time.perf_counter(), cpu_seconds()
        run()
        out[key] = {"per_s": n / (time.perf_counter() - start), "cpu_ms": 1e3 * (cpu_seconds() - cpu) / n}
    return out


def measure_case(case: Case, model, workers: Sequence[int]) -> Dict[str, Any]:
    log(f"{case.name}: {len(case.schedules)} candidates")
    result: Dict[str, Any] = {"name": case.name, "kind": case.kind, "target": str(case.target.kind.name),
                              "candidates": len(case.schedules), **stage_times(case, model)}
    runs = {}
    for w in workers:
        runs[f"fast_{w}proc"] = end_to_end(case, model, w)
    runs.update(metaschedule_reference(case, max(workers)))
    result["per_second"] = {k: v["per_s"] for k, v in runs.items()}
    result["cpu_ms_per_candidate"] = {k: v["cpu_ms"] for k, v in runs.items()}
    return result


# ---------------------------------------------------------------- the evolutionary search
def gnn_cost_model(model, workers: int):
    """A MetaSchedule cost model scoring with the simulator through the fast path
    (scores: −predicted log runtime; `update` does nothing here), timing itself."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    from extract.tir.featurize import GraphCache, featurize_schedules

    @derived_object
    class TimedGNN(ms.cost_model.PyCostModel):
        def __init__(self) -> None:
            self.cache, self.seconds, self.cpu_seconds, self.scored = GraphCache(), 0.0, 0.0, 0

        def load(self, path: str) -> None:
            pass

        def save(self, path: str) -> None:
            pass

        def update(self, context, candidates, results) -> None:
            pass

        def predict(self, context, candidates) -> np.ndarray:
            start, cpu = time.perf_counter(), cpu_seconds()
            samples = featurize_schedules(candidates, context.target, "task", workers=workers, cache=self.cache)
            out = -score(model, samples).astype("float64")
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += cpu_seconds() - cpu
            self.scored += len(candidates)
            return out

    return TimedGNN()


def timed_xgb(threads: int):
    """MetaSchedule's XGBModel, timing its predict and update calls; `warm_up` trains it
    first (otherwise it guesses at random until it has 100 measurements)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    inner = ms.cost_model.XGBModel(num_tuning_cores=threads, verbose_eval=10 ** 6, num_warmup_samples=0)

    @derived_object
    class TimedXGB(ms.cost_model.PyCostModel):
        def __init__(self) -> None:
            self.seconds, self.cpu_seconds, self.update_seconds, self.scored = 0.0, 0.0, 0.0, 0

        def load(self, path: str) -> None:
            pass

        def save(self, path: str) -> None:
            pass

        def update(self, context, candidates, results) -> None:
            start = time.perf_counter()
            inner.update(context, candidates, results)
            self.update_seconds += time.perf_counter() - start

        def warm_up(self, context, schedules) -> None:
            times = np.random.default_rng(1).uniform(1e-4, 1e-2, len(schedules))
            inner.update(context, [candidate(s) for s in schedules],
                         [ms.runner.RunnerResult(run_secs=[float(t)], error_msg=None) for t in times])

        def predict(self, context, candidates) -> np.ndarray:
            start, cpu = time.perf_counter(), cpu_seconds()
            out = inner.predict(context, candidates)
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += cpu_seconds() - cpu
            self.scored += len(candidates)
            return out

    return TimedXGB()


def search(name: str, trials: int, cost_model, threads: int, seed: int = 0,
           population: int = 512) -> Dict[str, Any]:
    """MetaSchedule's evolutionary search (its defaults: a population of 512, 4
    generations) for `trials` trials, 64 per round, with made-up runtimes instead of
    building and measuring."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule import candidates as msc

    target = msc.llvm_target()
    ctx = msc.tune_context(msc.workload_module(name), target, seed=seed, num_threads=threads,
                           search_strategy=ms.search_strategy.EvolutionarySearch(population_size=population))
    database = ms.database.MemoryDatabase()
    if hasattr(cost_model, "warm_up"):
        cost_model.warm_up(ctx, msc.sample_candidates(ctx, 64, seed=seed + 1))
    ctx.pre_tuning(max_trials=trials, num_trials_per_iter=min(64, trials), design_spaces=ctx.generate_design_space(),
                   database=database, cost_model=cost_model)
    workload = database.commit_workload(ctx.mod)
    rng = np.random.default_rng(seed)
    search_s = 0.0
    while True:
        start = time.perf_counter()
        candidates = ctx.generate_measure_candidates()
        search_s += time.perf_counter() - start
        if not candidates:
            break
        results = [ms.runner.RunnerResult(run_secs=[float(x)], error_msg=None)
                   for x in rng.uniform(1e-4, 1e-2, len(candidates))]
        for c, r in zip(candidates, results):
            database.commit_tuning_record(ms.database.TuningRecord(
                c.sch.trace, workload, r.run_secs, target, ms.arg_info.ArgInfo.from_prim_func(c.sch.mod["main"])))
        start = time.perf_counter()
        ctx.notify_runner_results(candidates, results)  # → cost_model.update
        search_s += time.perf_counter() - start
    ctx.post_tuning()
    out = {"search_s": search_s, "cost_model_s": cost_model.seconds + getattr(cost_model, "update_seconds", 0.0),
           "predict_s": cost_model.seconds, "predict_cpu_s": cost_model.cpu_seconds, "scored": cost_model.scored}
    out["cost_model_share"] = out["cost_model_s"] / search_s if search_s else float("nan")
    out["scored_per_s"] = cost_model.scored / cost_model.seconds if cost_model.seconds else float("nan")
    if hasattr(cost_model, "cache"):
        out["cache_hit_rate"] = cost_model.cache.hits / max(1, cost_model.cache.hits + cost_model.cache.misses)
    return out


def search_comparison(names: Sequence[str], trials: int, model, workers: int,
                      population: int = 512) -> List[Dict[str, Any]]:
    rows = []
    for name in names:
        log(f"evolutionary search on {name}, {trials} trials: gnn, then xgb")
        rows.append({"name": name, "trials": trials, "population": population,
                     "gnn": search(name, trials, gnn_cost_model(model, workers), workers, population=population),
                     "xgb": search(name, trials, timed_xgb(workers), workers, population=population)})
    return rows


# ---------------------------------------------------------------- two-stage scoring



def _rank_quality(stage1: np.ndarray, gnn: np.ndarray, kept: np.ndarray, top: int = 64) -> Dict[str, float]:
    """Kendall τ of stage-1 and GNN scores (where stage 1 scored), and the share of the
    GNN's `top` best that the filter kept."""
    from scipy.stats import kendalltau

    ready = np.isfinite(stage1)
    best = np.argsort(-gnn, kind="stable")[:top]
    tau = float(kendalltau(stage1[ready], gnn[ready])[0]) if ready.sum() > 1 else float("nan")
    return {"tau": tau, "recall": float(kept[best].mean()), "ready": int(ready.sum()), "kept": int(kept.sum()),
            "candidates": len(gnn)}


def two_stage_rates(name: str, model, keep: float, count: int, warmup: int, workers: int,
                    kind: str = "xgb") -> Dict[str, Any]:
    """Candidates/s, Schedule → score, of `count` fresh candidates: the GNN alone, the
    two stages (warmed up first on 2 × `count` others) and PerStoreFeature + XGB; and the
    filter's quality on them (τ, top-64 recall against the GNN's own scores)."""
    from extract.metaschedule import candidates as msc
    from simulator.metaschedule.cost_model import GNNCostModel
    from simulator.metaschedule.prefilter import filter_order

    target = msc.llvm_target()
    ctx = msc.tune_context(msc.workload_module(name), target, seed=0)
    warm = [candidate(s) for s in msc.sample_candidates(ctx, 2 * count, seed=11)]
    test_schedules = msc.sample_candidates(ctx, count, seed=12)
    test = [candidate(s) for s in test_schedules]
    out: Dict[str, Any] = {"name": name, "candidates": count, "warm_candidates": len(warm), "keep": keep,
                           "warmup": warmup}

    def timed(run):
        start, cpu = time.perf_counter(), cpu_seconds()
        scores = run()
        return scores, {"per_s": count / (time.perf_counter() - start), "cpu_ms": 1e3 * (cpu_seconds() - cpu) / count}

    gnn_scores, out["gnn"] = timed(lambda: GNNCostModel(model, workers=workers).predict(ctx, test))
    two = GNNCostModel(model, workers=workers, filter_keep=keep, filter_warmup=warmup, filter_model=kind)
    two.predict(ctx, warm)
    seen: Dict[str, np.ndarray] = {}
    score = two.filter.score

    def spy(*args):
        seen["stage1"] = score(*args)
        return seen["stage1"]

    two.filter.score = spy
    before = dataclass_copy(two.stats)
    _, out["two_stage"] = timed(lambda: two.predict(ctx, test))
    out["two_stage"]["filtered"] = two.stats.filtered - before.filtered
    out["two_stage"]["stage1_ms"] = 1e3 * (two.stats.filter_s - before.filter_s) / count
    out["xgb"] = metaschedule_reference(Case(name, "metaschedule", target, test_schedules), workers)["per_store_xgb"]
    stage1 = seen["stage1"]
    out["quality"] = _rank_quality(stage1, gnn_scores, filter_order(stage1, keep, two.filter_min))
    out["speedup_vs_gnn"] = out["two_stage"]["per_s"] / out["gnn"]["per_s"]
    out["speedup_vs_xgb"] = out["two_stage"]["per_s"] / out["xgb"]["per_s"]
    return out


def dataclass_copy(obj):
    import dataclasses
    return dataclasses.replace(obj)


def observed_gnn(cm, keep: Optional[float] = None, warmup: int = 256, floor: int = 64, kind: str = "xgb"):
    """`cm` (a GNNCostModel) timed for `search`; with `keep`, a shadow first stage fed as
    the two-stage model would feed it (after warm-up, only the candidates it keeps) rates
    every call against the GNN's own scores of all candidates (outside the timing)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    from simulator.metaschedule.cost_model import task_group
    from simulator.metaschedule.prefilter import DecisionFilter, filter_order, trace_features

    @derived_object
    class Observed(ms.cost_model.PyCostModel):
        def __init__(self) -> None:
            self.cache, self.seconds, self.cpu_seconds, self.update_seconds, self.scored = cm.cache, 0.0, 0.0, 0.0, 0
            self.shadow = DecisionFilter(warmup=warmup, model=kind) if keep is not None else None
            self.calls: List[Dict[str, float]] = []

        def load(self, path: str) -> None:
            pass

        def save(self, path: str) -> None:
            pass

        def update(self, context, candidates, results) -> None:
            start = time.perf_counter()
            cm.update(context, candidates, results)
            self.update_seconds += time.perf_counter() - start

        def predict(self, context, candidates) -> np.ndarray:
            start, cpu = time.perf_counter(), cpu_seconds()
            out = cm.predict(context, candidates)
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += cpu_seconds() - cpu
            self.scored += len(candidates)
            if self.shadow is not None and len(candidates):
                group = task_group(context, {})
                features = [trace_features(c) for c in candidates]
                sketches, vectors = [f[0] for f in features], [f[1] for f in features]
                stage1 = self.shadow.score(group, sketches, vectors)
                full = filter_order(stage1, keep, floor)
                if np.isfinite(stage1).any():
                    self.calls.append(_rank_quality(stage1, out, full))
                kept = np.flatnonzero(full)
                self.shadow.add(group, [sketches[i] for i in kept], [vectors[i] for i in kept], out[kept])
            return out

    return Observed()


def es_two_stage(name: str, trials: int, model, keep: float, warmup: int, workers: int,
                 population: int, kind: str = "xgb") -> Dict[str, Any]:
    """MetaSchedule's evolutionary search (made-up runtimes, GNN not fine-tuned) scored
    by the GNN alone (with a shadow first stage rating the filter on every call), by the
    two stages, and by XGBModel."""
    from simulator.metaschedule.cost_model import GNNCostModel

    log(f"evolutionary search on {name}, {trials} trials: gnn (+ shadow filter), two-stage, xgb")
    alone = observed_gnn(GNNCostModel(model, workers=workers, update_steps=0), keep, warmup, kind=kind)
    row: Dict[str, Any] = {"name": name, "trials": trials, "population": population, "keep": keep,
                           "gnn": search(name, trials, alone, workers, population=population)}
    two_cm = GNNCostModel(model, workers=workers, update_steps=0, filter_keep=keep, filter_warmup=warmup,
                          filter_model=kind)
    row["two_stage"] = search(name, trials, observed_gnn(two_cm), workers, population=population)
    row["two_stage"].update(filtered=two_cm.stats.filtered, stage1_s=two_cm.stats.filter_s)
    row["xgb"] = search(name, trials, timed_xgb(workers), workers, population=population)
    calls = alone.calls
    row["quality"] = {"calls_rated": len(calls), "calls": calls,
                      "recall_mean": float(np.mean([c["recall"] for c in calls])) if calls else float("nan"),
                      "recall_min": float(np.min([c["recall"] for c in calls])) if calls else float("nan"),
                      "tau_mean": float(np.nanmean([c["tau"] for c in calls])) if calls else float("nan")}
    return row


def two_stage_section(args, workers: int) -> Dict[str, Any]:
    from simulator.models.costmodel import load_trained

    if args.checkpoint is None:
        from datasets.networks import pretrained_path

        args.checkpoint = str(pretrained_path())
    model = load_trained(args.checkpoint)[0]
    out: Dict[str, Any] = {"checkpoint": args.checkpoint, "keep": args.filter_keep, "warmup": args.filter_warmup,
                           "model": args.filter_model,
                           "workers": workers, "rates": [], "search": []}
    for name in args.filter_workloads:
        log(f"two-stage scoring on {name}: {args.filter_count} candidates (after {2 * args.filter_count} warm-up)")
        out["rates"].append(two_stage_rates(name, model, args.filter_keep, args.filter_count, args.filter_warmup,
                                            workers, args.filter_model))
    if args.filter_es_trials:
        for name in args.filter_workloads:
            out["search"].append(es_two_stage(name, args.filter_es_trials, model, args.filter_keep,
                                              args.filter_warmup, workers, args.es_population, args.filter_model))
    return out


def two_stage_table(section: Dict[str, Any]) -> str:
    lines = [f"two-stage scoring ({section.get('model', 'xgb')}, keep {section['keep']}, warm-up {section['warmup']}, "
             f"{section['workers']} "
             f"process(es)), candidates/s end to end (wall), fresh candidates:",
             f"{'case':36s} {'gnn':>7s} {'2-stage':>8s} {'xgb':>7s} {'x gnn':>6s} {'x xgb':>6s} {'filtered':>8s} "
             f"{'stage1 ms':>9s} {'tau':>5s} {'recall64':>8s} {'CPU ms: gnn':>11s} {'2-stage':>8s} {'xgb':>6s}"]
    for r in section["rates"]:
        q = r["quality"]
        lines.append(f"{r['name'][:36]:36s} {r['gnn']['per_s']:7.0f} {r['two_stage']['per_s']:8.0f} "
                     f"{r['xgb']['per_s']:7.0f} {r['speedup_vs_gnn']:6.2f} {r['speedup_vs_xgb']:6.2f} "
                     f"{r['two_stage']['filtered']:8d} {r['two_stage']['stage1_ms']:9.3f} {q['tau']:5.2f} "
                     f"{q['recall']:8.2f} {r['gnn']['cpu_ms']:11.3f} {r['two_stage']['cpu_ms']:8.3f} "
                     f"{r['xgb']['cpu_ms']:6.3f}")
    for row in section["search"]:
        for side in ("gnn", "two_stage", "xgb"):
            r = row[side]
            lines.append(f"search {row['name']} {row['trials']} trials, {side}: {r['scored']} scored, "
                         f"{r['scored_per_s']:.0f}/s in the cost model, cost model {r['cost_model_s']:.1f} s of "
                         f"{r['search_s']:.1f} s searching ({100 * r['cost_model_share']:.0f}%)"
                         + (f", {r['filtered']} filtered out" if "filtered" in r else ""))
        q = row["quality"]
        lines.append(f"search {row['name']}: filter rated on {q['calls_rated']} calls: top-64 recall mean "
                     f"{q['recall_mean']:.2f} (min {q['recall_min']:.2f}), tau mean {q['tau_mean']:.2f}")
    return "\n".join(lines)


# ---------------------------------------------------------------- report
def table(result: Dict[str, Any]) -> str:
    """The figures as plain-text tables."""
    lines = ["ms per candidate (one process, CPU):",
             f"{'case':44s} {'nodes':>6s} {'lower':>7s} {'walk':>6s} {'sample':>6s} "
             f"{'prep':>5s} {'batch':>5s} {'fwd':>5s}"]
    for c in result["cases"]:
        s = c["stages_ms"]
        lines.append(f"{c['name'][:44]:44s} {c['nodes']['mean']:6.1f} {s['lower']:7.3f} "
                     f"{s['walk']:6.3f} {s['sample']:6.3f} {s['prepare']:5.3f} {s['batch']:5.3f} {s['forward']:5.3f}")
    keys = list(result["cases"][0]["per_second"]) if result["cases"] else []
    for title, field, fmt in (("candidates/s end to end (wall)", "per_second", "15.0f"),
                              ("CPU ms per candidate end to end (all processes)", "cpu_ms_per_candidate", "15.3f")):
        lines += ["", f"{title}:", f"{'case':44s} " + " ".join(f"{k:>15s}" for k in keys)]
        for c in result["cases"]:
            lines.append(f"{c['name'][:44]:44s} " + " ".join(format(c[field][k], fmt) for k in keys))
    for row in result.get("search", []):
        for side in ("gnn", "xgb"):
            r = row[side]
            lines.append(f"search {row['name']} {row['trials']} trials, {side}: {r['scored']} scored, "
                         f"{r['scored_per_s']:.0f}/s in the cost model, cost model {r['cost_model_s']:.1f} s of "
                         f"{r['search_s']:.1f} s searching ({100 * r['cost_model_share']:.0f}%)"
                         + (f", cache hits {100 * r['cache_hit_rate']:.0f}%" if "cache_hit_rate" in r else ""))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from extract.metaschedule import candidates as msc

    ap = argparse.ArgumentParser(prog="python -m benchmarks.metaschedule.features", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=512, help="candidates per case")
    ap.add_argument("--workloads", nargs="*", default=list(msc.WORKLOADS), choices=list(msc.WORKLOADS))
    ap.add_argument("--cuda", nargs="*", default=["matmul_512"], help="operators also sampled for CUDA")
    ap.add_argument("--templates", action="store_true", help="also the conv2d templates (x86, CUDA)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--es-trials", type=int, default=64, help="evolutionary search trials (0: skip)")
    ap.add_argument("--es-workloads", nargs="+", default=["matmul_512"], choices=list(msc.WORKLOADS))
    ap.add_argument("--es-population", type=int, default=512, help="evolutionary search population")
    f = ap.add_argument_group("two-stage scoring (GNNCostModel filter_keep)")
    f.add_argument("--filter-workloads", nargs="*", default=[], choices=list(msc.WORKLOADS),
                   help="operators to rate two-stage scoring on (none: skipped)")
    f.add_argument("--filter-keep", type=float, default=0.25, help="share of each call the GNN scores")
    f.add_argument("--filter-warmup", type=int, default=256, help="fully scored candidates before filtering")
    f.add_argument("--filter-model", choices=("xgb", "ridge"), default="xgb", help="the first stage's regressor")
    f.add_argument("--filter-count", type=int, default=512, help="fresh candidates timed (warm-up: twice as many)")
    f.add_argument("--filter-es-trials", type=int, default=128, help="evolutionary search trials (0: skip)")
    f.add_argument("--checkpoint", default=None,
                   help="the GNN (a simulator.train checkpoint; default: the shipped pre-trained one)")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from extract.tir.featurize import usable_cores

    cores = usable_cores()
    workers = sorted({w for w in args.workers if 1 <= w <= cores}) or [1]
    if set(args.workers) - set(workers):
        log(f"only {cores} core(s) usable: --workers {' '.join(map(str, workers))}")
    model = fresh_model()
    cases: List[Callable[[], Case]] = [lambda n=n: metaschedule_case(n, args.count) for n in args.workloads]
    cases += [lambda n=n: metaschedule_case(n, args.count, cuda=True) for n in args.cuda]
    if args.templates:
        cases += [lambda t=t: template_case(t, args.count) for t in ("conv2d_NCHWc.x86", "tutorial/conv2d_no_batching")]
    result: Dict[str, Any] = {"cores": cores, "workers": workers, "count": args.count, "batch": BATCH,
                              "load_average_before": os.getloadavg()[0],
                              "cases": [measure_case(make(), model, workers) for make in cases]}
    if args.es_trials:
        result["search"] = search_comparison(args.es_workloads, args.es_trials, model, max(workers),
                                             args.es_population)
    if args.filter_workloads:
        result["two_stage"] = two_stage_section(args, max(workers))
    result["load_average_after"] = os.getloadavg()[0]  # other work on the machine skews the wall clock
    print(table(result))
    if args.filter_workloads:
        print(two_stage_table(result["two_stage"]))
    print(f"load average (1 min) before {result['load_average_before']:.1f}, after "
          f"{result['load_average_after']:.1f} on {os.cpu_count()} cores")
    if args.out:
        from ..common import write_json
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
