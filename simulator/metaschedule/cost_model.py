"""The simulator as MetaSchedule's cost model, and the registry of the cost models `simulator.tune` offers.

    from simulator.metaschedule.cost_model import GNNCostModel, make_cost_model
    model = from_checkpoint("runs/ms-gcn")                   # pre-trained by simulator.train
    model = GNNCostModel()                                    # cold
    ms.tune_tir(mod, target, work_dir, 64, cost_model=model)

`GNNCostModel` is a MetaSchedule `PyCostModel` (through `@derived_object`):

* `predict(context, candidates)` featurizes the candidate schedules on the fast path
  (`extract.tir.featurize.featurize_schedules`: TVM's lowering for features, the TIR walk,
  a graph cache of candidates scored before), scores them with a `simulator` CostModel
  and returns −(predicted log runtime) as float64, one per candidate in order: higher
  is faster, as MetaSchedule wants. Structurally equal candidates of a call are featurized
  and scored once (`stats.duplicates`).
* `update(context, candidates, results)` keeps each task's measured samples (the
  candidates' graphs, y = the mean of their `run_secs`; failed candidates left out) and
  fine-tunes on the task's samples so far: `update_steps` optimizer steps with the loss
  the model was trained with (a checkpoint's own; a cold model's `COLD_LOSS`, the ranking
  loss `listmle`: only the order within the task matters to the search). A pre-trained
  model fine-tuned with another loss than its own learns slowly from what is measured: the
  shipped gcn (pairwise-hinge) updated with ListMLE kept a batch matmul's search on the
  vector width it preferred wrongly, updated with its own loss it left it after one round
  (docs/ms_tune.md, *The online phase on a CPU the prior is wrong about*). A checkpoint
  fine-tunes at a tenth of its training learning rate (`UPDATE_LR_SCALE`): at its full rate
  the first update, on a task's first few records, undid what it knew of the rest of the task
  and the second round's picks were worse than the first's (docs/ms_tune.md, *The second
  round*). **Each task
  fine-tunes its own copy** of the model (`task_models`, made at its first update); a task
  not yet measured is ranked by the model as loaded. One model fine-tuned by every task in
  turn ranks the next task worse: replayed offline on resnet50's 27 tasks (their dataset
  records as the pool, the gcn pre-trained without resnet50, 8 picks per round), τ of a
  task's first ranking fell from 0.48 to 0.31 and the best of its first 8 picks from 1.13×
  to 1.38× the pool's best (docs/ms_tune.md, *One model per task*).
* `save(path)` writes a simulator checkpoint (loadable by `simulator.predict` and
  `load_trained`) of the model every task starts from, and the measured samples beside it
  (`path.measured.npz`); `load(path)` reads both. The tasks' online copies are not saved: after
  `load`, a task's next update makes its copy again and fine-tunes it on all its samples.

**Pre-trained or cold.** From a checkpoint (`from_checkpoint(run_dir)`, a run of
`simulator.train`) it ranks the first candidates of a new task with what it learnt
offline, and refines per task online. Cold (no checkpoint) it has nothing to rank
with: it returns uniform random scores — MetaSchedule's evolutionary search then picks
at random, as with TVM's own XGB before its 100 warm-up samples — until
`min_measured` (default 32) successful measurements have been made in the run (any
task); then it builds a `cold_model` (default `gcn`) shaped by those samples, sets its
normalisation from them, trains `cold_steps` (default 64) steps on everything measured,
and from there on updates per task like a pre-trained one. At MetaSchedule's default
64 trials per round that is after the first round.

**Two-stage scoring** (`filter_keep`; off in `GNNCostModel` unless given, `FILTER_KEEP` in
`simulator.tune`): a first stage that needs no
lowering (`simulator.metaschedule.prefilter`: small XGBoost regressors from each candidate's trace decisions
to the GNN's scores, one per task and design-space sketch, distilled online from the
candidates the GNN fully scored) ranks each predict call's candidates; the GNN scores
only the best `filter_keep` share of them (at least `filter_min`), the others get scores
below every GNN-scored one, in first-stage order. Until a (task, sketch) has
`filter_warmup` fully scored candidates, its candidates all go to the GNN.

**Time** spent in `predict` and `update` (and the part of it in featurizing) is kept in
`stats` (`CostModelStats`); `simulator.tune` reports it against the run's wall time.
`TimedCostModel` wraps any other MetaSchedule cost model the same way, so every cost
model's share of a tuning run is measured alike.

**Misuse is refused, not absorbed.** `update` with candidates and results of different
lengths raises; a candidate given to `update` again (same task, same scheduled module) is
stored once, its first result kept (`MeasuredOnce`; counted in `stats.repeated`).
`GNNCostModel`'s options are range-checked when it is made (a cold model's `cold_model`
too, not at its first training), and calling `predict`/`update`/`save`/`load` from Python
reaches the implementation directly (an empty candidate list works, errors keep their
type). Each registered cost model says which `simulator.tune` options it reads;
`check_options` refuses the others.

`make_cost_model(name, …)` builds the cost models `simulator.tune` and
`benchmarks.metaschedule.tuning` compare, by their names in `TUNING_COST_MODELS`: `gnn`
(here) and TVM's own, its rivals (`simulator.metaschedule.rivals`: `tvm-xgb`,
`tvm-xgb-pretrained`, `tvm-mlp`, `random`). A new one is a function decorated with
`@register_tuning_cost_model(name, options)` in a module listed in
`simulator/metaschedule/__init__.py`.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from extract.sample import GraphSample
from extract.store_rows import STORE_ROWS_VECTOR, pack_store_rows

from simulator.registry import Registry, SimulatorError

COLD_ONLY = ("min_measured", "cold_model")   # gnn: read only without a checkpoint
# vectors candidates get besides the graph: `curve` (extract.tir.featurize.featurize_schedules) and the
# store rows (MetaSchedule's PerStoreFeature in C++, only for a model that reads them)
FAST_VECTORS = (None, "curve", STORE_ROWS_VECTOR)
MIN_MEASURED = 32       # cold: measurements before the first training
COLD_STEPS = 64         # cold: steps of that first training
UPDATE_STEPS = 32       # steps per update (8 left the search where the first round put it: benchmarks.metaschedule.replay)
# a checkpoint's updates at this share of its training learning rate: at its full rate, 32 steps on a task's
# first 8 records undid what pre-training knew of the rest of the task (docs/ms_tune.md, *The second round*)
UPDATE_LR_SCALE = 0.1
COLD_LOSS = "listmle"   # a cold model's loss (a checkpoint is fine-tuned with its own)
FILTER_KEEP = 0.25      # two-stage scoring in simulator.tune by default: the gnn's share of tuning time 25% → 10%
# what the candidates' context columns measure against, as in the training records (recorded with a
# run: a gnn that featurized against this machine's defaults scored other graphs than it learned)
CANDIDATE_CONTEXT = "the target's hardware"
FILTER_MIN = 64         # two-stage scoring: the GNN scores at least this many per call
FILTER_WARMUP = 256     # ... and everything of a (task, sketch) until it has scored this many


# ---------------------------------------------------------------- the cost models simulator.tune offers
@dataclass(frozen=True)
class TuningCostModel:
    """A cost model `simulator.tune --cost-model NAME` offers: `make(checkpoint, seed, workers,
    pretrain_data, **gnn_options)` builds it, timed; `options` are the `simulator.tune` options it
    reads (any other one given is refused, so that no setting is accepted and then ignored);
    `check(given)` refuses a combination of them."""
    make: Callable[..., Any]
    options: Tuple[str, ...] = ()
    check: Optional[Callable[[Dict[str, Any]], None]] = None


TUNING_COST_MODELS: Registry = Registry("cost model")


def register_tuning_cost_model(name: str, options: Sequence[str] = (),
                               check: Optional[Callable[[Dict[str, Any]], None]] = None):
    """Decorator: `make` becomes `simulator.tune --cost-model NAME`."""
    def add(make: Callable[..., Any]) -> Callable[..., Any]:
        TUNING_COST_MODELS.register(name)(TuningCostModel(make, tuple(options), check))
        return make
    return add


def gnn_defaults() -> Dict[str, Any]:
    """What a `simulator.tune` gnn scores and learns with when the command does not say:
    `GNNCostModel`'s defaults (all but `seed`, which the command gives, and `workers` and
    `threads`, which change no score), `simulator.tune`'s two-stage share, `FILTER_KEEP`, and
    what the candidates' graphs are featurized against, `CANDIDATE_CONTEXT`.
    Recorded with a tuning run, so that resuming it after one of them changed is refused
    rather than mixing two searches."""
    params = inspect.signature(GNNCostModel.__init__).parameters.values()
    out = {p.name: p.default for p in params
           if p.kind is p.KEYWORD_ONLY and p.name not in ("workers", "threads", "seed")}
    return {**out, "filter_keep": FILTER_KEEP, "candidate_context": CANDIDATE_CONTEXT}


def tuning_options() -> List[str]:
    """Every `simulator.tune` option some cost model reads."""
    return sorted({o for n in TUNING_COST_MODELS.names() for o in TUNING_COST_MODELS.get(n).options})



class CostModelOptionError(SimulatorError, ValueError):
    """A cost model option that is out of range, unknown, or not read by that cost model."""


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_options(name: str, given: Dict[str, Any]) -> None:
    """Refuse, naming the flag, any option in `given` (option → value, only those the user
    set) that cost model `name` does not read (`TuningCostModel.options`)."""
    if name not in TUNING_COST_MODELS:
        raise CostModelOptionError(f"unknown cost model {name!r} (known: {', '.join(TUNING_COST_MODELS.names())})")
    model = TUNING_COST_MODELS.get(name)
    for option in given:
        if option not in model.options:
            readers = [m for m in TUNING_COST_MODELS.names() if option in TUNING_COST_MODELS.get(m).options]
            raise CostModelOptionError(f"{_flag(option)}: not read by the {name} cost model "
                                       f"(read by: {', '.join(readers) or 'none'})")
    if model.check is not None:
        model.check(given)
    if "cold_model" in given:
        check_cold_model(given["cold_model"])


def _check_gnn_options(given: Dict[str, Any]) -> None:
    if given.get("checkpoint"):
        for option in COLD_ONLY:
            if option in given:
                raise CostModelOptionError(f"{_flag(option)}: read only by a cold gnn (no --checkpoint); "
                                           f"with --checkpoint the checkpoint's model is fine-tuned")


def check_cold_model(name: str) -> None:
    """A model a cold GNNCostModel can build: a graph model, or a vector model whose
    vector candidates get (`FAST_VECTORS`: `curve-mlp`, the store-row models)."""
    from simulator.models.costmodel import GraphCostModel, cost_model_class, model_names
    from simulator.registry import UnknownNameError

    try:
        cls = cost_model_class(name)
    except UnknownNameError as e:
        raise CostModelOptionError(f"--cold-model: {e}") from None
    if not (issubclass(cls, GraphCostModel) or getattr(cls, "VECTOR", None) in FAST_VECTORS):
        usable = [n for n in model_names() if issubclass(cost_model_class(n), GraphCostModel)
                  or getattr(cost_model_class(n), "VECTOR", None) in FAST_VECTORS]
        raise CostModelOptionError(f"--cold-model {name}: reads sample.vectors[{cls.VECTOR!r}], which candidates "
                                   f"featurized for MetaSchedule lack (usable: {', '.join(usable)})")


def _check_range(name: str, value: Any, low: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < low:
        raise CostModelOptionError(f"GNNCostModel: {name} must be a number ≥ {low:g}, got {value!r}")


class MeasuredOnce:
    """The candidates a cost model was given results for, per task (structural hashes of
    the task's and the candidate's modules): an update that repeats one keeps only its
    first result, so a schedule is one training row however often it is reported."""

    def __init__(self) -> None:
        self.seen: Dict[int, set] = {}

    def fresh(self, context, candidates, results) -> Tuple[list, list]:
        """The candidates (and their results) not given before; a length mismatch raises."""
        import tvm_ffi

        if len(candidates) != len(results):
            raise ValueError(f"update: {len(candidates)} candidates but {len(results)} results "
                             f"(one result per candidate, in order)")
        seen = self.seen.setdefault(int(tvm_ffi.structural_hash(context.mod)), set())
        keep_c, keep_r = [], []
        for candidate, result in zip(candidates, results):
            digest = int(tvm_ffi.structural_hash(candidate.sch.mod))
            if digest not in seen:
                seen.add(digest)
                keep_c.append(candidate)
                keep_r.append(result)
        return keep_c, keep_r


def with_store_rows(samples: List[GraphSample], context, candidates) -> List[GraphSample]:
    """`samples` with `vectors["per_store_rows"]`: MetaSchedule's `PerStoreFeature` rows of
    their candidates (one C++ call for all), packed as the extractor packs them."""
    from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature

    rows = PerStoreFeature().extract_from(context, list(candidates))
    return [dataclasses.replace(s, vectors={**s.vectors, STORE_ROWS_VECTOR: pack_store_rows(r.numpy())[0][None]})
            for s, r in zip(samples, rows)]


def _direct_python_calls(cls):
    """Calls of `predict`, `update`, `save` and `load` from Python go straight to the
    implementation instead of a round trip through TVM's FFI, which fails on an empty
    candidate list (it hands the callback a NULL result pointer) and turns every
    exception into a RuntimeError. MetaSchedule's own calls still come through the FFI."""
    def direct(name):
        def call(self, *args):
            return getattr(self._inst, name)(*args)

        call.__name__, call.__doc__ = name, getattr(cls._cls, name).__doc__
        return call

    for name in ("predict", "update", "save", "load"):
        setattr(cls, name, direct(name))
    return cls

