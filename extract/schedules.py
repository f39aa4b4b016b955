"""TVM schedules → `GraphSample`s: the core of the TVM side, and extraction jobs.

* `sample_from_schedule` takes any scheduled PrimFunc — a `tvm.s_tir.Schedule`, an
  `IRModule` or a `PrimFunc`, from a template, a replayed MetaSchedule trace or a user's
  own schedule — lowers it for features, walks the TIR into a graph
  (`extract.tir.graph.tir_to_graph`), adds the baselines' fixed vectors and the measured runtime.
* `config_sample`: one producer of schedules among others, a template's config.
* Jobs are self-contained (`ConfigJob`: everything parsed, nothing to look up but the
  template by name); `extract_many` runs any jobs, in order, in one process or a pool of
  spawned ones; `extract_configs` makes the jobs of a workload's config space.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from extract.autotvm.itervar import itervar_vector
from extract.autotvm.knob_features import knob_vector_of_meta
from extract.autotvm.space import Config
from extract.autotvm.templates import Template, get_template
from extract.sample import ExtractorInfo, GraphSample, MetaLike, SampleMeta, register_extractor
from extract.store_rows import STORE_ROWS_VECTOR, pack_store_rows
from .tir.graph import EXTRACTOR_VERSION, FEATURE_NAMES, VOCABULARY, lower_for_features, tir_to_graph
from .tir.hardware import Hardware, hardware_of
from .tir.workloads import Workload, workload_name

PER_STORE_POOLING = ("sum", "max")  # pooled rows of MetaSchedule's PerStoreFeature (164 each)
PER_STORE_WIDTH = 164
# what the samples made here mean; written into every collection's info (save_samples)
TIR_EXTRACTOR = register_extractor(ExtractorInfo(EXTRACTOR_VERSION, tuple(VOCABULARY), tuple(FEATURE_NAMES)))

Runtimes = Union[None, float, Sequence[float]]


class Extraction(NamedTuple):
    """A sample, and the counts of TIR node kinds its graph mapped to UNK."""

    sample: GraphSample
    unknown: Dict[str, int]


def group_name(workload: Workload, target_kind: str = "llvm") -> str:
    """Configs of one group are ranked together: the workload, and the target if not CPU."""
    name = workload_name(workload)
    return name if target_kind == "llvm" else f"{name}@{target_kind}"


# ---------------------------------------------------------------- any schedule → sample
def as_module(sch_or_mod):
    """The IRModule of a `Schedule`, an `IRModule` or a `PrimFunc` (as "main")."""
    import tvm

    if isinstance(sch_or_mod, tvm.IRModule):
        return sch_or_mod
    if isinstance(sch_or_mod, tvm.tirx.PrimFunc):
        return tvm.IRModule({"main": sch_or_mod})
    mod = getattr(sch_or_mod, "mod", None)
    if isinstance(mod, tvm.IRModule):
        return mod
    raise TypeError(f"expected a tvm.s_tir.Schedule, IRModule or PrimFunc, got {type(sch_or_mod).__name__}")


def main_func_name(mod) -> str:
    """"main", or the module's only function."""
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if "main" in names:
        return "main"
    if len(names) == 1:
        return names[0]
    raise ValueError(f"a module of {len(names)} functions and no 'main' ({', '.join(sorted(names))}): "
                     f"pass the scheduled PrimFunc itself")


def as_target(target):
    from tvm.target import Target
    return target if isinstance(target, Target) else Target(target)


