"""The one sample type: validation and the collection file round trip."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extract.sample import GraphSample, SampleMeta, collection_arrays, load_samples, save_samples


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



# ---------------------------------------------------------------- the sample's meta
TYPED = SampleMeta(extractor="tir-ast-v2", target="llvm", source="hand", format="metaschedule",
                   database="/db/pass1", line=12, template="conv2d_NCHWc.x86", workload="conv2d_1x8",
                   index=7, config={"tile_ic": [-1, 8]}, networks=("bert", "resnet50"), kind="dense",
                   weight=3, tpugraphs={"kind": "tile"}, extra={"mod_hash": "abc", "knob_cut": 0})


def _write_old_form(path, metas):
    """A collection as earlier versions wrote it: each sample's meta one free JSON object."""
    samples = [_sample(name=f"C2/{i}") for i in range(len(metas))]
    arrays = collection_arrays(samples)
    header = {"groups": [s.group for s in samples], "names": [s.name for s in samples],
              "meta": list(metas), "info": {}}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez_compressed(path, **arrays)


def test_typed_meta_round_trips_through_a_collection_file(tmp_path):
    """Every typed field and `extra` come back equal and typed (networks a tuple), and the
    file holds the flat JSON object earlier versions wrote."""
    path = str(tmp_path / "c.npz")
    plain = SampleMeta(extractor=TYPED.extractor)
    save_samples(path, [_sample(meta=TYPED), _sample(name="C2/8", meta=plain)])
    first, second = load_samples(path)
    assert first.meta == TYPED and isinstance(first.meta.networks, tuple) and second.meta == plain
    with np.load(path) as z:
        stored = json.loads(bytes(z["header"]).decode())["meta"]
    assert stored[0] == {**TYPED.as_dict(), "networks": ["bert", "resnet50"]}
    assert stored[1] == {"extractor": "tir-ast-v2"}
    assert stored[0]["mod_hash"] == "abc" and "extra" not in stored[0]


def test_old_dict_meta_loads_into_typed_fields_and_extra(tmp_path):
    """A file of free-dict metas (the shipped samples' form) loads: the keys SampleMeta
    types become fields, every other key goes to `extra`."""
    old = {"template": "conv2d_NCHWc.x86", "workload": "conv2d_1x3x224x224_64x7x7_s2_p3", "index": 822,
           "config": {"tile_ic": [-1, 1], "unroll_kw": True}, "extractor": "tir-ast-v2", "trial": 3}
    _write_old_form(tmp_path / "old.npz", [old, {"networks": ["bert"], "kind": "dense", "weight": 2}])
    first, second = load_samples(str(tmp_path / "old.npz"))
    assert (first.meta.template, first.meta.index, first.meta.extractor) == ("conv2d_NCHWc.x86", 822, "tir-ast-v2")
    assert first.meta.config == {"tile_ic": [-1, 1], "unroll_kw": True} and first.meta.extra == {"trial": 3}
    assert first.meta.as_dict() == old
    assert (second.meta.networks, second.meta.kind, second.meta.weight) == (("bert",), "dense", 2)


@pytest.mark.parametrize("meta, message", [
    ({"index": "seven"}, "meta field 'index' must be an integer, not 'seven'"),
    ({"index": True}, "meta field 'index' must be an integer, not True"),
    ({"networks": "bert"}, "meta field 'networks' must be a list of strings"),
    ({"config": [1, 2]}, "meta field 'config' must be a JSON object"),
    ([1, 2], "meta must be a JSON object"),
])
def test_mistyped_meta_field_in_a_file_names_file_sample_and_field(tmp_path, meta, message):
    _write_old_form(tmp_path / "bad.npz", [{}, meta])
    with pytest.raises(ValueError, match=r"bad\.npz: sample 1: C2/1: " + message.replace("(", r"\(")):
        load_samples(str(tmp_path / "bad.npz"))


