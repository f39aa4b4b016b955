"""The measuring protocol of the XLA layout collection, as on the TVM side
(extract/ms_runner.py, extract/ms_reference.py):

* **One core, one thread.** `pin_process(settings)` pins the whole process (compiling and
  timing run one after the other, in this process) to `settings.core` and sets XLA's CPU
  backend to one thread (`SINGLE_THREAD_FLAGS` in `XLA_FLAGS`) — before JAX starts its
  backend, so it must run before the first JAX computation. `settings.core` −1 is the
  last core of the process's affinity (so under `taskset -c 0` it is core 0).
* **Repeats of ≥ 20 ms, every repeat kept.** `time_call` runs the executable once to
  warm up, then calibrates `number` (runs per repeat) so a repeat lasts ≥
  `min_repeat_ms`, then times `repeats` repeats; each repeat's mean run time is kept.
  A config's runtime is the least disturbed repeat (the minimum: on a core that other
  work shares it is far steadier than the median, and on a quiet core the two agree);
  the median is recorded beside it.
* **Which clock.** `wall` (the default, as the TVM side) on a core nothing else uses;
  `cpu` — the process's CPU time (`time.process_time`; XLA runs the program on a thread of
  its own, so the caller's thread time would miss it) — where the core is shared: under
  load a 4 ms program took 190 ms of wall time but 3.6–3.7 ms of CPU time, run after run.
  Both are recorded for every repeat; `clock` picks the one runtimes and the probe use.
* **A drift kernel.** `Reference` is a fixed 256×256×256 matmul chain compiled once with the
  same flags and timed the same way every `reference_every_s`; its timings go to
  `reference.jsonl` with the wall-clock time, so slow periods show up.
* **A noise ceiling.** The collector re-measures `remeasure_fraction` of every program's
  configs (recompiled, later in the run): their agreement (Kendall τ) is the ceiling a
  model of the runtimes can reach.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Tuple

CLOCKS = ("wall", "cpu")
SINGLE_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")


@dataclass(frozen=True)
class MeasureSettings:
    """How a program's configs are timed (module docstring)."""

    core: int = -1                  # −1: the last core this process may run on
    repeats: int = 5
    min_repeat_ms: float = 20.0
    remeasure_fraction: float = 0.1
    reference_every_s: float = 300.0
    clock: str = "wall"             # "wall", or "cpu": the process's CPU time (a shared core)

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.min_repeat_ms <= 0:
            raise ValueError(f"repeats ({self.repeats}) must be ≥ 1 and min_repeat_ms "
                             f"({self.min_repeat_ms}) > 0")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock {self.clock!r}: one of {', '.join(CLOCKS)}")
        if not 0.0 <= self.remeasure_fraction <= 1.0:
            raise ValueError(f"remeasure fraction {self.remeasure_fraction} is not in 0..1")

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def measuring_core(core: int) -> int:
    cores = sorted(os.sched_getaffinity(0))
    if core < 0:
        return cores[-1]
    if core not in cores:
        raise ValueError(f"core {core} is not one this process may run on ({cores})")
    return core


def pin_process(settings: MeasureSettings) -> Dict[str, Any]:
    """Pin this process to the measuring core and make XLA's CPU backend single-threaded;
    what was set (for the run's record). Refused once JAX's backend has started."""
    if "jax" in sys.modules:
        from jax._src import xla_bridge
        if xla_bridge.backends_are_initialized():
            raise RuntimeError("JAX's backend is already running: pin_process must come first")
    core = measuring_core(settings.core)
    os.sched_setaffinity(0, {core})
    flags = os.environ.get("XLA_FLAGS", "").split()
    flags += [f for f in SINGLE_THREAD_FLAGS if f not in flags]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    return {"core": core, "xla_flags": os.environ["XLA_FLAGS"]}


def time_call(call: Callable[[], Any], settings: MeasureSettings) -> Dict[str, Any]:
    """Seconds per run of `call` (which must block until its result is ready), one
    entry per repeat of ≥ min_repeat_ms on `settings.clock`, by wall clock and by the
    process's CPU time; the runs per repeat; the runtime (the fastest repeat on
    `settings.clock`) and the median."""
    call()  # warm-up: first-run allocations and page faults are not the program's runtime
    clock = 0 if settings.clock == "wall" else 1
    number, first = 1, _repeat(call, 1)
    while first[clock] * 1e3 < settings.min_repeat_ms:
        number = max(number + 1, int(number * 1.2 * settings.min_repeat_ms / max(first[clock] * 1e3, 1e-3)))
        first = _repeat(call, number)
    repeats = [first] + [_repeat(call, number) for _ in range(settings.repeats - 1)]
    wall = [w / number for w, _ in repeats]
    cpu = [c / number for _, c in repeats]
    chosen = wall if clock == 0 else cpu
    return {"repeats_s": wall, "cpu_repeats_s": cpu, "number": number, "clock": settings.clock,
            "runtime_s": min(chosen), "median_s": statistics.median(chosen)}


def _repeat(call: Callable[[], Any], number: int) -> Tuple[float, float]:
    """(wall seconds, process CPU seconds) of `number` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(number):
        call()
    return time.perf_counter() - wall, time.process_time() - cpu


class Reference:
    """The drift kernel (module docstring): `due()` when it should be timed again,
    `measure()` its timing row."""

    SIZE = 256

    def __init__(self, settings: MeasureSettings) -> None:
        import jax
        import numpy as np

        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((self.SIZE, self.SIZE), dtype=np.float32) for _ in range(2))
        compiled = jax.jit(lambda x, y: jax.numpy.tanh(x @ y) @ y).lower(a, b).compile()
        args = [jax.device_put(a), jax.device_put(b)]
        self._call = lambda: compiled(*args).block_until_ready()
        self.settings = settings
        self._last = -float("inf")

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.settings.reference_every_s

    def measure(self) -> Dict[str, Any]:
        self._last = time.monotonic()
        return {"time": time.time(), "kernel": f"tanh(a@b)@b {self.SIZE}³ f32",
                **time_call(self._call, self.settings)}
