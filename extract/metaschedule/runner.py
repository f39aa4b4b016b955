"""The measuring protocol for MetaSchedule on this machine: target, builder, runner, pinning.

Shared by the dataset collector (`extract.ms_measure`) and `simulator.tune`, so
that every MetaSchedule measurement tpsim makes is taken the same way.

Why it is configured as it is (the VM has 2 cores shared with other work; two passes of
the same conv2d configs once agreed only to Kendall τ 0.71, mostly from load on the other
core):

* **One core measures, nothing else runs there.** The runner's worker process is pinned
  to `measure_core` (`os.sched_setaffinity` in the PopenPool initializer) and the kernels
  run single-threaded (`TVM_NUM_THREADS=1` in the worker, target `num-cores` 1), so a
  kernel never waits for a descheduled sibling thread. The builder's workers and this
  process (the search, the cost model) are pinned to the other core(s). `probe_runner`
  checks both facts inside the worker (affinity and thread count after a parallel kernel).
  The worker also runs at nice −10 where allowed, so that a process started on that
  core by mistake takes ~10% of it rather than half.
* **Evaluator**: `number=1, repeat=REPEAT, min_repeat_ms=20`. TVM's time evaluator raises
  `number` until one repeat lasts ≥ 20 ms, so a 50 µs kernel is timed over ~400 runs per
  repeat (the timer's resolution and one-off interrupts no longer dominate) while a 200 ms
  kernel runs once per repeat. MetaSchedule keeps one `run_secs` entry per repeat, so the
  database holds every repeat and a reader can take the minimum (least disturbed) or the
  median (typical) — the dataset reports both.
* **No cache flush.** `enable_cpu_cache_flush` flushes once per *repeat*, before `number`
  back-to-back runs; with ≥ 20 ms repeats almost all runs are warm anyway, so the flush
  would only add a variable cold first run to each repeat. Warm-cache timing is also what
  a network's steady-state inference sees for batch-1 kernels whose data fit in L2/L3.
* **Builder workers kept alive** (`make_builder`): LocalBuilder pays a 22 s import per
  build call; here once per worker.
* **Explicit timeouts** (builder 120 s, runner 60 s): LocalBuilder's default 30 s made its
  workers time out and respawn endlessly when the build core was loaded; a 60 s runner
  limit still catches a hung kernel (REPEAT × a 2 s kernel + calibration fits).
"""
from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import signal
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple

REPEAT = 5
MIN_REPEAT_MS = 20


@dataclass(frozen=True)
class MeasureConfig:
    """How MetaSchedule candidates are built and timed (see the module docstring)."""

    measure_core: int = 1
    build_cores: Tuple[int, ...] = (0,)
    number: int = 1
    repeat: int = REPEAT
    min_repeat_ms: int = MIN_REPEAT_MS
    enable_cpu_cache_flush: bool = False
    build_timeout_s: float = 120.0
    run_timeout_s: float = 60.0
    kernel_threads: int = 1
    runner_nice: int = -10           # if allowed: a stray process on the core gets ~10% of it

    def as_dict(self) -> Dict:
        return asdict(self)

    @staticmethod
    def for_machine(measure_core: int = -1) -> "MeasureConfig":
        """Measure on the last core (or `measure_core`), build and search on the others;
        on a one-core machine everything shares core 0."""
        cores = sorted(os.sched_getaffinity(0))
        core = cores[-1] if measure_core < 0 else measure_core
        others = tuple(c for c in cores if c != core) or (core,)
        return MeasureConfig(measure_core=core, build_cores=others)


