"""Is the measuring core quiet? Per-CPU load from psutil, before and during a measurement.

Timings taken while another process shares the measuring core are slow by an unknown
factor, so the collector refuses to start when that core is busy (unless forced) and,
during the run, looks at the core in the gaps between measurements — while our own runner
is idle, everything the core does is someone else's work — waiting a little for it to
calm down and recording what it saw beside every batch. Hypervisor steal time (another
VM on the same physical core) is reported separately: it slows kernels just the same but
nothing on this machine can stop it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

BUSY_PERCENT = 20.0   # a measuring core busier than this (other processes' share) counts as loaded


@dataclass(frozen=True)
class CoreLoad:
    """Share of one core's time, in percent, over `seconds`."""

    core: int
    busy: float      # user + system + nice + irq + softirq (what other processes took)
    steal: float     # taken by the hypervisor
    seconds: float

    def describe(self) -> str:
        return f"core {self.core}: {self.busy:.0f}% busy, {self.steal:.0f}% steal over {self.seconds:.1f} s"


def _times(core: int):
    import psutil

    return psutil.cpu_times(percpu=True)[core]


def _deltas(before, after) -> Tuple[float, float, float]:
    """(busy, steal, total) seconds of one core between two psutil snapshots."""
    total = max(sum(after) - sum(before), 1e-9)
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0))
    steal = getattr(after, "steal", 0.0) - getattr(before, "steal", 0.0)
    return max(0.0, total - idle - steal), steal, total


def _load(core: int, busy: float, steal: float, total: float, seconds: float) -> CoreLoad:
    total = max(total, 1e-9)
    return CoreLoad(core, 100.0 * busy / total, 100.0 * steal / total, seconds)


def measure_load(core: int, seconds: float = 2.0) -> CoreLoad:
    """Load of `core` over the next `seconds` (this process sleeps meanwhile)."""
    return machine_load(seconds)[core]


def machine_load(seconds: float = 1.0) -> List[CoreLoad]:
    """Load of every core over the next `seconds` (this process sleeps meanwhile)."""
    import psutil

    before = psutil.cpu_times(percpu=True)
    time.sleep(seconds)
    after = psutil.cpu_times(percpu=True)
    return [_load(core, *_deltas(b, a), seconds) for core, (b, a) in enumerate(zip(before, after))]


class LoadMonitor:
    """Foreign load on the measuring core, seen only while our runner is idle.

    `mark()` when a timing ends opens an idle window, `close()` when the next one starts
    adds the window to the running totals; `batch_load()` returns (and resets) the load
    over all windows since its last call. The windows between timings of one batch are
    short (a build), but their sum over a batch spans seconds, enough for the kernel's
    10 ms accounting ticks."""

    def __init__(self, core: int, threshold: float):
        self.core = core
        self.threshold = threshold
        self._before = None
        self._at = 0.0
        self._sums = [0.0, 0.0, 0.0, 0.0]  # busy, steal, total, seconds

    def mark(self) -> None:
        self._before, self._at = _times(self.core), time.monotonic()

    def close(self) -> None:
        if self._before is None:
            return
        busy, steal, total = _deltas(self._before, _times(self.core))
        for i, value in enumerate((busy, steal, total, time.monotonic() - self._at)):
            self._sums[i] += value
        self._before = None

    def since_mark(self) -> Optional[CoreLoad]:
        if self._before is None:
            return None
        return _load(self.core, *_deltas(self._before, _times(self.core)), time.monotonic() - self._at)

    def batch_load(self) -> Optional[CoreLoad]:
        busy, steal, total, seconds = self._sums
        self._sums = [0.0, 0.0, 0.0, 0.0]
        return _load(self.core, busy, steal, total, seconds) if total > 0 else None

    def before_measuring(self, max_wait_s: float = 60.0, window_s: float = 2.0) -> Optional[CoreLoad]:
        """The foreign load since the last mark; if above the threshold, wait in `window_s`
        steps (up to `max_wait_s`) for a quiet window. Returns the last load seen."""
        load = self.since_mark()
        waited = 0.0
        while load is not None and load.busy > self.threshold and waited < max_wait_s:
            load = measure_load(self.core, window_s)
            waited += window_s
        return load
