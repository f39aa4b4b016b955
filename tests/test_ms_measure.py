"""The MetaSchedule measuring CLI (extract.ms_measure) for real, on one small BERT task.

One run is killed with SIGKILL part-way and then resumed; the resumed run, a second
(remeasure) pass and a run whose every build fails are checked. Builds and timings are
real (LLVM for this CPU, the pinned LocalRunner), so the file takes a minute or two, most
of it TVM importing its tensor intrinsics once per process.
"""
import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ["--networks", "bert", "--only", "layer_norm", "--force", "--max-wait", "0",
          "--reference-every", "0", "--progress-every", "1000"]
PLAN = ["--trials-per-task", "8", "--batch", "2"]


def _cli(*argv, check: bool = True) -> subprocess.CompletedProcess:
    """The command in its own process (it pins itself and imports only x86's tensor
    intrinsics, neither of which may leak into the test process)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "extract.ms_measure", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def _rows(path):
    from extract.metaschedule.jsonl import read_jsonl

    return read_jsonl(path)


def _lines(path) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.endswith("\n"))


def _kill_part_way(work: str, log) -> None:
    """Start the CLI, SIGKILL it once at least three records are in, wait for it."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "extract.ms_measure", "--work-dir", work, *COMMON, *PLAN],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    sidecar = os.path.join(work, "pass1", "records.jsonl")
    deadline = time.monotonic() + 600
    while _lines(sidecar) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run killed part-way, then the same command again."""
    work = str(tmp_path_factory.mktemp("ms") / "work")
    with open(os.path.join(os.path.dirname(work), "killed.log"), "w") as log:
        _kill_part_way(work, log)
    sidecar = os.path.join(work, "pass1", "records.jsonl")
    at_kill = {"rows": _rows(sidecar),
               "db": {m: _lines(os.path.join(work, "pass1", m, "database_tuning_record.json"))
                      for m in ("random", "evolutionary")}}
    assert 3 <= len(at_kill["rows"]) < 8
    _cli("--work-dir", work, *COMMON, *PLAN)
    return {"work": work, "at_kill": at_kill, "rows": _rows(sidecar)}


def _store(work, pass_no=1):
    from extract.metaschedule.runner import host_target
    from extract.metaschedule.store import PassStore
    from extract.metaschedule.tasks import load_tasks

    tasks = load_tasks(os.path.join(work, "tasks.json"))
    (task,) = [t for t in tasks if "layer_norm" in t.key]
    return PassStore(os.path.join(work, f"pass{pass_no}"), pass_no, host_target()), task


def test_databases_hold_exactly_the_plan(run):
    store, task = _store(run["work"])
    for method in ("random", "evolutionary"):
        records = store.records(method, task)
        assert len(records) == 4
        assert all(len(r.run_secs) == 5 for r in records)  # every repeat kept
    rows = [r for r in run["rows"] if r["pass"] == 1]
    assert len(rows) == 8
    for method in ("random", "evolutionary"):
        assert sorted(r["record"] for r in rows if r["method"] == method) == [0, 1, 2, 3]
    for row in rows:
        assert row["workload"] == task.key and row["error"] is None and row["stage"] == "ok"
        assert len(row["run_secs"]) == 5 and row["min"] == min(row["run_secs"])
        assert row["min"] <= row["median"] <= max(row["run_secs"]) and row["time"] > 1.6e9


def test_resume_after_kill_measures_each_schedule_once(run):
    at_kill, rows = run["at_kill"], run["rows"]
    hashes = [r["mod_hash"] for r in rows]
    assert len(set(hashes)) == len(hashes) == 8  # eight distinct schedules, none timed twice
    kept = [r for r in at_kill["rows"] if r["record"] < at_kill["db"][r["method"]]]
    assert len(at_kill["rows"]) - len(kept) <= 1  # at most the line whose record the kill lost
    assert all(r in rows for r in kept)  # what was measured before the kill is kept as it was
    assert sum(at_kill["db"].values()) >= 2


def test_protocol_recorded(run):
    with open(os.path.join(run["work"], "meta.json")) as f:
        sessions = json.load(f)["sessions"]
    last = sessions[-1]
    assert len(sessions) == 2 and last["pass"] == 1
    assert last["probe_problems"] == []
    assert last["probe"]["affinity"] == [last["measure"]["measure_core"]]
    assert last["probe"]["tvm_num_threads"] == 1
    assert last["measure"]["min_repeat_ms"] == 20 and last["measure"]["enable_cpu_cache_flush"] is False
    reference = _rows(os.path.join(run["work"], "reference.jsonl"))
    assert len(reference) >= 3 and all(len(r["run_secs"]) == 5 and r["time"] > 1.6e9 for r in reference)
    core = last["measure"]["measure_core"]
    assert all(r["runner_affinity"] == [core] and not r["repinned"] for r in reference)
    assert {r["note"] for r in reference} >= {"start", "end"}


def test_reconcile_drops_a_line_without_record(run):
    store, task = _store(run["work"])
    extra = {**run["rows"][-1], "record": 4}
    store.sidecar.append(extra)
    assert store.reconcile([task]) == {"dropped": 1, "missing": 0}
    assert _rows(store.sidecar_path) == run["rows"]
    store.close()


def test_remeasure_pass(run):
    args = ["--work-dir", run["work"], *COMMON, "--remeasure", "0.5", "--batch", "2"]
    _cli(*args)
    second = [r for r in _rows(os.path.join(run["work"], "pass2", "records.jsonl")) if r["pass"] == 2]
    first = {(r["method"], r["mod_hash"]) for r in run["rows"]}
    for method in ("random", "evolutionary"):
        mine = [r for r in second if r["method"] == method]
        assert len(mine) == math.ceil(0.5 * 4)
        assert all((method, r["mod_hash"]) in first and r["of_pass"] == 1 for r in mine)
    _cli(*args)  # resumed: nothing left to time
    assert len(_rows(os.path.join(run["work"], "pass2", "records.jsonl"))) == len(second)


def test_errors_are_kept_as_records(run, tmp_path):
    work = str(tmp_path / "errors")
    os.makedirs(work)
    with open(os.path.join(run["work"], "tasks.json")) as src, open(os.path.join(work, "tasks.json"), "w") as dst:
        dst.write(src.read())
    done = _cli("--work-dir", work, *COMMON, "--trials-per-task", "4", "--batch", "2", "--build-timeout", "0.001")
    rows = _rows(os.path.join(work, "pass1", "records.jsonl"))
    assert len(rows) == 4 and all(r["stage"] == "build" and "Timeout" in r["error"] for r in rows)
    from extract.metaschedule.store import record_secs

    store, task = _store(work)
    for method in ("random", "evolutionary"):
        assert [record_secs(r) for r in store.records(method, task)] == [[1e10], [1e10]]
    assert '"errors": 4' in done.stderr
    store.close()


def test_refuses_a_busy_measuring_core(run, tmp_path, monkeypatch):
    from extract.metaschedule import campaign as ms_measure
    from extract.metaschedule.cpu_load import CoreLoad

    monkeypatch.setattr(ms_measure, "measure_load", lambda core, seconds: CoreLoad(core, 95.0, 0.0, seconds))
    work = str(tmp_path / "busy")
    os.makedirs(work)
    with open(os.path.join(run["work"], "tasks.json")) as src, open(os.path.join(work, "tasks.json"), "w") as dst:
        dst.write(src.read())
    err = io.StringIO()
    affinity, env = os.sched_getaffinity(0), dict(os.environ)
    try:  # in this process (for the fake load); main() pins it and sets TVM_NUM_THREADS
        with contextlib.redirect_stderr(err):
            code = ms_measure.main(["--work-dir", work, "--networks", "bert", "--only", "layer_norm"])
    finally:
        os.sched_setaffinity(0, affinity)
        os.environ.clear()
        os.environ.update(env)
    assert code == 2 and "95% busy" in err.getvalue() and "not starting" in err.getvalue()
    assert not os.path.exists(os.path.join(work, "pass1"))


def test_task_order_is_seeded_and_leaves_one_schedule_tasks_last():
    from extract.metaschedule.campaign import select_tasks
    from extract.metaschedule.tasks import TaskInfo

    tasks = [TaskInfo(f"k{i}", "elementwise" if i % 3 == 0 else "conv2d", [[1]], "float32", 1.0, {"n": 1}, {}, "")
             for i in range(30)]
    order = select_tasks(tasks, [], 0, seed=0)
    kinds = [t.kind for t in order]
    assert kinds == ["conv2d"] * 20 + ["elementwise"] * 10
    assert [t.key for t in order] == [t.key for t in select_tasks(tasks, [], 0, seed=0)]
    assert [t.key for t in order] != [t.key for t in select_tasks(tasks, [], 0, seed=1)]
    few = select_tasks(tasks, ["k1"], 3, seed=0)
    assert len(few) == 3 and all("k1" in t.key and t.kind == "conv2d" for t in few)


def test_computations_another_cpu_measured_come_first(tmp_path):
    """`--first-keys`: those computations (on any target) before the others, elementwise still
    last; a line that is not a workload key stops the run naming the file and line; with the
    shipped datasets, datasets.measure puts first what another CPU's dataset measured."""
    from datasets.measure import shared_first
    from extract.metaschedule.campaign import computation, read_first_keys, select_tasks
    from extract.metaschedule.tasks import TaskInfo

    def key(i, target="llvm-znver4-1c"):
        return f"conv2d.mac.{i}x4_4x4.float32.{i:08x}.{target}"

    tasks = [TaskInfo(key(i), "elementwise" if i % 5 == 0 else "conv2d", [[1]], "float32", 1.0, {"n": 1}, {}, "")
             for i in range(1, 31)]
    wanted = [7, 12, 15, 29]                        # 15: elementwise, still last
    keys_file = tmp_path / "first.txt"
    keys_file.write_text("".join(key(i, "llvm-rocketlake-1c") + "\n" for i in wanted) + "\n")
    first = read_first_keys(str(keys_file))
    assert first == {computation(key(i)) for i in wanted}
    order = [t.key for t in select_tasks(tasks, [], 0, seed=0, first=first)]
    assert set(order[:3]) == {key(7), key(12), key(29)}
    assert order.index(key(15)) == len(order) - 6 and all(int(k.split(".")[2].split("x")[0]) % 5 == 0
                                                          for k in order[-6:])
    keys_file.write_text(key(1) + "\nnot a key\n")
    with pytest.raises(SystemExit, match=r"first.txt:2: not a workload key"):
        read_first_keys(str(keys_file))
    from datasets.networks import shipped_datasets

    elsewhere = shared_first("znver3")                   # a CPU with no dataset: every dataset's
    assert sum(k.endswith(".llvm-rocketlake-1c") for k in elsewhere) >= 80
    for cpu in shipped_datasets():                       # never a CPU's own tasks
        assert not any(k.endswith(f".llvm-{cpu}-1c") for k in shared_first(cpu))


def test_datasets_measure_help_needs_no_work_dir(capsys):
    from datasets import measure

    assert measure.main(["--help"]) == 0
    assert "extract.ms_measure's options" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        measure.main([])
    assert stop.value.code == 2 and "--work-dir" in capsys.readouterr().err


def test_all_networks_are_the_dataset_networks(tmp_path):
    """`--networks all` measures every network but those written to be in no dataset (the
    whole-network benchmark's unseen network), which can still be named on their own."""
    from extract.metaschedule.campaign import parse_args
    from extract.metaschedule.networks import NETWORKS, NOT_IN_DATASETS, family

    chosen = parse_args(["--work-dir", str(tmp_path / "m"), "--networks", "all"]).networks
    assert chosen and not any(family(n) in NOT_IN_DATASETS for n in chosen)
    assert set(chosen) | {n for n in NETWORKS if family(n) in NOT_IN_DATASETS} == set(NETWORKS)
    assert parse_args(["--work-dir", str(tmp_path / "m"), "--networks", "mixer"]).networks == ["mixer"]
