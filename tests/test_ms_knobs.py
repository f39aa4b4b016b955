"""The transfer study on the MetaSchedule dataset: knob features of MetaSchedule traces
(`extract.autotvm.knob_features.trace_knobs`, `vectors["knob"]` of every database sample),
knob-xgb / itervar-xgb on MetaSchedule samples, and the leave-one-operator-kind-out
summary of `benchmarks.networks`."""
import argparse
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from extract.autotvm.knob_features import (
    DECISION_WIDTH, SHAPE_WIDTH, count_trace_cuts, trace_decisions, trace_knob_names, trace_knobs,
)
from extract.tir.workload_key import parse_workload_key

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "networks_tiny"
MS_SMALL = ROOT / "tests" / "data" / "ms_small"
WIDTH = DECISION_WIDTH + SHAPE_WIDTH + 1

# a hand-made trace: a categorical unroll choice, a compute location, a 2-way tile, and an
# instruction without a decision
TRACE = [[["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v0"]],
          ["GetSBlock", [], ["C", "main"], ["b0"]],
          ["SampleComputeLocation", ["b0"], [], ["l1"]],
          ["SamplePerfectTile", ["l2"], [2, 64], ["v3", "v4"]]],
         [[3, [4, 8]], [0, 2], [2, -2]]]


def test_trace_decisions_in_trace_order_with_each_kinds_transform():
    # trace order (not the order of the decision list): unroll 64 → log2(65), inlined → 0, tile 4, 8 → 2, 3
    assert trace_decisions(TRACE) == pytest.approx([math.log2(65), 0.0, 2.0, 3.0])
    assert trace_decisions(json.dumps(TRACE)) == trace_decisions(TRACE)
    root = [TRACE[0], [[3, [4, 8]], [0, 0], [2, -1]]]
    assert trace_decisions(root) == pytest.approx([0.0, 1.0, 2.0, 3.0])   # unroll 0, compute at root


def test_knob_vector_is_fixed_width_and_the_cut_is_counted():
    key = "conv2d.copy-mac.1x8x4x4_16x8x1x1_1x16x4x4.float32.0123abcd.llvm-x-1c"
    knobs = trace_knobs(TRACE, key, flops=1024.0)
    assert knobs.vector.shape == (WIDTH,) == (len(trace_knob_names()),) and knobs.cut == 0
    assert knobs.vector[:4] == pytest.approx([math.log2(65), 0.0, 2.0, 3.0])
    assert not knobs.vector[4:DECISION_WIDTH].any()                          # padding
    dims = [d for s in parse_workload_key(key).shapes for d in s]
    assert knobs.vector[DECISION_WIDTH:DECISION_WIDTH + len(dims)] == pytest.approx([math.log2(1 + d) for d in dims])
    assert knobs.vector[-1] == pytest.approx(10.0)
    cut = trace_knobs(TRACE, key, flops=None, decision_width=3, shape_width=5)
    assert cut.vector.shape == (3 + 5 + 1,) and cut.cut == 1 + (len(dims) - 5)
    assert cut.vector[:3] == pytest.approx(knobs.vector[:3]) and cut.vector[-1] == 0.0


def _record_lines(folder):
    with gzip.open(folder / "database_tuning_record.json.gz", "rt", encoding="utf-8") as f:
        return f.readlines()


def test_count_trace_cuts_counts_records_and_values():
    lines = _record_lines(MS_SMALL / "random")
    whole = count_trace_cuts(lines)
    assert whole["records"] == len(lines) == 36 and whole["cut_records"] == whole["cut_values"] == 0
    n = [len(trace_decisions(json.loads(line)[1][0])) for line in lines]
    assert whole["max_values"] == max(n) <= DECISION_WIDTH
    small = count_trace_cuts(lines + [lines[0].rstrip("\n")], decision_width=4)   # a cut-off last line is not read
    assert small["records"] == 36 and small["cut_records"] == sum(k > 4 for k in n)
    assert small["cut_values"] == sum(max(0, k - 4) for k in n) > 0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from datasets import load_collection

    return load_collection([str(TINY)], progress=False, cache=str(tmp_path_factory.mktemp("cache")))


def test_metaschedule_samples_carry_their_trace_knobs(tiny):
    from datasets.networks import training_databases
    from extract.metaschedule.database import read_databases

    assert all(s.vectors["knob"].shape == (1, WIDTH) and s.meta.extra["knob_cut"] == 0 for s in tiny.samples)
    assert all(s.vectors["itervar"].shape[0] == 1 and s.vectors["itervar"].any() for s in tiny.samples)
    jobs, _ = read_databases(training_databases(TINY))
    by_line = {(j.source.rsplit(":", 1)[0].rsplit("/", 2)[-2], int(j.source.rsplit(":", 1)[1])): j for j in jobs}
    checked = 0
    for s in tiny.samples[:6]:
        job = by_line[(Path(s.meta.database).name, s.meta.line)]
        decisions = trace_decisions(job.trace)
        assert decisions, "a tuned trace has decisions"
        assert s.vectors["knob"][0, :len(decisions)] == pytest.approx(decisions, abs=1e-5)
        dims = [d for shape in parse_workload_key(s.group).shapes for d in shape]
        assert s.vectors["knob"][0, DECISION_WIDTH:DECISION_WIDTH + len(dims)] == pytest.approx(
            [math.log2(1 + d) for d in dims], abs=1e-5)
        assert s.vectors["knob"][0, -1] > 10          # log2 FLOPs of a real operator
        # the replayed schedule's trace gives the same values as the record's JSON
        assert trace_decisions(job.schedule()) == pytest.approx(decisions)
        checked += 1
    assert checked == 6


