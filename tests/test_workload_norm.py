"""Node features normalised within each workload's config pool (simulator.workload_norm)."""
import copy

import numpy as np
import pytest

from extract.sample import GraphSample
from simulator.registry import SimulatorError
from simulator.workload_norm import check_workload_norm, normalise_workloads


def _sample(group: str, index: int, extents, types=(1, 2, 2)) -> GraphSample:
    """A three-node chain: node 0 of type 1 (a constant column), nodes 1-2 of type 2."""
    x = np.array([[7.0, 0.0]] + [[e, 1.0] for e in extents], np.float32)
    return GraphSample(edges=[[0, 1], [1, 2]], node_features=x, node_types=np.array(types),
                       runtimes=[1.0 + index], group=group, name=f"{group}/{index}")


def _pool(group: str, scale: float, offset: float):
    """Workload `group`: the loop extents of a small workload, scaled and shifted."""
    return [_sample(group, i, [scale * a + offset, scale * b + offset])
            for i, (a, b) in enumerate([(1, 2), (2, 4), (4, 8), (1, 8)])]


def _features(samples, group):
    return np.stack([s.node_features for s in samples if s.group == group])


def test_zscore_makes_the_workloads_tile_choices_alike():
    """Two workloads whose extents differ by scale and offset get the same features;
    each (workload, node type, column) has mean 0 and std 1, a constant column 0."""
    samples = _pool("small", 1.0, 0.0) + _pool("large", 4.0, 3.0)
    out = normalise_workloads(samples, "zscore")
    small, large = _features(out, "small"), _features(out, "large")
    assert np.allclose(small, large, atol=1e-6)
    loops = small[:, 1:, 0].ravel()
    assert loops.mean() == pytest.approx(0.0, abs=1e-6) and loops.std() == pytest.approx(1.0, rel=1e-5)
    assert np.all(small[:, 0, :] == 0.0) and np.all(small[:, 1:, 1] == 0.0)  # constant columns
    assert np.allclose(samples[0].node_features[1:, 0], [1.0, 2.0])  # the input samples unchanged
    assert [s.name for s in out] == [s.name for s in samples] and out[5].runtimes[0] == samples[5].runtimes[0]


def test_quantile_is_the_mid_rank_within_the_pool_per_node_type():
    """quantile: a monotone change of a workload's extents gives the same features; ties
    share their middle rank; a constant column is 0.5; node types are pooled apart."""
    samples = _pool("small", 1.0, 0.0) + [_sample("large", i, [a ** 2, b ** 2])
                                          for i, (a, b) in enumerate([(1, 2), (2, 4), (4, 8), (1, 8)])]
    out = normalise_workloads(samples, "quantile")
    small, large = _features(out, "small"), _features(out, "large")
    assert np.allclose(small, large)
    # type 2's extents in "small": 1 2 2 4 4 8 1 8 → 1 has ranks 1-2 of 8 (mid 1/8), 8 has 7-8
    assert small[0, 1, 0] == pytest.approx(1 / 8) and small[2, 2, 0] == pytest.approx(7 / 8)
    assert np.all(small[:, 0, :] == 0.5) and np.all(small[:, 1:, 1] == 0.5)
    retyped = normalise_workloads([_sample("w", 0, [1, 2], types=(1, 2, 3)), _sample("w", 1, [3, 4], types=(1, 2, 3))],
                                  "quantile")
    assert retyped[0].node_features[1, 0] == pytest.approx(0.25)  # among type 2's 1 and 3, not all four
    assert retyped[1].node_features[2, 0] == pytest.approx(0.75)


def test_none_leaves_the_features_and_unknown_names_are_refused():
    samples = _pool("small", 1.0, 0.0)
    assert all(a is b for a, b in zip(normalise_workloads(samples, "none"), samples))
    with pytest.raises(SimulatorError, match="unknown --workload-norm 'rank'"):
        normalise_workloads(samples, "rank")
    with pytest.raises(SimulatorError, match="reads no node features"):
        check_workload_norm("zscore", reads_graph=False)
    assert check_workload_norm("zscore") == "zscore"


def test_train_flag_is_validated_and_off_by_default():
    from simulator.train import build_parser, config_from_flags, validate

    def config(*argv):
        return validate(config_from_flags(vars(build_parser().parse_args(list(argv)))))
    assert config().data.workload_norm == "none"
    assert config("--model", "gcn-inv", "--workload-norm", "quantile").data.workload_norm == "quantile"
    with pytest.raises(SimulatorError, match="reads no node features"):
        config("--model", "xgb", "--workload-norm", "zscore")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--workload-norm", "rank"])


def test_a_workloads_features_depend_only_on_its_own_pool_and_the_checkpoint_keeps_the_option(
        synthetic_samples, tmp_path):
    """Transductive, per workload: a workload's prepared features do not change with the
    other workloads in the data; a model trained with the option ranks with it after
    save/load, and its predictions differ from the same weights without it."""
    from simulator.costmodel import CostModel, build_cost_model
    from simulator.samples_source import SampleSource
    from simulator.train import build_parser, config_from_flags, validate

    samples = list(synthetic_samples[:64])  # four workloads of 16 configs
    flags = dict(vars(build_parser().parse_args([])), model="gcn", width=16, depth=2, workload_norm="zscore")
    config = validate(config_from_flags(flags))
    source = SampleSource(samples, workload_norm="zscore")
    alone = SampleSource(samples[:16], source.info, workload_norm="zscore")
    spec = build_cost_model(config, source.info).batch_spec
    assert all(np.array_equal(a.x.numpy(), b.x.numpy()) for a, b in zip(source.items(spec)[:16], alone.items(spec)))
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(spec, 0))
    before = model.predict(source)
    model.save(str(tmp_path / "m.pt"))
    again = CostModel.load(str(tmp_path / "m.pt"))
    assert again.config.data.workload_norm == "zscore"
    assert np.allclose(again.predict(samples), before)  # a list of samples: the model's own option
    plain = copy.deepcopy(again)
    plain.config.data.workload_norm = "none"
    assert not np.allclose(plain.predict(samples), before)