@dataclass
class CostModelStats:
    """Wall-clock seconds spent in a cost model, and what it did."""

    predict_s: float = 0.0
    update_s: float = 0.0
    featurize_s: float = 0.0        # part of predict_s + update_s (GNNCostModel)
    train_s: float = 0.0            # part of update_s spent in optimizer steps (GNNCostModel)
    predict_calls: int = 0
    update_calls: int = 0
    scored: int = 0                 # candidates scored
    measured: int = 0               # results given to update (failed ones included)
    random_predictions: int = 0     # candidates scored at random (cold, before training)
    filtered: int = 0               # candidates the first-stage filter kept from the GNN (filter_keep)
    repeated: int = 0               # candidates given to update again (their first result kept)
    duplicates: int = 0             # candidates scored as a copy of another one in the same call
    filter_s: float = 0.0           # part of predict_s in the first stage (trace features, ridge fits)
    trained_at: Optional[int] = None  # measurements seen when a cold model first trained

    @property
    def total_s(self) -> float:
        return self.predict_s + self.update_s

    def as_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        out["total_s"] = self.total_s
        out["scored_per_s"] = self.scored / self.predict_s if self.predict_s > 0 else None
        return out


def _secs_of(result) -> Optional[List[float]]:
    """The run_secs of a successful RunnerResult, else None."""
    if getattr(result, "error_msg", None) is not None or not result.run_secs:
        return None
    secs = [float(s) for s in result.run_secs]
    if not secs or max(secs) >= 1e10 or not all(math.isfinite(s) and s > 0 for s in secs):
        return None
    return secs