@pytest.mark.parametrize("module, version", [("extract.autotvm.knob_features", "TRACE_KNOB_VERSION"),
                                             ("extract.metaschedule.trace_tokens", "TRACE_TOKENS_VERSION")])
def test_cache_key_of_databases_follows_the_trace_layouts(monkeypatch, module, version):
    """The trace knobs' and the trace tokens' layouts."""
    import importlib

    import datasets
    from extract.tvm_log import input_files

    db_files = input_files([str(MS_SMALL)])
    log_files = [str(ROOT / "tests" / "data" / "autotvm_v02.jsonl")]
    before = datasets._logs_key(db_files), datasets._logs_key(log_files)
    layout = importlib.import_module(module)
    monkeypatch.setattr(layout, version, getattr(layout, version) + 1)
    assert datasets._logs_key(db_files) != before[0]          # a new layout re-extracts databases
    assert datasets._logs_key(log_files) == before[1]         # AutoTVM logs' caches stay


@pytest.mark.parametrize("name,objective", [("knob-xgb", "reg"), ("knob-xgb", "rank"), ("itervar-xgb", "reg"),
                                            ("itervar-xgb", "rank")])
def test_autotvm_baselines_train_and_predict_on_metaschedule_samples(tiny, name, objective):
    from simulator.models.costmodel import build_cost_model
    from simulator.data.in_memory import SampleSource
    from simulator.train import build_parser, config_from_flags, validate

    samples = tiny.samples
    config = validate(config_from_flags(dict(vars(build_parser().parse_args([])), model=name,
                                             xgb_objective=objective, xgb_rounds=40)))
    source = SampleSource(samples)
    vector = "knob" if name == "knob-xgb" else "itervar"
    assert source.info.vector_dims[vector] == samples[0].vectors[vector].shape[1]
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, 0))
    dense = [i for i, s in enumerate(samples) if s.meta.kind == "dense"]
    rest = [i for i in range(len(samples)) if i not in dense]
    model.fit(source.subset(rest))
    pred = model.predict([samples[i] for i in dense])
    assert pred.shape == (len(dense),) and np.isfinite(pred).all()
    seen = model.predict([samples[i] for i in rest])
    y = np.log([samples[i].runtimes[0] for i in rest])
    assert np.std(seen) > 0 and np.corrcoef(seen, y)[0, 1] > 0.5     # it learnt its training tasks


# ---------------------------------------------------------------- benchmarks.networks
def _row(model, held, tau, top5, per_task, seed=0, objective="pairwise-hinge"):
    return {"axis": "kind", "held": held, "model": model, "shipped": False, "seed": seed, "tasks": len(per_task),
            "kendall_tau": tau, "top1_slowdown": 0.1, "top5_slowdown": top5, "top5_recall": 0.5,
            "objective": objective,
            "per_task": {t: {"kendall_tau": a, "top5_slowdown": b} for t, (a, b) in per_task.items()}}


