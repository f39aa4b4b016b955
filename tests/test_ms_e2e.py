"""Whole networks end to end: `simulator.tune NETWORK` compiles the network with its tuning
database and times it (`simulator.metaschedule.network`), and the benchmark that plans, resumes and
reports the networks × cost models × budgets matrix (`benchmarks.metaschedule.networks`).

The tuning run is real but tiny: the MLP-Mixer layer (7 tasks), one trial per task, measured
on core 0 as the other tuning tests do."""
import json
import os

import numpy as np
import pytest


MIXER_ARGV = ["mixer", "--cost-model", "random", "--trials", "7", "--trials-per-task", "1", "--trials-per-iter", "1",
              "--population", "4", "--init-min-unmeasured", "2", "--genetic-iters", "1",
              "--measure-core", str(min(os.sched_getaffinity(0))), "--quiet"]


@pytest.fixture(scope="module")
def mixer_tuned(tmp_path_factory):
    """A tuned work dir where the benchmark puts one (`RUNS/tune/<network>/<model>/seed<S>`)."""
    from simulator.metaschedule import tune

    work = str(tmp_path_factory.mktemp("e2e") / "runs" / "tune" / "mixer" / "random" / "seed0")
    summary = tune.run(MIXER_ARGV + ["--work-dir", work])
    return work, summary


def test_network_is_compiled_with_its_database_and_timed_end_to_end(mixer_tuned, capsys):
    from extract.metaschedule.runner import REPEAT

    work, summary = mixer_tuned
    e2e = summary["end_to_end"]
    assert e2e is not None, summary["warnings"]
    assert len(e2e["repeats_s"]) == REPEAT and all(r > 0 for r in e2e["repeats_s"])
    assert e2e["latency_s"] == pytest.approx(np.median(e2e["repeats_s"]))
    assert e2e["functions"] == len(summary["tasks"]) == 7 and e2e["tuned"] == 7
    assert os.path.getsize(os.path.join(work, "network.so")) > 0
    # the whole module costs about what its tasks' bests add up to (weights = calls)
    assert 0.2 < e2e["latency_s"] / summary["best_latency_s"] < 20
    with open(os.path.join(work, "tune_summary.json"), encoding="utf-8") as f:
        assert json.load(f)["end_to_end"] == e2e
    # every tuned kernel timed inside the network, call by call; together no longer than a run
    names = {t["name"] for t in summary["tasks"]}
    assert names <= set(e2e["kernels_s"]) and all(e2e["kernels_s"][n] > 0 for n in names)
    assert sum(e2e["kernels_s"][n] for n in names) < 3 * max(e2e["repeats_s"])
    from simulator.metaschedule.tune import kernels_line
    assert kernels_line(e2e, summary["tasks"]).startswith("inside the network the 7 tuned kernels took")


def test_kernel_gaps_put_the_kernel_that_loses_most_inside_the_network_first():
    from simulator.metaschedule.network import kernel_gaps
    from simulator.metaschedule.tune import kernels_line

    tasks = [{"name": "a", "best_s": 1e-3, "weight": 2}, {"name": "b", "best_s": 2e-3, "weight": 1},
             {"name": "c", "best_s": 1e-3, "weight": 1}, {"name": "untimed", "best_s": 1e-3, "weight": 1}]
    kernels = {"a": 2.1e-3, "b": 5e-3, "c": 0.9e-3, "vm.builtin.alloc_tensor": 1e-5}
    rows = kernel_gaps(kernels, tasks)
    assert [r["name"] for r in rows] == ["b", "a", "c"]
    assert rows[0] == {"name": "b", "inside_s": 5e-3, "alone_s": 2e-3}
    line = kernels_line({"kernels_s": kernels}, tasks)
    assert line.startswith("inside the network the 3 tuned kernels took 8.000 ms a run against 5.000 ms alone")
    assert kernels_line({"latency_s": 1.0}, tasks) == "inside the network: no kernel timed"


def test_a_failed_timing_is_a_warning_not_a_lost_summary(mixer_tuned, monkeypatch):
    from extract.metaschedule.runner import MeasureConfig
    from simulator.metaschedule import network as ms_network, tune
    from simulator.registry import SimulatorError

    work, _ = mixer_tuned
    monkeypatch.setattr(ms_network, "LIBRARY", "missing/network.so")   # export fails: no such folder
    with pytest.raises(SimulatorError):
        ms_network.end_to_end("mixer", tune.parse_target(None), work, MeasureConfig.for_machine(0))