def task_group(context, cache: Dict[int, str]) -> str:
    """The stable workload key of a tuning context's task (extract.tir.workload_key), cached
    by the module's structural hash."""
    import tvm_ffi

    from extract.tir.workload_key import workload_key

    digest = int(tvm_ffi.structural_hash(context.mod))
    if digest not in cache:
        cache[digest] = workload_key(context.mod, context.target)
    return cache[digest]


@contextlib.contextmanager
def torch_threads(threads: int):
    """Inside: torch's intra-op pool at `threads`; the previous size restored after."""
    import torch

    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if before != threads:
            torch.set_num_threads(before)


@derived_object
class GNNCostModel(PyCostModel):
    """The simulator as a MetaSchedule cost model (see the module docstring). `model`: a
    `simulator.models.costmodel.CostModel` (None: cold). Options: `cold_model`, `min_measured`,
    `cold_steps`, `update_steps`, `loss` (of the updates; None: the model's own), `lr` (of the
    updates; None: a checkpoint's training rate × `update_lr_scale`, a cold model's own),
    `workers` (featurizing processes), `seed`, `threads` (torch's threads inside predict and
    update: a tuning process is pinned to its build cores, and torch's default, one thread
    per core of the machine, oversubscribes them — a 256-trial dense run spent 20–59 s in
    updates instead of 0.5–1.5 s, docs/ms_tune.md); two-stage
    scoring: `filter_keep` (None: off), `filter_min`, `filter_warmup`, `filter_model`
    ("xgb" or "ridge")."""

    def __init__(self, model=None, *, cold_model: str = "gcn", min_measured: int = MIN_MEASURED,
                 cold_steps: int = COLD_STEPS, update_steps: int = UPDATE_STEPS, loss: Optional[str] = None,
                 lr: Optional[float] = None, update_lr_scale: float = UPDATE_LR_SCALE, workers: int = 1,
                 seed: int = 0, threads: int = 1,
                 filter_keep: Optional[float] = None, filter_min: int = FILTER_MIN,
                 filter_warmup: int = FILTER_WARMUP, filter_model: str = "xgb"):
        super().__init__()
        from extract.tir.featurize import GraphCache

        from .prefilter import DecisionFilter

        _check_options(cold_model, min_measured, cold_steps, update_steps, loss, lr, workers, threads, filter_min,
                       filter_warmup)
        if not (isinstance(update_lr_scale, (int, float)) and 0.0 < update_lr_scale <= 1.0):
            raise CostModelOptionError(f"GNNCostModel: update_lr_scale must be in (0, 1], got {update_lr_scale!r}")
        if filter_keep is not None and not (isinstance(filter_keep, (int, float)) and 0.0 < filter_keep <= 1.0):
            raise CostModelOptionError(f"GNNCostModel: filter_keep must be in (0, 1], got {filter_keep!r}")
        self.filter_keep = None if filter_keep is None else float(filter_keep)
        self.filter_min = int(filter_min)
        self.filter = (DecisionFilter(warmup=filter_warmup, model=filter_model, seed=seed)
                       if filter_keep is not None else None)

        self.model = None
        self.task_models: Dict[str, Any] = {}   # task group → its own online copy of `model`
        self.cold_model, self.min_measured, self.cold_steps = cold_model, int(min_measured), int(cold_steps)
        self.update_steps, self.loss, self.lr = int(update_steps), loss, lr
        self.update_lr_scale = float(update_lr_scale)
        self.workers, self.seed, self.threads = int(workers), int(seed), int(threads)
        self.cache = GraphCache()
        self.measured: Dict[str, List[GraphSample]] = {}   # task group → its measured samples
        self.stats = CostModelStats()
        self.once = MeasuredOnce()
        self.rng = np.random.default_rng([seed, 11])
        self._groups: Dict[int, str] = {}
        if model is not None:
            self.set_model(model)

    # ------------------------------------------------------------ the simulator model
    def set_model(self, model) -> None:
        """Use `model` (a `simulator.models.costmodel.CostModel`), with the update loss and
        learning rate of this cost model; its vector, if any, must be one the fast
        featurizer makes (the graph, or `curve`)."""
        spec = model.batch_spec
        if spec.vector not in FAST_VECTORS:
            raise SimulatorError(f"model {model.config.model.model} reads vectors[{spec.vector!r}], which "
                                 f"candidates featurized for MetaSchedule lack (graph models, curve-mlp and the "
                                 f"store-row models have theirs)")
        changes = {"loss": self.loss} if self.loss is not None else {}
        if self.lr is not None:
            changes["lr"] = self.lr
        model.config = model.config.replace(**changes)
        self.model = model
        self.task_models = {}

    @property
    def is_cold(self) -> bool:
        return self.model is None

    def _cold_start(self) -> None:
        """Build and train the cold model once enough has been measured."""
        from simulator.config import TrainConfig
        from simulator.models.costmodel import build_cost_model
        from simulator.data.features import feature_set
        from simulator.data.in_memory import SampleSource

        everything = [s for samples in self.measured.values() for s in samples]
        if len(everything) < self.min_measured:
            return
        config = TrainConfig(seed=self.seed, threads=self.threads)
        config = config.replace(model=self.cold_model, loss=self.loss or COLD_LOSS,
                                **({"lr": self.lr} if self.lr else {}))
        source = SampleSource(everything, features=feature_set(config, metaschedule=True))
        model = build_cost_model(config, source.info)
        model.set_normalization(source.normalization(model.batch_spec, self.seed))
        self.set_model(model)
        self.model.update(everything, self.cold_steps)
        self.stats.trained_at = len(everything)

    # ------------------------------------------------------------ featurizing
    def _samples(self, context, candidates) -> List[GraphSample]:
        from extract.tir.featurize import featurize_schedules

        start = time.perf_counter()
        group = task_group(context, self._groups)
        samples = featurize_schedules(candidates, context.target, group, workers=self.workers, cache=self.cache)
        if self._reads(STORE_ROWS_VECTOR):
            samples = with_store_rows(samples, context, candidates)
        self.stats.featurize_s += time.perf_counter() - start
        return samples

    def _reads(self, vector: str) -> bool:
        """Whether the model (or, cold, the model it will build) reads `vectors[vector]`."""
        from simulator.models.costmodel import cost_model_class

        if self.model is not None:
            return self.model.batch_spec.vector == vector
        return getattr(cost_model_class(self.cold_model), "VECTOR", None) == vector

    # ------------------------------------------------------------ PyCostModel
    def predict(self, context, candidates) -> np.ndarray:
        """−(predicted log runtime) of each candidate, float64, in order (higher = faster)."""
        start = time.perf_counter()
        try:
            n = len(candidates)
            self.stats.predict_calls += 1
            self.stats.scored += n
            if n == 0:
                return np.zeros(0, dtype=np.float64)
            if self.model is None:
                self.stats.random_predictions += n
                return self.rng.random(n).astype(np.float64)
            with torch_threads(self.threads):
                if self.filter is not None:
                    return self._two_stage(context, candidates)
                return self._gnn_scores(context, candidates)
        finally:
            self.stats.predict_s += time.perf_counter() - start

    def _distinct(self, candidates) -> Tuple[list, np.ndarray]:
        """(the structurally distinct candidates, each candidate's index among them), by the
        graph cache's keys, which featurizing computes anyway: an evolutionary search hands
        over many copies of one program (three in four of a dense layer's candidates; all 512
        of a call where a task's space has nothing to sample), and the GNN scores each once."""
        from extract.tir.featurize import as_module

        first: Dict[int, int] = {}          # graph cache key → index among the distinct candidates
        keys = [self.cache.key(as_module(c)) for c in candidates]
        which = np.array([first.setdefault(key, len(first)) for key in keys], dtype=np.int64)
        distinct = np.unique(which, return_index=True)[1]
        self.stats.duplicates += len(candidates) - len(distinct)
        return [candidates[i] for i in distinct], which

    def _gnn_scores(self, context, candidates) -> np.ndarray:
        distinct, which = self._distinct(candidates)
        samples = self._samples(context, distinct)
        model = self.task_models.get(task_group(context, self._groups), self.model)
        return -np.asarray(model.predict(samples), dtype=np.float64).reshape(len(distinct))[which]

    def _two_stage(self, context, candidates) -> np.ndarray:
        """Stage 1 (trace decisions) picks what the GNN scores (see the class docstring)."""
        from .prefilter import filter_order, merge_scores, trace_features

        start = time.perf_counter()
        group = task_group(context, self._groups)
        features = [trace_features(c) for c in candidates]
        sketches = [f[0] for f in features]
        vectors = [f[1] for f in features]
        stage1 = self.filter.score(group, sketches, vectors)
        full = filter_order(stage1, self.filter_keep, self.filter_min)
        kept = np.flatnonzero(full)
        self.stats.filter_s += time.perf_counter() - start
        self.stats.filtered += len(candidates) - len(kept)
        gnn = self._gnn_scores(context, [candidates[i] for i in kept])
        start = time.perf_counter()
        self.filter.add(group, [sketches[i] for i in kept], [vectors[i] for i in kept], gnn)
        out = merge_scores(gnn, full, stage1)
        self.stats.filter_s += time.perf_counter() - start
        return out

    def update(self, context, candidates, results) -> None:
        """Keep the task's measured samples and fine-tune on them (see the module docstring);
        a candidate given before is not stored again."""
        start = time.perf_counter()
        try:
            fresh, fresh_results = self.once.fresh(context, candidates, results)
            self.stats.update_calls += 1
            self.stats.measured += len(fresh)
            self.stats.repeated += len(candidates) - len(fresh)
            keep = [(c, secs) for c, r in zip(fresh, fresh_results) if (secs := _secs_of(r)) is not None]
            if not keep:
                return
            samples = self._samples(context, [c for c, _ in keep])
            group = samples[0].group
            task = self.measured.setdefault(group, [])
            for sample, (_, secs) in zip(samples, keep):
                task.append(dataclasses.replace(sample, runtimes=[float(np.mean(secs))],
                                                runtime_std=[float(np.std(secs))],
                                                name=f"{group}/{len(task)}"))
            train = time.perf_counter()
            with torch_threads(self.threads):
                if self.model is None:
                    self._cold_start()
                elif self.update_steps > 0:
                    self._task_model(group).update(task, self.update_steps)
            self.stats.train_s += time.perf_counter() - train
        finally:
            self.stats.update_s += time.perf_counter() - start

    def _task_model(self, group: str):
        """The task's own online copy of the model, made at its first update: a checkpoint's
        learns at `update_lr_scale` × its training rate (unless `lr` is given); a cold model,
        trained here from nothing, at its own."""
        if group not in self.task_models:
            model = copy.deepcopy(self.model)
            if self.lr is None and self.stats.trained_at is None:
                model.config = model.config.replace(lr=model.config.fit.lr * self.update_lr_scale)
            self.task_models[group] = model
        return self.task_models[group]

    def save(self, path: str) -> None:
        """The simulator checkpoint at `path` and the measured samples at `path.measured.npz`."""
        from extract.sample import save_samples

        if self.model is None:
            raise ValueError("a cold GNNCostModel has no model to save before its first training")
        if os.path.isdir(path):
            raise SimulatorError(f"{path}: is a folder; GNNCostModel.save writes a checkpoint file "
                                 f"(e.g. {os.path.join(path, 'gnn.pt')})")
        self.model.save(path)
        everything = [s for samples in self.measured.values() for s in samples]
        if everything:
            save_samples(f"{path}.measured.npz", everything, info={"tool": "simulator.metaschedule.cost_model"})

    def load(self, path: str) -> None:
        from extract.sample import load_samples

        from simulator.models.costmodel import load_trained

        self.set_model(load_trained(path)[0])
        measured = f"{path}.measured.npz"
        self.measured = {}
        if os.path.exists(measured):
            for s in load_samples(measured):
                self.measured.setdefault(s.group, []).append(s)


