"""Many scheduled programs → graph samples, fast: the path a MetaSchedule cost model
scores candidates through.

    samples = featurize_schedules(candidates, target, group="matmul_512", workers=2)

`featurize_schedules` takes what MetaSchedule hands a cost model (`MeasureCandidate`s),
or `tvm.s_tir.Schedule`s, IRModules or PrimFuncs, and returns one unmeasured
`GraphSample` (runtime NaN) per item, in order: `lower_for_features` (TVM's own
passes, C++), then the walk `extract.tir.graph.tir_to_graph`, its context columns measured
against the target's hardware. The graphs are exactly those of one schedule at a time (and
of the dataset samples extracted for the same target): same nodes, edges and features, bit
for bit, same `EXTRACTOR_VERSION`.

Where the time goes (see `benchmarks.metaschedule.features`): TVM's lowering passes are most of
it and cannot run side by side in threads of one process (they contend inside TVM:
two threads score barely more than one), so `workers > 1` forks that many − 1
children for the call, each lowering and walking its share of the items — the items
are inherited through fork, nothing is serialised on the way in — and sending back
plain arrays (a fork costs ~15–20 ms with TVM and torch loaded; a child that dies or
hangs has its share redone in this process). Where fork is unavailable (not POSIX),
everything runs in-process. A `GraphCache` skips candidates scored before, which an
evolutionary search does a lot (see `GraphCache`).
"""
from __future__ import annotations

import pickle
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.sample import GraphSample, MetaLike, SampleMeta
from .graph import EXTRACTOR_VERSION, lower_for_features, tir_to_graph
from .hardware import Hardware, hardware_of

# (edges, node_types, node_features, curve, unknown kinds) of one program
GraphArrays = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, int]]


class FeaturizeError(RuntimeError):
    """An item could not be lowered or walked; the message names it."""


def as_module(item):
    """The IRModule of a MeasureCandidate, Schedule, IRModule or PrimFunc."""
    import tvm

    sch = getattr(item, "sch", None)  # ms.MeasureCandidate
    if sch is not None:
        item = sch
    mod = getattr(item, "mod", None)  # s_tir.Schedule
    if mod is not None and isinstance(mod, tvm.IRModule):
        return mod
    if isinstance(item, tvm.IRModule):
        return item
    if isinstance(item, tvm.tirx.PrimFunc):
        return tvm.IRModule({"main": item})
    raise TypeError(f"cannot featurize a {type(item).__name__} (expected a MeasureCandidate, Schedule, "
                    f"IRModule or PrimFunc)")


def _main(mod):
    """The PrimFunc to walk: "main", or the module's only function."""
    if any(gv.name_hint == "main" for gv in mod.get_global_vars()):
        return mod["main"]
    funcs = list(mod.functions.values())
    if len(funcs) != 1:
        raise FeaturizeError(f"module has no 'main' and {len(funcs)} functions")
    return funcs[0]


def graph_arrays(mod, hardware: Optional[Hardware] = None) -> GraphArrays:
    """Lower one module and walk it (`hardware`: what the context columns measure against,
    see `tir_to_graph`)."""
    graph = tir_to_graph(_main(lower_for_features(mod)), hardware)
    return graph.edges, graph.node_types, graph.node_features, graph.curve, dict(graph.unknown)


def _arrays_of(mods: Sequence[Any], offset: int, hardware: Optional[Hardware]) -> List[GraphArrays]:
    out = []
    for i, mod in enumerate(mods):
        try:
            out.append(graph_arrays(mod, hardware))
        except Exception as e:  # noqa: BLE001 — re-raised with the item's position
            raise FeaturizeError(f"item {offset + i}: {type(e).__name__}: {e}") from e
    return out


def _child(mods: Sequence[Any], offset: int, hardware: Optional[Hardware], conn) -> None:
    """A forked worker: its share of the items, sent back as arrays (or the error).
    The garbage collector stays off: the worker lives for one call, and a full
    collection would touch every object inherited from the parent, copying its pages."""
    import gc

    gc.disable()
    try:
        payload = ("ok", _arrays_of(mods, offset, hardware))
    except FeaturizeError as e:
        payload = ("error", str(e))
    except BaseException:  # noqa: BLE001 — everything goes back to the parent
        payload = ("error", traceback.format_exc())
    conn.send_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
    conn.close()