def test_unknown_or_misplaced_meta_field_is_refused():
    """A field SampleMeta does not have is an error where the meta is made (a typo is not
    silently kept); `extra` cannot hide a typed field; a mistyped value names the field."""
    with pytest.raises(TypeError, match="netwroks"):
        SampleMeta(netwroks=("bert",))
    with pytest.raises(ValueError, match=r"extra holds \['kind'\], typed fields"):
        SampleMeta(extra={"kind": "dense"})
    with pytest.raises(ValueError, match="C2/7: meta field 'line' must be an integer"):
        _sample(meta={"line": 1.5})
    assert SampleMeta.of({"kind": "dense", "x": 1}) == SampleMeta(kind="dense", extra={"x": 1})
    assert SampleMeta.of(TYPED) is TYPED and SampleMeta.of(None) == SampleMeta()

# ---------------------------------------------------------------- values a sample refuses
def _sample(**changes):
    fields = dict(edges=[[0, 1], [1, 2]], node_features=np.ones((3, 4)), node_types=[1, 2, 3],
                  runtimes=[1e-3], group="C2", name="C2/7", runtime_std=[1e-5],
                  vectors={"curve": np.ones((1, 5))})
    fields.update(changes)
    return GraphSample(**fields)


@pytest.mark.parametrize("changes, message", [
    (dict(node_types=[], node_features=np.ones((0, 4)), edges=[]), "C2/7: a graph of no nodes"),
    (dict(node_features=np.array([[1, 2, np.nan, 4]] * 3)), "C2/7: node_features holds 3 non-finite"),
    (dict(node_features=np.full((3, 4), np.inf)), "C2/7: node_features holds 12 non-finite"),
    (dict(node_features=np.full((3, 4), 1e39)), "node_features holds"),  # inf as float32
    (dict(vectors={"curve": np.array([[1, 2, -np.inf, 4, 5]])}), r"vectors\['curve'\] holds 1 non-finite"),
    (dict(config_features=np.array([[np.nan]])), "config_features holds"),
    (dict(runtimes=[np.inf]), "runtime inf is not a positive finite number"),
    (dict(runtimes=[0.0]), "runtime 0.0 is not a positive"),
    (dict(runtimes=[-1e-3]), "runtime -0.001"),
    (dict(runtime_std=[-1.0]), "runtime_std"),
    (dict(node_types=[1, -2, 3]), "negative node type -2"),
])
def test_non_finite_values_and_empty_graphs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        _sample(**changes)


def test_unmeasured_runtimes_stay_nan():
    assert np.isnan(_sample(runtimes=[np.nan], runtime_std=[np.nan]).runtimes).all()
    assert _sample(name="", group="").num_nodes == 3


@settings(max_examples=80, deadline=None)
@given(shape=st.tuples(st.integers(1, 6), st.integers(1, 5)), data=st.data())
def test_any_non_finite_feature_is_refused(shape, data):
    features = np.ones(shape)
    cells = data.draw(st.lists(st.tuples(st.integers(0, shape[0] - 1), st.integers(0, shape[1] - 1)),
                               min_size=1, max_size=4))
    for row, col in cells:
        features[row, col] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    edges = [[i, i + 1] for i in range(shape[0] - 1)]
    with pytest.raises(ValueError, match=r"^g/1: node_features holds \d+ non-finite values"):
        GraphSample(edges=edges, node_features=features, node_types=np.arange(shape[0]), runtimes=[1.0],
                    group="g", name="g/1")


def test_a_collection_holding_a_bad_sample_names_the_file_and_the_sample(tmp_path):
    """Values written by another tool (or a damaged array) are refused when read, naming
    the file and the sample, not as NaN weights or a reshape traceback later."""
    import zipfile

    good = _sample()
    path = tmp_path / "c.npz"
    save_samples(str(path), [good, _sample(name="C2/8")])
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["node_features"][4, 1] = np.nan  # in the second sample
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"c.npz: sample 1: C2/8: node_features holds 1 non-finite"):
        load_samples(str(path))
    arrays["node_features"][4, 1] = 1.0
    arrays["node_types_offsets"] = np.array([0, 3, 3])  # a 0-node graph
    arrays["node_features_offsets"] = np.array([0, 3, 3])
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"c.npz: sample 1: C2/8: a graph of no nodes"):
        load_samples(str(path))
    assert zipfile.is_zipfile(path)