_direct_python_calls(GNNCostModel)


def _check_options(cold_model, min_measured, cold_steps, update_steps, loss, lr, workers, threads, filter_min,
                   filter_warmup) -> None:
    """GNNCostModel's options, checked when it is made (not at its first update)."""
    from simulator.losses import LOSSES

    for name, value, low in (("min_measured", min_measured, 1), ("cold_steps", cold_steps, 0),
                             ("update_steps", update_steps, 0), ("workers", workers, 1), ("threads", threads, 1),
                             ("filter_min", filter_min, 1), ("filter_warmup", filter_warmup, 2)):
        _check_range(name, value, low)
    if lr is not None:
        _check_range("lr", lr, 0)
        if lr == 0:
            raise CostModelOptionError("GNNCostModel: lr must be > 0, got 0")
    if loss is not None and loss not in LOSSES:
        raise CostModelOptionError(f"GNNCostModel: unknown loss {loss!r} (known: {', '.join(LOSSES.names())})")
    check_cold_model(cold_model)


def from_checkpoint(path: str, which: str = "best_model", **options) -> "GNNCostModel":
    """A `GNNCostModel` starting from a checkpoint of `simulator.train` (run folder or file)."""
    from simulator.models.costmodel import load_trained

    return GNNCostModel(load_trained(path, which)[0], **options)


