"""MetaSchedule candidates without a tuning run: the design space MetaSchedule itself
generates for a workload and target, sampled with fresh random decisions and
postprocessed, as its evolutionary search does before it asks the cost model.

    ctx = tune_context(mod, target)                # cheap: no tensor-intrinsic imports
    schedules = sample_candidates(ctx, 64, seed=0) # List[tvm.s_tir.Schedule]

Used by the featurization benchmark (`benchmarks.metaschedule.features`) and its tests; a cost
model sees exactly these objects (`MeasureCandidate.sch`).

`WORKLOADS` holds small named operator builders (te → PrimFunc) covering the kinds the
benchmark reports: matmul, conv2d, depthwise conv2d, batch matmul, softmax, layer norm.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

# rules: "llvm" (MetaSchedule's generic CPU rules) rather than "from-target", which for an
# x86 target picks DefaultX86 and with it the VNNI intrinsics (importing
# tvm.s_tir.tensor_intrin.x86 alone costs ~30 s). For the float32 WORKLOADS both give the
# same design spaces (in another order), and DefaultX86's only other addition, the
# RewriteTensorize postprocessor, does nothing where no block is tensorized.
DEFAULT_RULES = {"llvm": "llvm", "cuda": "cuda"}


def llvm_target(num_cores: int = 2):
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_system_cpu
    return Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": llvm_get_system_cpu(),
                   "num-cores": num_cores})


def cuda_target(arch: str = "sm_80"):
    from tvm.target import Target
    return Target({"kind": "cuda", "arch": arch, "max_num_threads": 1024, "max_threads_per_block": 1024,
                   "max_shared_memory_per_block": 49152, "thread_warp_size": 32},
                  host={"kind": "llvm", "mtriple": "x86_64-linux-gnu"})


# ---------------------------------------------------------------- workloads
def _matmul(n: int = 512, m: int = 512, k: int = 512):
    from tvm import te
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _conv2d(n=1, c=64, h=56, w=56, o=64, kh=3, kw=3, stride=1, pad=1):
    from tvm import te, topi
    data = te.placeholder((n, c, h, w), name="data")
    kernel = te.placeholder((o, c, kh, kw), name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, stride, pad, 1)
    return te.create_prim_func([data, kernel, out])


def _depthwise(n=1, c=128, h=56, w=56, kh=3, kw=3, stride=1, pad=1):
    from tvm import te, topi
    data = te.placeholder((n, c, h, w), name="data")
    kernel = te.placeholder((c, 1, kh, kw), name="kernel")
    out = topi.nn.depthwise_conv2d_nchw(data, kernel, stride, pad, 1)
    return te.create_prim_func([data, kernel, out])


def _batch_matmul(b=12, n=128, m=128, k=64):
    from tvm import te, topi
    x = te.placeholder((b, n, k), name="X")
    y = te.placeholder((b, m, k), name="Y")
    out = topi.nn.batch_matmul(x, y)
    return te.create_prim_func([x, y, out])


def _softmax(n=128, m=1024):
    from tvm import te, topi
    x = te.placeholder((n, m), name="X")
    out = topi.nn.softmax(x, axis=-1)
    return te.create_prim_func([x, out])


def _layer_norm(n=128, m=768):
    from tvm import te, topi
    x = te.placeholder((n, m), name="X")
    gamma = te.placeholder((m,), name="gamma")
    beta = te.placeholder((m,), name="beta")
    out = topi.nn.layer_norm(x, gamma, beta, axis=[1])
    return te.create_prim_func([x, gamma, beta, out])


WORKLOADS: Dict[str, Callable] = {
    "matmul_512": _matmul,
    "conv2d_resnet_1x64x56x56_64x3x3": _conv2d,
    "depthwise_1x128x56x56_3x3": _depthwise,
    "batch_matmul_12x128x128x64": _batch_matmul,
    "softmax_128x1024": _softmax,
    "layer_norm_128x768": _layer_norm,
}


def workload_module(name: str):
    import tvm
    return tvm.IRModule({"main": WORKLOADS[name]()})


# ---------------------------------------------------------------- design space → candidates
def tune_context(mod, target, rules: Optional[str] = None, seed: int = 0, search_strategy=None,
                 num_threads: int = 1):
    """A MetaSchedule TuneContext with a PostOrderApply space generator for `target`,
    built without `TuneContext.__init__` (which imports every tensor intrinsic TVM knows,
    ~2 minutes). `rules`: MetaSchedule's rule set name ("llvm", "cuda", "from-target";
    default by target kind); `search_strategy`: e.g. `ms.search_strategy.EvolutionarySearch()`;
    `num_threads`: what MetaSchedule's own parallel parts (PerStoreFeature, search) use."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func

    rules = rules or DEFAULT_RULES.get(target.kind.name, "from-target")
    space = ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=rules, mutator_probs=rules)
    ctx = ms.TuneContext.__new__(ms.TuneContext)
    ctx.__init_handle_by_constructor__(_ffi_api.TuneContext, mod, target, space, search_strategy, "main",
                                       num_threads, seed, get_logging_func(get_logger(__name__)))
    _ffi_api.TuneContextInitialize(ctx)
    return ctx


def sample_candidates(ctx, count: int, seed: int = 0, max_tries: int = 0) -> List:
    """`count` postprocessed schedules: a design space of `ctx` (round robin), its sampling
    decisions drawn afresh, MetaSchedule's postprocessors applied (a candidate they reject
    is drawn again, up to `max_tries` draws in all; default 20 × count)."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    spaces = [Trace(s.trace.simplified(True).insts, {}) for s in ctx.generate_design_space()]
    postprocs = list(ctx.space_generator.postprocs)
    out: List = []
    tries = 0
    max_tries = max_tries or 20 * count
    while len(out) < count and tries < max_tries:
        trace = spaces[tries % len(spaces)]
        tries += 1
        sch = Schedule(ctx.mod, seed=seed * 1_000_003 + tries, debug_mask=0, error_render_level="none")
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except Exception:  # noqa: BLE001 — a sampled decision the primitives reject
            continue
        if all(p.apply(sch) for p in postprocs):
            out.append(sch)
    if len(out) < count:
        raise RuntimeError(f"only {len(out)} of {count} candidates survived postprocessing in {tries} tries")
    return out
