"""No silent failure on the MetaSchedule tuning side (`simulator.tune`, `simulator.metaschedule.cost_model`):
options a cost model would ignore, one-line errors, Ctrl-C and kill -9 (resumed with
nothing measured twice, on a real tiny tuning run), results that cannot mean anything,
and online updates that would drop or double data. `docs/RELIABILITY.md`, MetaSchedule
table, lists what each test proves.

The real runs measure with extract.metaschedule.runner's protocol on the last core this process may
use (under `taskset -c 0`: core 0)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import MS_SMALL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "dense_16x16x32"
TRIALS = 12
# 12 trials in rounds of 4, a small population: a real search in a few seconds per round
COMMAND = [TINY, "--cost-model", "gnn", "--trials", str(TRIALS), "--trials-per-iter", "4", "--population", "16",
           "--init-min-unmeasured", "4", "--genetic-iters", "1", "--min-measured", "4", "--update-steps", "1",
           "--seed", "1"]


def _one_line_error(capsys, code, *needles):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- 3 settings ignored without a word
@pytest.mark.parametrize("extra, needle", [
    (["--cost-model", "tvm-xgb", "--checkpoint", "runs/x"], "--checkpoint: not read by the tvm-xgb cost model"),
    (["--cost-model", "random", "--workers", "2"], "--workers: not read by the random cost model"),
    (["--cost-model", "tvm-mlp", "--filter-keep", "0.5"], "--filter-keep: not read by the tvm-mlp cost model"),
    (["--cost-model", "gnn", "--pretrain-data", MS_SMALL], "--pretrain-data: not read by the gnn cost model"),
    (["--cost-model", "gnn", "--checkpoint", "runs/x", "--min-measured", "4"], "--min-measured: read only by a cold gnn"),
    (["--cost-model", "gnn", "--cold-model", "gcm"], "--cold-model: unknown model 'gcm'"),
    (["--cost-model", "gnn", "--cold-model", "knob-xgb"], "--cold-model knob-xgb: reads sample.vectors['knob']"),
    (["--cost-model", "tvm-xgb-pretrained"], "tvm-xgb-pretrained needs one of --checkpoint"),
    (["--cost-model", "tvm-xgb-pretrained", "--checkpoint", "x.tar", "--pretrain-data", MS_SMALL], "needs one of"),
    (["--cost-model", "random", "--tasks", "tasks.json"], "--tasks: read only to look up a workload key"),
])
def test_an_option_the_cost_model_would_ignore_is_refused_before_anything_is_made(tmp_path, capsys, extra, needle):
    from simulator.metaschedule import tune

    work = tmp_path / "work"
    code = tune.main([TINY, "--trials", "4", "--work-dir", str(work), *extra])
    _one_line_error(capsys, code, needle)
    assert not work.exists()


def test_gnn_cost_model_options_are_checked_when_it_is_made():
    from simulator.metaschedule.cost_model import CostModelOptionError, GNNCostModel

    for options, needle in [({"threads": 0}, "threads"), ({"workers": 0}, "workers"),
                            ({"min_measured": 0}, "min_measured"), ({"lr": float("nan")}, "lr"),
                            ({"update_steps": -1}, "update_steps"), ({"cold_model": "xgb"}, "--cold-model xgb"),
                            ({"loss": "l9"}, "loss 'l9'"), ({"filter_keep": 1.5}, "filter_keep"),
                            ({"update_lr_scale": 0}, "update_lr_scale"), ({"update_lr_scale": 2}, "update_lr_scale")]:
        with pytest.raises((CostModelOptionError, ValueError), match=needle):
            GNNCostModel(**options)


def _database(folder, records):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "database_workload.json"), "w") as f:
        f.write("")
    with open(os.path.join(folder, "database_tuning_record.json"), "w") as f:
        f.write("".join(line + "\n" for line in records))
    return str(folder)


def test_pretraining_on_nothing_usable_is_an_error_that_counts_what_was_skipped(tmp_path):
    from simulator.metaschedule.rivals import pretrain_xgb
    from simulator.registry import SimulatorError

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SimulatorError, match="--pretrain-data: .*empty: holds no MetaSchedule database"):
        pretrain_xgb([str(empty)])
    garbage = _database(tmp_path / "garbage", ["not json", '[0, "no record"]'])
    with pytest.raises(SimulatorError, match=r"no successful record to pre-train on \(0 records of 0 workloads; "
                                             r"2 bad lines skipped.*first bad line .*:1:"):
        pretrain_xgb([garbage])


# ---------------------------------------------------------------- 4 one-line errors, not tracebacks
def _write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return str(path)


@pytest.mark.parametrize("case", ["script_syntax", "script_python", "key", "gz_table", "bad_table",
                                  "empty_pretrain", "num_cores"])
def test_bad_inputs_are_one_line_errors(tmp_path, capsys, case):
    from simulator.metaschedule import tune

    shipped = os.path.join(ROOT, "datasets", "networks_rocketlake", "tasks.json.gz")
    (tmp_path / "empty").mkdir()
    argv, needle = {
        "script_syntax": ([_write(tmp_path / "s.py", "def (\n")], "not TVMScript that TVM parses (SyntaxError"),
        "script_python": ([_write(tmp_path / "p.py", "x = 1\n")], "not TVMScript that TVM parses"),
        "key": (["dense.none.AxB.float32.x86"], "workload key 'dense.none.AxB.float32.x86': malformed"),
        "gz_table": (["dense.none.1x2_2x3_1x3.float32.0badc0de.x86", "--tasks", shipped], "not found"),
        "bad_table": (["dense.none.1x2_2x3_1x3.float32.0badc0de.x86", "--tasks", _write(tmp_path / "t.json", '{"version": 2, '
                                                                                '"tasks": [{"key": 1}]}')],
                      "t.json: task 0: not a task row"),
        "empty_pretrain": ([TINY, "--cost-model", "tvm-xgb-pretrained", "--pretrain-data", str(tmp_path / "empty")],
                           "holds no MetaSchedule database"),
        "num_cores": ([TINY, "--target", '{"kind": "llvm"}'], 'an LLVM target needs "num-cores"'),
    }[case]
    work = tmp_path / "work"
    code = tune.main([*argv, "--trials", "4", "--work-dir", str(work), *(["--cost-model", "random"]
                                                                         if "--cost-model" not in argv else [])])
    _one_line_error(capsys, code, needle)
    assert not os.path.exists(work / "tune_settings.json")   # nothing of a run was started


def test_work_dir_busy_read_only_or_a_file(tmp_path, capsys, monkeypatch):
    from extract import fileio
    from simulator.metaschedule import tune

    work = tmp_path / "work"
    with fileio.output_lock(work):
        _one_line_error(capsys, tune.main([TINY, "--trials", "4", "--work-dir", str(work)]),
                        "another process is writing to this folder")

    def read_only(folder):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(fileio, "output_lock", read_only)
    _one_line_error(capsys, tune.main([TINY, "--trials", "4", "--work-dir", str(work)]),
                    f"--work-dir {work}: cannot write there (Permission denied)")
    monkeypatch.undo()
    a_file = _write(tmp_path / "f", "")
    with pytest.raises(SystemExit) as stop:
        tune.main([TINY, "--trials", "4", "--work-dir", a_file])
    assert stop.value.code == 2 and "exists and is not a folder" in capsys.readouterr().err


def test_unknown_network_in_ms_measure_is_refused_at_parse_time(tmp_path, capsys):
    from extract.metaschedule.campaign import parse_args

    with pytest.raises(SystemExit) as stop:
        parse_args(["--work-dir", str(tmp_path / "m"), "--networks", "resnet50", "resnet51"])
    assert stop.value.code == 2
    assert "argument --networks: unknown network 'resnet51' (known: all, resnet50" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def tiny_space():
    """A 16³ matmul's TuneContext and 12 distinct postprocessed candidates."""
    import tvm
    import tvm_ffi
    from extract.metaschedule import candidates as msc
    from simulator.metaschedule.cost_model import measure_candidate

    ctx = msc.tune_context(tvm.IRModule({"main": msc.WORKLOADS["matmul_512"](16, 16, 16)}), msc.llvm_target(1))
    schedules, seen = [], set()
    for sch in msc.sample_candidates(ctx, 40, seed=3):
        digest = tvm_ffi.structural_hash(sch.mod)
        if digest not in seen:
            seen.add(digest)
            schedules.append(sch)
    assert len(schedules) >= 12
    return ctx, [measure_candidate(s) for s in schedules[:12]]


