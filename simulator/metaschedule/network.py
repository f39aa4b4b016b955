"""A tuned network compiled with its tuning database and timed end to end.

    from simulator.metaschedule.network import end_to_end
    e2e = end_to_end("bert", target, work_dir, measure)   # after simulator.tune bert …
    e2e.latency_s, e2e.repeats_s

The network is imported into Relax as its tasks were extracted (`extract.metaschedule.tasks.
import_network`), the work dir's database applied to it (`MetaScheduleApplyDatabase`;
PrimFuncs the database lacks stay unscheduled, and how many is counted), built by the
Relax VM's lowering passes, exported to `work_dir/network.so`, and timed in a child
process with the dataset's protocol (`extract.metaschedule.runner.MeasureConfig`): pinned to the
measuring core, single-threaded (`TVM_NUM_THREADS=1`), the Relax VM's `time_evaluator`
with `number`, `repeat` and `min_repeat_ms` of the measuring configuration (one repeat
lasts ≥ 20 ms), every repeat kept. The inputs are random, of the network's shapes. After the
repeats, `KERNEL_RUNS` more runs are timed call by call (the VM's instrument hook around each
kernel and builtin it calls): `kernels_s`, each function's seconds per run of the network, to
set beside its task's best measured alone — a kernel can be slower inside the network, where
the data it reads was last touched by other kernels, than in its own timing loop.

Run as `python -m simulator.metaschedule.network LIB SHAPES_JSON NUMBER REPEAT MIN_REPEAT_MS`, it is
the timing child: it prints the repeats and the kernels' seconds as JSON.
"""
from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Sequence

from simulator.registry import SimulatorError

LIBRARY = "network.so"
KERNEL_RUNS = 5      # runs of the network timed kernel by kernel, after the repeats


