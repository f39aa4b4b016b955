"""One TVM config → one `GraphSample`: schedule, lower, build the TIR graph, add the
baselines' fixed vectors, attach the measured runtime."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .sample import GraphSample
from .space import Config
from .templates import Conv2dWorkload, Template, get_template
from .tir_graph import EXTRACTOR_VERSION, lower_for_features, tir_to_graph
from .workloads import workload_name

PER_STORE_POOLING = ("sum", "max")  # pooled rows of MetaSchedule's PerStoreFeature (164 each)


def group_name(template: Template, wl: Conv2dWorkload) -> str:
    """Configs of one group are ranked together: the workload, and the target if not CPU."""
    name = workload_name(wl)
    return name if template.target_kind == "llvm" else f"{name}@{template.target_kind}"


def per_store_vector(template: Template, sch) -> np.ndarray:
    """TVM MetaSchedule's own features (what its XGBoost cost model sees), pooled."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func

    # TuneContext.__init__ first imports every tensor intrinsic TVM knows (~2 minutes);
    # the feature extractor reads only the target, so build the object directly
    context = ms.TuneContext.__new__(ms.TuneContext)
    context.__init_handle_by_constructor__(
        _ffi_api.TuneContext, sch.mod, template.make_target(), None, None, "main", 1, -1,
        get_logging_func(get_logger(__name__)))
    candidate = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"]))
    rows = ms.feature_extractor.PerStoreFeature().extract_from(context, [candidate])[0].numpy()
    if rows.shape[0] == 0:
        rows = np.zeros((1, 164))
    return np.concatenate([rows.sum(0), rows.max(0)]).astype(np.float32)


def config_sample(template: Template, wl: Conv2dWorkload, config: Config,
                  costs: Optional[Sequence[float]] = None, name: str = "",
                  per_store: bool = True) -> Tuple[GraphSample, Dict[str, int]]:
    """The sample of one config; costs are the record's per-repeat seconds (None:
    unmeasured, runtime NaN). Also returns the counts of node kinds mapped to UNK."""
    sch = template.schedule(wl, config)
    graph = tir_to_graph(lower_for_features(sch.mod)["main"])
    costs_arr = np.asarray(costs if costs is not None else [np.nan], dtype=np.float64)
    vectors = {"curve": graph.curve[None, :]}
    if per_store:
        vectors["per_store"] = per_store_vector(template, sch)[None, :]
    group = group_name(template, wl)
    sample = GraphSample(
        edges=graph.edges, node_features=graph.node_features, node_types=graph.node_types,
        runtimes=[costs_arr.mean()], runtime_std=[costs_arr.std() if costs_arr.size > 1 else 0.0],
        group=group, name=name or f"{group}/{config.index}", vectors=vectors,
        meta={"template": template.name, "workload": wl.key, "index": config.index,
              "config": config.values, "extractor": EXTRACTOR_VERSION},
    )
    return sample, dict(graph.unknown)


def samples_for_configs(template_name: str, wl: Conv2dWorkload, indices: Iterable[int],
                        per_store: bool = False) -> List[GraphSample]:
    """Unmeasured samples (runtime NaN) for configs of a workload, e.g. its whole space."""
    template = get_template(template_name)
    space = template.space(wl)
    return [config_sample(template, wl, space.get(int(i)), per_store=per_store)[0] for i in indices]


def _configs_job(job: Tuple[str, Conv2dWorkload, List[int], bool]) -> List[GraphSample]:
    return samples_for_configs(*job)


def extract_configs(template_name: str, wl: Conv2dWorkload, indices: Optional[Sequence[int]] = None,
                    per_store: bool = False, workers: int = 0, chunk: int = 32,
                    progress: bool = True) -> List[GraphSample]:
    """`samples_for_configs` for many configs (default: the whole space), in index order,
    `chunk` configs per task over `workers` spawned processes (0: one per core; few configs
    stay in this process, as a worker's start — importing TVM — costs seconds)."""
    from tqdm import tqdm

    if indices is None:
        indices = range(len(get_template(template_name).space(wl)))
    indices = [int(i) for i in indices]
    workers = workers or os.cpu_count() or 1
    jobs = [(template_name, wl, indices[s:s + chunk], per_store) for s in range(0, len(indices), chunk)]
    samples: List[GraphSample] = []
    bar = tqdm(total=len(indices), unit="cfg", desc=f"extract {workload_name(wl)}", disable=not progress,
               leave=False)
    pool = None
    if workers > 1 and len(jobs) > 2:
        import multiprocessing
        pool = multiprocessing.get_context("spawn").Pool(min(workers, len(jobs)))
    try:
        for part in (pool.imap(_configs_job, jobs) if pool else map(_configs_job, jobs)):
            samples.extend(part)
            bar.update(len(part))
    finally:
        bar.close()
        if pool is not None:
            pool.close()
            pool.join()
    return samples


# ---------------------------------------------------------------- parallel extraction
Job = Tuple[str, List[Any], List[List[Any]], List[float], str]  # task, args, entity, costs, name


def _extract_job(job: Job, per_store: bool = True) -> Tuple[GraphSample, Dict[str, int]]:
    task_name, task_args, entity, costs, name = job
    template = get_template(task_name)
    wl = template.parse_task_args(task_args)
    config = template.space(wl).from_entity(entity, template.default_values(wl))
    return config_sample(template, wl, config, costs, name, per_store=per_store)


def extract_many(jobs: Sequence[Job], workers: int = 0, progress: bool = True, per_store: bool = True
                 ) -> Tuple[List[GraphSample], Dict[str, int]]:
    """Extract many configs, in `workers` processes (0: one per core), in order.
    `per_store=False` leaves out MetaSchedule's per-store features (vectors["per_store"]),
    which only the xgb baseline reads and which cost about a third of the time."""
    import functools

    from tqdm import tqdm

    workers = workers or os.cpu_count() or 1
    unknown: Dict[str, int] = {}
    samples: List[GraphSample] = []
    bar = tqdm(total=len(jobs), unit="cfg", desc="extract", disable=not progress)
    job_fn = functools.partial(_extract_job, per_store=per_store)
    if workers == 1 or len(jobs) < 16:
        results = map(job_fn, jobs)
        pool = None
    else:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(workers)
        results = pool.imap(job_fn, jobs, chunksize=16)
    try:
        for sample, unk in results:
            samples.append(sample)
            for k, v in unk.items():
                unknown[k] = unknown.get(k, 0) + v
            bar.update()
    finally:
        bar.close()
        if pool is not None:
            pool.close()
            pool.join()
    return samples, unknown
