"""A fixed reference kernel timed on the measuring runner every few minutes (drift).

The machine's speed drifts over a multi-hour run (other VMs, thermal and frequency
changes, load we cannot see). A kernel that never changes — a 512³ float32 matmul with one
fixed schedule (32×32 register tiles, vectorised, its outer loop parallel so it also
exercises the runtime's thread pool) — is built once, then timed on the same LocalRunner
(same worker, same core, same evaluator settings) as the candidates, every `every_s`
seconds. `reference.jsonl` keeps each timing with its wall-clock time, so that a slow
period shows up and a record's runtime can be divided by the reference's speed at the
time it was measured (`drift_factor`).
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from .jsonl import JsonlLog, read_jsonl

SIZE = 512
TILE = 32


@dataclass(frozen=True)
class ReferenceKernel:
    """The built kernel: an exported library and MetaSchedule's argument description."""

    artifact_path: str
    args_info: list  # ArgInfo.as_json() of each argument

    def runner_input(self):
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        return RunnerInput(self.artifact_path, "cpu", [ArgInfo.from_json(a) for a in self.args_info])


def reference_schedule():
    """The fixed schedule of the 512³ matmul."""
    from tvm import s_tir, te

    a = te.placeholder((SIZE, SIZE), name="A")
    b = te.placeholder((SIZE, SIZE), name="B")
    k = te.reduce_axis((0, SIZE), name="k")
    c = te.compute((SIZE, SIZE), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    io, ii = sch.split(i, [None, TILE])
    jo, ji = sch.split(j, [None, TILE])
    ko, ki = sch.split(kk, [None, 4])
    sch.reorder(io, jo, ko, ii, ki, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    sch.decompose_reduction(block, ko)
    return sch


def build_reference(folder: str, target) -> ReferenceKernel:
    """Build the kernel into `folder/reference_kernel.tar` (reused when it is there)."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.support.tar import tar

    path = os.path.join(folder, "reference_kernel.tar")
    info_path = os.path.join(folder, "reference_kernel.json")
    sch = reference_schedule()
    args_info = [a.as_json() for a in ArgInfo.from_prim_func(sch.mod["main"])]
    if not (os.path.exists(path) and os.path.exists(info_path)):
        os.makedirs(folder, exist_ok=True)
        lib = tvm.compile(sch.mod, target=target)
        tmp = path + f".{os.getpid()}.partial.tar"
        lib.export_library(tmp, fcompile=tar)
        os.replace(tmp, path)
        with open(info_path + ".partial", "w", encoding="utf-8") as f:
            json.dump({"args_info": args_info, "target": str(target), "size": SIZE, "tile": TILE}, f)
        os.replace(info_path + ".partial", info_path)
    return ReferenceKernel(path, json.loads(json.dumps(args_info)))


class ReferenceTimer:
    """Times the reference kernel on `runner` when `every_s` seconds have passed."""

    def __init__(self, runner, kernel: ReferenceKernel, path: str, every_s: float, tags: Dict,
                 measure_core: int = -1):
        self.runner, self.kernel, self.every_s, self.tags = runner, kernel, every_s, dict(tags)
        self.measure_core = measure_core
        self.log = JsonlLog(path)
        self._last = -float("inf")
        self.repinned = 0  # times the runner's worker was found off its core

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.every_s

    def maybe_time(self, note: str = "") -> Optional[Dict]:
        return self.time_now(note) if self.due() else None

    def time_now(self, note: str = "") -> Dict:
        """One timing on the measuring runner, appended to the log and returned; first, the
        runner's worker is checked (and put back) on the measuring core."""
        from .runner import runner_affinity

        affinity, repinned = (runner_affinity(self.runner, self.measure_core)
                              if self.measure_core >= 0 else ((), False))
        self.repinned += repinned
        (future,) = self.runner.run([self.kernel.runner_input()])
        result = future.result()
        self._last = time.monotonic()
        secs = [float(s) for s in result.run_secs] if result.run_secs else []
        row = {"time": time.time(), "note": note, "run_secs": secs,
               "min": min(secs) if secs else None,
               "median": statistics.median(secs) if secs else None,
               "error": None if secs else str(result.error_msg)[:500],
               "runner_affinity": list(affinity), "repinned": repinned, **self.tags}
        self.log.append(row)
        return row

    def close(self) -> None:
        self.log.close()


def drift_factor(rows: List[Dict], at: float, window_s: float = 900.0) -> float:
    """The machine's slowness at wall-clock time `at`: the median reference time within
    ±window_s, divided by the median over the whole run (1.0 without data). Dividing a
    runtime measured at `at` by this factor corrects for drift."""
    good = [r for r in rows if r.get("median")]
    if not good:
        return 1.0
    overall = statistics.median(r["median"] for r in good)
    near = [r["median"] for r in good if abs(r["time"] - at) <= window_s]
    return statistics.median(near) / overall if near else 1.0


def read_reference(path: str) -> List[Dict]:
    return read_jsonl(path)
