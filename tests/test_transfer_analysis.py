"""Why the graphs do not transfer, measured (benchmarks.transfer.analysis) — on the
columns the model reads, for a transfer spec — and its section of RESULTS.md."""
import json
import os

import numpy as np
import pytest
import torch

from extract.sample import GraphSample
from simulator.data.batching import BatchSpec
from simulator.data.collection import CollectionInfo
from simulator.registry import SimulatorError

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "results")


def _sample(group, i, x, types, runtime):
    n = len(types)
    return GraphSample(edges=np.stack([np.zeros(n - 1, int), np.arange(1, n)], axis=1), node_features=np.array(x),
                       node_types=np.array(types), runtimes=[runtime], group=group, name=f"{group}/{i}")


# ---------------------------------------------------------------- which model
def test_model_is_a_transfer_spec_or_raw_flags():
    from benchmarks.transfer.specs import MODEL_SPECS
    from benchmarks.transfer.analysis import DEFAULT_SPEC, model_flags
    assert DEFAULT_SPEC in MODEL_SPECS
    assert model_flags() == (DEFAULT_SPEC, MODEL_SPECS[DEFAULT_SPEC])
    assert model_flags("gcn-inv") == ("gcn-inv", ["--model", "gcn-inv", "--features", "invariant"])
    assert model_flags(None, ["--model", "gcn"]) == ("--model gcn", ["--model", "gcn"])
    with pytest.raises(SimulatorError, match="not both"):
        model_flags("gcn-inv", ["--model", "gcn"])
    with pytest.raises(SimulatorError, match="unknown transfer spec 'gcn-invv'"):
        model_flags("gcn-invv")


def test_analysis_trains_as_the_transfer_matrix_does():
    from benchmarks.transfer.matrix import flags_argv, job_argv
    ws = ["C1", "C2", "C10"]
    argv = job_argv("gcn-inv-arf-noext-lane", ["C2"], ws, 3, 40, ["shipped"])
    assert argv == flags_argv(["--model", "gcn-inv", "--features", "invariant,+acc_reg_fill,+acc_lane_share,-loop_extent"],
                              ["C2"], ws, 3, 40, ["shipped"])
    assert argv[argv.index("--split") + 1] == "cross-workload" and argv[argv.index("--test-workloads") + 1:][:2] == ["C1", "C10"]


# ---------------------------------------------------------------- 1. which columns shift
def test_feature_shift_by_hand():
    """Column 0 says which workload it is (between share 1, every test node outside the
    other's range, no within-workload variation); column 1 varies only with the config
    (between share 0) and orders runtime the same way in both; column 2 is never non-zero."""
    from benchmarks.transfer.analysis import feature_shift
    samples = []
    for group, c0 in (("A", 1.0), ("B", 3.0)):
        for i, (c1, runtime) in enumerate(((1.0, 1.0), (2.0, 2.0))):
            samples.append(_sample(group, i, [[0.0, c1, 0.0], [c0, c1, 0.0]], [0, 1], runtime))
    out = feature_shift(samples, ["c0", "c1", "c2"])
    assert set(out) == {"c0", "c1"}
    assert out["c0"]["between_share"] == pytest.approx(1.0) and out["c0"]["out_of_range"] == pytest.approx(1.0)
    assert out["c0"]["workloads_varying"] == 0 and out["c0"]["within_rho"] == 0.0
    assert out["c1"]["between_share"] == pytest.approx(0.0) and out["c1"]["out_of_range"] == 0.0
    assert out["c1"]["within_rho"] == pytest.approx(1.0) and out["c1"]["sign_agreement"] == 1.0
    # the columns given explicitly (e.g. with derived ones appended) are the ones measured
    wider = feature_shift(samples, ["c0", "c1", "c2", "twice_c1"],
                          [np.concatenate([s.node_features, 2 * s.node_features[:, 1:2]], axis=1) for s in samples])
    assert wider["twice_c1"] == out["c1"]


