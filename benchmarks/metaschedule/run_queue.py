"""How long a process tree waited for a core: Linux's per-thread run delay (`schedstat`).

A tuning step's wall time is the tuner's own only while nothing else competes for its cores.
What other processes *used* of the machine (`benchmarks.common.others_cpu_s`) overstates what
they *took*: work at a low priority mostly soaks up cycles the tuner leaves idle. The run delay
is the time the tuner's threads were runnable but not running, which is what contention
costs it:

    with RunQueueWait(proc.pid) as wait:
        proc.wait()
    wait.waited_s     # seconds, summed over every thread of the process and its descendants

The tree is sampled every `interval` seconds (a thread's counter only grows, so the last
sample of each thread is kept; a process that lived less than one interval may be missed)
by a thread of the calling process that runs on `cores` only (e.g. off the measuring core:
its wake-ups would land in the kernels' timings). Where /proc has no schedstat (not Linux, or
a kernel without it) `waited_s` is None.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Iterable, Optional, Sequence, Tuple

import psutil

Key = Tuple[int, float, int]   # (pid, the process's start time, thread id): pids are reused


def thread_delays(pid: int, proc_root: str = "/proc") -> Dict[int, int]:
    """Run delay in ns of each thread of `pid` (schedstat's second field); {} if it is gone."""
    out = {}
    try:
        tids = os.listdir(os.path.join(proc_root, str(pid), "task"))
    except OSError:
        return out
    for tid in tids:
        try:
            with open(os.path.join(proc_root, str(pid), "task", tid, "schedstat"), encoding="ascii") as f:
                out[int(tid)] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def tree(pid: int) -> Iterable[psutil.Process]:
    """The process and its living descendants (none if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


class RunQueueWait:
    """Samples the run delay of `pid`'s process tree while in the `with` block (module docstring)."""

    def __init__(self, pid: int, interval: float = 1.0, cores: Optional[Sequence[int]] = None,
                 proc_root: str = "/proc"):
        self.pid, self.interval, self.cores, self.proc_root = pid, interval, cores, proc_root
        self.delays: Dict[Key, int] = {}
        self.supported = os.path.exists(os.path.join(proc_root, "self", "schedstat"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="run-queue-wait", daemon=True)

    def __enter__(self) -> "RunQueueWait":
        if self.supported:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.supported:
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        if self.cores:
            os.sched_setaffinity(0, set(self.cores))   # pid 0: this thread only (Linux)
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        for proc in tree(self.pid):
            try:
                started = proc.create_time()
            except psutil.Error:
                continue
            for tid, ns in thread_delays(proc.pid, self.proc_root).items():
                key = (proc.pid, started, tid)
                self.delays[key] = max(self.delays.get(key, 0), ns)

    @property
    def waited_s(self) -> Optional[float]:
        return sum(self.delays.values()) / 1e9 if self.supported else None
