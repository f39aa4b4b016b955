"""The measuring protocol of the XLA layout collection, as on the TVM side
(extract/ms_runner.py, extract/ms_reference.py):

* **One core, one thread.** `pin_process(settings)` pins the process to `settings.core`
  and sets XLA's CPU backend to one thread (`SINGLE_THREAD_FLAGS` in `XLA_FLAGS`) — before
  JAX starts its backend, so it must run before the first JAX computation. `settings.core`
  −1 is the last core of the process's affinity (so under `taskset -c 0` it is core 0).
  Compiling and timing never overlap: a batch is compiled, then timed. (Two Python threads
  compiling at once are no faster — with these flags XLA's CPU client compiles on one thread
  of its own — but a second process on another core halves a batch's compile time:
  compile_ahead.py, `compile_core`.)
* **Interleaved rounds, every repeat kept.** `time_interleaved` takes a batch of compiled
  configs (a program's whole pass, up to `batch`): each is run once to warm up and its
  `number` (runs per repeat) calibrated so a repeat lasts ≥ `min_repeat_ms`; then
  `repeats` rounds, each timing one repeat of every config in a shuffled order. This
  machine's speed drifts by up to ~25 % within seconds (a 256³ matmul, a steady program,
  moves that much with nothing else running): configs timed one after another carry that
  drift into their ranking, configs timed in the same rounds share it.
* **Relative to the neighbours.** Each timing is divided by the median of the
  `NEIGHBOURS` timings on each side of it (other configs, timed within the same second),
  which takes out what they shared; a config's runtime is the median of its ratios times
  the batch's median timing. Measured on a ResNet training step (39 configs compiled
  twice, 100 rounds): Kendall τ between the two compilations 0.59 from raw medians, 0.72
  from the ratios; timing each config's 30 repeats back to back, 0.16. The raw median
  and minimum are recorded beside it.
* **Which clock.** `wall` (the default, as the TVM side) on a core nothing else uses;
  `cpu` — the process's CPU time (`time.process_time`; XLA runs the program on a thread of
  its own, so the caller's thread time would miss it) — where the core is shared: under
  load a 4 ms program took 190 ms of wall time but 3.6–3.7 ms of CPU time, run after run.
  Both are recorded for every repeat; `clock` picks the one runtimes and the probe use.
* **A drift kernel.** `Reference` is a fixed 256×256×256 matmul chain compiled once with the
  same flags and timed the same way every `reference_every_s`; its timings go to
  `reference.jsonl` with the wall-clock time, so slow periods show up.
* **A noise ceiling.** The collector re-measures `remeasure_fraction` of every program's
  configs (recompiled, in a batch of their own after the first pass): their agreement
  (Kendall τ) is the ceiling a model of the runtimes can reach.
"""
from __future__ import annotations

import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

CLOCKS = ("wall", "cpu")
NEIGHBOURS = 5  # timings on each side a timing is compared with
SINGLE_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")


@dataclass(frozen=True)
class MeasureSettings:
    """How a program's configs are timed (module docstring)."""

    core: int = -1                  # −1: the last core this process may run on
    repeats: int = 50               # rounds: timings per config
    min_repeat_ms: float = 20.0
    batch: int = 200                # configs compiled and timed in the same rounds
    remeasure_fraction: float = 0.1
    reference_every_s: float = 300.0
    clock: str = "wall"             # "wall", or "cpu": the process's CPU time (a shared core)
    compile_core: Optional[int] = None  # another core compiling half of each batch (compile_ahead.py)

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.batch < 1 or self.min_repeat_ms <= 0:
            raise ValueError(f"repeats ({self.repeats}) and batch ({self.batch}) must be ≥ 1 "
                             f"and min_repeat_ms ({self.min_repeat_ms}) > 0")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock {self.clock!r}: one of {', '.join(CLOCKS)}")
        if not 0.0 <= self.remeasure_fraction <= 1.0:
            raise ValueError(f"remeasure fraction {self.remeasure_fraction} is not in 0..1")
        cores = os.cpu_count() or 1
        if self.compile_core is not None and self.compile_core not in range(cores):
            raise ValueError(f"compile core {self.compile_core}: this machine has cores 0–{cores - 1}")

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
    if settings.compile_core == core:
        raise ValueError(f"compile core {core} is the measuring core; name another one, or none")
    os.sched_setaffinity(0, {core})
    flags = os.environ.get("XLA_FLAGS", "").split()
    flags += [f for f in SINGLE_THREAD_FLAGS if f not in flags]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    return {"core": core, "xla_flags": os.environ["XLA_FLAGS"]}


