"""Ctrl-C during a MetaSchedule tuning run: a clean stop, never a crash.

MetaSchedule runs the search, the builds and the timings inside C++, which calls back
into Python (cost model, builder, runner, measure callbacks, and its logger — some of it
from C++ destructors, where an exception ends the process: a KeyboardInterrupt raised
by Python's default handler there was seen to abort with `std::terminate`). So here the
SIGINT handler only notes the signal, and it is raised at points where an exception
unwinds cleanly: before and after each search round (`resume.ResumingSearch`), before
each predict call of the cost model, between builds and while waiting for a timing
(the wrappers below). A batch cut short that way is lost whole — none of it was stored.
While a measured batch is being stored (database, cost model update, progress: from the
first to the last measure callback) the signal waits (`hold` / `release`), so what the
run reports is exactly what its database holds.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import PyBuilder
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture

POLL_S = 0.05   # how often a wait for a timing looks for a Ctrl-C


class Interrupts:
    """SIGINT noted while `catching()` (in the main thread only; elsewhere Python's own
    handling stays), raised as KeyboardInterrupt by `check()` unless held (`hold` /
    `release`).

    Inside `catching()` the main thread also blocks SIGINT. Threads and processes started
    meanwhile inherit the block — MetaSchedule's build and timing workers, forked
    featurizers — so a Ctrl-C in a terminal, which reaches the whole process group, stops
    this process alone instead of printing each worker's KeyboardInterrupt (a worker still
    importing TVM has not run the initializer that would ignore it). The signal then
    either reaches a thread that does not block it (Python's handler notes it) or waits,
    pending, until `check()` takes it."""

    def __init__(self) -> None:
        self.requested = False
        self._holding = False
        self._main = False

    @contextlib.contextmanager
    def catching(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGINT, self._note)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self._main = True
        try:
            yield self
        finally:
            self._take_pending()
            self._main = False
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, previous)

    def _take_pending(self) -> None:
        """A SIGINT that waits, blocked, for this process: noted and consumed."""
        if signal.SIGINT in signal.sigpending():
            signal.sigwait({signal.SIGINT})
            self.requested = True

    def _note(self, signum, frame) -> None:  # noqa: ARG002
        self.requested = True

    def check(self) -> None:
        if self._main and not self.requested and threading.current_thread() is threading.main_thread():
            self._take_pending()
        if self.requested and not self._holding:
            raise KeyboardInterrupt

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self.check()


@derived_object
class InterruptibleBuilder(PyBuilder):
    """`inner`'s builds, with a Ctrl-C check between candidates (`build_iter`, as
    `extract.metaschedule.runner`'s pooled builder has) or around the whole batch."""

    def __init__(self, inner, interrupts: Interrupts):
        super().__init__()
        self.inner, self.interrupts = inner, interrupts

    def build(self, build_inputs):
        self.interrupts.check()
        if not hasattr(self.inner, "build_iter"):
            results = list(self.inner.build(build_inputs))
        else:
            results = []
            for result in self.inner.build_iter(build_inputs):
                self.interrupts.check()
                results.append(result)
        self.interrupts.check()
        return results


@derived_object
class InterruptibleRunner(PyRunner):
    """`inner`'s timings; waiting for one looks for a Ctrl-C every `POLL_S`."""

    def __init__(self, inner, interrupts: Interrupts):
        super().__init__()
        self.inner, self.interrupts = inner, interrupts

    def run(self, runner_inputs):
        self.interrupts.check()
        return [_CheckedFuture(f, self.interrupts) for f in self.inner.run(runner_inputs)]


@derived_object
class _CheckedFuture(PyRunnerFuture):
    def __init__(self, inner, interrupts: Interrupts):
        super().__init__()
        self.inner, self.interrupts = inner, interrupts

    def done(self) -> bool:
        return self.inner.done()

    def result(self):
        while not self.inner.done():
            self.interrupts.check()
            time.sleep(POLL_S)
        return self.inner.result()


@derived_object
class InterruptibleCostModel(PyCostModel):
    """`inner` (any MetaSchedule cost model), with a Ctrl-C check before each predict."""

    def __init__(self, inner, interrupts: Interrupts):
        super().__init__()
        self.inner, self.interrupts = inner, interrupts

    def predict(self, context, candidates):
        self.interrupts.check()
        return self.inner.predict(context, candidates)

    def update(self, context, candidates, results) -> None:
        self.inner.update(context, candidates, results)

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)
