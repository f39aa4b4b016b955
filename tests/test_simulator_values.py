"""docs/RELIABILITY.md, class 1 on the simulator side: non-finite values never reach training or a
printed metric. Runtimes are checked where samples become a source; a non-finite loss
stops training (SGD loop and xgb) naming epoch, step and samples; a non-finite
prediction stops scoring; statistics that cannot be standardised are an error; means say
over how many workloads they are; metrics.json never holds NaN written as null."""
import copy
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import train
from simulator.data.batching import BatchSpec
from simulator.data.in_memory import SampleSource
from simulator.data.statistics import RunningStats
from simulator.engine import write_json
from simulator.metrics import evaluate, format_table
from simulator.models.costmodel import build_cost_model
from simulator.registry import SimulatorError
from simulator.train import build_parser, config_from_flags, validate

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TRAIN_GROUPS = {f"C{k}" for k in range(1, 7)}
BAD_RUNTIMES = [math.inf, -math.inf, 0.0, -1e-3, -5.0]


def config(**flags):
    base = vars(build_parser().parse_args(["--threads", "1", "--width", "8", "--depth", "1", "--epochs", "1",
                                           "--batch-size", "16"]))
    return validate(config_from_flags(dict(base, **flags)))


def poisoned(samples, index, value):
    out = [copy.copy(s) for s in samples]
    out[index].runtimes = np.array([value])
    return out


# ---------------------------------------------------------------- runtimes
@settings(max_examples=40, **SETTINGS)
@given(index=st.integers(0, 191), value=st.sampled_from(BAD_RUNTIMES))
def test_a_non_finite_or_non_positive_runtime_is_refused_naming_the_sample(synthetic_samples, index, value):
    samples = poisoned(synthetic_samples, index, value)
    with pytest.raises(SimulatorError) as e:
        SampleSource(samples)
    message = str(e.value)
    assert message.startswith(f"{samples[index].name}: runtime ") and "\n" not in message


