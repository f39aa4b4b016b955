"""AutoTVM's knob and itervar features, the knob-xgb / itervar-xgb baselines, and
the transfer-matrix benchmark's bookkeeping."""
import json
import math
import os

import numpy as np
import pytest

from extract.sample import SampleMeta
from simulator.registry import SimulatorError


# ---------------------------------------------------------------- knob features
def test_knob_vector_fills_the_outer_factor_and_lines_up_across_workloads():
    from extract.autotvm.knob_features import knob_names, knob_vector, knob_vector_of_meta
    from extract.tir.workloads import parse_workload

    template = "conv2d_NCHWc.x86"
    c2, c3 = parse_workload("C2"), parse_workload("C3")  # 3×3 (has unroll_kw) and 1×1 (has not)
    names = knob_names(template, c2)
    assert names == knob_names(template, c3)
    values = {"tile_ic": [-1, 8], "tile_oc": [-1, 16], "tile_ow": [-1, 7], "unroll_kw": True,
              "tile_oh": 2, "unroll_ow": False}
    v = dict(zip(names, knob_vector(template, c2, values)))
    assert v["tile_ic[0]"] == pytest.approx(math.log2(64 / 8)) and v["tile_ic[1]"] == pytest.approx(3.0)
    assert v["tile_oc[0]"] == pytest.approx(2.0) and v["tile_oc[1]"] == pytest.approx(4.0)
    assert v["tile_ow[0]"] == pytest.approx(3.0) and v["tile_ow[1]"] == pytest.approx(math.log2(7))
    assert v["unroll_kw"] == 1.0 and v["unroll_ow"] == 0.0 and v["tile_oh"] == pytest.approx(math.log2(3))
    assert v["workload_in_channels"] == pytest.approx(math.log2(65))
    assert v["workload_kernel_w"] == pytest.approx(2.0)
    assert v["workload_flops"] == pytest.approx(math.log2(c2.flops))
    del values["unroll_kw"]
    w = dict(zip(names, knob_vector(template, c3, values)))
    assert w["unroll_kw"] == 0.0 and w["workload_kernel_w"] == pytest.approx(1.0)
    meta = {"template": template, "workload": c2.key, "config": dict(values, unroll_kw=True)}
    assert np.array_equal(knob_vector_of_meta(SampleMeta.from_dict(meta)), knob_vector(template, c2, meta["config"]))
    assert knob_vector_of_meta(SampleMeta(workload=c2.key)) is None


# ---------------------------------------------------------------- itervar features
def _lowered_add():
    """C[i, j] = A[i, j] + B[j], i < 4, j < 8, lowered for features."""
    from tvm import te

    from extract.tir.graph import lower_for_features
    a = te.placeholder((4, 8), name="A")
    b = te.placeholder((8,), name="B")
    c = te.compute((4, 8), lambda i, j: a[i, j] + b[j], name="C")
    import tvm
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    return lower_for_features(mod)["main"]


def test_itervar_rows_by_hand():
    from extract.autotvm.itervar import ANNOTATIONS, LOOP_FIELDS, TOUCH_FIELDS, itervar_rows

    rows = itervar_rows(_lowered_add())
    assert len(rows) == 2  # i, j
    lg = lambda x: math.log2(1 + x)  # noqa: E731
    n_loop = len(LOOP_FIELDS)
    i_row, j_row = rows
    serial = [1.0 if a == "serial" else 0.0 for a in ANNOTATIONS]
    assert i_row[:4] == pytest.approx([lg(4), 1, lg(4), lg(32)])
    assert j_row[:4] == pytest.approx([lg(8), 2, lg(32), lg(8)])
    assert i_row[4:4 + len(ANNOTATIONS)] == serial
    assert j_row[n_loop - 3:n_loop] == pytest.approx([lg(1), 0.0, 0.0])  # one float add, in j's body
    # accesses sorted by name: A_0, B_0, C_0; (stride, mod, count, reuse, thread_count, thread_reuse)
    touch = lambda row: np.array(row[n_loop:]).reshape(-1, len(TOUCH_FIELDS))  # noqa: E731
    a_i, b_i, c_i = touch(i_row)
    assert a_i[:4] == pytest.approx([lg(8), -1, lg(32), lg(1)])
    assert b_i[:4] == pytest.approx([0.0, -1, lg(8), lg(4)])   # B does not move with i: reused 4×
    assert c_i[:4] == pytest.approx([lg(8), -1, lg(32), lg(1)])
    a_j, b_j, c_j = touch(j_row)
    assert a_j[:4] == pytest.approx([lg(1), -1, lg(8), lg(1)]) and b_j[:4] == pytest.approx(a_j[:4])


def test_itervar_vector_is_fixed_width_and_padded():
    from extract.autotvm.itervar import ITERVAR_NAMES, ROW, WIDTH, itervar_rows, itervar_vector

    func = _lowered_add()
    v = itervar_vector(func)
    rows = itervar_rows(func)
    assert v.shape == (WIDTH,) == (len(ITERVAR_NAMES),)
    assert np.allclose(v[:len(rows[0])], rows[0]) and np.allclose(v[ROW:ROW + len(rows[1])], rows[1])
    assert not v[2 * ROW:].any()  # padding, and no unroll pragma


