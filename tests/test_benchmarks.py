"""The benchmark tables, plots and report work (tiny fake data; no timing assertions)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks import accuracy, plots, report, sweep, tuning
from benchmarks.common import best_by, fmt, markdown_table, mean_std, shown_command, write_json
from extract.provenance import ROOT

WORKLOADS = ["C3", "C5", "C6", "C7", "C10", "C11"]


def _metrics(rng, scale=1.0):
    block = {}
    for m in ("kendall_tau", "top1_slowdown", "top5_slowdown", "l1_log", "mape", "opa"):
        per = {w: float(rng.uniform(0, scale)) for w in WORKLOADS}
        block[m] = {"mean": float(np.mean(list(per.values()))), "per_workload": per}
    return {"test": block, "val": block, "run": {"train_samples": 100}, "config": {}}


def _fake_results(models=("gcn", "xgb"), seeds=(0, 1), fractions=(1.0,)):
    rng = np.random.default_rng(0)
    return [{"model": m, "seed": s, "fraction": f, "out": f"runs/{m}-{s}-{f}", "argv": ["--model", m],
             "metrics": _metrics(rng)} for m in models for s in seeds for f in fractions]


def _ceiling():
    c = {w: {"configs": 25, "kendall_tau": 0.9, "median_rel_diff": 0.02, "p90_rel_diff": 0.08,
             "median_repeat_spread": 0.01} for w in WORKLOADS}
    c["mean"] = dict(c["C3"], configs=150)
    return c


def test_mean_std_and_formatting():
    assert mean_std([1.0, 3.0, None, float("nan")]) == (2.0, pytest.approx(np.sqrt(2)), 2)
    assert fmt(0.05, "top5_slowdown", 0.01) == "5.0 ± 1.0%"
    assert fmt(0.5, "kendall_tau") == "0.500"
    table = markdown_table(["a", "b"], [[1, 2]])
    assert table.splitlines()[1] == "| :--- | ---: |"


def test_a_recorded_command_shows_repository_paths_relative_and_scratch_ones_by_name():
    command = (f"python -m benchmarks.metaschedule.tuning --data {ROOT}/datasets/networks_znver4 "
               f"--runs /scratch/day2/ms_tuning/ --results={ROOT}/docs/results --seeds 0 1 --out runs/x")
    assert shown_command(command) == ("python -m benchmarks.metaschedule.tuning --data datasets/networks_znver4 "
                                      "--runs …/ms_tuning --results=docs/results --seeds 0 1 --out runs/x")


def test_missing_values_are_null_in_json_and_skipped_in_the_report(tmp_path):
    """A mean over no value is null in the results JSON (JSON has no NaN), shown as "–",
    and never chosen as the best model."""
    assert mean_std([None, float("nan")]) == (None, None, 0)
    write_json(str(tmp_path / "x.json"), {"a": [float("nan"), np.float32(np.inf), 1.5], "b": np.array([2.0])})
    text = (tmp_path / "x.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": [None, None, 1.5], "b": [2.0]}
    assert best_by(["gcn", "xgb", "mlp"], {"gcn": None, "xgb": 0.4, "mlp": float("nan")}.get) == "xgb"
    assert best_by(["gcn"], lambda m: None) is None
    assert fmt(None, "kendall_tau") == "–"

    res = _fake_results(("gcn", "xgb"), (0,))
    for block in res[1]["metrics"]["test"].values():  # xgb: every test value missing
        block["mean"], block["per_workload"] = float("nan"), {w: float("nan") for w in WORKLOADS}
    out = accuracy.write_outputs(res, str(tmp_path), _ceiling())
    assert out["summary"]["xgb"]["mean"]["kendall_tau"] == [None, None, 0]
    saved = (tmp_path / "accuracy.json").read_text()
    assert "NaN" not in saved
    text = report.build(str(tmp_path), str(tmp_path / "RESULTS.md"))
    assert "nan" not in text.lower().replace("nanogpt", "")
    assert "`gcn` / ceiling" in text  # the model with values is the best one, not the empty one


def test_accuracy_and_sweep_tables(tmp_path):
    res = _fake_results()
    out = accuracy.write_outputs(res, str(tmp_path), _ceiling())
    assert set(out["summary"]) == {"gcn", "xgb"}
    mean, std, n = out["summary"]["gcn"]["C3"]["kendall_tau"]
    assert n == 2 and std >= 0
    rows = (tmp_path / "accuracy_runs.csv").read_text().splitlines()
    assert rows[0] == "model,seed,fraction,workload,metric,value"
    assert len(rows) == 1 + 4 * 6 * 7  # runs × metrics × (workloads + mean)
    assert (tmp_path / "noise_ceiling.csv").exists()

    sw = _fake_results(("gcn", "curve-mlp"), (0,), (0.05, 0.5, 1.0))
    srows = sweep.write_outputs(sw, str(tmp_path))
    assert {r[1] for r in srows} == {0.05, 0.5, 1.0}
    plots.plot_sweep(srows, str(tmp_path / "sweep.png"))
    plots.plot_accuracy(out["summary"], _ceiling(), str(tmp_path / "accuracy.png"))
    assert (tmp_path / "sweep.png").stat().st_size > 0 and (tmp_path / "accuracy.png").stat().st_size > 0


def test_sweep_jobs_share_the_accuracy_runs():
    jobs = sweep.sweep_jobs(["gcn"], [0.1, 1.0], [0], "R", ["shipped"], None)
    assert [j["out"] for j in jobs] == [os.path.join("R", "gcn-seed0-f0.1"), os.path.join("R", "gcn-seed0")]
    assert "--train-fraction" in jobs[0]["argv"] and "--train-fraction" not in jobs[1]["argv"]
    acc = accuracy.accuracy_jobs(["gcn"], [0], "R", ["shipped"], None)
    assert acc[0]["out"] == jobs[1]["out"] and acc[0]["argv"] == jobs[1]["argv"]


def test_random_search_and_first_hit():
    values = np.array([5.0, 1.0, 3.0, 2.0])
    curves = random_curves = tuning.random_search(values, 4, 50)
    assert curves.shape == (50, 4)
    assert np.all(np.diff(curves, axis=1) <= 0) and np.all(curves[:, -1] == 1.0)
    hits = tuning.first_hit(random_curves, 1.0)
    assert np.all((hits >= 1) & (hits <= 4))
    assert np.isinf(tuning.first_hit(curves, 0.5)).all()


def _fake_tuning(passes=3, kmax=20):
    rng = np.random.default_rng(1)
    measurements, ranking, dataset = [], {}, {}
    for w in ("C3", "C5"):
        space = list(range(100))
        dataset[w] = {i: 1e-3 * (1 + i / 10) for i in range(0, 100, 2)}  # best: index 0, 1 ms
        ranking[w] = [4, 0] + [i for i in space if i not in (0, 4)]
        plan = [(w, "config", i) for i in ranking[w][:kmax]] + [(w, "unscheduled", -1)]
        for p in range(passes):
            for (_, kind, i) in plan:
                t = 1e-3 * (1 + max(i, 0) / 10) * (50 if kind == "unscheduled" else 1) * rng.uniform(0.98, 1.02)
                measurements.append({"workload": w, "kind": kind, "index": i, "pass": p, "costs": [t, t],
                                     "error_no": 0})
    return measurements, ranking, dataset


def test_tuning_analysis_plot_and_report(tmp_path):
    measurements, ranking, dataset = _fake_tuning()
    result = tuning.analyse(["C3", "C5"], measurements, ranking, dataset, [1, 5, 10, 20], 200, 3)
    r = result["workloads"]["C3"]
    assert r["dataset_best_index"] == 0 and r["dataset_best_rank"] == 2
    assert r["per_k"]["1"]["ratio_median"] == pytest.approx(1.4, rel=0.05)  # index 4 first
    assert r["per_k"]["5"]["ratio_median"] == pytest.approx(1.0, rel=0.05)
    assert r["guided_measurements_to_5pct"] == 2
    assert r["random_measurements_to_5pct_mean"] > 2
    assert r["unscheduled_ms"] == pytest.approx(50, rel=0.05)
    assert len(tuning.table_rows(result)) == 8
    result["config"] = {"model": "gcn", "train": "loo", "repeat": 3, "min_repeat_ms": 20, "random_seeds": 200}
    plots.plot_tuning(result, str(tmp_path / "tuning.png"))
    with open(tmp_path / "tuning.json", "w") as f:
        json.dump(result, f)
    accuracy.write_outputs(_fake_results(), str(tmp_path), _ceiling())
    speed = {"threads": 2, "batch_size": 1024, "models": {
        m: {"train_graphs_per_s": 1000.0 * (i + 1), "infer_configs_per_s": 2e4 * (i + 1),
            "infer_configs_per_s_by_batch": {"128": 3e4 * (i + 1), "1024": 1e4 * (i + 1)},
            "infer_with_prepare_configs_per_s": 5e3, "peak_rss_mib": 500.0} for i, m in enumerate(["gcn", "xgb"])},
        "extraction": {"configs": 10, "stages_s": {"schedule": 0.01, "lower": 0.02, "graph": 0.01, "per_store": 0.05},
                       "configs_per_s_1_workers": 12.0, "graph_configs_per_s_2_workers": 55.5,
                       "configs_per_s_2_workers": 40.0, "graph_path_configs_per_s": 25.0,
                       "xgb_path_configs_per_s": 16.7}}
    with open(tmp_path / "speed.json", "w") as f:
        json.dump(speed, f)
    plots.plot_speed(speed, str(tmp_path / "speed.png"))
    agree = {"quiet_log": "pass3.jsonl", "configs": {"C3": 100, "C5": 90}, "pass1": {"C3": 0.7, "C5": 0.8, "mean": 0.75},
             "models": {"gcn": {"C3": [0.8, 0.01, 3], "C5": [0.9, 0.02, 3], "mean": [0.85, 0.01, 3]}}}
    with open(tmp_path / "quiet_agreement.json", "w") as f:
        json.dump(agree, f)
    text = report.build(str(tmp_path), str(tmp_path / "RESULTS.md"))
    for heading in ("## Goals", "## Accuracy", "## Speed and memory", "## Model-guided tuning", "noise ceiling"):
        assert heading in text
    assert "| `gcn` predictions | 0.800 ± 0.010 | 0.900 ± 0.020 | 0.850 ± 0.010 |" in text
    assert "`gcn`, reaches 0.850 against pass 1's 0.750" in text
    assert "| `xgb` | 60,000 | 20,000 |" in text  # inference by batch size
    assert "| extraction ≥ 50 configs/s on 2 cores (log → graph samples) | 55.5 configs/s" in text
    assert "graph samples only (`extract.tvm_log --no-per-store`; goal ≥ 50 configs/s on 2 cores) " \
           "55.5 configs/s with 2 process(es)" in text
    assert "](./tuning.png)" in text or "](tuning.png)" in text or "tuning.png)" in text


def test_plots_of_arrays(tmp_path):
    rng = np.random.default_rng(0)
    groups = np.repeat(WORKLOADS, 20)
    t = np.exp(rng.normal(-6, 1, groups.size))
    plots.plot_runtime_distribution(groups, t, str(tmp_path / "dist.png"))
    pred = {"gcn": {"workload": groups, "measured": t, "predicted": t * np.exp(rng.normal(0, 0.3, t.size))}}
    plots.plot_scatter(pred, str(tmp_path / "err.png"), "error")
    plots.plot_scatter(pred, str(tmp_path / "pvm.png"), "pred")
    hist = [{"epoch": e, "train_loss": 1 / e, "val_kendall_tau": 0.1 * e} for e in range(1, 4)]
    plots.plot_learning_curves({"gcn": hist}, str(tmp_path / "lc.png"))
    assert all((tmp_path / f).stat().st_size > 0 for f in ("dist.png", "err.png", "pvm.png", "lc.png"))


def test_plots_cli_on_a_saved_run(tmp_path, dataset_path):
    from simulator.train import run
    out = str(tmp_path / "run")
    run(["--data", dataset_path, "--epochs", "1", "--width", "8", "--depth", "1", "--threads", "1", "--out", out])
    assert plots.main([out]) == 0
    for f in ("runtime_distribution.png", "error_vs_runtime.png", "predicted_vs_measured.png", "learning_curve.png"):
        assert (tmp_path / "run" / "plots" / f).stat().st_size > 0
    assert (tmp_path / "run" / "test_predictions.csv").exists()
    assert plots.main([str(tmp_path)]) == 2  # not a run folder


def test_protocol_notes_name_every_reduction():
    from benchmarks import all as bench_all
    args = bench_all.build_parser().parse_args(["--seeds", "0", "--epochs", "20", "--train", "split"])
    notes = " ".join(bench_all.protocol_notes(args))
    assert "--seeds 0" in notes and "--epochs 20" in notes and "--train split" in notes
    assert bench_all.protocol_notes(bench_all.build_parser().parse_args([]))[-1].startswith("training runs use")


def test_quiet_agreement_scores_models_against_the_quiet_pass(tmp_path):
    """With the shipped passes as 'pass 1' and 'quiet pass': a run whose predictions are the
    quiet pass itself agrees perfectly; pass 1's τ is the noise ceiling's."""
    from datasets import SHIPPED_LOG, SHIPPED_REMEASURE
    from datasets.noise_ceiling import costs_by_workload, noise_ceiling
    quiet = costs_by_workload(str(SHIPPED_REMEASURE))
    run = tmp_path / "gcn-seed0"
    run.mkdir()
    with open(run / "test_predictions.csv", "w") as f:
        f.write("workload,index,measured_s,predicted_s\n")
        for w in ("C3", "C5"):
            for i, costs in quiet[w].items():
                f.write(f"{w},{i},1.0,{costs.mean()}\n")
            f.write(f"{w},-1,1.0,1.0\n")  # not re-measured: left out
    out = accuracy.quiet_agreement([{"model": "gcn", "out": str(run)}], None, str(SHIPPED_LOG),
                                   str(SHIPPED_REMEASURE))
    ceiling = noise_ceiling(str(SHIPPED_LOG), str(SHIPPED_REMEASURE))
    assert list(out["pass1"]) == ["C3", "C5", "mean"]
    assert out["configs"] == {"C3": 25, "C5": 25}
    assert out["pass1"]["C3"] == pytest.approx(ceiling["C3"]["kendall_tau"])
    assert out["models"]["gcn"]["C5"][0] == pytest.approx(1.0)
    assert out["models"]["gcn"]["mean"] == [pytest.approx(1.0), 0.0, 1]


def test_speed_child_process_reports_its_own_figures(dataset_path):
    """One model's speed child, run for real on the synthetic data: every figure present, and
    peak memory is the child's own (not the parent's, which this test inflates first)."""
    import argparse

    from benchmarks import speed
    from benchmarks.common import peak_rss_mib
    ballast = np.ones(1500 * 2 ** 20 // 8)  # 1.5 GiB in this (parent) process
    assert peak_rss_mib() > 1500
    ns = argparse.Namespace(epochs=1, batch_size=32, batches=[16, 64], threads=1, data=[dataset_path])
    out = speed.run_child("gcn", ns)
    assert out["configs"] == 12 * 16 and out["train_configs"] > 0
    for key in ("train_graphs_per_s", "infer_configs_per_s", "infer_with_prepare_configs_per_s"):
        assert out[key] > 0
    assert set(out["infer_configs_per_s_by_batch"]) == {"16", "64"}
    assert 50 < out["peak_rss_mib"] < 1200  # the child itself: ~450 MiB (torch, DGL, TVM)
    del ballast


def test_extraction_benchmark_times_both_paths(tmp_path):
    from pathlib import Path

    from benchmarks import extraction
    log = Path(__file__).parent / "data" / "autotvm_v02.jsonl"
    out = tmp_path / "extraction.json"
    assert extraction.main(["--log", str(log), "--count", "5", "--workers", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["configs"] == 5
    assert result["graph_configs_per_s_1_workers"] > 0 and result["configs_per_s_1_workers"] > 0
    assert set(result["stages_s"]) == {"schedule", "lower", "graph", "per_store"}


def test_report_names_the_minutes_pass_one_ran_slow():
    load = {"window_minutes": 5.0, "loaded_ratio": 1.15, "first_pass_configs": 1000, "loaded_configs": 250,
            "loaded_share": 0.25, "unknown_configs": 0,
            "windows": [{"start_minute": 0.0, "median_ratio": 1.01, "loaded": False},
                        {"start_minute": 5.0, "median_ratio": 2.04, "loaded": True},
                        {"start_minute": 10.0, "median_ratio": 1.03, "loaded": False}]}
    text = " ".join(report._load_lines(load))
    assert "minutes 5–10 (2.04×); 1.01–1.03× in the other windows" in text
    assert "250 of pass 1's 1,000 configs (25%)" in text
    assert report._load_lines(None) == []


def test_the_report_opens_with_a_summary_linked_to_its_sections(tmp_path):
    """The one-screen summary: rows only for results that exist, each linked to the anchor of
    the heading the report wrote (a renamed section leaves no dead link)."""
    import json
    import re

    from benchmarks.summary import anchor

    tuning = {"held_out": ["dense_8x8x8"], "command": "python -m benchmarks.metaschedule.tuning", "figure": "f.png",
              "pretrain": {"records": 10, "databases": ["a"], "sources": ["s"]}, "seeds_run": [0], "cut": [],
              "rank": {}, "top_k": 8, "machine": {"cpu_model": "Intel(R) Xeon(R) Processor", "llvm_cpu": "emeraldrapids"},
              "summary": [{"workload": "dense_8x8x8", "cost_model": m, "trials": 64, "seeds": 1, "mean_s": s,
                           "min_s": s, "max_s": s, "cost_model_share": 0.1}
                          for m, s in (("gnn", 1e-4), ("tvm-xgb", 2e-4))]}
    (tmp_path / "ms_tuning.json").write_text(json.dumps(tuning))
    text = report.build(str(tmp_path), str(tmp_path / "RESULTS.md"))
    lines = text.splitlines()
    summary = lines.index("## In one screen")
    assert summary < next(i for i, line in enumerate(lines) if line.startswith("## MetaSchedule tuning"))
    row = next(line for line in lines if "`dense_8x8x8`" in line)
    assert "gnn **100.0 µs**" in row and "tvm-xgb 200.0 µs" in row and "(held out, timed on `emeraldrapids`)" in row
    links = re.findall(r"\]\((#[^)]+)\)", row)
    assert links and all(link in {anchor(h) for h in lines if h.startswith("## ")} for link in links)
    assert anchor("## Accuracy: cross-workload split") == "#accuracy-cross-workload-split"
    assert "AutoTVM conv2d" not in text          # no accuracy.json: no row for it


def test_the_summary_quotes_simulator_tune_s_default_gnn_after_its_first_round_and_its_last():
    """The one-screen row leads with the gnn a user gets (two-stage scoring, `gnn-filter`), at
    the first point (its first round: no online update yet) and the last, not the plain gnn's
    first round only."""
    from benchmarks.summary import tuning_rows

    def point(model, trials, seconds):
        return {"workload": "dense_8x8x8", "cost_model": model, "trials": trials, "seeds": 3, "mean_s": seconds}
    res = {"held_out": ["dense_8x8x8"], "machine": {},
           "summary": [point("gnn", 64, 1e-4), point("gnn", 256, 9e-5), point("gnn-filter", 64, 2e-4),
                       point("gnn-filter", 128, 1.5e-4), point("gnn-filter", 256, 5e-5),
                       point("tvm-xgb", 64, 3e-4), point("tvm-xgb", 256, 6e-5), point("random", 64, 4e-4)]}
    (what, figures, _), = tuning_rows(res)
    assert "best after 64 / 256 trials, mean of 3 seeds" in what
    assert figures.startswith("gnn (`simulator.tune`'s default: two-stage) **200.0 µs / 50.0 µs**; ")
    assert "gnn scoring every candidate 100.0 µs / 90.0 µs" in figures and "tvm-xgb 300.0 µs / 60.0 µs" in figures
    assert "random" not in figures                      # no 256-trial point: not quoted half
    res["summary"] = [r for r in res["summary"] if r["cost_model"] != "gnn-filter"]
    (_, figures, _), = tuning_rows(res)
    assert figures.startswith("gnn **100.0 µs / 90.0 µs**; tvm-xgb")


def test_a_finished_run_is_reused_only_while_its_command_line_resolves_to_its_config(tmp_path):
    from benchmarks.common import _run_done
    from simulator.train import resolve_argv

    networks = os.path.join(os.path.dirname(__file__), "data", "networks_tiny")
    out = tmp_path / "run"
    out.mkdir()
    argv = ["--model", "gcn", "--seed", "0", "--out", str(out), "--data", networks, "--epochs", "2"]
    config = resolve_argv(argv)[2].to_dict()
    write_json(str(out / "bench_argv.json"), argv)

    def finished_with(recorded):
        write_json(str(out / "metrics.json"), {"config": recorded})
        return _run_done(str(out), argv)
    assert finished_with(config)
    assert finished_with({k: v for k, v in config.items() if k != "train_task_fraction"})  # an option added since
    # … counted as its plain default: stale where the command resolves it otherwise
    last = argv + ["--keep-weights", "last"]
    write_json(str(out / "bench_argv.json"), last)
    recorded = {k: v for k, v in resolve_argv(last)[2].to_dict().items() if k != "keep_weights"}
    write_json(str(out / "metrics.json"), {"config": recorded})
    assert not _run_done(str(out), last)
    write_json(str(out / "metrics.json"), {"config": dict(recorded, keep_weights="last")})
    assert _run_done(str(out), last)
    write_json(str(out / "bench_argv.json"), argv)
    assert not finished_with(dict(config, features="base"))   # a default changed since: stale, trained again
    assert not _run_done(str(out), argv + ["--lr", "0.1"])    # another command line
    write_json(str(out / "bench_argv.json"), ["--model", "no-such-model"])
    assert not _run_done(str(out), ["--model", "no-such-model"])  # the rerun reports it


def test_a_kept_run_is_reused_where_its_run_folder_was_lost_and_retrained_when_stale(tmp_path, monkeypatch):
    import gzip
    import shutil

    from benchmarks import common
    from benchmarks.kept_runs import kept_file
    from simulator.registry import SimulatorError

    networks = os.path.join(os.path.dirname(__file__), "data", "networks_tiny")
    kept = str(tmp_path / "results" / "networks_tiny_runs")
    out = tmp_path / "runs" / "leave-network-out-a-gcn-seed0"
    argv = ["--model", "gcn", "--seed", "0", "--out", str(out), "--data", networks, "--epochs", "1", "--threads", "1", "--split", "random"]
    trained = common.run_training(argv, str(out), kept=kept)
    assert "reused" not in trained["bench"] and trained["val"]["kendall_tau"]["per_workload"]
    with gzip.open(kept_file(kept, str(out), argv), "rt", encoding="utf-8") as f:
        record = json.load(f)
    assert "--out" not in record["argv"] and "bench" not in record["metrics"]
    assert "per_workload" not in record["metrics"]["val"]["kendall_tau"]          # the bulk of metrics.json
    assert record["metrics"]["test"] == trained["test"] and record["seconds"] == trained["bench"]["seconds"]
    zipped = open(kept_file(kept, str(out), argv), "rb").read()
    common.run_training(argv, str(out), kept=kept)            # reused from its folder, kept again: same bytes
    assert open(kept_file(kept, str(out), argv), "rb").read() == zipped

    def no_training(*a, **k):
        raise AssertionError("trained again")
    monkeypatch.setattr(common.subprocess, "run", no_training)
    shutil.rmtree(tmp_path / "runs")                          # the runs folder lost; elsewhere now
    elsewhere = tmp_path / "other-runs" / out.name
    again = common.run_training(argv[:5] + [str(elsewhere)] + argv[6:], str(elsewhere), kept=kept)
    assert again["bench"]["kept"] and again["test"] == trained["test"] and not elsewhere.exists()
    record["metrics"]["config"]["features"] = "base"          # a default changed since: stale
    with gzip.open(kept_file(kept, str(out), argv), "wt", encoding="utf-8") as f:
        json.dump(record, f)
    with pytest.raises(AssertionError, match="trained again"):
        common.run_training(argv, str(out), kept=kept)
    with open(kept_file(kept, str(out), argv), "wb") as f:
        f.write(b"damaged")
    with pytest.raises(SimulatorError, match=r"seed0-[0-9a-f]{8}\.json\.gz: not a kept training run"):
        common.run_training(argv, str(out), kept=kept)


def test_runs_of_one_name_and_another_command_are_kept_side_by_side(tmp_path):
    import shutil

    from benchmarks import common
    from benchmarks.kept_runs import keep, kept_file, read_kept, unhashed_file

    networks = os.path.join(os.path.dirname(__file__), "data", "networks_tiny")
    kept = str(tmp_path / "kept")
    out = str(tmp_path / "runs" / "leave-network-out-a-gcn-seed0")
    argv = ["--model", "gcn", "--seed", "0", "--out", out, "--data", networks, "--threads", "1",
            "--split", "random", "--width", "8", "--depth", "1"]
    one, two = argv + ["--epochs", "1"], argv + ["--epochs", "2"]
    first = common.run_training(one, out, kept=kept)
    second = common.run_training(two, out, kept=kept)   # the same folder, trained again for 2 epochs
    assert os.path.exists(kept_file(kept, out, one)) and os.path.exists(kept_file(kept, out, two))
    shutil.rmtree(out)
    assert common.run_training(one, out, kept=kept)["test"] == first["test"]    # both still kept
    assert common.run_training(two, out, kept=kept)["test"] == second["test"]
    shutil.move(kept_file(kept, out, one), unhashed_file(kept, out))           # kept as before
    os.remove(kept_file(kept, out, two))
    assert common.run_training(one, out, kept=kept)["bench"]["kept"]           # still read
    assert read_kept(kept, out, two) is None                                   # not for another command
    record = read_kept(kept, out, one)
    keep(kept, out, one, record["metrics"], record["seconds"])                 # kept again: renamed
    assert os.path.exists(kept_file(kept, out, one)) and not os.path.exists(unhashed_file(kept, out))


def test_others_cpu_counts_a_process_this_one_has_not_waited_for_and_not_its_own_work():
    """A child still unwaited-for is another process's CPU; this process's own work and a
    child it waited for are not (lower and upper bounds net of whatever else runs here)."""
    import subprocess
    import sys
    import time

    from benchmarks.common import cpu_counters, others_cpu_s

    burn = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"]
    since = cpu_counters()
    child = subprocess.Popen(burn)
    while child.poll() is None:       # poll reaps it once it is done: sample before that
        time.sleep(0.05)
        if others_cpu_s(since) >= 0.5:
            break
    seen = others_cpu_s(since)
    child.wait()
    assert seen >= 0.5
    since = cpu_counters()
    subprocess.run(burn, check=True)                     # waited for: our own
    t = time.process_time()
    while time.process_time() - t < 0.3:                 # and our own work
        pass
    others = others_cpu_s(since)
    busy = cpu_counters()[0] - since[0]                  # the machine's, read after
    assert others <= busy - 0.8 * 1.3                    # our 1.3 s are not in it


def test_rewriting_only_the_report_leaves_the_measuring_runs_record_alone(tmp_path):
    """`--stages report` measures nothing: run_info.json (the machine and commands that
    measured) stays as it was, and the report says what it said."""
    import json

    from benchmarks import all as bench_all

    results = tmp_path / "results"
    results.mkdir()
    info = {"commands": ["python -m benchmarks.all"], "machine": {"cpu": "Some Other CPU", "cpus": 2},
            "finished": "2026-01-01 00:00 UTC", "stages": {}}
    (results / "run_info.json").write_text(json.dumps(info))
    report_path = tmp_path / "RESULTS.md"
    argv = ["--stages", "report", "--results", str(results), "--report", str(report_path), "--runs",
            str(tmp_path / "runs"), "--tuning-runs", str(tmp_path / "tuning"), "--spaces", str(tmp_path / "spaces")]
    assert bench_all.main(argv) == 0
    assert json.loads((results / "run_info.json").read_text()) == info
    text = report_path.read_text()
    assert "**Machine.** Some Other CPU, 2 CPUs" in text and "**This run** (2026-01-01 00:00 UTC)" in text


_STARTER = """
import subprocess, sys, threading
from benchmarks.common import dies_with_parent
child = "import os, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
def start():
    subprocess.run([sys.executable, "-c", "import sys; " + child, sys.argv[1]], preexec_fn=dies_with_parent())