def test_data_columns_add_the_derived_columns(synthetic_samples):
    from benchmarks.transfer.analysis import data_columns
    from simulator.data.features import DERIVED, with_derived
    names = ["accumulate", "buffer_bytes", "dtype_bits", "kind_vectorized", "vector_fill"]
    samples = synthetic_samples[:5]
    cut = [GraphSample(edges=s.edges, node_features=np.abs(s.node_features[:, :5]), node_types=s.node_types,
                       runtimes=s.runtimes, group=s.group, name=s.name) for s in samples]
    cols, features = data_columns(cut, CollectionInfo(None, names, "x"))
    assert cols == names + list(DERIVED)
    for s, f in zip(cut, features):
        assert np.array_equal(f, with_derived(s.node_features, names, list(DERIVED), s.edges).astype(np.float64))
    unnamed, plain = data_columns(cut, CollectionInfo(None, None, None))  # no names: no derived columns
    assert unnamed == [f"f{i}" for i in range(5)] and plain[0].shape == (cut[0].num_nodes, 5)


def test_shift_reproduces_the_tir_ast_v1_reference():
    """tir-ast-v2's first 24 columns are tir-ast-v1's: the shift measured on them now is the
    committed v1 analysis's (the rewrite computes the same figures)."""
    from benchmarks.transfer.matrix import _data
    from benchmarks.transfer.analysis import data_columns, feature_shift
    with open(os.path.join(RESULTS, "transfer_analysis_before.json"), encoding="utf-8") as f:
        before = json.load(f)
    samples, collection, _ = _data(["shipped"])
    names, features = data_columns(samples, collection)
    assert names[:24] == before["feature_names"] and names[-2:] == ["acc_reg_fill", "acc_lane_share"]
    now = feature_shift(samples, names[:24], [x[:, :24] for x in features])
    assert set(now) == set(before["shift"])
    for column, figures in before["shift"].items():
        for key, value in figures.items():
            assert now[column][key] == pytest.approx(value, abs=1e-4), (column, key)


# ---------------------------------------------------------------- 2. what the model keys on
class _ItemsSpec(BatchSpec):
    def make(self, items):
        return list(items)


class _Stub:
    """Predicts each graph's sum of input 0 plus 5 × the sum of input 1 (a column that
    misleads it: noise on the configs' runtime)."""

    batch_spec = _ItemsSpec()

    def predict_batch(self, items):
        return np.array([float(it.x[:, 0].sum() + 5 * it.x[:, 1].sum()) for it in items for _ in it.y])


def _keyed_samples():
    rng = np.random.default_rng(0)
    out = []
    for g in ("C1", "C2", "C3"):
        for i in range(12):
            c0 = float(i)
            out.append(_sample(g, i, [[0.0, 0.0, 1.0], [c0, rng.random(), 2.0]], [0, 1], np.exp(c0)))
    return out


def test_ablating_a_column_sets_it_to_the_training_mean_of_its_node_type():
    from benchmarks.transfer.analysis import ablated, type_means
    from simulator.data.in_memory import SampleSource
    items = SampleSource(_keyed_samples()).items(BatchSpec())
    means = type_means(items[:12])
    assert means.shape[1] == 3 and means[0].tolist() == [0.0, 0.0, 1.0]
    assert means[1][0] == pytest.approx(5.5) and means[1][2] == pytest.approx(2.0)
    out = ablated(items, 0, means)
    assert all(it.x[:, 0].tolist() == [0.0, pytest.approx(5.5)] for it in out)
    assert torch.equal(out[3].x[:, 1:], items[3].x[:, 1:])
    assert items[3].x[1, 0] == 3.0  # the items themselves are left as they are


def test_ablation_finds_what_the_model_relies_on_and_what_misleads_it():
    from benchmarks.transfer.analysis import ablate_model
    from simulator.data.in_memory import SampleSource
    source = SampleSource(_keyed_samples())
    parts = {"train": source.subset(range(0, 8)), "val": source.subset(range(8, 12)),
             "test": source.subset(range(12, 36))}
    columns, out = ablate_model(_Stub(), parts)
    assert columns == ["f0", "f1", "f2"]
    base, abl = out["base"], out["ablated"]
    assert base["test"]["kendall_tau"] < 1.0
    assert abl["f0"]["test"]["kendall_tau"] < base["test"]["kendall_tau"]          # relied on
    assert abl["f1"]["test"]["kendall_tau"] == pytest.approx(1.0)                   # misleads: better without
    assert abl["f2"] == base                                                        # decided by the node type
    vector_model = _Stub()
    vector_model.batch_spec = BatchSpec(graph=False, vector="curve")
    with pytest.raises(SimulatorError, match="reads a vector"):
        ablate_model(vector_model, parts)