def test_extraction_stores_knob_and_itervar_vectors():
    from extract.autotvm.itervar import WIDTH
    from extract.autotvm.knob_features import knob_names, knob_vector
    from extract.autotvm.templates import get_template
    from extract.schedules import config_sample
    from extract.tir.workloads import parse_workload

    template, wl = get_template("conv2d_NCHWc.x86"), parse_workload("C11")
    config = template.space(wl).get(3)
    sample = config_sample(template, wl, config, per_store=False).sample
    assert sample.vectors["itervar"].shape == (1, WIDTH)
    assert sample.vectors["knob"].shape == (1, len(knob_names(template.name, wl)))
    assert np.array_equal(sample.vectors["knob"][0], knob_vector(template.name, wl, config.values))
    assert sample.vectors["itervar"].any()


# ---------------------------------------------------------------- the baselines
def _with_vectors(samples):
    """Copies of synthetic samples with made-up knob/itervar vectors that track the runtime."""
    import copy
    rng = np.random.default_rng(0)
    out = []
    for s in samples:
        s = copy.copy(s)
        y = np.log(s.runtimes[0])
        s.vectors = dict(s.vectors, knob=np.array([[y + 0.1 * rng.normal(), rng.normal(), 1.0]], np.float32),
                         itervar=np.array([[rng.normal(), y, 2.0, 0.0]], np.float32))
        out.append(s)
    return out


@pytest.mark.parametrize("name", ["knob-xgb", "itervar-xgb"])
@pytest.mark.parametrize("objective", ["reg", "rank"])
def test_autotvm_baselines_fit_predict_save_load(synthetic_samples, tmp_path, name, objective):
    from simulator.models.costmodel import CostModel, build_cost_model, model_names
    from simulator.data.in_memory import SampleSource
    from simulator.train import build_parser, config_from_flags, validate

    assert name in model_names()
    samples = _with_vectors(synthetic_samples[:96])
    config = validate(config_from_flags(dict(vars(build_parser().parse_args([])), model=name,
                                             xgb_objective=objective, xgb_rounds=30)))
    source = SampleSource(samples)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, 0))
    model.fit(source.subset(range(64)), source.subset(range(64, 96)))
    pred = model.predict(samples)
    assert pred.shape == (96,) and np.isfinite(pred).all()
    metrics = source.evaluate(model, 256)
    assert metrics["kendall_tau"]["mean"] > 0.5  # the vectors carry the runtime
    model.save(str(tmp_path / "m.pt"))
    assert np.allclose(CostModel.load(str(tmp_path / "m.pt")).predict(samples), pred)


def test_autotvm_baseline_without_its_vector_says_so(synthetic_samples):
    from simulator.models.costmodel import build_cost_model
    from simulator.data.in_memory import SampleSource
    from simulator.train import build_parser, config_from_flags, validate

    config = validate(config_from_flags(dict(vars(build_parser().parse_args([])), model="knob-xgb")))
    with pytest.raises(SimulatorError, match=r"vectors\['knob'\]"):
        build_cost_model(config, SampleSource(synthetic_samples[:8]).info)


# ---------------------------------------------------------------- the benchmark
def test_training_sets_are_every_single_workload_and_seeded_groups():
    from benchmarks.transfer.matrix import training_sets

    ws = [f"C{i}" for i in range(1, 13)]
    sets = training_sets(ws, [1, 2, 4], 3, 0)
    assert sets[:12] == [(w,) for w in ws]
    assert [len(s) for s in sets[12:]] == [2, 2, 2, 4, 4, 4]
    assert len(set(sets)) == len(sets)
    assert sets == training_sets(list(reversed(ws)), [1, 2, 4], 3, 0)
    assert sets != training_sets(ws, [1, 2, 4], 3, 1)


def test_training_sets_of_eleven_hold_out_each_workload_once():
    """A size with no more sets than workloads gives every set: 11 of 12 is leave-one-out,
    whatever --choices and the seed; a size leaving nothing to test on is refused."""
    from benchmarks.transfer.matrix import training_sets

    ws = [f"C{i}" for i in range(1, 13)]
    sets = training_sets(ws, [1, 11], 3, 0)
    held_out = [next(w for w in ws if w not in s) for s in sets[12:]]
    assert sorted(held_out) == sorted(ws) and all(len(s) == 11 for s in sets[12:])
    assert sets == training_sets(ws, [1, 11], 5, 7)
    with pytest.raises(SystemExit, match="--sizes 12: .* leaves none to test on"):
        training_sets(ws, [12], 3, 0)


def test_default_sizes_fit_the_data():
    """Without --sizes: 1, 2, 4 and leave-one-out, only those that leave a workload to test on."""
    from benchmarks.transfer.matrix import default_sizes

    assert default_sizes(12) == [1, 2, 4, 11]
    assert default_sizes(3) == [1, 2]
    assert default_sizes(2) == [1]


