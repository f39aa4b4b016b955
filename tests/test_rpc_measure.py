"""Measuring through TVM's RPC tracker, on localhost: a tracker and two servers started
here (each its own process group, killed after LIFETIME_S at the latest, torn down by PID
at the end, pass or fail); one server is killed (or frozen) in the middle of a session."""
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from extract.autotvm import rpc as rpc_measure
from extract.autotvm.measure import sample_jobs
from extract.autotvm.records import RUN_TIMEOUT, read_records
from extract.tir.workloads import parse_workloads

ROOT = Path(__file__).resolve().parent.parent
TINY = "1x8x8x8_8x3x3_s1_p1"
KEY = "tpsim-test"
LIFETIME_S = 240  # no process started here outlives this, even if pytest itself is killed
# seconds a config may take to build here: generous, a shared core can be slow (a build
# timeout is a local failure, never retried on a server, and would hide what a test checks)
BUILD_TIMEOUT_S = "200"


def _prefix():
    """Pinned to core 0 while a long measurement owns core 1 (see /work/plan/MEASURING)."""
    return ["taskset", "-c", "0"] if os.path.exists("/work/plan/MEASURING") else []


def _env():
    env = dict(os.environ, TVM_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Farm:
    """Processes started by one test; `kill_all` ends each one's process group by PID."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs = {}

    def start(self, name: str, module_args) -> subprocess.Popen:
        out = open(self.folder / f"{name}.log", "w")
        cmd = _prefix() + ["timeout", "-s", "KILL", str(LIFETIME_S), sys.executable, "-m", *module_args]
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(),
                                start_new_session=True, cwd=ROOT)
        out.close()
        self.procs[name] = proc
        return proc

    def signal(self, name: str, sig: int) -> None:
        try:
            os.killpg(self.procs[name].pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, name: str) -> None:
        self.signal(name, signal.SIGKILL)
        self.procs[name].wait(timeout=30)

    def kill_all(self) -> None:
        for name in list(self.procs):
            self.signal(name, signal.SIGCONT)
            self.kill(name)

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def running_configs(self, name: str) -> int:
        """Sessions of a server with a config loaded and not finished (its log says
        "load_module" once per session, after the upload)."""
        text = self.log(name)
        return text.count("load_module") - text.count("finish serving")


class RpcFarm(Farm):
    """A tracker and servers "a" and "b" registered with key KEY."""

    def __init__(self, folder: Path):
        super().__init__(folder)
        self.started = time.monotonic()
        self.tracker_port = _free_port()
        self.config = rpc_measure.RpcConfig("127.0.0.1", self.tracker_port, KEY)
        self.servers = {}  # name → "host:port"
        self.start("tracker", ["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                               str(self.tracker_port), "--port-end", str(self.tracker_port + 1)])
        _wait(lambda: _accepts(self.tracker_port), 60, self, "the tracker to listen")

    def ensure_servers(self) -> None:
        """Both servers running and registered (started again if a test killed one)."""
        for name in ("a", "b"):
            if name not in self.procs or self.procs[name].poll() is not None:
                port = _free_port()
                self.start(name, ["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(port),
                                  "--port-end", str(port + 1), "--tracker", self.config.tracker, "--key", KEY])
                self.servers[name] = f"127.0.0.1:{port}"
            self.signal(name, signal.SIGCONT)
        _wait(lambda: sorted(self.config.servers()) == sorted(self.servers.values()), 90, self,
              "both servers to register")


@pytest.fixture(scope="module")
def rpc_farms(tmp_path_factory):
    """The module's farms, the newest last (all torn down at the end)."""
    farms = []
    try:
        yield farms, lambda: RpcFarm(tmp_path_factory.mktemp("rpc_farm"))
    finally:
        for farm in farms:
            farm.kill_all()


@pytest.fixture
def farm(rpc_farms):
    """A farm with both servers registered and at least half of LIFETIME_S left to live (on
    a loaded machine the module outlasts one farm's lifetime)."""
    farms, make = rpc_farms
    old = farms and (time.monotonic() - farms[-1].started > LIFETIME_S / 2
                     or farms[-1].procs["tracker"].poll() is not None)
    if not farms or old:
        if farms:
            farms[-1].kill_all()
        farms.append(make())
    farms[-1].ensure_servers()
    return farms[-1]


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _wait(condition, seconds: float, farm: Farm, what: str) -> None:
    deadline = time.time() + seconds
    while not condition():
        if time.time() > deadline:
            logs = "\n".join(f"--- {n}\n{farm.log(n)[-2000:]}" for n in farm.procs)
            raise AssertionError(f"gave up waiting for {what} after {seconds} s\n{logs}")
        time.sleep(0.05)


def _driver(farm: RpcFarm, name: str, log: Path, configs: int, *extra: str) -> subprocess.Popen:
    return farm.start(name, ["extract.measure", "--log", str(log), "--workloads", TINY,
                             "--per-workload", str(configs), "--repeat", "3", "--min-repeat-ms", "100",
                             "--timeout", BUILD_TIMEOUT_S,
                             "--tracker", farm.config.tracker, "--rpc-key", KEY, *extra])


def _text(log: Path) -> str:
    return log.read_text() if log.exists() else ""


def _lines(log: Path) -> int:
    return len(_text(log).splitlines())


def _planned(configs: int):
    return {(wl, i) for _, wl, i in sample_jobs("conv2d_NCHWc.x86", parse_workloads([TINY]), configs, 0, 64)}


def _check_log(log: Path, planned):
    """Every planned config has exactly one final record; retried ones are marked.
    Returns (final records by config, error records marked rpc_retried)."""
    records = list(read_records(str(log)))
    final = [r for r in records if not r.extra.get("rpc_retried")]
    retried = [r for r in records if r.extra.get("rpc_retried")]
    from extract.autotvm.templates import get_template
    template = get_template("conv2d_NCHWc.x86")
    key = lambda r: (template.parse_task_args(r.task_args), r.config_index)  # noqa: E731
    counts = Counter(key(r) for r in final)
    assert set(counts) == planned and set(counts.values()) == {1}, counts
    by_config = {key(r): r for r in final}
    for r in retried:
        assert not r.ok and r.extra["rpc_attempt"] == 1
        again = by_config[key(r)]
        assert again.extra["rpc_attempt"] == 2 and again.extra["rpc_server"] != r.extra["rpc_server"]
    for r in final:
        assert r.extra["rpc_attempt"] == (2 if any(key(x) == key(r) for x in retried) else 1)
    return by_config, retried


def test_a_hung_server_costs_only_its_config(farm, tmp_path):
    servers = dict(farm.servers)
    log = tmp_path / "rpc.jsonl"
    planned = _planned(3)
    driver = _driver(farm, "hang-driver", log, 3, "--rpc-session-timeout", "5")
    _wait(lambda: farm.running_configs("b") > 0 or driver.poll() is not None, 120, farm, "a config on b")
    assert driver.poll() is None, farm.log("hang-driver")  # b had no config: nothing was checked
    farm.signal("b", signal.SIGSTOP)  # frozen with a config running: it never answers again
    try:
        assert driver.wait(timeout=120) == 0, farm.log("hang-driver")
    finally:
        farm.signal("b", signal.SIGCONT)  # back to work for the next test
    by_config, retried = _check_log(log, planned)
    assert [(r.extra["rpc_server"], r.error_no) for r in retried] == [(servers["b"], RUN_TIMEOUT)]
    assert "hung" in retried[0].error_msg
    assert all(r.ok for r in by_config.values())


def test_a_killed_server_costs_only_its_config_and_a_killed_driver_resumes(farm, tmp_path):
    servers = dict(farm.servers)
    log = tmp_path / "rpc.jsonl"
    planned = _planned(6)
    driver = _driver(farm, "kill-driver", log, 6, "--rpc-session-timeout", "20")
    # kill server "a" while a config runs on it
    _wait(lambda: farm.running_configs("a") > 0 or driver.poll() is not None, 120, farm, "a session on a")
    assert driver.poll() is None, farm.log("kill-driver")
    killed_at = time.time()
    farm.kill("a")
    # its config comes back as an error record; kill the driver itself once one more
    # record is in, and run it again
    _wait(lambda: '"rpc_retried"' in _text(log) or driver.poll() is not None, 120, farm,
          "the error record of a's config")
    lines = _lines(log)
    _wait(lambda: _lines(log) > lines or driver.poll() is not None, 120, farm, "one more record")
    farm.kill("kill-driver")
    before = log.read_text()
    rerun = _driver(farm, "kill-rerun", log, 6, "--rpc-session-timeout", "20")
    assert rerun.wait(timeout=180) == 0, farm.log("kill-rerun")
    assert log.read_text().startswith(before)  # appended, nothing rewritten
    by_config, retried = _check_log(log, planned)
    # the config in flight on "a" when it died is an error record, measured again on "b"
    assert [r.extra["rpc_server"] for r in retried] == [servers["a"]], farm.log("kill-driver")
    assert all(r.ok for r in by_config.values())
    # valid runtimes come from live servers only: from "a", only what it timed before it died
    assert all(r.extra["rpc_server"] in servers.values() for r in by_config.values())
    assert all(r.timestamp < killed_at for r in by_config.values() if r.extra["rpc_server"] == servers["a"])
    # the rerun measured only what the log lacked
    done_before = len([line for line in before.splitlines() if '"rpc_retried"' not in line])
    assert f"{done_before} already in" in farm.log("kill-rerun")
    assert _lines(log) == len(planned) + len(retried)


def test_rpc_flags_are_checked():
    with pytest.raises(ValueError, match="HOST:PORT"):
        rpc_measure.RpcConfig.parse("localhost", KEY)
    with pytest.raises(ValueError, match="key"):
        rpc_measure.RpcConfig.parse("localhost:9190", "")
    config = rpc_measure.RpcConfig.parse("localhost:9190", KEY, session_timeout=7.6)
    ms = config.meta_schedule()
    assert (ms.tracker_host, ms.tracker_port, ms.tracker_key, ms.session_timeout_sec) == \
        ("localhost", 9190, KEY, 8)
    with pytest.raises(ConnectionError, match="no RPC tracker"):
        rpc_measure.RpcConfig("127.0.0.1", _free_port(), KEY).servers()


def test_measure_cli_refuses_bad_rpc_flags(tmp_path, capsys):
    from extract.autotvm import measure
    log = str(tmp_path / "x.jsonl")
    base = ["--log", log, "--workloads", TINY, "--per-workload", "1"]
    with pytest.raises(SystemExit):
        measure.main(base + ["--tracker", "127.0.0.1:9190"])  # no key
    with pytest.raises(SystemExit):
        measure.main(base + ["--rpc-target", '{"kind": "llvm"}'])  # no tracker
    assert measure.main(base + ["--tracker", f"127.0.0.1:{_free_port()}", "--rpc-key", KEY]) == 2
    assert "no RPC tracker" in capsys.readouterr().err
    assert measure.main(base + ["--tracker", "127.0.0.1:9190", "--rpc-key", KEY,
                                "--rpc-target", "llvm -mcpu=x"]) == 2
    assert "--rpc-target" in capsys.readouterr().err
    assert not os.path.exists(log)


def test_log_state_knows_final_records_and_pending_retries(tmp_path):
    from extract.autotvm.records import MeasureRecord
    from extract.autotvm.templates import get_template
    template = get_template("conv2d_NCHWc.x86")
    wl = next(iter(parse_workloads([TINY]).values()))
    space = template.space(wl)

    def line(index, ok, **extra):
        return MeasureRecord("llvm", template.name, template.task_args(wl), index,
                             space.to_entity(space.get(index)), [1e-5] if ok else [1e9],
                             0 if ok else 4, extra=extra).to_json()

    log = tmp_path / "log.jsonl"
    log.write_text("\n".join([
        line(1, True, rpc_server="h:1", rpc_attempt=1),
        line(2, False, rpc_server="h:1", rpc_attempt=1, rpc_retried=True),  # its retry never ran
        line(3, False, rpc_server="h:2", rpc_attempt=1, rpc_retried=True),
        line(3, True, rpc_server="h:1", rpc_attempt=2),
        line(4, False),  # a local error record is final
    ]) + "\n")
    state = rpc_measure.LogState.read(str(log))
    job = lambda i: rpc_measure.MeasureJob(template.name, wl, i)  # noqa: E731
    assert state.done == {job(1), job(3), job(4)}
    assert state.failed_on[job(2)] == ["h:1"] and state.attempt(job(2)) == 2
    assert state.attempt(job(5)) == 1


def test_append_log_writes_whole_lines(tmp_path):
    import threading
    from extract.fileio import AppendLog
    path = tmp_path / "log.jsonl"
    path.write_text("partial")  # a file edited by hand, without its last newline
    with AppendLog(path) as log:
        def write(tag):
            for i in range(200):
                log.append(f"{tag}{i:04d}" + "x" * 20000)
        threads = [threading.Thread(target=write, args=(t,)) for t in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    lines = path.read_text().split("\n")
    assert lines[0] == "partial" and lines[-1] == ""
    assert sorted(lines[1:-1]) == sorted(f"{t}{i:04d}" + "x" * 20000 for t in "ab" for i in range(200))


def test_metaschedule_rpc_runner_measures_on_a_farm_server(farm, tmp_path):
    """`RpcConfig.meta_schedule_runner()` (what MetaSchedule tuning measures with) uploads
    a built kernel to a server the tracker hands out and times it there."""
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, RunnerInput
    from tvm.support.tar import tar
    a = te.placeholder((32, 32), name="A")
    b = te.compute((32, 32), lambda i, j: a[i, j] * 2.0, name="B")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    path = str(tmp_path / "scale_by_two.tar")
    tvm.compile(mod, target="llvm").export_library(path, fcompile=tar)
    runner = rpc_measure.RpcConfig("127.0.0.1", farm.tracker_port, KEY, session_timeout=60).meta_schedule_runner(
        EvaluatorConfig(number=3, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=False))
    result = runner.run([RunnerInput(path, "cpu", ArgInfo.from_prim_func(mod["main"]))])[0].result()
    assert result.error_msg is None and len(result.run_secs) == 2
    assert all(math.isfinite(float(s)) and float(s) > 0 for s in result.run_secs)  # timings, not a failure
    assert any("scale_by_two.tar" in farm.log(name) for name in ("a", "b"))  # timed on a server


def test_simulator_tune_measures_through_the_tracker(farm, tmp_path):
    """`simulator.tune --tracker --rpc-key`: MetaSchedule tuning whose candidates are timed
    on the farm's servers, written to a database the reader takes back."""
    from extract.metaschedule.database import read_databases
    from simulator.metaschedule import tune

    work = str(tmp_path / "tune")
    summary = tune.run(["dense_32x32x48", "--cost-model", "random", "--trials", "4", "--trials-per-iter", "4",
                        "--work-dir", work, "--tracker", f"127.0.0.1:{farm.tracker_port}", "--rpc-key", KEY,
                        "--quiet"])
    assert summary["tasks"][0]["trials"] == 4 and summary["tasks"][0]["errors"] == 0
    assert math.isfinite(summary["tasks"][0]["best_s"]) and summary["tasks"][0]["best_s"] > 0
    assert any(".tar" in farm.log(name) or ".so" in farm.log(name) for name in ("a", "b"))  # timed remotely
    jobs, report = read_databases([work])
    assert len(jobs) == 4  # every measured candidate is a record the reader takes back
