"""Measuring on remote devices through TVM's RPC tracker.

    python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port 9190            # one machine
    python -m tvm.exec.rpc_server --tracker TRACKER:9190 --key x86-farm  # each device
    python -m extract.measure --log run.jsonl --workloads resnet18 \\
        --tracker TRACKER:9190 --rpc-key x86-farm

Configs are built here (LLVM, for the template's target or `--rpc-target`), uploaded,
checked against the workload's NumPy reference and timed on whichever server the
tracker hands out: one `tvm.rpc` session per in-flight config, `RpcConfig.parallel`
configs in flight. The tracker does the matching (its queue, its priorities); nothing
here schedules devices.

Faults. Every in-flight config lives in its own spawned process ("slot"), so a server
that dies or hangs costs only the configs it holds: a lost connection, a remote error or
a session past its timeout (the server ends it; a hung server's silence is ended here
by killing the slot, `hang_deadline` seconds into the session) is written as an error record marked
``"rpc_retried": true`` and measured again (``"rpc_attempt": 2``), up to
`RpcConfig.retries` times, on another server when the tracker has one free. The run goes
on; only when no server takes a config within `RpcConfig.queue_timeout` (or the tracker
is gone) does it stop, with what it measured in the log.

The log is the state. Records are appended one whole line at a time
(`extract.fileio.AppendLog`); each carries ``rpc_server`` ("host:port") and
``rpc_attempt``. A rerun after a kill of the driver skips every config that has a final
record (any record not marked ``rpc_retried``) and resumes a config whose only records
are marked ``rpc_retried`` at its next attempt, away from the servers that failed it.
Readers of the log (`extract.tvm_log`) count the marked records as the errors they were.

`RpcConfig` is the typed configuration shared with MetaSchedule's `RPCRunner`
(`RpcConfig.meta_schedule()`), and `add_arguments`/`from_args` give every CLI the same
flags (`--tracker`, `--rpc-key`, `--rpc-session-timeout`, `--rpc-retries`, ...).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from extract.cli import NONNEGATIVE, POSITIVE, progress
from extract.fileio import AppendLog
from extract.tir.workloads import Workload, workload_name
from . import records as rec
from .records import MeasureRecord, read_records
from .templates import get_template
from .timing import MeasureJob, MeasureResult, Slot, SlotDied, SlotTimeout, check_and_time

RETRYABLE = (rec.RUNTIME_DEVICE, rec.RUN_TIMEOUT)  # remote-phase errors a server fault explains


@dataclass(frozen=True)
class RpcConfig:
    """Where and how to measure remotely.

    tracker_host, tracker_port: the RPC tracker (`python -m tvm.exec.rpc_tracker`).
    key: the device key the servers registered with (`rpc_server --key`).
    session_timeout: seconds one session (upload, check, timing of one config) may last;
        the server ends it after that, and the config is an error record (retried).
    retries: further attempts for a config whose server failed it (0: none).
    priority: the tracker's request priority (higher first).
    queue_timeout: seconds to wait for a free server before the run stops.
    parallel: configs in flight (0: one per server registered at the start).
    """

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout: float = 60.0
    retries: int = 1
    priority: int = 1
    queue_timeout: float = 600.0
    parallel: int = 0

    @property
    def hang_deadline(self) -> float:
        """Seconds after which a session's server is taken as hung: it had the session
        timeout to end the session itself, and half as long again to say so."""
        return 1.5 * self.session_timeout + 2.0

    def __post_init__(self) -> None:
        if not self.tracker_host:
            raise ValueError("RPC tracker: empty host")
        if not 0 < int(self.tracker_port) < 65536:
            raise ValueError(f"RPC tracker: port {self.tracker_port} out of range")
        if not self.key or any(c.isspace() or c == ":" for c in self.key):
            raise ValueError(f"RPC key {self.key!r}: give a non-empty key without spaces or ':'")
        if not self.session_timeout > 0 or not self.queue_timeout > 0:
            raise ValueError("RPC timeouts must be positive")
        if self.retries < 0 or self.parallel < 0:
            raise ValueError("RPC retries and parallel must be >= 0")

    @classmethod
    def parse(cls, tracker: str, key: str, **options) -> "RpcConfig":
        """From a "HOST:PORT" address."""
        host, sep, port = tracker.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"--tracker {tracker!r}: give HOST:PORT, e.g. 127.0.0.1:9190")
        return cls(host, int(port), key, **options)

    @property
    def tracker(self) -> str:
        return f"{self.tracker_host}:{self.tracker_port}"

    def connect_tracker(self, timeout: float = 10.0):
        """A `tvm.rpc.TrackerSession`; a clear error if nothing answers within `timeout` s."""
        try:
            socket.create_connection((self.tracker_host, self.tracker_port), timeout=timeout).close()
        except OSError as e:
            raise ConnectionError(f"no RPC tracker at {self.tracker} ({e}); start one with "
                                  f"python -m tvm.exec.rpc_tracker --port {self.tracker_port}") from None
        return _Tracker((self.tracker_host, self.tracker_port))

    def servers(self) -> List[str]:
        """Addresses ("host:port") of the servers registered with this key now."""
        tracker = self.connect_tracker()
        try:
            return _servers_of(tracker.summary(), self.key)
        finally:
            tracker.close()

    def meta_schedule(self):
        """The same configuration as MetaSchedule's `RPCConfig` (for `RPCRunner`)."""
        from tvm.s_tir.meta_schedule.runner import RPCConfig
        return RPCConfig(tracker_host=self.tracker_host, tracker_port=self.tracker_port,
                         tracker_key=self.key, session_priority=self.priority,
                         session_timeout_sec=max(1, int(round(self.session_timeout))))


    def meta_schedule_runner(self, evaluator_config=None):
        """MetaSchedule's `RPCRunner` measuring through this tracker, `parallel` sessions at
        once (0: one per server registered now). Its runs are not retried: a server fault
        is a failed candidate, as MetaSchedule has it."""
        from tvm.s_tir.meta_schedule.runner import RPCRunner
        workers = self.parallel or max(1, len(self.servers()))
        return RPCRunner(rpc_config=self.meta_schedule(), evaluator_config=evaluator_config,
                         max_workers=workers)


