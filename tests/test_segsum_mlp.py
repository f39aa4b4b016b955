"""TenSet's / MetaSchedule's segment-sum MLP (`segsum-mlp`) and the unpooled PerStoreFeature
rows it reads (`extract.store_rows`, `vectors["per_store_rows"]`)."""
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from extract.sample import GraphSample
from extract.store_rows import SLOT_WIDTH, STORE_ROW_WIDTH, STORE_SLOTS, pack_store_rows, unpack_store_rows
from simulator.models.costmodel import build_cost_model
from simulator.registry import SimulatorError
from simulator.data.in_memory import SampleSource
from simulator.models.segsum_mlp import SegmentSumMLP
from simulator.train import build_parser, config_from_flags, validate


def test_pack_keeps_the_rows_and_counts_what_it_sums():
    rows = np.arange(3 * STORE_ROW_WIDTH, dtype=np.float32).reshape(3, STORE_ROW_WIDTH)
    packed, cut = pack_store_rows(rows)
    assert packed.shape == (STORE_SLOTS * SLOT_WIDTH,) and cut == 0
    present, back = unpack_store_rows(packed[None])
    assert present[0].tolist() == [True] * 3 + [False] * (STORE_SLOTS - 3)
    np.testing.assert_array_equal(back[0, :3], rows)
    assert not back[0, 3:].any()
    many = np.ones((STORE_SLOTS + 4, STORE_ROW_WIDTH))
    packed, cut = pack_store_rows(many)
    slots = packed.reshape(STORE_SLOTS, SLOT_WIDTH)
    assert cut == 5 and slots[-1, 0] == 5 and (slots[-1, 1:] == 5).all() and (slots[:-1, 0] == 1).all()
    assert pack_store_rows(np.zeros((0, STORE_ROW_WIDTH)))[0].sum() == 0


def _vectors(row_sets):
    return torch.from_numpy(np.stack([pack_store_rows(r)[0] for r in row_sets]))


class _Batch:
    def __init__(self, vector):
        self.vector = vector


def test_the_sum_is_over_present_rows_in_any_order():
    torch.manual_seed(0)
    net = SegmentSumMLP(STORE_SLOTS, width=16)
    rng = np.random.default_rng(0)
    a, b, c = (rng.normal(size=STORE_ROW_WIDTH) for _ in range(3))
    with torch.no_grad():
        out = net(_Batch(_vectors([[a, b, c], [c, a, b], [a, b], [a]]))).tolist()
        alone = net(_Batch(_vectors([[a]]))).tolist()
    assert out[0] == pytest.approx(out[1], abs=1e-5)           # order of the stores does not matter
    assert abs(out[0] - out[2]) > 1e-6                         # every present row counts
    assert alone[0] == pytest.approx(out[3], abs=1e-6)         # absent slots add nothing


def test_row_scale_is_the_largest_magnitude_of_present_rows():
    net = SegmentSumMLP(STORE_SLOTS, width=8)
    rows = [np.full((2, STORE_ROW_WIDTH), -3.0), np.full((1, STORE_ROW_WIDTH), 2.0)]
    rows[1][0, 5] = 0.0
    net.set_row_scale(_vectors([rows[0], rows[1]]))
    assert net.row_scale[0] == 3.0 and net.row_scale[5] == 3.0
    net.set_row_scale(_vectors([np.zeros((1, STORE_ROW_WIDTH))]))
    assert (net.row_scale == 1.0).all()                        # a zero column is left unscaled


def _samples(count_per_group=24, groups=6, seed=0):
    """Programs of 1–4 stores; log runtime = Σ over stores of w·row (+ a per-group shift), so
    that only a model that reads every row ranks them."""
    w = np.zeros(STORE_ROW_WIDTH)
    w[:6] = [1.0, -0.5, 0.8, 0.3, -1.0, 0.6]                    # most PerStoreFeature columns are 0
    rng = np.random.default_rng(seed)
    out = []
    for g in range(groups):
        for i in range(count_per_group):
            rows = np.zeros((int(rng.integers(1, 5)), STORE_ROW_WIDTH))
            rows[:, :6] = rng.normal(size=(len(rows), 6))
            y = float((rows @ w).sum()) + g - 10.0
            out.append(GraphSample(edges=np.zeros((0, 2)), node_features=np.zeros((1, 2)), node_types=[0],
                                   runtimes=[np.exp(y)], group=f"task{g}", name=f"task{g}/{i}",
                                   vectors={"per_store_rows": pack_store_rows(rows)[0][None]}))
    return out


def _config(**flags):
    args = dict(vars(build_parser().parse_args([])), model="segsum-mlp", width=32, lr=3e-3, loss="lambdarank",
                epochs=30, batch_size=64)
    args.update(flags)
    return validate(config_from_flags(args))