def can_fork() -> bool:
    import multiprocessing
    return "fork" in multiprocessing.get_all_start_methods()


def featurize_arrays(items: Sequence[Any], workers: int = 1, min_per_worker: int = 16,
                     cache: Optional["GraphCache"] = None, hardware: Optional[Hardware] = None) -> List[GraphArrays]:
    """`graph_arrays` of every item for `hardware`, in order, over `workers` processes (this one and
    `workers` − 1 forked for the call; 0: one per usable core; fewer when there are
    fewer than `min_per_worker` items each). With a `cache`, items seen before (the same module, or one structurally
    equal, for the same hardware) are not lowered again, nor are repeats within `items`."""
    mods = [as_module(item) for item in items]
    if cache is None:
        return _featurize_mods(mods, workers, min_per_worker, hardware)
    keys = [(cache.key(mod), hardware) for mod in mods]
    out: List[Optional[GraphArrays]] = [None] * len(mods)
    first: Dict[Any, int] = {}  # key → the item featurized for it in this call
    for i, key in enumerate(keys):
        if key in first:  # a repeat within the call
            cache.hits += 1
        else:
            out[i] = cache.get(key)
            if out[i] is None:
                first[key] = i
    unique = list(first.values())
    for i, arrays in zip(unique, _featurize_mods([mods[i] for i in unique], workers, min_per_worker, hardware)):
        cache.put(keys[i], arrays)
        out[i] = arrays
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = out[first[key]]
    return out  # type: ignore[return-value]