def add_arguments(parser: argparse.ArgumentParser):
    """The RPC flags, as one argument group (used by extract.measure and simulator.tune);
    returns the group, for a CLI's own remote-only flags."""
    group = parser.add_argument_group("measuring on remote devices through a TVM RPC tracker")
    group.add_argument("--tracker", metavar="HOST:PORT", help="the RPC tracker's address")
    group.add_argument("--rpc-key", metavar="KEY", help="device key the RPC servers registered with")
    group.add_argument("--rpc-session-timeout", type=POSITIVE, default=60.0, metavar="S",
                       help="seconds one remote session (one config) may last (default 60)")
    group.add_argument("--rpc-retries", type=NONNEGATIVE, default=1, metavar="N",
                       help="further attempts, on another server, for a config a server failed (default 1)")
    group.add_argument("--rpc-parallel", type=NONNEGATIVE, default=0, metavar="N",
                       help="configs in flight (default: one per server registered at the start)")
    group.add_argument("--rpc-wait", type=POSITIVE, default=600.0, metavar="S",
                       help="seconds to wait for a free server before stopping (default 600)")
    return group


def from_args(args: argparse.Namespace) -> Optional[RpcConfig]:
    """The RpcConfig the flags give, or None without --tracker/--rpc-key (local measuring)."""
    if not args.tracker and not args.rpc_key:
        return None
    if not (args.tracker and args.rpc_key):
        raise ValueError("--tracker and --rpc-key go together")
    return RpcConfig.parse(args.tracker, args.rpc_key, session_timeout=args.rpc_session_timeout,
                           retries=args.rpc_retries, queue_timeout=args.rpc_wait,
                           parallel=args.rpc_parallel)


def _servers_of(summary: dict, key: str) -> List[str]:
    return sorted(":".join(map(str, s["addr"])) for s in summary.get("server_info", [])
                  if s.get("key", "").split(":", 1)[-1] == key)


def _tracker_session_class():
    from tvm import rpc
    from tvm.rpc import base

    class Tracker(rpc.TrackerSession):
        """TVM's tracker client, with requests that also say which server they got."""

        def request_with_address(self, config: RpcConfig, max_retry: int = 5):
            """(server "host:port", session); like `TrackerSession.request`, which does not
            tell the server's address."""
            last = None
            for _ in range(max_retry):
                try:
                    if self._sock is None:
                        self._connect()
                    base.sendjson(self._sock, [base.TrackerCode.REQUEST, config.key, "", config.priority])
                    value = base.recvjson(self._sock)
                    if value[0] != base.TrackerCode.SUCCESS:
                        raise RuntimeError(f"tracker answered {value!r}")
                    url, port, matchkey = value[1]
                    return f"{url}:{port}", rpc.connect(url, port, matchkey, config.session_timeout)
                except OSError as e:
                    self.close()
                    last = e
                except RuntimeError as e:  # the server went away between the tracker's answer and ours
                    last = e
            raise ConnectionError(f"no session for key {config.key!r} after {max_retry} tries: {last}")

    return Tracker