def test_sizes_models_limit_the_larger_training_sets(monkeypatch):
    """--sizes-models: every model on each single workload, only the named ones (and the
    members of a named ensemble) on the sets of two and four; a name not in --models is refused."""
    from benchmarks.transfer import matrix as transfer, specs

    ws = [f"C{i}" for i in range(1, 13)]
    sets = transfer.training_sets(ws, [1, 2, 4], 3, 0)
    monkeypatch.setitem(transfer.ENSEMBLES, "ens-test", specs.Ensemble(("xgb", "curve-mlp")))
    models = ["gcn-inv", "knob-xgb-reg", "ens-test"]

    def count(sizes_models):
        jobs = transfer.make_jobs(models, sets, ws, 0, 2, ["shipped"], "/tmp/none", "k", {}, sizes_models)
        return {spec: sorted({len(j["train"]) for j in jobs if j["spec"] == spec})
                for spec in dict.fromkeys(j["spec"] for j in jobs)}
    assert count(None) == {m: [1, 2, 4] for m in ("gcn-inv", "knob-xgb-reg", "curve-mlp", "xgb")}
    assert count(["knob-xgb-reg"]) == {"gcn-inv": [1], "knob-xgb-reg": [1, 2, 4], "curve-mlp": [1], "xgb": [1]}
    assert count(["ens-test"]) == {"gcn-inv": [1], "knob-xgb-reg": [1], "curve-mlp": [1, 2, 4], "xgb": [1, 2, 4]}
    args = transfer.build_parser().parse_args(["--models", "xgb", "--sizes-models", "gcn-inv"])
    with pytest.raises(SystemExit, match="--sizes-models gcn-inv: not in --models"):
        transfer.run(args, ["nowhere"], "/tmp/none", "/tmp/none", 1)
    args = transfer.build_parser().parse_args(["--models", "ens-test", "--sizes-models", "xgb"])  # a member
    with pytest.raises(Exception) as error:
        transfer.run(args, ["nowhere"], "/tmp/none", "/tmp/none", 1)
    assert "--sizes-models" not in str(error.value)  # got past the check, to the missing data


def test_summary_and_matrices_from_results():
    from benchmarks.transfer.matrix import matrices, summarize

    def pairs(train, taus, top5s):
        ws = [w for w in ("C1", "C2", "C3") if w not in train]
        return {w: {"kendall_tau": t, "top5_slowdown": s, "top1_slowdown": 2 * s} for w, t, s in zip(ws, taus, top5s)}
    results = [{"spec": "m", "train": ["C1"], "seconds": 1.0, "pairs": pairs(["C1"], [0.5, 0.3], [0.0, 0.3])},
               {"spec": "m", "train": ["C2"], "seconds": 2.0, "pairs": pairs(["C2"], [0.7, 0.1], [0.1, 0.0])},
               {"spec": "m", "train": ["C1", "C2"], "seconds": 3.0, "pairs": pairs(["C1", "C2"], [0.9], [0.02])}]
    s = summarize(results)["m"]
    assert s["1"]["pairs"] == 4 and s["1"]["trainings"] == 2
    assert s["1"]["mean_tau"] == pytest.approx(0.4) and s["1"]["worst_tau"] == pytest.approx(0.1)
    assert s["1"]["worst_top5"] == pytest.approx(0.3) and s["1"]["pairs_top5_over_25"] == 1
    assert s["2"]["mean_tau"] == pytest.approx(0.9) and s["1"]["seconds"] == 3.0
    m = matrices(results, ["C1", "C2", "C3"], "kendall_tau")["m"]
    assert m == [[None, 0.5, 0.3], [0.7, None, 0.1], [None, None, None]]


def test_noise_ceiling_scores_pass_one_against_the_quiet_pass():
    """Pass 1's own ranking against the quiet pass: perfect where the quiet pass agrees, a
    measured top-5 slowdown where its best config is one pass 1 ranks last; too few
    re-measured configs or no quiet pass: no ceiling, never a made-up one."""
    from types import SimpleNamespace

    from benchmarks.transfer.matrix import noise_ceiling
    from benchmarks.transfer.report import summary_table

    def sample(group, index, runtime):
        return SimpleNamespace(group=group, runtimes=[runtime], meta=SampleMeta(index=index))
    pass1 = [sample(g, i, 1.0 + i) for g in ("C1", "C2") for i in range(8)]
    quiet = {"C1": {i: 2.0 + i for i in range(8)},                 # same order: τ 1, top-5 0
             "C2": {i: (0.5 if i == 7 else 1.0 + i) for i in range(8)}}   # C2's best is pass 1's worst
    c = noise_ceiling(pass1, quiet)
    assert c["workloads"]["C1"]["quiet_kendall_tau"] == pytest.approx(1.0)
    assert c["workloads"]["C1"]["quiet_top5_slowdown"] == 0.0
    assert c["workloads"]["C2"]["quiet_top5_slowdown"] == pytest.approx(1.0 / 0.5 - 1)
    assert c["quiet_worst_top5"] == pytest.approx(1.0) and c["quiet_mean_top5"] == pytest.approx(0.5)
    assert noise_ceiling(pass1, {}) is None
    assert noise_ceiling(pass1, {"C1": {0: 1.0, 1: 2.0}}) is None   # < 3 configs: no τ
    one = {"1": {"mean_tau": 0.5, "worst_tau": 0.1, "mean_top5": 0.3, "median_top5": 0.2, "worst_top5": 1.0,
                 "pairs_top5_over_25": 3, "pairs": 4, "quiet_mean_tau": 0.6, "quiet_mean_top5": 0.1,
                 "quiet_worst_top5": 0.4}}
    table = summary_table({"gcn": one}, c)
    assert "10.0% / 40%" in table and "noise ceiling" in table and "50.0% / 100%" in table
    assert "noise ceiling" not in summary_table({"gcn": one})