def per_store_rows(target, sch_or_mod) -> np.ndarray:
    """TVM MetaSchedule's own features: one PerStoreFeature row per store, (s, 164)."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func

    sch = sch_or_mod if isinstance(sch_or_mod, s_tir.Schedule) else s_tir.Schedule(as_module(sch_or_mod))
    # TuneContext.__init__ first imports every tensor intrinsic TVM knows (~2 minutes);
    # the feature extractor reads only the target, so build the object directly
    context = ms.TuneContext.__new__(ms.TuneContext)
    context.__init_handle_by_constructor__(
        _ffi_api.TuneContext, sch.mod, as_target(target), None, None, "main", 1, -1,
        get_logging_func(get_logger(__name__)))
    func = sch.mod[main_func_name(sch.mod)]
    candidate = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(func))
    return ms.feature_extractor.PerStoreFeature().extract_from(context, [candidate])[0].numpy()


def per_store_vector(target, sch_or_mod) -> np.ndarray:
    """TVM MetaSchedule's own features (what its XGBoost cost model sees), pooled."""
    return pool_store_rows(per_store_rows(target, sch_or_mod))


def pool_store_rows(rows: np.ndarray) -> np.ndarray:
    """PerStoreFeature rows pooled (`PER_STORE_POOLING`) into one vector."""
    if rows.shape[0] == 0:
        rows = np.zeros((1, PER_STORE_WIDTH))
    return np.concatenate([rows.sum(0), rows.max(0)]).astype(np.float32)


def extract_schedule(sch_or_mod, target, runtimes: Runtimes, group: str, name: str = "",
                     meta: MetaLike = None, per_store: bool = False,
                     hardware: Optional[Hardware] = None) -> Extraction:
    """`sample_from_schedule`, with the counts of node kinds mapped to UNK. `hardware`:
    what the graph's context columns measure against (default: the target's)."""
    meta = SampleMeta.of(meta)
    mod = as_module(sch_or_mod)
    func = lower_for_features(mod)[main_func_name(mod)]
    if hardware is None and target is not None:
        hardware = hardware_of(target)
    graph = tir_to_graph(func, hardware)
    costs = np.atleast_1d(np.asarray(runtimes if runtimes is not None else [np.nan], dtype=np.float64))
    vectors = {"curve": graph.curve[None, :], "itervar": itervar_vector(func)[None, :]}
    if per_store:
        if target is None:
            raise ValueError("per-store features need the target")
        rows = per_store_rows(target, sch_or_mod)
        vectors["per_store"] = pool_store_rows(rows)[None, :]
        packed, store_cut = pack_store_rows(rows)  # the rows themselves, for the segment-sum MLPs
        vectors[STORE_ROWS_VECTOR] = packed[None, :]
        if store_cut:
            meta = meta.with_extra(store_cut=int(store_cut))
    knob = knob_vector_of_meta(meta)
    if knob is not None:  # a template's config: its knob values (what knob-xgb reads)
        vectors["knob"] = knob[None, :]
    sample = GraphSample(
        edges=graph.edges, node_features=graph.node_features, node_types=graph.node_types,
        runtimes=[costs.mean()], runtime_std=[costs.std() if costs.size > 1 else 0.0],
        group=group, name=name, vectors=vectors,
        meta=dataclasses.replace(meta, extractor=EXTRACTOR_VERSION),
    )
    return Extraction(sample, dict(graph.unknown))


def sample_from_schedule(sch_or_mod, target, runtimes: Runtimes, group: str, name: str = "",
                         meta: MetaLike = None, per_store: bool = False) -> GraphSample:
    """The sample of one scheduled PrimFunc, from anywhere.

    `sch_or_mod`: a `tvm.s_tir.Schedule`, an `IRModule` (its "main", or its only PrimFunc)
    or a `PrimFunc`; `target`: a `tvm.target.Target` or its string (read only for the
    per-store features; may be None without them); `runtimes`: the measured seconds, one
    per repeat (the sample's runtime is their mean, `runtime_std` their spread), or None
    for unmeasured (NaN); `group`: what the sample is ranked against (the workload, and
    the target if not CPU); `meta`: what is kept with the sample (a `SampleMeta`, or a dict
    of JSON-able facts read by `SampleMeta.from_dict`; the extractor version is set; a
    meta naming a template, its workload key and config values, as
    `config_sample` writes, also gives the config's knob features, `vectors["knob"]`);
    `per_store`: also MetaSchedule's per-store features, pooled (`vectors["per_store"]`,
    what the xgb baseline reads; about a third of the time)."""
    return extract_schedule(sch_or_mod, target, runtimes, group, name, meta, per_store).sample