_TRACKER_CLASS = None


def _Tracker(addr):  # noqa: N802 - the class is made on first use (tvm is imported late)
    global _TRACKER_CLASS
    if _TRACKER_CLASS is None:
        _TRACKER_CLASS = _tracker_session_class()
    return _TRACKER_CLASS(addr)


# ---------------------------------------------------------------- slot side (one spawned process per in-flight config)
class Built(NamedTuple):
    path: str
    seconds: float
    error: Optional[MeasureResult] = None


class Timed(NamedTuple):
    result: MeasureResult
    finished: float  # when the timing ended (seconds since the epoch)


_session = None  # the session this slot holds between `acquire_session` and `run_session`


def build_module(template_name: str, wl: Workload, index: int, target: str, folder: str) -> Built:
    """Schedule and compile one config for `target`, exported to a shared library."""
    import tvm

    start = time.time()
    template = get_template(template_name)

    def failed(error_no: int, e: BaseException) -> Built:
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
        return Built("", time.time() - start, MeasureResult.failed(error_no, msg[:500], time.time() - start))

    try:
        mod = template.schedule(template.check_workload(wl), template.space(wl).get(index)).mod
    except Exception as e:  # noqa: BLE001 - any schedule failure is that config's record
        return failed(rec.INSTANTIATION_ERROR, e)
    try:
        path = os.path.join(folder, f"cfg_{os.getpid()}_{index}.so")
        tvm.compile(mod, target=tvm.target.Target(target)).export_library(path)
    except Exception as e:  # noqa: BLE001
        return failed(rec.COMPILE_HOST, e)
    return Built(path, time.time() - start)


def acquire_session(config: RpcConfig, avoid: Tuple[str, ...]) -> str:
    """Ask the tracker for a session (waits in its queue); keep it; say which server.
    A server in `avoid` (it failed this config) is kept busy while another is asked for,
    when the tracker has another one free."""
    global _session
    tracker = _Tracker((config.tracker_host, config.tracker_port))
    try:
        address, session = tracker.request_with_address(config)
        if address in avoid and tracker.summary()["queue_info"].get(config.key, {}).get("free", 0):
            held = session  # noqa: F841 - holding it keeps the tracker from handing it out again
            address, session = tracker.request_with_address(config)
            del held
    finally:
        tracker.close()
    _session = session
    return address


def run_session(path: str, wl: Workload, target: str, repeat: int, min_repeat_ms: int) -> Timed:
    """Upload, check and time the library on the held session; then end the session."""
    global _session
    import tvm

    start = time.time()
    session, _session = _session, None
    try:
        session.upload(path)
        module = session.load_module(os.path.basename(path))
        dev = session.device(tvm.target.Target(target).get_target_device_type())
        result = check_and_time(module, wl, repeat, min_repeat_ms, start, dev)
    except Exception as e:  # noqa: BLE001 - the server's or the connection's fault, or the kernel's
        text = str(e).strip()
        timed_out = "RPCSessionTimeoutError" in text
        msg = (f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}")[:500]
        result = MeasureResult.failed(rec.RUN_TIMEOUT if timed_out else rec.RUNTIME_DEVICE, msg,
                                      time.time() - start)
    finally:
        del session  # closes the connection: the server takes its next client
        with contextlib.suppress(OSError):
            os.unlink(path)
    return Timed(result, time.time())


# ---------------------------------------------------------------- driver side
class TargetError(ValueError):
    """A target TVM cannot build for."""


class StopRun(Exception):
    """No server took a config in time, or the tracker is gone: the run stops."""


@dataclass
class LogState:
    """What a log says about a set of jobs: which have a final record, and for the rest
    the attempt they are at and the servers that failed them."""

    done: set = field(default_factory=set)
    failed_on: Dict[MeasureJob, List[str]] = field(default_factory=dict)
    passed_over: List[Tuple[str, int, str]] = field(default_factory=list)  # lines that are not records

    @classmethod
    def read(cls, log: str) -> "LogState":
        """Lines that are not records (the half-written last line of a run killed by an
        older writer) are passed over, as `extract.autotvm.measure.done_keys` does."""
        state = cls()
        if not os.path.exists(log):
            return state
        for r in read_records(log, skip_bad=True, bad=state.passed_over):
            try:
                template = get_template(r.task_name)
                job = MeasureJob(template.name, template.parse_task_args(r.task_args), r.config_index)
            except (KeyError, ValueError) as e:
                file, _, line = r.source.rpartition(":")
                state.passed_over.append((file, int(line), str(e)))
                continue
            if r.extra.get("rpc_retried"):
                state.failed_on.setdefault(job, []).append(str(r.extra.get("rpc_server", "")))
            else:
                state.done.add(job)
        return state

    def attempt(self, job: MeasureJob) -> int:
        return 1 + len(self.failed_on.get(job, []))