def test_gnn_cost_model_api_misuse(tiny_space, tmp_path):
    from simulator.metaschedule.cost_model import GNNCostModel
    from simulator.registry import SimulatorError

    ctx, _ = tiny_space
    out = GNNCostModel().predict(ctx, [])
    assert out.dtype == np.float64 and out.shape == (0,)
    with pytest.raises(ValueError, match="threads must be a number ≥ 1, got 0"):
        GNNCostModel(threads=0)
    trained = _trained_gnn(tiny_space)
    with pytest.raises(SimulatorError, match="is a folder; GNNCostModel.save writes a checkpoint file"):
        trained.save(str(tmp_path))


def _results(n, start=1e-5):
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    return [RunnerResult(run_secs=[start * (1 + i)] * 3, error_msg=None) for i in range(n)]


def _trained_gnn(tiny_space):
    from simulator.metaschedule.cost_model import GNNCostModel

    ctx, candidates = tiny_space
    model = GNNCostModel(min_measured=4, cold_steps=2, update_steps=1)
    model.update(ctx, candidates[:6], _results(6))
    assert not model.is_cold
    return model


# ---------------------------------------------------------------- 7 online updates
def test_update_refuses_unequal_lists_and_stores_a_candidate_once(tiny_space):
    from tvm.s_tir.meta_schedule.cost_model import RandomModel

    from simulator.metaschedule.cost_model import GNNCostModel, TimedCostModel

    ctx, candidates = tiny_space
    for model in (GNNCostModel(min_measured=100), TimedCostModel(RandomModel())):
        with pytest.raises(ValueError, match="5 candidates but 4 results"):
            model.update(ctx, candidates[:5], _results(4))
        model.update(ctx, candidates[:6], _results(6))
        model.update(ctx, candidates[3:9], _results(6))     # 3 of them again
        model.update(ctx, candidates[:2] + candidates[:2], _results(4))
        assert model.stats.measured == 9 and model.stats.repeated == 3 + 4
    gnn = GNNCostModel(min_measured=100)
    gnn.update(ctx, candidates[:6], _results(6))
    gnn.update(ctx, candidates[:6], _results(6, start=1.0))
    (samples,) = gnn.measured.values()
    assert len(samples) == 6 and max(s.runtimes[0] for s in samples) < 1e-3   # the first results kept