def host_target(num_cores: int = 1):
    """LLVM for this CPU as LLVM detects it (`llvm_get_system_cpu`), `num_cores` cores
    (1: MetaSchedule still makes parallel loops, of at most 16 jobs, that run serially)."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_system_cpu

    return Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": llvm_get_system_cpu(),
                   "num-cores": num_cores})


ISA_FEATURE = re.compile(r"^(sse|ssse|avx|fma|f16c|bmi|amx|popcnt|lzcnt|movbe|sha|aes|vaes|gfni|vpclmulqdq|"
                         r"pclmul|adx|neon|sve|fp16|fullfp16|bf16|dotprod|i8mm)")
ARCH_NAMES = {"amd64": "x86_64", "arm64": "aarch64"}


def why_not_runnable_here(target) -> Optional[str]:
    """Why kernels built for `target` cannot be timed on this machine's CPU (None: they
    can): another kind of device, another architecture, or a CPU model with instruction
    sets this one lacks. Every candidate would fail, so a tuning run is refused first."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_cpu_features, llvm_get_system_cpu

    kind = str(target.kind.name)
    if kind != "llvm":
        return f"a {kind} target's kernels run on its device, not on this CPU; time them there (--tracker)"
    host = platform.machine()
    host = ARCH_NAMES.get(host, host)
    triple = str(target.attrs["mtriple"]) if "mtriple" in target.attrs else ""
    arch = ARCH_NAMES.get(triple.split("-")[0], triple.split("-")[0]) if triple else host
    if arch != host:
        return f"mtriple {triple} builds for {arch}; this machine is {host}"
    if "mcpu" not in target.attrs:
        return None
    here = Target({"kind": "llvm", "mcpu": llvm_get_system_cpu()})
    missing = sorted(f for f in set(llvm_get_cpu_features(target)) - set(llvm_get_cpu_features(here))
                     if ISA_FEATURE.match(str(f)))
    if missing:
        return (f"mcpu {target.attrs['mcpu']} uses instruction sets this CPU ({llvm_get_system_cpu()}) lacks: "
                f"{', '.join(map(str, missing[:8]))}{' …' if len(missing) > 8 else ''}")
    return None