@pytest.mark.filterwarnings("ignore")
def test_analysis_of_a_spec_reads_its_columns_and_matches_the_transfer_run(tmp_path):
    """The best spec on the shipped data, one workload, one epoch: the ablated columns are
    the spec's (derived ones included, absolute ones and loop_extent not); part 1 covers every
    column of the data; the whole model's τ on the others is the transfer matrix's own run's."""
    from benchmarks.transfer import matrix as transfer
    from benchmarks.transfer.analysis import run
    from simulator.data.features import select_features
    result = run(["shipped"], str(tmp_path), "gcn-inv-arf-noext-lane", epochs=1, seed=0, train_workloads=["C3"],
                 tag="t")
    assert (tmp_path / "transfer_features_t.png").stat().st_size > 0
    with open(tmp_path / "transfer_analysis_t.json", encoding="utf-8") as f:
        saved = json.load(f)
    samples, collection, _ = transfer._data(["shipped"])
    names = list(collection.feature_names)
    wanted = select_features(names, "invariant,+acc_reg_fill,+acc_lane_share,-loop_extent")
    assert saved["model_columns"] == wanted and list(saved["ablation"]["summary"]) == wanted
    assert {"acc_reg_fill", "acc_lane_share"} <= set(wanted) and not {"loop_extent", "outer_trips"} & set(wanted)
    assert saved["feature_names"] == names + ["acc_reg_fill", "acc_lane_share"]
    assert saved["derived"] == ["acc_reg_fill", "acc_lane_share"]
    assert sorted(list(saved["shift"]) + saved["never_nonzero"]) == sorted(saved["feature_names"])
    assert saved["shift"]["outer_trips"]["read_by_model"] is False and saved["shift"]["acc_reg_fill"]["read_by_model"]
    assert saved["protocol"] == {"spec": "gcn-inv-arf-noext-lane", "model_flags": transfer.MODEL_SPECS[
        "gcn-inv-arf-noext-lane"], "epochs": 1, "seed": 0}
    workloads = sorted({s.group for s in samples}, key=transfer.natural_key)
    job = {"spec": "gcn-inv-arf-noext-lane", "train": ("C3",), "log": None, "key": "",
           "argv": transfer.job_argv("gcn-inv-arf-noext-lane", ["C3"], workloads, 0, 1, ["shipped"])}
    pairs = transfer.run_job(job)["pairs"]
    assert result["ablation"]["base_tau_others"] == pytest.approx(np.mean([p["kendall_tau"] for p in pairs.values()]))