def time_call(call: Callable[[], Any], settings: MeasureSettings) -> Dict[str, Any]:
    """`time_interleaved` of one call (a batch of one)."""
    return time_interleaved([call], settings)[0]


def time_interleaved(calls: Sequence[Callable[[], Any]], settings: MeasureSettings,
                     seed: Any = 0) -> List[Dict[str, Any]]:
    """Seconds per run of each call (each must block until its result is ready), timed in
    `settings.repeats` shuffled rounds (module docstring): per call every repeat by wall
    clock and by the process's CPU time, the runs per repeat, the runtime (its median ratio
    to its neighbours × the batch's median, on `settings.clock`), the raw median and minimum."""
    clock = 0 if settings.clock == "wall" else 1
    for call in calls:
        call()  # warm-up: first-run allocations and page faults are not the program's runtime
    numbers = [_calibrate(call, settings.min_repeat_ms, clock) for call in calls]
    timed: List[List[Tuple[float, float]]] = [[] for _ in calls]
    sequence: List[Tuple[int, float]] = []  # (call, seconds per run on the clock), in time order
    order, shuffle = list(range(len(calls))), random.Random(str(seed)).shuffle
    for _ in range(settings.repeats):
        shuffle(order)
        for i in order:
            wall, cpu = _repeat(calls[i], numbers[i])
            timed[i].append((wall / numbers[i], cpu / numbers[i]))
            sequence.append((i, timed[i][-1][clock]))
    ratios = relative_to_neighbours(sequence, len(calls))
    scale = statistics.median(t for _, t in sequence)
    out = []
    for i, number in enumerate(numbers):
        chosen = [t[clock] for t in timed[i]]
        out.append({"repeats_s": [t[0] for t in timed[i]], "cpu_repeats_s": [t[1] for t in timed[i]],
                    "number": number, "clock": settings.clock, "interleaved": len(calls),
                    # alone, a call's neighbours are itself: its ratios are only noise around 1
                    "runtime_s": (statistics.median(chosen) if len(calls) == 1
                                  else scale * statistics.median(ratios[i])),
                    "median_s": statistics.median(chosen), "min_s": min(chosen)})
    return out


def relative_to_neighbours(sequence: Sequence[Tuple[int, float]], calls: int) -> List[List[float]]:
    """Per call, each of its timings divided by the median of the NEIGHBOURS timings on
    either side of it in `sequence` ((call, seconds) in time order)."""
    times = [t for _, t in sequence]
    ratios: List[List[float]] = [[] for _ in range(calls)]
    for p, (i, t) in enumerate(sequence):
        around = times[max(0, p - NEIGHBOURS):p] + times[p + 1:p + 1 + NEIGHBOURS]
        typical = statistics.median(around) if around else 0.0
        ratios[i].append(t / typical if typical > 0 else 1.0)  # a lone timing, or too fast to see
    return ratios


def _calibrate(call: Callable[[], Any], min_repeat_ms: float, clock: int) -> int:
    """Runs per repeat so that a repeat lasts ≥ min_repeat_ms on the clock: the fastest of
    three tries decides (one try preempted on a busy machine would make a repeat too short)."""
    def fastest(number: int) -> float:
        return min(_repeat(call, number)[clock] for _ in range(3))

    number, seconds = 1, fastest(1)
    while seconds * 1e3 < min_repeat_ms:
        number = max(number + 1, int(number * 1.2 * min_repeat_ms / max(seconds * 1e3, 1e-3)))
        seconds = fastest(number)
    return number


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