# a forked worker that neither answers nor dies within this (plus per item) is given up
# on, and its share done in this process
CHILD_TIMEOUT_S, CHILD_TIMEOUT_PER_ITEM_S = 30.0, 1.0


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, e.g. under `taskset`)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _featurize_mods(mods: Sequence[Any], workers: int, min_per_worker: int,
                    hardware: Optional[Hardware]) -> List[GraphArrays]:
    workers = int(workers) or usable_cores()
    workers = max(1, min(workers, len(mods) // max(1, min_per_worker)))
    if workers == 1 or not can_fork():
        return _arrays_of(mods, 0, hardware)
    import multiprocessing

    context = multiprocessing.get_context("fork")
    bounds = [int(b) for b in np.linspace(0, len(mods), workers + 1).round()]
    children = []
    try:
        for lo, hi in zip(bounds[:-2], bounds[1:-1]):  # the children take the first shares
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(mods[lo:hi], lo, hardware, send), daemon=True)
            process.start()
            send.close()
            children.append((process, receive, lo, hi))
        own = _arrays_of(mods[bounds[-2]:], bounds[-2], hardware)  # … this process the last
        out: List[GraphArrays] = []
        for process, receive, lo, hi in children:
            out.extend(_collect(process, receive, mods, lo, hi, hardware))
        return out + own
    finally:
        for process, receive, _, _ in children:
            receive.close()
            if process.is_alive():
                process.kill()
            process.join()


def _collect(process, receive, mods: Sequence[Any], lo: int, hi: int,
             hardware: Optional[Hardware]) -> List[GraphArrays]:
    """A child's arrays; its share recomputed here if it died or hung (a failing item
    is raised, wherever it failed)."""
    import warnings

    payload = None
    if receive.poll(CHILD_TIMEOUT_S + CHILD_TIMEOUT_PER_ITEM_S * (hi - lo)):
        try:
            payload = pickle.loads(receive.recv_bytes())
        except EOFError:
            payload = None
    if payload is None:
        process.join(timeout=1.0)
        warnings.warn(f"featurizing worker {process.pid} gave no answer (exit code {process.exitcode}); "
                      f"items {lo}..{hi - 1} are featurized in this process", RuntimeWarning)
        return _arrays_of(mods[lo:hi], lo, hardware)
    status, result = payload
    if status != "ok":
        raise FeaturizeError(result)
    return result


class GraphCache:
    """Graph arrays of modules featurized before, for a search that scores the same
    candidates again (MetaSchedule's evolutionary search re-scores its survivors every
    generation: scoring at random, ~12% of the candidates of a 256-trial matmul search
    were the very same module object, ~19% structurally equal to an earlier one; scoring
    with a model, far more — the population gathers around what it ranks best).

    Graphs are stored by the module's key and the hardware they were featurized for
    (`featurize_arrays`). Keys: the structural hash of the scheduled module (`tvm_ffi.structural_hash`,
    40–100 µs; equal modules lower to equal graphs), found without hashing for the last
    `recent` module objects seen (held, so that their handles stay theirs; a module
    holds tens of kB). At most `maxsize` graphs (a few kB each) are kept, least recently
    used dropped first."""

    def __init__(self, maxsize: int = 16384, recent: int = 1024) -> None:
        from collections import OrderedDict
        self.maxsize, self.recent = int(maxsize), int(recent)
        self._graphs: "OrderedDict[Any, GraphArrays]" = OrderedDict()  # (key, hardware) → arrays
        self._objects: "OrderedDict[int, Tuple[Any, int]]" = OrderedDict()  # handle → (module, key)
        self.hits = self.misses = 0

    def key(self, mod) -> int:
        handle = mod.__chandle__()
        seen = self._objects.get(handle)
        if seen is not None:
            self._objects.move_to_end(handle)
            return seen[1]
        import tvm_ffi
        key = int(tvm_ffi.structural_hash(mod))
        self._objects[handle] = (mod, key)
        if len(self._objects) > self.recent:
            self._objects.popitem(last=False)
        return key

    def get(self, key: Any) -> Optional[GraphArrays]:
        arrays = self._graphs.get(key)
        if arrays is None:
            self.misses += 1
            return None
        self.hits += 1
        self._graphs.move_to_end(key)
        return arrays

    def put(self, key: Any, arrays: GraphArrays) -> None:
        self._graphs[key] = arrays
        if len(self._graphs) > self.maxsize:
            self._graphs.popitem(last=False)

    def __len__(self) -> int:
        return len(self._graphs)


def featurize_schedules(items: Sequence[Any], target=None, group: str = "",
                        names: Optional[Sequence[str]] = None, workers: int = 1,
                        meta: MetaLike = None,
                        cache: Optional[GraphCache] = None) -> List[GraphSample]:
    """One unmeasured `GraphSample` (runtime NaN) per item — MeasureCandidate, Schedule,
    IRModule or PrimFunc — in order (see module docstring). `group`: the workload's
    name (a cost model ranks a task's candidates within it); `names`: one per item
    (default: group/i); `target`: what the context columns measure against
    (`hardware_of`, as extraction from a database measures them against the record's
    target: a model scores what it was trained on) and recorded in meta (lowering does
    not depend on it);
    `meta`: every sample's meta (a `SampleMeta` or a dict, see `SampleMeta.of`), with the
    extractor version and target set; `workers`, `cache`: see `featurize_arrays`.
    Samples made from cached arrays share them (treat samples as read-only)."""
    if names is not None and len(names) != len(items):
        raise ValueError(f"{len(names)} names for {len(items)} items")
    hardware = hardware_of(target) if target is not None else None
    arrays = featurize_arrays(items, workers=workers, cache=cache, hardware=hardware)
    target_kind = None if target is None else str(getattr(getattr(target, "kind", None), "name", target))
    base = SampleMeta.from_dict({"extractor": EXTRACTOR_VERSION, "target": target_kind,
                                 **SampleMeta.of(meta).as_dict()})
    return [to_sample(a, group, names[i] if names is not None else f"{group}/{i}", base)
            for i, a in enumerate(arrays)]


def to_sample(arrays: GraphArrays, group: str, name: str, meta: MetaLike) -> GraphSample:
    """An unmeasured GraphSample of one program's arrays (node kinds mapped to UNK, if
    any, counted under `meta.extra["unknown"]`)."""
    edges, types, features, curve, unknown = arrays
    return GraphSample(edges=edges, node_features=features, node_types=types, runtimes=[np.nan], group=group,
                       name=name, vectors={"curve": curve[None, :]},
                       meta=SampleMeta.of(meta).with_extra(unknown=unknown) if unknown else SampleMeta.of(meta))