def test_benchmarks_all_analyses_the_best_spec(tmp_path, monkeypatch):
    from benchmarks import all as bench_all
    from benchmarks.transfer import analysis as transfer_analysis, families as transfer_families, matrix as transfer
    calls, family_calls = [], []
    monkeypatch.setattr(transfer, "run", lambda *a, **k: None)
    monkeypatch.setattr(transfer_analysis, "run", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(transfer_families, "run", lambda *a, **k: family_calls.append(a) or {"pairs": []})
    folders = ["--results", str(tmp_path / "r"), "--runs", str(tmp_path / "runs"), "--tuning-runs",
               str(tmp_path / "t"), "--spaces", str(tmp_path / "s"), "--stages", "transfer"]
    assert bench_all.main(folders) == 0
    assert bench_all.main(folders + ["--transfer-analysis-spec", "gcn-inv"]) == 0
    assert [c[2] for c in calls] == [transfer_analysis.DEFAULT_SPEC, "gcn-inv"]
    assert calls[0][1] == str(tmp_path / "r") and calls[0][3] is None
    # the family analysis reads the matrix's own runs, of the models it ran
    assert family_calls[0][1] == str(tmp_path / "runs" / "transfer")
    assert family_calls[0][2] == transfer_families.DEFAULT_MODELS
    assert (tmp_path / "r" / "transfer_families.json").exists()
    family_calls.clear()
    assert bench_all.main(folders + ["--transfer-models", "gcn-inv", "xgb"]) == 0
    assert family_calls[0][2] == ["gcn-inv"]
    family_calls.clear()
    assert bench_all.main(folders + ["--transfer-models", "xgb"]) == 0 and family_calls == []


# ---------------------------------------------------------------- RESULTS.md
def _analysis(extractor, spec, shift, abl, derived=(), read=None):
    return {"extractor": extractor, "derived": list(derived), "shift": shift,
            **({"model_columns": read} if read is not None else {}),
            "ablation": {"summary": abl, "trainings": 12}, "protocol": {"spec": spec, "model_flags": ["--model", "x"]}}


def _shift(b, o):
    return {"between_share": b, "out_of_range": o, "within_rho": 0.1}


def _abl(own, others, better=0):
    return {"delta_tau_own": own, "delta_tau_others": others, "delta_top5_others": 0.01,
            "others_better_without": better}


def test_findings_name_what_shifts_what_is_relied_on_and_what_misleads():
    from benchmarks.transfer.report import analysis_comparison, analysis_findings, analysis_table
    after = _analysis("tir-ast-v2", "gcn-inv-arf-noext-lane",
                      {"outer_trips": _shift(0.4, 0.2), "fits_l2": _shift(0.9, 0.1), "acc_reg_fill": _shift(0.0, 0.0),
                       "vector_fill": _shift(0.0, 0.0), "acc_lane_share": _shift(0.05, 0.0)},
                      {"fits_l2": _abl(-0.001, 0.02, 9), "acc_reg_fill": _abl(-0.1, -0.05), "vector_fill": _abl(-0.3, -0.4),
                       "acc_lane_share": _abl(0.001, 0.001)},
                      derived=["acc_reg_fill", "acc_lane_share"],
                      read=["fits_l2", "acc_reg_fill", "vector_fill", "acc_lane_share"])
    f = analysis_findings(after)
    assert f["shift"][:2] == ["`fits_l2` 0.90", "`outer_trips` (not read) 0.40"]
    assert f["outside"][0] == "`outer_trips` (not read) 0.20"
    assert f["relied"] == ["`vector_fill` -0.300 / -0.400", "`acc_reg_fill` -0.100 / -0.050", "`fits_l2` -0.001 / +0.020"]
    assert f["misleads"] == ["`fits_l2` +0.020 (9/12, top-5 +1.0%)"]  # acc_lane_share's +0.001 is below the bar
    assert f["derived"][0].startswith("`acc_reg_fill` #2 relied on") and f["derived"][1].startswith(
        "`acc_lane_share` not relied on")
    before = _analysis("tir-ast-v1", None, {"outer_trips": _shift(0.4, 0.2)}, {"outer_trips": _abl(-0.04, -0.02)})
    before["protocol"]["model_flags"] = ["--model", "gcn"]
    text = "\n".join(analysis_comparison([("before", before), ("now", after)]))
    assert "| before: `tir-ast-v1`, `--model gcn` | `outer_trips` 0.40 |" in text
    assert "none in the data" in text and "| now: `tir-ast-v2`, `gcn-inv-arf-noext-lane` |" in text
    table = analysis_table(after)
    assert "| outer_trips | no | 0.40 | 0.20 | +0.10 | – | – | – |" in table
    assert "| acc_reg_fill *(derived)* | yes |" in table


def test_transfer_section_renders_before_now_and_comparisons(tmp_path):
    from benchmarks.transfer.report import analysis_files, transfer_section
    with open(tmp_path / "transfer.json", "w") as f:
        json.dump({"summary": {}, "protocol": {}}, f)
    for tag, spec in (("_before", None), ("", "gcn-inv-arf-noext-lane"), ("_gcn-inv", "gcn-inv")):
        with open(tmp_path / f"transfer_analysis{tag}.json", "w") as f:
            json.dump(_analysis("v", spec, {"c": _shift(0.5, 0.5)}, {"c": _abl(-0.1, 0.1, 3)}), f)
    assert analysis_files(str(tmp_path)) == [("_before", "before the size-invariant features"), ("", "now"),
                                             ("_gcn-inv", "for comparison (gcn-inv)")]
    text = "\n".join(transfer_section(str(tmp_path)))
    assert text.count("**Why the graphs do not transfer, measured (") == 3
    assert text.index("compared**") < text.index("measured (before") < text.index("measured (now") \
        < text.index("measured (for comparison (gcn-inv)")
    assert "`c` +0.100 (3/12" in text