def test_kind_summary_means_and_worsts_over_kinds_and_tasks():
    from benchmarks.networks import kind_summary, report_section

    rows = [_row("gcn", "conv2d", 0.6, 0.02, {"c1": (0.7, 0.0), "c2": (0.5, 0.04)}),
            _row("gcn", "dense", 0.2, 0.30, {"d1": (0.2, 0.30)}),
            _row("gcn", "pool", None, None, {}),                                   # no value: not counted
            _row("knob-xgb-reg", "conv2d", 0.1, 0.50, {"c1": (0.3, 0.2), "c2": (-0.1, 0.8)}, objective="reg:squarederror"),
            _row("knob-xgb-reg", "dense", 0.3, 0.10, {"d1": (0.3, 0.1)}, seed=0, objective="reg:squarederror"),
            _row("knob-xgb-reg", "dense", 0.5, 0.30, {"d1": (0.5, 0.3)}, seed=1, objective="reg:squarederror"),
            {**_row("gcn", "dense", 0.9, 0.0, {"d1": (0.9, 0.0)}), "axis": "network"}]  # another axis: ignored
    res = {"rows": rows, "ceilings": {"kind:conv2d": {"tau": 0.9}, "kind:dense": {"tau": 0.7}, "kind:pool": {"tau": None}},
           "ceiling_worst_task": {"kind:conv2d": 0.8, "kind:dense": 0.6, "kind:pool": None},
           "dataset": "d", "protocol": {"seeds": [0, 1]}}
    out = {r["model"]: r for r in kind_summary(res)}
    assert list(out) == ["noise ceiling", "gcn", "knob-xgb-reg"]
    assert out["noise ceiling"]["mean_tau"] == pytest.approx(0.8) and out["noise ceiling"]["worst_tau"] == 0.7
    assert out["noise ceiling"]["worst_task_tau"] == 0.6 and out["noise ceiling"]["kinds"] == 2
    g = out["gcn"]
    assert g["kinds"] == 2 and g["mean_tau"] == pytest.approx(0.4) and g["worst_tau"] == 0.2
    assert g["mean_top5"] == pytest.approx(0.16) and g["worst_top5"] == 0.30
    assert g["worst_task_tau"] == 0.2 and g["worst_task_top5"] == 0.30
    k = out["knob-xgb-reg"]   # dense: mean over the two seeds (τ 0.4, top-5 20%)
    assert k["mean_tau"] == pytest.approx(0.25) and k["worst_tau"] == pytest.approx(0.1)
    assert k["mean_top5"] == pytest.approx(0.35) and k["worst_top5"] == pytest.approx(0.5)
    assert k["worst_task_tau"] == pytest.approx(-0.1) and k["worst_task_top5"] == pytest.approx(0.8)
    assert k["objective"] == "reg:squarederror"
    text = "\n".join(report_section(res))
    assert "| gcn | pairwise-hinge | 2 | 0.400 | 0.200 | 0.200 | 16.0% | 30.0% | 30.0% |" in text
    assert "| knob-xgb-reg | reg:squarederror | 2 | 0.250 | 0.100 | -0.100 | 35.0% | 50.0% | 80.0% |" in text
    assert "| noise ceiling | pass 1 vs pass 2 | 2 | 0.800 | 0.700 | 0.600 | – | – | – |" in text


def test_transfer_models_run_on_the_kind_axis_with_their_own_objective():
    from benchmarks import networks as bench
    from benchmarks.transfer.specs import MODEL_SPECS

    ap = argparse.ArgumentParser()
    bench.add_arguments(ap)
    ap.add_argument("--runs", default="runs")
    args = ap.parse_args(["--networks-models", "gcn", "xgb", "--held-networks", "bert", "--held-kinds", "dense",
                          "--combined-models", "--networks-seeds", "0", "--kind-models", *bench.KIND_MODELS])
    planned = bench.jobs(args, {"tasks": []})
    assert [(j["axis"], j["model"]) for j in planned] == (
        [("network", "gcn"), ("network", "xgb"), ("kind", "gcn"), ("kind", "xgb")]
        + [("kind", m) for m in bench.KIND_MODELS])
    argv = {j["model"]: j["argv"] for j in planned if j["axis"] == "kind"}
    # the runs before named models keep their command lines (their finished runs are reused)
    assert argv["gcn"][:2] == ["--model", "gcn"] and "--features" not in argv["gcn"]
    assert argv["xgb"][-2:] == ["--loss", "pairwise-hinge"] and "--xgb-objective" not in argv["xgb"]
    lane = argv["gcn-inv-arf-noext-lane"]
    assert lane[:2] == ["--model", "gcn-inv"] and lane[lane.index("--features") + 1] == \
        MODEL_SPECS["gcn-inv-arf-noext-lane"][-1] == "invariant,+acc_reg_fill,+acc_lane_share,-loop_extent"
    assert bench.objective_of(argv["xgb"]) == "rank:pairwise"
    assert bench.objective_of(argv["knob-xgb-reg"]) == "reg:squarederror"
    assert bench.objective_of(argv["itervar-xgb-rank"]) == "rank:pairwise"
    assert bench.objective_of(lane) == "pairwise-hinge"
    assert "--split" in argv["knob-xgb-reg"] and argv["knob-xgb-reg"][argv["knob-xgb-reg"].index("--model") + 1] == "knob-xgb"
    with pytest.raises(SystemExit):
        ap.parse_args(["--kind-models", "nope"])
    assert ap.parse_args(["--kind-models"]).kind_models == [] == ap.parse_args([]).kind_models


def test_benchmarks_all_runs_the_transfer_models_on_the_kind_axis():
    from benchmarks.all import build_parser
    from benchmarks.networks import KIND_MODELS

    assert build_parser().parse_args([]).kind_models == KIND_MODELS


def test_autotvm_logs_and_metaschedule_databases_load_together(tmp_path):
    from datasets import load_collection

    data = [str(ROOT / "tests" / "data" / "autotvm_v02.jsonl"), str(MS_SMALL)]
    c = load_collection(data, progress=False, cache=str(tmp_path))
    widths = {(s.meta.format or "autotvm"): s.vectors["knob"].shape[1] for s in c.samples}
    assert len(c.samples) == 6 + 72 and widths["metaschedule"] == WIDTH != widths["autotvm"]
    assert len(list(tmp_path.glob("logs-*.npz"))) == 2          # each kind cached on its own
    again = load_collection(data, progress=False, cache=str(tmp_path))
    assert [s.name for s in again.samples] == [s.name for s in c.samples] and again.read == c.read