def test_sizes_table_gives_each_size_its_pairs_figures():
    from benchmarks.transfer.report import sizes_table

    def row(tau, top5, worst, over, pairs):
        return {"mean_tau": tau, "mean_top5": top5, "median_top5": top5 / 2, "worst_top5": worst,
                "pairs_top5_over_25": over, "pairs": pairs}
    summary = {"gcn": {"1": row(0.5, 0.3, 1.0, 60, 132), "11": row(0.7, 0.1, 0.4, 2, 12)},
               "mlp": {"1": row(0.4, 0.5, 2.0, 90, 132)}}
    table = sizes_table(summary)
    assert "11 workloads: τ / top-5 mean" in table.splitlines()[0]
    assert "| `gcn` | 0.500 / 30.0% / 15.0% / 100% / 60 of 132 | 0.700 / 10.0% / 5.0% / 40% / 2 of 12 |" in table
    assert "`mlp`" not in table  # one workload only: in summary_table
    assert sizes_table({"mlp": summary["mlp"]}) == ""


def test_goal_rows_compare_each_gnn_with_the_best_baseline():
    from benchmarks.transfer.report import goal_lines, goal_rows

    def one(tau, top5, worst):
        return {"1": {"mean_tau": tau, "mean_top5": top5, "worst_top5": worst}}
    summary = {"knob-xgb-rank": one(0.40, 0.60, 2.0), "itervar-xgb-reg": one(0.45, 0.30, 1.0),
               "gcn": one(0.50, 0.40, 0.9), "gcn-inv": one(0.60, 0.02, 0.2), "xgb": one(0.9, 0.0, 0.0)}
    rows = {r[0]: r[1:] for r in goal_rows(summary)}
    assert set(rows) == {"`gcn`", "`gcn-inv`"}  # only the GNNs; xgb is neither a GNN nor the bar
    assert rows["`gcn`"][0].startswith("**yes**") and "`itervar-xgb-reg`" in rows["`gcn`"][0]
    assert rows["`gcn`"][1].startswith("no") and rows["`gcn`"][2].startswith("no")
    assert rows["`gcn`"][3].startswith("no") and all(c.startswith("**yes**") for c in rows["`gcn-inv`"][:4])
    assert goal_rows({"gcn": one(0.5, 0.1, 0.2)}) == [] and goal_lines({"xgb": one(0.5, 0.1, 0.2)}) == []
    assert rows["`gcn`"][4] == "–"  # trained on one workload only
    summary["gcn"]["11"] = {"mean_tau": 0.7, "mean_top5": 0.1, "worst_top5": 0.36}
    summary["gcn"]["4"] = {"mean_tau": 0.6, "mean_top5": 0.1, "worst_top5": 0.1}
    assert goal_rows(summary)[0][5] == "no (36% on 11 workloads)"


def test_transfer_benchmark_end_to_end(dataset_path, tmp_path):
    """Two cheap models on the synthetic C1…C12, one-workload trainings: every pair scored,
    outputs written, a second run reuses every training."""
    from benchmarks.transfer import matrix as transfer

    argv = ["--data", dataset_path, "--models", "xgb", "curve-mlp", "--sizes", "1", "--epochs", "2",
            "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results"), "--quiet-log", ""]
    assert transfer.main(argv) == 0
    with open(tmp_path / "results" / "transfer.json", encoding="utf-8") as f:
        out = json.load(f)
    assert set(out["summary"]) == {"xgb", "curve-mlp"}
    assert out["summary"]["xgb"]["1"]["pairs"] == 12 * 11
    assert out["tau"]["xgb"][0][0] is None and out["tau"]["xgb"][0][1] is not None
    for png in ("transfer_tau.png", "transfer_top5.png"):
        assert os.path.getsize(tmp_path / "results" / png) > 1000
    stamp = os.path.getmtime(tmp_path / "runs" / "xgb" / "C1.json")
    assert transfer.main(argv) == 0
    assert os.path.getmtime(tmp_path / "runs" / "xgb" / "C1.json") == stamp


def test_ensemble_standardises_each_workload_and_averages(monkeypatch):
    """An ensemble's ranking is the mean of its members' per-workload standardised
    predictions: a member's scale or offset on one workload does not weigh more."""
    from types import SimpleNamespace

    from benchmarks.transfer import matrix as transfer, specs

    z = transfer.standardised(np.array([1.0, 2.0, 3.0, 10.0, 10.0, 5.0]), ["a", "a", "a", "b", "b", "c"])
    assert z[:3] == pytest.approx([-1.2247449, 0.0, 1.2247449]) and list(z[3:]) == [0.0, 0.0, 0.0]
    monkeypatch.setitem(transfer.ENSEMBLES, "ens-test", specs.Ensemble(("m1", "m2", "m3")))
    samples = [SimpleNamespace(name=f"{g}/{i}", group=g, runtimes=[t], meta=SampleMeta(index=i))
               for g in ("C1", "C2") for i, t in enumerate([1.0, 2.0, 3.0, 4.0])]
    good = {s.name: float(np.log(s.runtimes[0])) for s in samples if s.group == "C2"}
    # m1, m3 rank C2 right (offset, shrunk); m2 exactly backwards on a 1000x larger scale
    runs = [{"spec": "m1", "train": ["C1"], "seconds": 1.0, "predictions": {k: v + 50 for k, v in good.items()}},
            {"spec": "m2", "train": ["C1"], "seconds": 2.0, "predictions": {k: -1000 * v for k, v in good.items()}},
            {"spec": "m3", "train": ["C1"], "seconds": 3.0, "predictions": {k: 0.01 * v for k, v in good.items()}}]
    (ens,) = transfer.ensemble_results("ens-test", runs, samples, {})
    assert ens["spec"] == "ens-test" and ens["seconds"] == 6.0 and set(ens["pairs"]) == {"C2"}
    # two standardised votes against one: right (averaging raw predictions would follow m2)
    assert ens["pairs"]["C2"]["kendall_tau"] == pytest.approx(1.0) and ens["pairs"]["C2"]["top1_slowdown"] == 0.0
    runs.pop()  # a member missing on a training set: no ensemble result for it
    assert transfer.ensemble_results("ens-test", runs, samples, {}) == []


