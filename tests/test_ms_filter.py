"""Two-stage scoring in GNNCostModel (simulator.metaschedule.prefilter): trace decisions → features on
a real MetaSchedule design space, warm-up, the ordering contract, and the option off
giving exactly the GNN's scores."""
import math
import os

import numpy as np
import pytest

pytest.importorskip("tvm")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRETRAINED = os.path.join(ROOT, "datasets", "networks_rocketlake", "pretrained", "gcn.pt")
N = 64  # the tiny matmul's extent


@pytest.fixture(scope="module")
def space():
    """A 64³ matmul's llvm design space, its TuneContext and 224 candidates."""
    import torch

    import tvm
    from extract.metaschedule import candidates as msc

    torch.set_num_threads(1)
    ctx = msc.tune_context(tvm.IRModule({"main": msc.WORKLOADS["matmul_512"](N, N, N)}), msc.llvm_target(1))
    return ctx, msc.sample_candidates(ctx, 224, seed=5)


@pytest.fixture(scope="module")
def model():
    from simulator.models.costmodel import load_trained

    if not os.path.exists(PRETRAINED):
        pytest.skip("no pretrained checkpoint")
    return load_trained(PRETRAINED)[0]


def measure_candidates(schedules):
    from simulator.metaschedule.cost_model import measure_candidate

    return [measure_candidate(s) for s in schedules]


def test_trace_features_read_the_sampled_decisions(space):
    from simulator.metaschedule.prefilter import trace_features

    ctx, schedules = space
    spaces = len(ctx.generate_design_space())
    by_sketch = {}
    for sch in schedules:
        sketch, x = trace_features(sch)
        assert x.dtype == np.float64 and np.isfinite(x).all()
        by_sketch.setdefault(sketch, []).append((sch, x))
        # the perfect tiles of i, j, k multiply to 64: their log2 factors sum to 6
        tiles = [inst for inst in sch.trace.insts if inst.kind.name == "SamplePerfectTile"]
        assert len(tiles) == 3
        lengths = [len(sch.trace.decisions[t]) for t in tiles]
        offsets = np.cumsum([0] + lengths)
        for lo, hi in zip(offsets[:-1], offsets[1:]):
            assert x[lo:hi].sum() == pytest.approx(math.log2(N))
        cats = [inst for inst in sch.trace.insts if inst.kind.name == "SampleCategorical"]
        for inst, value in zip(cats, x[offsets[-1]:]):
            assert value == int(sch.trace.decisions[inst])
            assert 0 <= value < len(inst.attrs[0])
        # a MeasureCandidate and a Trace give the same
        again_sketch, again = trace_features(measure_candidates([sch])[0])
        assert again_sketch == sketch and np.array_equal(again, x)
        assert np.array_equal(trace_features(sch.trace)[1], x)
    assert 1 <= len(by_sketch) <= spaces
    for sketch, items in by_sketch.items():
        assert len({len(x) for _, x in items}) == 1           # one length per sketch
        assert sketch[0] == "GetSBlock" and "SamplePerfectTile" in sketch
    # different decisions, different vectors
    assert len({x.tobytes() for _, x in sum(by_sketch.values(), [])}) > len(schedules) // 2


@pytest.mark.parametrize("kind,fit", [("ridge", 0.99), ("xgb", 0.9)])
def test_decision_filter_learns_a_function_of_the_decisions_and_warms_up(kind, fit):
    from simulator.metaschedule.prefilter import DecisionFilter

    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, size=(400, 5)).astype(float)
    y = -(x[:, 0] - 2.0) ** 2 + x[:, 1] * x[:, 2] - 0.5 * x[:, 3]
    f = DecisionFilter(warmup=100, model=kind)
    sk = [("A", 5)] * 400
    f.add("task", sk[:99], list(x[:99]), y[:99])
    assert np.isnan(f.score("task", sk[300:], list(x[300:]))).all()      # still warming up
    f.add("task", sk[99:300], list(x[99:300]), y[99:300])
    assert not f.ready("other task", ("A", 5)) and not f.ready("task", ("B", 5))
    s = f.score("task", sk[300:], list(x[300:]))
    assert np.isfinite(s).all()
    assert np.corrcoef(s, y[300:])[0, 1] > fit                            # not linear in x: fitted
    assert f.fits == 1
    f.score("task", sk[300:], list(x[300:]))
    assert f.fits == 1                                                    # nothing new: no refit
    assert np.isnan(f.score("task", [("B", 5)], [x[0]])).all()           # another sketch: not ready
    assert np.isnan(f.score("task", [()], [np.zeros(0)])).all()          # no decisions: never
    with pytest.raises(ValueError):
        DecisionFilter(model="svm")