@dataclass
class Options:
    """How configs are measured (the extract.measure flags that apply remotely)."""

    repeat: int = 3
    min_repeat_ms: int = 20
    build_timeout: float = 30.0
    num_threads: int = 1
    target: str = ""  # "" → each template's own target
    progress: bool = True


class RemoteMeasurer:
    """Measure jobs through the tracker and append their records to `log`."""

    def __init__(self, config: RpcConfig, log: str, options: Options) -> None:
        import tvm

        self.config, self.log_path, self.options = config, log, options
        self.tvm_version = tvm.__version__
        self.lock = threading.Lock()
        self.stop: Optional[str] = None
        self.interrupted = False  # Ctrl-C: what the killed slots answer is not a measurement
        self.targets: Dict[str, str] = {}
        self.slots: List[Slot] = []
        self.local = threading.local()
        self.counts = {"records": 0, "errors": 0, "retried": 0}
        self.bar = None

    # -- one config
    def target(self, template_name: str) -> str:
        """The target configs of a template are built for (and recorded with)."""
        if template_name not in self.targets:
            import tvm
            target = (tvm.target.Target(self.options.target) if self.options.target
                      else get_template(template_name).make_target(self.options.num_threads))
            self.targets[template_name] = str(target)
        return self.targets[template_name]

    def slot(self) -> Slot:
        if not hasattr(self.local, "slot"):
            self.local.slot = Slot()
            with self.lock:
                self.slots.append(self.local.slot)
        return self.local.slot

    def measure(self, job: MeasureJob, attempt: int, avoid: Tuple[str, ...]) -> None:
        """Measure one config (and retry it after a server fault); write its records."""
        while self.stop is None:
            result, server, finished = self.measure_once(job, avoid)
            if self.interrupted:
                return
            retry = bool(server) and result.error_no in RETRYABLE and attempt <= self.config.retries
            self.write(job, result, server, attempt, finished, retried=retry)
            if not retry:
                return
            # marked for a retry even when the run is stopping: a rerun then retries it
            # (an unmarked error record would be final, and the config never measured)
            self.note(f"{server} failed {workload_name(job.workload)} config {job.index} "
                      f"({rec.ERROR_NAMES[result.error_no]}: {result.error_msg[:80]}); "
                      + ("retrying on another server" if self.stop is None else "a rerun retries it"))
            attempt, avoid = attempt + 1, avoid + (server,)

    def measure_once(self, job: MeasureJob, avoid: Tuple[str, ...]) -> Tuple[MeasureResult, str, float]:
        """(result, server or "" for a local failure, when it finished)."""
        slot, target = self.slot(), self.target(job.template)
        try:
            built = slot.call(build_module, (*job, target, self.folder), self.options.build_timeout)
        except SlotTimeout as e:
            return MeasureResult.failed(rec.BUILD_TIMEOUT, str(e), self.options.build_timeout), "", time.time()
        except SlotDied as e:
            return MeasureResult.failed(rec.COMPILE_HOST, str(e), 0.0), "", time.time()
        if built.error is not None:
            return built.error, "", time.time()
        try:
            server = slot.call(acquire_session, (self.config, avoid), self.config.queue_timeout)
        except SlotTimeout:
            raise StopRun(f"no server with key {self.config.key!r} took a config within "
                          f"{self.config.queue_timeout:.0f} s (--rpc-wait)") from None
        except (SlotDied, ConnectionError, OSError) as e:
            raise StopRun(f"tracker {self.config.tracker}: {e}") from None
        try:
            timed = slot.call(run_session, (built.path, job.workload, target, self.options.repeat,
                                            self.options.min_repeat_ms),
                              self.config.hang_deadline)
        except SlotTimeout:
            msg = f"server {server} hung: no answer after {self.config.hang_deadline:.0f} s"
            return MeasureResult.failed(rec.RUN_TIMEOUT, msg, self.config.hang_deadline), server, time.time()
        except SlotDied as e:
            return MeasureResult.failed(rec.RUNTIME_DEVICE, str(e), 0.0), server, time.time()
        timed.result.all_cost += built.seconds
        return timed.result, server, timed.finished

    def write(self, job: MeasureJob, result: MeasureResult, server: str, attempt: int,
              finished: float, retried: bool) -> None:
        template = get_template(job.template)
        space = template.space(job.workload)
        extra = {"tvm_version": self.tvm_version, "rpc_server": server, "rpc_attempt": attempt}
        if retried:
            extra["rpc_retried"] = True
        record = MeasureRecord(
            target=self.target(job.template), task_name=template.name,
            task_args=template.task_args(job.workload), config_index=job.index,
            entity=space.to_entity(space.get(job.index)), costs=result.costs,
            error_no=result.error_no, all_cost=result.all_cost, timestamp=finished,
            error_msg=result.error_msg, extra=extra)
        with self.lock:
            self.log.append(record.to_json())
            self.counts["retried" if retried else "records"] += 1
            self.counts["errors"] += not retried and not record.ok
            if self.bar is not None and not retried:
                self.bar.update(1)
                self.bar.set_postfix(errors=self.counts["errors"], retried=self.counts["retried"])

    def note(self, text: str) -> None:
        from tqdm import tqdm
        tqdm.write(text, file=sys.stderr)

    def guarded(self, job: MeasureJob, attempt: int, avoid: Tuple[str, ...]) -> None:
        if self.stop is not None:
            return
        try:
            self.measure(job, attempt, avoid)
        except StopRun as e:
            with self.lock:
                self.stop = self.stop or str(e)

    # -- the run
    def run(self, jobs: Sequence[MeasureJob], state: LogState, parallel: int) -> int:
        with tempfile.TemporaryDirectory(prefix="tpsim-rpc-") as folder, AppendLog(self.log_path) as log, \
                progress(total=len(jobs), desc="measure", unit="cfg", enabled=self.options.progress) as bar:
            self.folder, self.log, self.bar = folder, log, bar
            pool = cf.ThreadPoolExecutor(parallel, thread_name_prefix="rpc-slot")
            try:
                futures = [pool.submit(self.guarded, job, state.attempt(job), tuple(state.failed_on.get(job, [])))
                           for job in jobs]
                for future in futures:
                    future.result()
            except BaseException:
                self.interrupted = True
                self.stop = self.stop or "interrupted"
                for slot in self.slots:
                    slot.kill()
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
                for slot in self.slots:
                    slot.close()
            self.bar = None
        return 0 if self.stop is None else 1