# ---------------------------------------------------------------- any cost model, timed
@derived_object
class TimedCostModel(PyCostModel):
    """Another MetaSchedule cost model, with the time of its predict and update calls
    kept in `stats` (how `simulator.tune` measures every cost model's share alike)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.stats = CostModelStats()
        self.once = MeasuredOnce()

    def predict(self, context, candidates) -> np.ndarray:
        start = time.perf_counter()
        try:
            out = np.asarray(self.inner.predict(context, candidates), dtype=np.float64)
            self.stats.predict_calls += 1
            self.stats.scored += len(candidates)
            return out
        finally:
            self.stats.predict_s += time.perf_counter() - start

    def update(self, context, candidates, results) -> None:
        start = time.perf_counter()
        try:
            fresh, fresh_results = self.once.fresh(context, candidates, results)
            self.stats.repeated += len(candidates) - len(fresh)
            if fresh:
                self.inner.update(context, fresh, fresh_results)
            self.stats.update_calls += 1
            self.stats.measured += len(fresh)
        finally:
            self.stats.update_s += time.perf_counter() - start

    def save(self, path: str) -> None:
        self.inner.save(path)

    def load(self, path: str) -> None:
        self.inner.load(path)


_direct_python_calls(TimedCostModel)


def measure_candidate(sch):
    from tvm.s_tir import meta_schedule as ms

    from extract.schedules import main_func_name

    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(sch.mod[main_func_name(sch.mod)]))


def feature_context(mod, target):
    """A TuneContext that only carries the module and target (what feature extraction
    reads), built without TuneContext.__init__'s import of every tensor intrinsic."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func

    context = ms.TuneContext.__new__(ms.TuneContext)
    context.__init_handle_by_constructor__(_ffi_api.TuneContext, mod, target, None, None, "main", 1, -1,
                                           get_logging_func(get_logger(__name__)))
    return context