def test_it_learns_to_rank_programs_by_their_store_rows(tmp_path):
    samples = _samples()
    train, test = SampleSource(samples[:96]), SampleSource(_samples(seed=1)[:48])
    config = _config()
    torch.manual_seed(0)
    model = build_cost_model(config, train.info)
    model.set_normalization(train.normalization(model.batch_spec, config.seed))
    model.fit(train)
    assert float(model.net.row_scale[:6].min()) > 1.0          # set from the training rows
    pred = model.predict(test)
    y = np.log([s.runtimes[0] for s in test.samples])
    taus = [kendalltau(pred[i:i + 24], y[i:i + 24])[0] for i in (0, 24)]
    assert min(taus) > 0.6, taus
    model.save(str(tmp_path / "m.pt"))
    again = type(model).load(str(tmp_path / "m.pt"))
    np.testing.assert_allclose(again.predict(test), pred, rtol=1e-5, atol=1e-5)


def test_data_without_the_rows_is_a_clear_error(synthetic_samples):
    bare = [GraphSample(edges=s.edges, node_features=s.node_features, node_types=s.node_types,
                        runtimes=s.runtimes, group=s.group, name=s.name) for s in synthetic_samples[:4]]
    with pytest.raises(SimulatorError, match="per_store_rows"):
        build_cost_model(_config(), SampleSource(bare).info)


TINY = Path(__file__).resolve().parent / "data" / "networks_tiny"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from datasets import load_collection

    return load_collection([str(TINY)], progress=False, cache=str(tmp_path_factory.mktemp("cache")))


def test_extracted_rows_are_what_the_xgb_vector_pools(tiny):
    """The one extraction path gives both: the unpooled rows and their sum ‖ max."""
    vectors = np.concatenate([s.vectors["per_store_rows"] for s in tiny.samples])
    present, rows = unpack_store_rows(vectors)
    assert len(tiny.samples) == 24 and present.any(1).all() and not any("store_cut" in s.meta.extra for s in tiny.samples)
    for s, keep, r in zip(tiny.samples, present, rows):
        pooled = np.concatenate([r[keep].sum(0), r[keep].max(0)])
        np.testing.assert_allclose(s.vectors["per_store"][0], pooled, rtol=1e-5, atol=1e-4)


def test_the_extraction_cache_key_follows_the_row_layout(monkeypatch):
    import datasets
    import extract.store_rows as store_rows
    from extract.tvm_log import input_files

    files = input_files([str(TINY)])
    before = datasets._logs_key(files)
    monkeypatch.setattr(datasets, "STORE_ROWS_VERSION", store_rows.STORE_ROWS_VERSION + 1)
    assert datasets._logs_key(files) != before


def test_it_trains_on_metaschedule_samples(tiny):
    source = SampleSource(tiny.samples)
    config = _config(epochs=2, batch_size=16)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, config.seed))
    model.fit(source)
    pred = model.predict(tiny.samples)
    assert pred.shape == (24,) and np.isfinite(pred).all() and np.ptp(pred) > 0


def test_the_benchmark_trains_the_rivals_with_their_own_recipes():
    import argparse

    from benchmarks import networks as bench

    ap = argparse.ArgumentParser()
    bench.add_arguments(ap)
    ap.add_argument("--runs", default="runs")
    args = ap.parse_args(["--networks-models", "segsum-mlp", "tenset-mlp", "--held-networks", "bert",
                          "--held-kinds", "--combined-models", "--networks-epochs", "10", "--networks-seeds", "0"])
    planned = bench.jobs(args, {"tasks": [{"kind": "dense", "valid": 30}]})
    assert [(j["axis"], j["model"]) for j in planned] == [("network", "segsum-mlp"), ("network", "tenset-mlp")]
    plain, tenset = (j["argv"] for j in planned)
    assert plain[-2:] == ["--loss", "pairwise-hinge"] and bench.objective_of(plain) == "pairwise-hinge"
    assert tenset[tenset.index("--model") + 1] == "segsum-mlp" and bench.objective_of(tenset) == "lambdarank"
    # the rival's own epochs come after the benchmark's, and argparse takes the last
    assert [tenset[i + 1] for i, a in enumerate(tenset) if a == "--epochs"] == ["10", "50"]
    # … so the tables' protocol line names it
    assert bench.epochs_phrase(10, ["segsum-mlp", "tenset-mlp"]) == "10 epochs (tenset-mlp: its recipe's 50)"
    assert bench.epochs_phrase(50, ["tenset-mlp"]) == "50 epochs" and bench.epochs_phrase(10, ["gcn"]) == "10 epochs"
    assert ap.parse_args([]).held_kinds is None                # default: every kind with > 5 records
    args.held_kinds = None
    assert {j["axis"] for j in bench.jobs(args, {"tasks": [{"kind": "dense", "valid": 30}]})} == {"network", "kind"}


def test_the_report_gives_the_seed_spread_of_the_topk_scores():
    from benchmarks.networks import report_section

    rows = [{"axis": "network", "held": "bert", "model": "segsum-mlp", "shipped": False, "seed": s, "tasks": 2,
             "kendall_tau": 0.4, "opa": 0.7, "top1_score": t1, "top5_score": 0.9, "top1_slowdown": 0.1,
             "top5_slowdown": 0.0, "top5_recall": None} for s, t1 in ((0, 0.5), (1, 0.7))]
    text = "\n".join(report_section({"rows": rows, "ceilings": {}, "dataset": "d", "protocol": {}}))
    assert "| 0.600 ± 0.141 / 0.900 ± 0.000 / 0.700 ± 0.000 |" in text
    assert "Leave one operator kind out" not in text          # a run without that axis shows no empty table