def test_a_bad_runtime_in_a_test_workload_stops_the_run(tmp_path, synthetic_samples, capsys):
    """Before: an inf runtime in a test workload was dropped from l1/MAPE while τ used it."""
    from extract.sample import save_samples
    victim = next(i for i, s in enumerate(synthetic_samples) if s.group == "C3")
    for value in (math.inf, math.nan):
        folder = tmp_path / f"data-{value}"
        folder.mkdir()
        save_samples(str(folder / "d.npz"), poisoned(synthetic_samples, victim, value))
        code = train.main(["--data", str(folder), "--out", str(tmp_path / f"run-{value}"), "--threads", "1",
                           "--epochs", "1", "--width", "8", "--depth", "1"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].startswith("error: "), err
        assert synthetic_samples[victim].name in err[-1] or "runtime" in err[-1]
        assert not (tmp_path / f"run-{value}" / "metrics.json").exists()


# ---------------------------------------------------------------- training
def split_source(samples):
    source = SampleSource(samples)
    train_idx = [i for i, s in enumerate(samples) if s.group in TRAIN_GROUPS]
    val_idx = [i for i, s in enumerate(samples) if s.group in ("C7", "C8")]
    return source, source.subset(train_idx), source.subset(val_idx), train_idx


@settings(max_examples=12, **SETTINGS)
@given(pick=st.integers(0, 10 ** 6), value=st.sampled_from([math.nan, math.inf, -math.inf]),
       model=st.sampled_from(["gcn", "curve-mlp"]))
def test_training_stops_at_the_first_non_finite_loss_naming_epoch_step_and_sample(synthetic_samples, pick, value,
                                                                                  model):
    """A value that became non-finite after the statistics (the loop's own check, not the
    readers'): the fit stops at the step that meets it, naming the sample; nothing saved."""
    source, train_part, val_part, train_idx = split_source(synthetic_samples)
    cost_model = build_cost_model(config(model=model), source.info)
    cost_model.set_normalization(train_part.normalization(cost_model.batch_spec, 0))
    victim = pick % len(train_idx)
    source.items(cost_model.batch_spec)[train_idx[victim]].y[:] = value
    torch.manual_seed(0)
    with pytest.raises(SimulatorError) as e:
        cost_model.fit(train_part, val_part)
    message = str(e.value)
    assert message.startswith("epoch 1, step ") and ": the training loss is " in message
    assert synthetic_samples[train_idx[victim]].name in message and "\n" not in message


def test_xgb_refuses_a_non_finite_label_naming_the_sample(synthetic_samples):
    source, train_part, val_part, train_idx = split_source(synthetic_samples)
    cost_model = build_cost_model(config(model="xgb", xgb_rounds=5), source.info)
    source.items(cost_model.batch_spec)[train_idx[7]].y[:] = math.nan
    with pytest.raises(SimulatorError, match=rf"^{synthetic_samples[train_idx[7]].name}: log runtime holds"):
        cost_model.fit(train_part, val_part)


def test_an_online_update_stops_at_a_non_finite_loss(synthetic_samples):
    source, train_part, val_part, train_idx = split_source(synthetic_samples)
    cost_model = build_cost_model(config(model="gcn"), source.info)
    cost_model.set_normalization(train_part.normalization(cost_model.batch_spec, 0))
    source.items(cost_model.batch_spec)[train_idx[0]].y[:] = math.inf
    with pytest.raises(SimulatorError, match=r"^update step \d+: the training loss is ") as e:
        cost_model.update(train_part, steps=50)
    assert synthetic_samples[train_idx[0]].name in str(e.value)


# ---------------------------------------------------------------- scoring
class BrokenScorer:
    """Predicts 0 everywhere except one row (NaN / ±inf)."""

    def __init__(self, row, value, spec=BatchSpec()):
        self.row, self.value, self.batch_spec, self.seen = row, value, spec, 0

    def predict_batch(self, batch):
        out = np.zeros(len(batch.y))
        if self.seen <= self.row < self.seen + len(out):
            out[self.row - self.seen] = self.value
        self.seen += len(out)
        return out


@settings(max_examples=40, **SETTINGS)
@given(row=st.integers(0, 191), value=st.sampled_from([math.nan, math.inf, -math.inf]),
       batch_size=st.integers(1, 64))
def test_a_non_finite_prediction_never_reaches_a_metric_or_a_ranking(synthetic_samples, row, value, batch_size):
    source = SampleSource(synthetic_samples)
    with pytest.raises(SimulatorError) as e:
        source.evaluate(BrokenScorer(row, value), batch_size)
    assert str(e.value).startswith(f"{synthetic_samples[row].name}: the model predicts ")
    with pytest.raises(SimulatorError):
        list(source.rankings(BrokenScorer(row, value), batch_size))


def test_metrics_refuse_non_finite_inputs():
    t = np.log([1.0, 2.0, 3.0])
    with pytest.raises(SimulatorError, match="predicted log runtime is nan .* workload C2"):
        evaluate(np.array([0.1, np.nan, 0.2]), t, ["C1", "C2", "C2"])
    with pytest.raises(SimulatorError, match="measured log runtime is inf"):
        evaluate(t, np.array([0.0, np.inf, 1.0]), ["C1", "C1", "C1"])


# ---------------------------------------------------------------- means over how many
@settings(max_examples=60, **SETTINGS)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=8), seed=st.integers(0, 1000))
def test_each_mean_says_over_how_many_workloads(sizes, seed):
    rng = np.random.default_rng(seed)
    groups = [f"C{g + 1}" for g, n in enumerate(sizes) for _ in range(n)]
    t = np.log(rng.uniform(1e-4, 1e-2, len(groups)))
    p = t + rng.normal(0, 0.3, len(groups))
    out = evaluate(p, t, groups)
    for name, block in out.items():
        values = [v for v in block["per_workload"].values() if v is not None]
        assert block["count"] == len(values)
        assert (block["mean"] is None) == (not values)
        if values:
            assert block["mean"] == pytest.approx(float(np.mean(values)))
    tau = out["kendall_tau"]
    assert tau["count"] == sum(n >= 2 for n in sizes)
    table = format_table(out, "test")
    reduced = tau["count"] < len(sizes)
    assert (f"mean over {tau['count']} of {len(sizes)} workloads for kendall_tau" in table) == reduced