@register_tuning_cost_model("gnn", options=("checkpoint", "workers", "update_steps", "min_measured", "cold_model",
                                            "filter_keep"), check=_check_gnn_options)
def _gnn(checkpoint: Optional[str], seed: int, workers: int, pretrain_data: Sequence[str], **options) -> "GNNCostModel":
    """The simulator: from a `simulator.train` run or checkpoint, or cold (None)."""
    if checkpoint:
        return from_checkpoint(checkpoint, workers=workers, seed=seed, **options)
    return GNNCostModel(workers=workers, seed=seed, **options)


def make_cost_model(name: str, checkpoint: Optional[str] = None, seed: int = 0, workers: int = 1,
                    pretrain_data: Sequence[str] = (), **gnn_options):
    """A cost model by `simulator.tune`'s name (`TUNING_COST_MODELS`), wrapped so that its
    time is measured (GNNCostModel times itself). `checkpoint`: gnn — a simulator run folder
    or checkpoint (None: cold); tvm-xgb-pretrained — a saved pre-trained XGBModel (else
    `pretrain_data`, MetaSchedule databases, are trained on now)."""
    if gnn_options and name != "gnn":
        raise CostModelOptionError(f"{', '.join(sorted(gnn_options))}: read only by the gnn cost model, not {name}")
    return TUNING_COST_MODELS.get(name).make(checkpoint, seed, workers, pretrain_data, **gnn_options)