# ---------------------------------------------------------------- templates: one producer
@functools.lru_cache(maxsize=None)
def template_target(template_name: str):
    """The target a template builds for (cached: it does not change within a process)."""
    return get_template(template_name).make_target()


def config_sample(template: Template, wl: Workload, config: Config, costs: Runtimes = None,
                  name: str = "", per_store: bool = True, group: str = "", target: Any = None) -> Extraction:
    """The sample of one config of a template: template → schedule → `sample_from_schedule`.
    `costs`: the record's per-repeat seconds (None: unmeasured, runtime NaN); `group`:
    default the workload's (and the template's target kind if not CPU); `target`: the one
    the config was measured on (a record's; its caches and limits are what the graph's
    context columns measure against), default the template's target on this machine."""
    wl = template.check_workload(wl)
    sch = template.schedule(wl, config)
    group = group or group_name(wl, template.target_kind)
    meta = SampleMeta(template=template.name, workload=wl.key, index=config.index, config=config.values)
    extraction = extract_schedule(sch, template_target(template.name), costs, group,
                                  name or f"{group}/{config.index}", meta, per_store,
                                  hardware_of(target or template_target(template.name)))
    return extraction


@dataclass(frozen=True)
class ConfigJob:
    """One config of a template to extract, parsed once (by `tvm_log.read_jobs` or
    `config_jobs`): the worker only runs it (an `ExtractionJob`)."""

    template: str                            # template name (registry key)
    workload: Workload
    config: Config
    costs: Optional[Tuple[float, ...]] = None  # per-repeat seconds; None: unmeasured
    name: str = ""                           # the sample's name ("" : group/index)
    group: str = ""                          # "" : the workload's (see group_name)
    source: str = ""                         # where it was read ("file:line"), for errors
    target: str = ""                         # the target measured on ("": the template's here)

    def run(self, per_store: bool) -> Extraction:
        return config_sample(get_template(self.template), self.workload, self.config,
                             self.costs, self.name, per_store, self.group, self.target or None)


class ExtractionJob(Protocol):
    """What `extract_many` runs: a picklable job that makes one sample (`ConfigJob`; a
    MetaSchedule record to replay would be another). A `source` or `name` attribute, if
    it has one, names the job in error messages."""

    def run(self, per_store: bool) -> Extraction: ...


class ExtractionError(ValueError):
    """A job whose schedule or lowering raised; the message names the job (file:line)."""


class JobFailed(NamedTuple):
    """What a worker returns for a job that raised (one line: type and message)."""

    source: str
    reason: str


def job_source(job: ExtractionJob) -> str:
    return getattr(job, "source", "") or getattr(job, "name", "") or repr(job)[:80]