def test_pessimistic_ensemble_ranks_high_only_what_every_member_ranks_high(monkeypatch):
    """The pessimistic aggregation takes each config's slowest standardised prediction:
    a config one member puts first and the other last is not picked, unlike the mean;
    an unknown aggregation is refused."""
    from types import SimpleNamespace

    from benchmarks.transfer import matrix as transfer, specs

    samples = [SimpleNamespace(name=f"C2/{i}", group="C2", runtimes=[t], meta=SampleMeta(index=i))
               for i, t in enumerate([1.0, 2.0, 3.0, 4.0])]
    # config 3 (the slowest) is m1's first pick, m2's third; both agree on 0 < 1 < 2
    runs = [{"spec": m, "train": ["C1"], "seconds": 1.0,
             "predictions": {"C2/0": 1.0, "C2/1": 2.0, "C2/2": 3.0, "C2/3": last}}
            for m, last in (("m1", -9.0), ("m2", 2.5))]
    for aggregation, top1 in (("mean", 3.0), ("pessimistic", 0.0)):
        monkeypatch.setitem(transfer.ENSEMBLES, "ens-test", specs.Ensemble(("m1", "m2"), aggregation))
        (ens,) = transfer.ensemble_results("ens-test", runs, samples, {})
        assert ens["pairs"]["C2"]["top1_slowdown"] == pytest.approx(top1), aggregation
        assert ens["argv"] == [f"{aggregation} ensemble of m1, m2"]
    with pytest.raises(ValueError, match="unknown ensemble aggregation 'median'"):
        specs.Ensemble(("m1", "m2"), "median")
    assert all(e.aggregation in specs.AGGREGATIONS for e in transfer.ENSEMBLES.values())


def test_transfer_train_only_and_members_keep_predictions(dataset_path, tmp_path, monkeypatch):
    """--train-only restricts the one-workload trainings; an ensemble trains its members
    (their predictions kept in their run files) and reports only itself."""
    from benchmarks.transfer import matrix as transfer, specs

    monkeypatch.setitem(transfer.ENSEMBLES, "ens-xgb", specs.Ensemble(("xgb", "curve-mlp")))
    argv = ["--data", dataset_path, "--models", "ens-xgb", "--sizes", "1", "--epochs", "2", "--train-only", "C2",
            "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results"), "--quiet-log", ""]
    assert transfer.main(argv) == 0
    with open(tmp_path / "results" / "transfer.json", encoding="utf-8") as f:
        out = json.load(f)
    assert set(out["summary"]) == {"ens-xgb"} and out["summary"]["ens-xgb"]["1"]["pairs"] == 11
    assert sorted(n for n in os.listdir(tmp_path / "runs") if not n.startswith(".")) == ["curve-mlp", "xgb"]
    with open(tmp_path / "runs" / "xgb" / "C2.json", encoding="utf-8") as f:
        member = json.load(f)
    assert len(member["predictions"]) == 11 * 16  # the synthetic workloads have 16 configs each
    assert not any(name.startswith("C2/") for name in member["predictions"])


# ---------------------------------------------------------------- context features (tir_context)
def _x86_graph(workload: str, index: int):
    from extract.tir.hardware import hardware_of
    from extract.autotvm.templates import get_template
    from extract.tir.graph import lower_for_features, tir_to_graph
    from extract.tir.workloads import parse_workload

    template, wl = get_template("conv2d_NCHWc.x86"), parse_workload(workload)
    config = template.space(wl).get(index)
    func = lower_for_features(template.schedule(wl, config).mod)["main"]
    return config, tir_to_graph(func, hardware_of('{"kind": "llvm", "mcpu": "znver3"}'))


def test_context_columns_of_an_x86_config():
    from extract.tir.graph import COLUMN, TYPE_ID

    config, g = _x86_graph("C11", 7)
    f, types = g.node_features, g.node_types
    assert f[0, COLUMN["work_share"]] == pytest.approx(1.0)  # the root holds all the work
    assert ((f[:, COLUMN["work_share"]] >= 0) & (f[:, COLUMN["work_share"]] <= 1)).all()
    for name in ("fits_l1", "fits_l2", "hit_reg", "hit_l1", "hit_l2", "contiguous", "stride_lines"):
        assert ((f[:, COLUMN[name]] >= 0) & (f[:, COLUMN[name]] <= 1)).all(), name
    vectorized = types == TYPE_ID["For.vectorized"]
    oc_bn = config["tile_oc"][-1]
    if vectorized.any():  # oc_bn float32 lanes of a 256-bit Zen 3 vector
        assert f[vectorized, COLUMN["vector_fill"]] == pytest.approx(oc_bn * 32 / 256)
    stores = types == TYPE_ID["BufferStore"]
    assert f[stores, COLUMN["contiguous"]].any()
    gpu = [COLUMN[n] for n in ("threads_per_block", "shared_per_block", "occupancy", "launch_invalid",
                               "coalesced", "bank_conflict")]
    assert not f[:, gpu].any()  # CPU code has no GPU structure