def test_a_checkpoint_is_fine_tuned_with_its_own_loss_a_cold_model_with_listmle(tiny_space, tmp_path):
    from simulator.metaschedule.cost_model import COLD_LOSS, from_checkpoint

    ctx, candidates = tiny_space
    cold = _trained_gnn(tiny_space)
    assert COLD_LOSS == "listmle" and cold.model.config.fit.loss == COLD_LOSS
    cold.model.config = cold.model.config.replace(loss="pairwise-hinge")
    path = str(tmp_path / "hinge.pt")
    cold.model.save(path)
    for given, used in ((None, "pairwise-hinge"), ("lambdarank", "lambdarank")):
        model = from_checkpoint(path, update_steps=1, **({"loss": given} if given else {}))
        model.update(ctx, candidates[:6], _results(6))
        (task_model,) = model.task_models.values()
        assert task_model.config.fit.loss == used and model.model.config.fit.loss == used


def test_a_checkpoint_fine_tunes_at_a_share_of_its_learning_rate_a_cold_model_at_its_own(tiny_space, tmp_path):
    from simulator.metaschedule.cost_model import UPDATE_LR_SCALE, from_checkpoint

    ctx, candidates = tiny_space
    cold = _trained_gnn(tiny_space)
    rate = cold.model.config.fit.lr
    cold.update(ctx, candidates[6:9], _results(3))
    (cold_task,) = cold.task_models.values()
    assert cold_task._optimizer.param_groups[0]["lr"] == rate       # trained here from nothing: its own rate
    path = str(tmp_path / "gnn.pt")
    cold.model.save(path)
    for given, used in ((None, rate * UPDATE_LR_SCALE), (1e-3, 1e-3)):
        model = from_checkpoint(path, update_steps=1, **({"lr": given} if given else {}))
        model.update(ctx, candidates[:6], _results(6))
        (task_model,) = model.task_models.values()
        assert task_model._optimizer.param_groups[0]["lr"] == pytest.approx(used)
        model.save(str(tmp_path / "again.pt"))      # what every task starts from keeps the rate it was given
        assert model.model.config.fit.lr == pytest.approx(given or rate)
        assert from_checkpoint(str(tmp_path / "again.pt")).model.config.fit.lr == pytest.approx(given or rate)