def one_line(e: BaseException, limit: int = 300) -> str:
    """`Type: message` of an exception on one line (TVM's errors carry a C++ backtrace
    before the message: its last line is the message)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:limit]


def _run_job(job: ExtractionJob, per_store: bool) -> Union[Extraction, JobFailed]:
    try:
        return job.run(per_store)
    except Exception as e:  # noqa: BLE001 - one config's failure is that config's, not the run's
        return JobFailed(job_source(job), one_line(e))


# ---------------------------------------------------------------- the one driver
def extract_many(jobs: Sequence[ExtractionJob], workers: int = 0, progress: bool = True, per_store: bool = True,
                 chunk: int = 16, desc: str = "extract", failed: Optional[List[JobFailed]] = None
                 ) -> Tuple[List[GraphSample], Dict[str, int]]:
    """Run extraction jobs, in order: in this process, or in `workers` spawned processes
    (0: one per core) when there are more than two chunks of `chunk` jobs (a worker's
    start — importing TVM — costs seconds). `per_store=False` leaves out MetaSchedule's
    per-store features (vectors["per_store"]), which only the xgb baseline reads and
    which cost about a third of the time. Returns the samples and the counts of TIR node
    kinds mapped to UNK.

    A job that raises (its schedule or lowering fails) is an `ExtractionError` naming the
    job's source (file:line) and stopping the run; with a `failed` list, it is appended
    there instead (as a `JobFailed`) and the run goes on without its sample. A worker
    process that dies (killed, or a script without a `__main__` guard) is an `ExtractionError`."""
    from extract.cli import progress as progress_display

    if workers < 0:
        raise ValueError(f"workers {workers} is negative (0: one per core)")
    workers = workers or os.cpu_count() or 1
    run = functools.partial(_run_job, per_store=per_store)
    pool = None
    if workers > 1 and len(jobs) > 2 * chunk:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # not multiprocessing.Pool: it replaces a worker that dies and then waits forever for the
        # dead worker's results; the executor raises BrokenProcessPool instead
        pool = ProcessPoolExecutor(min(workers, -(-len(jobs) // chunk)),
                                   mp_context=multiprocessing.get_context("spawn"))
    samples: List[GraphSample] = []
    unknown: Dict[str, int] = {}
    bar = progress_display(total=len(jobs), unit="cfg", desc=desc, enabled=progress)
    try:
        for result in _results(pool, run, jobs, chunk):
            bar.update()
            if isinstance(result, JobFailed):
                if failed is None:
                    raise ExtractionError(f"{result.source}: extraction failed: {result.reason}")
                failed.append(result)
                continue
            sample, unk = result
            samples.append(sample)
            for k, v in unk.items():
                unknown[k] = unknown.get(k, 0) + v
    finally:
        bar.close()
        if pool is not None:  # after an error the rest of the jobs are not wanted
            pool.shutdown(wait=True, cancel_futures=True)
    return samples, unknown


def _results(pool, run, jobs: Sequence[ExtractionJob], chunk: int) -> Iterable[Any]:
    """`run` over `jobs` in order, in `pool` (None: here); a worker process that dies is an
    `ExtractionError`, not a hang."""
    if pool is None:
        yield from map(run, jobs)
        return
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield from pool.map(run, jobs, chunksize=chunk)
    except BrokenProcessPool as e:
        raise ExtractionError(
            f"an extraction worker process died ({e}); a script that starts extraction when it is "
            f"imported needs `if __name__ == \"__main__\":` around it (the workers import the main "
            f"module), else look for the worker being killed (out of memory?)") from e


def config_jobs(template_name: str, wl: Workload, indices: Optional[Iterable[int]] = None) -> List[ConfigJob]:
    """Unmeasured jobs for configs of a workload's space (default: all of it), in order."""
    template = get_template(template_name)
    space = template.space(template.check_workload(wl))
    indices = range(len(space)) if indices is None else indices
    group = group_name(wl, template.target_kind)
    return [ConfigJob(template.name, wl, space.get(int(i)), None, f"{group}/{int(i)}") for i in indices]


def extract_configs(template_name: str, wl: Workload, indices: Optional[Iterable[int]] = None,
                    per_store: bool = False, workers: int = 0, chunk: int = 32,
                    progress: bool = True) -> List[GraphSample]:
    """Unmeasured samples (runtime NaN) for configs of a workload (default: its whole
    space), in index order, through `extract_many`."""
    jobs = config_jobs(template_name, wl, indices)
    return extract_many(jobs, workers, progress, per_store, chunk, desc=f"extract {workload_name(wl)}")[0]


def samples_for_configs(template_name: str, wl: Workload, indices: Iterable[int],
                        per_store: bool = False) -> List[GraphSample]:
    """`extract_configs` in this process, quietly."""
    return extract_configs(template_name, wl, indices, per_store, workers=1, progress=False)