@dataclass
class EndToEnd:
    """One network's compiled module, timed: the median of the repeats (a burst of work elsewhere
    on the machine lengthens some repeats and would pull a mean) and every repeat."""

    latency_s: float
    repeats_s: List[float]
    compile_s: float
    functions: int            # PrimFuncs of the network's module
    tuned: int                # of them scheduled from the database
    library: str
    kernels_s: Dict[str, float] = field(default_factory=dict)   # function → seconds per run, inside the network

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def apply_database(mod, database, target):
    """`mod`'s PrimFuncs replaced by the database's best schedules (MetaSchedule's
    `MetaScheduleApplyDatabase`); (module, tuned, functions): how many PrimFuncs it scheduled.

    Applied to the module exactly as `import_network` gave it to the task extraction:
    `ms.relax_integration.compile_relax` of TVM 0.27 legalises and fuses again first, which
    re-annotates every PrimFunc with an `op_pattern` attribute, and then no record matches
    (the network is compiled unscheduled — measured: the Mixer layer 67× slower than its
    tasks' bests, 0 of 7 tasks found)."""
    import tvm
    from tvm.relax.transform import MetaScheduleApplyDatabase

    with target, database, tvm.transform.PassContext(opt_level=3):
        scheduled = MetaScheduleApplyDatabase(enable_warning=False)(mod)
    funcs = [f for _, f in scheduled.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    tuned = sum(1 for f in funcs if f.attrs is not None and bool(f.attrs.get("tirx.is_scheduled", False)))
    return scheduled, tuned, len(funcs)


def build(mod, target):
    """The Relax VM executable of an already legalised, fused and scheduled module
    (TVM's lowering and finalising passes only)."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline

    try:
        passes = pipeline.dataflow_lower_passes(target) + pipeline.finalize_passes(target)
    except (ValueError, AttributeError):  # no backend entry for this target: compile_relax's own list
        t = relax.transform
        passes = [t.RewriteDataflowReshape(), t.ToNonDataflow(), t.RemovePurityChecking(), t.CallTIRRewrite(),
                  t.StaticPlanBlockMemory(), t.LowerAllocTensor(), t.KillAfterLastUse(), t.LowerRuntimeBuiltin(),
                  t.ComputePrimValue(), t.VMShapeLower(), t.AttachGlobalSymbol()]
    passes = tvm.transform.Sequential(passes)
    with target, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=passes)


def kernel_gaps(kernels_s: Dict[str, float], tasks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per task with a kernel in the network: its seconds per run inside the network and its
    best alone × its calls (`best_s` × `weight`), the largest excess first."""
    rows = [{"name": t["name"], "inside_s": kernels_s[t["name"]], "alone_s": t["best_s"] * t["weight"]}
            for t in tasks if t.get("name") in kernels_s and t.get("best_s") is not None]
    return sorted(rows, key=lambda r: r["alone_s"] - r["inside_s"])


def compile_network(name: str, target, work_dir: str, database=None, library: str = "") -> Dict[str, Any]:
    """Compile network `name` with `database` (default: `work_dir`'s) applied and export it
    to `work_dir/library` (default `LIBRARY`); its path, compile seconds and counts of tuned
    PrimFuncs."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.tasks import import_network

    start = time.perf_counter()
    with target:
        mod = import_network(name)
    if database is None:
        database = ms.database.JSONDatabase(work_dir=work_dir, allow_missing=False)
    try:
        scheduled, tuned, functions = apply_database(mod, database, target)
        executable = build(scheduled, target)
        path = os.path.join(work_dir, library or LIBRARY)
        executable.export_library(path)
    except Exception as e:  # noqa: BLE001 - TVM's passes and the linker raise their own error types
        raise SimulatorError(f"{name}: compiling with {work_dir}'s database failed: "
                             f"{' '.join(str(e).split())[:300]}") from None
    return {"library": path, "compile_s": time.perf_counter() - start, "functions": functions, "tuned": tuned}


def time_library(path: str, shapes: Sequence[Sequence[int]], measure) -> Dict[str, Any]:
    """{"repeats": seconds per run of the library's `main`, one per repeat; "kernels": each
    function's seconds per run}, timed in a child pinned to `measure.measure_core` with
    single-threaded kernels."""
    env = dict(os.environ, TVM_NUM_THREADS=str(measure.kernel_threads), OMP_NUM_THREADS=str(measure.kernel_threads),
               TVM_BIND_THREADS="0")
    argv = [sys.executable, "-m", "simulator.metaschedule.network", path, json.dumps([list(s) for s in shapes]),
            str(measure.number), str(measure.repeat), str(measure.min_repeat_ms)]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False,
                              timeout=max(60.0, 20 * measure.run_timeout_s),
                              preexec_fn=functools.partial(_pin_timer, measure.measure_core, measure.runner_nice))
    except subprocess.TimeoutExpired:
        raise SimulatorError(f"{path}: timing the network took longer than {20 * measure.run_timeout_s:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SimulatorError(f"{path}: timing the network failed (exit {done.returncode}): {last[:300]}")
    timed = json.loads(done.stdout.strip().splitlines()[-1])
    return {"repeats": [float(s) for s in timed["repeats"]],
            "kernels": {str(k): float(v) for k, v in timed["kernels"].items()}}


def _pin_timer(core: int, nice: int) -> None:
    """In the timing child before it starts: the measuring core and, if allowed, the
    runner's priority (as `extract.metaschedule.runner`'s timing worker)."""
    os.sched_setaffinity(0, {core})
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        pass


def end_to_end(name: str, target, work_dir: str, measure) -> EndToEnd:
    """Network `name` compiled with `work_dir`'s tuning database and timed end to end."""
    from extract.metaschedule.networks import get_network

    built = compile_network(name, target, work_dir)
    timed = time_library(built["library"], get_network(name).input_shapes, measure)
    return EndToEnd(statistics.median(timed["repeats"]), timed["repeats"], built["compile_s"], built["functions"],
                    built["tuned"], built["library"], timed["kernels"])


def _time_here(path: str, shapes: List[List[int]], number: int, repeat: int, min_repeat_ms: int) -> Dict[str, Any]:
    """In the timing child: the VM's time_evaluator on random inputs, every repeat; then the
    kernels' seconds per run."""
    import numpy as np
    import tvm
    from tvm import relax

    device = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), device)
    rng = np.random.default_rng(0)
    inputs = [tvm.runtime.tensor(rng.standard_normal(s).astype("float32"), device) for s in shapes]
    timer = vm.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
    repeats = [float(r) for r in timer(*inputs).results]
    return {"repeats": repeats, "kernels": _kernel_seconds(vm, inputs, KERNEL_RUNS)}


def _kernel_seconds(vm, inputs, runs: int) -> Dict[str, float]:
    """Each function the VM calls from `main`: seconds per run of `main`, summed over its
    calls, over `runs` runs (the instrument hook's own cost, about a microsecond a call, is
    in them)."""
    from collections import defaultdict

    seconds: Dict[str, float] = defaultdict(float)
    started: Dict[str, float] = {}

    def instrument(func, name, before_run, ret_value, *args):
        now = time.perf_counter()
        if before_run:
            started[name] = now
        else:
            seconds[name] += now - started.pop(name)

    vm.set_instrument(instrument)
    for _ in range(runs):
        vm["main"](*inputs)
    vm.set_instrument(None)
    return {name: s / runs for name, s in sorted(seconds.items())}


if __name__ == "__main__":
    lib, shapes_json, number, repeat, min_ms = sys.argv[1:6]
    print(json.dumps(_time_here(lib, json.loads(shapes_json), int(number), int(repeat), int(min_ms))))