# ---------------------------------------------------------------- 5 Ctrl-C and kill -9, resumed
def test_resuming_search_drops_what_was_measured_and_stops_at_the_trials_left(tiny_space):
    """A search that proposes 4 already-measured candidates, then 4 new ones on every call
    (as EvolutionarySearch does when asked again without a result): 4 of 6 trials done."""
    from simulator.metaschedule.resume import ResumingSearch, schedule_key

    ctx, candidates = tiny_space

    class Search:
        calls, told = 0, 0

        def _initialize_with_tune_context(self, context):
            pass

        def pre_tuning(self, max_trials, *rest):
            self.max_trials = max_trials

        def generate_measure_candidates(self):
            self.calls += 1
            return candidates[:4] if self.calls == 1 else candidates[4:8]

        def notify_runner_results(self, measured, results):
            self.told += len(results)

    inner = Search()
    search = ResumingSearch(inner, frozenset(schedule_key(ctx.mod, c.sch.trace) for c in candidates[:4]), done=4)
    search._initialize_with_tune_context(ctx)
    search.pre_tuning(6, 4, [], None, None)
    assert inner.max_trials == 2
    batch = search.generate_measure_candidates()
    assert [str(c.sch.mod) for c in batch] == [str(c.sch.mod) for c in candidates[4:6]] and inner.calls == 2
    search.notify_runner_results(batch, _results(2))
    assert inner.told == 2 and search.generate_measure_candidates() is None


def test_ctrl_c_is_raised_only_where_asked_and_waits_while_a_batch_is_stored():
    from simulator.metaschedule.interrupt import Interrupts

    before = signal.getsignal(signal.SIGINT)
    interrupts = Interrupts()
    with interrupts.catching():
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])   # inherited by workers started now
        interrupts.check()                                   # nothing yet
        interrupts.hold()
        os.kill(os.getpid(), signal.SIGINT)                  # no KeyboardInterrupt here
        time.sleep(0.05)
        interrupts.check()                                   # held while a batch is stored
        with pytest.raises(KeyboardInterrupt):
            interrupts.release()
    assert interrupts.requested and signal.getsignal(signal.SIGINT) is before
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _lines(path):
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.endswith("\n"))