def test_hardware_of_targets():
    from extract.tir.hardware import hardware_of

    zen3 = hardware_of('{"kind": "llvm", "mcpu": "znver3", "num-cores": 1}')
    assert (zen3.kind, zen3.l1_bytes, zen3.l2_bytes, zen3.vector_bits) == ("cpu", 32768, 524288, 256)
    assert hardware_of("llvm -mcpu=znver3 -num-cores=1") == zen3
    gpu = hardware_of({"kind": "cuda", "arch": "sm_86", "max_threads_per_block": 1024,
                       "max_shared_memory_per_block": 49152})
    assert gpu.is_gpu and gpu.max_shared_per_block == 49152 and gpu.max_threads_per_sm == 1536


def test_a_cpu_not_in_the_table_gets_llvm_s_simd_width(monkeypatch):
    """An unlisted CPU's vector width is LLVM's (a model trained on AVX-512 records must see
    an AVX-512 CPU's vector loops as full, not twice full); its caches are a typical core's
    unless this machine is that CPU."""
    from extract.tir import hardware

    monkeypatch.setattr(hardware, "_system_cpu", lambda: "tigerlake")
    here = hardware.hardware_of({"kind": "llvm", "mcpu": "tigerlake"})
    assert (here.vector_bits, here.l1_bytes) == (512, hardware.machine_cpu().l1_bytes)
    bits = {cpu: hardware.hardware_of({"kind": "llvm", "mcpu": cpu}) for cpu in ("x86-64-v4", "haswell", "nehalem")}
    assert {cpu: hw.vector_bits for cpu, hw in bits.items()} == {"x86-64-v4": 512, "haswell": 256, "nehalem": 128}
    assert bits["nehalem"].l1_bytes == hardware.Hardware().l1_bytes
    assert hardware.hardware_of("llvm -mcpu=nehalem -mattr=+avx2,+fma").vector_bits == 256
    assert hardware.hardware_of({"kind": "llvm", "mcpu": "emeraldrapids"}).vector_bits == 512
    other = hardware.hardware_of({"kind": "llvm", "mcpu": "cortex-a72", "mtriple": "aarch64-linux-gnu"})
    assert other.vector_bits == hardware.Hardware().vector_bits


def test_mattr_widens_or_narrows_any_cpu_s_vectors():
    """`-mattr` decides the vector width LLVM emits, for a CPU in the table too; the
    table's caches stay."""
    from extract.tir import hardware

    skylake = hardware.hardware_of({"kind": "llvm", "mcpu": "skylake", "mattr": ["+avx512f", "+avx512bw"]})
    assert (skylake.vector_bits, skylake.l2_bytes) == (512, hardware.CPUS["skylake"][1])
    zen4 = hardware.hardware_of("llvm -mcpu=znver4 -mattr=-avx512f")
    assert (zen4.vector_bits, zen4.l2_bytes) == (256, hardware.CPUS["znver4"][1])
    assert hardware.hardware_of({"kind": "llvm", "mcpu": "znver4"}).vector_bits == 512
    assert hardware.hardware_of("llvm -mcpu=x86-64-v4 -mattr=-avx512f").vector_bits == 256
    assert hardware.hardware_of("llvm -mattr=-avx512f").vector_bits <= 256
    assert hardware.hardware_of("llvm -mattr=+avx512f").vector_bits == 512


def test_extraction_caches_key_on_the_hardware_table(monkeypatch, tmp_path):
    import datasets
    from extract.tir import hardware

    log = tmp_path / "a.jsonl"
    log.write_text("{}\n")
    before = datasets._logs_key([str(log)])
    monkeypatch.setattr(datasets, "HARDWARE_VERSION", hardware.HARDWARE_VERSION + 1)
    assert datasets._logs_key([str(log)]) != before


def test_cuda_configs_that_cannot_launch_are_known_from_the_graph(monkeypatch):
    """The CUDA template's invalid configs (too many threads per block or in threadIdx.z,
    too much shared memory), built anyway, are flagged by the graph's root; valid ones not."""
    import random

    from extract.tir.hardware import hardware_of
    from extract.autotvm.templates import Conv2dWorkload, get_template
    from extract.autotvm.templates.conv2d_cuda import Conv2dCuda, InvalidGpuConfig
    from extract.tir.graph import COLUMN, lower_for_features, tir_to_graph

    template = get_template("tutorial/conv2d_no_batching")
    hw = hardware_of(template.make_target())
    resnet = Conv2dWorkload(1, 512, 7, 7, 512, 3, 3, 1, 1)
    cases = [(resnet, template.space(resnet).from_entity([  # 162 KB of shared memory
        ["tile_f", "sp", [-1, 1, 8, 1]], ["tile_y", "sp", [-1, 1, 7, 1]], ["tile_x", "sp", [-1, 1, 1, 7]],
        ["tile_rc", "sp", [-1, 1, 512]], ["tile_ry", "sp", [-1, 1, 3]], ["tile_rx", "sp", [-1, 1, 3]],
        ["auto_unroll_max_step", "ot", 0], ["unroll_explicit", "ot", 0]]))]
    wl = Conv2dWorkload(1, 16, 14, 14, 64, 3, 3, 2, 1)
    space = template.space(wl)
    rng = random.Random(0)
    cases += [(wl, space.get(rng.randrange(len(space)))) for _ in range(30)]
    expected = []
    for w, config in cases:
        try:
            template.schedule(w, config)
            expected.append(0.0)
        except InvalidGpuConfig:
            expected.append(1.0)
    assert 0 < sum(expected) < len(expected)
    monkeypatch.setattr(Conv2dCuda, "check_threads", lambda self, config: None)
    monkeypatch.setattr(Conv2dCuda, "check_shared_memory", lambda self, sch: None)
    for (w, config), invalid in zip(cases, expected):
        func = lower_for_features(template.schedule(w, config).mod)["main"]
        root = tir_to_graph(func, hw).node_features[0]
        assert root[COLUMN["launch_invalid"]] == invalid, config
        assert (root[COLUMN["occupancy"]] > 0) == (not invalid)
        threads = config["tile_f"][2] * config["tile_y"][2] * config["tile_x"][2]
        assert root[COLUMN["threads_per_block"]] == pytest.approx(threads / 1024)
        if not invalid:
            assert 0 < root[COLUMN["shared_per_block"]] <= 1