def test_filter_order_and_merged_scores():
    from simulator.metaschedule.prefilter import filter_order, merge_scores

    stage1 = np.array([0.5, np.nan, 3.0, 1.0, 2.0, np.nan, -1.0, 0.0])
    full = filter_order(stage1, keep=0.25, floor=1)
    # not ready: always scored; of the 6 ready, ceil(1.5) = 2 best
    assert full.tolist() == [False, True, True, False, True, True, False, False]
    assert filter_order(stage1, keep=0.25, floor=4).sum() == 2 + 4
    assert filter_order(stage1, keep=1.0, floor=1).all()
    gnn = np.array([-3.0, 7.0, 2.0, -1.0])
    out = merge_scores(gnn, full, stage1)
    assert out.dtype == np.float64 and len(out) == 8
    assert out[full].tolist() == gnn.tolist()
    assert out[~full].max() < gnn.min()
    rest = np.flatnonzero(~full)
    assert list(rest[np.argsort(-out[rest])]) == [3, 0, 7, 6]           # stage-1 order


def test_option_off_gives_exactly_the_gnn_scores(space, model):
    from extract.tir.featurize import featurize_schedules
    from simulator.metaschedule.cost_model import GNNCostModel, task_group

    ctx, schedules = space
    candidates = measure_candidates(schedules[:48])
    expect = -np.asarray(model.predict(featurize_schedules(candidates, ctx.target, task_group(ctx, {}))),
                         dtype=np.float64).reshape(-1)
    off = GNNCostModel(model).predict(ctx, candidates)
    assert off.dtype == np.float64 and np.array_equal(off, expect)
    warming = GNNCostModel(model, filter_keep=0.25, filter_warmup=1000)
    assert np.array_equal(warming.predict(ctx, candidates), expect)     # warm-up: everything to the GNN
    assert warming.stats.filtered == 0


def test_copies_of_a_candidate_are_featurized_and_scored_once(space, model, monkeypatch):
    import tvm
    import tvm_ffi
    from simulator.metaschedule.cost_model import GNNCostModel

    ctx, schedules = space
    copy = tvm.s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(schedules[2].mod)))  # the same program, anew
    assert not copy.mod.same_as(schedules[2].mod) and tvm_ffi.structural_equal(copy.mod, schedules[2].mod)
    distinct = measure_candidates(schedules[:6])
    candidates = distinct + measure_candidates([schedules[0], copy, schedules[4]]) + distinct[:1]
    alone = GNNCostModel(model).predict(ctx, distinct)
    cm = GNNCostModel(model)
    sizes, predict = [], model.predict
    monkeypatch.setattr(model, "predict", lambda samples: sizes.append(len(samples)) or predict(samples))
    out = cm.predict(ctx, candidates)
    assert sizes == [6] and cm.stats.duplicates == 4 and cm.stats.scored == 10
    assert np.array_equal(out, alone[[0, 1, 2, 3, 4, 5, 0, 2, 4, 0]])


