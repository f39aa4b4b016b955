"""The one sample type: validation and the collection file round trip."""
import numpy as np
import pytest

from extract.sample import GraphSample, load_samples, save_samples


def _layout_sample(name, configs, config_nodes, rng):
    n = 10
    return GraphSample(
        edges=[[i, i + 1] for i in range(n - 1)], node_features=rng.normal(size=(n, 5)),
        node_types=rng.integers(0, 4, n), runtimes=rng.uniform(1, 2, configs), group=name, name=name,
        node_config_ids=np.arange(config_nodes), vectors={"v": rng.normal(size=(configs, 3))},
        node_config_features=rng.normal(size=(configs, config_nodes, 18)), meta={"k": [1, 2]})


def test_round_trip_with_differing_config_node_counts(tmp_path):
    rng = np.random.default_rng(0)
    samples = [_layout_sample("a", 4, 3, rng), _layout_sample("b", 7, 5, rng)]
    save_samples(str(tmp_path / "c.npz"), samples, info={"x": 1})
    loaded = load_samples(str(tmp_path / "c.npz"))
    for before, after in zip(samples, loaded):
        assert after.name == before.name and after.meta == before.meta
        for key in ("edges", "node_features", "node_types", "runtimes", "node_config_ids"):
            np.testing.assert_array_equal(getattr(after, key), getattr(before, key))
        np.testing.assert_allclose(after.node_config_features, before.node_config_features, rtol=1e-6)
        np.testing.assert_allclose(after.vectors["v"], before.vectors["v"], rtol=1e-6)


def test_inconsistent_sample_is_rejected():
    with pytest.raises(ValueError, match="edge endpoint"):
        GraphSample(edges=[[0, 5]], node_features=np.zeros((2, 3)), node_types=[0, 1],
                    runtimes=[1.0], group="g", name="bad")
    with pytest.raises(ValueError, match="node_features shape"):
        GraphSample(edges=[], node_features=np.zeros((3, 3)), node_types=[0, 1],
                    runtimes=[1.0], group="g", name="bad")


def test_damaged_collection_names_the_file(tmp_path):
    path = tmp_path / "broken.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="broken.npz: not a readable sample collection"):
        load_samples(str(path))