def test_metrics_json_and_the_table_say_over_how_many(tmp_path, synthetic_samples, capsys):
    """A test workload with one config has no τ: the run says `mean over 5 of 6`."""
    from extract.sample import save_samples
    keep = [s for s in synthetic_samples if s.group != "C5"] + [next(s for s in synthetic_samples if s.group == "C5")]
    (tmp_path / "d").mkdir()
    save_samples(str(tmp_path / "d" / "d.npz"), keep)
    assert train.main(["--data", str(tmp_path / "d"), "--out", str(tmp_path / "run"), "--threads", "1",
                       "--epochs", "1", "--width", "8", "--depth", "1"]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    tau = metrics["test"]["kendall_tau"]
    assert tau["count"] == 5 and len(tau["per_workload"]) == 6 and tau["per_workload"]["C5"] is None
    assert metrics["test"]["l1_log"]["count"] == 6
    assert "mean over 5 of 6 workloads for kendall_tau" in capsys.readouterr().out


# ---------------------------------------------------------------- statistics
@settings(max_examples=30, **SETTINGS)
@given(index=st.integers(0, 191), column=st.integers(0, 5), value=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_features_make_no_statistics(synthetic_samples, index, column, value):
    samples = [copy.copy(s) for s in synthetic_samples]
    samples[index].node_features = samples[index].node_features.copy()
    samples[index].node_features[0, column] = value
    source = SampleSource(samples)
    with pytest.raises(SimulatorError) as e:
        source.normalization(BatchSpec(), 0)
    assert str(e.value) == (f"{samples[index].name}: node feature {value} (column {column}) is not finite; the "
                            f"normalisation statistics cannot be computed")


def test_runtimes_without_variance_are_an_error(synthetic_samples):
    samples = [copy.copy(s) for s in synthetic_samples[:20]]
    for s in samples:
        s.runtimes = np.array([2e-3])
    with pytest.raises(SimulatorError, match=r"all 20 training runtimes are the same \(0.002 s\)"):
        SampleSource(samples).normalization(BatchSpec(), 0)


def test_streaming_statistics_refuse_non_finite_values():
    stats = RunningStats()
    stats.add("target", np.array([np.nan, 0.5, 1.0]))        # NaN runtime: unmeasured, left out
    with pytest.raises(SimulatorError, match=r"^g\.npz: config feature inf is not finite"):
        stats.add("config", np.array([[1.0, np.inf]]), "g.npz")
    with pytest.raises(SimulatorError, match="runtimes are the same"):
        same = RunningStats()
        same.add("target", np.full(8, 1.5))
        same.result()
    assert stats.count("target") == 2


# ---------------------------------------------------------------- writing
def test_write_json_refuses_nan_instead_of_writing_null(tmp_path):
    path = tmp_path / "metrics.json"
    with pytest.raises(SimulatorError, match=r"metrics.json: test\.kendall_tau\.mean is nan"):
        write_json(str(path), {"test": {"kendall_tau": {"mean": float("nan"), "count": 0}}})
    assert not path.exists()
    write_json(str(path), {"test": {"kendall_tau": {"mean": None, "count": 0}}, "x": np.float32(0.5)})
    assert json.loads(path.read_text()) == {"test": {"kendall_tau": {"mean": None, "count": 0}}, "x": 0.5}


def test_a_non_finite_prediction_of_a_tpugraphs_graph_is_named(tmp_path):
    from datasets import tpugraphs_collections as tg
    from simulator.data.synthetic import write_tpugraphs_collection
    from simulator.data.tpugraphs import TpuGraphsSource, tpugraphs_model_info
    write_tpugraphs_collection(str(tmp_path), "tile:xla", graphs=(3, 1, 1), seed=0)
    files = tg.open_split(str(tmp_path), "tile:xla", "train")
    source = TpuGraphsSource(files, config().data, tpugraphs_model_info("tile:xla", files))
    row = sum(f.num_configs for f in files[:1]) + 2      # a config of the second graph
    with pytest.raises(SimulatorError, match=rf"^{files[1].path}: the model predicts nan"):
        source.evaluate(BrokenScorer(row, math.nan, BatchSpec(graph=True, expand=True)), 4096)