# ---------------------------------------------------------------- pinning
def pin_process(cores: Sequence[int], threads: int = 0) -> None:
    """Pin the calling process to `cores`; with `threads` > 0 also fix TVM's thread pool
    size (read when the pool is first made, i.e. before the first kernel runs).

    `TVM_BIND_THREADS=0` keeps TVM from undoing the pinning: when its thread pool is made
    it binds the calling thread to the first `TVM_NUM_THREADS` cores of the *machine*
    (core 0 here), whatever the process's own affinity — measured: a worker pinned to
    core 1 ran on core 0 after its first `runtime.NumThreads` call."""
    os.sched_setaffinity(0, set(cores))
    os.environ["TVM_BIND_THREADS"] = "0"
    if threads > 0:
        os.environ["TVM_NUM_THREADS"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def _ignore_ctrl_c() -> None:
    """In a worker: Ctrl-C in a terminal reaches the whole process group, and the parent
    stops its workers itself (a worker's own KeyboardInterrupt only prints a traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pin_worker(cores: Tuple[int, ...], threads: int, nice: int = 0) -> None:
    """PopenPool initializer (runs in the worker before its first job); a priority the
    process may not take (not root) is left as it is."""
    _ignore_ctrl_c()
    pin_process(cores, threads)
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except PermissionError:
            pass


def load_tensor_intrinsics(target) -> None:
    """Import TVM's tensor intrinsics, only x86's for an x86 LLVM target.

    MetaSchedule imports `tvm.s_tir.tensor_intrin` in the tuning process (TuneContext) and
    in every build worker (`default_build`); that package registers every architecture's
    intrinsics, 22 s of CPU here, 80% of it CUDA's TVMScript. A float32 kernel for an x86
    CPU can only be tensorised with x86's (MetaSchedule's VNNI/AVX-512 rules, int8 only),
    so for such a target the package is entered without running its `__init__` and only
    its x86 module is imported (~1 s). Another architecture's module can still be
    imported by name afterwards; other targets get the whole package."""
    _import_intrinsics(_is_x86_llvm(target))


def _import_intrinsics(x86_only: bool) -> None:
    import importlib
    import importlib.util
    import sys

    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return
    if not x86_only:
        importlib.import_module(name)
        return
    package = importlib.util.module_from_spec(importlib.util.find_spec(name))
    sys.modules[name] = package
    try:
        importlib.import_module(name + ".x86")
    except BaseException:
        del sys.modules[name]
        raise


def _is_x86_llvm(target) -> bool:
    if target is None or str(target.kind.name) != "llvm":
        return False
    triple = str(target.attrs["mtriple"]) if "mtriple" in target.attrs else ""
    return triple.startswith(("x86_64", "i686", "i386")) or (not triple and platform.machine() == "x86_64")


def _pin_build_worker(cores: Tuple[int, ...], x86_only: bool) -> None:
    """Builder initializer: pin, then import the tensor intrinsics `default_build` needs,
    once per worker instead of once per build call."""
    _ignore_ctrl_c()
    pin_process(cores, 1)
    _import_intrinsics(x86_only)


def make_builder(config: MeasureConfig, target=None, max_uses: int = 400):
    """MetaSchedule's LocalBuilder (its worker function, default build and export, error
    handling) with its workers pinned to the build cores and kept between calls.

    LocalBuilder starts a fresh process pool on every `build` call (to bound a memory leak
    of long-lived workers), and each fresh worker imports `tvm.s_tir.tensor_intrin` before
    its first build: 22 s of CPU here, against 0.05–0.5 s for the build itself, i.e. more
    than a second per candidate at MetaSchedule's batch sizes. Here the pool lives as long
    as the builder and a worker is replaced after `max_uses` builds (the leak stays bounded,
    the import is paid once per `max_uses` candidates). With `target`, the workers import
    only the tensor intrinsics it can use (`load_tensor_intrinsics`)."""
    init = functools.partial(_pin_build_worker, tuple(config.build_cores), _is_x86_llvm(target))
    return _pooled_builder_class()(len(config.build_cores), config.build_timeout_s, init, max_uses)


@functools.lru_cache(maxsize=None)
def _pooled_builder_class():
    """The PyBuilder class (made on first use, so that importing this module needs no TVM)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder import local_builder as lb
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class PooledLocalBuilder(PyBuilder):
        """`LocalBuilder.build` on a pool that outlives the call (see `make_builder`)."""

        def __init__(self, max_workers: int, timeout_sec: float, initializer, max_uses: int):
            super().__init__()
            self.timeout_sec = timeout_sec
            self.pool = PopenPoolExecutor(max_workers=max_workers, timeout=timeout_sec,
                                          initializer=initializer, maximum_process_uses=max_uses)

        def build(self, build_inputs):
            return list(self.build_iter(build_inputs))

        def build_iter(self, build_inputs):
            """The results in order, each as soon as it is built (the pool keeps building
            the next ones meanwhile), so a caller can time one while the next builds."""
            jobs = [(None, None, b.mod, b.target, lb._serialize_params(b.params)) for b in build_inputs]
            for done in self.pool.map_with_error_catching(lambda job: lb._worker_func(*job), jobs):
                if done.status == StatusKind.COMPLETE:
                    yield BuilderResult(done.value, None)
                elif done.status == StatusKind.TIMEOUT:
                    yield BuilderResult(None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds")
                else:
                    yield BuilderResult(None, "LocalBuilder: An exception occurred\n" + str(done.value))

    return PooledLocalBuilder


def evaluator_config(config: MeasureConfig):
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

    return EvaluatorConfig(number=config.number, repeat=config.repeat,
                           min_repeat_ms=config.min_repeat_ms,
                           enable_cpu_cache_flush=config.enable_cpu_cache_flush)


def make_runner(config: MeasureConfig):
    """MetaSchedule's LocalRunner: its one long-lived worker pinned to the measuring core,
    kernels single-threaded. `TVM_NUM_THREADS` is also set here, so the worker process
    starts with it in its environment."""
    from tvm.s_tir.meta_schedule.runner import LocalRunner

    os.environ["TVM_NUM_THREADS"] = str(config.kernel_threads)
    os.environ["TVM_BIND_THREADS"] = "0"
    init = functools.partial(_pin_worker, (config.measure_core,), config.kernel_threads, config.runner_nice)
    return LocalRunner(timeout_sec=config.run_timeout_s, evaluator_config=evaluator_config(config),
                       initializer=init)


@contextlib.contextmanager
def off_measure_core(config: MeasureConfig):
    """Inside: every thread of this process (the search, the cost model, torch's pool) on
    the build cores, so that only the runner's worker uses the measuring core; the
    previous affinity is restored after. Nothing changes when the measuring core is also a
    build core (a one-core machine)."""
    if config.measure_core in config.build_cores:
        yield
        return
    before = os.sched_getaffinity(0)
    _set_process_affinity(set(config.build_cores))
    try:
        yield
    finally:
        _set_process_affinity(before)


def _set_process_affinity(cores) -> None:
    for tid in os.listdir("/proc/self/task"):   # sched_setaffinity(0) moves the calling thread only
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:   # a thread that ended meanwhile
            pass


# ---------------------------------------------------------------- checking it
@dataclass(frozen=True)
class RunnerProbe:
    """What the runner's worker process reports about itself after running a kernel."""

    pid: int
    affinity: Tuple[int, ...]
    threads_after_kernel: int      # OS threads of the worker process
    tvm_num_threads: int           # TVM's thread pool size
    env_tvm_num_threads: str
    max_thread_cpu_s: Dict[str, float]  # CPU seconds of each thread other than the main one
    nice: int = 0


def _probe_in_worker(artifact_path: str, args_info: list) -> dict:
    """Runs inside the runner's worker: make TVM's thread pool, time the given kernel (it
    has a parallel loop), then report affinity (read last: anything above that moves the
    process shows), thread count and each thread's CPU time."""
    import tvm
    from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument

    pool_threads = int(tvm.get_global_func("runtime.NumThreads")())
    module = tvm.runtime.load_module(artifact_path)
    dev = tvm.runtime.device("cpu", 0)
    args = default_alloc_argument(dev, args_info, 1)[0]
    module.time_evaluator(module.entry_name, dev, number=5, repeat=3)(*args)
    tasks = os.listdir("/proc/self/task")
    cpu = {}
    for tid in tasks:
        if tid == str(os.getpid()):
            continue
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return {"pid": os.getpid(), "threads_after_kernel": len(tasks), "tvm_num_threads": pool_threads,
            "env_tvm_num_threads": os.environ.get("TVM_NUM_THREADS", ""), "max_thread_cpu_s": cpu,
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "affinity": tuple(sorted(os.sched_getaffinity(0)))}


def _affinity_in_worker(core: int) -> Tuple[Tuple[int, ...], bool]:
    """Runs inside the runner's worker: its affinity, re-pinned to `core` if it moved."""
    found = tuple(sorted(os.sched_getaffinity(0)))
    if found != (core,):
        os.sched_setaffinity(0, {core})
    return found, found != (core,)


def runner_affinity(runner, core: int) -> Tuple[Tuple[int, ...], bool]:
    """The cores the runner's worker was allowed, and whether it had to be re-pinned."""
    found, repinned = runner.pool.submit(_affinity_in_worker, core).result()
    return tuple(found), bool(repinned)


def probe_runner(runner, artifact_path: str, args_info: list) -> RunnerProbe:
    """Ask the runner's own worker (the process that times every candidate) how it runs."""
    future = runner.pool.submit(_probe_in_worker, artifact_path, args_info)
    return RunnerProbe(**future.result())


def check_probe(probe: RunnerProbe, config: MeasureConfig) -> List[str]:
    """Problems with how the worker runs (empty when it is as the protocol says)."""
    problems = []
    if probe.affinity != (config.measure_core,):
        problems.append(f"runner worker runs on cores {probe.affinity}, not {config.measure_core}")
    if probe.tvm_num_threads != config.kernel_threads:
        problems.append(f"TVM thread pool has {probe.tvm_num_threads} threads, not {config.kernel_threads}")
    busy = {tid: s for tid, s in probe.max_thread_cpu_s.items() if s > 0.05}
    if config.kernel_threads == 1 and busy:
        problems.append(f"threads other than the main one used CPU while a kernel ran: {busy}")
    return problems