def measure_jobs(jobs: Sequence[MeasureJob], log: str, config: RpcConfig,
                 options: Optional[Options] = None) -> int:
    """Measure `jobs` through the tracker, resuming `log`; 0 when all were measured, 1 when
    the run stopped (no server in time, tracker gone) — rerun to resume."""
    options = options or Options()
    measurer = RemoteMeasurer(config, log, options)
    for template_name in sorted({j.template for j in jobs}):
        try:
            measurer.target(template_name)
        except ValueError as e:
            raise TargetError(f"--rpc-target {options.target!r}: {str(e).splitlines()[-1]}") from None
    servers = config.servers()  # also: the tracker answers, or a clear error
    state = LogState.read(log)
    if state.passed_over:
        file, line, reason = state.passed_over[0]
        print(f"{log}: {len(state.passed_over)} lines that are not records passed over "
              f"(first {file}:{line}: {reason})", file=sys.stderr)
    pending = [j for j in dict.fromkeys(jobs) if j not in state.done]
    resumed = sum(1 for j in pending if j in state.failed_on)
    parallel = config.parallel or max(1, len(servers))
    print(f"{len(jobs)} configs planned, {len(jobs) - len(pending)} already in {log}, "
          f"{len(pending)} to measure ({resumed} at a retry) on {len(servers)} server(s) with key "
          f"{config.key!r} at {config.tracker}, {parallel} in flight", file=sys.stderr)
    if not servers:
        print(f"warning: no server registered with key {config.key!r} yet; waiting up to "
              f"{config.queue_timeout:.0f} s for one", file=sys.stderr)
    code = measurer.run(pending, state, parallel)
    c = measurer.counts
    print(f"wrote {c['records']} records to {log} ({c['errors']} errors; {c['retried']} error records "
          f"of configs retried after a server fault)", file=sys.stderr)
    if measurer.stop is not None:
        print(f"error: stopped: {measurer.stop}; the log holds what was measured, rerun to resume",
              file=sys.stderr)
    return code