# ---------------------------------------------------------------- the benchmark, without measuring
def _args(tmp_path, **kw):
    from benchmarks.metaschedule.networks import build_parser

    args = build_parser().parse_args(["--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def _finish(step, latency, wall, share=0.05, others=None, waited=None, gnn_defaults="today"):
    """A finished step, as run_step leaves it (`others`: other processes' CPU seconds meanwhile,
    `waited`: the tuner's wait for a core; None: a step tuned before they were recorded), with
    simulator.tune's settings (a gnn's: `gnn_defaults`, today's unless given; None: none recorded)."""
    from simulator.metaschedule.cost_model import gnn_defaults as today

    os.makedirs(step["work_dir"], exist_ok=True)
    recorded = today() if gnn_defaults == "today" else gnn_defaults
    settings = {} if recorded is None else {"gnn_defaults": recorded}
    with open(os.path.join(step["work_dir"], "tune_settings.json"), "w", encoding="utf-8") as f:
        json.dump({"tool": "simulator.tune", "settings": settings}, f)
    tasks = [{"trials": step["budget"], "resumed": 0}] * step["tasks"]
    summary = {"tasks": tasks, "wall_s": wall, "best_latency_s": latency, "cost_model_stats": {"total_s": share * wall},
               "end_to_end": {"latency_s": latency, "repeats_s": [latency] * 5, "compile_s": 30.0}}
    if others is not None:
        summary |= {"others_cpu_s": others, "step_span_s": wall}
    if waited is not None:
        summary |= {"run_queue_wait_s": waited}
    with open(os.path.join(step["work_dir"], f"summary_b{step['budget']}.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f)


def test_plan_resumes_and_estimates_from_finished_steps(tmp_path):
    from benchmarks.metaschedule.networks import PRIOR_S_PER_TRIAL, estimate, plan

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn", "tvm-xgb"], seeds=[0], budgets=[8, 16])
    steps = plan(args, {"bert": 10})
    assert [(s["cost_model"], s["budget"]) for s in steps] == [("gnn", 8), ("gnn", 16), ("tvm-xgb", 8), ("tvm-xgb", 16)]
    before = estimate(steps)
    assert before["s_per_trial"] == PRIOR_S_PER_TRIAL and before["trials_left"] == 10 * (8 + 8 + 8 + 8)
    _finish(steps[0], 1e-3, wall=160.0)                 # 80 trials in 160 s
    again = plan(args, {"bert": 10})
    assert [s["done"] for s in again] == [True, False, False, False]
    after = estimate(again)
    assert after["s_per_trial"] == pytest.approx(2.0) and after["trials_left"] == 10 * 8 * 3
    # and the quiet pass after the tuning: every step, none timed yet
    from benchmarks.metaschedule.quiet import S_PER_POINT
    assert after["seconds_left"] == pytest.approx(240 * 2.0 + 3 * after["s_per_point"] + 4 * S_PER_POINT)


def test_a_gnn_run_under_other_defaults_is_left_out_and_tuned_again(tmp_path, capsys):
    """The table reports one gnn: a kept gnn run tuned under other gnn defaults than today's
    (or before they were recorded) counts as not done, its points are left out, the report
    says so, and a run removes it (work dir and kept copy) to tune it again from its first step."""
    from benchmarks.common import write_json
    from benchmarks.metaschedule import networks
    from benchmarks.metaschedule.kept import keep, kept_folder
    from simulator.metaschedule.cost_model import gnn_defaults

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn", "random"], seeds=[0, 1], budgets=[8])
    steps = networks.plan(args, {"bert": 2})
    older = {**gnn_defaults(), "loss": "listmle"}
    for step, recorded in zip(steps, ["today", None, older, "today"]):   # gnn s0, random s0, gnn s1, random s1
        _finish(step, 1e-3, wall=10.0, gnn_defaults=recorded)
    kept = kept_folder(args.results, "somecpu")
    for step in steps:
        for name in ("database_workload.json", "database_tuning_record.json"):
            with open(os.path.join(step["work_dir"], name), "w", encoding="utf-8") as f:
                f.write("{}\n")
        keep(step["work_dir"], args.runs, kept)
    steps = networks.plan(args, {"bert": 2})
    assert [(s["cost_model"], s["seed"], s["done"]) for s in steps] == [
        ("gnn", 0, True), ("random", 0, True), ("gnn", 1, False), ("random", 1, True)]
    assert steps[2]["stale"] == "loss 'listmle' there, None here"
    assert [networks.point(s, steps) is None for s in steps] == [False, False, True, False]
    write_json(os.path.join(args.results, networks.RESULT), {
        "command": "c", "cpu": "somecpu", "networks": ["bert"], "cost_models": args.cost_models, "budgets": [8],
        "seeds": [0, 1], "steps": 4, "steps_done": 3, "aggregate": {}, "figure": False, "points": []})
    assert ("**Not today's gnn:** 1 gnn runs of this table were tuned under other gnn defaults than today's (loss "
            "'listmle' there, None here)") in "\n".join(networks.report_section(args.results))
    networks.retire_stale(args, steps, kept)
    assert "bert/gnn/seed1: tuned again from the first step" in capsys.readouterr().err
    assert not os.path.exists(steps[2]["work_dir"]) and not os.path.exists(os.path.join(kept, "bert", "gnn", "seed1"))
    assert os.path.exists(os.path.join(kept, "bert", "gnn", "seed0"))
    assert networks.stale_line(args.results, "somecpu") == ""


def _report_of(folder, args, points):
    """The report section of a finished 18-step run of `points`."""
    from benchmarks.common import write_json
    from benchmarks.metaschedule.networks import RESULT, aggregate, report_section

    write_json(str(folder / RESULT), {"command": "c", "networks": ["bert"], "cost_models": args.cost_models,
                                      "budgets": [8, 16, 64], "seeds": [0, 1], "steps": 18, "steps_done": 18,
                                      "aggregate": aggregate(points), "figure": False, "points": points})
    return "\n".join(report_section(str(folder)))


def test_aggregate_verdicts_and_report(tmp_path):
    from benchmarks.common import write_json
    from extract.provenance import ROOT
    from benchmarks.metaschedule.networks import RESULT, aggregate, plan, point, report_section, verdicts

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn", "tvm-xgb", "tvm-xgb-pretrained"], seeds=[0, 1],
                 budgets=[8, 16, 64])
    steps = plan(args, {"bert": 2})
    latency = {("gnn", 8): 1.0, ("gnn", 16): 0.9, ("gnn", 64): 0.8, ("tvm-xgb", 8): 2.0, ("tvm-xgb", 16): 1.5,
               ("tvm-xgb", 64): 0.95, ("tvm-xgb-pretrained", 8): 1.1, ("tvm-xgb-pretrained", 16): 0.85, ("tvm-xgb-pretrained", 64): 0.8}
    for s in steps:
        _finish(s, latency[(s["cost_model"], s["budget"])] * (1 + 0.1 * s["seed"]), wall=100.0)
    points = [point(s, steps) for s in steps]
    assert points[1]["wall_s"] == 200.0                   # the 16 step's wall time includes the 8 step's
    agg = aggregate(points)
    assert agg["bert"]["gnn"]["8"]["mean_s"] == pytest.approx(1.05) and agg["bert"]["gnn"]["8"]["seeds"] == 2
    text = "\n".join(verdicts(agg))
    assert "gnn at 16 per task 945.000 ms vs tvm-xgb at 64 997.500 ms — **met**" in text
    assert "50.0% faster than tvm-xgb at 8 (goal ≥ 10%) — **met**" in text
    assert "at least as good as tvm-xgb-pretrained at 2 of 3 budgets" in text
    assert "at 16 per task in 67% of tvm-xgb's wall time (goal ≤ 25%) — **not met**" in text
    command = f"python -m benchmarks.metaschedule.networks --runs {tmp_path}/ms_networks --results {ROOT}/docs/results"
    write_json(str(tmp_path / RESULT), {"command": command, "networks": ["bert"], "cost_models": args.cost_models,
                                        "budgets": [8, 16, 64], "seeds": [0, 1], "steps": 18, "steps_done": 18,
                                        "aggregate": agg, "figure": False, "points": points,
                                        "quiet_left_out": ["bert gnn seed 0 at 8 per task: boom"]})
    section = "\n".join(report_section(str(tmp_path)))
    assert "    python -m benchmarks.metaschedule.networks --runs …/ms_networks --results docs/results\n" in section
    assert "| bert | gnn | 1050.000 [1000.000–1100.000] (2 min) |" in section
    assert "free of the end-to-end timing's noise:" in section and "| bert | tvm-xgb | 2100.000 | 1575.000 |" in section
    assert "waiting for every core to be quiet): 0 of 18 points; the others as timed right after" in section
    assert "**Provisional** (from timings taken right after tuning steps, before the quiet pass) — Goals" in section
    assert "- not timed again: bert gnn seed 0 at 8 per task: boom" in section
    assert "Other processes used" not in section          # steps tuned before it was recorded
    for s in steps:                                       # now recorded: 30 CPU seconds beside the 8 step
        _finish(s, 1.0, wall=100.0, others=30.0 if s["budget"] == 8 else 0.0)
    points = [point(s, steps) for s in steps]
    assert points[1]["others_cores"] == pytest.approx(0.15)   # over the 16 step's 200 s up to it
    section = _report_of(tmp_path, args, points)
    assert ("Other processes used 0.18 of a core on average while the steps were tuned (18 of 18 points recorded "
            "it), at most 0.30 (bert gnn seed 0 up to 8 per task)") in section
    assert "waited for a core" not in section             # steps tuned before the wait was recorded
    for s in steps:                                       # the tuner waited 20 s of the 8 step's 100 s
        _finish(s, 1.0, wall=100.0, others=30.0, waited=20.0 if s["budget"] == 8 else 0.0)
    points = [point(s, steps) for s in steps]
    assert [p["run_queue_wait_s"] for p in points[:3]] == [20.0, 20.0, 20.0]   # summed up to each budget
    section = _report_of(tmp_path, args, points)
    assert ("The tuner's processes waited for a core 12.2% of the wall time on average (18 points recorded it), "
            "at most 20.0% (bert gnn seed 0 up to 8 per task).") in section


def test_gnn_sage_is_pretrained_as_sage_beside_the_gnn_and_tuned_as_a_gnn(tmp_path, monkeypatch):
    from benchmarks.metaschedule import networks
    from datasets.networks import pretrained_path

    trained = {}
    monkeypatch.setattr(networks, "run_training", lambda argv, out: trained.setdefault(out, argv))
    args = _args(tmp_path, networks=["bert", "mixer"], cost_models=["gnn", "gnn-sage", "random"], epochs=7)
    bert = {name: networks.pretrained(args, "bert", name) for name in args.cost_models}
    assert bert["random"] is None
    for name, model in (("gnn", "gcn"), ("gnn-sage", "sage")):
        argv = trained[bert[name]]
        assert bert[name] == str(tmp_path / "runs" / "pretrain" / "bert" / name)
        assert argv[argv.index("--model") + 1] == model and argv[argv.index("--test-network") + 1] == "bert"
        assert argv[argv.index("--epochs") + 1] == "7"
    # a network in no dataset: the shipped checkpoint for gcn; sage by the shipped checkpoint's recipe
    mixer = {name: networks.pretrained(args, "mixer", name) for name in ("gnn", "gnn-sage")}
    assert mixer["gnn"] == str(pretrained_path(args.data)) and mixer["gnn"] not in trained
    argv = trained[mixer["gnn-sage"]]
    assert argv[argv.index("--split") + 1] == "random" and argv[argv.index("--model") + 1] == "sage"
    assert argv[argv.index("--epochs") + 1] == "40"
    step = networks.plan(args, {"bert": 10, "mixer": 7})[4]
    assert step["cost_model"] == "gnn-sage" and step["work_dir"].endswith(os.path.join("gnn-sage", "seed0"))
    tune = networks.tune_argv(args, step, bert["gnn-sage"])
    assert tune[tune.index("--cost-model") + 1] == "gnn" and tune[tune.index("--checkpoint") + 1] == bert["gnn-sage"]


def test_a_resumed_run_pre_trains_only_what_its_steps_left_need(tmp_path, monkeypatch):
    from benchmarks.metaschedule import networks

    trained, tuned = [], []
    monkeypatch.setattr(networks, "run_training", lambda argv, out: trained.append(out))
    monkeypatch.setattr("simulator.metaschedule.rivals.pretrain_xgb", lambda dbs, out, leave_out: trained.append(out))
    monkeypatch.setattr(networks, "run_step",
                        lambda args, step, ckpt: tuned.append((step["cost_model"], ckpt)) or {"wall_s": 1.0})
    monkeypatch.setattr(networks, "keep", lambda *a: None)
    args = _args(tmp_path, networks=["bert"], cost_models=["gnn", "tvm-xgb-pretrained", "random"], seeds=[0],
                 budgets=[8, 16])
    steps = networks.plan(args, {"bert": 10})
    for s in steps:
        s["done"] = s["cost_model"] == "gnn"       # the gnn's steps finished before the machine was lost
    networks.run_all(args, steps, str(tmp_path / "kept"))
    xgb = str(tmp_path / "runs" / "pretrain" / "bert" / "xgb.tar")
    assert trained == [xgb]                        # once, and no gnn
    assert tuned == [("tvm-xgb-pretrained", xgb)] * 2 + [("random", None)] * 2


def test_a_step_keeps_the_tuners_summary_with_what_contention_cost_it(tmp_path, monkeypatch):
    import sys

    from benchmarks.metaschedule import networks

    args = _args(tmp_path, networks=["bert"], cost_models=["random"], seeds=[0], budgets=[8])
    step = networks.plan(args, {"bert": 2})[0]
    os.makedirs(step["work_dir"])
    summary = os.path.join(step["work_dir"], "tune_summary.json")   # what simulator.tune writes
    fake_tune = [sys.executable, "-c", f"import json; json.dump({{'wall_s': 1.0}}, open({summary!r}, 'w'))"]
    monkeypatch.setattr(networks, "tune_argv", lambda *a: fake_tune)
    kept = networks.run_step(args, step, None)
    assert kept["wall_s"] == 1.0 and kept["others_cpu_s"] >= 0.0 and kept["step_span_s"] > 0.0
    assert "run_queue_wait_s" in kept                             # None only without schedstat
    monkeypatch.setattr(networks, "tune_argv", lambda *a: [sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(SystemExit, match="simulator.tune exited 3"):
        networks.run_step(args, step, None)


def test_run_queue_wait_reads_every_thread_and_keeps_its_latest_count(tmp_path):
    import subprocess
    import sys

    from benchmarks.metaschedule.run_queue import RunQueueWait, thread_delays

    for tid, line in ((11, "500 2000000000 7\n"), (12, "garbage\n")):   # run time, run delay (ns), slices
        (tmp_path / "42" / "task" / str(tid)).mkdir(parents=True)
        (tmp_path / "42" / "task" / str(tid) / "schedstat").write_text(line)
    assert thread_delays(42, str(tmp_path)) == {11: 2_000_000_000}       # an unreadable thread is skipped
    assert thread_delays(43, str(tmp_path)) == {}                         # a process already gone
    if not RunQueueWait(os.getpid()).supported:
        pytest.skip("no schedstat in /proc here")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    with RunQueueWait(child.pid, interval=0.2, cores=sorted(os.sched_getaffinity(0))[:1]) as wait:
        child.wait()
    assert wait.waited_s is not None and wait.waited_s >= 0.0
    assert {pid for pid, _, _ in wait.delays} == {child.pid}              # its threads were sampled
    gone = RunQueueWait(child.pid)
    gone.sample()                                                         # a finished tree: nothing, no error
    assert gone.delays == {} and gone.waited_s == 0.0


def test_a_point_is_the_median_of_its_repeats_even_where_the_mean_was_recorded(tmp_path):
    """One repeat lengthened by work elsewhere on the machine does not move the point."""
    from benchmarks.metaschedule.networks import plan, point

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn"], seeds=[0], budgets=[8])
    steps = plan(args, {"bert": 2})
    _finish(steps[0], 1e-3, wall=10.0)
    path = os.path.join(steps[0]["work_dir"], "summary_b8.json")
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    repeats = [1.00e-3, 1.02e-3, 2.00e-3, 0.99e-3, 1.01e-3]
    summary["end_to_end"] |= {"repeats_s": repeats, "latency_s": sum(repeats) / len(repeats)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    assert point(steps[0], steps)["end_to_end_s"] == pytest.approx(1.01e-3)
    assert point(steps[0], steps)["tuned_inside_s"] is None          # timed before kernels were
    summary["tasks"] = [{"name": "a", "best_s": 4e-4, "weight": 1}, {"name": "b", "best_s": 2e-4, "weight": 2}]
    summary["end_to_end"]["kernels_s"] = {"a": 5e-4, "b": 4e-4, "vm.builtin.alloc_tensor": 1e-6}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    assert point(steps[0], steps)["tuned_inside_s"] == pytest.approx(9e-4)


# ---------------------------------------------------------------- the quiet pass
def test_the_quiet_pass_rebuilds_each_step_and_times_it_in_resumable_rounds(mixer_tuned, monkeypatch, tmp_path):
    from benchmarks.metaschedule import quiet
    from extract.metaschedule.cpu_load import CoreLoad
    from extract.metaschedule.runner import MeasureConfig
    from simulator.metaschedule import tune

    work, summary = mixer_tuned
    step = {"network": "mixer", "cost_model": "random", "seed": 0, "budget": 1, "tasks": 7, "work_dir": work}
    busy = iter([90.0, 90.0] + [0.0] * 100)       # the first timing finds a core busy until it gives up
    monkeypatch.setattr(quiet, "QUIET_WAIT_S", 2.0)
    monkeypatch.setattr(quiet, "machine_load", lambda seconds: [CoreLoad(0, next(busy), 0.0, seconds)])
    measure = MeasureConfig.for_machine(min(os.sched_getaffinity(0)))
    said = []
    empty = step | {"seed": 1, "work_dir": str(tmp_path / "no-database")}     # its library cannot be built
    left_out = quiet.quiet_pass([(step, summary), (empty, summary)], tune.parse_target(None), measure, rounds=2,
                                log=said.append)
    assert len(left_out) == 1 and left_out[0].startswith("mixer random seed 1 at 1 per task: ")
    assert "has 0 records, not the 1 asked for" in left_out[0] and not quiet.read_timings(empty)
    assert os.path.getsize(os.path.join(work, "network_b1.so")) > 0
    timings = quiet.read_timings(step)
    assert [t["busiest_percent"] for t in timings] == [90.0, 0.0]
    assert said[1:] == ["quiet pass, round 1 of 2: 1 libraries to time", "quiet pass, round 2 of 2: 1 libraries to time"]
    got = quiet.quiet_latency(step)
    assert got["rounds"] == 2 and got["loaded"] == 1
    assert got["latency_s"] == pytest.approx(np.median([r for t in timings for r in t["repeats_s"]]))
    assert {t["name"] for t in summary["tasks"]} <= set(got["kernels_s"])
    # the same library as the tuning step's: every task scheduled, about as fast
    assert 0.5 < got["latency_s"] / summary["end_to_end"]["latency_s"] < 2
    assert quiet.quiet_pass([(step, summary)], tune.parse_target(None), measure, rounds=2, log=said.append) == []
    assert len(quiet.read_timings(step)) == 2 and len(said) == 3      # resumed: nothing left to do


def test_a_point_reports_its_quiet_timing_and_the_report_says_where_times_come_from(tmp_path):
    from benchmarks.metaschedule import quiet
    from benchmarks.metaschedule.networks import estimate, plan, point, quiet_line
    from simulator.registry import SimulatorError

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn"], seeds=[0], budgets=[8, 16])
    steps = plan(args, {"bert": 2})
    for s in steps:
        _finish(s, 2e-3, wall=10.0)
    steps = plan(args, {"bert": 2})
    assert estimate(steps)["quiet_points_left"] == 2
    with open(quiet.quiet_path(steps[0]), "w", encoding="utf-8") as f:
        json.dump({"timings": [{"repeats_s": [1e-3, 1.1e-3, 0.9e-3], "kernels_s": {}, "busiest_percent": 3.0}]
                   * quiet.ROUNDS}, f)
    first, second = (point(s, steps) for s in steps)
    assert first["end_to_end_s"] == pytest.approx(1e-3) and first["during_tuning_s"] == pytest.approx(2e-3)
    assert first["quiet_rounds"] == quiet.ROUNDS and first["quiet_loaded"] == 0
    assert second["end_to_end_s"] == pytest.approx(2e-3) and second["quiet_rounds"] == 0
    assert estimate(steps)["quiet_points_left"] == 1
    with open(quiet.quiet_path(steps[1]), "w", encoding="utf-8") as f:   # a pass stopped part way: not its figure yet
        json.dump({"timings": [{"repeats_s": [1e-3], "kernels_s": {}, "busiest_percent": 3.0}] * (quiet.ROUNDS - 1)}, f)
    partial = point(steps[1], steps)
    assert partial["end_to_end_s"] == pytest.approx(2e-3) and partial["quiet_rounds"] == quiet.ROUNDS - 1
    assert quiet_line([first, partial]).endswith("1 of 2 points; the others as timed right after their tuning step.")
    with open(quiet.quiet_path(steps[1]), "w", encoding="utf-8") as f:
        f.write('{"timings": [')
    with pytest.raises(SimulatorError, match="quiet_b16.json: not a quiet-pass file .*; delete it to time the step again"):
        point(steps[1], steps)
    assert quiet_line([first, second]).endswith("1 of 2 points; the others as timed right after their tuning step.")


def test_the_report_says_how_far_one_network_moves_between_two_timings():
    from benchmarks.metaschedule.networks import repeat_line

    def at(budget, bests_ms, e2e_ms, seed=0, model="gnn"):
        return {"network": "bert", "cost_model": model, "seed": seed, "budget": budget,
                "sum_of_bests_s": bests_ms * 1e-3, "end_to_end_s": e2e_ms * 1e-3}

    points = [at(16, 20.0, 30.0), at(8, 25.0, 31.0), at(32, 20.05, 36.0),     # 16 → 32: nothing better, +20%
              at(8, 22.0, 25.0, seed=1), at(16, 22.0, 24.0, seed=1),            # the same, −4%
              at(8, 22.0, 24.0, model="random")]                                # another run: no pair with seed 1's
    assert repeat_line(points) == ("The same network timed twice: 2 pairs of consecutive budgets of a run where the "
                                   "later step found nothing better (sums of bests within 0.5%) differ by 4–20% end "
                                   "to end (median 12%): differences between cost models of that size are within "
                                   "the timing's noise.")
    assert repeat_line(points[:2]) == "" and repeat_line([]) == ""


def test_kept_runs_bring_back_a_lost_runs_folder_and_simulator_tune_resumes_them(mixer_tuned, tmp_path):
    import gzip
    import shutil

    from benchmarks.metaschedule.kept import finished_budgets, keep, restore
    from simulator.metaschedule import tune

    work, _ = mixer_tuned
    runs = work[:work.index(os.sep + os.path.join("tune", "mixer"))]
    shutil.copyfile(os.path.join(work, "tune_summary.json"), os.path.join(work, "summary_b1.json"))
    kept = str(tmp_path / "results" / "ms_networks_runs_somecpu")
    keep(work, runs, kept)
    copy = os.path.join(kept, "mixer", "random", "seed0")
    with gzip.open(os.path.join(copy, "database_tuning_record.json.gz"), "rb") as f, \
            open(os.path.join(work, "database_tuning_record.json"), "rb") as g:
        assert f.read() == g.read()
    with open(os.path.join(copy, "tune_settings.json"), encoding="utf-8") as f:
        assert json.load(f)["settings"]["work_dir"] == os.path.join("{runs}", "tune", "mixer", "random", "seed0")
    zipped = open(os.path.join(copy, "database_workload.json.gz"), "rb").read()
    keep(work, runs, kept)      # kept again unchanged: the same bytes, so a commit shows no change
    assert open(os.path.join(copy, "database_workload.json.gz"), "rb").read() == zipped
    # the runs folder lost: restored elsewhere, simulator.tune resumes every record there
    elsewhere = str(tmp_path / "elsewhere")
    work2 = os.path.join(elsewhere, "tune", "mixer", "random", "seed0")
    assert restore(work2, elsewhere, kept) and finished_budgets(work2) == [1]
    assert not restore(work2, elsewhere, kept)       # as far as its copy: left alone
    again = tune.run(MIXER_ARGV + ["--work-dir", work2])
    assert [(t["trials"], t["resumed"]) for t in again["tasks"]] == [(1, 1)] * 7


def test_a_damaged_kept_run_is_a_one_line_error_naming_its_file(tmp_path):
    from benchmarks.metaschedule.kept import restore
    from simulator.registry import SimulatorError

    copy = tmp_path / "kept" / "bert" / "gnn" / "seed0"
    copy.mkdir(parents=True)
    (copy / "summary_b8.json").write_text("{}")
    (copy / "database_workload.json.gz").write_bytes(b"not gzip")
    with pytest.raises(SimulatorError, match=r"database_workload\.json\.gz: not a kept database"):
        restore(str(tmp_path / "runs" / "tune" / "bert" / "gnn" / "seed0"), str(tmp_path / "runs"), str(tmp_path / "kept"))


def test_the_benchmark_restores_kept_runs_before_planning(tmp_path):
    from benchmarks.metaschedule.kept import keep
    from benchmarks.metaschedule.networks import keep_all, plan, report_section, restore_kept, write_results
    from simulator.metaschedule.cost_model import gnn_defaults

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn"], seeds=[0], budgets=[8, 16])
    steps = plan(args, {"bert": 10})
    _finish(steps[0], 1e-3, wall=10.0)
    for name in ("database_workload.json", "database_tuning_record.json"):
        (tmp_path / "runs" / "tune" / "bert" / "gnn" / "seed0" / name).write_text("{}\n")
    settings = {"tool": "simulator.tune", "settings": {"work_dir": steps[0]["work_dir"], "seed": 0,
                                                       "gnn_defaults": gnn_defaults()}}
    (tmp_path / "runs" / "tune" / "bert" / "gnn" / "seed0" / "tune_settings.json").write_text(json.dumps(settings))
    kept = str(tmp_path / "results" / "kept")
    keep(steps[0]["work_dir"], args.runs, kept)
    args.runs = str(tmp_path / "new-runs")
    restore_kept(args, plan(args, {"bert": 10}), kept)
    steps = plan(args, {"bert": 10})
    assert [s["done"] for s in steps] == [True, False]
    # the table so far, as the benchmark rewrites it after every step
    write_results(args, steps, {"bert": 10}, "the command")
    section = "\n".join(report_section(args.results))
    assert "1 of 2 steps done" in section and "| bert | gnn | 1.000 [1.000–1.000] (0 min) | – |" in section
    # at the next start: a step being measured is not kept, a finished one not yet kept is
    copy = tmp_path / "results" / "kept" / "bert" / "gnn" / "seed0" / "database_tuning_record.json.gz"
    zipped = copy.read_bytes()
    work = tmp_path / "new-runs" / "tune" / "bert" / "gnn" / "seed0"
    with open(work / "database_tuning_record.json", "a", encoding="utf-8") as f:
        f.write('[0, "a record of the 16 step"]\n')
    keep_all(args, steps, kept, only_ahead=True)
    assert copy.read_bytes() == zipped
    _finish(steps[1], 1e-3, wall=10.0)
    keep_all(args, steps, kept, only_ahead=True)
    assert copy.read_bytes() != zipped and (copy.parent / "summary_b16.json").exists()


def test_one_cpu_per_table_another_cpus_points_are_not_overwritten(tmp_path):
    from benchmarks.metaschedule.kept import KEPT_PREFIX
    from benchmarks.metaschedule.networks import RESULT, check_one_cpu, plan, results_cpu, write_results
    from simulator.registry import SimulatorError

    args = _args(tmp_path, networks=["bert"], cost_models=["gnn"], seeds=[0], budgets=[8])
    assert results_cpu(args.results) is None
    check_one_cpu(args.results, "znver3")                   # no table yet: any CPU starts one
    write_results(args, plan(args, {"bert": 10}), {"bert": 10}, "the command", cpu="znver4")
    check_one_cpu(args.results, "znver4")
    with pytest.raises(SimulatorError, match=f"{RESULT} holds whole-network points measured on znver4; "
                                             "this machine is znver3"):
        check_one_cpu(args.results, "znver3")
    # a table written before tables named their CPU: the one kept-runs folder beside it tells
    table = os.path.join(args.results, RESULT)
    with open(table, encoding="utf-8") as f:
        unnamed = {k: v for k, v in json.load(f).items() if k != "cpu"}
    with open(table, "w", encoding="utf-8") as f:
        json.dump(unnamed, f)
    assert results_cpu(args.results) is None
    os.makedirs(os.path.join(args.results, KEPT_PREFIX + "znver4"))
    assert results_cpu(args.results) == "znver4"
    with pytest.raises(SimulatorError, match="znver4"):
        check_one_cpu(args.results, "znver3")