@pytest.mark.parametrize("name", ["gcn-inv", "mlp-inv"])
def test_invariant_models_ignore_the_absolute_columns(synthetic_samples, tmp_path, name):
    """The dropped columns do not change a prediction; the others do; the columns read
    are the checkpoint's."""
    import copy

    import torch

    from simulator.models.costmodel import CostModel, build_cost_model
    from simulator.data.collection import CollectionInfo
    from simulator.data.in_memory import SampleSource
    from simulator.train import build_parser, config_from_flags, validate

    samples = list(synthetic_samples[:32])
    names = ["outer_trips", "vectorized", "unrolled", "depth", "buffer_bytes", "one"]
    config = validate(config_from_flags(dict(vars(build_parser().parse_args([])), model=name, width=16, depth=2)))
    assert config.model.features == "invariant"
    source = SampleSource(samples, collection=CollectionInfo(None, names, "test"), features=config.model.features)
    assert source.info.feature_names == ["vectorized", "unrolled", "depth", "one"]
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, 0))
    assert model.net.encoder.mlp[0].in_features == 4 + config.model.type_dim
    before = model.predict(source)

    def changed(column):
        out = []
        for s in samples:
            s = copy.copy(s)
            x = s.node_features.copy()
            x[:, column] = x[:, column] * 3 + 5
            s.node_features = x
            out.append(s)
        return model.predict(SampleSource(out, model.info, collection=source.collection))
    assert np.allclose(changed(0), before) and np.allclose(changed(4), before)
    assert not np.allclose(changed(3), before)
    model.save(str(tmp_path / "m.pt"))
    again = CostModel.load(str(tmp_path / "m.pt"))
    assert np.allclose(again.predict(SampleSource(samples, again.info, collection=source.collection)), before)


# ---------------------------------------------------------------- register-tile families
def _config_sample(group, index, oc, ow, oh, runtime, ic=1):
    from types import SimpleNamespace
    return SimpleNamespace(group=group, name=f"{group}/{index}", runtimes=[runtime],
                           meta=SampleMeta(config={"tile_ic": [-1, ic], "tile_oc": [-1, oc], "tile_ow": [-1, ow],
                                                   "tile_oh": oh, "unroll_kw": True}))


def test_lookup_rule_ranks_by_the_training_workloads_family_medians():
    """The lookup puts the family that was fastest on the training workload first and
    families it never measured last; a model breaking ties inside a family is scored
    apart from its own ranking, and its picks in unmeasured families are counted."""
    from benchmarks.transfer.families import family, lookup_scores, oracle_scores, pair_figures, summarize

    train = [_config_sample("A", i, oc, ow, 1, t) for i, (oc, ow, t) in
             enumerate([(8, 7, 1.0), (8, 7, 1.2), (32, 1, 3.0), (32, 1, 2.0), (16, 2, 5.0)])]
    test = [_config_sample("B", i, oc, ow, 1, t) for i, (oc, ow, t) in
            enumerate([(32, 1, 4.0), (8, 7, 2.0), (8, 7, 1.0), (16, 4, 0.5), (16, 2, 9.0), (32, 1, 6.0),
                       (8, 7, 3.0)])]
    assert family(test[3]) == (16, 4, 1)
    scores = lookup_scores(train, test)
    assert np.isinf(scores[3]) and np.argmin(scores) in (1, 2, 6)
    assert scores[1] == pytest.approx(np.log(np.sqrt(1.0 * 1.2)))  # median of two logs
    # the model loves the unmeasured family (16, 4): its own top pick is B's best …
    pred = {"m": {s.name: (0.0 if s.name == "B/3" else float(i)) for i, s in enumerate(test)}}
    figures = pair_figures(train, test, pred, repeats=3)
    m = figures["models"]["m"]
    assert m["top5"] == 0.0 and m["top5_unseen_share"] == pytest.approx(1 / 5)
    # … which the lookup puts last: its top five are the three (8, 7) and two (32, 1) configs
    assert m["lookup_then_model_top5"] == pytest.approx(1.0 / 0.5 - 1)
    assert figures["lookup_top5"] == pytest.approx(1.0 / 0.5 - 1)
    # the oracle orders B's families by B's own medians: (16, 4) first, so B's best is a pick
    oracle = oracle_scores(test)
    assert oracle[3] == pytest.approx(np.log(0.5)) and oracle[0] == oracle[5] == pytest.approx(np.log(np.sqrt(24.0)))
    assert figures["oracle_top5"] == 0.0 and m["oracle_then_model_top5"] == 0.0
    # inside B's own best family only the model's order decides: five of six picks can miss its best
    wide = [_config_sample("C", i, 8, 7, 1, t) for i, t in enumerate([1.0, 1.5, 1.5, 1.5, 1.5, 1.5])]
    wide += [_config_sample("C", 6 + i, 32, 1, 1, 2.0) for i in range(3)]
    best_last = {"m": {s.name: -float(np.mean(s.runtimes)) for s in wide}}
    inside = pair_figures(train, wide, best_last, repeats=60)
    assert inside["models"]["m"]["oracle_then_model_top5"] == pytest.approx(0.5)
    assert 0.0 < inside["oracle_top5"] < 0.5  # random orders miss it in one of six
    summary = summarize([{"train": "A", "test": "B", **figures}], ["m"])
    assert summary["oracle"]["worst"] == 0.0 and summary["models"]["m"]["oracle_then_model"]["mean"] == 0.0