def _start(work):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.Popen([sys.executable, "-m", "simulator.tune", *COMMAND, "--work-dir", work], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _signal_after(proc, records_file, at_least, sig):
    """Send `sig` to the run's process group (as a terminal's Ctrl-C reaches the whole
    group) once the database holds `at_least` records; the run's (code, stdout, stderr)."""
    deadline = time.monotonic() + 600
    while _lines(records_file) < at_least and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the signal: " + proc.stderr.read()[-2000:]
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def stopped_and_resumed(tmp_path_factory):
    """One tiny gnn tuning command, three times in one work dir: Ctrl-C after its first
    round, kill -9 after a later one (plus a record line cut off as a kill mid-write
    leaves it), then run to the end (in this process)."""
    from simulator.metaschedule import tune

    work = str(tmp_path_factory.mktemp("stopped") / "dense")
    records = os.path.join(work, "database_tuning_record.json")
    interrupted = _signal_after(_start(work), records, 4, signal.SIGINT)
    with open(os.path.join(work, tune.SUMMARY), encoding="utf-8") as f:
        interrupted_summary = json.load(f)
    after_interrupt = _lines(records)
    _signal_after(_start(work), records, after_interrupt + 4, signal.SIGKILL)
    before_resume = _lines(records)
    with open(records, "a", encoding="utf-8") as f:
        f.write('[0, [[["GetSBlock", [], ["T_ma')             # a record cut off by the kill
    summary = tune.run([*COMMAND, "--work-dir", work])
    return {"work": work, "interrupted": interrupted, "interrupted_summary": interrupted_summary,
            "after_interrupt": after_interrupt, "before_resume": before_resume, "summary": summary}


def test_ctrl_c_exits_130_with_a_summary_of_what_the_database_holds(stopped_and_resumed):
    code, out, err = stopped_and_resumed["interrupted"]
    summary = stopped_and_resumed["interrupted_summary"]
    assert code == 130 and "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert err.rstrip().splitlines()[-1].startswith("interrupted; ")
    assert "interrupted: the rows above are what the database holds" in out
    assert summary["interrupted"] is True
    assert summary["tasks"][0]["trials"] == len(summary["history"]) == stopped_and_resumed["after_interrupt"] >= 4


def test_a_killed_run_resumes_to_the_same_trials_measuring_nothing_twice(stopped_and_resumed):
    from extract.metaschedule.database import replay, workload_module
    from extract.metaschedule.store import schedule_hash

    work, summary = stopped_and_resumed["work"], stopped_and_resumed["summary"]
    earlier = stopped_and_resumed["before_resume"]
    assert earlier > stopped_and_resumed["after_interrupt"]
    with open(os.path.join(work, "database_workload.json"), encoding="utf-8") as f:
        (workload,) = f.read().splitlines()
    with open(os.path.join(work, "database_tuning_record.json"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == TRIALS                                          # the cut-off line is gone
    mod = workload_module(workload)
    hashes = [schedule_hash(replay(mod, row[1][0]).mod) for row in rows]
    assert len(set(hashes)) == TRIALS                                   # no schedule measured twice
    (task,) = summary["tasks"]
    assert task["trials"] == TRIALS and task["resumed"] == earlier and not summary["interrupted"]
    assert summary["resumed"] == {"records": earlier, "torn_lines_dropped": 1, "records_of_other_workloads": 0}
    assert [h["resumed"] for h in summary["history"]] == [True] * earlier + [False] * (TRIALS - earlier)
    # the cost model was given the earlier records too (before it ranked anything)
    assert summary["cost_model_stats"]["measured"] == TRIALS


def test_the_database_as_it_stood_after_fewer_trials(stopped_and_resumed, tmp_path):
    """`database_at`: each task's first records in the order measured, for compiling a step
    of a run again after the run went on (the whole-network benchmark's quiet pass)."""
    from extract.metaschedule.database import workload_module
    from simulator.metaschedule.resume import database_at
    from simulator.registry import SimulatorError

    work = stopped_and_resumed["work"]
    with open(os.path.join(work, "database_workload.json"), encoding="utf-8") as f:
        mod = workload_module(f.read().splitlines()[0])
    with open(os.path.join(work, "database_tuning_record.json"), encoding="utf-8") as f:
        means = [float(np.mean(json.loads(line)[1][1])) for line in f]
    for count in (1, 3, TRIALS):
        database = database_at(work, [mod], [count])
        assert len(database.get_all_tuning_records()) == count
        (best,) = database.get_top_k(database.commit_workload(mod), 1)
        assert float(np.mean([float(s) for s in best.run_secs])) == pytest.approx(min(means[:count]))
    assert len(database_at(work, [mod], [0]).get_all_tuning_records()) == 0
    with pytest.raises(SimulatorError, match=f"task 0 has {TRIALS} records, not the {TRIALS + 1} asked for"):
        database_at(work, [mod], [TRIALS + 1])
    damaged = tmp_path / "damaged"
    shutil.copytree(work, damaged)
    records = damaged / "database_tuning_record.json"
    lines = records.read_text(encoding="utf-8").splitlines()
    index, record = json.loads(lines[1])
    no_such_trace = [[["NoSuchInstruction", [], [], []]], []]
    lines[1] = json.dumps([index, [no_such_trace] + record[1:]])
    records.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(database_at(str(damaged), [mod], [1]).get_all_tuning_records()) == 1    # the line after is not read
    with pytest.raises(SimulatorError, match=r"database_tuning_record.json:2: not a record of its workload"):
        database_at(str(damaged), [mod], [2])


def test_another_command_is_refused_and_overwrite_clears_the_earlier_run(stopped_and_resumed, capsys, tmp_path):
    from simulator.metaschedule import resume as ms_resume, tune

    work = stopped_and_resumed["work"]
    again = [*COMMAND, "--work-dir", work]
    seed = again.index("--seed") + 1
    _one_line_error(capsys, tune.main(again[:seed] + ["2"] + again[seed + 1:]),
                    f"{work}: holds a run of another command (--seed 1 there, 2 here)")
    assert ms_resume.check_work_dir(work, tune.run_settings(tune.build_parser().parse_args(again),
                                                            tune.parse_target(None)), overwrite=False)
    folder = tmp_path / "old"
    (folder / "logs").mkdir(parents=True)
    for name in (*ms_resume.DATABASE_FILES, ms_resume.SUMMARY, ms_resume.SETTINGS, "notes.txt"):
        _write(folder / name, "x\n")
    _write(folder / "logs" / "task.log", "x\n")
    assert not ms_resume.check_work_dir(str(folder), {"seed": 2}, overwrite=True)
    ms_resume.start_run(str(folder), {"seed": 2}, resumed=False)
    assert sorted(os.listdir(folder)) == ["notes.txt", ms_resume.SETTINGS]


def test_a_run_is_not_resumed_under_other_gnn_defaults(tmp_path, capsys, monkeypatch):
    """The gnn's defaults (what the command did not give) are part of the settings: a run
    resumes only under the ones it started with; a run from before they were recorded
    resumes under today's, with a note, and has them recorded from then on."""
    import simulator.metaschedule.cost_model as ms_cost_model
    from simulator.metaschedule import resume as ms_resume, tune
    from simulator.registry import SimulatorError

    target = tune.parse_target(None)
    settings = tune.run_settings(tune.build_parser().parse_args([*COMMAND, "--work-dir", str(tmp_path)]), target)
    defaults = settings["gnn_defaults"]
    assert defaults["filter_keep"] == ms_cost_model.FILTER_KEEP and defaults["filter_warmup"] == 256
    assert "update_steps" not in defaults and "min_measured" not in defaults    # given by the command
    other = tune.run_settings(tune.build_parser().parse_args(
        [TINY, "--cost-model", "random", "--trials", "4", "--work-dir", str(tmp_path)]), target)
    assert "gnn_defaults" not in other
    work = tmp_path / "work"
    work.mkdir()
    _write(work / ms_resume.DATABASE_FILES[1], "a record\n")
    legacy = {k: v for k, v in settings.items() if k != "gnn_defaults"}
    _write(work / ms_resume.SETTINGS, json.dumps({"tool": "simulator.tune", "settings": legacy}))
    assert ms_resume.check_work_dir(str(work), settings, overwrite=False)
    assert "did not record gnn_defaults" in capsys.readouterr().err
    ms_resume.start_run(str(work), settings, resumed=True)
    assert json.loads((work / ms_resume.SETTINGS).read_text())["settings"] == settings
    monkeypatch.setattr(ms_cost_model, "FILTER_KEEP", 0.125)
    changed = tune.run_settings(tune.build_parser().parse_args([*COMMAND, "--work-dir", str(tmp_path)]), target)
    with pytest.raises(SimulatorError, match=r"holds a run started under other defaults \(filter_keep 0.25 there, "
                                             r"0.125 here\); resuming it would mix two searches"):
        ms_resume.check_work_dir(str(work), changed, overwrite=False)


def test_a_gnn_run_whose_candidates_were_featurized_against_other_hardware_is_not_today_s():
    """Runs recorded before the candidates' context columns were measured against the
    target's hardware (their gnn scored graphs unlike its training records) are another gnn's:
    the benchmarks tune them again, and `simulator.tune` does not resume them."""
    from simulator.metaschedule.cost_model import CANDIDATE_CONTEXT, gnn_defaults
    from simulator.metaschedule.resume import other_gnn_defaults

    today = gnn_defaults()
    assert today["candidate_context"] == CANDIDATE_CONTEXT and other_gnn_defaults(today) is None
    before = {k: v for k, v in today.items() if k != "candidate_context"}
    assert other_gnn_defaults(before) == f"candidate_context None there, {CANDIDATE_CONTEXT!r} here"


# ---------------------------------------------------------------- 6 results that cannot mean anything
@pytest.mark.parametrize("target, needle", [
    ('{"kind": "cuda", "arch": "sm_80"}', "a cuda target's kernels run on its device"),
    ('{"kind": "llvm", "mtriple": "aarch64-linux-gnu", "num-cores": 1}', "builds for aarch64"),
])
def test_a_target_that_cannot_run_here_is_refused_before_measuring(tmp_path, capsys, target, needle):
    from simulator.metaschedule import tune

    work = tmp_path / "work"
    code = tune.main([TINY, "--trials", "4", "--cost-model", "random", "--target", target, "--work-dir", str(work)])
    _one_line_error(capsys, code, "its kernels cannot be timed here", needle)
    assert not work.exists()


def test_no_valid_measurement_is_an_error_and_a_busy_measuring_core_a_warning(tmp_path, capsys, monkeypatch):
    """Every build fails (a builder that refuses them all: nothing reaches the runner) and
    the measuring core reads 90% busy."""
    from tvm.s_tir.meta_schedule.builder import BuilderResult

    from extract.metaschedule import cpu_load as ms_load, runner as ms_runner
    from simulator.metaschedule import tune

    class FailingBuilder:
        class pool:  # noqa: N801 - what tune() shuts down
            @staticmethod
            def shutdown(wait=True):
                pass

        @staticmethod
        def build(inputs):
            return [BuilderResult(None, "LocalBuilder: An exception occurred\nboom") for _ in inputs]

    monkeypatch.setattr(ms_runner, "make_builder", lambda *a, **k: FailingBuilder())
    monkeypatch.setattr(ms_load, "measure_load", lambda core, seconds=2.0: ms_load.CoreLoad(core, 90.0, 0.0, seconds))
    work = tmp_path / "work"
    code = tune.main([TINY, "--trials", "4", "--trials-per-iter", "4", "--population", "8", "--init-min-unmeasured", "4",
                      "--genetic-iters", "1", "--cost-model", "random", "--work-dir", str(work)])
    line = _one_line_error(capsys, code, "no candidate ran: all 4 trials failed", "boom")
    with open(work / tune.SUMMARY, encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["valid_trials"] == 0 and summary["tasks"][0]["errors"] == 4
    assert len(summary["warnings"]) == 1 and "90% busy with other processes" in summary["warnings"][0]
    assert "logs" in line


def _choose(argv, target_text='{"kind": "llvm", "mcpu": "rocketlake", "num-cores": 1}'):
    from simulator.metaschedule import tune

    args = tune.build_parser().parse_args([TINY, "--trials", "4", "--work-dir", "w", *argv])
    tune.choose_checkpoint(args, tune.parse_target(target_text))
    return args.checkpoint


def test_gnn_starts_from_the_shipped_pretrained_model_unless_told_cold(capsys):
    from datasets.networks import PRETRAINED_NAME, shipped_datasets

    shipped = os.path.join(ROOT, "datasets", "networks_rocketlake", str(PRETRAINED_NAME))
    assert os.path.samefile(_choose([]), shipped)
    assert "the shipped pre-trained cost model" in capsys.readouterr().out
    assert _choose(["--checkpoint", "cold"]) is None
    assert _choose(["--min-measured", "8"]) is None            # an option only a cold gnn reads
    assert _choose(["--checkpoint", "runs/x"]) == "runs/x"
    assert _choose(["--cost-model", "tvm-xgb"]) is None
    # another CPU: the model of the dataset with the most measured tasks, with a warning naming both CPUs
    from datasets.networks import default_dataset, dataset_cpu

    largest = default_dataset()
    assert os.path.samefile(_choose([], '{"kind": "llvm", "mcpu": "znver3", "num-cores": 1}'), largest / PRETRAINED_NAME)
    err = capsys.readouterr().err
    assert f"measured on {dataset_cpu(largest)} and this target is znver3" in err
    assert set(shipped_datasets()) >= {"rocketlake"}


def test_gnn_without_any_shipped_model_says_how_to_go_on(monkeypatch, capsys):
    from datasets import networks
    from simulator.registry import SimulatorError

    monkeypatch.setattr(networks, "shipped_datasets", lambda: {})
    with pytest.raises(SimulatorError, match="--checkpoint cold to start cold"):
        _choose([])


def test_the_shipped_pretrained_model_loads_as_the_gnn_cost_model():
    from datasets.networks import PRETRAINED_NAME
    from simulator.metaschedule.cost_model import GNNCostModel, from_checkpoint

    model = from_checkpoint(os.path.join(ROOT, "datasets", "networks_rocketlake", str(PRETRAINED_NAME)))
    assert isinstance(model, GNNCostModel)