def test_two_stage_ordering_contract(space, model):
    from simulator.metaschedule import prefilter as ms_filter
    from simulator.metaschedule.cost_model import GNNCostModel, task_group

    ctx, schedules = space
    candidates = measure_candidates(schedules)
    off = GNNCostModel(model)
    cm = GNNCostModel(model, filter_keep=0.25, filter_min=8, filter_warmup=40)
    warm, test = candidates[:160], candidates[160:]
    assert np.array_equal(cm.predict(ctx, warm), off.predict(ctx, warm))
    assert cm.stats.filtered == 0
    sketches = {ms_filter.trace_features(c)[0] for c in test}
    group = task_group(ctx, {})
    assert all(cm.filter.ready(group, s) for s in sketches)

    seen = {}
    score = cm.filter.score

    def spy(*args):
        seen["stage1"] = score(*args)
        return seen["stage1"]

    cm.filter.score = spy
    out = cm.predict(ctx, test)
    reference = off.predict(ctx, test)
    stage1 = seen["stage1"]
    assert out.dtype == np.float64 and out.shape == (len(test),)
    assert np.isfinite(stage1).all()
    kept = np.isin(np.arange(len(test)), np.flatnonzero(np.isclose(out, reference, rtol=1e-5, atol=1e-6)))
    assert kept.sum() == max(math.ceil(0.25 * len(test)), 8) == len(test) - cm.stats.filtered
    # the kept ones: the GNN's scores, and the best by stage 1
    assert np.allclose(out[kept], reference[kept], rtol=1e-5, atol=1e-6)
    assert stage1[kept].min() >= stage1[~kept].max()
    # the others: below every GNN-scored one, in stage-1 order
    assert out[~kept].max() < out[kept].min()
    rest = np.flatnonzero(~kept)
    assert np.array_equal(rest[np.argsort(-out[rest], kind="stable")],
                          rest[np.argsort(-stage1[rest], kind="stable")])
    assert cm.stats.filter_s > 0 and cm.stats.scored == len(warm) + len(test)
    # stage 1 agrees with the GNN better than chance (the GNN's own scores, distilled)
    from scipy.stats import kendalltau
    assert kendalltau(stage1, reference)[0] > 0.3


def test_tune_flag_filter_keep_is_a_share():
    from simulator.metaschedule.tune import build_parser

    parser = build_parser()
    base = ["matmul", "--trials", "4", "--work-dir", "/tmp/x"]
    assert parser.parse_args(base).filter_keep is None
    assert parser.parse_args(base + ["--filter-keep", "0.25"]).filter_keep == 0.25
    for bad in ("0", "1.5", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(base + ["--filter-keep", bad])


def test_benchmark_rates_two_stage_scoring(tmp_path):
    import json

    from benchmarks.metaschedule.features import main

    if not os.path.exists(PRETRAINED):
        pytest.skip("no pretrained checkpoint")
    out = tmp_path / "ms_filter.json"
    assert main(["--workloads", "--cuda", "--workers", "1", "--es-trials", "0", "--filter-workloads", "matmul_512",
                 "--filter-count", "96", "--filter-keep", "0.25", "--filter-warmup", "32", "--filter-es-trials", "16",
                 "--es-population", "48", "--out", str(out)]) == 0
    section = json.loads(out.read_text())["two_stage"]
    (rates,) = section["rates"]
    for side in ("gnn", "two_stage", "xgb"):
        assert rates[side]["per_s"] > 0 and rates[side]["cpu_ms"] > 0
    assert rates["two_stage"]["filtered"] == 96 - 64           # the floor of 64 kept, the rest filtered out
    q = rates["quality"]
    assert q["candidates"] == 96 and q["ready"] == 96 and q["kept"] == 64 and 0 <= q["recall"] <= 1
    assert -1 <= q["tau"] <= 1
    (row,) = section["search"]
    for side in ("gnn", "two_stage", "xgb"):
        assert row[side]["scored"] > 0 and 0 < row[side]["cost_model_s"] <= row[side]["search_s"]
    assert row["quality"]["calls_rated"] >= 1 and 0 <= row["quality"]["recall_mean"] <= 1


def test_tune_table_reports_the_filter():
    from simulator.metaschedule.cost_model import CostModelStats
    from simulator.metaschedule.tune import TuneResult, table

    stats = CostModelStats(predict_s=2.0, update_s=1.0, scored=1000, filtered=700, filter_s=0.25)
    task = {"name": "t", "key": "k", "weight": 1, "flops": 1e9, "trials": 8, "errors": 0, "best_s": 1e-3}
    text = table(TuneResult([task], [], 30.0, stats.as_dict()), "gnn")
    assert "first-stage filter: 700 of 1000 kept from the GNN, 0.2 s in stage 1" in text
    assert "first-stage filter" not in table(TuneResult([task], [], 30.0, CostModelStats(scored=5).as_dict()), "gnn")
