"""The featurization path gives exactly the reference path's graphs.

The reference is `tir_to_graph_reference` (the test oracle, tests/tir_reference.py, a
plain walk of the AST); the path is `tir_to_graph` and `featurize_schedules` (forked
workers, cache). Compared bit for bit on MetaSchedule candidates of every
operator kind the benchmark covers (CPU and CUDA), both conv2d templates, a function
exercising the walk's rare branches, and shipped samples.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from extract.metaschedule import candidates as msc
from extract.tir.featurize import FeaturizeError, GraphCache, featurize_arrays, featurize_schedules
from extract.tir.graph import (
    CURVE_POINTS, EXTRACTOR_VERSION, _print_key, _reuse_curve, _same_print, lower_for_features, tir_to_graph,
)
from extract.tir.hardware import hardware_of
from tir_reference import _Loop, tir_to_graph_reference
from tir_reference import _reuse_curve as reference_reuse_curve


def assert_same_graph(ref, fast, what=""):
    assert np.array_equal(ref.edges, fast.edges) and ref.edges.dtype == fast.edges.dtype, what
    assert np.array_equal(ref.node_types, fast.node_types) and ref.node_types.dtype == fast.node_types.dtype, what
    assert ref.node_features.dtype == fast.node_features.dtype == np.float32, what
    assert ref.node_features.shape == fast.node_features.shape, what
    assert ref.node_features.tobytes() == fast.node_features.tobytes(), what
    assert ref.curve.tobytes() == fast.curve.tobytes(), what
    assert ref.unknown == fast.unknown, what


def both(mod, hardware=None):
    func = lower_for_features(mod)["main"]
    return tir_to_graph_reference(func, hardware), tir_to_graph(func, hardware)


@pytest.fixture(scope="module")
def llvm_candidates():
    """A few MetaSchedule candidates of each benchmark operator, for llvm."""
    target = msc.llvm_target()
    out = {}
    for name in msc.WORKLOADS:
        ctx = msc.tune_context(msc.workload_module(name), target)
        out[name] = msc.sample_candidates(ctx, 4, seed=11)
    return out


def test_fast_walk_matches_reference_on_metaschedule_candidates(llvm_candidates):
    for name, schedules in llvm_candidates.items():
        for i, sch in enumerate(schedules):
            ref, fast = both(sch.mod)
            assert ref.node_types.size > 10
            assert_same_graph(ref, fast, f"{name}/{i}")


def test_fast_walk_matches_reference_on_cuda_candidates():
    target = msc.cuda_target()
    for name in ("matmul_512", "softmax_128x1024"):
        ctx = msc.tune_context(msc.workload_module(name), target)
        for i, sch in enumerate(msc.sample_candidates(ctx, 3, seed=5)):
            assert "threadIdx" in sch.mod.script()  # GPU code: thread bindings walked as loops
            ref, fast = both(sch.mod)
            assert_same_graph(ref, fast, f"cuda {name}/{i}")


def test_fast_walk_matches_reference_on_conv2d_templates():
    from extract.autotvm.templates import Conv2dWorkload, get_template
    from extract.autotvm.templates.conv2d_cuda import InvalidGpuConfig

    rng = random.Random(0)
    cases = [("conv2d_NCHWc.x86", Conv2dWorkload(1, 64, 56, 56, 64, 3, 3, 1, 1)),
             ("conv2d_NCHWc.x86", Conv2dWorkload(1, 4, 6, 6, 8, 3, 3, 1, 1)),
             ("tutorial/conv2d_no_batching", Conv2dWorkload(1, 64, 14, 14, 64, 3, 3, 1, 1))]
    for template_name, wl in cases:
        template = get_template(template_name)
        space = template.space(wl)
        done = 0
        for index in rng.sample(range(len(space)), 40):
            try:
                sch = template.schedule(wl, space.get(index))
            except InvalidGpuConfig:
                continue
            ref, fast = both(sch.mod)
            assert_same_graph(ref, fast, f"{template_name} {wl.key} #{index}")
            done += 1
            if done == 3:
                break
        assert done == 3


IRREGULAR = '''
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def irregular(A: T.Buffer((64,), "float32"), idx: T.Buffer((16,), "int32"), B: T.Buffer((16, 4), "float32"),
              C: T.Buffer((16,), "int32"), D: T.Buffer((16,), "float32")):
    for i in range(16):
        for j in T.vectorized(4):
            with T.sblock("gather"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[idx[vi] + vj] * T.float32(2.0)
    for i in range(16):
        with T.sblock("floatidx"):
            vi = T.axis.remap("S", [i])
            D[vi] = A[T.Cast("int32", T.floor(T.Cast("float32", vi) * T.float32(0.5)))] + T.if_then_else(
                vi < 8, A[vi], A[63 - vi])
    for i in range(16):
        with T.sblock("bits"):
            vi = T.axis.remap("S", [i])
            C[vi] = T.bitwise_and(idx[vi], 7) + T.shift_left(idx[T.min(vi + 1, 15)], 1)
    for i in range(16):
        for k in range(4):
            with T.sblock("acc"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    D[vi] = T.float32(0)
                D[vi] = D[vi] + T.Select(B[vi, vk] > T.float32(0), B[vi, vk], A[vi * 4 + vk])
'''


def test_fast_walk_matches_reference_on_rare_branches(tmp_path):
    """Indirect indexing, float arithmetic and calls inside indices, kinds outside the
    vocabulary (UNK), Select, an init block (IfThenElse) and an accumulating store."""
    import importlib.util

    import tvm

    path = tmp_path / "irregular.py"  # TVMScript parses the source of a file
    path.write_text(IRREGULAR)
    spec = importlib.util.spec_from_file_location("irregular", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ref, fast = both(tvm.IRModule({"main": module.irregular}))
    assert_same_graph(ref, fast)
    assert ref.unknown == {"BitwiseAnd": 1, "LShift": 1}


def test_shipped_samples_are_reproduced():
    """The fast walk rebuilds shipped samples (made by the reference walk) exactly, with the
    hardware of the target each record was measured on."""
    from datasets import SHIPPED_LOG, SHIPPED_SAMPLES
    from extract.sample import load_samples
    from extract.autotvm.templates import get_template
    from extract.tvm_log import read_jobs

    stored = {s.name: s for s in load_samples(str(SHIPPED_SAMPLES))}
    jobs, _ = read_jobs([str(SHIPPED_LOG)])
    for job in random.Random(1).sample(jobs, 12):  # jobs arrive parsed (tvm_log.ConfigJob)
        template = get_template(job.template)
        func = lower_for_features(template.schedule(job.workload, job.config).mod)["main"]
        graph = tir_to_graph(func, hardware_of(job.target))
        sample = stored[job.name]
        assert np.array_equal(graph.edges, sample.edges) and np.array_equal(graph.node_types, sample.node_types)
        assert graph.node_features.tobytes() == sample.node_features.tobytes(), job.name
        assert np.array_equal(graph.curve.astype(np.float32), sample.vectors["curve"].reshape(-1)), job.name


def test_featurize_schedules_forked_and_cached_match_reference(llvm_candidates):
    schedules = [s for name in ("matmul_512", "softmax_128x1024") for s in llvm_candidates[name]]
    items = schedules + schedules[:3]  # repeats: the same objects again
    reference = [both(s.mod)[0] for s in items]
    cache = GraphCache()
    for workers, kwargs in ((1, {}), (2, {"min_per_worker": 2}), (2, {"min_per_worker": 2, "cache": cache})):
        arrays = featurize_arrays(items, workers=workers, **kwargs)
        assert len(arrays) == len(items)
        for ref, (edges, types, features, curve, unknown) in zip(reference, arrays):
            assert np.array_equal(ref.edges, edges) and np.array_equal(ref.node_types, types)
            assert ref.node_features.tobytes() == features.tobytes() and ref.curve.tobytes() == curve.tobytes()
            assert dict(ref.unknown) == unknown
    assert cache.misses == len(schedules) and cache.hits == 3 and len(cache) == len(schedules)


def test_graph_cache_finds_structurally_equal_modules(llvm_candidates):
    from tvm.s_tir import Schedule

    sch = llvm_candidates["matmul_512"][0]
    copy = Schedule(sch.mod["main"], debug_mask=0)  # an equal module, another object
    cache = GraphCache(maxsize=2)
    first = featurize_arrays([sch], cache=cache)[0]
    second = featurize_arrays([copy], cache=cache)[0]
    assert second is first and cache.hits == 1
    others = llvm_candidates["matmul_512"][1:3]
    featurize_arrays(others, cache=cache)  # evicts the least recently used
    assert len(cache) == 2 and cache.get((cache.key(sch.mod), None)) is None


def test_featurize_schedules_samples(llvm_candidates):
    from tvm.s_tir import meta_schedule as ms

    target = msc.llvm_target()
    schedules = llvm_candidates["batch_matmul_12x128x128x64"]
    candidates = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])) for s in schedules]
    items = [candidates[0], schedules[1], schedules[2].mod, schedules[3].mod["main"]]
    samples = featurize_schedules(items, target, group="bmm", meta={"trial": 3})
    assert [s.name for s in samples] == ["bmm/0", "bmm/1", "bmm/2", "bmm/3"]
    for sample, sch in zip(samples, schedules):
        ref = both(sch.mod, hardware_of(target))[0]
        assert sample.group == "bmm" and np.isnan(sample.runtimes).all() and sample.num_configs == 1
        assert sample.node_features.tobytes() == ref.node_features.tobytes()
        assert np.array_equal(sample.vectors["curve"], ref.curve[None, :])
        assert sample.meta.as_dict() == {"extractor": EXTRACTOR_VERSION, "target": "llvm", "trial": 3}
    with pytest.raises(ValueError, match="2 names for 4 items"):
        featurize_schedules(items, target, names=["a", "b"])
    with pytest.raises(TypeError, match="cannot featurize a str"):
        featurize_schedules(["not a schedule"], target)


@pytest.mark.parametrize("mcpu", ["znver3", "znver4"])   # 256- and 512-bit SIMD
def test_a_cost_model_scores_the_graphs_its_training_data_were_extracted_as(llvm_candidates, mcpu):
    """The tuning path (`featurize_schedules`, what `GNNCostModel` scores) measures the context
    columns against the target's hardware, as extraction from a database does
    (`extract.schedules.sample_from_schedule`): the same features bit for bit, cached or not;
    a model trained on 512-bit records would otherwise see every vector loop as twice as full."""
    from tvm.target import Target

    from extract.schedules import sample_from_schedule
    from extract.tir.graph import COLUMN

    target = Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": mcpu, "num-cores": 1})
    schedules = llvm_candidates["matmul_512"] + llvm_candidates["batch_matmul_12x128x128x64"]
    cache = GraphCache()
    for tuned in (featurize_schedules(schedules, target), featurize_schedules(schedules, target, cache=cache)):
        for sample, sch in zip(tuned, schedules):
            extracted = sample_from_schedule(sch, target, [1e-3], "g", per_store=False)
            assert sample.node_features.tobytes() == extracted.node_features.tobytes()
    other = "znver4" if mcpu == "znver3" else "znver3"
    wider = featurize_schedules(schedules, str(target).replace(mcpu, other), cache=cache)   # not the cached graphs
    fill = COLUMN["vector_fill"]
    assert any(a.node_features[:, fill].max() != b.node_features[:, fill].max() for a, b in zip(tuned, wider))


def test_a_failing_item_is_named_from_a_forked_worker(llvm_candidates):
    import tvm

    good = llvm_candidates["matmul_512"]
    bad = tvm.IRModule({})  # no function to walk
    with pytest.raises(FeaturizeError, match="item 1: FeaturizeError: module has no 'main'"):
        featurize_arrays([good[0], bad] + good[1:], workers=2, min_per_worker=1)


def test_print_keys_agree_with_printing():
    from tvm import tirx

    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    other_i = tirx.Var("i", "int32")  # another variable with the same name
    i64 = tirx.Var("k", "int64")
    exprs = [i * 64 + j, i * 64 + j, j + i * 64, tirx.floordiv(i, 4) * 8 + tirx.floormod(j, 4),
             i + other_i, i + i, other_i * 64 + j, i64 * tirx.const(4, "int64"), tirx.Cast("int64", i) * 4,
             tirx.Cast("int32", i64), tirx.Ramp(i * 4, 1, 4), tirx.Broadcast(j, 4), tirx.Min(i, 3), i < j,
             tirx.const(3, "int64"), tirx.const(3, "int32")]
    assert _print_key(i + other_i, {}) is None  # the printer would rename one of them: print
    for a in exprs:
        for b in exprs:
            assert _same_print(a, b) == (str(a) == str(b)), (str(a), str(b))


def test_fast_reuse_curve_matches_reference():
    rng = np.random.default_rng(0)
    for _ in range(200):
        depth = int(rng.integers(0, 9))
        extents = [int(x) for x in rng.integers(1, 64, depth)]
        cs = [float(x) for x in rng.choice([0.0, 1.0, 0.25, 16.0], depth)]
        element_bytes = float(rng.choice([0.125, 1, 2, 4, 16]))
        loops = [_Loop(v, e) for v, e in zip(range(depth), extents)]
        reference = reference_reuse_curve(loops, dict(zip(range(depth), cs)), element_bytes)
        fast = np.asarray(_reuse_curve(cs, extents, element_bytes), dtype=np.float64)
        assert fast.shape == (len(CURVE_POINTS),) and fast.tobytes() == reference.tobytes()


def test_a_dead_worker_has_its_share_redone_here(llvm_candidates, monkeypatch):
    import os

    import extract.tir.featurize as fz

    parent, real = os.getpid(), fz._arrays_of

    def dying_in_children(mods, offset, hardware):
        if os.getpid() != parent:
            os._exit(3)
        return real(mods, offset, hardware)

    monkeypatch.setattr(fz, "_arrays_of", dying_in_children)
    items = llvm_candidates["matmul_512"]
    with pytest.warns(RuntimeWarning, match=r"gave no answer \(exit code 3\); items 0\.\.1"):
        arrays = fz.featurize_arrays(items, workers=2, min_per_worker=1)
    for sch, (_edges, _types, features, _curve, _unknown) in zip(items, arrays):
        assert features.tobytes() == both(sch.mod)[0].node_features.tobytes()


def test_workers_zero_means_one_per_usable_core(llvm_candidates, monkeypatch):
    import extract.tir.featurize as fz

    forks = []
    monkeypatch.setattr(fz, "usable_cores", lambda: 3)
    real = fz._collect
    monkeypatch.setattr(fz, "_collect", lambda *a: forks.append(a) or real(*a))
    items = llvm_candidates["softmax_128x1024"] + llvm_candidates["layer_norm_128x768"]
    arrays = fz.featurize_arrays(items, workers=0, min_per_worker=1)
    assert len(forks) == 2 and len(arrays) == len(items)  # two children and this process