def test_family_needs_the_template_config():
    from types import SimpleNamespace

    from benchmarks.transfer.families import family
    with pytest.raises(ValueError, match="B/0.*tile_oc"):
        family(SimpleNamespace(name="B/0", meta=SampleMeta(config={"tile_ow": [-1, 2]})))


def test_picks_to_within_counts_a_tuners_measurements():
    """How many of the model's first picks must be measured before one is within 25% of the best."""
    from simulator.metrics import METRICS, picks_to_within
    t = np.array([1.0, 1.2, 3.0, 1.3, 2.0])
    assert picks_to_within(np.array([0, 1, 2, 3, 4.0]), t, 0.25) == 1      # the first pick is the best
    assert picks_to_within(np.array([4, 3, 0, 2, 1.0]), t, 0.25) == 4      # 3.0, 2.0, 1.3 (> 1.25), then 1.2
    assert picks_to_within(np.array([4, 3, 0, 2, 1.0]), t, 0.35) == 3      # 1.3 counts at 35%
    assert picks_to_within(np.array([4, 0, 1, 2, 3.0]), t, 0.0) == 5       # only the best itself, ranked last
    assert not METRICS.get("picks_to_25").default  # not in every evaluation's table


def test_complete_pairs_fills_a_new_metric_from_kept_predictions():
    """Runs from before a metric existed get it from their predictions; runs without
    predictions are left without it, and the summary then gives no figure, not a partial one."""
    from types import SimpleNamespace

    from benchmarks.transfer.matrix import complete_pairs, summarize
    from benchmarks.transfer.report import summary_table
    samples = [SimpleNamespace(group="C2", name=f"C2/{i}", runtimes=[t]) for i, t in enumerate([1.0, 3.0, 2.0, 1.1])]
    old = {"spec": "m", "train": ["C1"], "seconds": 1.0, "predictions": {f"C2/{i}": p for i, p in enumerate([3, 0, 1, 2])},
           "pairs": {"C2": {"kendall_tau": 0.1, "top5_slowdown": 0.0, "top1_slowdown": 2.0}}}
    bare = {"spec": "x", "train": ["C1"], "seconds": 1.0,
            "pairs": {"C2": {"kendall_tau": 0.1, "top5_slowdown": 0.0, "top1_slowdown": 2.0}}}
    complete_pairs([old, bare], samples)
    assert old["pairs"]["C2"]["picks_to_25"] == 3.0   # 3.0, 2.0, then 1.1
    assert old["pairs"]["C2"]["opa"] is not None and "picks_to_25" not in bare["pairs"]["C2"]
    s = summarize([old, bare])
    assert (s["m"]["1"]["median_picks_to_25"], s["m"]["1"]["worst_picks_to_25"]) == (3.0, 3.0)
    assert s["x"]["1"]["median_picks_to_25"] is None
    one = dict(s["m"]["1"], median_picks_to_25=5.5, p90_picks_to_25=31.0, worst_picks_to_25=133.0)
    assert "| 5.5 / 31 / 133 |" in summary_table({"m": {"1": one}, "x": s["x"]})
    assert "| 0/1 | – |" in summary_table({"x": s["x"]})


def test_families_section_shows_the_oracle_bound_and_reads_older_analyses(tmp_path):
    import json as _json

    from benchmarks.transfer.report import families_lines
    stats = {"mean": 0.1, "median": 0.05, "worst": 0.26, "over_25": 11}
    model = {"top5": stats, "lookup_then_model": stats, "oracle_then_model": dict(stats, worst=0.4),
             "top5_unseen_share": 0.2}
    out = {"family_knobs": ["tile_oc", "tile_ow", "tile_oh"], "repeats": 20,
           "summary": {"pairs": 132, "family_tau_mean": 0.77, "lookup": stats, "oracle": stats, "models": {"m": model}}}
    (tmp_path / "transfer_families.json").write_text(_json.dumps(out))
    text = "\n".join(families_lines(str(tmp_path)))
    assert "| the test workload's own family order (an oracle), random inside | 10.0% / 5.0% / 26% / 11 |" in text
    assert "| `m` | 10.0% / 5.0% / 26% / 11 | 10.0% / 5.0% / 26% / 11 | 10.0% / 5.0% / 40% / 11 | 20% |" in text
    del out["summary"]["oracle"], model["oracle_then_model"]   # written before the oracle existed
    (tmp_path / "transfer_families.json").write_text(_json.dumps(out))
    text = "\n".join(families_lines(str(tmp_path)))
    assert "random inside | – |" in text and "| `m` | 10.0% / 5.0% / 26% / 11 | 10.0% / 5.0% / 26% / 11 | – | 20% |" in text
