"""Measuring one config: schedule, build, check against the workload's NumPy reference,
time; in a spawned process that a hang or a crash costs only that config.

`measure_one` runs in the worker process (`Worker`, a `Slot`); `check_and_time` is the
part after the build, shared with the remote path (`extract.autotvm.rpc`, on a device of
an RPC session). Errors become `MeasureResult`s with AutoTVM's error_no, never exceptions.
Used by `extract.measure` (the CLI) and `extract.autotvm.rpc`.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from extract.tir.workloads import Workload
from . import records as rec
from .templates import get_template


class MeasureJob(NamedTuple):
    """One config to measure: template name, workload, config index."""

    template: str
    workload: Workload
    index: int


@dataclass
class MeasureResult:
    """What measuring one config gave (the worker's answer): the costs of each repeat
    (seconds; [1e9] on an error), AutoTVM's error_no and message, the seconds it took."""

    costs: List[float]
    error_no: int = rec.NO_ERROR
    error_msg: str = ""
    all_cost: float = 0.0

    @classmethod
    def failed(cls, error_no: int, error_msg: str, all_cost: float) -> "MeasureResult":
        return cls([1e9], error_no, error_msg, all_cost)


# ---------------------------------------------------------------- worker side
_inputs: Dict[Workload, Tuple[List[np.ndarray], List[np.ndarray]]] = {}


def reference_io(wl: Workload) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """Seeded inputs and the expected outputs (the workload's NumPy reference), cached
    per workload."""
    if wl not in _inputs:
        rng = np.random.default_rng(0)
        inputs = [rng.uniform(-1, 1, spec.shape).astype(spec.dtype) for spec in wl.inputs()]
        _inputs[wl] = (inputs, list(wl.reference(*inputs)))
    return _inputs[wl]


def measure_one(template_name: str, wl: Workload, index: int, repeat: int,
                min_repeat_ms: int) -> MeasureResult:
    """Schedule, build, check and time one config. Runs in the worker process."""
    import tvm

    start = time.time()
    template = get_template(template_name)

    def failed(error_no: int, e: BaseException) -> MeasureResult:
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
        return MeasureResult.failed(error_no, msg[:500], time.time() - start)

    try:
        wl = template.check_workload(wl)
        mod = template.schedule(wl, template.space(wl).get(index)).mod
    except Exception as e:  # noqa: BLE001 - any schedule failure is that config's record
        return failed(rec.INSTANTIATION_ERROR, e)
    try:
        module = tvm.compile(mod, target=template.make_target()).jit()
    except Exception as e:  # noqa: BLE001
        return failed(rec.COMPILE_HOST, e)
    try:
        return check_and_time(module, wl, repeat, min_repeat_ms, start)
    except Exception as e:  # noqa: BLE001
        return failed(rec.RUNTIME_DEVICE, e)


def check_and_time(module, wl: Workload, repeat: int, min_repeat_ms: int, start: float,
                   dev=None) -> MeasureResult:
    """Run a built workload once against its NumPy reference, then time it (on `dev`:
    this CPU by default, or a remote device of an RPC session)."""
    import tvm

    dev = tvm.cpu() if dev is None else dev
    inputs, expected = reference_io(wl)
    args = ([tvm.runtime.tensor(x, dev) for x in inputs]
            + [tvm.runtime.tensor(np.zeros_like(e), dev) for e in expected])
    module["main"](*args)
    outputs = [a.numpy() for a in args[len(inputs):]]
    if not all(np.allclose(o, e, rtol=1e-3, atol=1e-3) for o, e in zip(outputs, expected)):
        err = max(float(np.abs(o - e).max()) for o, e in zip(outputs, expected))
        return MeasureResult.failed(rec.WRONG_ANSWER, f"ValueError: max abs error {err:.3g}", time.time() - start)
    timer = module.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    costs = [float(c) for c in timer(*args).results]
    if not all(rec.MIN_COST_S <= c <= rec.MAX_COST_S for c in costs):  # NaN fails too
        return MeasureResult.failed(rec.RUNTIME_DEVICE, f"ValueError: implausible timings {costs}",
                                    time.time() - start)
    return MeasureResult(costs, rec.NO_ERROR, "", time.time() - start)


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: a killed driver must not leave a worker burning a core."""
    import threading

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


# ---------------------------------------------------------------- driver side

class SlotTimeout(Exception):
    """The process gave no answer in time (it was killed)."""


class SlotDied(Exception):
    """The process died (a crashed kernel, or killed from outside)."""


class Slot:
    """One spawned process that runs one call at a time; killed (with whatever it holds:
    a hung kernel, sockets) and replaced after a timeout or a crash."""

    def __init__(self) -> None:
        self.pool: Optional[cf.ProcessPoolExecutor] = None

    def call(self, fn, args: tuple, timeout: float):
        """fn(*args) in the process; `SlotTimeout` / `SlotDied` when it hangs or dies."""
        if self.pool is None:
            self.pool = cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=_exit_with_parent, initargs=(os.getpid(),))
        future = self.pool.submit(fn, *args)
        try:
            return future.result(timeout=timeout)
        except cf.TimeoutError:
            self.kill()
            raise SlotTimeout(f"no answer after {timeout:.0f} s") from None
        except cf.process.BrokenProcessPool as e:
            self.kill()
            raise SlotDied(f"measuring process died: {e}") from None

    def kill(self) -> None:
        """Stop the process now (`shutdown` alone would wait for a hung kernel forever)."""
        if self.pool is not None:
            for proc in list(getattr(self.pool, "_processes", {}).values()):
                proc.kill()
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


class Worker(Slot):
    """One spawned measuring process; a hang or a crash is a failed measurement."""

    def __init__(self, num_threads: int):
        os.environ["TVM_NUM_THREADS"] = str(num_threads)
        super().__init__()

    def run(self, job: MeasureJob, repeat: int, min_repeat_ms: int, timeout: float) -> MeasureResult:
        return self.measure(measure_one, (*job, repeat, min_repeat_ms), timeout)

    def measure(self, fn, args: tuple, timeout: float) -> MeasureResult:
        """fn(*args) in the worker; fn returns a `MeasureResult`, like `measure_one`."""
        try:
            return self.call(fn, args, timeout)
        except SlotTimeout:
            return MeasureResult.failed(rec.RUN_TIMEOUT, f"no result after {timeout:.0f} s", timeout)
        except SlotDied as e:
            return MeasureResult.failed(rec.RUNTIME_DEVICE, f"worker process died: {e}", 0.0)