threading.Thread(target=start).start()  # as run_many starts training runs: from a worker thread
threading.Event().wait()
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_killed_benchmark_leaves_no_child_running(tmp_path):
    """A benchmark killed outright (SIGKILL: nothing of it runs to clean up) takes its training or
    tuning child with it, instead of leaving it writing into the folder its next start resumes."""
    pid_file = tmp_path / "child.pid"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parent = subprocess.Popen([sys.executable, "-c", _STARTER, str(pid_file)], cwd=root)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _running(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child), "the child outlived the benchmark that started it"
    finally:
        parent.kill()
        if pid_file.exists() and pid_file.read_text() and _running(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_run_given_its_datas_digest_is_reused_only_on_the_same_data(tmp_path, monkeypatch):
    import shutil

    from benchmarks import common

    networks = os.path.join(os.path.dirname(__file__), "data", "networks_tiny")
    kept = str(tmp_path / "results" / "tiny_runs")
    out = str(tmp_path / "runs" / "random-gcn-seed0")
    argv = ["--model", "gcn", "--seed", "0", "--out", out, "--data", networks, "--epochs", "1", "--threads", "1",
            "--split", "random"]
    trained = common.run_training(argv, out, kept=kept, data="digest-a")
    assert "reused" not in trained["bench"]
    trainings = []
    real_run = common.subprocess.run

    def counted(*a, **k):
        trainings.append(a)
        return real_run(*a, **k)
    monkeypatch.setattr(common.subprocess, "run", counted)
    assert common.run_training(argv, out, kept=kept, data="digest-a")["bench"]["reused"]       # same data
    assert not trainings
    shutil.rmtree(tmp_path / "runs")
    assert common.run_training(argv, out, kept=kept, data="digest-a")["bench"]["kept"]         # kept, same data
    assert not trainings
    again = common.run_training(argv, out, kept=kept, data="digest-b")                         # measured again
    assert len(trainings) == 1 and "reused" not in again["bench"]
    assert common.run_training(argv, out, kept=kept, data="digest-b")["bench"]["reused"]
    shutil.rmtree(tmp_path / "runs")
    common.run_training(argv, out, kept=kept, data="digest-a")     # the kept run is digest-b's now: trained
    assert len(trainings) == 2
